"""read: diff native/twins/k1.cu native/twins/k2.cu · run: python bench.py --level k2

k2 — coalesced: k1 with threadIdx.x mapped to COLUMNS.

One swapped letter. A warp now covers 32 consecutive columns of one row of C: its B load is
32 consecutive floats (one 128-byte request) and its A load is one float for all 32 threads
(a broadcast, one request). Requests per FMA fall from 33 to 2 — the requests ledger moves;
the bytes ledger (arithmetic intensity 0.25 FLOP/byte) does not.

`kernel_tuned` is the same kernel with its K loop unrolled by 4 by hand, as nvcc unrolls the
seed's K2: the remainder first, then steps of four over running offsets. Once k2 is coalesced
the instruction count per FMA shows in its time: on the H200 (docs/RESULTS.md) the unrolled
loop beat an earlier loop over running offsets, and its hot loop is no longer than nvcc's
build of the seed in SASS instructions per FFMA (the census: `python tools/twin_census.py k2`).
`run(..., tuned=True)` launches it; the level runs `kernel`, the plain loop.

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from ._access import Geometry, Step, global_load, lanes
from ._common import SIGNATURE, ceil_div, float32, grid_limit, launch, store_c, u32, u64

LEVEL = "k2"
PARENT = "k1"
TITLE = "coalesced (x mapped to columns)"
DELTA = "k2 = k1 with threadIdx.x on columns: a warp reads 32 adjacent floats of B, 33 -> 2 requests per FMA"
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDG.E", "FFMA", "STG.E")

BLOCK = (32, 32)
TILE_M, TILE_N = 32, 32
TILE_K = 1
THREAD_M, THREAD_N = 1, 1
GEOMETRY = Geometry(block=BLOCK, tile_m=TILE_M, tile_n=TILE_N, tile_k=TILE_K,
                    thread_m=THREAD_M, thread_n=THREAD_N)


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


@cuda.jit
def kernel(M, N, K, alpha, A, B, beta, C):
    col = u32(cuda.blockIdx.x * TILE_N + cuda.threadIdx.x)   # x -> column: coalesced
    row = u32(cuda.blockIdx.y * TILE_M + cuda.threadIdx.y)
    if row < u32(M) and col < u32(N):
        acc = float32(0.0)
        k = u64(0)
        while k < u64(K):
            acc += A[u64(row) * u64(K) + k] * B[k * u64(N) + u64(col)]
            k += u64(1)
        store_c(C, u64(row) * u64(N) + u64(col), acc, alpha, beta)


@cuda.jit
def kernel_tuned(M, N, K, alpha, A, B, beta, C):
    col = u32(cuda.blockIdx.x * TILE_N + cuda.threadIdx.x)
    row = u32(cuda.blockIdx.y * TILE_M + cuda.threadIdx.y)
    if row < u32(M) and col < u32(N):
        # Element offsets a (row of A) and b (column of B); the K loop is unrolled by 4.
        a = u64(row) * u64(u32(K))
        b = u64(col)
        acc = float32(0.0)
        k = u32(0)
        # K % 4 single steps first, then steps of four that end exactly at K. With the
        # remainder first, a and b are dead after the unrolled loop and become bare pointer
        # increments. u64(u32(N)) is written inside the loops on purpose: hoisted into the
        # loop's preheader, the zero-extension sits next to the pointer stride N*4, which
        # then compiles to mul.wide.u32 and one IMAD.WIDE.U32 per B step. Computed once above
        # the loops (`n = ...`), it costs a two-instruction 64-bit add per step instead.
        while k < (u32(K) & u32(3)):
            acc += A[a] * B[b]
            a += u64(1)
            b += u64(u32(N))
            k += u32(1)
        while k != u32(K):
            acc += A[a] * B[b]
            b += u64(u32(N))
            acc += A[a + u64(1)] * B[b]
            b += u64(u32(N))
            acc += A[a + u64(2)] * B[b]
            b += u64(u32(N))
            acc += A[a + u64(3)] * B[b]
            b += u64(u32(N))
            a += u64(4)
            k += u32(4)
        c = u64(row) * u64(N) + u64(col)
        store_c(C, c, acc, alpha, beta)


# Both kernels, for the SASS census.
KERNELS = {"k2": (kernel, SIGNATURE), "k2_tuned": (kernel_tuned, SIGNATURE)}


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """One k (`ph`) of warp `warp` of block (bx, by): its load of A and its load of B."""
    ls = lanes(g, warp)
    cols = [bx * g.block[0] + tx for tx, ty in ls]      # x -> columns
    rows = [by * g.block[1] + ty for tx, ty in ls]
    k = ph
    return Step(1, (global_load("A", [r * K + k for r in rows]),
                    global_load("B", [k * N + c for c in cols])), "one k")


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None, tuned=False):
    """C = alpha*A@B + beta*C with the plain kernel, or with `kernel_tuned` if `tuned`."""
    k2 = kernel_tuned if tuned else kernel
    launch(k2, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
