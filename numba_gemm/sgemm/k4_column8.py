"""k4 — 8 rows per thread: 32×4 blocks, each thread computes 8 outputs down one column.

The tile is still 32×32 (k3's), but the block shrinks from 1024 to 128 threads: thread
(tx, ty) owns rows 8·ty … 8·ty+7 of column tx. In the inner loop it reads one value of B from
shared memory (Nds[k][tx], a 32-way access: the expensive kind) and reuses it for 8 FMAs
against 8 broadcast reads of A (Mds[i0 + r][k], the cheap kind). k3 paid one expensive load
per FMA, k4 one per 8 FMAs: the cycles ledger moves (the seed: 3.34 -> 0.99 cycles per FMA,
3.36× measured), while bytes (7.97 FMA/float) and requests are unchanged.
"""
import numpy as np
from numba import cuda

from ._common import SIGNATURE, SMEM_ALIGN, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k4"
PARENT = "k3"
TITLE = "8 rows per thread (one B value reused 8×)"
DELTA = "k4 = k3 + each thread computes 8 rows of one column: one 32-way shared load of B per 8 FMAs"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDS", "STS", "BAR.SYNC", "FFMA")

TILE = 32
CF = 8                       # outputs per thread, down the column
BLOCK = (TILE, TILE // CF)   # 32 × 4 = 128 threads
TILE_M, TILE_N, TILE_K = TILE, TILE, TILE
THREAD_M, THREAD_N = CF, 1


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    Mds = cuda.shared.array((TILE, TILE), float32, alignment=SMEM_ALIGN)
    Nds = cuda.shared.array((TILE, TILE), float32, alignment=SMEM_ALIGN)

    tx = u32(cuda.threadIdx.x)
    ty = u32(cuda.threadIdx.y)
    col = u32(cuda.blockIdx.x * TILE + tx)
    i0 = u32(ty * CF)                         # my rows inside the tile: i0 … i0+7
    row0 = u32(cuda.blockIdx.y * TILE + i0)   # and in C
    m, n, k = u32(M), u32(N), u32(K)

    # 8 accumulators in a local array: every index below is a compile-time constant after
    # unrolling, so it lives in registers (no LDL/STL in the SASS).
    acc = cuda.local.array(CF, float32)
    for r in range(CF):
        acc[r] = float32(0.0)

    # Row offsets as 64-bit values, hoisted: a phase only adds constants to them.
    a_row0 = u64(row0) * u64(k)
    b_col = u64(col)
    ph = u32(0)
    while ph < k:
        a_col = u32(ph + tx)
        a = a_row0 + u64(a_col)                    # A[row0, a_col]
        b = u64(ph + i0) * u64(n) + b_col          # B[ph + i0, col]
        # cooperative load: 128 threads × 8 rows × 2 tiles
        for r in range(CF):
            ir = u32(i0 + r)
            if u32(row0 + r) < m and a_col < k:
                Mds[ir, tx] = A[a]
            else:
                Mds[ir, tx] = float32(0.0)
            if u32(ph + ir) < k and col < n:
                Nds[ir, tx] = B[b]
            else:
                Nds[ir, tx] = float32(0.0)
            a += u64(k)
            b += u64(n)
        cuda.syncthreads()

        # Unsigned kk: with a signed loop index each shared read would carry a wraparound
        # select. The loop is unrolled by NVVM; Mds[ir, kk..kk+3] merge into one LDS.128.
        kk = u32(0)
        while kk < TILE:
            b_val = Nds[kk, tx]                           # one 32-way load ...
            for r in range(CF):
                acc[r] += Mds[u32(i0 + r), kk] * b_val    # ... reused by 8 FMAs
            kk = u32(kk + 1)
        cuda.syncthreads()
        ph = u32(ph + TILE)

    if col < n:
        for r in range(CF):
            row = u32(row0 + r)
            if row < m:
                c = u64(row) * u64(n) + u64(col)
                store_c(C, c, acc[r], alpha, beta)


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
