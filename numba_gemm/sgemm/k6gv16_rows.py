"""read: diff native/twins/k6gv.cu native/twins/k6gv16.cu · run: python bench.py --level k6gv16

k6gv16 — k6gv at 16 rows: B still read once for M ≤ 16.

k6gv's tile is 8 rows high, so at 9 ≤ M ≤ 16 it would read B twice, and the level refuses
those shapes; k5sk serves them, through a 32-row tile that stages B in shared memory. At
M = 16 a float of B feeds 16 multiply-adds, still few enough for the product to be B's bytes
over DRAM bandwidth (16×8192×8192 fp32: 256 MiB, ~65 µs at 4.13 TB/s, against ~32 µs for its
2.1 GFLOP at the FFMA peak of 132 SMs × 128 lanes × 2 × 1.98 GHz) — if the kernel keeps B's
loads in flight as k6gv does. k6gv16 is k6gv's kernel (`k6gv_skinny.make_kernel`) with `rows` = 16:

    tile 16 rows × 128 columns; block (32, 8); gridDim = (N/128, M/16, S)
    lane l owns columns 4l .. 4l+3 and all 16 rows: 64 accumulators (k6gv: 32)
    phase (64 k): the same 8 LDG.128 of B per warp; A's 16×64 chunk is four floats per thread;
                  each k is four broadcast LDS.128 of A (rows 0..15) for 64 FFMA
    end of slice: the warps' partial tiles meet in shared memory 8 rows at a time (two rounds
                  through k6gv's 32 KB buffer, so the CTA stays under 48 KB of static shared
                  memory); warp w owns rows w and w + 8

The cost is registers: 64 accumulators and the phase's 32 floats of B must fit k6gv's 128
(256 threads, 2 CTAs per SM), or B's loads in flight would halve. The census says what the
compiler made of it (python bench.py --level k6gv16 --sass). Measured on the H200:
docs/LADDER.md and docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from ..ptx.intrinsics import SIMULATOR
from . import _splitk_parts
from . import k6gv_skinny as gv
from ._access import Geometry, Step
from ._loaders import vector_operands
from ._splitk_parts import launch_in_kernel

LEVEL = "k6gv16"
PARENT = "k6gv"
TITLE = "k6gv at 16 rows: B read once for M ≤ 16"
DELTA = ("k6gv16 = k6gv + a 16-row tile: each lane owns 4 columns and 16 rows (64 accumulators), "
         "four broadcast LDS.128 of A per k, the warps' sum in two 8-row rounds")
DTYPES = (np.float32,)
SASS_MUST_HAVE = gv.SASS_MUST_HAVE

MAX_M = TILE_M = 16                          # one row tile: B is read once
TILE_N, TILE_K, BLOCK, THREADS = gv.TILE_N, gv.TILE_K, gv.BLOCK, gv.THREADS
THREAD_M, THREAD_N = TILE_M // gv.WARPS, gv.THREAD_N   # after the block's sum: 2 rows × 4 columns
GEOMETRY = Geometry(block=BLOCK, tile_m=TILE_M, tile_n=TILE_N, tile_k=TILE_K,
                    thread_m=THREAD_M, thread_n=THREAD_N)
CTAS_PER_SM = gv.CTAS_PER_SM                 # 128 registers a thread, 40 KB of shared memory
SPLIT_IN_KERNEL = True

# An int forces the split count (benchmarks); None: plan_splits. Read when a call's launches are made.
SPLITS = None

_bounded = cuda.jit if SIMULATOR else cuda.jit(launch_bounds=(THREADS, CTAS_PER_SM))
_vector = _bounded(gv.make_kernel(True, TILE_M))
_edge = _bounded(gv.make_kernel(False, TILE_M))

# k6gv's rule: rows of B and C 16-byte aligned take the float4 kernel
SPECIALISATIONS = {(a, True): ("k6gv16", _vector) for a in (True, False)}
SPECIALISATIONS.update({(a, False): ("k6gv16_edge", _edge) for a in (True, False)})
SIGNATURE = gv.SIGNATURE
kernel = _vector
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def grid(M: int, N: int) -> tuple[int, int]:
    return gv.grid(M, N, TILE_M)


def plan_splits(M: int, N: int, K: int, sms: int = 132) -> int:
    """The number of K slices for an M×N×K product on a GPU of `sms` SMs (1: no split)."""
    return gv.plan_splits(M, N, K, sms, TILE_M)


def split_plan(M: int, N: int, K: int, splits: int | None = None) -> tuple[int, int]:
    """(S, kslice) for a forced `splits`, else SPLITS, else plan_splits."""
    return _splitk_parts.slices(LEVEL, K, TILE_K, SPLITS if splits is None else splits,
                                lambda: plan_splits(M, N, K))


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """k6gv's phase at this level's tile: four floats of A per thread, four broadcasts per k."""
    return gv.warp_step(M, N, K, bx, by, warp, ph, g)


def unsupported(M: int, N: int, K: int):
    return gv.refusal(LEVEL, MAX_M, M, N, "k5sk (skinny M), k8/k8sk")


def run(A, B, C, alpha, beta, stream=None, splits=None):
    M, K = A.shape
    N = B.shape[1]
    S, kslice = split_plan(M, N, K, splits)
    launch_in_kernel(SPECIALISATIONS[vector_operands(A, B, C)][1], _splitk_parts.grid(grid(M, N), S),
                     BLOCK, A, B, C, alpha, beta, stream, kslice)
