"""read: diff native/v9_supertile.cu native/v10_tma.cu · run: python bench.py --level v10 --dtype fp16

v10: v9 with loads by TMA (cp.async.bulk.tensor.2d) and an mbarrier full/empty pipeline.

v10 = v9 with the load and synchronisation layers replaced — and a bigger tile. Two changes:

1. loads and synchronisation, described below;
2. tile: 128×256×64, 4 stages, 8 warps (2×4) of 64×64, one block per SM, instead of v9's
   128×128×64, 3 stages, 4 warps, two blocks per SM. With TMA doing the loads this tile is the
   sweep's best for v10, and TMA is worth more on it than on v9's tile (docs/RESULTS.md, "Tile
   sweep"). So v9 → v10 mixes the two effects.

The tile order (super-tiles) and the ldmatrix/mma.sync code are v9's, unchanged
(native/v10_tma.cu includes the same headers). One thread issues one TMA per operand box
(A: 128×64, B: up to four 64×64 panels) into SWIZZLE_128B shared tiles — the same bytes v9's
cp.async swizzle wrote, so the read side is untouched. Tensor maps are encoded on the host by
cuTensorMapEncodeTiled (numba_gemm.runtime.tma, constraints checked first) with L2 promotion 256 B and
passed as `const __grid_constant__ CUtensorMap` parameters. Per stage, full[s] counts the
bytes TMA delivered and empty[s] the 8 warps that finished reading; no __syncthreads in the K
loop. What it attacks: issue slots and address arithmetic of the loads (on this tile, 12
cp.async plus their addresses per thread per stage become 5 TMA instructions in one thread),
and the block-wide barrier (a warp waits only for the stage it reads). TMA zero-fills boxes past the matrix edge.

Limits: TMA needs a 16-byte aligned base and row strides that are multiples of 16 bytes, so
K % 8 == 0 (A's rows) and N % 8 == 0 (B's rows) for 2-byte types; other shapes are refused
before launch with a pointer to v9, which serves any shape.
"""
from __future__ import annotations

from . import _common as cm
from . import _wgmma as wg

LEVEL = "v10"
PARENT = "v9"
TITLE = "TMA loads + mbarrier pipeline"
DELTA = ("v10 = v9 with cp.async + __syncthreads replaced by TMA (cp.async.bulk.tensor.2d, "
         "SWIZZLE_128B) and per-stage full/empty mbarriers; also the tile: 128×256×64, 4 stages, "
         "8 warps, 1 block per SM")
DTYPES = cm.DTYPES
SOURCE = "v10_tma.cu"
KERNEL_NAMES = {"f16": "v10_tma_f16", "bf16": "v10_tma_bf16"}
SASS_MUST_HAVE = ("HMMA", "LDSM", "UTMALDG", "SYNCS")
RASTER = "super"

# Not v9's tile (docstring, change 2).
CONFIG = cm.TileConfig(bm=128, bn=256, bk=64, stages=4, warps_m=2, warps_n=4, min_blocks=1, tma_lag=2)
DEFINES = CONFIG.defines(tma=True)
SMEM = CONFIG.smem(tma=True)  # stages + alignment slack + full/empty barriers


def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None,
               config: cm.TileConfig = CONFIG) -> tuple[int, int]:
    """(super_m, super_n) for this shape on the current device (or a given L2 size)."""
    if l2_bytes is None:
        l2_bytes = cm.l2_cache_bytes()
    return cm.choose_supertile(M, N, K, config.bm, config.bn, l2_bytes)


def launch_config(M: int, N: int, K: int, config: cm.TileConfig = CONFIG):
    return cm.grid_1d(M, N, config, tma=True)


def unsupported(M: int, N: int, K: int, config: cm.TileConfig = CONFIG) -> str | None:
    return cm.unsupported_1d(M, N, K, config) or cm.tma_row_rule(K, N)


def run(A, B, C, alpha, beta, stream=None, config: cm.TileConfig | None = None, defines=()):
    """config: a tile other than CONFIG; defines: extra -D options (e.g. -DHG_NO_BF16)."""
    config = cm.checked_tile(CONFIG if config is None else config, tma=True)
    M, K = A.shape
    N = B.shape[1]
    args = wg.maps_and_args(LEVEL, A, B, C, alpha, beta, config)
    grid, block, smem = launch_config(M, N, K, config)
    cm.launch(SOURCE, KERNEL_NAMES[cm.element_type(A)], grid, block, smem, stream, args,
              config.defines(tma=True) + tuple(defines))
