"""Check and time the HGEMM levels v7..v10 on the GPU against cuBLAS (run by hand on the card).

    python tools/hgemm_gpu_check.py [--levels v7,v8,v9,v10] [--sizes 4096,8192] [--reps 20]

For each level and dtype (fp16, bf16): several ragged shapes against the float64 reference
(check.verify, family hgemm, alpha/beta and beta == 0 with NaN-poisoned C), then square timings:
CUDA events around each call, median of --reps after a warm-up, TFLOPS = 2·M·N·K / t, and the
same for cuBLAS GemmEx (fp16/bf16 in, fp32 out, COMPUTE_32F) on the same buffers. A level that
fails is reported and the run goes on.
"""
import argparse
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from numba import cuda  # noqa: E402

from numba_gemm import check  # noqa: E402
from numba_gemm.cublas import Cublas  # noqa: E402
from numba_gemm.hgemm import _common as cm  # noqa: E402

SHAPES = [(1, 1, 1), (129, 257, 65), (300, 520, 72), (37, 1031, 200), (33, 40, 13), (1000, 264, 1024)]


def bits(x):
    return x.view(np.uint16) if x.dtype == cm.BF16 else x


def correctness(lv, dtype, rng):
    bad = []
    for M, N, K in SHAPES:
        if lv.unsupported(M, N, K):
            continue
        for alpha, beta in ((0.5, 3.0), (1.0, 0.0)):
            A, B, C = check.random_inputs(M, N, K, dtype, rng)
            dC = cuda.to_device(C if beta else np.full_like(C, np.nan))
            lv.run(cuda.to_device(bits(A)), cuda.to_device(bits(B)), dC, alpha, beta)
            v = check.verify(dC.copy_to_host(), A, B, C, alpha, beta, family="hgemm")
            if not v.ok:
                bad.append(f"{M}x{N}x{K} b={beta}: {v}")
    return bad


def timed(fn, reps):
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--levels", default="v7,v8,v9,v10")
    p.add_argument("--sizes", default="4096,8192")
    p.add_argument("--reps", type=int, default=20)
    a = p.parse_args()
    from numba_gemm.registry import registry

    levels = [registry()[n].module for n in a.levels.split(",")]
    sizes = [int(s) for s in a.sizes.split(",")]
    rng = np.random.default_rng()
    blas = Cublas()
    dtypes = [np.float16] + ([cm.BF16] if cm.BF16 is not None else [])
    print(f"device: {cuda.get_current_device().name.decode() if isinstance(cuda.get_current_device().name, bytes) else cuda.get_current_device().name}")
    head = f"{'level':6} {'dtype':9} {'check':28}" + "".join(f" {f'{n} TF':>9} {'%cuBLAS':>8}" for n in sizes)
    print(head)
    base = {}
    for dtype in dtypes:
        for n in sizes:
            A, B, _ = check.random_inputs(n, n, n, dtype, rng)
            dA, dB = cuda.to_device(bits(A)), cuda.to_device(bits(B))
            dC = cuda.device_array((n, n), np.float32)
            ms = timed(lambda: blas.gemm(dA, dB, dC, 1.0, 0.0, in_dtype=np.dtype(dtype)), a.reps)
            base[(np.dtype(dtype).name, n)] = (dA, dB, dC, 2 * n**3 / ms / 1e9)
        row = f"{'cuBLAS':6} {np.dtype(dtype).name:9} {'-':28}"
        for n in sizes:
            row += f" {base[(np.dtype(dtype).name, n)][3]:9.1f} {100.0:7.1f}%"
        print(row, flush=True)
    for lv in levels:
        for dtype in dtypes:
            name = np.dtype(dtype).name
            row = f"{lv.LEVEL:6} {name:9} "
            try:
                bad = correctness(lv, dtype, rng)
                row += f"{'ok' if not bad else 'FAIL ' + str(len(bad)):28}"
                for n in sizes:
                    dA, dB, dC, ref_tf = base[(name, n)]
                    ms = timed(lambda: lv.run(dA, dB, dC, 1.0, 0.0), a.reps)
                    tf = 2 * n**3 / ms / 1e9
                    row += f" {tf:9.1f} {100 * tf / ref_tf:7.1f}%"
                print(row, flush=True)
                for b in bad:
                    print("    ", b)
            except Exception as e:  # noqa: BLE001 - report and go on to the next level
                print(row + f"ERROR {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)
                traceback.print_exc(limit=3, file=sys.stdout)
                try:
                    cuda.synchronize()
                except Exception:  # noqa: BLE001 - a sticky error ends the run: say so
                    print("CUDA context is broken after this failure; stopping.")
                    return 1
    if "v9" in a.levels:
        from numba_gemm.hgemm import v9_supertile

        for n in sizes:
            print(f"v9 super-tile at {n}: {v9_supertile.tile_order(n, n, n)} (L2 {cm.l2_cache_bytes() >> 20} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
