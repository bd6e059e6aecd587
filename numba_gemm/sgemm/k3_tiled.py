"""k3 — shared-memory tiling: 32×32 tiles of A and B staged in shared memory, 1024-thread blocks.

Each block computes a 32×32 tile of C. Per phase of K, its 1024 threads each load one element
of the A tile and one of the B tile (coalesced, zero-filled past the matrix edges), then every
thread runs a 32-step dot product out of shared memory. Each element brought in from global
memory is used 32 times: the bytes ledger moves (arithmetic intensity 0.25 -> 7.97 FMA/float).
The seed's point: k2 was not bandwidth-bound (its "2112% of roofline" came from L2 hits), so
the gain is small (1.16× on the 4090); the cycles ledger predicts it — per FMA, k3 issues one
32-way shared load of B (Nds[k][tx]) plus one broadcast of A, instead of two global loads.
"""
import numpy as np
from numba import cuda

from ._common import SIGNATURE, SMEM_ALIGN, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k3"
PARENT = "k2"
TITLE = "32×32 shared-memory tiles"
DELTA = "k3 = k2 + 32×32 tiles of A and B staged in shared memory: each loaded float is used 32×"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDS", "STS", "BAR.SYNC", "FFMA")

TILE = 32
BLOCK = (TILE, TILE)
TILE_M, TILE_N, TILE_K = TILE, TILE, TILE
THREAD_M, THREAD_N = 1, 1


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    Mds = cuda.shared.array((TILE, TILE), float32, alignment=SMEM_ALIGN)
    Nds = cuda.shared.array((TILE, TILE), float32, alignment=SMEM_ALIGN)

    # uint32 thread coordinates: unsigned indices skip Numba's negative-index select.
    tx = u32(cuda.threadIdx.x)
    ty = u32(cuda.threadIdx.y)
    col = u32(cuda.blockIdx.x * TILE + tx)
    row = u32(cuda.blockIdx.y * TILE + ty)
    m, n, k = u32(M), u32(N), u32(K)

    a_row = u64(row) * u64(k)     # start of this thread's row of A, 64-bit once per thread
    acc = float32(0.0)
    ph = u32(0)                   # first K index of the phase
    while ph < k:
        a_col = u32(ph + tx)
        b_row = u32(ph + ty)
        if row < m and a_col < k:
            Mds[ty, tx] = A[a_row + u64(a_col)]
        else:
            Mds[ty, tx] = float32(0.0)
        if b_row < k and col < n:
            Nds[ty, tx] = B[u64(b_row) * u64(n) + u64(col)]
        else:
            Nds[ty, tx] = float32(0.0)
        cuda.syncthreads()

        for kk in range(TILE):    # constant trip count: fully unrolled, kk folds into LDS offsets
            acc += Mds[ty, kk] * Nds[kk, tx]
        cuda.syncthreads()
        ph = u32(ph + TILE)

    if row < m and col < n:
        c = u64(row) * u64(n) + u64(col)
        store_c(C, c, acc, alpha, beta)


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
