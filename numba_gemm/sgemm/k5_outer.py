"""read: diff native/twins/k4.cu native/twins/k5.cu · run: python bench.py --level k5

k5 — register outer product: each thread computes an 8×4 block of C; a block covers 32×128.

Still 32×4 = 128 threads, but the output tile grows from 32×32 to 32×128 (B's shared tile is
32×128). Each k step a thread reads 8 values of A (broadcasts) and 4 of B (conflict-free)
into registers and does their 8×4 outer product: 12 shared loads for 32 FMAs. k4 reused only B
(8 broadcasts + 1 conflict-free load per 8 FMAs); k5 reuses both, so the cycles ledger moves
again (seed's 4090 prices: per 32 FMAs 27.8 -> 15.0 cycles of shared loads). Loading 40 floats
per phase for 32 outputs also moves the bytes ledger the way k3c did (7.97 -> 12.72 FLOP/byte).
Occupancy drops
(32 accumulators: more registers per thread), and it is faster anyway.

The gain needs the seed's `#pragma unroll`: the 32 k steps and the 8 rows of tile loads are
straight-line code (see `unrolled` below), so a phase is 40 predicated LDG + 40 STS, then
1024 FFMA fed by 128 LDS + 64 LDS.128 with nothing else between the barriers. The LDS.128
are ptxas's doing, as in nvcc's build of the seed: a thread's 8 values of A at k..k+3 are
4 consecutive floats of one As row, and with every address a constant offset ptxas merges
them. (k6 makes 128-bit access the design: B too, and global memory.)

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from ..ptx.intrinsics import unrolled
from ._access import F32, Geometry, Step, global_load, lanes, shared_access
from ._common import SIGNATURE, SMEM_ALIGN, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k5"
PARENT = "k4"
TITLE = "8×4 register outer product"
DELTA = "k5 = k4 + each thread computes 8×4 outputs from 8 A and 4 B registers: 12 shared loads per 32 FMAs"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDS", "STS", "BAR.SYNC", "FFMA")

TILE_M, TILE_N, TILE_K = 32, 128, 32
THREAD_M, THREAD_N = 8, 4                          # rows, and columns COL_STEP apart
COL_STEP = TILE_N // THREAD_N                      # 32: a warp's loads of B are contiguous
BLOCK = (TILE_N // THREAD_N, TILE_M // THREAD_M)   # 32 × 4 = 128 threads
GEOMETRY = Geometry(block=BLOCK, tile_m=TILE_M, tile_n=TILE_N, tile_k=TILE_K,
                    thread_m=THREAD_M, thread_n=THREAD_N)


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


# Numba has no `#pragma unroll`. Left to NVVM the 32-step k loop stays a loop (4 steps per
# trip, with LEAs recomputing shared addresses between the FFMAs) and so does the tile load
# (5 of its 40 LDG per trip), which ran ~30% slower than nvcc's build of the seed.
# Both loops are therefore written as one step each and
# expanded into straight-line code by `unrolled`; every shared address in a phase is then
# a register plus a constant, and ptxas merges the 4 A values at kk..kk+3 of one row
# (As[i0 + r, kk : kk + 4], 16-byte aligned) into one LDS.128, as nvcc does for the seed.

@cuda.jit(device=True, inline="always")
def _load_row(r, As, Bs, A, B, a_off, b_off, k64, n64, i0, tx, row, m, a_col, b_row, k, col, n):
    """Tile row i0 + r: one element of A and four of B (columns tx + 32j) per thread."""
    zero = float32(0.0)
    ir = u32(i0 + r)
    # offsets outside the condition, so that they become running sums (a multiply inside
    # it is redone per row); `&`, not `and`: a predicated load rather than a branch
    a = a_off + u64(r) * k64
    As[ir, tx] = A[a] if (u32(row + r) < m) & (a_col < k) else zero
    b_ok = u32(b_row + r) < k
    b = b_off + u64(r) * n64
    for j in range(THREAD_N):
        Bs[ir, u32(j * COL_STEP + tx)] = B[b + u64(j * COL_STEP)] if b_ok & (u32(col + j * COL_STEP) < n) else zero


@cuda.jit(device=True, inline="always")
def _step(kk, As, Bs, i0, tx, a_reg, b_reg, acc):
    """One k of the 8×4 outer product: 8 broadcasts of A, 4 conflict-free loads of B, 32 FMAs."""
    for r in range(THREAD_M):
        a_reg[r] = As[u32(i0 + r), kk]
    for j in range(THREAD_N):
        b_reg[j] = Bs[kk, u32(j * COL_STEP + tx)]
    for r in range(THREAD_M):
        for j in range(THREAD_N):
            acc[r, j] += a_reg[r] * b_reg[j]


_load_tiles = unrolled(_load_row, THREAD_M)   # 8 rows: 8 loads of A, 32 of B
_all_steps = unrolled(_step, TILE_K)          # kk = 0..31


@cuda.jit(device=True, inline="always")
def multiply(M, N, K, k_lo, k_end, base, alpha, A, B, beta, C, skip_idle_warps):
    """The k5 kernel's body over the K range [k_lo, k_end) (k_lo a multiple of TILE_K; loads at
    or past k_end give zeros), its output the M×N matrix at element `base` of C. k5 itself is
    (0, K, 0). With `skip_idle_warps`, a warp whose 8 rows all lie at or past M skips the
    multiply (a warp is one ty: the branch is warp-uniform), so a skinny M pays no FFMA for
    padding rows; it still loads its share of the tiles."""
    As = cuda.shared.array((TILE_M, TILE_K), float32, alignment=SMEM_ALIGN)   # As[m, k]: 4 KB
    Bs = cuda.shared.array((TILE_K, TILE_N), float32, alignment=SMEM_ALIGN)   # Bs[k, n]: 16 KB

    tx = u32(cuda.threadIdx.x)
    ty = u32(cuda.threadIdx.y)
    i0 = u32(ty * THREAD_M)                    # my rows inside the tile: i0 … i0+7
    row = u32(cuda.blockIdx.y * TILE_M + i0)   # and in C
    col0 = u32(cuda.blockIdx.x * TILE_N)       # the block's first column
    col = u32(col0 + tx)                       # my first column; the others COL_STEP apart
    m, n, k = u32(M), u32(N), u32(K)
    k64, n64 = u64(k), u64(n)
    busy = (not skip_idle_warps) | (row < m)

    # Local arrays indexed only by unrolled constants: they live in registers.
    acc = cuda.local.array((THREAD_M, THREAD_N), float32)
    a_reg = cuda.local.array(THREAD_M, float32)
    b_reg = cuda.local.array(THREAD_N, float32)
    for r in range(THREAD_M):
        for j in range(THREAD_N):
            acc[r, j] = float32(0.0)

    # Running 64-bit offsets of A[row, k0 + tx] and B[k0 + i0, col]
    a_off = u64(row) * k64 + u64(tx) + u64(k_lo)
    b_off = u64(k_lo + i0) * n64 + u64(col)
    k0 = u32(k_lo)
    while k0 < k_end:
        _load_tiles(0, As, Bs, A, B, a_off, b_off, k64, n64, i0, tx, row, m,
                    u32(k0 + tx), u32(k0 + i0), k_end, col, n)
        cuda.syncthreads()
        if busy:
            _all_steps(0, As, Bs, i0, tx, a_reg, b_reg, acc)
        cuda.syncthreads()
        k0 = u32(k0 + TILE_K)
        a_off += u64(TILE_K)
        b_off += u64(TILE_K) * n64

    for r in range(THREAD_M):
        row_r = u32(row + r)
        if row_r < m:
            c_row = base + u64(row_r) * n64
            for j in range(THREAD_N):
                col_j = u32(col + j * COL_STEP)
                if col_j < n:
                    c = c_row + u64(col_j)
                    store_c(C, c, acc[r, j], alpha, beta)


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    multiply(M, N, K, u32(0), u32(K), u64(0), alpha, A, B, beta, C, False)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """Phase `ph` of warp `warp` of block (bx, by): its 8 rows of the A tile and 8 × 4 values
    of the B tile, then per k 8 A values and 4 B values."""
    ls = lanes(g, warp)
    T = g.tile_k
    W = g.block[0]                   # a thread's columns lie W apart (COL_STEP)
    bs = g.tile_m * T * F32          # Bs follows As in shared memory (bytes)
    acc = []
    for r in range(g.thread_m):
        acc.append(global_load("A", [(by * g.tile_m + ty * g.thread_m + r) * K + ph * T + tx for tx, ty in ls]))
        acc.append(shared_access("As", [(ty * g.thread_m + r) * T + tx for tx, ty in ls], inner=False, op="store"))
    for r in range(g.thread_m):
        for j in range(g.thread_n):
            acc.append(global_load("B", [(ph * T + ty * g.thread_m + r) * N + bx * g.tile_n + j * W + tx
                                         for tx, ty in ls]))
            acc.append(shared_access("Bs", [(ty * g.thread_m + r) * g.tile_n + j * W + tx for tx, ty in ls],
                                     inner=False, op="store", base=bs))
    for kk in range(T):
        for r in range(g.thread_m):
            acc.append(shared_access("As", [(ty * g.thread_m + r) * T + kk for tx, ty in ls]))
        for j in range(g.thread_n):
            acc.append(shared_access("Bs", [kk * g.tile_n + j * W + tx for tx, ty in ls], base=bs))
    return Step(T * g.thread_m * g.thread_n, tuple(acc), "one phase")


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
