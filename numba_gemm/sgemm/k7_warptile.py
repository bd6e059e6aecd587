"""read: diff native/twins/k6.cu native/twins/k7.cu · run: python bench.py --level k7

k7 — warp tiling: a 128×128 block tile, 64×32 per warp, 8×8 per thread as four 4×4 pieces.

k6 gives each of 128 threads an 8×4 strip of a 32×128 tile. k7 grows every level of the
hierarchy (numba_gemm.sgemm._warptile draws it):

* block: 128×128 with 256 threads. Per k a block stages 128 + 128 floats for 16384 FMAs
  (k6: 32 + 128 for 4096): 2.5× fewer global loads and shared stores per FMA. The bytes
  ledger moves: a 128×128 tile reads its panels at 32 FLOP per DRAM byte (k6: 12.8).
* warp: a 64×32 sub-tile whose lanes sit 8 × 4 in 4×4 pieces, so at one k a warp reads
  8 (A) + 4 (B) distinct, consecutive float4s: conflict-free LDS.128, the other lanes
  broadcasts.
* thread: 8×8 = 64 accumulators from 8 + 8 fragment registers; per k 4 LDS.128 for 64 FFMA
  (k6: 3 for 32): the requests/cycles ledger moves from 0.094 to 0.0625 shared loads per FFMA.

Edges and alignment as k6: four specialisations by which operands' rows are 16-byte aligned
(`vector_operands`), 32-bit loads and stores with per-element checks where they are not.
The tile sizes are compile-time constants (`TILING`); docs/LADDER.md has the search that
chose them. 256 threads with launch bounds of 2 blocks per SM: at most 128 registers.

The cost of Python, statically: `python tools/twin_census.py k7` sets the main loop (one
16-deep phase, 1024 FFMA) beside the CUDA C twin's, specialisation by specialisation. Two
changes in _warptile closed most of the gap: A and B read through the read-only path like
the twin (`load4_readonly`: LDG.E.128.CONSTANT), and shared tile indices summed as uint64, so
that their constants fold into immediate offsets (the transposed A stores had an address
register per float). What is left: ptxas recomputes the shared window base (S2UR
SR_CgaCtaId, ULEA) and the B tile's addresses every phase, because NVVM places them inside
the loop.

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from . import _warptile
from ._access import Geometry, Step
from ._common import SIGNATURE, SMEM_ALIGN, float32, grid_limit, launch, u32, u64
from ._loaders import vector_operands     # which operands may move as float4 (k6's rule)

LEVEL = "k7"
PARENT = "k6"
TITLE = "warp tiling: 128×128 blocks, 64×32 warps, 8×8 threads"
DELTA = (
    "k7 = k6 + warp tiling: a 128×128 block tile split into 64×32 warp tiles of 8×4 lanes, each "
    "lane an 8×8 tile as four 4×4 pieces: 4 conflict-free LDS.128 per 64 FFMA"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDG.E.128", "LDS.128", "STS.128", "STG.E.128", "FFMA")

TILING = _warptile.WarpTiling(tile_m=128, tile_n=128, tile_k=16, warp_m=64, warp_n=32, lanes_n=4)
TILE_M, TILE_N, TILE_K = TILING.tile_m, TILING.tile_n, TILING.tile_k
THREAD_M, THREAD_N = TILING.thread_m, TILING.thread_n
BLOCK = TILING.block                     # (32 lanes, 8 warps)
THREADS = TILING.threads
GEOMETRY = Geometry(BLOCK, TILE_M, TILE_N, TILE_K, THREAD_M, THREAD_N)


def grid(M: int, N: int, t: _warptile.WarpTiling = TILING) -> tuple[int, int]:
    return _warptile.grid(M, N, t)


def make_kernel(t: _warptile.WarpTiling, a_vec: bool, bc_vec: bool):
    """The k7 kernel (a Python function, not yet jitted) for tiling `t`, with 128-bit global
    access to A (`a_vec`) and to B and C (`bc_vec`)."""
    p = _warptile.make(t, a_vec, bc_vec)
    # Numba types the closure's free variables: device functions yes, a namespace no
    loaders, load_tiles, store_tiles = p.loaders, p.load_tiles, p.store_tiles
    compute, thread_tile, epilogue = p.compute, p.thread_tile, p.epilogue
    TM, TN, TK, AS = t.tile_m, t.tile_n, t.tile_k, t.a_stride
    NA, NB, TMR, TNR = t.a_loads, t.b_loads, t.thread_m, t.thread_n

    def k7(M, N, K, alpha, A, B, beta, C):
        As = cuda.shared.array((TK, AS), float32, alignment=SMEM_ALIGN)   # As[k, m], A transposed
        Bs = cuda.shared.array((TK, TN), float32, alignment=SMEM_ALIGN)   # Bs[k, n]

        lane = u32(cuda.threadIdx.x)
        warp = u32(cuda.threadIdx.y)
        tid = u32(warp * 32 + lane)
        m, n, k = u32(M), u32(N), u32(K)
        row0 = u32(cuda.blockIdx.y * TM)
        col0 = u32(cuda.blockIdx.x * TN)

        a_r, a_c, b_r, b_c, a_off, b_off = loaders(tid, row0, col0, k, n)
        am, bn = thread_tile(lane, warp)

        ra = cuda.local.array((NA, 4), float32)      # one phase's loads, in flight
        rb = cuda.local.array((NB, 4), float32)
        af = cuda.local.array(TMR, float32)          # this k's A and B fragments
        bf = cuda.local.array(TNR, float32)
        acc = cuda.local.array((TMR, TNR), float32)
        for i in range(TMR):
            for j in range(TNR):
                acc[i, j] = float32(0.0)

        ph = u32(0)
        while ph < k:
            load_tiles(A, B, ra, rb, a_off, b_off,
                       u32(row0 + a_r), u32(ph + a_c), u32(ph + b_r), u32(col0 + b_c), m, n, k)
            store_tiles(As, Bs, u32(0), ra, rb, a_r, a_c, b_r, b_c)
            cuda.syncthreads()
            compute(u32(0), As, Bs, am, bn, af, bf, acc)     # TK steps, unrolled
            cuda.syncthreads()
            ph = u32(ph + TK)
            a_off += u64(TK)
            b_off += u64(TK) * u64(n)

        epilogue(0, C, acc, alpha, beta, row0, col0, am, bn, m, n)

    return k7


SPECIALISATIONS = _warptile.specialisations(LEVEL, make_kernel, TILING)
kernel = SPECIALISATIONS[True, True][1]
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    k7 = SPECIALISATIONS[vector_operands(A, B, C)][1]
    launch(k7, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """What warp `warp` of block (bx, by) touches in phase `ph` (the all-vector kernel)."""
    return _warptile.warp_step(TILING, g, M, N, K, bx, by, warp, ph)
