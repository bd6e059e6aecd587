#!/usr/bin/env python3
"""Launch one level twice on random inputs (a warm-up, then the launch to profile), for ncu:

    ncu --clock-control none --launch-skip 1 --launch-count 1 \\
        --metrics lts__t_sector_hit_rate.pct,dram__bytes_read.sum \\
        python tools/run_once.py --level v9 --size 8192
"""
import argparse

import numpy as np

from numba_gemm import check, registry


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--level", required=True)
    p.add_argument("--size", type=int, default=4096)
    args = p.parse_args()
    from numba import cuda

    lv = registry.get(args.level)
    n = args.size
    dtype = np.float32 if lv.family == "sgemm" else np.float16
    A, B, _ = check.random_inputs(n, n, n, dtype=dtype)
    dA, dB = cuda.to_device(A), cuda.to_device(B)
    dC = cuda.device_array((n, n), np.float32)
    for _ in range(2):
        lv.run(dA, dB, dC, 1.0, 0.0)
    cuda.synchronize()


if __name__ == "__main__":
    main()
