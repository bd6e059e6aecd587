"""v7: tensor cores through the WMMA API, cp.async double buffering, padded shared rows.

The first HGEMM rung. 128×128×32 block tile, 8 warps as 2×4, each warp owns 64×32 of C as
4×2 WMMA 16×16×16 fragments (fp32 accumulators). Global → shared goes by cp.async, two
buffers deep, so the next K tile loads while this one is multiplied; shared rows are padded
by 8 halves so ldmatrix's 8 rows hit different banks. What it attacks compared with an FFMA
SGEMM: issue cycles — one HMMA does 4096 FLOPs where an FFMA does 2.

Edges: zero-filled cp.async past M, N, K; masked stores. Rows of A (or B) that are not
16-byte aligned (K, or N, not a multiple of 8, or an unaligned base) take an element-wise
load path instead of cp.async: slower, still exact.
"""
from __future__ import annotations

from . import _common as cm

LEVEL = "v7"
PARENT = None
TITLE = "WMMA, cp.async double buffer, padded smem"
DELTA = "v7 = tensor cores via nvcuda::wmma (16×16×16 fragments) fed by cp.async double buffering into padded shared tiles"
DTYPES = cm.DTYPES
SOURCE = "v7_wmma.cu"
KERNEL_NAME = "v7_wmma_f16"
KERNEL_NAMES = {"f16": "v7_wmma_f16", "bf16": "v7_wmma_bf16"}
# The census reads KERNEL_NAME (fp16): WMMA's bf16 fragments load with LDS, not LDSM.
SASS_MUST_HAVE = ("HMMA", "LDSM", "LDGSTS")
RASTER = "m-fastest"

BM, BN, BK = 128, 128, 32
CONFIG = cm.TileConfig(bm=BM, bn=BN, bk=BK, stages=2, warps_m=2, warps_n=4)  # the ledgers' tile (v7 takes no -D options)
THREADS = 256
SMEM = 0  # all static (37,888 bytes)


def launch_config(M: int, N: int, K: int):
    """(grid, block, dynamic smem) — grid x over M tiles, y over N tiles, as in the seed."""
    return (cm.cdiv(M, BM), cm.cdiv(N, BN), 1), (THREADS, 1, 1), SMEM


def unsupported(M: int, N: int, K: int) -> str | None:
    reason = cm.check_dims(M, N, K)
    if reason:
        return reason
    if cm.cdiv(N, BN) > 65535:
        return f"N={N} needs more than 65535 column tiles (grid y limit); v8 uses a 1-D grid"
    return None


def run(A, B, C, alpha, beta, stream=None):
    M, K = A.shape
    N = B.shape[1]
    kind = cm.element_type(A)
    pa, pb, pc = cm.device_ptr(A), cm.device_ptr(B), cm.device_ptr(C)
    args = cm.pack_args(
        ("p", pa), ("p", pb), ("p", pc), ("i", M), ("i", N), ("i", K),
        ("f", alpha), ("f", beta),
        ("i", int(cm.rows_16b_aligned(pa, K))), ("i", int(cm.rows_16b_aligned(pb, N))),
    )
    grid, block, smem = launch_config(M, N, K)
    cm.launch(SOURCE, KERNEL_NAMES[kind], grid, block, smem, stream, args)
