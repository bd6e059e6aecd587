"""k2 — coalesced: k1 with threadIdx.x mapped to COLUMNS.

One swapped letter. A warp now covers 32 consecutive columns of one row of C: its B load is
32 consecutive floats (one 128-byte request) and its A load is one float for all 32 threads
(a broadcast, one request). Requests per FMA fall from 33 to 2 — the requests ledger moves;
the bytes ledger (arithmetic intensity 0.25 FMA/float) does not.
"""
import numpy as np
from numba import cuda

from ._common import SIGNATURE, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k2"
PARENT = "k1"
TITLE = "coalesced (x mapped to columns)"
DELTA = "k2 = k1 with threadIdx.x on columns: a warp reads 32 adjacent floats of B, 33 -> 2 requests per FMA"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDG.E", "FFMA", "STG.E")

BLOCK = (32, 32)
TILE_M, TILE_N = 32, 32
TILE_K = 1
THREAD_M, THREAD_N = 1, 1


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    col = u32(cuda.blockIdx.x * TILE_N + cuda.threadIdx.x)   # x -> column: coalesced
    row = u32(cuda.blockIdx.y * TILE_M + cuda.threadIdx.y)
    if row < u32(M) and col < u32(N):
        # Same loop as k1 (its comments say why it is written this way).
        a = u64(row) * u64(u32(K))
        b = u64(col)
        acc = float32(0.0)
        k = u32(0)
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
        store_c(C, c, acc, alpha, beta)


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
