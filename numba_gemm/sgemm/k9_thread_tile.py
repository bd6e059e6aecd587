"""read: diff native/twins/k8.cu native/twins/k9.cu · run: python bench.py --level k9

k9 — k8 with cuBLAS's SGEMM tile: a 256×128 block, 128 outputs per thread, one CTA per SM.

Under ncu at 4096³ on the H200 (docs/RESULTS.md, sixteenth run) cuBLAS's SGEMM kernel is
`…tilesize256x128x8_stage3_warpsize4x2x1_ffma`: 256 threads in 4 × 2 warps of 64×64, 254
registers, one CTA per SM. k8 runs 128×128 blocks of 8 warps of 64×32 at 127 registers, two CTAs
per SM. Per k a lane of k8 reads 2 + 2 float4s from shared memory for 8 × 8 = 64 FFMA; with a
64×64 warp tile it reads 2 + 4 for 8 × 16 = 128. So per FFMA:

    k8: 4 LDS.128 / 64 FFMA = 1/16        k9: 6 LDS.128 / 128 FFMA = 1/21.3

and a block's tiles bring 256 + 128 floats per k for 32768 FMAs where k8's bring 256 for 16384:
1.33× fewer shared-memory and L2 bytes per FLOP. ncu measured k8's L1/TEX pipe 70.8 % busy and
its FFMA pipe 81.1 %, cuBLAS's 61.4 % and 86.8 %: the loads are what k8's issue slots go to.

Nothing else changes: k8's kernel (numba_gemm.sgemm._warptile) built for another WarpTiling,
with launch bounds of one 256-thread block per SM, so ptxas may use up to 255 registers; the 128
accumulators compile to 213 registers and no local memory. One CTA per SM keeps 8 warps where
k8 keeps 16: the latency that the second CTA hid is left to the double buffer alone. At 4096³
the grid is 16 × 32 = 512 blocks, 3.9 waves of 132, as cuBLAS's.

Measured: docs/RESULTS.md.
"""
import numpy as np

from ._access import Geometry, Step
from . import _warptile
from . import k8_double_buffer as k8
from ._common import SIGNATURE, grid_limit, launch
from ._loaders import vector_operands     # which operands may move as float4 (k6's rule)

LEVEL = "k9"
PARENT = "k8"
TITLE = "cuBLAS's SGEMM tile: a 256×128 block, 128 outputs per thread, one CTA per SM"
DELTA = (
    "k9 = k8 with 64×64 warp tiles in a 256×128 block: 8 × 16 outputs per thread (6 LDS.128 per "
    "128 FFMA instead of 4 per 64), launch bounds of one CTA per SM for the 128 accumulators"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = k8.SASS_MUST_HAVE

TILING = _warptile.WarpTiling(tile_m=256, tile_n=128, tile_k=8, warp_m=64, warp_n=64, lanes_n=4)
CTAS_PER_SM = 1                        # 256 threads × up to 255 registers
BUFFERS = 2                            # k8's two shared copies of each tile
TILE_M, TILE_N, TILE_K = TILING.tile_m, TILING.tile_n, TILING.tile_k
THREAD_M, THREAD_N = TILING.thread_m, TILING.thread_n
BLOCK = TILING.block
THREADS = TILING.threads
GEOMETRY = Geometry(BLOCK, TILE_M, TILE_N, TILE_K, THREAD_M, THREAD_N)

SPECIALISATIONS = _warptile.specialisations(LEVEL, k8.make_kernel, TILING, CTAS_PER_SM)
kernel = SPECIALISATIONS[True, True][1]
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def grid(M: int, N: int) -> tuple[int, int]:
    return _warptile.grid(M, N, TILING)


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    k9 = SPECIALISATIONS[vector_operands(A, B, C)][1]
    launch(k9, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """k8's accesses for this tiling: tiles of phase ph live in buffer ph % 2."""
    kb = ph % BUFFERS * TILE_K
    return _warptile.warp_step(TILING, g, M, N, K, bx, by, warp, ph, buffers=BUFFERS, load_kb=kb, store_kb=kb)
