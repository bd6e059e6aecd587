#!/usr/bin/env python3
"""A small tile search for k7, k8 and k9: build the all-float4 kernel for each WarpTiling, check
it, time it, print one table, write the rows as JSON.

    python tools/k7_tiles.py --size 4096 --out tiles.json            # GPU: at most ~4 min
    python tools/k7_tiles.py --census                                # CPU: sm_90 SASS of each candidate
    NUMBA_ENABLE_CUDASIM=1 python tools/k7_tiles.py --size 8 --levels k7   # simulator smoke run
    python tools/k7_tiles.py --levels k9 --out wide.json                 # k9's code on wider tiles

Each k7/k8 candidate keeps 256 threads and 8×8 thread tiles of 4×4 pieces (so every inner-loop
shared load stays one conflict-free LDS.128, and the 64 accumulators fit the 128-register cap
of 2 blocks per SM) and varies what that leaves free: the K depth of a phase (8, 16, 32) and
the warp tile's shape (64×32 with lanes 8 × 4, or 32×64 with lanes 4 × 8). The k9 candidates
trade blocks per SM for registers: 8×16 or 16×8 thread tiles (128 accumulators) under launch
bounds of 256 threads per SM, so up to 255 registers a thread, as one block of 256 threads or
two of 128 (measured on the H200: none beat k9's own tiling, docs/RESULTS.md).

On a GPU every row is checked (64 random rows of C against a float64 reference) and timed
(CUDA events, median; inputs stay in L2 as far as they fit, as bench.py's default). Compile
time is part of the run: `--budget-s` stops starting new candidates once that many seconds
have passed, and the skipped ones are listed. Registers and local memory per thread come from
the compiled kernel (local memory > 0: it spilled).
"""
import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# In the order they run (the shipped tilings first, then the cheapest compiles, so a spent
# budget skips the costliest).
# (tile_m, tile_n, tile_k, warp_m, warp_n, lanes_n[, sm_threads]): WarpTiling's fields
SMALL = [
    (128, 128, 16, 64, 32, 4),     # k7's tiling
    (128, 128, 8, 64, 32, 4),      # k8's: half the K depth, half the staging registers, 2× the barriers
    (128, 128, 8, 32, 64, 8),
    (128, 128, 16, 32, 64, 8),     # warps 32×64: lanes 4 × 8, a warp reads 4 + 8 float4s per k
    (128, 128, 32, 64, 32, 4),     # twice the K depth: half the barriers, 2× the staging registers
    (128, 128, 32, 32, 64, 8),
]
WIDE = [
    (128, 128, 8, 64, 32, 4),          # k9's tiling: 2 blocks of 256 threads, 128 registers
    (128, 256, 8, 64, 64, 4, 256),     # k10's: 8×16 per thread, 1 block of 256 threads
    (64, 256, 8, 64, 64, 4, 256),      # 8×16 per thread, 2 blocks of 128 threads
    (128, 256, 8, 64, 64, 8, 256),     # 16×8 per thread (lanes 4 × 8), 1 block
    (64, 256, 8, 64, 64, 8, 256),      # 16×8 per thread, 2 blocks of 128 threads
]
CANDIDATES = {"k7": SMALL, "k8": SMALL, "k9": WIDE}

BUFFERS = {"k7": 1, "k8": 2, "k9": 2}          # copies of each shared tile
STATIC_SMEM = 48 * 1024                # bytes: the most a kernel may declare statically


def too_big(level, t):
    """Why tiling t cannot be built for level (its shared tiles exceed the static limit), or None."""
    need = BUFFERS[level] * t.tile_k * (t.a_stride + t.tile_n) * 4
    return f"{need} bytes of static shared memory (> {STATIC_SMEM})" if need > STATIC_SMEM else None


HEADER = (f"{'level':<5} {'tile':<11} {'warp':<6} {'lanes':<5} {'bl/SM':>5} {'regs':>4} {'local':>5} "
          f"{'check':<7} {'ms':>8} {'TFLOPS':>7} {'speedup':>7} {'compile s':>9}")


def label(cand):
    tm, tn, tk, wm, wn, ln = cand[:6]
    return f"{tm}x{tn}x{tk}", f"{wm}x{wn}", f"{32 // ln}x{ln}"


def tiling(cand):
    from numba_gemm.sgemm import _warptile

    return _warptile.WarpTiling(*cand)


def line(rec, base_ms):
    tile, warp, lanes = label(rec["tiling"])
    if rec.get("skipped"):
        return f"{rec['level']:<5} {tile:<11} {warp:<6} {lanes:<5} {'':>5} skipped: {rec['skipped']}"
    ms, ratio = rec.get("ms"), ""
    if ms and base_ms:
        ratio = f"{base_ms / ms:.3f}"
    t = f"{ms:8.3f} {rec['tflops']:7.1f}" if ms else f"{'-':>8} {'-':>7}"
    blocks = rec.get("blocks_per_sm", "")
    return (f"{rec['level']:<5} {tile:<11} {warp:<6} {lanes:<5} {blocks:>5} {rec['regs']:>4} {rec['local']:>5} "
            f"{rec['check']:<7} {t} {ratio:>7} {rec['compile_s']:>9.1f}")


def census(levels):
    """sm_90 SASS of every candidate, on the CPU: registers, spills, main-loop length."""
    os.environ["NUMBA_ENABLE_CUDASIM"] = "0"
    from numba import cuda

    from numba_gemm.explain import sass
    from numba_gemm.measure.twins import main_loop
    from numba_gemm.sgemm import _warptile, k7_warptile, k8_double_buffer, k9_unrolled
    from numba_gemm.sgemm._common import SIGNATURE

    mods = {"k7": k7_warptile, "k8": k8_double_buffer, "k9": k9_unrolled}
    print(f"{'level':<5} {'tile':<11} {'warp':<6} {'lanes':<5} {'regs':>4} {'spill':>5} "
          f"{'loop':>5} {'FFMA':>5} {'share':>6} {'compile s':>9}")
    out = []
    for level in levels:
        mod = mods[level]
        for cand in CANDIDATES[level]:
            t = tiling(cand)
            if too_big(level, t):
                print(f"{level:<5} {' '.join(label(cand))}: skipped, {too_big(level, t)}", flush=True)
                continue
            t0 = time.time()
            ptx, _ = cuda.compile_ptx(mod.make_kernel(t, True, True), SIGNATURE, cc=(9, 0),
                                      launch_bounds=(t.threads, _warptile.blocks_per_sm(t)))
            cubin, log = sass.link_ptx(ptx)
            (c,) = sass.census_cubin(cubin, level, log)
            loop = main_loop(sass.disassemble(cubin))
            ff = sum(op == "FFMA" for op in loop)
            rec = dict(level=level, tiling=cand, regs=c.registers, spill_bytes=c.spill_stores,
                       loop=len(loop), ffma=ff, compile_s=round(time.time() - t0, 1))
            out.append(rec)
            tile, warp, lanes = label(cand)
            print(f"{level:<5} {tile:<11} {warp:<6} {lanes:<5} {c.registers:>4} {c.spill_stores!s:>5} "
                  f"{len(loop):>5} {ff:>5} {ff / max(len(loop), 1):6.3f} {rec['compile_s']:>9.1f}", flush=True)
    return out


def search(levels, n, budget_s, reps):
    from numba import cuda

    from numba_gemm.measure import check
    from numba_gemm.measure.timing import bench
    from numba_gemm.ptx.intrinsics import SIMULATOR
    from numba_gemm.runtime import driver
    from numba_gemm.runtime.launch import loaded_function
    from numba_gemm.sgemm import _warptile, k7_warptile, k8_double_buffer, k9_unrolled
    from numba_gemm.sgemm._common import launch

    mods = {"k7": k7_warptile, "k8": k8_double_buffer, "k9": k9_unrolled}
    A, B, C = check.random_inputs(n, n, n, rng=np.random.default_rng(1))
    dA, dB = cuda.to_device(A), cuda.to_device(B)
    dC = cuda.to_device(np.full((n, n), np.nan, np.float32))   # poisoned: unwritten shows
    rows = np.arange(n) if n <= 64 else np.sort(np.random.default_rng(0).choice(n, 64, replace=False))
    t_start = time.time()
    out, base = [], {}                  # base: the shipped tiling's ms, per level
    print(HEADER, flush=True)
    for level in levels:
        for cand in CANDIDATES[level]:
            mod = mods[level]
            if time.time() - t_start > budget_s:
                out.append(dict(level=level, tiling=cand, skipped=f"time budget {budget_s:.0f} s spent"))
                print(line(out[-1], None), flush=True)
                continue
            t = tiling(cand)
            if too_big(level, t):
                out.append(dict(level=level, tiling=cand, skipped=too_big(level, t)))
                print(line(out[-1], None), flush=True)
                continue
            t0 = time.time()
            kern = _warptile.jit(mod.make_kernel, t, True, True)
            grid = mod.grid(n, n, t)

            def run():
                launch(kern, grid, t.block, dA, dB, dC, 1.0, 0.0)

            run()
            cuda.synchronize()
            compile_s = time.time() - t0
            regs = local = -1
            if not SIMULATOR:                       # the function the launch loaded
                fn = loaded_function(kern)
                regs, local = (driver.function_attribute(fn, attr) for attr in ("NUM_REGS", "LOCAL_SIZE_BYTES"))
            v = check.verify(dC.copy_to_host()[rows], A[rows], B, None, 1.0, 0.0)
            ms = None if SIMULATOR else bench(run, reps=reps).median_ms
            rec = dict(level=level, tiling=cand, blocks_per_sm=_warptile.blocks_per_sm(t), regs=regs, local=local,
                       check="ok" if v.ok else "WRONG", ok=bool(v.ok), ms=ms,
                       tflops=2 * n**3 / ms / 1e9 if ms else None, compile_s=round(compile_s, 1))
            out.append(rec)
            if t == mod.TILING and ms:         # the level's shipped tiling
                base[level] = ms
            print(line(rec, base.get(level)), flush=True)
            dC.copy_to_device(np.full((n, n), np.nan, np.float32))
    return out, base, time.time() - t_start


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=4096, help="M = N = K")
    p.add_argument("--levels", default="k7,k8")
    p.add_argument("--out", default=None, help="write the rows as JSON here")
    p.add_argument("--budget-s", type=float, default=180.0,
                   help="start no new candidate after this many seconds (default 180)")
    p.add_argument("--reps", type=int, default=None, help="timed calls per candidate (default: bench's)")
    p.add_argument("--census", action="store_true", help="no GPU: compile each candidate to sm_90 SASS")
    args = p.parse_args(argv)
    levels = args.levels.split(",")
    if any(lv not in CANDIDATES for lv in levels):
        p.error(f"--levels: some of {', '.join(CANDIDATES)}")
    if args.size < 1 or args.size % 4:
        p.error("--size: a positive multiple of 4 (the candidates are the all-float4 kernel)")

    if args.census:
        out, meta = census(levels), dict(mode="census")
    else:
        out, base, wall = search(levels, args.size, args.budget_s, args.reps)
        for lv in levels:
            ok = [r for r in out if r["level"] == lv and r.get("ms") and r["ok"]]
            if ok and lv in base:
                r = min(ok, key=lambda r: r["ms"])
                print(f"best {lv}: {'x'.join(map(str, r['tiling']))} {r['ms']:.3f} ms, "
                      f"{base[lv] / r['ms']:.3f}x the shipped tiling")
        print(f"wall {wall:.0f} s; speedup: the shipped tiling's time of the level / this row's")
        meta = dict(mode="gpu", size=args.size, wall_s=round(wall, 1))
        from numba import cuda
        from numba_gemm.ptx.intrinsics import SIMULATOR
        if not SIMULATOR:
            name = cuda.get_current_device().name
            meta["device"] = name.decode() if isinstance(name, bytes) else str(name)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(dict(meta, rows=out), f, indent=1)
    return 0 if all(r.get("ok", True) for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
