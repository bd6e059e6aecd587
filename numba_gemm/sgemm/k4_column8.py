"""read: diff native/twins/k3.cu native/twins/k4.cu · run: python bench.py --level k4

k4 — 8 rows per thread: 32×4 blocks, each thread computes 8 outputs down one column.

The tile is still 32×32 (k3's), but the block shrinks from 1024 to 128 threads: thread
(tx, ty) owns rows 8·ty … 8·ty+7 of column tx. In the inner loop it reads one value of B from
shared memory (Bs[kk, tx], 32 distinct words in 32 banks, conflict-free) and
reuses it for 8 FMAs against 8 broadcast reads of A (As[i0 + r, kk]). k3 paid one such B load
per FMA, k4 one per 8 FMAs: the cycles ledger moves, while bytes (7.97 FLOP/byte) and requests
are unchanged. With the seed's RTX 4090 prices the B load is the expensive kind (2.686 cycles
against 0.534 for a broadcast): 3.34 -> 0.99 cycles per FMA, 3.36× measured by the seed. On
the H200 both kinds cost the same (numba_gemm/data/h200_costs.json), so the saving is in the
number of loads, not in their kind.

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from ._access import F32, Geometry, Step, global_load, lanes, shared_access
from ._common import SIGNATURE, SMEM_ALIGN, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k4"
PARENT = "k3"
TITLE = "8 rows per thread (one B value reused 8×)"
DELTA = "k4 = k3 + each thread computes 8 rows of one column: one conflict-free shared load of B per 8 FMAs"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDS", "STS", "BAR.SYNC", "FFMA")

TILE_M, TILE_N, TILE_K = 32, 32, 32
THREAD_M, THREAD_N = 8, 1                          # outputs per thread, down the column
BLOCK = (TILE_N // THREAD_N, TILE_M // THREAD_M)   # 32 × 4 = 128 threads
GEOMETRY = Geometry(block=BLOCK, tile_m=TILE_M, tile_n=TILE_N, tile_k=TILE_K,
                    thread_m=THREAD_M, thread_n=THREAD_N)


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    As = cuda.shared.array((TILE_M, TILE_K), float32, alignment=SMEM_ALIGN)   # As[m, k]
    Bs = cuda.shared.array((TILE_K, TILE_N), float32, alignment=SMEM_ALIGN)   # Bs[k, n]

    tx = u32(cuda.threadIdx.x)
    ty = u32(cuda.threadIdx.y)
    col = u32(cuda.blockIdx.x * TILE_N + tx)
    i0 = u32(ty * THREAD_M)                    # my rows inside the tile: i0 … i0+7
    row = u32(cuda.blockIdx.y * TILE_M + i0)   # and in C: row … row+7
    m, n, k = u32(M), u32(N), u32(K)

    # 8 accumulators in a local array: every index below is a compile-time constant after
    # unrolling, so it lives in registers (no LDL/STL in the SASS).
    acc = cuda.local.array(THREAD_M, float32)
    for r in range(THREAD_M):
        acc[r] = float32(0.0)

    # Row offsets as 64-bit values, hoisted: a phase only adds constants to them.
    a_row = u64(row) * u64(k)
    b_col = u64(col)
    k0 = u32(0)
    while k0 < k:
        a_col = u32(k0 + tx)
        a = a_row + u64(a_col)                     # A[row, a_col]
        b = u64(k0 + i0) * u64(n) + b_col          # B[k0 + i0, col]
        # cooperative load: 128 threads × 8 rows × 2 tiles
        for r in range(THREAD_M):
            ir = u32(i0 + r)
            if u32(row + r) < m and a_col < k:
                As[ir, tx] = A[a]
            else:
                As[ir, tx] = float32(0.0)
            if u32(k0 + ir) < k and col < n:
                Bs[ir, tx] = B[b]
            else:
                Bs[ir, tx] = float32(0.0)
            a += u64(k)
            b += u64(n)
        cuda.syncthreads()

        # Unsigned kk: with a signed loop index each shared read would carry a wraparound
        # select. The loop is unrolled by NVVM; As[ir, kk..kk+3] merge into one LDS.128.
        kk = u32(0)
        while kk < TILE_K:
            b_val = Bs[kk, tx]                            # one conflict-free load ...
            for r in range(THREAD_M):
                acc[r] += As[u32(i0 + r), kk] * b_val     # ... reused by 8 FMAs
            kk = u32(kk + 1)
        cuda.syncthreads()
        k0 = u32(k0 + TILE_K)

    if col < n:
        for r in range(THREAD_M):
            row_r = u32(row + r)
            if row_r < m:
                c = u64(row_r) * u64(n) + u64(col)
                store_c(C, c, acc[r], alpha, beta)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """Phase `ph` of warp `warp` of block (bx, by): its 8 rows of both tiles, then per k one
    B value and 8 A values."""
    ls = lanes(g, warp)
    T = g.tile_k
    bs = g.tile_m * T * F32          # Bs follows As in shared memory (bytes)
    acc = []
    for r in range(g.thread_m):      # cooperative load: my strip of rows i0..i0+7
        acc.append(global_load("A", [(by * g.tile_m + ty * g.thread_m + r) * K + ph * T + tx for tx, ty in ls]))
        acc.append(global_load("B", [(ph * T + ty * g.thread_m + r) * N + bx * g.tile_n + tx for tx, ty in ls]))
        acc.append(shared_access("As", [(ty * g.thread_m + r) * T + tx for tx, ty in ls], inner=False, op="store"))
        acc.append(shared_access("Bs", [(ty * g.thread_m + r) * g.tile_n + tx for tx, ty in ls],
                                 inner=False, op="store", base=bs))
    for kk in range(T):
        acc.append(shared_access("Bs", [kk * g.tile_n + tx for tx, ty in ls], base=bs))   # one n ...
        for r in range(g.thread_m):                                                    # ... used 8x
            acc.append(shared_access("As", [(ty * g.thread_m + r) * T + kk for tx, ty in ls]))
    return Step(T * g.thread_m, tuple(acc), "one phase")


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
