"""Sweep tile configurations of the tile-configurable HGEMM levels on the GPU.

    python tools/hgemm_sweep.py --out sweep.json                 # the candidate sweep (GPU)
    python tools/hgemm_sweep.py --compile-only                   # registers/smem/spills, no GPU
    python tools/hgemm_sweep.py --ncu --configs base             # ncu L2 hit rate, v8 vs v9 at 8192

The levels come from the registry: every native level whose `run` takes a `config` (a
TileConfig) can be swept (today v8, v9, v10); --levels picks some. A level whose shipped
DEFINES carry -DHG_TMA_LAG (a TMA pipeline: v10) gets that option for every candidate too.

Sweep: every candidate (level, TileConfig) is first compiled by NVRTC in parallel worker
processes (no CUDA context there; cubins land in the on-disk cache), then, in this process:
the driver's register count and resident blocks per SM, one ragged shape against the float64
reference (alpha/beta, and beta == 0 with NaN-poisoned C), timings at --sizes (CUDA events
around each call, median of --reps after one warm-up: warm L2, as bench.py), and at 4096 the
largest difference from cuBLAS's result. A config that fails to compile or run is recorded and
the sweep goes on; only a broken CUDA context ends it (the JSON is written after every row).
Output: a table sorted by TFLOPS at the first size, and JSON at --out.

Why these candidates (the shipped tiles: v8 and v9 c128, v10 base; the table marks them):
  base       128x256x64, 4 stages, 2x4 warps of 64x64: v10's tile, 1 CTA of 8 warps per SM
             (2 warps per scheduler).
  base_fp    + fragment double-buffering: step kk+1's ldmatrix issued before step kk's 32 mma,
             so a warp hides its own ldmatrix latency instead of relying on its one neighbour.
  base_s3    3 stages: does the 4th stage buy anything (it costs 48 KB and nothing else)?
  t256       256x128, 4x2 warps of 64x64: the transposed tile (v10: 2 B boxes per stage, not 4).
  c128       128x128x64, 3 stages, 4 warps of 64x64, min 2 blocks: v8's and v9's tile. 2 CTAs
             per SM (97 KB each, <= 255 registers still fit). Same warps per SM as base, but one
             CTA's barrier, pipeline fill and epilogue overlap the other's main loop.
  c128_fp    the same with fragment double-buffering (it has the registers for it).
  c128_16w   128x128x64, 3 stages, 8 warps of 64x32, 2 CTAs (<= 128 registers): 16 warps per
             SM, at 1.5x the ldmatrix bytes per mma (6 per 16 mma instead of 8 per 32).
  w16        128x256x64, 4 stages, 16 warps (512 threads) of 64x32, <= 128 registers: 16
             warps per SM in one CTA.
  w16t       the same as 4x4 warps of 32x64 (with fragment double-buffering: no spills).
  w16_256    256x128x64, 4x4 warps of 64x32 (a few bytes of spills, in the element-wise
             fallback path only: the timed fast path is spill-free).
  lag1       (v10 only) the producer refills the stage read one iteration ago: 3 tiles in
             flight instead of 2, but warp 0 waits for the slowest warp.
BK stays 64: the 128-byte swizzle rows that v8's XOR walk and v10's SWIZZLE_128B boxes assume.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from numba_gemm.runtime.gpu import use_simulator_if_no_gpu  # noqa: E402

use_simulator_if_no_gpu()   # --compile-only on a machine without a GPU still imports the registry

from numba_gemm.hgemm._common import TileConfig  # noqa: E402

T = TileConfig
CANDIDATES = {
    "base": T(),
    "base_fp": T(frag_pipe=True),
    "base_s3": T(stages=3),
    "t256": T(bm=256, bn=128, warps_m=4, warps_n=2),
    "c128": T(bm=128, bn=128, stages=3, warps_m=2, warps_n=2, min_blocks=2),
    "c128_fp": T(bm=128, bn=128, stages=3, warps_m=2, warps_n=2, min_blocks=2, frag_pipe=True),
    "c128_16w": T(bm=128, bn=128, stages=3, warps_m=2, warps_n=4, min_blocks=2, frag_pipe=True),
    "w16": T(bm=128, bn=256, stages=4, warps_m=2, warps_n=8, frag_pipe=True),
    "w16t": T(bm=128, bn=256, stages=4, warps_m=4, warps_n=4, frag_pipe=True),
    "w16_256": T(bm=256, bn=128, stages=4, warps_m=4, warps_n=4, frag_pipe=True),
    "lag1": T(tma_lag=1),
}
TMA_ONLY = {"lag1"}                  # only levels that load by TMA have a refill lag
EXTRA = ("-DHG_NO_BF16",)            # the sweep times fp16 only
CHECK_SHAPE = (333, 776, 200)        # ragged in M; several tiles in M, N and K (last K tile partial)


def sweepable() -> dict:
    """{level name: module} of the native levels that take a tile configuration, in ladder order."""
    import inspect

    from numba_gemm.registry import registry

    return {name: lv.module for name, lv in registry().items()
            if lv.native and isinstance(getattr(lv.module, "CONFIG", None), TileConfig)
            and "config" in inspect.signature(lv.module.run).parameters}


def level_module(lv: str):
    return sweepable()[lv]


def uses_tma(lv: str) -> bool:
    """The level's pipeline takes HG_TMA_LAG: its shipped DEFINES carry it."""
    return any(d.startswith("-DHG_TMA_LAG=") for d in level_module(lv).DEFINES)


def defines(level: str, cfg: TileConfig) -> tuple[str, ...]:
    return cfg.defines(tma=uses_tma(level)) + EXTRA


def shipped(level: str, cfg: TileConfig) -> bool:
    """Is `cfg` the tile the level ships (the same compile options)?"""
    return defines(level, cfg) == defines(level, level_module(level).CONFIG)


def jobs(levels, names):
    out = []
    for name in names:
        for lv in levels:
            if name in TMA_ONLY and not uses_tma(lv):
                continue
            out.append((name, lv))
    return out


def compile_one(job):
    """Worker: NVRTC compile of one (config, level); registers, smem and spills from the cubin/log."""
    name, lv = job
    from numba_gemm.explain import sass
    from numba_gemm.runtime import nvrtc

    cfg = CANDIDATES[name]
    tma = uses_tma(lv)
    mod = level_module(lv)
    bad = cfg.problems(tma)
    if bad:
        return job, {"error": "; ".join(bad)}
    t0 = time.time()
    try:
        cubin = nvrtc.compile_variant(mod.SOURCE, defines(lv, cfg))
        log = nvrtc.compile_log(mod.SOURCE, defines=defines(lv, cfg))
    except Exception as e:  # noqa: BLE001 - recorded, the sweep goes on
        return job, {"error": f"{type(e).__name__}: {str(e)[-800:]}"}
    res = sass.kernel_resources(cubin).get(mod.KERNEL_NAMES["f16"], {})
    spills = [tuple(map(int, s)) for s in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)]
    return job, {"registers": res.get("registers"), "smem": cfg.smem(tma),
                 "spill_bytes": [sum(s[0] for s in spills), sum(s[1] for s in spills)],
                 "compile_s": round(time.time() - t0, 1)}


def precompile(todo, workers):
    ctx = mp.get_context("spawn")   # children never touch CUDA
    out = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as ex:
        for job, info in ex.map(compile_one, todo):
            out[job] = info
    return out


# ---------------------------------------------------------------------------- GPU part

def timed(fn, reps):
    from numba import cuda

    fn()
    cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = cuda.event(), cuda.event()
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(cuda.event_elapsed_time(s, e))
    return float(np.median(times))


def driver_info(lv, cfg):
    from numba_gemm.runtime import driver, nvrtc

    mod = level_module(lv)
    fn = nvrtc.function(mod.SOURCE, mod.KERNEL_NAMES["f16"], defines=defines(lv, cfg))
    regs = driver.function_attribute(fn, "NUM_REGS")
    blocks = driver.max_active_blocks(fn, cfg.threads, cfg.smem(tma=uses_tma(lv)))
    return {"registers": regs, "blocks_per_sm": blocks, "warps_per_sm": blocks * cfg.threads // 32}


def correctness(lv, cfg, rng):
    from numba import cuda

    from numba_gemm.measure import check

    M, N, K = CHECK_SHAPE
    out = []
    for alpha, beta in ((0.5, 3.0), (1.0, 0.0)):
        A, B, C = check.random_inputs(M, N, K, np.float16, rng)
        dC = cuda.to_device(C if beta else np.full_like(C, np.nan))
        level_module(lv).run(cuda.to_device(A), cuda.to_device(B), dC, alpha, beta, config=cfg, defines=EXTRA)
        v = check.verify(dC.copy_to_host(), A, B, C, alpha, beta, family="hgemm")
        out.append((v.ok, str(v)))
    return all(ok for ok, _ in out), "; ".join(s for _, s in out)


def context_alive() -> bool:
    from numba import cuda

    try:
        cuda.synchronize()
        return True
    except Exception:  # noqa: BLE001
        return False


def make_operands(sizes, rng):
    from numba import cuda

    from numba_gemm.measure.cublas import Cublas

    blas = Cublas()
    ops = {}
    for n in sizes:
        A = rng.uniform(-1, 1, (n, n)).astype(np.float16)
        B = rng.uniform(-1, 1, (n, n)).astype(np.float16)
        dA, dB = cuda.to_device(A), cuda.to_device(B)
        dC, dR = cuda.device_array((n, n), np.float32), cuda.device_array((n, n), np.float32)
        ms = timed(lambda: blas.gemm(dA, dB, dR, 1.0, 0.0, in_dtype=np.dtype(np.float16)), 10)
        ops[n] = {"A": dA, "B": dB, "C": dC, "ref": dR, "cublas_tflops": 2 * n**3 / ms / 1e9}
    return ops, blas


def sweep(a):
    from numba import cuda

    levels = a.levels.split(",") if a.levels else list(sweepable())
    names = a.configs.split(",") if a.configs else list(CANDIDATES)
    sizes = [int(s) for s in a.sizes.split(",")]
    todo = jobs(levels, names)
    t0 = time.time()
    compiled = precompile(todo, a.jobs)
    print(f"compiled {len(todo)} variants in {time.time() - t0:.0f} s", flush=True)
    if a.compile_only:
        rows = [{"config": n, "level": lv, "label": CANDIDATES[n].label(), "shipped": shipped(lv, CANDIDATES[n]),
                 "compile": compiled[(n, lv)]} for n, lv in todo]
        print_compile(rows)
        write(a.out, {"results": rows})
        return 0

    dev = cuda.get_current_device()
    name = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
    rng = np.random.default_rng()
    ops, _blas = make_operands(sizes, rng)
    doc = {"device": name, "sizes": sizes, "reps": a.reps, "check_shape": CHECK_SHAPE,
           "cublas_tflops": {str(n): ops[n]["cublas_tflops"] for n in sizes}, "results": []}
    print(f"device: {name}; cuBLAS GemmEx fp16->fp32: " +
          ", ".join(f"{n}: {ops[n]['cublas_tflops']:.1f} TF" for n in sizes), flush=True)
    for cname, lv in todo:
        cfg = CANDIDATES[cname]
        row = {"config": cname, "level": lv, "label": cfg.label(), "shipped": shipped(lv, cfg),
               "defines": list(defines(lv, cfg)),
               "compile": compiled[(cname, lv)], "tflops": {}}
        doc["results"].append(row)
        if "error" in row["compile"]:
            print(f"{lv:4} {cname:9} compile failed: {row['compile']['error'][:200]}", flush=True)
            write(a.out, doc)
            continue
        try:
            row["driver"] = driver_info(lv, cfg)
            ok, detail = correctness(lv, cfg, rng)
            row["check_ok"], row["check"] = ok, detail
            for n in sizes:
                o = ops[n]
                ms = timed(lambda: level_module(lv).run(o["A"], o["B"], o["C"], 1.0, 0.0, config=cfg,
                                                        defines=EXTRA), a.reps)
                row["tflops"][str(n)] = 2 * n**3 / ms / 1e9
                if n == min(sizes):   # full-size agreement with cuBLAS (both fp32 accumulate)
                    diff = np.abs(o["C"].copy_to_host() - o["ref"].copy_to_host())
                    row["max_abs_diff_vs_cublas"] = float(diff.max())
            print(fmt_row(row, sizes), flush=True)
        except Exception as e:  # noqa: BLE001 - recorded; only a dead context stops the sweep
            row["error"] = f"{type(e).__name__}: {str(e)[:500]}"
            print(f"{lv:4} {cname:9} ERROR {row['error'][:200]}", flush=True)
            traceback.print_exc(limit=2, file=sys.stdout)
            if not context_alive():
                print("CUDA context is broken; stopping the sweep here.", flush=True)
                write(a.out, doc)
                return 1
        write(a.out, doc)
    print_table(doc, sizes)
    return 0


def fmt_row(r, sizes):
    c, d = r.get("compile", {}), r.get("driver", {})
    tf = " ".join(f"{r['tflops'].get(str(n), float('nan')):7.1f}" for n in sizes)
    sp = c.get("spill_bytes", [0, 0])
    return (f"{r['level']:4} {r['config'] + ('*' if r.get('shipped') else ''):9} {r['label']:38} {tf}  "
            f"{'ok' if r.get('check_ok') else 'FAIL':4} regs {d.get('registers', c.get('registers'))!s:>3} "
            f"smem {c.get('smem', 0) // 1024:3d}K blk/SM {d.get('blocks_per_sm', '?')} "
            f"warps/SM {d.get('warps_per_sm', '?')}" + (f" spill {sp[0]}/{sp[1]}" if any(sp) else ""))


def print_table(doc, sizes):
    rows = [r for r in doc["results"] if r.get("tflops")]
    rows.sort(key=lambda r: -r["tflops"].get(str(sizes[0]), 0))
    print(f"\nsorted by TFLOPS at {sizes[0]} (cuBLAS {doc['cublas_tflops'][str(sizes[0])]:.1f}; * = the level's shipped tile):")
    print(f"{'lvl':4} {'config':9} {'tile':38} " + " ".join(f"{n:>7}" for n in sizes) + "  check / resources")
    for r in rows:
        print(fmt_row(r, sizes))
    bad = [r for r in doc["results"] if not r.get("tflops") or not r.get("check_ok", False)]
    for r in bad:
        print(f"not timed or wrong: {r['level']} {r['config']}: {r.get('error') or r.get('check') or r['compile'].get('error')}")


def print_compile(rows):
    print(f"{'lvl':4} {'config':9} {'tile':38} {'regs':>4} {'smem':>7} {'spill st/ld':>11}")
    for r in rows:
        c = r["compile"]
        if "error" in c:
            print(f"{r['level']:4} {r['config']:9} {r['label']:38} ERROR {c['error'][:160]}")
            continue
        sp = c["spill_bytes"]
        name = r["config"] + ("*" if r.get("shipped") else "")
        print(f"{r['level']:4} {name:9} {r['label']:38} {c['registers']:>4} {c['smem']:>7} {sp[0]:>5}/{sp[1]:<5}")


def write(path, doc):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------- ncu

def profile(a):
    """One launch per level at each size (what ncu measures); no checks, no cuBLAS."""
    from numba import cuda

    cfg = CANDIDATES[(a.configs or "base").split(",")[0]]
    rng = np.random.default_rng()
    for n in [int(s) for s in a.sizes.split(",")]:
        A = cuda.to_device(rng.uniform(-1, 1, (n, n)).astype(np.float16))
        B = cuda.to_device(rng.uniform(-1, 1, (n, n)).astype(np.float16))
        C = cuda.device_array((n, n), np.float32)
        for lv in (a.levels or "v8,v9").split(","):
            level_module(lv).run(A, B, C, 1.0, 0.0, config=cfg, defines=EXTRA)
            cuda.synchronize()
            print(f"profiled {lv} {cfg.label()} at {n}", flush=True)
    return 0


def ncu(a):
    conf = (a.configs or "base").split(",")[0]
    levels = a.levels or "v8,v9"
    size = a.sizes.split(",")[-1] if a.sizes != "8192,4096" else "8192"
    regex = "|".join(level_module(lv).KERNEL_NAMES["f16"] for lv in levels.split(","))
    cmd = ["ncu", "--clock-control", "none", "--metrics",
           "lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum",
           "-k", f"regex:{regex}", sys.executable, os.path.abspath(__file__), "--profile",
           "--levels", levels, "--configs", conf, "--sizes", size]
    print("ncu command (L2 hit rate and DRAM bytes, " + " vs ".join(levels.split(",")) + f" at {size}):")
    print("  " + " ".join(f"'{c}'" if "|" in c else c for c in cmd), flush=True)
    if shutil.which("ncu") is None:
        print("ncu is not on PATH here: run the command above where it is.")
        return 0
    return subprocess.run(cmd).returncode


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--levels", default="", help="comma list of levels (default: every sweepable level)")
    p.add_argument("--configs", default="", help=f"comma list of {', '.join(CANDIDATES)} (default: all)")
    p.add_argument("--sizes", default="8192,4096", help="square sizes; the table sorts by the first")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 1), help="parallel NVRTC compiles")
    p.add_argument("--out", default="", help="JSON results path")
    p.add_argument("--compile-only", action="store_true", help="NVRTC only: registers, smem, spills")
    p.add_argument("--ncu", action="store_true", help="print (and run, if ncu is on PATH) the L2 profile command")
    p.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    for n in (a.configs.split(",") if a.configs else []):
        if n not in CANDIDATES:
            p.error(f"unknown config {n!r}; known: {', '.join(CANDIDATES)}")
    for lv in (a.levels.split(",") if a.levels else []):
        if lv not in sweepable():
            p.error(f"level {lv!r} takes no tile configuration; sweepable: {', '.join(sweepable())}")
    if a.ncu:
        return ncu(a)
    if a.profile:
        return profile(a)
    return sweep(a)


if __name__ == "__main__":
    sys.exit(main())
