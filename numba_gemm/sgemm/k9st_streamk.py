"""read: diff native/twins/k9.cu native/twins/k9st.cu · run: python bench.py --level k9st

k9st — stream-K on k9's loop: the last wave's tiles shared out evenly, K tile by K tile.

k9 runs one 128×128 tile per CTA, 264 CTAs at a time on 132 SMs. Where the tiles are not a
whole number of waves the last wave is part empty and the GPU waits on it: 224 tiles
(128×28672×8192) leave 40 of 264 slots idle for the whole run, 280 tiles (777×5000×3001) take
two waves for 1.06 waves of work (1024 tiles at 4096³ fill 3.88 of 4, too full to pay: left to
k9, see FULL_WAVE). Split-K cannot fix that with equal slices (224·S CTAs still come in whole
waves of 264). Stream-K (Osama et al., "Stream-K: Work-centric Parallel Decomposition for Dense
Matrix-Matrix Multiplication on the GPU", 2023) lays the tiles' K tiles end to end and gives
every CTA an equal share of them, so a tile may be begun by one CTA and finished by the next.
As the paper's hybrid, only the last one to two waves' worth are shared out; the tiles before
them stay whole, one CTA each:

    plan:   T tiles of I K tiles each, R = 264 resident CTAs (132 SMs × k9's 2)
            T at least FULL_WAVE of whole waves (T / (ceil(T / R)·R) >= 0.95):
            no stream part (run() launches k9's kernel)
            else whole = (T // R - 1)·R tiles whole (0 under two waves), and the other
            T - whole tiles shared by `ctas` CTAs (R, fewer only if a share would drop
            under MIN_ITERS K tiles)
    grid:   (whole + ctas,) CTAs; CTA b < whole: tile b, all of K (k9's CTA)
            CTA whole + c: K tiles [lo(c), lo(c + 1)) of the stream tiles laid end to end,
            lo(c) = floor(c · (T - whole)·I / ctas): one to three segments, each k9's loop
            over a K range of one tile (`unrolled_buffers`)
    segment covering its whole tile: k9's epilogue into C
    part of a tile: its raw sum into slot s + c of the workspace (s the tile's index among
            the stream tiles: a tile's parts lie in consecutive slots, one tile apart); the
            tile's last CTA to arrive (`_splitk_parts.arrive_at`) adds its parts in order of
            c (`parts_to_c`) and writes C with alpha and beta

The parts' order is fixed by the plan, never by which CTA arrives last, so the result has the
same bits on every run (no float atomics; the counters are reset by each tile's last CTA, so a
captured call replays exactly). No CTA waits for another: correct whatever runs at once.

Ledger: the phase is k9's (`warp_step`); what moves is the work per CTA: every SM runs the same
share of the last waves, and at most two partial tiles per stream CTA go through L2.
Measured: docs/RESULTS.md.
"""
from dataclasses import dataclass

import numpy as np
from numba import cuda, float32, int32, uint32

from .. import splitk
from ..runtime import workspace
from . import _warptile
from . import k9_unrolled as k9
from ._access import Step
from ._common import SMEM_ALIGN, ceil_div, grid_limit, launch, u32, u64
from ._loaders import inline, vector_operands     # which operands may move as float4 (k6's rule)
from ._splitk_parts import SIGNATURE_IN_KERNEL, arrive_at

# (M, N, K, tiles_n, whole, alpha, A, B, beta, C, P, counters): the in-kernel split's arguments
# with the tiles across N apart from N (k8es runs the kernel on whole tiles short of N)
SIGNATURE = SIGNATURE_IN_KERNEL[:3] + (int32,) + SIGNATURE_IN_KERNEL[3:]

LEVEL = "k9st"
PARENT = "k9"
TITLE = "stream-K on k9's loop: the last waves' K tiles shared evenly over every resident CTA"
DELTA = (
    "k9st = k9 + stream-K: the tiles past the last whole wave laid end to end in K tiles, an equal "
    "share per resident CTA; a tile split between CTAs is added by its last one, in CTA order"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = k9.SASS_MUST_HAVE

TILING = k9.TILING                          # the parent's tiling: the work is what is shared out
TILE_M, TILE_N, TILE_K = TILING.tile_m, TILING.tile_n, TILING.tile_k
BLOCK = TILING.block
THREADS = TILING.threads
GEOMETRY = k9.GEOMETRY
PHASES_PER_TRIP = k9.PHASES_PER_TRIP
CTAS_PER_SM = _warptile.blocks_per_sm(TILING)   # k9's launch bounds: 2 CTAs of 256 threads per SM
SMS = 132
MIN_ITERS = splitk.MIN_K_TILES_PER_SPLIT    # K tiles a stream CTA runs at least (its pipeline's fill)
MAX_ITERATIONS = 2**31                      # tiles · I: the kernel counts K tiles in 32 bits
MAX_SLOTS = 2**16 - 1                       # stream CTAs at most: c·r (r < ctas) fits 32 bits
# Tiles this close to whole waves (T / (waves · R), the last wave counted whole) run as k9: on
# the H200, 0.97 full (2048³ to 8192³, short K) k9st ran 2-9 % slower than k9 (the parts' trip
# through L2 costs more than a 3 % idle tail); at 0.85 full and under, 9-33 % faster.
FULL_WAVE = 0.95
# numba_gemm.choose: one launch, the parts reduced inside it
SPLIT_IN_KERNEL = True

# An int forces the resident CTAs the plan shares the last waves over (benchmarks, and the
# simulator's few-CTA tests); None: SMS × CTAS_PER_SM. Read when a call's launches are made:
# gemm() records them once per shape and operands, so set it before that first call.
SLOTS = None


def grid(M: int, N: int) -> tuple[int, int]:
    """k9's grid: (tiles across N, tiles down M)."""
    return k9.grid(M, N)


@dataclass(frozen=True)
class StreamPlan:
    tiles: int      # output tiles, numbered row by row (tile t at row t // gx, column t % gx)
    iters: int      # K tiles per output tile
    whole: int      # tiles 0 .. whole-1: one CTA each over all of K
    ctas: int       # CTAs sharing the K tiles of tiles whole .. tiles-1 (0: none, k9's launch)

    @property
    def streams(self) -> bool:
        return self.ctas > 0

    @property
    def grid(self) -> tuple[int]:
        return (self.whole + self.ctas,)

    @property
    def slots(self) -> int:
        """Partial tiles the workspace holds: slot s + c for stream tile s and CTA c."""
        return self.tiles - self.whole + self.ctas


def stream_plan(M: int, N: int, K: int, slots: int | None = None) -> StreamPlan:
    """How k9st shares M×N×K out over `slots` resident CTAs (None: SLOTS, else SMS ×
    CTAS_PER_SM): the module docstring's plan."""
    gx, gy = grid(M, N)
    T, I = gx * gy, ceil_div(K, TILE_K)
    R = slots or SLOTS or SMS * CTAS_PER_SM
    if isinstance(R, bool) or not isinstance(R, (int, np.integer)) or not 1 <= R <= MAX_SLOTS:
        raise ValueError(f"{LEVEL}: slots must be an int in 1..{MAX_SLOTS}, got {R!r}")
    waves, rest = divmod(T, R)
    if T >= FULL_WAVE * (waves + (rest > 0)) * R:      # whole waves, or a last one nearly full
        return StreamPlan(T, I, T, 0)
    whole = (waves - 1) * R if waves >= 2 else 0
    ctas = min(R, (T - whole) * I // MIN_ITERS)
    # worth it only with more CTAs than the stream tiles (under a wave) or a full wave of them
    if ctas < min(R, T - whole + 1):
        return StreamPlan(T, I, T, 0)
    return StreamPlan(T, I, whole, ctas)


# The kernel's arithmetic, plain functions the host calls too (tests, the twin's checks), in
# 32 bits (a 64-bit division is a subroutine call in SASS): n = q·ctas + r K tiles of the
# stream tiles (n < 2**31: unsupported), ctas ≤ MAX_SLOTS (c·r < 2**32).
def share_start(c, q, r, ctas):
    """First K tile (counted from the first stream tile) of stream CTA c: floor(c·n / ctas),
    as c·q + floor(c·r / ctas)."""
    return u32(u32(c * q) + u32(c * r) // ctas)


def owner(x, q, r, ctas):
    """The stream CTA whose share holds K tile x: the largest c with share_start(c) ≤ x. Shares
    are q or q + 1 long, so x // q is at most a few CTAs too far (1 + ctas / q steps back)."""
    c = min(u32(x // q), u32(ctas - 1))
    while u32(c * q) + u32(c * r) // ctas > x:       # share_start(c) (a device function calls no
        c = u32(c - 1)                               # plain Python one)
    return c


# The words of a CTA's plan in shared memory (thread 0 works it out once): its K tiles
# [IT, END), then what a segment needs of the stream's shape. Kept in registers beside k9's
# 128 they spilled (k9st_edge: 84 bytes), and they are read once a segment.
IT, END, ITERS, TILES_N, WHOLE, CTA, Q, R, CTAS = range(9)
PLAN_WORDS = 9


def make_kernel(t: _warptile.WarpTiling, a_vec: bool, bc_vec: bool):
    """The k9st kernel (not yet jitted) for tiling `t` (arguments as k9's make_kernel)."""
    p = _warptile.make(t, a_vec, bc_vec)
    loaders, thread_tile, pipeline = p.loaders, p.thread_tile, p.unrolled_buffers
    epilogue, epilogue_at, parts_to_c = p.epilogue, p.epilogue_at, p.parts_to_c
    TM, TN, TK, AS = t.tile_m, t.tile_n, t.tile_k, t.a_stride
    TK2 = 2 * TK
    NA, NB, TMR, TNR = t.a_loads, t.b_loads, t.thread_m, t.thread_n
    TILE = TM * TN
    start_of, owner_of = inline(share_start), inline(owner)

    def k9st(M, N, K, tiles_n, whole, alpha, A, B, beta, C, P, counters):
        As = cuda.shared.array((TK2, AS), float32, alignment=SMEM_ALIGN)   # As[k, m]
        Bs = cuda.shared.array((TK2, TN), float32, alignment=SMEM_ALIGN)   # Bs[k, n]
        last = cuda.shared.array(1, uint32)                 # this CTA is its tile's last part
        plan = cuda.shared.array(PLAN_WORDS, uint32)        # the CTA's share and the stream's shape

        lane = u32(cuda.threadIdx.x)
        warp = u32(cuda.threadIdx.y)
        tid = u32(warp * 32 + lane)
        m, n, k = u32(M), u32(N), u32(K)
        # [excerpt:k9st-share]
        if tid == u32(0):
            iters = u32((k + u32(TK - 1)) // u32(TK))
            tiles = u32(u32(tiles_n) * u32((m + u32(TM - 1)) // u32(TM)))
            w = u32(whole)
            ctas = u32(cuda.gridDim.x - w)
            n_it = u32((tiles - w) * iters)                 # the stream tiles' K tiles: q·ctas + r
            q = u32(n_it // ctas)
            r = u32(n_it - q * ctas)
            b = u32(cuda.blockIdx.x)
            c = u32(b - min(b, w))                          # this CTA's place among the stream CTAs
            if b < w:                                       # a whole tile: k9's CTA
                it = u32(b * iters)
                end = u32(it + iters)
            else:                                           # an equal share of the stream tiles' K tiles
                it = u32(w * iters + start_of(c, q, r, ctas))
                end = u32(w * iters + start_of(c + u32(1), q, r, ctas))
            for i, v in enumerate((it, end, iters, u32(tiles_n), w, c, q, r, ctas)):
                plan[i] = v
        cuda.syncthreads()
        # [/excerpt]
        a_r, a_c, b_r, b_c, _, _ = loaders(tid, u32(0), u32(0), k, n)
        am, bn = thread_tile(lane, warp)

        ra = cuda.local.array((NA, 4), float32)
        rb = cuda.local.array((NB, 4), float32)
        af = cuda.local.array(TMR, float32)
        bf = cuda.local.array(TNR, float32)
        acc = cuda.local.array((TMR, TNR), float32)
        # [excerpt:k9st-segments]
        while plan[IT] < plan[END]:                         # one segment: K tiles of one output tile
            it = plan[IT]
            tile = u32(it // plan[ITERS])
            first = u32(tile * plan[ITERS])
            stop = min(plan[END], u32(first + plan[ITERS]))
            row0 = u32(tile // plan[TILES_N] * TM)
            col0 = u32(tile % plan[TILES_N] * TN)
            for i in range(TMR):
                for j in range(TNR):
                    acc[i, j] = float32(0.0)
            pipeline(A, B, As, Bs, ra, rb, af, bf, acc, a_r, a_c, b_r, b_c, am, bn, row0, col0, m, n, k,
                     u32((it - first) * TK), min(k, u32((stop - first) * TK)))
            # the segment again from the plan, read back after the loop's barriers, so that
            # none of it holds a register through k9's loop
            it = plan[IT]
            iters = plan[ITERS]
            tile = u32(it // iters)
            first = u32(tile * iters)
            stop = min(plan[END], u32(first + iters))
            row0 = u32(tile // plan[TILES_N] * TM)
            col0 = u32(tile % plan[TILES_N] * TN)
            if it == first and stop == u32(first + iters):
                epilogue(0, C, acc, alpha, beta, row0, col0, am, bn, m, n)
            else:                                           # part of a stream tile s
                q, r, ctas = plan[Q], plan[R], plan[CTAS]
                s = u32(tile - plan[WHOLE])
                x0 = u32(s * iters)                         # its first K tile in the stream
                lo = owner_of(x0, q, r, ctas)               # the CTAs that share it: lo .. hi
                hi = owner_of(u32(x0 + iters - 1), q, r, ctas)
                epilogue_at(0, P, u64(s + plan[CTA]) * u64(TILE), acc, float32(1.0), float32(0.0),
                            u32(0), u32(0), am, bn, u32(TM), u32(TN))
                if arrive_at(counters, s, last, tid, u32(hi - lo + 1)):
                    parts_to_c(P, u64(s + lo) * u64(TILE), u32(hi - lo + 1), C, alpha, beta,
                               row0, col0, am, bn, m, n)
            cuda.syncthreads()                              # every thread has read plan[IT]
            if tid == u32(0):
                plan[IT] = stop
            cuda.syncthreads()
        # [/excerpt]

    return k9st


SPECIALISATIONS = _warptile.specialisations(LEVEL, make_kernel, TILING)
kernel = SPECIALISATIONS[True, True][1]
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def unsupported(M: int, N: int, K: int):
    gx, gy = grid(M, N)
    if gx * gy * ceil_div(K, TILE_K) >= MAX_ITERATIONS:
        return (f"{gx * gy} tiles of {ceil_div(K, TILE_K)} K tiles each: k9st counts K tiles in "
                f"32 bits, at most {MAX_ITERATIONS - 1} in all")
    return grid_limit((gx, gy))       # whole waves run k9's (x, y) grid


def buffers(C, p: StreamPlan):
    """(partials, counters) of plan p (with a stream part) writing C, from C's workspace:
    p.slots whole tiles, a counter per stream tile."""
    return workspace.partials(C, p.slots, TILE_M, TILE_N), workspace.counters(C, p.tiles - p.whole)


def run(A, B, C, alpha, beta, stream=None, slots=None):
    M, K = A.shape
    N = B.shape[1]
    p = stream_plan(M, N, K, slots)
    if not p.streams:           # whole waves: k9, its kernel (auto prices it so)
        launch(k9.SPECIALISATIONS[vector_operands(A, B, C)][1], grid(M, N), BLOCK, A, B, C, alpha, beta, stream)
        return
    launch_stream(SPECIALISATIONS[vector_operands(A, B, C)][1], p.grid, BLOCK, A, B, C, alpha, beta, stream, p,
                  grid(M, N)[0])


def launch_stream(kernel, grid, block, A, B, C, alpha, beta, stream, p: StreamPlan, tiles_n: int):
    """`kernel` over the 1-D `grid` of plan p, once, with C's workspace (`buffers`): the
    product's first tiles_n tiles across N in each row of tiles."""
    from ..runtime import launch as launches
    from ..runtime.launch import launch_numba

    M, K = A.shape
    N = B.shape[1]
    P, counters = buffers(C, p)
    args = (np.int32(M), np.int32(N), np.int32(K), np.int32(tiles_n), np.int32(p.whole), np.float32(alpha),
            A.reshape(M * K), B.reshape(K * N), np.float32(beta), C.reshape(M * N), P, counters)
    # a recorded launch keeps only its packed parameters: it holds the workspace too
    with launches.keeping((P, counters), stream):
        launch_numba(kernel, grid, block, args, stream)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """k9's accesses for phase ph (a segment runs k9's phases over its part of a tile's K)."""
    return k9.warp_step(M, N, K, bx, by, warp, ph, g)
