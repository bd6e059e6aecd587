"""numba_gemm: a GEMM ladder from a naive loop to cuBLAS speed, in Python.

    import numba_gemm
    C = numba_gemm.gemm(A, B)                    # the fastest level for A's dtype and shape
    C = numba_gemm.gemm(A, B, level="k6")        # one level: float32, Numba kernels
    C = numba_gemm.gemm(A16, B16, level="v10")   # float16/bfloat16 in, float32 out, NVRTC kernels
    p = numba_gemm.plan(A, B, C); p.execute()    # prepare once, launch many times
    for lv in numba_gemm.levels(): print(lv.name, lv.title, lv.delta)

Importing this package does not import Numba; that happens at the first gemm()/levels() call,
so a program can still choose the CUDA simulator first (use_simulator_if_no_gpu(), before
anything imports numba.cuda; after that it raises NoGPUError on a machine without a GPU).
"""
from .runtime.gpu import NoGPUError, use_simulator_if_no_gpu

__version__ = "0.1.0"


def gemm(A, B, C=None, *, alpha=1.0, beta=0.0, level="auto", stream=None, out_dtype=None):
    """C = alpha * A @ B + beta * C with one level of the ladder (details: numba_gemm.api.gemm).
    C is float32 unless given in, or asked for as (out_dtype), A's float16/bfloat16."""
    from .api import gemm as _gemm

    return _gemm(A, B, C, alpha=alpha, beta=beta, level=level, stream=stream, out_dtype=out_dtype)


def plan(A, B, C=None, *, alpha=1.0, beta=0.0, level="auto", stream=None, out_dtype=None):
    """Validate and prepare C = alpha * A @ B + beta * C once; .execute() runs it (numba_gemm.api.Plan)."""
    from .api import plan as _plan

    return _plan(A, B, C, alpha=alpha, beta=beta, level=level, stream=stream, out_dtype=out_dtype)


def levels():
    """All levels in ladder order: Level records with name, title, delta, dtypes, family."""
    from .registry import registry

    return list(registry().values())


__all__ = ["gemm", "plan", "levels", "use_simulator_if_no_gpu", "NoGPUError", "__version__"]
