"""read: diff native/twins/k7.cu native/twins/k8.cu · run: python bench.py --level k8

k8 — double buffering: the next K slice travels global -> registers while this one is multiplied.

k7's phase is load, barrier, multiply, barrier: while a block waits for its loads (hundreds
of cycles from L2 or DRAM) its warps have nothing to multiply, and only the other block on
the SM hides the wait. k8 keeps two copies of each tile in shared memory and, per phase:

    issue the global loads of phase p+1 into registers   (in flight ...)
    multiply phase p from buffer p % 2                   (... during these TK·64 FFMA)
    store the registers into buffer (p+1) % 2
    one barrier

One barrier per K step instead of two: buffer (p+1) % 2 was last read in phase p-1, which
every thread finished before the barrier that ended it, and the barrier ending phase p
makes the new tiles visible before phase p+1 reads them. The last phase's loads fall
outside K, so their checks give zeros and touch no memory.

Same warp tiling, specialisations and edge handling as k7 (numba_gemm.sgemm._warptile), with
8-deep phases where k7's are 16 deep: a small search over K depth and warp shape
(tools/k7_tiles.py, on the H200 at 4096³) put the 8-deep k8 ahead of the 16-deep one, and it
keeps 8 floats per thread in flight instead of 16 — at 16 the kernel sat at the 128-register
cap and k8_edge spilled. Shared memory: 2 copies of 8-deep tiles, 16.6 KB.
The instructions per FMA are k7's, but the 8-deep A load spans 16 rows (the microbenchmarks
price ldg128_x16 above k7's ldg128_x8: numba_gemm/data/h200_costs.json), so the cycles ledger
predicts k8 a little slower than k7; what moves the other way is the stall it does not model:
the load latency now overlaps the FFMAs of the same block.

Statically, `python tools/twin_census.py k8` sets the main loop (512 FFMA per phase), its
registers and local memory beside the CUDA C twin's, specialisation by specialisation.

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from . import _warptile
from ._access import Geometry, Step
from ._common import SIGNATURE, SMEM_ALIGN, float32, grid_limit, launch, u32
from ._loaders import vector_operands     # which operands may move as float4 (k6's rule)

LEVEL = "k8"
PARENT = "k7"
TITLE = "double buffering: load the next K slice during the multiply"
DELTA = (
    "k8 = k7 + double buffering: two shared buffers, the next phase loaded global -> registers "
    "while the current one is multiplied; one barrier per K step"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDG.E.128", "LDS.128", "STS.128", "STG.E.128", "FFMA")

TILING = _warptile.WarpTiling(tile_m=128, tile_n=128, tile_k=8, warp_m=64, warp_n=32, lanes_n=4)
TILE_M, TILE_N, TILE_K = TILING.tile_m, TILING.tile_n, TILING.tile_k
THREAD_M, THREAD_N = TILING.thread_m, TILING.thread_n
BLOCK = TILING.block
THREADS = TILING.threads
GEOMETRY = Geometry(BLOCK, TILE_M, TILE_N, TILE_K, THREAD_M, THREAD_N)


def grid(M: int, N: int, t: _warptile.WarpTiling = TILING) -> tuple[int, int]:
    return _warptile.grid(M, N, t)


def make_kernel(t: _warptile.WarpTiling, a_vec: bool, bc_vec: bool):
    """The k8 kernel (not yet jitted) for tiling `t`; arguments as k7's make_kernel."""
    p = _warptile.make(t, a_vec, bc_vec)
    loaders, thread_tile = p.loaders, p.thread_tile
    double_buffered, epilogue = p.double_buffered, p.epilogue
    TM, TN, TK, AS = t.tile_m, t.tile_n, t.tile_k, t.a_stride
    TK2 = 2 * TK
    NA, NB, TMR, TNR = t.a_loads, t.b_loads, t.thread_m, t.thread_n

    def k8(M, N, K, alpha, A, B, beta, C):
        # two buffers each: k rows [0, TK) and [TK, 2·TK)
        As = cuda.shared.array((TK2, AS), float32, alignment=SMEM_ALIGN)   # As[k, m]
        Bs = cuda.shared.array((TK2, TN), float32, alignment=SMEM_ALIGN)   # Bs[k, n]

        lane = u32(cuda.threadIdx.x)
        warp = u32(cuda.threadIdx.y)
        tid = u32(warp * 32 + lane)
        m, n, k = u32(M), u32(N), u32(K)
        row0 = u32(cuda.blockIdx.y * TM)
        col0 = u32(cuda.blockIdx.x * TN)

        a_r, a_c, b_r, b_c, a_off, b_off = loaders(tid, row0, col0, k, n)
        am, bn = thread_tile(lane, warp)

        ra = cuda.local.array((NA, 4), float32)
        rb = cuda.local.array((NB, 4), float32)
        af = cuda.local.array(TMR, float32)
        bf = cuda.local.array(TNR, float32)
        acc = cuda.local.array((TMR, TNR), float32)
        for i in range(TMR):
            for j in range(TNR):
                acc[i, j] = float32(0.0)

        # the pipeline over all of K (k8sk runs it over a slice)
        double_buffered(A, B, As, Bs, ra, rb, af, bf, acc, a_r, a_c, b_r, b_c, a_off, b_off,
                        am, bn, row0, col0, m, n, k, u32(0), k)

        epilogue(0, C, acc, alpha, beta, row0, col0, am, bn, m, n)

    return k8


SPECIALISATIONS = _warptile.specialisations(LEVEL, make_kernel, TILING)
kernel = SPECIALISATIONS[True, True][1]
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    k8 = SPECIALISATIONS[vector_operands(A, B, C)][1]
    launch(k8, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """k7's accesses for phase ph, whose tiles live in buffer ph % 2 (stored there during
    phase ph - 1). A buffer is TILE_K·132·4 bytes, a multiple of 128: the same banks as k7."""
    kb = ph % 2 * TILE_K
    return _warptile.warp_step(TILING, g, M, N, K, bx, by, warp, ph, buffers=2, load_kb=kb, store_kb=kb)
