"""read: diff native/twins/k6.cu native/twins/k6gv.cu · run: python bench.py --level k6gv

k6gv — GEMV-style SGEMM for skinny M (M ≤ 8): B streamed once in float4, K split over warps.

At M ≤ 8 a product is a few matrix-vector products: each element of B feeds at most 8 FMAs, so
the time is B's bytes over DRAM bandwidth (1×4096×4096 fp32: 64 MiB, ~16 µs at 4.13 TB/s) if
enough loads are in flight. The tiled levels spend their threads on rows that do not exist
(k5sk's 32-row tile computes 32 rows for 1, k8's 128) and stage B through shared memory for a
reuse that M ≤ 8 does not have. k6gv keeps k6's one idea, 128-bit loads where the rows allow
them (`vector_operands`), and reorganises the block around B:

    block (32, 8): 8 warps; tile 8 rows × 128 columns of C; gridDim = (N/128, M/8, S)
    lane l owns columns 4l .. 4l+3 of the tile (a float4 of B per k row) and all 8 rows
    phase (64 k):  warp w takes k rows w·8 .. w·8+7 of the phase: 8 LDG.128 of B straight into
                   registers (a warp reads 512 contiguous bytes of one B row per instruction)
                   A's 8×64 chunk: two floats per thread (rows r and r+4), into shared memory
                   transposed (As[k, m]), so each k is two broadcast LDS.128 for 32 FFMA
    end of slice:  the 8 warps' partial 8×128 tiles meet in shared memory; warp w adds row w
                   over warps 0 .. 7 in that order (a fixed order: the same bits every run) and
                   stores it: one float4 per lane, THREAD_M × THREAD_N = 1 × 4 outputs per thread

B never passes through shared memory: it is read once, from DRAM to registers. A (M×K, a few KB
per slice) is read by every column block, from L2. The A chunk is double-buffered in shared
memory, so one barrier per phase suffices. Rows of A past M are zeros: their FFMA are wasted
issue slots (8 rows at M = 1), which a bandwidth-bound loop has to spare.

Few columns leave the GPU idle (N = 4096 is 32 blocks), so K is also split across blocks as in
k5sk/k8sk (numba_gemm.sgemm._splitk_parts): S slices of K, each block's raw partial sum into the
workspace. The slices are added inside the same kernel: the last block of a tile to finish
(a per-tile counter, `_splitk_parts.arrive`) adds the tile's S partials in the order
z = 0 .. S-1 and applies alpha and beta once, so there is no second launch; with S == 1 the
kernel applies them itself. No float atomics anywhere: the one atomic counts arrivals.

Two specialisations (k6's rule for B and C; A always moves 32 bits at a time, it is tiny):
`k6gv` (rows of B and C 16-byte aligned: LDG.E.128 / STG.E.128) and `k6gv_edge` (N % 4 != 0 or
unaligned: B's four floats 32 columns apart, so a warp's LDG still reads one 128-byte line).
Every load is checked (a float4 is wholly inside or outside; the 32-bit form per float): the
loop has issue slots to spare, so there is no interior/border split.

M > 8 is refused (`unsupported`): B would be read once per 8 rows; k6gv16 (this kernel built
with `make_kernel(..., rows=16)`), k5sk, k8sk or k8 serve it.
Ledger: the phase's accesses (`warp_step`); DRAM bytes are B once + A per column block + the
partials (S·M·N·4 each way). Measured on the H200: docs/LADDER.md and docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from ..ptx.intrinsics import SIMULATOR, load4_global, load4_shared, store4_shared, unrolled
from . import _splitk_parts
from ._access import F32, Geometry, Step, global_load, lanes, shared_access
from ._common import SMEM_ALIGN, float32, grid_limit, u32, u64, uint32, ceil_div
from ._loaders import (inline, plain, scalar_load, store_scalar, store_vector, vector_load,
                       vector_operands)
from ._splitk_parts import SIGNATURE_IN_KERNEL as SIGNATURE   # (M, N, K, kslice, alpha, A, B, beta, C, P, counters)
from ._splitk_parts import arrive, launch_in_kernel, sum_slices4

LEVEL = "k6gv"
PARENT = "k6"
TITLE = "GEMV-style skinny M (≤ 8): B streamed once in float4, K split over warps and slices"
DELTA = (
    "k6gv = k6 + a GEMV-style block for M ≤ 8: each lane owns 4 columns and all 8 rows, B goes "
    "DRAM → registers in float4 (no shared tile), the 8 warps split K and meet in a fixed-order "
    "shared-memory sum, split-K over blocks whose last block per tile adds the slices in order"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDG.E.128", "LDS.128", "STS.128", "STG.E.128", "BAR.SYNC", "FFMA")

MAX_M = 8                                   # one row tile: B is read once
WARPS = 8
TILE_M, TILE_N, TILE_K = MAX_M, 128, 64
KW = TILE_K // WARPS                        # k rows of B per warp per phase: 8 LDG.128
THREAD_M, THREAD_N = TILE_M // WARPS, 4     # outputs per thread after the block's sum: 1 × 4
BLOCK = (TILE_N // THREAD_N, WARPS)         # (32, 8): 256 threads
THREADS = BLOCK[0] * BLOCK[1]
A_ROW_STEP = THREADS // TILE_K              # rows between a thread's floats of A: 4
SPREAD = TILE_N // 4                        # 32-bit B: a lane's four columns, 32 apart
AS_ROWS = 2 * TILE_K                        # A's chunk, double-buffered: 4 KB at 8 rows
RED_ROWS = WARPS * WARPS                    # the warps' partial tiles, 8 rows at a time: 32 KB
GEOMETRY = Geometry(block=BLOCK, tile_m=TILE_M, tile_n=TILE_N, tile_k=TILE_K,
                    thread_m=THREAD_M, thread_n=THREAD_N)
# CTAs of 256 threads an SM holds under the launch bounds below (128 registers a thread; the
# census: python bench.py --level k6gv --sass); 36 KB of shared memory each. Measured on the H200
# (docs/RESULTS.md): 64-deep phases at 2 CTAs per SM (16 KB of B in flight per CTA) stream B
# 5-7 % faster than 32-deep phases at 3, whose 80-register cap also spilled with CUDA 13.0.
CTAS_PER_SM = 2
# numba_gemm.choose: one launch. The partials still pass through L2 (S·M·N floats each way), a
# few hundred KB at M ≤ 8, which the model leaves out as it does for v11sl.
SPLIT_IN_KERNEL = True

# An int forces the split count (benchmarks); None: plan_splits. Read when a call's launches
# are made: gemm() records them once per shape and operands, so set it before that first call.
SPLITS = None


def grid(M: int, N: int, rows: int = TILE_M) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, rows))


# plan_splits and split_plan as the other split levels': this level's tile, residency and SPLITS
def plan_splits(M: int, N: int, K: int, sms: int = 132, rows: int = TILE_M) -> int:
    """The number of K slices for an M×N×K product on a GPU of `sms` SMs (1: no split)."""
    gx, gy = grid(M, N, rows)
    return _splitk_parts.plan(gx * gy, K, TILE_K, M, N, sms, CTAS_PER_SM)


def split_plan(M: int, N: int, K: int, splits: int | None = None) -> tuple[int, int]:
    """(S, kslice): slices and K elements per slice (a multiple of TILE_K) for a forced
    `splits`, else SPLITS, else plan_splits."""
    return _splitk_parts.slices(LEVEL, K, TILE_K, SPLITS if splits is None else splits,
                                lambda: plan_splits(M, N, K))


# ---- the block's partial tiles in shared memory, WARPS rows at a time: Red[w·WARPS + r, c] =
# warp w's sum for row r of the group, column c. A lane's four columns: one STS.128 (float4 B)
# or four STS 32 apart (32-bit B).

@inline
def _red_vector(Red, row, c, acc, r):
    store4_shared(Red, (row, c), (acc[r, 0], acc[r, 1], acc[r, 2], acc[r, 3]))


@inline
def _red_spread(Red, row, c, acc, r):
    Red[row, c] = acc[r, 0]
    Red[row, u32(c + SPREAD)] = acc[r, 1]
    Red[row, u32(c + 2 * SPREAD)] = acc[r, 2]
    Red[row, u32(c + 3 * SPREAD)] = acc[r, 3]


def steps(rows: int):
    """The warp's KW k rows of a phase as straight-line code, for a tile of `rows` rows."""
    # [excerpt:k6gv-step]
    @inline
    def _step(i, As, arow, rb, acc):
        """k row i of the warp's KW: rows/4 broadcast LDS.128 (A's rows at k), 4·rows FFMA."""
        a = cuda.local.array(rows, float32)
        for h in range(rows // 4):
            q = load4_shared(As, (u32(arow + i), 4 * h))    # rows 4h .. 4h+3 of A at this k
            for r in range(4):
                a[4 * h + r] = q[r]
        for j in range(THREAD_N):
            for r in range(4):
                for h in range(rows // 4):
                    acc[4 * h + r, j] += a[4 * h + r] * rb[i, j]
    # [/excerpt]
    return unrolled(_step, KW)


def make_kernel(bc_vec: bool, rows: int = TILE_M):
    """The kernel (a Python function, not yet jitted) for tiles of `rows` rows, a multiple of
    WARPS (k6gv: 8, k6gv16: 16): 128-bit access to B and C when `bc_vec`, else 32-bit (B's four
    floats SPREAD apart, C's consecutive), each float checked. After the block's sum a warp
    owns rows // WARPS rows of the tile, WARPS rows apart."""
    load_b = vector_load(load4_global) if bc_vec else scalar_load(plain, SPREAD)
    load_c = vector_load(load4_global) if bc_vec else scalar_load(plain, 1)
    store_c = store_vector if bc_vec else store_scalar
    red_store = _red_vector if bc_vec else _red_spread
    all_steps = steps(rows)
    groups = rows // WARPS                  # rows a warp owns after the block's sum
    a_loads = rows * TILE_K // THREADS      # floats of A per thread per phase, A_ROW_STEP rows apart

    def k6gv(M, N, K, kslice, alpha, A, B, beta, C, P, counters):
        As = cuda.shared.array((AS_ROWS, rows), float32, alignment=SMEM_ALIGN)      # 2 × As[k, m]
        Red = cuda.shared.array((RED_ROWS, TILE_N), float32, alignment=SMEM_ALIGN)  # Red[w·8 + r, c]
        last = cuda.shared.array(1, uint32)                 # this CTA is its tile's last slice

        lane = u32(cuda.threadIdx.x)
        w = u32(cuda.threadIdx.y)
        tid = u32(w * 32 + lane)
        m, n, k = u32(M), u32(N), u32(K)
        row0 = u32(cuda.blockIdx.y * rows)
        col0 = u32(cuda.blockIdx.x * TILE_N)
        z = u32(cuda.blockIdx.z)
        # this CTA's slice [k_lo, k_hi): z·kslice < K < 2**31, so neither sum wraps in 32 bits
        k_lo = u32(z * u32(kslice))
        k_hi = u32(k_lo + u32(kslice))
        if k_hi > k:
            k_hi = k

        b_c = u32(lane * 4) if bc_vec else lane       # my first column of the tile
        col = u32(col0 + b_c)
        # A's chunk, a_loads floats per thread: elements (a_r + t·A_ROW_STEP, a_c) of the
        # rows×64 chunk, a warp's 32 consecutive k of one row (one 128-byte line; the transposed
        # store, 8-way conflicted, is one STS per float per phase)
        a_r = u32(tid // TILE_K)
        a_c = u32(tid % TILE_K)
        a_off = u64(row0 + a_r) * u64(k) + u64(k_lo + a_c)
        # my first k row of B in the phase: w·KW; 64-bit, as K·N may pass 2**31
        b_off = u64(k_lo + w * KW) * u64(n) + u64(col)

        acc = cuda.local.array((rows, THREAD_N), float32)
        for r in range(rows):
            for j in range(THREAD_N):
                acc[r, j] = float32(0.0)
        rb = cuda.local.array((KW, 4), float32)

        k0 = k_lo
        buf = u32(0)
        while k0 < k_hi:
            # ---- B first, so its loads are in flight across the barrier: KW rows, a float4 each
            for i in range(KW):
                v = load_b(B, b_off + u64(i) * u64(n), u32(k0 + w * KW + i) < k_hi, col, n)
                rb[i, 0] = v[0]
                rb[i, 1] = v[1]
                rb[i, 2] = v[2]
                rb[i, 3] = v[3]
            # ---- A: a_loads floats, zero past M and past the slice
            kc = u32(k0 + a_c)
            for t in range(a_loads):
                ar = u32(a_r + t * A_ROW_STEP)
                a = A[a_off + u64(t * A_ROW_STEP) * u64(k)] if (u32(row0 + ar) < m) & (kc < k_hi) else float32(0.0)
                As[buf * TILE_K + a_c, ar] = a
            # one barrier: As is double-buffered, so this phase's stores cannot meet the
            # previous phase's reads of the other buffer
            cuda.syncthreads()
            all_steps(0, As, u32(buf * TILE_K + w * KW), rb, acc)
            k0 = u32(k0 + TILE_K)
            buf = u32(1 - buf)
            a_off += u64(TILE_K)
            b_off += u64(TILE_K) * u64(n)

        # ---- the warps' partial tiles meet in shared memory, WARPS rows at a time: warp w sums
        # row g·WARPS + w over warps 0 .. WARPS-1 in that order
        j0 = u32(lane * 4)                    # epilogue: my 4 consecutive columns of each row
        # [excerpt:k6gv-groups]
        s = cuda.local.array((groups, 4), float32)
        for g in range(groups):
            if g > 0:
                cuda.syncthreads()            # every warp has read the previous group's sums
            for r in range(WARPS):
                red_store(Red, u32(w * WARPS + r), b_c, acc, g * WARPS + r)
            cuda.syncthreads()
            t = load4_shared(Red, (w, j0))
            s[g, 0], s[g, 1], s[g, 2], s[g, 3] = t[0], t[1], t[2], t[3]
            for v in range(1, WARPS):
                t = load4_shared(Red, (u32(v * WARPS + w), j0))
                s[g, 0] += t[0]
                s[g, 1] += t[1]
                s[g, 2] += t[2]
                s[g, 3] += t[3]
        # [/excerpt]

        ccol = u32(col0 + j0)
        # ---- split: park slice z's sums; the tile's last CTA to arrive adds all S in order
        S = u32(cuda.gridDim.z)
        if S > u32(1):
            mn = u64(m) * u64(n)
            for g in range(groups):
                row = u32(row0 + g * WARPS + w)
                off = u64(row) * u64(n) + u64(ccol)
                store_c(P, u64(z) * mn + off, row < m, ccol, n, (s[g, 0], s[g, 1], s[g, 2], s[g, 3]))
            if not arrive(counters, last, tid, S):
                return
            for g in range(groups):
                row = u32(row0 + g * WARPS + w)
                off = u64(row) * u64(n) + u64(ccol)
                s[g, 0], s[g, 1], s[g, 2], s[g, 3] = sum_slices4(P, off, mn, S, row < m, ccol, n)

        # ---- C: beta == 0 never reads C (BLAS: NaN must not leak)
        for g in range(groups):
            row = u32(row0 + g * WARPS + w)
            off = u64(row) * u64(n) + u64(ccol)
            if beta == float32(0.0):
                out = (alpha * s[g, 0], alpha * s[g, 1], alpha * s[g, 2], alpha * s[g, 3])
            else:
                c = load_c(C, off, row < m, ccol, n)
                out = (alpha * s[g, 0] + beta * c[0], alpha * s[g, 1] + beta * c[1],
                       alpha * s[g, 2] + beta * c[2], alpha * s[g, 3] + beta * c[3])
            store_c(C, off, row < m, ccol, n, out)

    return k6gv


# 256 threads, 2 CTAs per SM: at most 128 registers a thread (the simulator takes no bounds)
_bounded = cuda.jit if SIMULATOR else cuda.jit(launch_bounds=(THREADS, CTAS_PER_SM))
_vector = _bounded(make_kernel(True))
_edge = _bounded(make_kernel(False))

# (rows of A aligned, rows of B and C aligned) -> (name, kernel), k6's rule; A always moves
# 32 bits at a time (a few KB per slice, from L2), so only B and C choose the kernel.
SPECIALISATIONS = {(a, True): ("k6gv", _vector) for a in (True, False)}
SPECIALISATIONS.update({(a, False): ("k6gv_edge", _edge) for a in (True, False)})
kernel = _vector
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """Phase `ph` of warp `warp` of block (bx, by), vector kernel: tile_m·64/256 floats of A per
    thread into the phase's buffer of As (transposed), KW float4 rows of B straight to
    registers, then per k tile_m/4 128-bit broadcasts of A (k6gv16: g its GEOMETRY)."""
    ls = lanes(g, warp)
    T = g.tile_k
    kw = T // (g.threads // 32)
    base = (ph % 2) * T * g.tile_m                           # the phase's buffer of As (elements)
    tids = [ty * g.block[0] + tx for tx, ty in ls]
    acc = []
    r = [t // T for t in tids]
    c = [t % T for t in tids]
    for t in range(g.tile_m * T // g.threads):               # rows r, r + 4, …: A_ROW_STEP apart
        rt = [rr + t * (g.threads // T) for rr in r]
        acc.append(global_load("A", [(by * g.tile_m + rr) * K + ph * T + cc for rr, cc in zip(rt, c)]))
        acc.append(shared_access("As", [base + cc * g.tile_m + rr for rr, cc in zip(rt, c)],
                                 inner=False, op="store"))
    for i in range(kw):
        acc.append(global_load("B", [(ph * T + warp * kw + i) * N + bx * g.tile_n + 4 * tx
                                     for tx, _ in ls], 16))
    for i in range(kw):
        for h in range(g.tile_m // 4):                       # rows 0..3, 4..7, …: broadcast
            acc.append(shared_access("As", [base + (warp * kw + i) * g.tile_m + 4 * h for _ in ls], 16))
    return Step(kw * g.tile_m * 4, tuple(acc), "one phase")


def refusal(level: str, rows: int, M: int, N: int, instead: str):
    """Why `level`, whose tile has `rows` rows, cannot serve M×N (None if it can)."""
    if M > rows:
        return (f"{level} serves M ≤ {rows} (one {rows}-row tile, so B is read once); M = {M} would "
                f"read B {ceil_div(M, rows)} times: use {instead} or level='auto'")
    return grid_limit(grid(M, N, rows))


def unsupported(M: int, N: int, K: int):
    return refusal(LEVEL, MAX_M, M, N, "k6gv16 (M ≤ 16), k5sk (skinny M), k8/k8sk")


def run(A, B, C, alpha, beta, stream=None, splits=None):
    M, K = A.shape
    N = B.shape[1]
    S, kslice = split_plan(M, N, K, splits)
    launch_in_kernel(SPECIALISATIONS[vector_operands(A, B, C)][1], _splitk_parts.grid(grid(M, N), S),
                     BLOCK, A, B, C, alpha, beta, stream, kslice)
