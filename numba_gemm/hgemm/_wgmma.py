"""Host-side logic shared by the wgmma levels (v11 and the levels built on it): their tile
record, the wgmma shared-memory descriptor (the host mirror of native/wgmma.cuh), the launch
shape, TMA's row rule and the tensor maps plus kernel arguments every one of them passes.
v10 passes the same maps and arguments (its TMA boxes and 128-byte rows are these), so it
uses check_operands and maps_and_args with its own TileConfig."""
from __future__ import annotations

import dataclasses
import functools
import operator
from dataclasses import dataclass

import numpy as np

from ..runtime import tma
from . import _common as cm

WGMMA_N = (64, 128, 256)   # the m64nNk16 shapes native/wgmma.cuh generates


@dataclass(frozen=True)
class WgmmaTile:
    """The compile-time tile of the wgmma levels: bm × bn × bk, `stages` deep, bm / 64 consumer
    warpgroups each computing one 64-row slab × bn with m64n{bn}k16 (bn = 64, 128 or 256: bn / 2
    fp32 accumulators per thread, B loaded as bn / 64 panels), plus one producer warpgroup when
    `producer` (v12: bn = 256; v13: any); `tma_lag` (no producer: v11, v11sk) is how many
    iterations ago the stage the computing thread 0 refills was read.

    The one source of the tile: `defines()` writes every number as a -DHG_* option, which
    native/wgmma_tile.cuh requires (no source default), and the same record sizes the dynamic
    shared memory and the TMA boxes. `problems()` mirrors the header's static_asserts, so a
    tile the kernels cannot take is refused before NVRTC.
    """
    bm: int = 128
    bn: int = 256
    bk: int = 64
    stages: int = 4
    producer: bool = False
    tma_lag: int = 2

    @property
    def consumers(self) -> int:
        return self.bm // 64

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + int(self.producer))

    @property
    def stage_bytes(self) -> int:
        return (self.bm + self.bn) * self.bk * 2

    def smem(self) -> int:
        """Stages + 1 KB to align them to 1024 bytes + the full/empty mbarriers."""
        return self.stages * self.stage_bytes + 1024 + 2 * self.stages * 8

    def problems(self) -> list[str]:
        out = []
        if self.bk != 64:
            out.append("bk must be 64: one 128-byte swizzle span per row, 4 wgmma k16 steps")
        if self.bn not in WGMMA_N:
            out.append(f"bn must be one of {WGMMA_N}: the m64nNk16 shapes native/wgmma.cuh generates")
        if self.bm not in (64, 128):
            out.append("bm must be 64 or 128: one or two slabs of 64 rows")
        if self.stages < 2:
            out.append("at least 2 stages")
        if not self.producer and not 2 <= self.tma_lag < self.stages:
            out.append("2 <= tma_lag < stages (the stage read at kt-1 is released after wait_group 1 at kt)")
        if self.smem() > cm.SMEM_LIMIT:
            out.append(f"{self.smem()} bytes of shared memory > {cm.SMEM_LIMIT}")
        return out

    def defines(self) -> tuple[str, ...]:
        """Every -DHG_* option of this tile for NVRTC; HG_TMA_LAG only without a producer (the
        levels whose computing thread 0 also loads)."""
        bad = self.problems()
        if bad:
            raise ValueError(f"wgmma tile {self.label()} is not supported: {'; '.join(bad)}")
        out = [f"-DHG_BM={self.bm}", f"-DHG_BN={self.bn}", f"-DHG_BK={self.bk}",
               f"-DHG_STAGES={self.stages}", f"-DHG_PRODUCER={int(self.producer)}"]
        if not self.producer:
            out.append(f"-DHG_TMA_LAG={self.tma_lag}")
        return tuple(out)

    def label(self) -> str:
        s = f"{self.bm}x{self.bn}x{self.bk} s{self.stages} {self.consumers}c"
        return s + ("+p" if self.producer else f" lag{self.tma_lag}")


@functools.lru_cache(maxsize=None)
def _checked(level: str, shipped: WgmmaTile, bm: int, bn: int) -> WgmmaTile:
    config = dataclasses.replace(shipped, bm=bm, bn=bn)
    bad = config.problems()
    if bad:
        raise ValueError(f"level {level}: no tile bm={bm}, bn={bn}: {'; '.join(bad)}")
    return config


def as_int(level: str, name: str, v) -> int:
    """v as an int (a bool is not one), else a ValueError naming the level and the keyword."""
    try:
        if isinstance(v, bool):
            raise TypeError
        return operator.index(v)
    except TypeError:
        raise ValueError(f"level {level}: {name} must be an int, got {v!r}") from None


def variant(level: str, shipped: WgmmaTile, bm, bn) -> WgmmaTile:
    """`shipped` with the block tile bm × bn (its depth, stages and roles kept): the run()
    keywords of a level with a tile family, refused with a ValueError that says why before any
    operand is touched."""
    return _checked(level, shipped, as_int(level, "bm", bm), as_int(level, "bn", bn))


MAX_STAGES = 8      # the deepest pipeline measured (v11sl's 128×64 tile: 8 stages of 24 KB)


def deepest(tile: WgmmaTile, extra: int = 0) -> WgmmaTile:
    """`tile` with as many stages as fit in shared memory beside `extra` bytes the level adds,
    up to MAX_STAGES: for a grid of at most one CTA per SM, where no second CTA wants the SM's
    shared memory."""
    depth = max(s for s in range(tile.stages, MAX_STAGES + 1)
                if dataclasses.replace(tile, stages=s).smem() + extra <= cm.SMEM_LIMIT)
    return dataclasses.replace(tile, stages=depth)


INNER_BYTES = 128   # every box row is one 128-byte swizzle span (what the descriptors assume)
FALLBACK = "v9"    # the fastest level without TMA's 16-byte row rule


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

def tile_order(M: int, N: int, K: int, l2_bytes: int | None, config):
    """(super_m, super_n): v9's L2 rule for this tile."""
    if l2_bytes is None:
        l2_bytes = cm.l2_cache_bytes()
    return cm.choose_supertile(M, N, K, config.bm, config.bn, l2_bytes)


def launch_config(M: int, N: int, K: int, config: WgmmaTile):
    grid = (cm.cdiv(M, config.bm) * cm.cdiv(N, config.bn), 1, 1)
    return grid, (config.threads, 1, 1), config.smem()


def tma_rule(M: int, N: int, K: int) -> str | None:
    """Why TMA cannot describe these operands (int32 dimensions, 16-byte row strides), or None."""
    return cm.check_dims(M, N, K) or cm.tma_row_rule(K, N, FALLBACK)


def boxes(config) -> tuple[tuple[int, int], tuple[int, int]]:
    """(rows, cols) of one A box and one B panel: the inner extent of a SWIZZLE_128B box is at
    most 128 bytes, so B's bn columns come as panels of 64 halves."""
    return (config.bm, config.bk), (config.bk, INNER_BYTES // 2)


def check_operands(level: str, pa: int, pb: int, M: int, N: int, K: int, config,
                   pitches=(None, None)) -> None:
    """Every tensor-map rule for both operands, without a driver: raises ValueError. `config`:
    a WgmmaTile, or any tile with bm and bk (v10's TileConfig). `pitches`: the elements between
    rows of A and of B where they are not K and N (copies with aligned rows, v11p)."""
    reason = cm.check_dims(M, N, K) if any(pitches) else tma_rule(M, N, K)
    if reason:
        raise ValueError(f"level {level} cannot run M={M}, N={N}, K={K}: {reason}")
    box_a, box_b = boxes(config)
    try:
        tma.check_matrix(pa, M, K, *box_a, kernel_inner_bytes=INNER_BYTES, pitch=pitches[0])
        tma.check_matrix(pb, K, N, *box_b, kernel_inner_bytes=INNER_BYTES, pitch=pitches[1])
    except ValueError as e:
        raise ValueError(f"level {level} cannot use TMA here: {e}; level {FALLBACK} has no such limit") from None


def maps_and_args(level: str, A, B, C, alpha, beta, config, c16: bool = False, pitched=None,
                  super_tiles: bool = True, a_rows: int | None = None):
    """Checked tensor maps of A and B, then C, M, N, K, alpha, beta, vec_c, super_m, super_n.
    `config`: a WgmmaTile, or any tile with bm, bn and bk (v10's TileConfig). c16: the level
    writes a 16-bit C (vec_c then follows its element size); otherwise C must be float32.
    pitched: ((address, pitch), (address, pitch)) of copies of A and B whose rows are `pitch`
    elements apart, read instead of A and B (v11p). super_tiles=False leaves super_m and super_n
    out (a level whose tiles run in one row, v11t). a_rows: the rows of A's box where a CTA
    loads less than its tile's bm (v13's pair along N: half each)."""
    M, K = A.shape
    N = B.shape[1]
    if np.dtype(C.dtype).itemsize != 4 and not c16:
        raise TypeError(f"level {level} writes C as float32, got {np.dtype(C.dtype).name}")
    (pa, pitch_a), (pb, pitch_b) = pitched or ((cm.device_ptr(A), None), (cm.device_ptr(B), None))
    pc = cm.device_ptr(C)
    check_operands(level, pa, pb, M, N, K, config, (pitch_a, pitch_b))
    dtype = np.float16 if cm.element_type(A) == "f16" else np.uint16   # uint16 -> BFLOAT16 map
    box_a, box_b = boxes(config)
    if a_rows is not None:
        box_a = (a_rows, box_a[1])
    tm_a = tma.cached_matrix_map(dtype, pa, M, K, box_a, INNER_BYTES, pitch=pitch_a)
    tm_b = tma.cached_matrix_map(dtype, pb, K, N, box_b, INNER_BYTES, pitch=pitch_b)
    args = [tm_a, tm_b] + cm.pack_args(
        ("p", pc), ("i", M), ("i", N), ("i", K), ("f", alpha), ("f", beta),
        ("i", int(cm.vec_c(pc, N, np.dtype(C.dtype).itemsize))))
    if super_tiles:
        super_m, super_n = tile_order(M, N, K, None, config)
        args += cm.pack_args(("i", super_m), ("i", super_n))
    return args
