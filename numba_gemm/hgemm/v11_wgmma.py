"""v11: v10 with the tensor-core instruction changed: wgmma (warpgroup MMA) instead of mma.sync.

v11 = v10 + wgmma.mma_async m64n256k16, reading A and B straight from the SWIZZLE_128B shared
tiles that TMA wrote, through 64-bit matrix descriptors. The tile (128×256×64, 4 stages),
the TMA boxes, the full/empty mbarriers, the producer thread and the super-tile order are
v10's. The 256 threads are now two warpgroups, each owning 64 rows × 256 columns of the block
tile; per 16-deep k step each warpgroup issues ONE wgmma (v10: 8 ldmatrix + 32 mma.sync in each
of its 4 warps). The accumulators stay in registers
(128 fp32 per thread, as v10) and the shared tiles are never copied into fragment registers.
Around each stage: wgmma.fence, 4 wgmma (k = 0, 16, 32, 48), commit_group, then wait_group 1 —
the previous stage's group is complete, so its stage is released to the producer while this
stage's wgmma still run: the tensor cores always have a stage queued.

Which ledger moved: issue slots. Per warpgroup and stage, 4 HGMMA replace 128 LDSM + 512 HMMA
= 640 warp instructions; the shared-memory reads are done by the tensor cores'
own operand path (no LDSM, no fragment registers, no bank-conflict question). DRAM/L2 bytes
and the load side are v10's. Registers: 154 per thread (v10: accumulators + fragments).
Census (sm_90a, CI-asserted): HGMMA.64x256x16.F32, WARPGROUP.ARRIVE, WARPGROUP.DEPBAR.LE,
UTMALDG.2D, SYNCS; no HMMA, no LDSM, no local memory.

Descriptors (native/wgmma.cuh; `smem_desc` below is the same function): A is K-major with
128-byte rows, SBO = 1024 (8-row atoms), the k step +32 bytes on the start address; B is
N-major (imm-trans-b = 1) in 64-column panels, LBO = 8192 (next panel), SBO = 1024 (next 8
k rows), the k step +2048 bytes.

Measured (H200, bench.py, docs/LADDER.md): 8192³ fp16 679–732 TFLOPS (v10 444–471, 1.53–1.59×),
bf16 683–743; 4096³ fp16 529–569. Above the 639 TFLOPS mma.sync register-loop ceiling.

Limits (TMA's, as v10): 16-byte aligned base and K % 8 == 0, N % 8 == 0 for 2-byte types;
other shapes are refused before launch, naming v9, which serves any shape.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import tma
from . import _common as cm

LEVEL = "v11"
PARENT = "v10"
TITLE = "wgmma from swizzled shared tiles"
DELTA = ("v11 = v10 with ldmatrix + mma.sync replaced by wgmma.mma_async m64n256k16 reading the "
         "TMA tiles through matrix descriptors (fence / commit_group / wait_group 1)")
DTYPES = cm.DTYPES
SOURCE = "v11_wgmma.cu"
KERNEL_NAME = "v11_wgmma_f16"
KERNEL_NAMES = {"f16": "v11_wgmma_f16", "bf16": "v11_wgmma_bf16"}
SASS_MUST_HAVE = ("HGMMA", "UTMALDG", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR")
SASS_MUST_NOT_HAVE = ("HMMA", "LDSM")
RASTER = "super"
FALLBACK = "v9"    # the fastest level without TMA's 16-byte row rule


@dataclass(frozen=True)
class WgmmaTile:
    """The compile-time tile of the wgmma levels: bm × bn × bk, `stages` deep, `consumers`
    warpgroups each computing (bm / consumers) × bn with m64n256k16, plus one producer
    warpgroup when `producer` (v12+)."""
    bm: int = 128
    bn: int = 256
    bk: int = 64
    stages: int = 4
    consumers: int = 2
    producer: bool = False

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + int(self.producer))

    @property
    def stage_bytes(self) -> int:
        return (self.bm + self.bn) * self.bk * 2

    def smem(self) -> int:
        """Stages + 1 KB to align them to 1024 bytes + the full/empty mbarriers."""
        return self.stages * self.stage_bytes + 1024 + 2 * self.stages * 8


CONFIG = WgmmaTile()
DEFINES: tuple[str, ...] = ()
BOX_A = (CONFIG.bm, CONFIG.bk)   # rows, cols of the A box
BOX_B = (CONFIG.bk, 64)          # one B panel: 128-byte rows, the SWIZZLE_128B span
INNER_BYTES = 128


# ---------------------------------------------------------------------------- descriptors

SWIZZLE_MODE = {"none": 0, "128B": 1, "64B": 2, "32B": 3}


def smem_desc(addr: int, lbo: int, sbo: int, swizzle: str = "128B") -> int:
    """The 64-bit wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
    bits 0-13 start address >> 4, 16-29 leading-dimension byte offset >> 4, 32-45 stride-
    dimension byte offset >> 4, 49-51 base offset (0), 62-63 swizzle mode. Mirrors
    smem_desc_sw128 in native/wgmma.cuh."""
    for name, v in (("address", addr), ("lbo", lbo), ("sbo", sbo)):
        if v % 16 or not 0 <= v >> 4 < 1 << 14:
            raise ValueError(f"{name} {v} must be a multiple of 16 below 2^18 bytes")
    return (addr >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | SWIZZLE_MODE[swizzle] << 62


# ---------------------------------------------------------------------------- host side

def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None, config: WgmmaTile = CONFIG):
    """(super_m, super_n): v9's L2 rule for this tile."""
    if l2_bytes is None:
        l2_bytes = cm.l2_cache_bytes()
    return cm.choose_supertile(M, N, K, config.bm, config.bn, l2_bytes)


def launch_config(M: int, N: int, K: int, config: WgmmaTile = CONFIG):
    grid = (cm.cdiv(M, config.bm) * cm.cdiv(N, config.bn), 1, 1)
    return grid, (config.threads, 1, 1), config.smem()


def tma_rule(M: int, N: int, K: int, fallback: str = FALLBACK) -> str | None:
    """Why TMA cannot describe these operands (16-byte row strides), or None."""
    reason = cm.check_dims(M, N, K)
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
            f"for fp16/bf16; not so for {' and '.join(bad)}. Level {fallback} (cp.async with an "
            "element-wise fallback) computes any shape."
        )
    return None


def unsupported(M: int, N: int, K: int) -> str | None:
    return tma_rule(M, N, K)


_maps: OrderedDict = OrderedDict()


def tensor_map(dtype, ptr: int, rows: int, cols: int, box):
    """cuTensorMapEncodeTiled for a row-major matrix (checked first), cached by its arguments."""
    key = (np.dtype(dtype).str, ptr, rows, cols, box)
    m = _maps.get(key)
    if m is None:
        m = tma.matrix_map(dtype, ptr, rows, cols, box[0], box[1], swizzle="128B",
                           l2_promotion=256, kernel_inner_bytes=INNER_BYTES)
        _maps[key] = m
        if len(_maps) > 32:
            _maps.popitem(last=False)
    return m


def check_operands(level: str, pa: int, pb: int, M: int, N: int, K: int, config=CONFIG) -> None:
    """Every tensor-map rule for both operands, without a driver: raises ValueError."""
    reason = tma_rule(M, N, K)
    if reason:
        raise ValueError(f"level {level} cannot run M={M}, N={N}, K={K}: {reason}")
    try:
        tma.check_matrix(pa, M, K, config.bm, config.bk, kernel_inner_bytes=INNER_BYTES)
        tma.check_matrix(pb, K, N, config.bk, 64, kernel_inner_bytes=INNER_BYTES)
    except ValueError as e:
        raise ValueError(f"level {level} cannot use TMA here: {e}; level {FALLBACK} has no such limit") from None


def maps_and_args(level: str, A, B, C, alpha, beta, config=CONFIG):
    """Checked tensor maps of A and B, then C, M, N, K, alpha, beta, vec_c, super_m, super_n."""
    M, K = A.shape
    N = B.shape[1]
    pa, pb, pc = cm.device_ptr(A), cm.device_ptr(B), cm.device_ptr(C)
    check_operands(level, pa, pb, M, N, K, config)
    dtype = np.float16 if cm.element_type(A) == "f16" else np.uint16   # uint16 -> BFLOAT16 map
    tm_a = tensor_map(dtype, pa, M, K, (config.bm, config.bk))
    tm_b = tensor_map(dtype, pb, K, N, (config.bk, 64))
    super_m, super_n = tile_order(M, N, K, config=config)
    return [tm_a, tm_b] + cm.pack_args(
        ("p", pc), ("i", M), ("i", N), ("i", K), ("f", alpha), ("f", beta),
        ("i", int(pc % 8 == 0 and N % 2 == 0)), ("i", super_m), ("i", super_n),
    )


def run(A, B, C, alpha, beta, stream=None):
    M, K = A.shape
    N = B.shape[1]
    args = maps_and_args(LEVEL, A, B, C, alpha, beta)
    grid, block, smem = launch_config(M, N, K)
    cm.launch(SOURCE, KERNEL_NAMES[cm.element_type(A)], grid, block, smem, stream, args, DEFINES)
