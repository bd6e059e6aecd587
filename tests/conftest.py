"""Without a GPU, run every Numba kernel in the CUDA simulator (set before numba is imported)."""
import os

import pytest

from numba_gemm.runtime.gpu import has_gpu, use_simulator_if_no_gpu

SIMULATOR = use_simulator_if_no_gpu()
GPU = has_gpu() and not SIMULATOR

gpu_only = pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")


def sgemm_case(M, N, K, beta, seed=0):
    """Fresh float32 inputs (A, B, C, C_in): C_in is what the reference sees; with beta == 0
    the C handed to the level is NaN, which must never leak into the result (C is not read;
    gemm()'s NumPy path does not even upload it, the device path hands it to the kernel)."""
    import numpy as np

    from numba_gemm.measure import check

    A, B, C = check.random_inputs(M, N, K, rng=np.random.default_rng(seed))
    C_in = C.copy()
    if beta == 0:
        C[...] = np.nan
    return A, B, C, C_in


def exact_twice(level, M, N, K, alpha, beta, rng):
    """A level's run() on fresh device inputs, twice: exact against float64 and the same bits
    both times (beta == 0: C holds NaN, which must not reach the result)."""
    import numpy as np
    from numba import cuda

    from numba_gemm.measure import check
    from numba_gemm.registry import get

    A, B, C = check.random_inputs(M, N, K, np.float32, rng)
    C_in = C.copy() if beta != 0 else np.full((M, N), np.nan, np.float32)
    outs = []
    for _ in range(2):
        dC = cuda.to_device(C_in)
        get(level).run(cuda.to_device(A), cuda.to_device(B), dC, alpha, beta)
        outs.append(dC.copy_to_host())
    v = check.verify(outs[0], A, B, C, alpha, beta)
    assert v.ok, f"{level} M={M} N={N} K={K} a={alpha} b={beta}: {v}"
    assert outs[0].tobytes() == outs[1].tobytes()


def pytest_report_header(config):
    mode = "CUDA GPU" if GPU else "Numba CUDA simulator (no GPU: GPU-only tests skip)"
    return f"numba_gemm: running on {mode}"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in item.keywords and not GPU:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
