"""read: diff native/v7_wmma.cu native/v8_mma.cu · run: python bench.py --level v8 --dtype fp16

v8: inline PTX ldmatrix + mma.sync.m16n8k16; the 128-byte XOR swizzle instead of padding.

v8 = v7 with WMMA's opaque fragments replaced by the instructions themselves — and, with them,
a new shared layout and a new pipeline shape. v8 changes six things at once, not one:

1. instruction: each warp loads its A fragments with ldmatrix.x4 and its B fragments with
   ldmatrix.x4.trans (B is K×N row-major in shared memory, so the transposing load delivers
   mma's column fragment) and issues mma.sync.m16n8k16 with fp32 accumulators; the epilogue
   stores straight from the accumulator registers (no round trip through shared memory);
2. swizzle: shared tiles drop the padding: 16-byte chunk c of a 128-byte row r is stored at
   chunk c ^ (r % 8), so the 8 rows one ldmatrix reads hit 8 distinct bank groups; each lane's
   swizzled ldmatrix address is computed once and a k step is one XOR (kk·32);
3. BK 32 → 64 (one 128-byte row of A per m: the swizzle's span);
4. stages 2 → 3 (cp.async pipeline);
5. warps: 4 warps (2×2) of 64×64 instead of 8 (2×4) of 64×32, and 2 blocks per SM;
6. grid: 1-D in row-major tile order (n fastest) instead of v7's 2-D grid (m fastest).
The block tile of C stays 128×128. What it attacks: issue cycles (no fragment shuffling, no
epilogue round trip) and shared-memory bytes (no padding).

Tile choice for the H200 (the seed's 128×64×64, 2 stages, 48 KB was sized for a 5080): a
sweep of eleven tiles on the H200 (tools/hgemm_sweep.py; its figures: docs/RESULTS.md, "Tile
sweep") put 128×128×64 with 3 cp.async stages and 4 warps of 64×64, two blocks per SM, at the
top for v8 and v9, ahead of the 128×256×64 4-stage tile with 8 such warps. A warp's 16-deep k
step is 8 ldmatrix (512 B each) for 32 mma: priced with the register-only mma.sync ceiling and
the cost of one ldmatrix.x4 (both measured by `python -m numba_gemm.measure.microbench --tensor`;
docs/RESULTS.md, "2026-12-01: the whole ladder at 4096³, the host cost per call, the
tensor-core ceilings"), the shared reads take about two thirds of the mma time; a 64×32 warp
tile would need as many clocks of reads as of mma, too tight (docs/LADDER.md, "From k8 to v7",
prices both). 128 fp32 accumulators per thread put the
kernel near 250 registers, so two 4-warp blocks fill an SM's register file: one block's
barrier, pipeline fill and epilogue overlap the other's main loop.

The tile is a compile-time configuration (`_common.TileConfig`, passed to NVRTC as -DHG_*
options — native/tile_config.cuh requires all of them — and part of the cubin cache key);
`run(..., config=...)` takes another one, which is how tools/hgemm_sweep.py compares tiles.
The shipped tile is `CONFIG`.

Edges as v7: zero-filled cp.async past M, N, K, masked stores, element-wise fallback loads when
rows of A or B are not 16-byte aligned.
"""
from __future__ import annotations

from . import _common as cm

LEVEL = "v8"
PARENT = "v7"
TITLE = "ldmatrix + mma.sync, 128B XOR swizzle"
DELTA = ("v8 = v7 with inline-PTX ldmatrix/mma.sync.m16n8k16 instead of WMMA and a 128-byte XOR "
         "swizzle instead of padding; also BK 32→64, 3 stages, 4 warps of 64×64, 2 blocks per SM, "
         "1-D n-fastest grid")
DTYPES = cm.DTYPES
SOURCE = "v8_mma.cu"
KERNEL_NAMES = {"f16": "v8_mma_f16", "bf16": "v8_mma_bf16"}
SASS_MUST_HAVE = ("HMMA", "LDSM", "LDGSTS")
RASTER = "n-fastest"

# the sweep's best for v8 and v9 (docstring)
CONFIG = cm.CP_ASYNC_TILE
DEFINES = CONFIG.defines()


def launch_config(M: int, N: int, K: int, config: cm.TileConfig = CONFIG):
    return cm.grid_1d(M, N, config)


def unsupported(M: int, N: int, K: int, config: cm.TileConfig = CONFIG) -> str | None:
    return cm.unsupported_1d(M, N, K, config)


def run(A, B, C, alpha, beta, stream=None, config: cm.TileConfig | None = None, defines=()):
    """config: a tile other than CONFIG; defines: extra -D options (e.g. -DHG_NO_BF16)."""
    config = cm.checked_tile(CONFIG if config is None else config)
    M, K = A.shape
    N = B.shape[1]
    args = cm.cp_async_args(A, B, C, alpha, beta, cm.vec_c(cm.device_ptr(C), N))
    grid, block, smem = launch_config(M, N, K, config)
    cm.launch(SOURCE, KERNEL_NAMES[cm.element_type(A)], grid, block, smem, stream, args,
              config.defines() + tuple(defines))
