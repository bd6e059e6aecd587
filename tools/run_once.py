#!/usr/bin/env python3
"""Launch levels on fresh random inputs, for a profiler or a memory checker, and check the result.

Each level runs twice (a warm-up, then the launch to profile) with beta = 0, then once with
beta != 0 (the C-reading epilogue), and the last result is compared with the float64
reference. The exit status is 1 if any result is wrong.

    ncu --clock-control none --launch-skip 1 --launch-count 1 \\
        --metrics lts__t_sector_hit_rate.pct,dram__bytes_read.sum \\
        python tools/run_once.py --level v9 --size 8192
    compute-sanitizer --tool racecheck python tools/run_once.py --level v8,v10 --shape 127,200,72

A level may carry run() keywords as bench.py takes them, e.g. v13:bm=128:bn=128.

`--level cublas` runs the baseline (cuBLAS SGEMM for --dtype float32, GemmEx otherwise) the
same way, so its kernel can be profiled beside the levels.
"""
import argparse
import sys

import numpy as np

from numba_gemm.measure import check
from numba_gemm.measure.bench import parse_levels


class Baseline:
    """cuBLAS behind the level interface this script uses (name, family, run)."""
    name = "cublas"

    def __init__(self, dtype_name: str):
        from numba_gemm.hgemm._common import DTYPES
        from numba_gemm.measure.cublas import Cublas

        self.dtype = next(d for d in map(np.dtype, (np.float32,) + DTYPES) if d.name == dtype_name)
        self.family = "sgemm" if self.dtype == np.float32 else "hgemm"
        self.blas = Cublas()

    def run(self, A, B, C, alpha, beta):
        self.blas.gemm(A, B, C, alpha, beta, in_dtype=self.dtype)


def served_shape(lv, M: int, N: int, K: int) -> tuple[int, int, int]:
    """The shape itself, or the nearest one a level serves (said on stdout), so that a list of
    levels runs on one shape: a few-row level (v11gv, v11t, k6gv) at the largest odd M it takes,
    a level for unaligned rows (k8p, v11p) at N + 1 and K + 1."""
    if lv.unsupported(M, N, K) is None:
        return M, N, K
    tries = [(m, N, K) for m in (63, 7, 1) if m < M] + [(M, N + 1, K + 1)]
    for shape in tries:
        if lv.unsupported(*shape) is None:
            print(f"{lv.name}: {M}x{N}x{K} refused ({lv.unsupported(M, N, K)}); runs at "
                  + "x".join(map(str, shape)))
            return shape
    return M, N, K  # refused everywhere: run() says why


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--level", required=True, help="a level name (with run() keywords: v13:bm=128:bn=128) or a comma list")
    p.add_argument("--size", type=int, default=4096, help="M = N = K (default %(default)s)")
    p.add_argument("--shape", help="M,N,K (overrides --size)")
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"],
                   help="input type of the HGEMM levels and of cublas (default %(default)s)")
    args = p.parse_args()
    from numba import cuda

    from numba_gemm.api import transfer_dtype

    shape = tuple(int(x) for x in args.shape.split(",")) if args.shape else (args.size,) * 3
    wrong = []
    for name in args.level.split(","):
        M, N, K = shape
        if name == "cublas":
            lv = Baseline(args.dtype)
            dtype = lv.dtype
        else:
            (lv,) = parse_levels(name)
            dtype = np.dtype(np.float32) if lv.family == "sgemm" else next(
                d for d in lv.dtypes if d.name == args.dtype)
            M, N, K = served_shape(lv, M, N, K)
        A, B, C = check.random_inputs(M, N, K, dtype=dtype)
        dA = cuda.to_device(A.view(transfer_dtype(dtype)))
        dB = cuda.to_device(B.view(transfer_dtype(dtype)))
        dC = cuda.to_device(C)
        for _ in range(2):
            lv.run(dA, dB, dC, 1.0, 0.0)
        dC = cuda.to_device(C)
        lv.run(dA, dB, dC, 0.5, -1.5)
        verdict = check.verify(dC.copy_to_host(), A, B, C, 0.5, -1.5, lv.family)
        print(f"{lv.name} {M}x{N}x{K} {dtype.name}: {'ok' if verdict.ok else 'WRONG'} ({verdict})")
        if not verdict.ok:
            wrong.append(lv.name)
    cuda.synchronize()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
