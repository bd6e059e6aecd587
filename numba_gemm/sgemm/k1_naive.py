"""k1 — naive: one thread per output, threadIdx.x mapped to ROWS (the seed's one-letter bug).

Each thread walks one row of A and one column of B. Because consecutive threads of a warp
(consecutive threadIdx.x) take consecutive *rows*, the warp's 32 loads of A land K floats
apart: 32 memory requests per load of A, plus 1 (broadcast) for B — 33 requests per FMA.
The bytes ledger cannot see this; the requests ledger can. k2 fixes the mapping.
At N = 4096 the stride is also a power of two, which adds a partition-camping penalty
(the seed: k1/k2 = 8.2× at 4096 but 2.4× at 4097).

The K loop is unrolled by 4 by hand, as nvcc unrolls the seed's K1/K2, so that the Numba and
the CUDA C kernels issue as many instructions per FMA (about 4.4 in the hot loop: two
LDG, one FFMA, one IMAD.WIDE.U32 to step B, plus a share of the loop bookkeeping); k2
keeps the same loop.
"""
import numpy as np
from numba import cuda

from ._common import SIGNATURE, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k1"
PARENT = None
TITLE = "naive (x mapped to rows)"
DELTA = "k1 = one thread per C element; threadIdx.x walks rows, so A loads are uncoalesced"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDG.E", "FFMA", "STG.E")

BLOCK = (32, 32)           # (threads_x, threads_y)
TILE_M, TILE_N = 32, 32    # output tile per block
TILE_K = 1                 # no shared-memory phases: every operand comes from global memory
THREAD_M, THREAD_N = 1, 1  # outputs per thread


def grid(M: int, N: int) -> tuple[int, int]:
    # blockIdx.x runs over rows, as in the seed.
    return (ceil_div(M, TILE_M), ceil_div(N, TILE_N))


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    row = u32(cuda.blockIdx.x * TILE_M + cuda.threadIdx.x)   # x -> row: the bug
    col = u32(cuda.blockIdx.y * TILE_N + cuda.threadIdx.y)
    if row < u32(M) and col < u32(N):
        # Element offsets a (row of A) and b (column of B); the K loop is unrolled by 4.
        a = u64(row) * u64(u32(K))
        b = u64(col)
        acc = float32(0.0)
        k = u32(0)
        # K % 4 single steps first, then steps of four that end exactly at K. With the
        # remainder first, a and b are dead after the unrolled loop and become bare pointer
        # increments. u64(u32(N)) is written inside the loops on purpose: hoisted into the
        # loop's preheader, the zero-extension sits next to the pointer stride N*4, which
        # then compiles to mul.wide.u32 and one IMAD.WIDE.U32 per B step. Computed once above
        # the loops (`n = ...`), it costs a two-instruction 64-bit add per step instead.
        while k < (u32(K) & u32(3)):
            acc += A[a] * B[b]
            a += u64(1)
            b += u64(u32(N))
            k += u32(1)
        while k != u32(K):
            acc += A[a] * B[b]
            b += u64(u32(N))
            acc += A[a + u64(1)] * B[b]
            b += u64(u32(N))
            acc += A[a + u64(2)] * B[b]
            b += u64(u32(N))
            acc += A[a + u64(3)] * B[b]
            b += u64(u32(N))
            a += u64(4)
            k += u32(4)
        c = u64(row) * u64(N) + u64(col)
        store_c(C, c, acc, alpha, beta)   # BLAS: beta == 0 never reads C


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
