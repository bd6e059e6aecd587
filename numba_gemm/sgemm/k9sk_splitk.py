"""read: diff native/twins/k9.cu native/twins/k9sk.cu · run: python bench.py --level k9sk

k9sk — split-K on k9's loop, the slices added inside the kernel: one launch.

k8sk splits K over S CTAs per 128×128 tile where the tiles alone leave SMs idle (128×4096×4096:
32 tiles for 264 resident CTAs), and k9 runs the same tile 4-5 % faster than k8 (two phases per
loop trip, fixed shared addresses, unchecked loads inside K). k9sk puts the two together and
drops k8sk's second launch, as k6gv did for its slices:

    gridDim = (N / 128, M / 128, S)            # S slices of K, blockIdx.z = the slice
    CTA (x, y, z): k9's loop over k in [z·kslice, min(K, (z+1)·kslice)) (`unrolled_buffers`
                   over a K range; kslice a whole number of 8-deep K tiles)
    S == 1:        k9's epilogue: C = alpha·acc + beta·C, k9's result bit for bit (run()
                   launches k9's kernel itself then, the one auto prices at one slice)
    S > 1:         the raw sum into slice z of the workspace P (alpha 1, beta 0: exact), one
                   part of the thread tile's rows at a time (parts = min(S, 8), rows i ≡ part
                   mod parts; `park`), each part counted on its own (`_splitk_parts.arrive_at`,
                   S counters per tile): the last CTA to park a part adds that part's S
                   partials in the order z = 0 .. S-1 (`rows_to_c`) and writes C with alpha and
                   beta: the bits of k8sk's separate reduction, without its launch. CTA z parks
                   parts z, z+1, ... (mod parts), so the last arrivals of a tile's parts, and
                   their sums, fall to different CTAs rather than all to the tile's last one

No float atomics: the one atomic counts arrivals, and the order of every sum is fixed, so the
result has the same bits on every run (and a captured call replays exactly; the last CTA
of each part resets its counter). No CTA waits for another, so any grid size is safe. The
slice plan is k8sk's (`_splitk_parts.plan` at k9's tile and residency). k9's loop keeps one
clamped row of A per thread, so k9sk has k9's 128-wide tile only; k8sk's 64-wide tile for
N ≤ 64 stays k8sk's.

Ledger: the phase is k9's (k8's accesses, `warp_step`); what moves is CTAs per wave (×S) and
S·M·N·4 bytes of partials written and read back through L2, in one launch.
Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda, float32

from . import _splitk_parts, _warptile
from . import k9_unrolled as k9
from ._access import Step
from ._common import SMEM_ALIGN, grid_limit, launch, u32, u64, uint32
from ._loaders import vector_operands     # which operands may move as float4 (k6's rule)
from ._splitk_parts import SIGNATURE_IN_KERNEL as SIGNATURE   # (M, N, K, kslice, alpha, A, B, beta, C, P, counters)
from ._splitk_parts import arrive_at, launch_in_kernel

LEVEL = "k9sk"
PARENT = "k9"
TITLE = "split-K on k9's loop, each part of a tile's slices added by its last CTA: one launch"
DELTA = (
    "k9sk = k9 + split-K: gridDim.z = S slices of K, each CTA k9's loop over its slice into fp32 "
    "partials, parked a part of the rows at a time; the last CTA to park a part adds its slices in "
    "slice order and applies alpha and beta (one launch)"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = k9.SASS_MUST_HAVE

TILING = k9.TILING                         # the parent's tiling: only K is split
TILE_M, TILE_N, TILE_K = TILING.tile_m, TILING.tile_n, TILING.tile_k
THREAD_M, THREAD_N = TILING.thread_m, TILING.thread_n
BLOCK = TILING.block
THREADS = TILING.threads
GEOMETRY = k9.GEOMETRY
PHASES_PER_TRIP = k9.PHASES_PER_TRIP     # k9's loop: one phase per buffer
CTAS_PER_SM = _warptile.blocks_per_sm(TILING)   # k9's launch bounds: 2 CTAs of 256 threads per SM
# numba_gemm.choose: one launch; the partials pass through L2 (S·M·N floats each way)
SPLIT_IN_KERNEL = True

# An int forces the split count (benchmarks); None: plan_splits. Read when a call's launches
# are made: gemm() records them once per shape and operands, so set it before that first call.
SPLITS = None


def grid(M: int, N: int) -> tuple[int, int]:
    return k9.grid(M, N)


# plan_splits and split_plan as the other split levels': this level's tile, residency and SPLITS
def plan_splits(M: int, N: int, K: int, sms: int = 132) -> int:
    """The number of K slices for an M×N×K product on a GPU of `sms` SMs (1: no split)."""
    gx, gy = grid(M, N)
    return _splitk_parts.plan(gx * gy, K, TILE_K, M, N, sms, CTAS_PER_SM)


def split_plan(M: int, N: int, K: int, splits: int | None = None) -> tuple[int, int]:
    """(S, kslice): slices and K elements per slice (a multiple of TILE_K) for a forced
    `splits`, else SPLITS, else plan_splits."""
    return _splitk_parts.slices(LEVEL, K, TILE_K, SPLITS if splits is None else splits,
                                lambda: plan_splits(M, N, K))


def make_kernel(t: _warptile.WarpTiling, a_vec: bool, bc_vec: bool):
    """The k9sk kernel (not yet jitted) for tiling `t` (arguments as k9's make_kernel)."""
    p = _warptile.make(t, a_vec, bc_vec)
    loaders, thread_tile, pipeline = p.loaders, p.thread_tile, p.unrolled_buffers
    epilogue, park, rows_of, rows_to_c = p.epilogue, p.park, p.rows_of, p.rows_to_c
    TM, TN, TK, AS = t.tile_m, t.tile_n, t.tile_k, t.a_stride
    TK2 = 2 * TK
    NA, NB, TMR, TNR = t.a_loads, t.b_loads, t.thread_m, t.thread_n

    def k9sk(M, N, K, kslice, alpha, A, B, beta, C, P, counters):
        As = cuda.shared.array((TK2, AS), float32, alignment=SMEM_ALIGN)   # As[k, m]
        Bs = cuda.shared.array((TK2, TN), float32, alignment=SMEM_ALIGN)   # Bs[k, n]
        last = cuda.shared.array(1, uint32)                 # this CTA is its tile's last slice

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
                 k_lo, k_hi)

        # [excerpt:k9sk-end]
        S = u32(cuda.gridDim.z)
        if S == u32(1):
            epilogue(0, C, acc, alpha, beta, row0, col0, am, bn, m, n)
            return
        # ---- split: park slice z's raw sum a part of the rows at a time, each part counted on
        # its own; the last CTA to park a part adds its S slices in order. Each CTA starts at
        # its own part, so a tile's last arrivals, and its sums, fall to different CTAs.
        mn = u64(m) * u64(n)                   # 64-bit, as M·N may pass 2**31
        parts = min(S, u32(TMR))
        tile = u32(cuda.blockIdx.y * cuda.gridDim.x + cuda.blockIdx.x)
        part = z
        while part >= parts:                   # z mod parts, without a division
            part = u32(part - parts)
        mine = u32(0)                          # the parts this CTA was the last to park
        for _ in range(parts):
            park(0, P, u64(z) * mn, acc, rows_of(part, parts), row0, col0, am, bn, m, n)
            if arrive_at(counters, u32(tile * S + part), last, tid, S):
                mine = u32(mine | u32(u32(1) << part))
            part = u32(part + u32(1))
            if part == parts:
                part = u32(0)
        for q in range(parts):                 # after the loop, with acc no longer live
            if u32(mine >> u32(q)) & u32(1):
                rows_to_c(P, mn, S, u32(q), parts, C, alpha, beta, row0, col0, am, bn, m, n)
        # [/excerpt]

    return k9sk


SPECIALISATIONS = _warptile.specialisations(LEVEL, make_kernel, TILING)
kernel = SPECIALISATIONS[True, True][1]
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None, splits=None):
    M, K = A.shape
    N = B.shape[1]
    S, kslice = split_plan(M, N, K, splits)
    if S == 1:              # one slice is k9: its kernel, as auto prices it (choose._one_slice_parent)
        launch(k9.SPECIALISATIONS[vector_operands(A, B, C)][1], grid(M, N), BLOCK, A, B, C, alpha, beta, stream)
        return
    launch_in_kernel(SPECIALISATIONS[vector_operands(A, B, C)][1], _splitk_parts.grid(grid(M, N), S),
                     BLOCK, A, B, C, alpha, beta, stream, kslice)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """k9's accesses for phase ph (a slice runs k9's phases over its part of K)."""
    return k9.warp_step(M, N, K, bx, by, warp, ph, g)
