"""read: diff native/twins/k5.cu native/twins/k5sk.cu · run: python bench.py --level k5sk

k5sk — split-K for skinny M: k5's 32×128 tile, S CTAs per tile over slices of K.

At M ≤ 32 a product is bandwidth-bound: each element of B is used M times, so the time is
B's bytes over DRAM bandwidth (16×8192×8192 fp32: 256 MB, 62 µs at 4.13 TB/s) if the kernel
keeps enough loads in flight and does not run out of FFMA issue first. k8's 128×128 tile
computes 128 rows for 16 (8× the FFMA) and gives 64 CTAs; k5's 32×128 tile wastes at most 31
rows, but 16×8192 is still only 64 CTAs of 128 threads on a GPU that holds 660 of them (132
SMs × CTAS_PER_SM = 5, what k5sk's registers allow), and each one walks all of K. k5sk cuts K:

    gridDim = (N / 128, M / 32, S)             # blockIdx.z = the slice of K
    slice z: k in [z·kslice, min(K, (z+1)·kslice)), kslice a whole number of 32-deep K tiles
    CTA (x, y, z): k5's phases over its slice -> raw fp32 partials at P[z·M·N + row·N + col]
    then numba_gemm.splitk.reduce: C = alpha·(P_0 + ... + P_{S-1}) + beta·C, in that order

and, because skinny M is what it is for, a warp whose 8 rows all lie at or past M skips the
multiply (warp-uniform: a warp is one ty), so 16 rows run 2 of the 4 warps' FFMA, 8 rows one;
those warps still load their share of the tiles. The kernel is k5's body
(`k5_outer.multiply`, over a K range and into a matrix at an offset); with S == 1 it takes
all of K and writes C with alpha and beta itself: one launch, no workspace.

Why k5 and not k6 as the base: the SASS census (`python tools/twin_census.py k5 k6`) gives k6's
all-float4 main loop fewer instructions per 1024 FFMA and fewer registers than k5's, i.e. less
issue per phase, but k6 is four specialisations with an interior/border split per phase
(k6_vectorized.make_kernel), each needing the K range; at M ≤ 16 the bound is DRAM bytes, the same for both,
and the FFMA that matter are the padding rows' (skipped here by warp). At M = 32 (16 FLOP per
byte of B, the H200's FP32 balance) issue starts to count: k6sk is the next step if the H200
shows k5sk short of bandwidth there.

Split count: numba_gemm.splitk.choose_splits with the GPU counted in resident CTAs (SMs ×
CTAS_PER_SM). 16×8192×8192: 64 tiles × 10 slices; 128×4096×4096: 128 × 5; 64×64×2**20:
2 × 16. Ledger: the phase is k5's (same `warp_step`); CTAs per wave ×S; DRAM + S·M·N·4 bytes
written and read back (16×8192, S = 10: 5.2 MB each way against B's 256 MB). Determinism as
k8sk: no atomics, a fixed reduction order.

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from . import _splitk_parts
from . import k5_outer as k5
from ._access import Step
from ._common import grid_limit, u32, u64
from ._splitk_parts import SIGNATURE, launch   # (M, N, K, kslice, alpha, A, B, beta, C)
from ._splitk_parts import HELPER_KERNELS  # noqa: F401  (the reduction, for the warm-up)

LEVEL = "k5sk"
PARENT = "k5"
TITLE = "split-K for skinny M: 32×128 tiles, S slices of K, fixed-order reduce"
DELTA = (
    "k5sk = k5 + split-K: gridDim.z = S slices of K into fp32 partials, one fixed-order reduction "
    "applies alpha and beta (S = 1: k5's epilogue); warps wholly below M skip the multiply"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDS", "STS", "BAR.SYNC", "FFMA")

TILE_M, TILE_N, TILE_K = k5.TILE_M, k5.TILE_N, k5.TILE_K
THREAD_M, THREAD_N = k5.THREAD_M, k5.THREAD_N
BLOCK = k5.BLOCK
GEOMETRY = k5.GEOMETRY
# CTAs of 128 threads an SM holds: 65536 registers / (96 per thread (the census) × 128)
CTAS_PER_SM = 5

# An int forces the split count (benchmarks); None: plan_splits. Read when a call's launches
# are made: gemm() records them once per shape and operands, so set it before that first call.
SPLITS = None


def grid(M: int, N: int) -> tuple[int, int]:
    return k5.grid(M, N)


# plan_splits and split_plan repeat the other split level's on purpose: they are this level's
# surface (its tile, its residency, its SPLITS); the logic is _splitk_parts'.
def plan_splits(M: int, N: int, K: int, sms: int = 132) -> int:
    """The number of K slices for an M×N×K product on a GPU of `sms` SMs (1: no split)."""
    gx, gy = grid(M, N)
    return _splitk_parts.plan(gx * gy, K, TILE_K, M, N, sms, CTAS_PER_SM)


def split_plan(M: int, N: int, K: int, splits: int | None = None) -> tuple[int, int]:
    """(S, kslice): slices and K elements per slice (a multiple of TILE_K) for a forced
    `splits`, else SPLITS, else plan_splits. A forced count is rounded so that no slice is
    empty: S = ceil(k_tiles / ceil(k_tiles / splits))."""
    return _splitk_parts.slices(LEVEL, K, TILE_K, SPLITS if splits is None else splits,
                                lambda: plan_splits(M, N, K))


@cuda.jit
def kernel(M, N, K, kslice, alpha, A, B, beta, C):
    z = u32(cuda.blockIdx.z)
    # this CTA's slice [k_lo, k_hi): z·kslice < K < 2**31, so neither sum wraps in 32 bits
    k_lo = u32(z * u32(kslice))
    k_hi = u32(k_lo + u32(kslice))
    if k_hi > u32(K):
        k_hi = u32(K)
    # slice z's M×N matrix: 64-bit, as M·N may pass 2**31
    k5.multiply(M, N, K, k_lo, k_hi, u64(z) * u64(u32(M)) * u64(u32(N)), alpha, A, B, beta, C, True)


KERNELS = {LEVEL: (kernel, SIGNATURE)}


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None, splits=None):
    M, K = A.shape
    N = B.shape[1]
    S, kslice = split_plan(M, N, K, splits)
    launch(kernel, _splitk_parts.grid(grid(M, N), S), BLOCK, A, B, C, alpha, beta, stream, kslice)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """k5's accesses for phase ph (a slice runs k5's phases over its part of K)."""
    return k5.warp_step(M, N, K, bx, by, warp, ph, g)
