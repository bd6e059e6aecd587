"""read: native/v7_wmma.cu (the first HGEMM rung: no parent to diff against) · run: python bench.py --level v7 --dtype fp16

v7: tensor cores through the WMMA API, cp.async double buffering, padded shared rows.

The first HGEMM rung (native/v7_wmma.cu). 128×128×32 block tile, 8 warps as 2×4, each warp
owns 64×32 of C as 4×2 WMMA 16×16×16 fragments (fp32 accumulators). Global → shared goes by
cp.async, two buffers deep, so the next K tile loads while this one is multiplied; shared rows
are padded by 8 halves so ldmatrix's 8 rows hit different banks. What it attacks compared with
an FFMA SGEMM: issue cycles — one HMMA does 4096 FLOPs where an FFMA does 2. Grid: 2-D,
blockIdx.x over M tiles (m fastest), as in the seed.

Edges: zero-filled cp.async past M, N, K; masked stores. Rows of A (or B) that are not
16-byte aligned (K, or N, not a multiple of 8, or an unaligned base) take an element-wise
load path instead of cp.async: slower, still exact.

The tile is fixed in the source (v7 takes no -D options); CONFIG states it for the ledgers.
"""
from __future__ import annotations

from . import _common as cm

LEVEL = "v7"
PARENT = None
TITLE = "WMMA, cp.async double buffer, padded smem"
DELTA = "v7 = tensor cores via nvcuda::wmma (16×16×16 fragments) fed by cp.async double buffering into padded shared tiles"
DTYPES = cm.DTYPES
SOURCE = "v7_wmma.cu"
KERNEL_NAMES = {"f16": "v7_wmma_f16", "bf16": "v7_wmma_bf16"}
SASS_MUST_HAVE = ("HMMA", "LDSM", "LDGSTS")
RASTER = "m-fastest"

# what native/v7_wmma.cu hard-codes (BM, BN, BK, 2 buffers, 2 x 4 warps); no -D options
CONFIG = cm.TileConfig(bm=128, bn=128, bk=32, stages=2, warps_m=2, warps_n=4)
DEFINES = ()
SMEM = 0  # all static (37,888 bytes)


def launch_config(M: int, N: int, K: int):
    """(grid, block, dynamic smem) — grid x over M tiles, y over N tiles, as in the seed."""
    return (cm.cdiv(M, CONFIG.bm), cm.cdiv(N, CONFIG.bn), 1), (CONFIG.threads, 1, 1), SMEM


def unsupported(M: int, N: int, K: int) -> str | None:
    reason = cm.check_dims(M, N, K)
    if reason:
        return reason
    if cm.cdiv(N, CONFIG.bn) > 65535:
        return f"N={N} needs more than 65535 column tiles (grid y limit); v8 uses a 1-D grid"
    return None


def run(A, B, C, alpha, beta, stream=None):
    args = cm.cp_async_args(A, B, C, alpha, beta)
    grid, block, smem = launch_config(A.shape[0], B.shape[1], A.shape[1])
    cm.launch(SOURCE, KERNEL_NAMES[cm.element_type(A)], grid, block, smem, stream, args)
