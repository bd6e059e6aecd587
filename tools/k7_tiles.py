#!/usr/bin/env python3
"""A small tile search for k7 (and k8 on the same tilings): build the all-float4 kernel for
each WarpTiling, check it, time it, print a table. Needs a GPU.

    python tools/k7_tiles.py --size 4096 [--levels k7,k8] [--json out.json]

Each candidate keeps 256 threads and 8×8 thread tiles of 4×4 pieces (so every inner-loop
shared load stays one conflict-free LDS.128) and varies what that leaves free: the K depth
of a phase and the warp tile's shape.
"""
import argparse
import json
import sys
import time

import numpy as np

CANDIDATES = [
    # (tile_m, tile_n, tile_k, warp_m, warp_n, lanes_n)
    (128, 128, 16, 64, 32, 4),     # the shipped tiling
    (128, 128, 8, 64, 32, 4),      # half the K depth: half the staging registers, 2× the barriers
    (128, 128, 16, 32, 64, 8),     # warps 32×64: lanes 4 × 8, a warp reads 4 + 8 float4s per k
]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--levels", default="k7")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    from numba import cuda

    from numba_gemm import check
    from numba_gemm.sgemm import _k7_parts, k7_warptile, k8_double_buffer
    from numba_gemm.sgemm._common import launch
    from numba_gemm.timing import bench

    mods = {"k7": k7_warptile, "k8": k8_double_buffer}
    n = args.size
    A, B, C = check.random_inputs(n, n, n)
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.device_array((n, n), np.float32)
    rows = np.sort(np.random.default_rng(0).choice(n, 64, replace=False))
    out = []
    for level in args.levels.split(","):
        mod = mods[level]
        for cand in CANDIDATES:
            t = _k7_parts.WarpTiling(*cand)
            t0 = time.time()
            kern = mod.jit(t, True, True)
            grid = mod.grid(n, n, t)

            def run():
                launch(kern, grid, t.block, dA, dB, dC, 1.0, 0.0)

            run()
            cuda.synchronize()
            compile_s = time.time() - t0
            got = dC.copy_to_host()[rows]
            ok = check.verify(got, A[rows], B, None, 1.0, 0.0).ok
            ms = bench(run).median_ms
            rec = dict(level=level, tiling=cand, ok=bool(ok), ms=ms, tflops=2 * n**3 / ms / 1e9,
                       compile_s=round(compile_s, 1))
            out.append(rec)
            print(f"{level} {'x'.join(map(str, cand[:3]))} warp {cand[3]}x{cand[4]} lanes_n {cand[5]}: "
                  f"{'ok' if ok else 'WRONG'} {ms:.3f} ms {rec['tflops']:.1f} TFLOPS "
                  f"(compile {compile_s:.0f} s)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if all(r["ok"] for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
