"""read: diff native/v11sk_splitk.cu native/v11sl_splitk.cu · run: python bench.py --level v11sl --dtype fp16

v11sl: v11sk with the reduction inside the GEMM kernel — a tile's slices form a cluster and add their partials in shared memory.

v11sl = v11sk without the second launch and without the workspace. The S CTAs that compute the
slices of one output tile are launched as one thread-block cluster (S ≤ 8, the portable cluster
size: the hardware runs them at the same time on one GPC). After its K loop each parks its fp32
partial in its own shared memory (over the stages the loop no longer needs); a cluster barrier;
then CTA z adds rows [z·BM/S, (z+1)·BM/S) of the tile over the S partials, read from each CTA's
shared memory in the order 0, 1, …, S-1 (distributed shared memory: mapa + ld.shared::cluster),
and writes C = alpha·sum + beta·C; a second cluster barrier keeps every CTA's shared memory alive
until the others have read it. The order is fixed, so the bits are the same every run; nothing
is left behind, so a captured graph replays exactly.

Which ledger moved: bytes and launches. v11sk writes S·M·N fp32 partials to DRAM (or L2) and a
second kernel reads them back after the last slice has finished; here the partials never leave
the GPC, the reduction of a tile is shared by its S CTAs, and the launch's fixed cost is paid
once. What it costs: the park and the reads (BM·BN·4 bytes per CTA through shared memory) and
two cluster barriers per tile.

The tile: BM = 64 when M ≤ 64 (v11sk's rule), else 128, and BN = 64. Measured on the H200
(docs/RESULTS.md, twelfth run) the 64-wide tiles with a split of 2 beat the 128- and 256-wide
ones at the narrow and small shapes this level is for (M = 128: 0.94× cuBLAS against 0.52×).
When the whole grid (tiles·S) fits one CTA per SM, the pipeline is as deep as shared memory
allows (8 stages for 128×64): thread 0 refills the stage read two iterations ago, so STAGES − 2
loads are in flight, and these shapes are memory-bound. A larger grid keeps v11's 4 stages,
so that two CTAs fit on an SM (512×4096×4096: 0.81× with 4 stages, 0.66× with 8).
run(..., bm=, bn=, stages=) forces another tile for a benchmark, and run(..., splits=S) a split
count (as v11sk). Plan: `plan_splits`, pure.

Limits (TMA's, as v11): 16-byte aligned bases and K % 8 == 0, N % 8 == 0 for 2-byte types;
other shapes are refused before launch, naming v9.
"""
from __future__ import annotations

import dataclasses

from .. import splitk
from ..util import ceil_div
from . import _common as cm
from . import _wgmma as wg

LEVEL = "v11sl"
PARENT = "v11sk"
TITLE = "split-K reduced in the kernel: a tile's slices are one cluster"
DELTA = ("v11sl = v11sk with the reduction in the GEMM kernel: a tile's S slices form a cluster and "
         "add their partials through distributed shared memory in order 0..S-1; 64-wide tiles")
DTYPES = cm.DTYPES
SOURCE = "v11sl_splitk.cu"
KERNEL_NAMES = {"f16": "v11sl_splitk_f16", "bf16": "v11sl_splitk_bf16"}
SASS_MUST_HAVE = ("HGMMA", "UTMALDG", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR", "UCGABAR_ARV",
                  "UCGABAR_WAIT", "LD.E")      # the cluster barrier; loads from other CTAs' shared memory
SASS_MUST_NOT_HAVE = ("HMMA", "LDSM")
RASTER = "super"
SPLIT_IN_KERNEL = True            # numba_gemm.choose: no partials in memory, one launch

CONFIG = wg.WgmmaTile(bm=128, bn=64)   # the census's and the ledgers' tile (M > 64)
DEFINES = CONFIG.defines()
SMALL_M = 64                      # M <= SMALL_M takes the 64-row tile
MIN_SLICE_K_TILES = 8             # v11sk's: shorter slices lost to one CTA per tile on the H200
MAX_SPLITS = 8                    # the portable cluster size
# No other tile for auto: 128×128 over 4 slices and 128×256 over 8, which read fewer bytes from
# L2 at narrow N, ran slower than this tile on an H100 at every shape tried (the sum of more
# slices costs more than the L2 bytes save; docs/RESULTS.md, "twenty-fifth run").


def tile_for(M: int, N: int, bm: int | None = None, bn: int | None = None,
             stages: int | None = None) -> wg.WgmmaTile:
    """The tile for M x N: bm by M (64 when M <= 64), bn = 64 and v11's 4 stages; any of them
    may be forced (a ValueError names the tiles that exist)."""
    bm = bm if bm is not None else (64 if M <= SMALL_M else 128)
    tile = dataclasses.replace(CONFIG, bm=bm, bn=bn or CONFIG.bn, stages=stages or CONFIG.stages)
    bad = tile.problems()
    if bad:
        raise ValueError(f"level {LEVEL}: no tile bm={tile.bm}, bn={tile.bn}, stages={tile.stages}: "
                         f"{'; '.join(bad)}")
    return tile


# python -m numba_gemm warm compiles these too: each tile run() plans (CONFIG and the 64-row
# tile), at 4 stages and as deep as a one-wave grid runs it
WARM_VARIANTS = {f"bm={t.bm},bn={t.bn},stages={t.stages}": t.defines()
                 for base in (CONFIG, tile_for(SMALL_M, 64)) for t in (base, wg.deepest(base))
                 if t != CONFIG}


def plan_splits(M: int, N: int, K: int, sms: int = 132, splits: int | None = None,
                bm: int | None = None, bn: int | None = None, stages: int | None = None,
                clusters=None):
    """(tile, S) for an M×N×K product on `sms` SMs: tile_for, and S K slices
    (splitk.choose_splits, or `splits` when given), rounded so that no slice is empty
    (splitk.effective_splits); the deepest pipeline when the tiles·S CTAs fit one per SM and
    `stages` is not forced. `clusters(tile, c)`, where given, says how many clusters of c CTAs
    of the tile's kernel fit at once, and a planned S is lowered until all the tiles' clusters
    do (splitk.resident_splits; run() asks the driver). Pure otherwise: no device is touched."""
    tile = tile_for(M, N, bm, bn, stages)
    tiles = ceil_div(M, tile.bm) * ceil_div(N, tile.bn)
    k_tiles = ceil_div(K, tile.bk)
    S = splitk.cluster_splits(LEVEL, tiles, k_tiles, M, N, K, sms, splits, MAX_SPLITS, MIN_SLICE_K_TILES)
    if stages is None and tiles * S <= sms:
        tile = wg.deepest(tile)
    if clusters is not None and splits is None:
        S = splitk.resident_splits(tiles, k_tiles, S, lambda c: clusters(tile, c))
    return tile, S


def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None, config=None):
    """(super_m, super_n): v9's L2 rule for the tile this shape takes."""
    return wg.tile_order(M, N, K, l2_bytes, config or tile_for(M, N))


def launch_config(M: int, N: int, K: int, config=None, splits: int = 1):
    """(grid, block, smem): tiles·S CTAs of the tile's threads, in clusters of S along x."""
    config = config or tile_for(M, N)
    grid, block, smem = wg.launch_config(M, N, K, config)
    return (grid[0] * splits, 1, 1), block, smem


def unsupported(M: int, N: int, K: int) -> str | None:
    return wg.tma_rule(M, N, K) or (
        "more than 2^31 - 1 output tiles" if ceil_div(M, 64) * ceil_div(N, 64) > cm.INT32_MAX else None)


def run(A, B, C, alpha, beta, stream=None, splits: int | None = None, bm: int | None = None,
        bn: int | None = None, stages: int | None = None):
    from ..runtime import nvrtc
    from ..runtime.launch import launch_native

    M, K = A.shape
    N = B.shape[1]
    reason = unsupported(M, N, K)
    if reason:
        raise ValueError(f"level {LEVEL} cannot run M={M}, N={N}, K={K}: {reason}")
    kernel_name = KERNEL_NAMES[cm.element_type(A)]
    tile, S = plan_splits(M, N, K, sms=cm.sm_count(), splits=splits, bm=bm, bn=bn,
                           stages=stages, clusters=cm.tile_clusters(SOURCE, kernel_name))
    per = splitk.slice_k_tiles(ceil_div(K, tile.bk), S)
    args = wg.maps_and_args(LEVEL, A, B, C, alpha, beta, tile) + cm.pack_args(("i", per), ("i", S))
    kernel = nvrtc.function(SOURCE, kernel_name, defines=tile.defines())
    grid, block, smem = launch_config(M, N, K, tile, S)
    launch_native(kernel, grid, block, smem, stream, args, cluster=S if S > 1 else None, pdl=True)
