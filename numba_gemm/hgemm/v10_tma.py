"""v10: v9 with loads by TMA (cp.async.bulk.tensor.2d) and an mbarrier full/empty pipeline.

v10 = v9 with the load and synchronisation layers replaced; the tile order (super-tiles) and
the ldmatrix/mma.sync code are v9's, unchanged. One thread issues one TMA per operand box
(A: 128×64, B: up to four 64×64 panels) into SWIZZLE_128B shared tiles — the same bytes v8's
cp.async swizzle wrote, so the read side is untouched. Tensor maps are encoded on the host by
cuTensorMapEncodeTiled (numba_gemm.tma, constraints checked first) with L2 promotion 256 B and
passed as `const __grid_constant__ CUtensorMap` parameters. Per stage, full[s] counts the
bytes TMA delivered and empty[s] the 8 warps that finished reading; no __syncthreads in the K
loop. What it attacks: issue slots and address arithmetic of the loads (12 cp.async plus their
addresses per thread per stage become 5 instructions in one thread), and the block-wide
barrier (a warp waits only for the stage it reads). TMA zero-fills boxes past the matrix edge.

Limits: TMA needs a 16-byte aligned base and row strides that are multiples of 16 bytes, so
K % 8 == 0 (A's rows) and N % 8 == 0 (B's rows) for 2-byte types; other shapes are refused
before launch with a pointer to v9, which serves any shape.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .. import tma
from . import _common as cm
from . import v9_supertile as v9

LEVEL = "v10"
PARENT = "v9"
TITLE = "TMA loads + mbarrier pipeline"
DELTA = "v10 = v9 with cp.async + __syncthreads replaced by TMA (cp.async.bulk.tensor.2d, SWIZZLE_128B) and per-stage full/empty mbarriers"
DTYPES = cm.DTYPES
SOURCE = "v10_tma.cu"
KERNEL_NAME = "v10_tma_f16"
KERNEL_NAMES = {"f16": "v10_tma_f16", "bf16": "v10_tma_bf16"}
SASS_MUST_HAVE = ("HMMA", "LDSM", "UTMALDG", "SYNCS")
RASTER = "super"

# Not v9's tile: with TMA doing the loads the 128×256×64, 4-stage, 8-warp tile is the sweep's
# best for v10 (483 TFLOPS at 8192 vs 448 on v9's 128×128 tile; docs/RESULTS.md).
CONFIG = cm.DEFAULT_TILE
DEFINES = CONFIG.defines(tma=True)
BM, BN, BK, STAGES, THREADS = CONFIG.bm, CONFIG.bn, CONFIG.bk, CONFIG.stages, CONFIG.threads
STAGE_BYTES = CONFIG.stage_bytes
SMEM = CONFIG.smem(tma=True)  # stages + alignment slack + full/empty barriers
BOX_A = (BM, BK)   # rows, cols of one A box
BOX_B = (BK, 64)   # one B panel: the inner extent of a SWIZZLE_128B box is at most 128 bytes
INNER_BYTES = 128  # what the kernel's XOR walk assumes of every box row

def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None,
               config: cm.TileConfig = CONFIG) -> tuple[int, int]:
    return v9.tile_order(M, N, K, l2_bytes, config)


def launch_config(M: int, N: int, K: int, config: cm.TileConfig = CONFIG):
    grid, block, _ = v9.launch_config(M, N, K, config)
    return grid, block, config.smem(tma=True)


def unsupported(M: int, N: int, K: int, config: cm.TileConfig = CONFIG) -> str | None:
    reason = v9.unsupported(M, N, K, config)
    if reason:
        return reason
    bad = []
    if K % 8:
        bad.append(f"K={K} (A's rows are {2 * K} bytes)")
    if N % 8:
        bad.append(f"N={N} (B's rows are {2 * N} bytes)")
    if bad:
        return (
            "TMA needs row strides that are multiples of 16 bytes, i.e. K and N multiples of 8 "
            f"for fp16/bf16; not so for {' and '.join(bad)}. Level v9 (cp.async with an "
            "element-wise fallback) computes any shape."
        )
    return None


_maps: OrderedDict = OrderedDict()


def _map(dtype, ptr: int, rows: int, cols: int, box):
    key = (np.dtype(dtype).str, ptr, rows, cols, box)
    m = _maps.get(key)
    if m is None:
        m = tma.matrix_map(dtype, ptr, rows, cols, box[0], box[1], swizzle="128B",
                           l2_promotion=256, kernel_inner_bytes=INNER_BYTES)
        _maps[key] = m
        if len(_maps) > 32:
            _maps.popitem(last=False)
    return m


def check_operands(pa: int, pb: int, M: int, N: int, K: int, config: cm.TileConfig = CONFIG) -> None:
    """Every tensor-map rule for both operands, without a driver: raises ValueError."""
    reason = unsupported(M, N, K, config)
    if reason:
        raise ValueError(f"level v10 cannot run M={M}, N={N}, K={K}: {reason}")
    try:
        tma.check_matrix(pa, M, K, config.bm, config.bk, kernel_inner_bytes=INNER_BYTES)
        tma.check_matrix(pb, K, N, config.bk, 64, kernel_inner_bytes=INNER_BYTES)
    except ValueError as e:
        raise ValueError(f"level v10 cannot use TMA here: {e}; level v9 has no such limit") from None


def run(A, B, C, alpha, beta, stream=None, config: cm.TileConfig | None = None, defines=()):
    config = v9.v8.checked(CONFIG if config is None else config, tma=True)
    M, K = A.shape
    N = B.shape[1]
    kind = cm.element_type(A)
    pa, pb, pc = cm.device_ptr(A), cm.device_ptr(B), cm.device_ptr(C)
    check_operands(pa, pb, M, N, K, config)
    dtype = np.float16 if kind == "f16" else np.uint16  # uint16 -> the BFLOAT16 map type
    tm_a = _map(dtype, pa, M, K, (config.bm, config.bk))
    tm_b = _map(dtype, pb, K, N, (config.bk, 64))
    super_m, super_n = tile_order(M, N, K, config=config)
    args = [tm_a, tm_b] + cm.pack_args(
        ("p", pc), ("i", M), ("i", N), ("i", K), ("f", alpha), ("f", beta),
        ("i", int(pc % 8 == 0 and N % 2 == 0)), ("i", super_m), ("i", super_n),
    )
    grid, block, smem = launch_config(M, N, K, config)
    cm.launch(SOURCE, KERNEL_NAMES[kind], grid, block, smem, stream, args,
              config.defines(tma=True) + tuple(defines))
