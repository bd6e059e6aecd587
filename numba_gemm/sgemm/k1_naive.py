"""read: native/twins/k1.cu (the first SGEMM rung: no parent to diff against) · run: python bench.py --level k1

k1 — naive: one thread per output, threadIdx.x mapped to ROWS (the seed's one-letter bug).

Each thread walks one row of A and one column of B: the textbook triple loop, with the two
outer loops spread over the threads. Because consecutive threads of a warp (consecutive
threadIdx.x) take consecutive *rows*, the warp's 32 loads of A land K floats apart: 32 memory
requests per load of A, plus 1 (broadcast) for B — 33 requests per FMA. The bytes ledger
cannot see this; the requests ledger can. k2 fixes the mapping.

At N = 4096 k1 is also slower than at 4097 (the seed: k1/k2 = 8.2× at 4096 but 2.4× at
4097). What is measured (docs/LADDER.md, "4096 vs 4097"): the same DRAM bytes and the same L1
requests and sectors at both sizes, nearly all of them L1 hits. That at 4096 every lane's address is the
same modulo 16 KiB, so that L1 serves the 32 lines' words one at a time, is inferred, not
measured.

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from ._access import Geometry, Step, global_load, lanes
from ._common import SIGNATURE, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k1"
PARENT = None
TITLE = "naive (x mapped to rows)"
DELTA = "k1 = one thread per C element; threadIdx.x walks rows, so A loads are uncoalesced"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDG.E", "FFMA", "STG.E")

BLOCK = (32, 32)           # (threads_x, threads_y)
TILE_M, TILE_N = 32, 32    # output tile per block
TILE_K = 1                 # no shared-memory phases: every operand comes from global memory
THREAD_M, THREAD_N = 1, 1  # outputs per thread
GEOMETRY = Geometry(block=BLOCK, tile_m=TILE_M, tile_n=TILE_N, tile_k=TILE_K,
                    thread_m=THREAD_M, thread_n=THREAD_N)


def grid(M: int, N: int) -> tuple[int, int]:
    # blockIdx.x runs over rows, as in the seed.
    return (ceil_div(M, TILE_M), ceil_div(N, TILE_N))


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    row = u32(cuda.blockIdx.x * TILE_M + cuda.threadIdx.x)   # x -> row: the bug
    col = u32(cuda.blockIdx.y * TILE_N + cuda.threadIdx.y)
    if row < u32(M) and col < u32(N):
        acc = float32(0.0)
        k = u64(0)
        while k < u64(K):     # unsigned 64-bit offsets: see _common for why not range(K)
            acc += A[u64(row) * u64(K) + k] * B[k * u64(N) + u64(col)]
            k += u64(1)
        store_c(C, u64(row) * u64(N) + u64(col), acc, alpha, beta)   # beta == 0: C not read


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """One k (`ph`) of warp `warp` of block (bx, by): its load of A and its load of B."""
    ls = lanes(g, warp)
    rows = [bx * g.block[0] + tx for tx, ty in ls]      # x -> rows: the bug
    cols = [by * g.block[1] + ty for tx, ty in ls]
    k = ph
    return Step(1, (global_load("A", [r * K + k for r in rows]),
                    global_load("B", [k * N + c for c in cols])), "one k")


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    launch(kernel, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
