"""k5 — register outer product: each thread computes an 8×4 block of C; a block covers 32×128.

Still 32×4 = 128 threads, but the output tile grows from 32×32 to 32×128 (B's shared tile is
32×128). Each k step a thread reads 8 values of A (broadcasts) and 4 of B (32-way) into
registers and does their 8×4 outer product: 12 shared loads for 32 FMAs. k4 reused only B
(8 broadcasts + 1 32-way per 8 FMAs); k5 reuses both, so the cycles ledger moves again
(seed: per 32 FMAs 27.8 -> 15.0 cycles of shared loads). Loading 40 floats per phase for 32
outputs also moves the bytes ledger the way k3c did (7.97 -> 12.72 FMA/float). Occupancy drops
(32 accumulators, ~86 registers), and it is faster anyway.

The gain needs the seed's `#pragma unroll`: the 32 k steps and the 8 rows of tile loads are
straight-line code (see `unrolled` below), so a phase is 40 predicated LDG + 40 STS, then
1024 FFMA fed by 128 LDS + 64 LDS.128 with nothing else between the barriers. The LDS.128
are ptxas's doing, as in nvcc's build of the seed: a thread's 8 values of A at k..k+3 are
4 consecutive floats of one Mds row, and with every address a constant offset ptxas merges
them. (k6 makes 128-bit access the design: B too, and global memory.)
"""
import numpy as np
from numba import cuda

from ..intrinsics import unrolled
from ._common import SIGNATURE, SMEM_ALIGN, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k5"
PARENT = "k4"
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


# Numba has no `#pragma unroll`. Left to NVVM the 32-step k loop stays a loop (4 steps per
# trip, with LEAs recomputing shared addresses between the FFMAs) and so does the tile load
# (5 of its 40 LDG per trip), which ran ~30% slower than nvcc's build of the seed.
# Both loops are therefore written as one step each and
# expanded into straight-line code by `unrolled`; every shared address in a phase is then
# a register plus a constant, and ptxas merges the 4 A values at kk..kk+3 of one row
# (Mds[i0 + r, kk : kk + 4], 16-byte aligned) into one LDS.128, as nvcc does for the seed.

@cuda.jit(device=True, inline="always")
def _load_row(r, Mds, Nds, A, B, a_off, b_off, k64, n64, i0, tx, row0, m, a_col, b_row, k, b_col, n):
    """Tile row i0 + r: one element of A and four of B (columns tx + 32j) per thread."""
    zero = float32(0.0)
    ir = u32(i0 + r)
    # offsets outside the condition, so that they become running sums (a multiply inside
    # it is redone per row); `&`, not `and`: a predicated load rather than a branch
    a = a_off + u64(r) * k64
    Mds[ir, tx] = A[a] if (u32(row0 + r) < m) & (a_col < k) else zero
    b_ok = u32(b_row + r) < k
    b = b_off + u64(r) * n64
    for j in range(TN):
        Nds[ir, u32(j * TILE + tx)] = B[b + u64(j * TILE)] if b_ok & (u32(b_col + j * TILE) < n) else zero


@cuda.jit(device=True, inline="always")
def _step(kk, Mds, Nds, i0, tx, a_reg, b_reg, acc):
    """One k of the 8×4 outer product: 8 broadcasts of A, 4 conflict-free loads of B, 32 FMAs."""
    for r in range(CF):
        a_reg[r] = Mds[u32(i0 + r), kk]
    for j in range(TN):
        b_reg[j] = Nds[kk, u32(j * TILE + tx)]
    for r in range(CF):
        for j in range(TN):
            acc[r, j] += a_reg[r] * b_reg[j]


_load_tiles = unrolled(_load_row, CF)     # 8 rows: 8 loads of A, 32 of B
_all_steps = unrolled(_step, TILE)        # kk = 0..31


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    Mds = cuda.shared.array((TILE, TILE), float32, alignment=SMEM_ALIGN)        # 4 KB
    Nds = cuda.shared.array((TILE, NDS_COLS), float32, alignment=SMEM_ALIGN)   # 16 KB

    tx = u32(cuda.threadIdx.x)
    ty = u32(cuda.threadIdx.y)
    i0 = u32(ty * CF)
    row0 = u32(cuda.blockIdx.y * TILE + i0)
    col_base = u32(cuda.blockIdx.x * (TILE * TN))
    b_col = u32(col_base + tx)
    m, n, k = u32(M), u32(N), u32(K)
    k64, n64 = u64(k), u64(n)

    # Local arrays indexed only by unrolled constants: they live in registers.
    acc = cuda.local.array((CF, TN), float32)
    a_reg = cuda.local.array(CF, float32)
    b_reg = cuda.local.array(TN, float32)
    for r in range(CF):
        for j in range(TN):
            acc[r, j] = float32(0.0)

    # Running 64-bit offsets of A[row0, ph + tx] and B[ph + i0, col_base + tx]
    a_off = u64(row0) * k64 + u64(tx)
    b_off = u64(i0) * n64 + u64(b_col)
    ph = u32(0)
    while ph < k:
        _load_tiles(0, Mds, Nds, A, B, a_off, b_off, k64, n64, i0, tx, row0, m,
                    u32(ph + tx), u32(ph + i0), k, b_col, n)
        cuda.syncthreads()
        _all_steps(0, Mds, Nds, i0, tx, a_reg, b_reg, acc)
        cuda.syncthreads()
        ph = u32(ph + TILE)
        a_off += u64(TILE)
        b_off += u64(TILE) * n64

    for r in range(CF):
        row = u32(row0 + r)
        if row < m:
            c_row = u64(row) * n64
            for j in range(TN):
                col = u32(b_col + j * TILE)
                if col < n:
                    c = c_row + u64(col)
                    store_c(C, c, acc[r, j], alpha, beta)


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
