"""read: diff native/twins/k2.cu native/twins/k3.cu · run: python bench.py --level k3

k3 — shared-memory tiling: 32×32 tiles of A and B staged in shared memory, 1024-thread blocks.

Each block computes a 32×32 tile of C. Per phase of K, its 1024 threads each load one element
of the A tile and one of the B tile (coalesced, zero-filled past the matrix edges), then every
thread runs a 32-step dot product out of shared memory. Each element brought in from global
memory is used 32 times: the bytes ledger moves (arithmetic intensity 0.25 -> 7.97 FLOP/byte).
The seed's point: k2 was not bandwidth-bound (its "2112% of roofline" came from L2 hits), so
the gain is small (1.16× on the 4090); the cycles ledger with the 4090's prices predicts it —
per FMA, k3 issues one conflict-free shared load of B (Bs[kk, tx], 32 distinct words in 32
banks) plus one broadcast of A (As[ty, kk]), instead of two global loads.

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from ._access import F32, Geometry, Step, global_load, lanes, shared_access
from ._common import SIGNATURE, SMEM_ALIGN, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k3"
PARENT = "k2"
TITLE = "32×32 shared-memory tiles"
DELTA = "k3 = k2 + 32×32 tiles of A and B staged in shared memory: each loaded float is used 32×"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDS", "STS", "BAR.SYNC", "FFMA")

TILE_M, TILE_N, TILE_K = 32, 32, 32
THREAD_M, THREAD_N = 1, 1
BLOCK = (TILE_N, TILE_M)   # one thread per output
GEOMETRY = Geometry(block=BLOCK, tile_m=TILE_M, tile_n=TILE_N, tile_k=TILE_K,
                    thread_m=THREAD_M, thread_n=THREAD_N)


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    As = cuda.shared.array((TILE_M, TILE_K), float32, alignment=SMEM_ALIGN)   # As[m, k]
    Bs = cuda.shared.array((TILE_K, TILE_N), float32, alignment=SMEM_ALIGN)   # Bs[k, n]

    # uint32 thread coordinates: unsigned indices skip Numba's negative-index select.
    tx = u32(cuda.threadIdx.x)
    ty = u32(cuda.threadIdx.y)
    col = u32(cuda.blockIdx.x * TILE_N + tx)
    row = u32(cuda.blockIdx.y * TILE_M + ty)
    m, n, k = u32(M), u32(N), u32(K)

    a_row = u64(row) * u64(k)     # start of this thread's row of A, 64-bit once per thread
    acc = float32(0.0)
    k0 = u32(0)                   # first k of the phase
    while k0 < k:
        a_col = u32(k0 + tx)
        b_row = u32(k0 + ty)
        if row < m and a_col < k:
            As[ty, tx] = A[a_row + u64(a_col)]
        else:
            As[ty, tx] = float32(0.0)
        if b_row < k and col < n:
            Bs[ty, tx] = B[u64(b_row) * u64(n) + u64(col)]
        else:
            Bs[ty, tx] = float32(0.0)
        cuda.syncthreads()

        for kk in range(TILE_K):  # constant trip count: fully unrolled, kk folds into LDS offsets
            acc += As[ty, kk] * Bs[kk, tx]
        cuda.syncthreads()
        k0 = u32(k0 + TILE_K)

    if row < m and col < n:
        c = u64(row) * u64(n) + u64(col)
        store_c(C, c, acc, alpha, beta)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """Phase `ph` of warp `warp` of block (bx, by): its tile loads and stores, then its 32 k."""
    ls = lanes(g, warp)
    T = g.tile_k
    bs = g.tile_m * T * F32      # Bs follows As in shared memory (bytes)
    acc = [
        global_load("A", [(by * g.tile_m + ty) * K + ph * T + tx for tx, ty in ls]),
        global_load("B", [(ph * T + ty) * N + bx * g.tile_n + tx for tx, ty in ls]),
        shared_access("As", [ty * T + tx for tx, ty in ls], inner=False, op="store"),
        shared_access("Bs", [ty * g.tile_n + tx for tx, ty in ls], inner=False, op="store", base=bs),
    ]
    for kk in range(T):
        acc.append(shared_access("As", [ty * T + kk for tx, ty in ls]))                  # As[ty, kk]
        acc.append(shared_access("Bs", [kk * g.tile_n + tx for tx, ty in ls], base=bs))  # Bs[kk, tx]
    return Step(T * g.thread_m * g.thread_n, tuple(acc), "one phase")


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
