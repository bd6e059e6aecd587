"""gemm(): validate, move data if needed, and run one level. Everything is checked before launch."""
from __future__ import annotations

import numpy as np

from . import registry as _levels
from .hgemm._common import BF16


def _is_device(x) -> bool:
    # the simulator's device arrays (FakeCUDAArray) have no __cuda_array_interface__
    return hasattr(x, "__cuda_array_interface__") or type(x).__name__ == "FakeCUDAArray"


def _describe(x) -> tuple[tuple, np.dtype, bool]:
    """(shape, dtype, row-major contiguous) for a NumPy or __cuda_array_interface__ array."""
    if type(x).__name__ == "FakeCUDAArray":
        return tuple(x.shape), np.dtype(x.dtype), x.is_c_contiguous()
    if _is_device(x):
        cai = x.__cuda_array_interface__
        shape = tuple(cai["shape"])
        dtype = np.dtype(cai["typestr"])
        strides = cai.get("strides")
        contiguous = strides is None or tuple(strides) == _c_strides(shape, dtype.itemsize)
        return shape, dtype, contiguous
    if isinstance(x, np.ndarray):
        return x.shape, x.dtype, x.flags.c_contiguous
    raise TypeError(
        f"expected a NumPy array or a device array with __cuda_array_interface__, got {type(x).__name__}"
    )


def _as_device(x):
    """A Numba device array viewing x's memory (no copy)."""
    if type(x).__name__ == "FakeCUDAArray":
        return x
    from numba import cuda

    return cuda.as_cuda_array(x)


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def transfer_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an array travels to the device as: Numba has no bfloat16, so bf16 goes as its
    uint16 bit pattern (the native levels read the bits)."""
    return np.dtype(np.uint16) if dtype == BF16 else np.dtype(dtype)


def _validate(level, A, B, C, beta):
    on_device = [_is_device(x) for x in (A, B, C) if x is not None]
    if any(on_device) and not all(on_device):
        raise TypeError("A, B and C must all be host (NumPy) arrays or all be device arrays, not a mix")
    (sa, da, ca), (sb, db, cb) = _describe(A), _describe(B)
    if len(sa) != 2 or len(sb) != 2:
        raise ValueError(f"A and B must be 2-D matrices, got shapes {sa} and {sb}")
    (M, K), (K2, N) = sa, sb
    if K != K2:
        raise ValueError(f"inner dimensions differ: A is {M}x{K}, B is {K2}x{N}")
    if min(M, N, K) < 1:
        raise ValueError(f"M, N and K must be >= 1, got M={M}, N={N}, K={K}")
    names = ", ".join(d.name for d in level.dtypes)
    if da != db or da not in level.dtypes:
        raise TypeError(f"level {level.name} takes A and B of dtype {names}; got {da.name} and {db.name}")
    if not (ca and cb):
        raise ValueError("A and B must be C-contiguous (row-major); use np.ascontiguousarray or .copy()")
    if C is not None:
        sc, dc, cc = _describe(C)
        if sc != (M, N):
            raise ValueError(f"C must have shape {(M, N)} for A {sa} @ B {sb}, got {sc}")
        if dc != np.float32:
            raise TypeError(f"C must be float32, got {dc.name}")
        if not cc:
            raise ValueError("C must be C-contiguous (row-major)")
    elif beta != 0:
        raise ValueError("beta != 0 needs an input C")
    reason = level.unsupported(M, N, K)
    if reason:
        raise ValueError(f"level {level.name} cannot run M={M}, N={N}, K={K}: {reason}")
    return M, N, K, bool(on_device and on_device[0])


def gemm(A, B, C=None, *, alpha=1.0, beta=0.0, level="k6", stream=None):
    """C = alpha * A @ B + beta * C, row-major, on the GPU, with one level of the ladder.

    A (M×K) and B (K×N) are float32 for the SGEMM levels (k1..k6) and float16 or bfloat16 for
    the HGEMM levels (v7..v10; bfloat16 as NumPy arrays of ml_dtypes.bfloat16, since
    __cuda_array_interface__ has no bfloat16 type); C (M×N) is float32. NumPy inputs are copied to the device and
    the result comes back as NumPy (written into C when C is given). Device arrays (Numba,
    CuPy, PyTorch: anything with __cuda_array_interface__) are used in place and C is returned.
    When beta == 0, C is only written, never read.
    """
    lv = _levels.get(level)
    M, N, K, on_device = _validate(lv, A, B, C, beta)
    from numba import cuda

    if on_device:
        dA, dB = _as_device(A), _as_device(B)
        dC = _as_device(C) if C is not None else cuda.device_array((M, N), np.float32)
        lv.run(dA, dB, dC, float(alpha), float(beta), stream=stream)
        return C if C is not None else dC

    dA = cuda.to_device(A.view(transfer_dtype(A.dtype)), stream=stream or 0)
    dB = cuda.to_device(B.view(transfer_dtype(B.dtype)), stream=stream or 0)
    if C is not None and beta != 0:
        dC = cuda.to_device(C, stream=stream or 0)
    else:
        dC = cuda.device_array((M, N), np.float32, stream=stream or 0)
    lv.run(dA, dB, dC, float(alpha), float(beta), stream=stream)
    out = dC.copy_to_host(stream=stream or 0)
    if stream is not None:
        stream.synchronize()
    if C is None:
        return out
    C[...] = out
    return C

