"""Host-side logic shared by the native HGEMM levels: the tile configuration (TileConfig), the
1-D grid, argument packing and launch, and the pure functions the kernels mirror (the 128-byte
swizzle, the super-tile decode, the super-tile choice).

The pure functions are the specification of what the device code does; tests check their
properties with hypothesis, without a GPU.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from ..util import ceil_div as cdiv  # noqa: F401  (re-exported)

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - bf16 levels then take fp16 only
    BF16 = None

DTYPES = (np.float16,) + ((BF16,) if BF16 is not None else ())

INT32_MAX = 2**31 - 1


# ---------------------------------------------------------------------------- swizzle

def swizzle128(row: int, chunk: int) -> int:
    """Byte offset of 16-byte chunk `chunk` (0..7) of row `row` in a 128-byte-row tile.

    The chunk index is XORed with row % 8, so the 8 rows an ldmatrix reads at one logical
    chunk land in 8 different 16-byte bank groups (conflict-free), with no padding.
    """
    return row * 128 + ((chunk ^ (row % 8)) * 16)


def tma_swizzle_128b(offset: int) -> int:
    """Where TMA's CU_TENSOR_MAP_SWIZZLE_128B puts the byte at linear `offset` of a box.

    The documented pattern (CUTLASS calls it Swizzle<3,4,3>): address bits [4,7) are XORed
    with bits [7,10), i.e. the 16-byte chunk within a 128-byte row is XORed with the row index
    modulo 8, the pattern repeating every 1024 bytes. It assumes the shared destination is
    1024-byte aligned, which the kernels guarantee.
    """
    return offset ^ (((offset >> 7) & 7) << 4)


# ---------------------------------------------------------------------------- super-tiles

def supertile_decode(bid: int, grid_m: int, grid_n: int, sm: int, sn: int) -> tuple[int, int]:
    """Tile (bm, bn) computed by block `bid` of a 1-D grid of grid_m * grid_n blocks (v9).

    Tile rows are grouped into bands of `sm` rows (the last band may be shorter); a band is
    cut into super-tiles `sn` tiles wide (the last may be narrower); inside a super-tile n
    varies fastest. Consecutive blocks therefore stay inside one sm x sn super-tile, so they
    share A rows and B columns while both are in L2. Every bid in [0, grid_m*grid_n) maps to
    a distinct tile: ragged edges need no idle blocks. The kernel does exactly this.
    """
    band = bid // (sm * grid_n)
    r = bid - band * sm * grid_n
    hm = min(sm, grid_m - band * sm)          # rows in this band
    sc = r // (hm * sn)                       # super-tile index within the band
    r2 = r - sc * hm * sn
    wn = min(sn, grid_n - sc * sn)            # columns in this super-tile
    return band * sm + r2 // wn, sc * sn + r2 % wn


def supertile_working_set(sm: int, sn: int, bm: int, bn: int, K: int, elem_bytes: int = 2) -> int:
    """Bytes of A and B one super-tile reads: (SM·BM + SN·BN)·K·elem_bytes (the seed's rule)."""
    return (sm * bm + sn * bn) * K * elem_bytes


def choose_supertile(M: int, N: int, K: int, bm: int, bn: int, l2_bytes: int,
                     elem_bytes: int = 2, l2_share: float = 0.5) -> tuple[int, int]:
    """The super-tile (SM, SN), in tiles, for a grid of cdiv(M,bm) x cdiv(N,bn) tiles.

    Rule: the super-tile's working set (SM·BM + SN·BN)·K·elem_bytes must fit in
    l2_share·L2. Half by default: Hopper's L2 is two partitions and data read by SMs on both
    sides is held in both, so the capacity for operands that every SM reads is about half.
    Within the rule, the fewest DRAM re-reads: a band's SM rows of A stay resident while the
    band is swept, so A is read about once and B once per band, ceil(grid_m / SM) times. So
    take the largest SM first (fewest B passes), then the largest SN that still fits (B
    columns shared by more consecutive blocks). SM, SN are clamped to the grid; when even 1 x 1 does not fit (huge K),
    return (1, 1): the order then hardly matters since nothing is re-used from L2 anyway.
    """
    grid_m, grid_n = cdiv(M, bm), cdiv(N, bn)
    budget = int(l2_bytes * l2_share)
    per_a = bm * K * elem_bytes
    per_b = bn * K * elem_bytes
    if per_a + per_b > budget:
        return 1, 1
    sm = min(grid_m, (budget - per_b) // per_a)
    sn = min(grid_n, max(1, (budget - sm * per_a) // per_b))
    return int(sm), int(sn)


# ---------------------------------------------------------------------------- tile configuration

SMEM_LIMIT = 227 * 1024      # dynamic shared memory one block may use on sm_90

_MACROS = (("bm", "HG_BM"), ("bn", "HG_BN"), ("bk", "HG_BK"), ("stages", "HG_STAGES"),
           ("warps_m", "HG_WARPS_M"), ("warps_n", "HG_WARPS_N"), ("min_blocks", "HG_MIN_BLOCKS"),
           ("frag_pipe", "HG_FRAG_PIPE"))


@dataclass(frozen=True)
class TileConfig:
    """The compile-time tile of a native level (for v8/v9/v10: native/tile_config.cuh, -DHG_*).

    bm × bn × bk block tile, `stages` pipeline depth, warps_m × warps_n warps each owning
    (bm/warps_m) × (bn/warps_n) of C, `min_blocks` for __launch_bounds__ (2 caps registers at
    65536 / (2 · threads)), `frag_pipe` double-buffers the ldmatrix fragments across k16 steps,
    `tma_lag` (v10 only) is how many iterations ago the stage the producer refills was read.
    Each level module names its own tile (CONFIG); the field defaults are only a starting
    point for tools/hgemm_sweep.py. `problems()` mirrors the static_asserts of the swizzled
    levels' headers, so a bad config is refused before NVRTC.
    """
    bm: int = 128
    bn: int = 256
    bk: int = 64
    stages: int = 4
    warps_m: int = 2
    warps_n: int = 4
    min_blocks: int = 1
    frag_pipe: bool = False
    tma_lag: int = 2

    @property
    def threads(self) -> int:
        return 32 * self.warps_m * self.warps_n

    @property
    def warp_tile(self) -> tuple[int, int]:
        return self.bm // self.warps_m, self.bn // self.warps_n

    @property
    def stage_bytes(self) -> int:
        return self.bm * self.bk * 2 + self.bk * self.bn * 2

    def smem(self, tma: bool = False) -> int:
        """Dynamic shared memory: the stages, 1 KB of slack to align them, v10's mbarriers."""
        return self.stages * self.stage_bytes + 1024 + (2 * self.stages * 8 if tma else 0)

    def problems(self, tma: bool = False) -> list[str]:
        out = []
        wm, wn = self.warp_tile
        t = self.threads
        if self.bk != 64:
            out.append("bk must be 64: the swizzle and the ldmatrix XOR walk assume 128-byte rows")
        if self.bm % self.warps_m or self.bn % self.warps_n or wm % 16 or wn % 16:
            out.append(f"warp tile {self.bm}/{self.warps_m} x {self.bn}/{self.warps_n} must be multiples of 16")
        elif not (wn % 64 == 0 or 64 % wn == 0):
            out.append(f"warp tile width {wn} must divide 64 or be a multiple of it")
        if self.bn % 64:
            out.append("bn must be a multiple of 64 (B panels)")
        if t % 64 or t > 1024 or (self.bm * 8) % t:
            out.append(f"{t} threads: a multiple of 64, at most 1024, dividing bm*8 = {self.bm * 8}")
        cpr = self.bn // 8
        if cpr and (t % cpr or (self.bk * cpr) % t or (t // cpr) & (t // cpr - 1)):
            out.append(f"{t} threads do not tile B's {self.bk} x {cpr} chunks in power-of-two row steps")
        if self.stages < 2:
            out.append("at least 2 stages")
        if self.min_blocks < 1:
            out.append("min_blocks >= 1")
        if self.smem(tma) > SMEM_LIMIT:
            out.append(f"{self.smem(tma)} bytes of shared memory > {SMEM_LIMIT}")
        if tma:
            if self.bm > 256:
                out.append("bm <= 256 (one TMA box of A)")
            if not 1 <= self.tma_lag < self.stages:
                out.append("1 <= tma_lag < stages")
        return out

    def defines(self, tma: bool = False) -> tuple[str, ...]:
        """Every -DHG_* option of this tile for NVRTC (tile_config.cuh requires them all, so no
        source default can stand in for a level's tile); tma adds v10's HG_TMA_LAG."""
        out = [f"-D{macro}={int(getattr(self, name))}" for name, macro in _MACROS]
        if tma:
            out.append(f"-DHG_TMA_LAG={self.tma_lag}")
        return tuple(out)

    def label(self) -> str:
        wm, wn = self.warp_tile
        s = (f"{self.bm}x{self.bn}x{self.bk} s{self.stages} w{self.warps_m}x{self.warps_n}"
             f"({wm}x{wn}) mb{self.min_blocks}")
        if self.frag_pipe:
            s += " fp"
        if self.tma_lag != 2:
            s += f" lag{self.tma_lag}"
        return s


# The cp.async levels' tile (v8 and v9 ship it; v9 changes only the tile order): the best of the
# H200 sweep for both (tools/hgemm_sweep.py "c128", docs/RESULTS.md).
CP_ASYNC_TILE = TileConfig(bm=128, bn=128, bk=64, stages=3, warps_m=2, warps_n=2, min_blocks=2)


def checked_tile(config: TileConfig, tma: bool = False) -> TileConfig:
    """`config` if the kernels can be compiled for it, else ValueError (before any NVRTC call)."""
    bad = config.problems(tma)
    if bad:
        raise ValueError(f"tile configuration {config.label()} is not supported: {'; '.join(bad)}")
    return config


def grid_1d(M: int, N: int, config: TileConfig, tma: bool = False):
    """(grid, block, dynamic smem) of the 1-D grid of v8/v9/v10: one block per output tile."""
    grid = cdiv(M, config.bm) * cdiv(N, config.bn)
    return (grid, 1, 1), (config.threads, 1, 1), config.smem(tma)


def unsupported_1d(M: int, N: int, K: int, config: TileConfig) -> str | None:
    """Shapes a 1-D-grid level cannot index: int32 dimensions, at most 2^31 - 1 tiles."""
    reason = check_dims(M, N, K)
    if reason:
        return reason
    if cdiv(M, config.bm) * cdiv(N, config.bn) > INT32_MAX:
        return "more than 2^31 - 1 output tiles"
    return None


# ---------------------------------------------------------------------------- launch helpers

def element_type(a) -> str:
    """'f16' or 'bf16' for a device array of A or B (bf16 arrives as uint16 bit patterns)."""
    dt = np.dtype(a.dtype)
    if dt == np.float16:
        return "f16"
    if dt == np.uint16 or (BF16 is not None and dt == BF16):
        return "bf16"
    raise TypeError(f"HGEMM levels take float16 or bfloat16 (as uint16 bits), got {dt}")


def device_ptr(a) -> int:
    return int(a.__cuda_array_interface__["data"][0])


def rows_16b_aligned(ptr: int, row_elems: int, elem_bytes: int = 2) -> bool:
    """True when every row of a row-major matrix starts on a 16-byte boundary (cp.async/TMA)."""
    return ptr % 16 == 0 and (row_elems * elem_bytes) % 16 == 0


def vec_c(pc: int, N: int, c_bytes: int = 4) -> bool:
    """True when the epilogue may store C in pairs (float2, or two 16-bit values: a base aligned
    to a pair, N even)."""
    return pc % (2 * c_bytes) == 0 and N % 2 == 0


def cp_async_args(A, B, C, alpha, beta, *extra: int):
    """Kernel arguments of the cp.async levels (v7's prefix; v8 and v9 add vec_c, v9 its
    super-tile): A, B, C, M, N, K, alpha, beta, vec_a, vec_b, then `extra` int32 values."""
    M, K = A.shape
    N = B.shape[1]
    pa, pb, pc = device_ptr(A), device_ptr(B), device_ptr(C)
    return pack_args(
        ("p", pa), ("p", pb), ("p", pc), ("i", M), ("i", N), ("i", K),
        ("f", alpha), ("f", beta),
        ("i", int(rows_16b_aligned(pa, K))), ("i", int(rows_16b_aligned(pb, N))),
        *(("i", int(v)) for v in extra),
    )


def pack_args(*values):
    """ctypes objects for cuLaunchKernel, by type: ('p', ptr) pointer, ('i', n) int32, ('f', x) float."""
    out = []
    for kind, v in values:
        if kind == "p":
            out.append(ctypes.c_void_p(v))
        elif kind == "i":
            if not -(2**31) <= v <= INT32_MAX:
                raise ValueError(f"kernel argument {v} does not fit in int32")
            out.append(ctypes.c_int32(v))
        elif kind == "f":
            out.append(ctypes.c_float(v))
        else:
            raise ValueError(kind)
    return out


def check_dims(M: int, N: int, K: int) -> str | None:
    """Shapes the native kernels cannot index: each dimension is passed as int32."""
    if max(M, N, K) > INT32_MAX:
        return f"each of M, N, K must be < 2^31 (int32 kernel arguments), got M={M}, N={N}, K={K}"
    return None


def tma_row_rule(K: int, N: int, fallback: str = "v9") -> str | None:
    """Why TMA cannot describe fp16/bf16 operands with K or N columns (row strides must be
    multiples of 16 bytes), naming the fastest level without that rule; None when it can."""
    bad = []
    if K % 8:
        bad.append(f"K={K} (A's rows are {2 * K} bytes)")
    if N % 8:
        bad.append(f"N={N} (B's rows are {2 * N} bytes)")
    if not bad:
        return None
    return (
        "TMA needs row strides that are multiples of 16 bytes, i.e. K and N multiples of 8 "
        f"for fp16/bf16; not so for {' and '.join(bad)}. Level {fallback} (cp.async with an "
        "element-wise fallback) computes any shape."
    )


def launch(source: str, kernel: str, grid, block, smem: int, stream, args, defines=(),
           pdl: bool = False) -> None:
    """Kernel `kernel` of native/<source> (compiled with `defines`) through the one native
    launch, numba_gemm.runtime.launch.launch_native (`pdl`: a programmatic dependent launch,
    for a kernel that waits for the previous grid before any global access)."""
    from ..runtime import nvrtc
    from ..runtime.launch import launch_native

    launch_native(nvrtc.function(source, kernel, defines=defines), grid, block, smem, stream, args,
                  pdl=pdl)


def l2_cache_bytes() -> int:
    """L2 size of the current device (CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE), cached."""
    global _L2
    if _L2 is None:
        from ..runtime import driver

        _L2 = driver.device_attribute("L2_CACHE_SIZE")
    return _L2


_L2 = None


def sm_count() -> int:
    """Multiprocessors of the current device (CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), cached."""
    global _SMS
    if _SMS is None:
        from ..runtime import driver

        _SMS = driver.device_attribute("MULTIPROCESSOR_COUNT")
    return _SMS


_SMS = None


_resident: dict = {}


def resident_clusters(fn, block, smem: int, cluster: int) -> int:
    """How many clusters of `cluster` CTAs of this kernel (`block` threads, `smem` bytes of
    dynamic shared memory) fit on the device at once (cuOccupancyMaxActiveClusters), cached."""
    key = (int(fn), tuple(block), smem, cluster)
    if key not in _resident:
        from ..runtime import driver

        _resident[key] = driver.max_active_clusters(fn, block, smem, cluster)
    return _resident[key]


def tile_clusters(source: str, kernel_name: str):
    """A split plan's `clusters(tile, c)`: resident_clusters of the kernel compiled for `tile`
    (its threads and shared memory), the kernel the launch then uses."""
    def clusters(tile, c: int) -> int:
        from ..runtime import nvrtc

        fn = nvrtc.function(source, kernel_name, defines=tile.defines())
        return resident_clusters(fn, (tile.threads, 1, 1), tile.smem(), c)
    return clusters
