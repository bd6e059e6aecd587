"""read: diff native/v11sl_splitk.cu native/v11t_swapab.cu · run: python bench.py --level v11t --dtype fp16

v11t: v11sl on the transposed product Cᵀ = Bᵀ·Aᵀ — a skinny M lands on wgmma's N (16 or 32) instead of a 64-row tile mostly zero.

v11t = v11sl with A and B swapped in the wgmma. At M = 16, v11sl's 64-row tile is 48 rows of
TMA's zero fill: three quarters of A's shared memory and of the tensor work carry nothing, and
the stage that holds them leaves less room for the bytes of B in flight. wgmma's M is fixed at
64 per warpgroup, but its N may be 8…256, so v11t gives N's 64 columns to wgmma's M (a panel of
B, as TMA already writes it for v11: n contiguous, so the instruction's A operand is M-major,
imm-trans-a = 1) and M's MT = 16 or 32 rows to wgmma's N (v11's A box with MT rows,
K-major). Every byte of a stage is used, a thread holds MT / 2 accumulators, and the stages
go as deep as shared memory allows: these products are memory-bound.

Which ledger moved: bytes in flight. A stage of the 16 × 128 tile is 18 KB (16 KB of B), so 12
stages fit where v11sl's 64 × 64 tile held 8 of 16 KB (8 KB of B); the split and the in-kernel
reduction are v11sl's (a tile's S slices are one cluster, summed in the order 0…S-1 through
distributed shared memory), with the partial parked transposed so that C's rows are written
with contiguous pair stores.

The tile: MT = the smaller of 16 and 32 that holds M, NT = 128 (two warpgroups), or 64 (one)
where 128-wide tiles would need more than two K slices to fill the SMs, stages as deep as shared
memory allows (up to MAX_STAGES). Plan: `plan_splits`, pure.

Limits: M ≤ 32. Past 32 rows v11sl's 64-row tile is at least half full, and it was faster
than v11t's 64-row tile at every shape where both ran, M = 48 and 64, on an H200 and an H100
(docs/RESULTS.md, "v11t serves M ≤ 32"); larger M is v11sl's, v11sk's or v11's. TMA's limits,
as v11: 16-byte aligned bases and K % 8 == 0, N % 8 == 0 for 2-byte types; other shapes are
refused before launch.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import splitk
from ..util import ceil_div
from . import _common as cm
from . import _wgmma as wg

LEVEL = "v11t"
PARENT = "v11sl"
TITLE = "the transposed product: a skinny M on wgmma's N"
DELTA = ("v11t = v11sl with A and B swapped in the wgmma (Cᵀ = Bᵀ·Aᵀ): M ≤ 32 is wgmma's N, "
         "a panel of B its M-major A operand; every byte of a stage used, stages as deep as fit")
DTYPES = cm.DTYPES
SOURCE = "v11t_swapab.cu"
KERNEL_NAMES = {"f16": "v11t_swapab_f16", "bf16": "v11t_swapab_bf16"}
SASS_MUST_HAVE = ("HGMMA", "UTMALDG", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR", "UCGABAR_ARV",
                  "UCGABAR_WAIT", "LD.E")      # the cluster barrier; loads from other CTAs' shared memory
SASS_MUST_NOT_HAVE = ("HMMA", "LDSM")
RASTER = "n-fastest"             # MT ≥ M: one tile covers all of M, the tiles run along N
SPLIT_IN_KERNEL = True            # numba_gemm.choose: no partials in memory, one launch

MAX_M = 32                        # wgmma's N, as this level uses it
MT_CHOICES = (16, 32)
NARROW_AFTER = 2                  # K slices a 128-wide plan may take before 64-wide tiles serve
MIN_SLICE_K_TILES = 8             # v11sl's
MAX_SPLITS = 8                    # the portable cluster size
MAX_STAGES = 16


@dataclass(frozen=True)
class SwapTile:
    """v11t's compile-time tile: MT rows of M (wgmma's N) × NT columns of N (NT / 64 warpgroups,
    wgmma's M), 64 deep, `stages` deep, thread 0 refilling the stage read `tma_lag` iterations
    ago. bm and bn name the tile of C as the other levels' tiles do; `defines()` writes it as the
    -DSW_* options native/v11t_swapab.cu requires."""
    mt: int = 16
    nt: int = 128
    stages: int = 4
    tma_lag: int = 2
    bk: int = 64

    @property
    def bm(self) -> int:
        return self.mt

    @property
    def bn(self) -> int:
        return self.nt

    @property
    def threads(self) -> int:
        return 2 * self.nt              # 128 per 64 columns

    @property
    def stage_bytes(self) -> int:
        return (self.nt + self.mt) * self.bk * 2

    def smem(self) -> int:
        """Stages + 1 KB to align them to 1024 bytes + the full/empty mbarriers."""
        return self.stages * self.stage_bytes + 1024 + 2 * self.stages * 8

    def problems(self) -> list[str]:
        out = []
        if self.mt not in MT_CHOICES:
            out.append(f"mt must be one of {MT_CHOICES}: the wgmma N this level compiles")
        if self.nt not in (64, 128):
            out.append("nt must be 64 or 128: one or two warpgroups of 64 columns")
        if not 2 <= self.tma_lag < self.stages:
            out.append("2 <= tma_lag < stages (the stage read at kt-1 is released after wait_group 1 at kt)")
        if self.smem() > cm.SMEM_LIMIT:
            out.append(f"{self.smem()} bytes of shared memory > {cm.SMEM_LIMIT}")
        return out

    def defines(self) -> tuple[str, ...]:
        bad = self.problems()
        if bad:
            raise ValueError(f"level {LEVEL}: no tile mt={self.mt}, nt={self.nt}, stages={self.stages}: "
                             f"{'; '.join(bad)}")
        return (f"-DSW_MT={self.mt}", f"-DSW_NT={self.nt}", f"-DSW_STAGES={self.stages}",
                f"-DSW_TMA_LAG={self.tma_lag}")


def tile_for(M: int, N: int, nt: int | None = None, stages: int | None = None) -> SwapTile:
    """MT the smallest of MT_CHOICES holding M (M ≤ 32), NT = 128 unless forced, and as many
    stages as fit in shared memory (up to MAX_STAGES) unless forced; a ValueError names what a
    forced tile breaks."""
    mt, nt = next((m for m in MT_CHOICES if M <= m), MT_CHOICES[-1]), nt or 128
    if stages is None:     # the valid tiles fit 9 stages or more; defines() words any other
        stages = max((s for s in range(3, MAX_STAGES + 1) if SwapTile(mt, nt, s).smem() <= cm.SMEM_LIMIT),
                     default=3)
    tile = SwapTile(mt=mt, nt=nt, stages=stages)
    tile.defines()                                  # raises for a tile the kernel cannot take
    return tile


CONFIG = tile_for(16, 8192)       # the census's and the ledgers' tile (decode, M = 16)
DEFINES = CONFIG.defines()


def plan_splits(M: int, N: int, K: int, sms: int = 132, splits: int | None = None,
                nt: int | None = None, stages: int | None = None, clusters=None):
    """(tile, S) for an M×N×K product on `sms` SMs: tile_for, and S K slices
    (splitk.cluster_splits: one cluster per tile). Where 128-wide tiles would need more than
    NARROW_AFTER slices to fill the SMs (N ≤ 4096 at M ≤ 32), 64-wide tiles with half the slices
    instead: each CTA's K loop is twice as long, so the pipeline's fill and the cluster's
    reduction weigh half as much. (1.5× faster at 16×4096×4096 against 4 slices of 128-wide
    tiles, most of it their clusters of 4 not all fitting at once; against the 3 slices that
    fit, 1.08× on an H100: docs/RESULTS.md, thirty-seventh run.) `clusters(tile,
    c)`, where given, says how many clusters of c CTAs of the tile's kernel fit at once, and S
    is lowered until all the tiles' clusters do (splitk.resident_splits; run() asks the driver).
    Pure otherwise: no device is touched."""
    def plan(nt):
        tile = tile_for(M, N, nt, stages)
        tiles = ceil_div(M, tile.bm) * ceil_div(N, tile.bn)
        return tile, tiles, splitk.cluster_splits(LEVEL, tiles, ceil_div(K, tile.bk), M, N, K, sms,
                                                  splits, MAX_SPLITS, MIN_SLICE_K_TILES)

    tile, tiles, S = plan(nt)
    if nt is None and S > NARROW_AFTER:
        tile, tiles, S = plan(64)
    if clusters is not None and splits is None:
        S = splitk.resident_splits(tiles, ceil_div(K, tile.bk), S, lambda c: clusters(tile, c))
    return tile, S


def launch_config(M: int, N: int, K: int, config: SwapTile | None = None, splits: int = 1):
    """(grid, block, smem): tiles·S CTAs of the tile's threads, in clusters of S along x."""
    config = config or tile_for(M, N)
    tiles = ceil_div(M, config.bm) * ceil_div(N, config.bn)
    return (tiles * splits, 1, 1), (config.threads, 1, 1), config.smem()


def unsupported(M: int, N: int, K: int) -> str | None:
    reason = wg.tma_rule(M, N, K)
    if reason is None and M > MAX_M:
        reason = (f"M = {M} > {MAX_M}: v11t puts M on wgmma's N, at most {MAX_M} here; "
                  "v11sk, v11sl and auto serve larger M")
    return reason


def run(A, B, C, alpha, beta, stream=None, splits: int | None = None, nt: int | None = None,
        stages: int | None = None):
    from ..runtime import nvrtc
    from ..runtime.launch import launch_native

    M, K = A.shape
    N = B.shape[1]
    reason = unsupported(M, N, K)
    if reason:
        raise ValueError(f"level {LEVEL} cannot run M={M}, N={N}, K={K}: {reason}")
    kernel_name = KERNEL_NAMES[cm.element_type(A)]
    tile, S = plan_splits(M, N, K, sms=cm.sm_count(), splits=splits, nt=nt, stages=stages,
                          clusters=cm.tile_clusters(SOURCE, kernel_name))
    per = splitk.slice_k_tiles(ceil_div(K, tile.bk), S)
    # v11's maps (an A box of MT rows, B in 64-column panels) and arguments; the tiles are one row
    args = wg.maps_and_args(LEVEL, A, B, C, alpha, beta, tile, super_tiles=False) + \
        cm.pack_args(("i", per), ("i", S))
    kernel = nvrtc.function(SOURCE, kernel_name, defines=tile.defines())
    grid, block, smem = launch_config(M, N, K, tile, S)
    launch_native(kernel, grid, block, smem, stream, args, cluster=S if S > 1 else None, pdl=True)
