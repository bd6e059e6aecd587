"""k5 — register outer product: each thread computes an 8×4 block of C; a block covers 32×128.

Still 32×4 = 128 threads, but the output tile grows from 32×32 to 32×128 (B's shared tile is
32×128). Each k step a thread reads 8 values of A (broadcasts) and 4 of B (32-way) into
registers and does their 8×4 outer product: 12 shared loads for 32 FMAs. k4 reused only B
(8 broadcasts + 1 32-way per 8 FMAs); k5 reuses both, so the cycles ledger moves again
(seed: per 32 FMAs 27.8 -> 15.0 cycles of shared loads). Loading 40 floats per phase for 32
outputs also moves the bytes ledger the way k3c did (7.97 -> 12.72 FMA/float). Occupancy drops
(32 accumulators, ~96 registers), and it is faster anyway.
"""
import numpy as np
from numba import cuda

from ._common import SIGNATURE, SMEM_ALIGN, ceil_div, float32, grid_limit, launch, u32, u64

LEVEL = "k5"
TITLE = "8×4 register outer product"
DELTA = "k5 = k4 + each thread computes 8×4 outputs from 8 A and 4 B registers: 12 shared loads per 32 FMAs"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDS", "STS", "BAR.SYNC", "FFMA")

TILE = 32
CF = 8                       # rows per thread
TN = 4                       # columns per thread, TILE apart
BLOCK = (TILE, TILE // CF)   # 32 × 4 = 128 threads
TILE_M, TILE_N, TILE_K = TILE, TILE * TN, TILE
NDS_COLS = TILE * TN         # a named constant: shared-array shapes must be literals
THREAD_M, THREAD_N = CF, TN


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    Mds = cuda.shared.array((TILE, TILE), float32, alignment=SMEM_ALIGN)        # 4 KB
    Nds = cuda.shared.array((TILE, NDS_COLS), float32, alignment=SMEM_ALIGN)   # 16 KB

    tx = u32(cuda.threadIdx.x)
    ty = u32(cuda.threadIdx.y)
    i0 = u32(ty * CF)
    row0 = u32(cuda.blockIdx.y * TILE + i0)
    col_base = u32(cuda.blockIdx.x * (TILE * TN))
    m, n, k = u32(M), u32(N), u32(K)

    # Local arrays indexed only by unrolled constants: they live in registers.
    acc = cuda.local.array((CF, TN), float32)
    a_reg = cuda.local.array(CF, float32)
    b_reg = cuda.local.array(TN, float32)
    for r in range(CF):
        for j in range(TN):
            acc[r, j] = float32(0.0)

    a_row0 = u64(row0) * u64(k)
    b_col = u64(col_base + tx)
    ph = u32(0)
    while ph < k:
        a_col = u32(ph + tx)
        a = a_row0 + u64(a_col)                 # A[row0, a_col]
        b = u64(ph + i0) * u64(n) + b_col       # B[ph + i0, col_base + tx]
        for r in range(CF):
            ir = u32(i0 + r)
            # A tile: 8 elements per thread, as in k4
            if u32(row0 + r) < m and a_col < k:
                Mds[ir, tx] = A[a]
            else:
                Mds[ir, tx] = float32(0.0)
            # B tile: 8 rows × 4 segments per thread, each segment ending in tx: coalesced
            b_in = u32(ph + ir) < k
            for j in range(TN):
                if b_in and u32(col_base + j * TILE + tx) < n:
                    Nds[ir, u32(j * TILE + tx)] = B[b + u64(j * TILE)]
                else:
                    Nds[ir, u32(j * TILE + tx)] = float32(0.0)
            a += u64(k)
            b += u64(n)
        cuda.syncthreads()

        kk = u32(0)                   # unsigned: no wraparound selects on the shared reads
        while kk < TILE:
            for r in range(CF):
                a_reg[r] = Mds[u32(i0 + r), kk]            # 8 broadcasts
            for j in range(TN):
                b_reg[j] = Nds[kk, u32(j * TILE + tx)]     # 4 32-way loads
            for r in range(CF):
                for j in range(TN):
                    acc[r, j] += a_reg[r] * b_reg[j]       # 32 FMAs
            kk = u32(kk + 1)
        cuda.syncthreads()
        ph = u32(ph + TILE)

    for r in range(CF):
        row = u32(row0 + r)
        if row < m:
            c_row = u64(row) * u64(n)
            for j in range(TN):
                col = u32(col_base + j * TILE + tx)
                if col < n:
                    c = c_row + u64(col)
                    if beta == 0:
                        C[c] = alpha * acc[r, j]
                    else:
                        C[c] = alpha * acc[r, j] + beta * C[c]


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
