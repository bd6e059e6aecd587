"""read: diff native/twins/k8.cu native/twins/k9.cu · run: python bench.py --level k9

k9 — asynchronous copies: K tiles travel global -> shared by cp.async, 4 stages ahead.

k8 moves each K tile through registers: LDG into ra/rb during the multiply, then STS (four
scalar STS per A float4, to transpose it) and a barrier. Its prefetch distance is one tile,
and the loads' results hold registers until they are stored. k9 issues `cp.async` (SASS
LDGSTS, numba_gemm.ptx.cp_async16): the copy writes shared memory itself, so

* no staging registers and no STS in the K loop: per thread per tile 2 LDGSTS instead of
  2 LDG.128 + 4 STS + 1 STS.128;
* the copies run STAGES - 1 = 3 tiles ahead of the multiply (a ring of 4 stages, 32.5 KB
  per block), tracked by commit groups: `cp.async.wait_group 2` + one barrier per tile.

cp.async cannot transpose, so A is stored k-contiguous in chunks of 4 k, and a lane's 8 rows
are 8 apart so that the 8 lanes of a column read 8 consecutive chunks: conflict-free LDS.128,
16 per 4 k as in k8 (numba_gemm.sgemm._async_stages says why, and the CUDA C of
native/twins/async_stages.cuh). The cost: a lane holds 4 k of its 8 rows (32 registers) where
k8 holds 1 k (8). Edges as k8: four specialisations by `vector_operands`; where rows are not
16-byte aligned a float4 is four 4-byte cp.async (`cp_async4`, .ca); every copy is checked
and becomes a zero-fill outside the matrix.

Ledgers: the requests and bytes ledgers are k8's (the same loads); what moves is the shared
stores (one 16-byte store per float4 of A, not four 4-byte ones) and the stall none of them
models, the load latency, now covered by three tiles of multiply instead of one.

Statically: `python tools/twin_census.py k9` (LDGSTS in the main loop, registers, no local
memory) beside the CUDA C twin. Not yet measured on the H200; auto ranks it after the
calibrated levels until it is (numba_gemm/data/h200_auto.json has no k9).
"""
import functools

import numpy as np
from numba import cuda

from ..ledgers.access import Geometry, Step
from . import _async_stages, _warptile
from ._common import SIGNATURE, SMEM_ALIGN, float32, grid_limit, launch, u32
from ._loaders import vector_operands     # which operands may move as float4 (k6's rule)

LEVEL = "k9"
PARENT = "k8"
TITLE = "cp.async: a 4-stage ring of K tiles copied global -> shared"
DELTA = (
    "k9 = k8 + cp.async: K tiles copied global -> shared without registers (LDGSTS), 3 tiles "
    "ahead in a 4-stage ring; A kept k-contiguous in chunks of 4 k, a lane's rows 8 apart"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDGSTS", "LDS.128", "STG.E.128", "FFMA")

TILING = _warptile.WarpTiling(tile_m=128, tile_n=128, tile_k=8, warp_m=64, warp_n=32, lanes_n=4)
STAGES = 4
TILE_M, TILE_N, TILE_K = TILING.tile_m, TILING.tile_n, TILING.tile_k
THREAD_M, THREAD_N = TILING.thread_m, TILING.thread_n
BLOCK = TILING.block
THREADS = TILING.threads
GEOMETRY = Geometry(BLOCK, TILE_M, TILE_N, TILE_K, THREAD_M, THREAD_N)
SMEM_BYTES = _async_stages.smem_bytes(TILING, STAGES)      # static shared memory: at most 48 KB


def grid(M: int, N: int, t: _warptile.WarpTiling = TILING) -> tuple[int, int]:
    return _warptile.grid(M, N, t)


def make_kernel(t: _warptile.WarpTiling, a_vec: bool, bc_vec: bool, stages: int = STAGES):
    """The k9 kernel (not yet jitted) for tiling `t`; arguments as k8's make_kernel."""
    p = _async_stages.make(t, a_vec, bc_vec, stages)
    loaders, thread_tile, pipelined, epilogue = p.loaders, p.thread_tile, p.pipelined, p.epilogue
    TM, TN, RING, TMR, TNR = t.tile_m, t.tile_n, p.ring_floats, t.thread_m, t.thread_n

    def k9(M, N, K, alpha, A, B, beta, C):
        # the ring: `stages` × (A chunks [TK/4][TM][4], then B [TK][TN])
        smem = cuda.shared.array(RING, float32, alignment=SMEM_ALIGN)

        lane = u32(cuda.threadIdx.x)
        warp = u32(cuda.threadIdx.y)
        tid = u32(warp * 32 + lane)
        m, n, k = u32(M), u32(N), u32(K)
        row0 = u32(cuda.blockIdx.y * TM)
        col0 = u32(cuda.blockIdx.x * TN)

        a_r, a_c, b_r, b_c, a_off, b_off = loaders(tid, row0, col0, k, n)
        am, bn = thread_tile(lane, warp)

        af = cuda.local.array((TMR, 4), float32)       # 4 k of each of the lane's rows
        bf = cuda.local.array(TNR, float32)
        acc = cuda.local.array((TMR, TNR), float32)
        for i in range(TMR):
            for j in range(TNR):
                acc[i, j] = float32(0.0)

        pipelined(A, B, smem, af, bf, acc, a_r, a_c, b_r, b_c, a_off, b_off, am, bn, row0, col0, m, n, k)

        epilogue(0, C, acc, alpha, beta, row0, col0, am, bn, m, n)

    return k9


SPECIALISATIONS = _warptile.specialisations(LEVEL, make_kernel, TILING)
kernel = SPECIALISATIONS[True, True][1]
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


STATIC_SMEM = 48 * 1024      # bytes: the most a static shared array may hold


@functools.lru_cache(maxsize=None)
def variant(stages: int = STAGES, tile_k: int = TILE_K) -> dict:
    """The four specialisations of k9 with another ring depth or K-tile depth, jitted on first
    use (the shipped ones are SPECIALISATIONS): the experiments of the k9 measurements, run as
    run(..., stages=2) or tools/hopper_top.py's k9:stages=2:tile_k=16."""
    if (stages, tile_k) == (STAGES, TILE_K):
        return SPECIALISATIONS
    t = _warptile.WarpTiling(tile_m=TILE_M, tile_n=TILE_N, tile_k=tile_k, warp_m=TILING.warp_m,
                             warp_n=TILING.warp_n, lanes_n=TILING.lanes_n)
    if _async_stages.smem_bytes(t, stages) > STATIC_SMEM:
        raise ValueError(f"k9 with {stages} stages of {tile_k}-deep tiles needs "
                         f"{_async_stages.smem_bytes(t, stages)} bytes of static shared memory (at most {STATIC_SMEM})")
    name = f"{LEVEL}_s{stages}_k{tile_k}"
    return _warptile.specialisations(name, functools.partial(make_kernel, stages=stages), t)


def run(A, B, C, alpha, beta, stream=None, stages: int = STAGES, tile_k: int = TILE_K):
    k9 = variant(stages, tile_k)[vector_operands(A, B, C)][1]
    launch(k9, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """K tile ph in stage ph % STAGES: the loaders' float4s as k8's, each one 16-byte shared
    store (its cp.async), and per 4 k 8 LDS.128 of A chunks + 8 of B."""
    return _async_stages.warp_step(TILING, g, STAGES, M, N, K, bx, by, warp, ph)
