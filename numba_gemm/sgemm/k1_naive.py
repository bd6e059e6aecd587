"""k1 — naive: one thread per output, threadIdx.x mapped to ROWS (the seed's one-letter bug).

Each thread walks one row of A and one column of B. Because consecutive threads of a warp
(consecutive threadIdx.x) take consecutive *rows*, the warp's 32 loads of A land K floats
apart: 32 memory requests per load of A, plus 1 (broadcast) for B — 33 requests per FMA.
The bytes ledger cannot see this; the requests ledger can. k2 fixes the mapping.
At N = 4096 the stride is also a power of two, which adds a partition-camping penalty
(the seed: k1/k2 = 8.2× at 4096 but 2.4× at 4097).
"""
import numpy as np
from numba import cuda

from ._common import SIGNATURE, ceil_div, float32, grid_limit, launch, u32, u64

LEVEL = "k1"
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
        n = u64(N)
        # Flat uint64 offsets walked by pointer-style increments: no 64-bit multiply and no
        # negative-index select in the loop (see _common).
        a = u64(row) * u64(K)
        a_end = a + u64(K)
        b = u64(col)
        acc = float32(0.0)
        while a < a_end:
            acc += A[a] * B[b]
            a += u64(1)
            b += n
        c = u64(row) * n + u64(col)
        if beta == 0:
            C[c] = alpha * acc            # BLAS: beta == 0 never reads C
        else:
            C[c] = alpha * acc + beta * C[c]


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
