"""read: diff native/twins/k8.cu native/twins/k9.cu · run: python bench.py --level k9

k9 — k8 with its two buffers written out: every shared address a constant, most loads unchecked.

k8 issues about 587 instructions per 8-deep phase for its 512 FFMA, and on the H200 it keeps
the issue slots about 93 % busy (ncu: FFMA pipe 81 % of peak at 4096³), so the instructions
that are not FFMA are what is left to cut. The SASS census of k8's loop names them:

    the buffer index    kb = TK - kb each phase: every LDS and STS address is rebuilt from it
                        (SHF, IMAD, LOP3, LEA ×2 before the multiply, as many after it)
    the checks          each global load tests its row against M and its k against K, and a
                        load that fails must give zeros: ISETP, predicated LDC and address
                        arithmetic, and CS2R zeroing of the load registers, every phase

k9 changes the loop, not the tile (k8's 128×128×8, 8×8 per thread):

    two phases per trip     the first multiplies buffer 0 and fills buffer 1, the second the
                            other way round, so both buffers are fixed: base register + constant
    clamped rows            a thread whose row of A lies past M loads row M−1 instead (and a
                            float4 of B past N the last one): what it loads only feeds
                            accumulators the epilogue never stores, and every load is in bounds
    unchecked inside K      while the next phase lies wholly inside K its loads carry no check
                            at all; the last phase or two take k8's checked loads (against K)

Which ledger moved: none of the three (they price loads and FFMA, not the instructions between
them); the SASS census's share of FFMA in the main loop did, 0.872 -> 0.884.

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from . import _warptile
from ._access import Geometry, Step
from ._common import SIGNATURE, SMEM_ALIGN, float32, grid_limit, launch, u32
from ._loaders import vector_operands     # which operands may move as float4 (k6's rule)
from . import k8_double_buffer as k8

LEVEL = "k9"
PARENT = "k8"
TITLE = "k8 with its two buffers written out: constant shared addresses, unchecked loads inside"
DELTA = (
    "k9 = k8 + two phases per loop trip (each buffer at a fixed address) and the rows past M "
    "clamped, so loads inside K need no check"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = k8.SASS_MUST_HAVE

TILING = k8.TILING
TILE_M, TILE_N, TILE_K = TILING.tile_m, TILING.tile_n, TILING.tile_k
THREAD_M, THREAD_N = TILING.thread_m, TILING.thread_n
BLOCK = TILING.block
THREADS = TILING.threads
GEOMETRY = Geometry(BLOCK, TILE_M, TILE_N, TILE_K, THREAD_M, THREAD_N)
PHASES_PER_TRIP = 2               # the main loop's body: one phase per buffer


def grid(M: int, N: int, t: _warptile.WarpTiling = TILING) -> tuple[int, int]:
    return _warptile.grid(M, N, t)


def make_kernel(t: _warptile.WarpTiling, a_vec: bool, bc_vec: bool):
    """The k9 kernel (not yet jitted) for tiling `t`; arguments as k7's make_kernel."""
    p = _warptile.make(t, a_vec, bc_vec)
    loaders, thread_tile, pipeline, epilogue = p.loaders, p.thread_tile, p.unrolled_buffers, p.epilogue
    TM, TN, TK, AS = t.tile_m, t.tile_n, t.tile_k, t.a_stride
    TK2 = 2 * TK
    NA, NB, TMR, TNR = t.a_loads, t.b_loads, t.thread_m, t.thread_n

    def k9(M, N, K, alpha, A, B, beta, C):
        As = cuda.shared.array((TK2, AS), float32, alignment=SMEM_ALIGN)   # As[k, m]
        Bs = cuda.shared.array((TK2, TN), float32, alignment=SMEM_ALIGN)   # Bs[k, n]

        lane = u32(cuda.threadIdx.x)
        warp = u32(cuda.threadIdx.y)
        tid = u32(warp * 32 + lane)
        m, n, k = u32(M), u32(N), u32(K)
        row0 = u32(cuda.blockIdx.y * TM)
        col0 = u32(cuda.blockIdx.x * TN)

        a_r, a_c, b_r, b_c, _, _ = loaders(tid, row0, col0, k, n)
        am, bn = thread_tile(lane, warp)

        ra = cuda.local.array((NA, 4), float32)
        rb = cuda.local.array((NB, 4), float32)
        af = cuda.local.array(TMR, float32)
        bf = cuda.local.array(TNR, float32)
        acc = cuda.local.array((TMR, TNR), float32)
        for i in range(TMR):
            for j in range(TNR):
                acc[i, j] = float32(0.0)

        pipeline(A, B, As, Bs, ra, rb, af, bf, acc, a_r, a_c, b_r, b_c, am, bn, row0, col0, m, n, k,
                 u32(0), k)
        epilogue(0, C, acc, alpha, beta, row0, col0, am, bn, m, n)

    return k9


SPECIALISATIONS = _warptile.specialisations(LEVEL, make_kernel, TILING)
kernel = SPECIALISATIONS[True, True][1]
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    k9 = SPECIALISATIONS[vector_operands(A, B, C)][1]
    launch(k9, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """k8's accesses (the same tiles in the same buffers)."""
    return k8.warp_step(M, N, K, bx, by, warp, ph, g)
