"""read: diff native/v8_mma.cu native/v9_supertile.cu · run: python bench.py --level v9 --dtype fp16

v9: v8 + a 1-D grid decoded into super-tiles, chosen from the card's L2 size.

v9 = v8 with one change at the top of the kernel: which tile block `blockIdx.x` computes
(native/v9_supertile.cu is v8_mma.cu with tile_supertile in place of tile_row_major). Blocks are
issued in index order, so the numbering decides what L2 can re-use. v8's row-major order keeps
a wave's A rows in L2 but sweeps all of B for every band of tile rows; once A + B exceed L2
(8192² fp16: 256 MiB vs the H200's 60 MiB) B is re-read from DRAM grid_m times. v9 groups
super_m tile rows into a band and walks each band in super-tiles super_n tiles wide (n fastest
inside), so the band's A panels stay in L2 and B is read once per band: ceil(grid_m / super_m)
passes instead of grid_m. What it attacks: DRAM bytes. The tile is v8's.

The super-tile obeys the seed's working-set rule (SM·BM + SN·BN)·K·2 bytes ≤ L2 share, computed
by the pure function `_common.choose_supertile` from CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE; see its
docstring for the rule and why half the L2. The decode (`_common.supertile_decode`, mirrored by
the kernel) handles ragged edges with no idle blocks. At 4096² A + B = 64 MB: any order nearly
fits, so expect v9 ≈ v8 there and the difference at 8192². Measured on the H200: docs/RESULTS.md,
"Why v9 (super-tiles) does not move the time on the H200" (it halves DRAM traffic; the H200 was
not DRAM-bound).
"""
from __future__ import annotations

from . import _common as cm

LEVEL = "v9"
PARENT = "v8"
TITLE = "super-tile rasterisation for L2"
DELTA = "v9 = v8 + 1-D grid decoded into L2-sized super-tiles (SM·BM + SN·BN)·K·2 B ≤ L2/2, so A panels stay in L2 and B is streamed once per band"
DTYPES = cm.DTYPES
SOURCE = "v9_supertile.cu"
KERNEL_NAMES = {"f16": "v9_supertile_f16", "bf16": "v9_supertile_bf16"}
SASS_MUST_HAVE = ("HMMA", "LDSM", "LDGSTS")
RASTER = "super"

# v8's tile: the super-tile order is the only change
CONFIG = cm.CP_ASYNC_TILE
DEFINES = CONFIG.defines()


def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None,
               config: cm.TileConfig = CONFIG) -> tuple[int, int]:
    """(super_m, super_n) for this shape on the current device (or a given L2 size)."""
    if l2_bytes is None:
        l2_bytes = cm.l2_cache_bytes()
    return cm.choose_supertile(M, N, K, config.bm, config.bn, l2_bytes)


def launch_config(M: int, N: int, K: int, config: cm.TileConfig = CONFIG):
    return cm.grid_1d(M, N, config)


def unsupported(M: int, N: int, K: int, config: cm.TileConfig = CONFIG) -> str | None:
    return cm.unsupported_1d(M, N, K, config)


def run(A, B, C, alpha, beta, stream=None, config: cm.TileConfig | None = None, defines=()):
    """config: a tile other than CONFIG; defines: extra -D options (e.g. -DHG_NO_BF16)."""
    config = cm.checked_tile(CONFIG if config is None else config)
    M, K = A.shape
    N = B.shape[1]
    args = cm.cp_async_args(A, B, C, alpha, beta, cm.vec_c(cm.device_ptr(C), N),
                            *tile_order(M, N, K, config=config))
    grid, block, smem = launch_config(M, N, K, config)
    cm.launch(SOURCE, KERNEL_NAMES[cm.element_type(A)], grid, block, smem, stream, args,
              config.defines() + tuple(defines))
