"""read: diff native/twins/k8.cu native/twins/k8sk.cu · run: python bench.py --level k8sk

k8sk — split-K: S CTAs per output tile, each running k8's pipeline over one slice of K.

k8 gives each 128×128 tile of C to one CTA, which walks all of K. When M·N is small the grid
is small: 16×8192 is 64 CTAs, 512×4096 128, on a GPU that holds 264 of them at once (132 SMs
× 2 blocks of 256 threads under k8's launch bounds), so most SMs idle or run one CTA with
nothing to hide its load latency behind. K is the one long axis left, so k8sk cuts it:

    gridDim = (N / 128, M / 128, S)            # S slices of K, blockIdx.z = the slice
    slice z: k in [z·kslice, min(K, (z+1)·kslice)), kslice a whole number of k8's K tiles
    CTA (x, y, z): k8's double-buffered loop over its slice -> raw fp32 partials (no alpha,
                   beta) at P[z·M·N + row·N + col], P = numba_gemm.runtime.workspace.partials(C, S, M, N)
    then numba_gemm.splitk.reduce: C = alpha·(P_0 + P_1 + ... + P_{S-1}) + beta·C, in that order

The kernel is k8's, built from the same parts (numba_gemm.sgemm._warptile: its pipeline over
a K range, `double_buffered`, whose last prefetch of a slice reads the next slice's first tile
into the buffer that is not read again, and its epilogue into a matrix at an offset,
`epilogue_at`): the partial store is k8's epilogue with alpha = 1 and beta = 0 (exact: 1·x is x, and C is not
read) aimed at the workspace. With S == 1 the same kernel takes the whole of K and writes C
with alpha and beta itself: one launch, no workspace, k8's result bit for bit.

The split count (`plan_splits`, or `SPLITS` / run(splits=) to force one) is
numba_gemm.splitk.choose_splits with the GPU counted in resident CTAs (SMs × CTAS_PER_SM):
a wave is what the SMs hold at once, and a skinny shape needs them all to keep enough loads in
flight. So 16×8192×8192: 64 tiles × 4 slices = 256 CTAs; 128×4096×4096: 32 × 8; 512×4096×4096:
128 × 2; 64×64×2**20: 1 × 16 (choose_splits' MAX_SPLITS). Shapes with 132 tiles or more, or
fewer than 8 K tiles (K ≤ 56), are not split: there k8sk is k8.

Determinism: no atomics; each partial is one CTA's fixed-order sum and the reduction adds the
slices in z order, so the result has the same bits on every run (and a captured call replays
exactly). Ledger: the phase is k8's (same `warp_step`); what moves is CTAs per wave (×S) and
DRAM traffic: + S·M·N·4 bytes written and read back (16×8192, S = 4: 2 MB each way, against
B's 256 MB), + one reduce launch.

A narrower tile: 128×64 with 4 warps (the same 64×32 warp tiles). k8sk takes it where N ≤ 64,
where the 128-wide tile computes as many columns past N as inside it: 1.75× the wide tile at
8192×64×8192 and 1.62× at 4096×64×4096 (docs/RESULTS.md). run(..., tile_n=64 or 128) forces one.

Measured: docs/RESULTS.md.
"""
import dataclasses
import functools

import numpy as np
from numba import cuda, float32

from . import _splitk_parts, _warptile
from . import k8_double_buffer as k8
from ._access import Step
from ._common import SMEM_ALIGN, grid_limit, u32, u64
from ._loaders import vector_operands     # which operands may move as float4 (k6's rule)
from ._splitk_parts import SIGNATURE, launch   # (M, N, K, kslice, alpha, A, B, beta, C)

LEVEL = "k8sk"
PARENT = "k8"
TITLE = "split-K: S CTAs per tile over slices of K, fixed-order reduce"
DELTA = (
    "k8sk = k8 + split-K: gridDim.z = S slices of K, each CTA k8's pipeline over its slice into "
    "fp32 partials, then one fixed-order reduction applies alpha and beta (S = 1: k8's epilogue)"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDG.E.128", "LDS.128", "STS.128", "STG.E.128", "FFMA")

TILING = k8.TILING                         # the parent's tiling: only K is split
TILE_M, TILE_N, TILE_K = TILING.tile_m, TILING.tile_n, TILING.tile_k
THREAD_M, THREAD_N = TILING.thread_m, TILING.thread_n
BLOCK = TILING.block
THREADS = TILING.threads
GEOMETRY = k8.GEOMETRY
CTAS_PER_SM = _warptile.MIN_BLOCKS          # k8's launch bounds: 2 CTAs of 256 threads per SM

# An int forces the split count (benchmarks); None: plan_splits. Read when a call's launches
# are made: gemm() records them once per shape and operands, so set it before that first call.
SPLITS = None
# run(..., tile_n=): the tilings by width; one as wide as the parent's holds the same threads per SM
TILINGS = {t.tile_n: t for t in (TILING, dataclasses.replace(TILING, tile_n=64))}
NARROW_N = 64                              # N ≤ this: the 64-wide tile


def width(N: int, tile_n: int | None = None) -> int:
    """tile_n, or the level's own choice for N: 64 where N ≤ NARROW_N, else the parent's width."""
    if tile_n is not None:
        return tile_n
    return 64 if N <= NARROW_N else TILING.tile_n


def tiling(tile_n: int | None = None) -> _warptile.WarpTiling:
    """The tiling of width tile_n (None: the shipped one); a ValueError names those there are."""
    if tile_n is None:
        return TILING
    if tile_n not in TILINGS:
        raise ValueError(f"level {LEVEL}: tile_n must be one of {sorted(TILINGS)}, got {tile_n!r}")
    return TILINGS[tile_n]


def tile_for(M: int, N: int, tile_n: int | None = None) -> _warptile.WarpTiling:
    """The tile k8sk runs M×N with: tile_n's, else its own choice (what numba_gemm.choose prices)."""
    return tiling(width(N, tile_n))


def ctas_per_sm(t: _warptile.WarpTiling) -> int:
    """CTAs an SM holds under the launch bounds."""
    return _warptile.blocks_per_sm(t)


def resident_ctas(M: int, N: int, K: int) -> int:
    """CTAs an SM holds of the tile k8sk runs M×N with (what the ledgers' waves read)."""
    return ctas_per_sm(tile_for(M, N))


def grid(M: int, N: int, tile_n: int | None = None) -> tuple[int, int]:
    return _warptile.grid(M, N, tile_for(M, N, tile_n))


# plan_splits and split_plan repeat the other split level's on purpose: they are this level's
# surface (its tile, its residency, its SPLITS); the logic is _splitk_parts'.
def plan_splits(M: int, N: int, K: int, sms: int = 132, tile_n: int | None = None) -> int:
    """The number of K slices for an M×N×K product on a GPU of `sms` SMs (1: no split)."""
    gx, gy = grid(M, N, tile_n)
    return _splitk_parts.plan(gx * gy, K, TILE_K, M, N, sms, ctas_per_sm(tile_for(M, N, tile_n)))


def split_plan(M: int, N: int, K: int, splits: int | None = None,
               tile_n: int | None = None) -> tuple[int, int]:
    """(S, kslice): slices and K elements per slice (a multiple of TILE_K) for a forced
    `splits`, else SPLITS, else plan_splits. A forced count is rounded so that no slice is
    empty: S = ceil(k_tiles / ceil(k_tiles / splits))."""
    return _splitk_parts.slices(LEVEL, K, TILE_K, SPLITS if splits is None else splits,
                                lambda: plan_splits(M, N, K, tile_n=tile_n))


def make_kernel(t: _warptile.WarpTiling, a_vec: bool, bc_vec: bool):
    """The k8sk kernel (not yet jitted) for tiling `t`: k8's, over slice blockIdx.z of K, its
    output at element blockIdx.z·M·N of C (arguments as k8's make_kernel)."""
    p = _warptile.make(t, a_vec, bc_vec)
    loaders, thread_tile = p.loaders, p.thread_tile
    double_buffered, epilogue_at = p.double_buffered, p.epilogue_at
    TM, TN, TK, AS = t.tile_m, t.tile_n, t.tile_k, t.a_stride
    TK2 = 2 * TK
    NA, NB, TMR, TNR = t.a_loads, t.b_loads, t.thread_m, t.thread_n

    def k8sk(M, N, K, kslice, alpha, A, B, beta, C):
        # two buffers each: k rows [0, TK) and [TK, 2·TK)
        As = cuda.shared.array((TK2, AS), float32, alignment=SMEM_ALIGN)   # As[k, m]
        Bs = cuda.shared.array((TK2, TN), float32, alignment=SMEM_ALIGN)   # Bs[k, n]

        lane = u32(cuda.threadIdx.x)
        warp = u32(cuda.threadIdx.y)
        tid = u32(warp * 32 + lane)
        m, n, k = u32(M), u32(N), u32(K)
        row0 = u32(cuda.blockIdx.y * TM)
        col0 = u32(cuda.blockIdx.x * TN)
        z = u32(cuda.blockIdx.z)
        # this CTA's slice [k_lo, k_hi): z·kslice < K < 2**31, so neither sum wraps in 32 bits
        k_lo = u32(z * u32(kslice))
        k_hi = u32(k_lo + u32(kslice))
        if k_hi > k:
            k_hi = k

        a_r, a_c, b_r, b_c, a_off, b_off = loaders(tid, row0, col0, k, n)
        a_off += u64(k_lo)                         # column k_lo of A, row k_lo of B
        b_off += u64(k_lo) * u64(n)
        am, bn = thread_tile(lane, warp)

        ra = cuda.local.array((NA, 4), float32)
        rb = cuda.local.array((NB, 4), float32)
        af = cuda.local.array(TMR, float32)
        bf = cuda.local.array(TNR, float32)
        acc = cuda.local.array((TMR, TNR), float32)
        for i in range(TMR):
            for j in range(TNR):
                acc[i, j] = float32(0.0)

        double_buffered(A, B, As, Bs, ra, rb, af, bf, acc, a_r, a_c, b_r, b_c, a_off, b_off,
                        am, bn, row0, col0, m, n, k, k_lo, k_hi)

        # slice z's M×N matrix: 64-bit, as M·N may pass 2**31
        epilogue_at(0, C, u64(z) * u64(m) * u64(n), acc, alpha, beta, row0, col0, am, bn, m, n)

    return k8sk


@functools.lru_cache(maxsize=None)
def specialisations(t: _warptile.WarpTiling) -> dict:
    """SPECIALISATIONS for another tiling, built on its first use (named k8sk_n64, ...)."""
    return SPECIALISATIONS if t == TILING else _warptile.specialisations(f"{LEVEL}_n{t.tile_n}", make_kernel, t)


SPECIALISATIONS = _warptile.specialisations(LEVEL, make_kernel, TILING)
kernel = SPECIALISATIONS[True, True][1]
# the census and the warm-up take every shipped kernel and the narrow tile's aligned one; the
# warm-up also the narrow tile's other three and the reduction (HELPER_KERNELS: not censused)
_NARROW = specialisations(TILINGS[64])
KERNELS = {name: (k, SIGNATURE) for name, k in [*SPECIALISATIONS.values(), _NARROW[True, True]]}
HELPER_KERNELS = {**_splitk_parts.HELPER_KERNELS,
                  **{name: (k, SIGNATURE) for key, (name, k) in _NARROW.items() if key != (True, True)}}


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None, splits=None, tile_n=None):
    M, K = A.shape
    N = B.shape[1]
    t = tile_for(M, N, tile_n)
    S, kslice = split_plan(M, N, K, splits, tile_n)
    launch(specialisations(t)[vector_operands(A, B, C)][1], _splitk_parts.grid(grid(M, N, tile_n), S),
           t.block, A, B, C, alpha, beta, stream, kslice)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """k8's accesses for phase ph (a slice runs k8's phases over its part of K)."""
    return k8.warp_step(M, N, K, bx, by, warp, ph, g)
