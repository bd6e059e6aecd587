"""k3c — thread coarsening: each block covers 4 column tiles (32×128 of C), the A tile is loaded once.

Same 32×32 threads and the same inner loop as k3, but a block now walks COARSE = 4 tiles of
B to the right for every tile of A it stages. Per phase a thread loads 1 element of A and 4 of
B (instead of 2 per tile in k3) for 4 outputs: 1.25 loaded floats per output instead of 2, so
the bytes ledger moves again (arithmetic intensity 7.97 -> 12.72). Each tile's 32-step dot
product is added to the oldest of 4 accumulators, which are then rotated in registers
(p0 <- p1 <- p2 <- p3 <- p0 + acc), so no dynamically indexed array is needed. The cycles
ledger does not move (the inner loop is k3's), and the extra barriers cost a little: the seed
measured k3c slightly slower than k3.
"""
import numpy as np
from numba import cuda

from ._common import SIGNATURE, SMEM_ALIGN, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k3c"
PARENT = "k3"
TITLE = "coarsened: 4 column tiles per block"
DELTA = "k3c = k3 + each block reuses its A tile for 4 column tiles of B: 2 -> 1.25 loads per output"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDS", "STS", "BAR.SYNC", "FFMA")

TILE = 32
COARSE = 4
BLOCK = (TILE, TILE)
TILE_M, TILE_N, TILE_K = TILE, TILE * COARSE, TILE
THREAD_M, THREAD_N = 1, COARSE


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    Mds = cuda.shared.array((TILE, TILE), float32, alignment=SMEM_ALIGN)
    Nds = cuda.shared.array((TILE, TILE), float32, alignment=SMEM_ALIGN)

    tx = u32(cuda.threadIdx.x)
    ty = u32(cuda.threadIdx.y)
    row = u32(cuda.blockIdx.y * TILE + ty)
    col_start = u32(cuda.blockIdx.x * (TILE * COARSE) + tx)
    m, n, k = u32(M), u32(N), u32(K)

    a_row = u64(row) * u64(k)
    p0 = float32(0.0)
    p1 = float32(0.0)
    p2 = float32(0.0)
    p3 = float32(0.0)
    ph = u32(0)
    while ph < k:
        a_col = u32(ph + tx)
        b_row = u32(ph + ty)
        b_off = u64(b_row) * u64(n)
        # The A tile: loaded once per phase, used for all 4 column tiles.
        if row < m and a_col < k:
            Mds[ty, tx] = A[a_row + u64(a_col)]
        else:
            Mds[ty, tx] = float32(0.0)

        for c in range(COARSE):
            col = u32(col_start + c * TILE)
            if b_row < k and col < n:
                Nds[ty, tx] = B[b_off + u64(col)]
            else:
                Nds[ty, tx] = float32(0.0)
            cuda.syncthreads()            # tiles written before anyone reads them

            acc = float32(0.0)
            for kk in range(TILE):        # k3's inner loop, unrolled
                acc += Mds[ty, kk] * Nds[kk, tx]
            cuda.syncthreads()            # everyone done reading before the next overwrite

            # register rotation: p0 gets this tile's sum and moves to the back of the queue;
            # after 4 tiles each p is back at its own column tile.
            t = p0 + acc
            p0 = p1
            p1 = p2
            p2 = p3
            p3 = t
        ph = u32(ph + TILE)

    if row < m:
        c_row = u64(row) * u64(n)
        _store(C, c_row, col_start, n, alpha, beta, p0)
        _store(C, c_row, u32(col_start + TILE), n, alpha, beta, p1)
        _store(C, c_row, u32(col_start + 2 * TILE), n, alpha, beta, p2)
        _store(C, c_row, u32(col_start + 3 * TILE), n, alpha, beta, p3)


@cuda.jit(device=True, inline=True)
def _store(C, c_row, col, n, alpha, beta, acc):
    if col < n:
        c = c_row + u64(col)
        store_c(C, c, acc, alpha, beta)


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
