"""Shared plumbing for the SGEMM levels: the kernel signature, flat views and the launch.

Every SGEMM kernel takes (M, N, K, alpha, A, B, beta, C) with A, B, C as *flat* (1-D,
C-contiguous) float32 views of the row-major matrices, dimensions as int32 and alpha/beta as
float32. Why flat, and why the casts that appear in every kernel:

* Numba types integer arithmetic as 64-bit and indexes 2-D arrays through the array struct's
  strides, with a `idx < 0 ? idx + n : idx` wraparound select per signed index
  (numba-cuda#801). In an inner loop that costs ~30 SASS instructions per FMA instead of ~4.
* Unsigned indices skip the wraparound select; a 1-D view needs no stride multiply. So the
  kernels compute `row * K + col` offsets once, as uint64 (the only type that cannot
  overflow when M*K passes 2**31), and keep small in-tile coordinates as uint32.
* Mixing uint64 with a signed integer makes Numba fall back to float64, so integer literals
  that meet a uint64 are written `u64(1)`; mixing uint32 with int64 is harmless.
* Loops over K are `while` loops on an unsigned counter. In k1's dot product (sm_90 SASS of
  the hot loop) `for k in range(K)` costs 33 instructions per FFMA and `range(u64(K))` 25,
  because of the range iterator's state; `k = u64(0); while k < u64(K)` lets LLVM turn both
  offsets into pointer increments and unroll by 4: 7.5.
* alpha and beta arrive as float32 so that `alpha * acc` stays FFMA/FMUL, never DFMA.
"""
from __future__ import annotations

import numpy as np
from numba import config, cuda, float32, int32, uint32, uint64  # noqa: F401  (re-exported)

# importing ptx installs inline_copy: the inlined helpers below compile in half the time
from ..ptx import inline_copy  # noqa: F401
from ..util import ceil_div  # noqa: F401  (re-exported)

u32 = uint32
u64 = uint64

# (M, N, K, alpha, A, B, beta, C) as the kernels are specialised: see the module docstring.
SIGNATURE = (int32, int32, int32, float32, float32[::1], float32[::1], float32, float32[::1])

# Shared tiles are declared 16-byte aligned: with Numba's default (4, the float size) ptxas
# cannot merge four reads of a tile row into one LDS.128, which nvcc does for the seed's k3.
# The simulator rejects the alignment argument, hence None there.
SMEM_ALIGN = None if config.ENABLE_CUDASIM else 16

# gridDim.y and gridDim.z are limited to 65535 blocks; gridDim.x to 2**31 - 1.
MAX_GRID_Y = 65535


def grid_limit(grid: tuple[int, int]) -> str | None:
    """Reason string when a launch grid exceeds the hardware limits, else None."""
    gx, gy = grid
    if gy > MAX_GRID_Y:
        return f"needs {gy} blocks in grid y; CUDA allows at most {MAX_GRID_Y}"
    if gx > 2**31 - 1:
        return f"needs {gx} blocks in grid x; CUDA allows at most 2**31 - 1"
    return None


@cuda.jit(device=True, inline="always")
def store_c(C, c, value, alpha, beta):
    """C[c] = alpha*value + beta*C[c]; when beta == 0, C is only written (BLAS: NaN in C must not leak)."""
    if beta == 0:
        C[c] = alpha * value
    else:
        C[c] = alpha * value + beta * C[c]


def launch(kernel, grid, block, A, B, C, alpha, beta, stream=None):
    """Run `kernel` on device arrays A (M×K), B (K×N), C (M×N) through flat views.

    numba_gemm.runtime.launch issues it from the compiled kernel's cached handle (Numba's per-call
    dispatch costs ~50 µs of host time), or through Numba in the simulator."""
    from ..runtime.launch import launch_numba

    M, K = A.shape
    N = B.shape[1]
    args = (
        np.int32(M), np.int32(N), np.int32(K), np.float32(alpha),
        A.reshape(M * K), B.reshape(K * N), np.float32(beta), C.reshape(M * N),
    )
    launch_numba(kernel, grid, block, args, stream)
