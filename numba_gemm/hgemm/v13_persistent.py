"""read: diff native/v12_warpspec.cu native/v13_persistent.cu · run: python bench.py --level v13 --dtype fp16

v13: v12 + a persistent grid — one CTA per SM, each walking a list of 128×128 tiles, its two
ping-pong consumers taking every other tile of the list.

v13 = v12 with the grid changed; the producer, the two consumers, the order barrier, the
32 KB stages and the epilogue are v12's (native/pingpong.cuh). v12 hid the left half's store
under the right half's K loop, but each 128×256 block tile still paid, with the tensor cores
idle: the right half's store, the CTA's launch and barrier set-up, and the first stages'
fill. Here the host launches min(SMs, tiles) CTAs; CTA b computes tiles b, b + G, b + 2G, ...
(G CTAs) of the 128×128 grid in v9's super-tile order, and the ring and the turns run on from
tile to tile: every tile's store runs under the other consumer's K loop while the producer
already loads the tiles after it. What stays exposed is one pipeline fill at the start and the
last tile's store at the end. At any moment the G CTAs work on G consecutive tiles of the
super-tile order, so what they share in L2 is what a wave of v9-v12 shared.

Which ledger moved: cycles — the fixed cost per tile (launch, set-up, fill, the exposed half of
the epilogue) goes from once per block tile to once per launch. Bytes are v12's. Census
(CI-asserted): HGMMA.64x128x16.F32, UTMALDG.2D, USETMAXREG, BAR.ARV / BAR.SYNC; no HMMA, LDSM
or local memory.

Limits as v10-v12 (TMA: K % 8 == 0, N % 8 == 0, 16-byte aligned base; refused before launch,
naming v9).
"""
from __future__ import annotations

from . import _common as cm
from . import _wgmma as wg

LEVEL = "v13"
PARENT = "v12"
TITLE = "persistent ping-pong: one CTA per SM walks its tiles"
DELTA = ("v13 = v12 + a persistent grid: one CTA per SM walks every G-th 128x128 tile in "
         "super-tile order, its consumers taking turns across tiles, so every epilogue but the "
         "last runs under a K loop")
DTYPES = cm.DTYPES
SOURCE = "v13_persistent.cu"
KERNEL_NAMES = {"f16": "v13_persistent_f16", "bf16": "v13_persistent_bf16"}
SASS_MUST_HAVE = ("HGMMA.64x128x16", "UTMALDG", "USETMAXREG.DEALLOC", "USETMAXREG.TRY_ALLOC",
                  "BAR.ARV", "BAR.SYNC")
SASS_MUST_NOT_HAVE = ("HMMA", "LDSM")
RASTER = "super"

CONFIG = wg.WgmmaTile(bm=128, bn=128, stages=6, producer=True, pingpong=True)
DEFINES = CONFIG.defines()        # the whole tile as -DHG_* (native/wgmma_tile.cuh requires them)


def tiles(M: int, N: int, config=CONFIG) -> int:
    """Cluster tiles: config.cluster 128 × 128 tiles one above the other (one without a cluster)."""
    return cm.cdiv(cm.cdiv(M, config.bm), config.cluster) * cm.cdiv(N, config.bn)


def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None, config=CONFIG):
    """(super_m, super_n) in cluster tiles: v9's L2 rule."""
    if l2_bytes is None:
        l2_bytes = cm.l2_cache_bytes()
    return cm.choose_supertile(M, N, K, config.cluster * config.bm, config.bn, l2_bytes)


def launch_config(M: int, N: int, K: int, config=CONFIG, resident: int = 132):
    """(grid, block, smem): as many clusters as are resident at once (one CTA per SM: ~193 KB of
    shared memory), no more than there are cluster tiles."""
    clusters = max(1, min(resident, tiles(M, N, config)))
    return (config.cluster * clusters, 1, 1), (config.threads, 1, 1), config.smem()


def unsupported(M: int, N: int, K: int) -> str | None:
    return wg.tma_rule(M, N, K)


_resident: dict = {}


def resident_clusters(fn, config=CONFIG) -> int:
    """How many clusters of this kernel fit on the device at once: the SM count without a
    cluster, cuOccupancyMaxActiveClusters with one."""
    if config.cluster == 1:
        return cm.sm_count()
    from .. import driver

    key = (int(fn), config.cluster)
    if key not in _resident:
        n = driver.max_active_clusters(fn, (config.threads, 1, 1), config.smem(), config.cluster)
        if n < 1:
            raise RuntimeError(f"no cluster of {config.cluster} CTAs with {config.smem()} bytes of shared memory fits")
        _resident[key] = n
    return _resident[key]


def run(A, B, C, alpha, beta, stream=None, config=CONFIG):
    from .. import nvrtc
    from ..launch import launch_native

    M, K = A.shape
    N = B.shape[1]
    args = wg.maps_and_args(LEVEL, A, B, C, alpha, beta, config, order=tile_order(M, N, K, config=config))
    fn = nvrtc.function(SOURCE, KERNEL_NAMES[cm.element_type(A)], defines=config.defines())
    grid, block, smem = launch_config(M, N, K, config, resident_clusters(fn, config))
    launch_native(fn, grid, block, smem, stream, args, cluster=config.cluster if config.cluster > 1 else None)
