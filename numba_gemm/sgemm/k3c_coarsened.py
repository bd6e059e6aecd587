"""read: diff native/twins/k3.cu native/twins/k3c.cu · run: python bench.py --level k3c

k3c — thread coarsening: each block covers 4 column tiles (32×128 of C), the A tile is loaded once.

Same 32×32 threads and the same inner loop as k3, but a block now walks COARSE = 4 tiles of
B to the right for every tile of A it stages. Per phase a thread loads 1 element of A and 4 of
B (instead of 2 per tile in k3) for 4 outputs: 1.25 loaded floats per output instead of 2, so
the bytes ledger moves again (arithmetic intensity 7.97 -> 12.72 FLOP/byte). Each tile's
32-step dot product is added to the oldest of 4 accumulators, which are then rotated in registers
(p0 <- p1 <- p2 <- p3 <- p0 + acc), so no dynamically indexed array is needed. The cycles
ledger does not move (the inner loop is k3's), and the extra barriers cost a little: the seed
measured k3c slightly slower than k3.

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from ._access import F32, Geometry, Step, global_load, lanes, shared_access
from ._common import SIGNATURE, SMEM_ALIGN, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k3c"
PARENT = "k3"
TITLE = "coarsened: 4 column tiles per block"
DELTA = "k3c = k3 + each block reuses its A tile for 4 column tiles of B: 2 -> 1.25 loads per output"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDS", "STS", "BAR.SYNC", "FFMA")

COARSE = 4                       # column tiles per block
TILE_M, TILE_K = 32, 32
TILE_N = 32 * COARSE             # the block's columns of C: 128
THREAD_M, THREAD_N = 1, COARSE   # outputs per thread, 32 columns apart
COL_STEP = TILE_N // COARSE      # a thread's columns lie 32 apart; one such B tile at a time
BLOCK = (COL_STEP, TILE_M)       # k3's 32 × 32 threads
GEOMETRY = Geometry(block=BLOCK, tile_m=TILE_M, tile_n=TILE_N, tile_k=TILE_K,
                    thread_m=THREAD_M, thread_n=THREAD_N)


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    As = cuda.shared.array((TILE_M, TILE_K), float32, alignment=SMEM_ALIGN)   # As[m, k]
    Bs = cuda.shared.array((TILE_K, COL_STEP), float32, alignment=SMEM_ALIGN)  # Bs[k, n]

    tx = u32(cuda.threadIdx.x)
    ty = u32(cuda.threadIdx.y)
    row = u32(cuda.blockIdx.y * TILE_M + ty)
    col = u32(cuda.blockIdx.x * TILE_N + tx)   # my first column; the others COL_STEP apart
    m, n, k = u32(M), u32(N), u32(K)

    a_row = u64(row) * u64(k)
    p0 = float32(0.0)
    p1 = float32(0.0)
    p2 = float32(0.0)
    p3 = float32(0.0)
    k0 = u32(0)
    while k0 < k:
        a_col = u32(k0 + tx)
        b_row = u32(k0 + ty)
        b_off = u64(b_row) * u64(n)
        # The A tile: loaded once per phase, used for all 4 column tiles.
        if row < m and a_col < k:
            As[ty, tx] = A[a_row + u64(a_col)]
        else:
            As[ty, tx] = float32(0.0)

        for j in range(COARSE):
            col_j = u32(col + j * COL_STEP)
            if b_row < k and col_j < n:
                Bs[ty, tx] = B[b_off + u64(col_j)]
            else:
                Bs[ty, tx] = float32(0.0)
            cuda.syncthreads()            # tiles written before anyone reads them

            acc = float32(0.0)
            for kk in range(TILE_K):      # k3's inner loop, unrolled
                acc += As[ty, kk] * Bs[kk, tx]
            cuda.syncthreads()            # everyone done reading before the next overwrite

            # register rotation: p0 gets this tile's sum and moves to the back of the queue;
            # after 4 tiles each p is back at its own column tile.
            t = p0 + acc
            p0 = p1
            p1 = p2
            p2 = p3
            p3 = t
        k0 = u32(k0 + TILE_K)

    if row < m:
        c_row = u64(row) * u64(n)
        _store(C, c_row, col, n, alpha, beta, p0)
        _store(C, c_row, u32(col + COL_STEP), n, alpha, beta, p1)
        _store(C, c_row, u32(col + 2 * COL_STEP), n, alpha, beta, p2)
        _store(C, c_row, u32(col + 3 * COL_STEP), n, alpha, beta, p3)


@cuda.jit(device=True, inline=True)
def _store(C, c_row, col, n, alpha, beta, acc):
    if col < n:
        c = c_row + u64(col)
        store_c(C, c, acc, alpha, beta)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """Phase `ph` of warp `warp` of block (bx, by): one A tile, then per column tile its B
    tile and 32 k."""
    ls = lanes(g, warp)
    T = g.tile_k
    W = g.block[0]                   # width of one column tile (COL_STEP)
    bs = g.tile_m * T * F32          # Bs follows As in shared memory (bytes)
    acc = [global_load("A", [(by * g.tile_m + ty) * K + ph * T + tx for tx, ty in ls]),
           shared_access("As", [ty * T + tx for tx, ty in ls], inner=False, op="store")]
    for j in range(g.thread_n):      # one B tile per coarsening step, A tile reused
        acc.append(global_load("B", [(ph * T + ty) * N + bx * g.tile_n + j * W + tx for tx, ty in ls]))
        acc.append(shared_access("Bs", [ty * W + tx for tx, ty in ls], inner=False, op="store", base=bs))
        for kk in range(T):
            acc.append(shared_access("As", [ty * T + kk for tx, ty in ls]))
            acc.append(shared_access("Bs", [kk * W + tx for tx, ty in ls], base=bs))
    return Step(T * g.thread_n, tuple(acc), "one phase")


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
