"""read: TILING below against k8's (k9 runs k8's) · run: python bench.py --level k10

k10 — k9's code on a wider tile: 128×256 per block, 8×16 per thread, one block per SM.

k9 keeps two blocks of 256 threads on an SM, so its launch bounds cap a thread at 128
registers, and 64 of them hold its 8×8 accumulators. Per k a thread then loads 2 float4s of
A and 2 of B from shared memory for 64 FFMA: one LDS.128 for every 16 FFMA, and the loop
spends about one issue slot in eight on something other than FFMA. cuBLAS's SGEMM on the
H200 (ncu names it: a 256×128×8 tile, 256 threads, 254 registers, one CTA per SM) multiplies
a thread tile twice as large.

k10 changes the tiling and nothing else (its kernel is k9's make_kernel):

    block tile   128×256   =  2 × 4 warp tiles of 64×64     (8 warps, 256 threads)
    thread tile    8×16    =  2 × 4 pieces of 4×4: 6 LDS.128 per k for 128 FFMA (one per 21)
    launch bounds  256 threads, 1 block per SM: up to 255 registers, of which 128 accumulate

Why 128×256 and not cuBLAS's 256×128: k9's clamped-row loads give each thread one float4 of
A per phase (one row offset to keep); a 256-row tile would need two. The grid has half as
many blocks as k9's, and each SM holds one, so a wave is 132 blocks of 32 K multiply-adds per k
instead of 264 of 16 K: the same work in flight, with half the shared-memory traffic per FFMA. What one
block per SM costs: a barrier stops all 8 warps of the SM, where k9's other block kept issuing.

Which ledger moves: the memory-requests ledger (shared loads per FFMA fall by a quarter); the
bytes from L2 fall too (a 128×256 tile reads 3/4 of the A and B bytes per FLOP of 128×128).

Measured: docs/RESULTS.md.
"""
import numpy as np

from . import _warptile
from ._access import Geometry, Step
from ._common import SIGNATURE, grid_limit, launch
from ._loaders import vector_operands     # which operands may move as float4 (k6's rule)
from . import k9_unrolled as k9

LEVEL = "k10"
PARENT = "k9"
TITLE = "k9 on a 128×256 tile: 8×16 per thread, one block per SM (up to 255 registers)"
DELTA = (
    "k10 = k9 on a 128×256 block tile with 8×16 thread tiles and launch bounds of one block "
    "per SM, so 128 accumulators fit: a quarter fewer shared loads per FFMA"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = k9.SASS_MUST_HAVE

TILING = _warptile.WarpTiling(tile_m=128, tile_n=256, tile_k=8, warp_m=64, warp_n=64, lanes_n=4,
                              sm_threads=256)
TILE_M, TILE_N, TILE_K = TILING.tile_m, TILING.tile_n, TILING.tile_k
THREAD_M, THREAD_N = TILING.thread_m, TILING.thread_n
BLOCK = TILING.block
THREADS = TILING.threads
GEOMETRY = Geometry(BLOCK, TILE_M, TILE_N, TILE_K, THREAD_M, THREAD_N)
PHASES_PER_TRIP = k9.PHASES_PER_TRIP


def grid(M: int, N: int, t: _warptile.WarpTiling = TILING) -> tuple[int, int]:
    return _warptile.grid(M, N, t)


SPECIALISATIONS = _warptile.specialisations(LEVEL, k9.make_kernel, TILING)
kernel = SPECIALISATIONS[True, True][1]
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    k10 = SPECIALISATIONS[vector_operands(A, B, C)][1]
    launch(k10, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """k8's accesses on k10's tiling: phase ph multiplies buffer ph % 2."""
    kb = ph % 2 * TILE_K
    return _warptile.warp_step(TILING, g, M, N, K, bx, by, warp, ph, buffers=2, load_kb=kb, store_kb=kb)
