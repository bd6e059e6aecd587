"""v8: inline PTX ldmatrix + mma.sync.m16n8k16; the 128-byte XOR swizzle instead of padding.

v8 = v7 with WMMA's opaque fragments replaced by the instructions themselves. Each warp loads
its A fragments with ldmatrix.x4 and its B fragments with ldmatrix.x4.trans (B is K×N row-major
in shared memory, so the transposing load delivers mma's column fragment), and issues
mma.sync.m16n8k16 with fp32 accumulators. Shared tiles drop the padding: 16-byte chunk c of a
128-byte row r is stored at chunk c ^ (r % 8), so the 8 rows one ldmatrix reads hit 8 distinct
bank groups. The swizzled ldmatrix address of each lane is computed once; a k step is one XOR
(kk·32), not a fresh swizzle. What it attacks: issue cycles (no fragment shuffling, no
epilogue round trip through shared memory per fragment) and shared-memory bytes (no padding).

Tile choice for the H200 (the seed's 128×64×64, 2 stages, 48 KB was sized for a 5080): a
sweep of eleven tiles on the H200 (tools/hgemm_sweep.py, docs/RESULTS.md) put 128×128×64 with
3 cp.async stages and 4 warps of 64×64, two blocks per SM, at the top for v8 and v9 (394 and 420
TFLOPS at 8192; the 128×256×64 4-stage tile with 8 such warps: 386 and 386). A warp's 16-deep k
step is 8 ldmatrix (512 B each) for 32 mma: at the measured register-only mma.sync ceiling
(639 TFLOPS ≈ one m16n8k16 per ~1.7 clk per SM) that is 32 clk of shared reads per ~54 clk of
mma; a 64×32 warp tile would need 24 clk of reads per 27 of mma, too tight. 128 fp32
accumulators per thread put the kernel near 250 registers, so two 4-warp blocks fill an SM's
register file: one block's barrier, pipeline fill and epilogue overlap the other's main loop.
Grid: 1-D, row-major tile order (n fastest), as in the seed.

The tile is a compile-time configuration (`_common.TileConfig`, passed to NVRTC as -DHG_*
options and part of the cubin cache key); `run(..., config=...)` takes another one, which is
how tools/hgemm_sweep.py compares tiles. The shipped tile is the one above (`CONFIG`).

Edges as v7: zero-filled cp.async past M, N, K, masked stores, element-wise fallback loads when
rows of A or B are not 16-byte aligned.
"""
from __future__ import annotations

from . import _common as cm

LEVEL = "v8"
PARENT = "v7"
TITLE = "ldmatrix + mma.sync, 128B XOR swizzle"
DELTA = "v8 = v7 with inline-PTX ldmatrix/mma.sync.m16n8k16 instead of WMMA and a 128-byte XOR swizzle instead of padding; 128×128×64 tile, 3 stages, 2 blocks per SM"
DTYPES = cm.DTYPES
SOURCE = "v8_mma.cu"
KERNEL_NAME = "v8_mma_f16"
KERNEL_NAMES = {"f16": "v8_mma_f16", "bf16": "v8_mma_bf16"}
SASS_MUST_HAVE = ("HMMA", "LDSM", "LDGSTS")
RASTER = "n-fastest"

# measured best of the sweep for v8 and v9 (docstring); not the source default, hence DEFINES
CONFIG = cm.TileConfig(bm=128, bn=128, stages=3, warps_m=2, warps_n=2, min_blocks=2)
DEFINES = CONFIG.defines()
BM, BN, BK, STAGES = CONFIG.bm, CONFIG.bn, CONFIG.bk, CONFIG.stages
THREADS = CONFIG.threads
STAGE_BYTES = CONFIG.stage_bytes
SMEM = CONFIG.smem()  # + 1 KB slack: the kernel aligns its base to 1024 bytes


def tile_order(M: int, N: int, K: int, config: cm.TileConfig = CONFIG) -> tuple[int, int]:
    """(super_m, super_n) kernel arguments; v8 ignores them (row-major order)."""
    return 1, cm.cdiv(N, config.bn)


def launch_config(M: int, N: int, K: int, config: cm.TileConfig = CONFIG):
    grid = cm.cdiv(M, config.bm) * cm.cdiv(N, config.bn)
    return (grid, 1, 1), (config.threads, 1, 1), config.smem()


def unsupported(M: int, N: int, K: int, config: cm.TileConfig = CONFIG) -> str | None:
    reason = cm.check_dims(M, N, K)
    if reason:
        return reason
    if cm.cdiv(M, config.bm) * cm.cdiv(N, config.bn) > cm.INT32_MAX:
        return "more than 2^31 - 1 output tiles"
    return None


def checked(config: cm.TileConfig | None, tma: bool = False) -> cm.TileConfig:
    config = CONFIG if config is None else config
    bad = config.problems(tma)
    if bad:
        raise ValueError(f"tile configuration {config.label()} is not supported: {'; '.join(bad)}")
    return config


def kernel_args(A, B, C, alpha, beta, super_m, super_n):
    M, K = A.shape
    N = B.shape[1]
    pa, pb, pc = cm.device_ptr(A), cm.device_ptr(B), cm.device_ptr(C)
    return cm.pack_args(
        ("p", pa), ("p", pb), ("p", pc), ("i", M), ("i", N), ("i", K),
        ("f", alpha), ("f", beta),
        ("i", int(cm.rows_16b_aligned(pa, K))), ("i", int(cm.rows_16b_aligned(pb, N))),
        ("i", int(pc % 8 == 0 and N % 2 == 0)), ("i", super_m), ("i", super_n),
    )


def run(A, B, C, alpha, beta, stream=None, config: cm.TileConfig | None = None, defines=()):
    """config: a tile other than the default; defines: extra -D options (e.g. -DHG_NO_BF16)."""
    config = checked(config)
    M, K = A.shape
    N = B.shape[1]
    args = kernel_args(A, B, C, alpha, beta, *tile_order(M, N, K, config))
    grid, block, smem = launch_config(M, N, K, config)
    cm.launch(SOURCE, KERNEL_NAMES[cm.element_type(A)], grid, block, smem, stream, args,
              config.defines() + tuple(defines))
