"""read: diff native/v11_wgmma.cu native/v11r_ragged.cu · run: python bench.py --level v11r --dtype fp16

v11r: v11 with TMA replaced by the CTA's own register-staged loads — wgmma at any shape.

v11r = v11 with one change: who fills the shared stages. TMA describes only rows whose stride
and base are multiples of 16 bytes (fp16/bf16: K and N multiples of 8), so every other shape
fell back to v9's mma.sync. Here all 256 threads load the next K tile into registers with
global loads W bytes wide — W = 8, 4 or 2, the widest that divides the operand's base address
and its row length in bytes (`load_width`, one W per operand, compiled in as -DHG_LOAD_A /
-DHG_LOAD_B) — zero outside M, N and K, and store it into exactly the SWIZZLE_128B layout TMA
writes (native/wgmma_reg_loader.cuh; `StagedTile` below is the same walk in Python). The
wgmma, its descriptors, the 128×256×64 tile, the super-tile order and the epilogue are v11's.

Pipeline (native/v11r_ragged.cu, where every hazard is written down): per K tile kt, the loads
of tile kt+1 are issued, then the 4 wgmma of tile kt (asynchronous), then the stores of kt+1
into the next stage, fence.proxy.async.shared::cta, wgmma.wait_group 1, one __syncthreads.
Three stages: the stage stored at kt was last read by tile kt-2, which every warpgroup waited
for before the previous barrier (two stages would overwrite the one tile kt-1 may still read).
No mbarriers, no producer thread.

Which ledger moved: the load side's issue slots. TMA moves a K tile with 5 instructions from
one thread (one A box, four B panels); v11r's threads issue 24 576 / (W/2) loads and
24 576 / max(W/2, 2) shared stores per tile (`tile_instructions`): per thread 24 loads +
24 STS.64 at W = 8, 48 + 48 STS.32 at W = 4, 96 loads of 2 bytes + 48 STS.32 at W = 2 (two
loads packed per register). Each warp load covers 32·W contiguous bytes of one row and each
warp store fills whole 128-byte rows of a panel (no bank conflicts), so the bytes through L2
are v11's; what a W = 2 shape pays is instructions and the load latency each K tile waits for
(one tile of registers in flight, not v11's 4-deep TMA ring). Registers: 128 accumulators +
48 staged per thread (96 load destinations at W = 2): 232 (8, 8) to 255 (2, 2), no spills.

Census (sm_90a, CI-asserted for f16 and bf16 at (W_A, W_B) = (2, 2), the shipped census
variant, and (4, 4), (8, 8), (8, 2), (2, 8)): HGMMA.64x256x16.F32 (4), WARPGROUP.ARRIVE,
WARPGROUP.DEPBAR.LE; the operand loads exactly as the model counts them (twice: tile 0 and the
loop) on top of v11's epilogue loads — at (2, 2) 192 LDG.E.U16 and 96 STS, 5032 instructions
per kernel, 255 registers; at (8, 8) 48 more LDG.E.64 and 48 STS.64, 4336 instructions, 232
registers; no UTMALDG, no HMMA, no LDSM, no local memory. Measured on the H200 in the shape
suite: docs/RESULTS.md, "2026-12-02, sixth run: the shape suite with auto refitted; v11py's
8-byte stores" (and the fifth run's, from which auto's price of the ragged rows was fitted).

Limits: any M, N, K >= 1 below 2^31 (int32 kernel arguments), at most 2^31 - 1 tiles; bases
2-byte aligned (every fp16/bf16 array is) and rows contiguous, anything else is refused
before launch. Shapes TMA can describe are served too (W = 8); auto ranks v11r by its cost
model, calibrated on the shape suite's runs.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import _common as cm
from . import _wgmma as wg

LEVEL = "v11r"
PARENT = "v11"
TITLE = "wgmma from register-staged loads (any shape)"
DELTA = ("v11r = v11 with TMA replaced by the threads' own global loads (8, 4 or 2 bytes, the "
         "widest the rows allow), stored into the same SWIZZLE_128B stages; 3 stages, one barrier per K tile")
DTYPES = cm.DTYPES
SOURCE = "v11r_ragged.cu"
KERNEL_NAMES = {"f16": "v11r_ragged_f16", "bf16": "v11r_ragged_bf16"}
SASS_MUST_HAVE = ("HGMMA", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR", "LDG", "STS")
SASS_MUST_NOT_HAVE = ("HMMA", "LDSM", "UTMALDG", "LDGSTS")
RASTER = "super"

CONFIG = wg.WgmmaTile(bm=128, stages=3)
LOAD_WIDTHS = (8, 4, 2)           # bytes per global load, widest first
CENSUS_WIDTHS = (2, 2)            # the registry's census variant: K and N both odd


def tile_defines(config: wg.WgmmaTile = CONFIG) -> tuple[str, ...]:
    """The tile as -DHG_* (wgmma_tile.cuh): the record's own options less HG_TMA_LAG (no TMA,
    nothing refills with a lag)."""
    bad = problems(config)
    if bad:
        raise ValueError(f"level {LEVEL} cannot take the tile {config.label()}: {'; '.join(bad)}")
    return tuple(d for d in config.defines() if not d.startswith("-DHG_TMA_LAG="))


def problems(config: wg.WgmmaTile) -> list[str]:
    out = list(config.problems())
    if config.producer:
        out.append("no producer warpgroup: every thread loads and computes")
    if config.bn != 256:
        out.append("bn must be 256: the kernel is written for 64 x 256 per warpgroup")
    if config.stages < 3:
        out.append("at least 3 stages: the stage stored at K tile kt was last read by tile kt-2")
    return out


def defines(wa: int, wb: int, config: wg.WgmmaTile = CONFIG) -> tuple[str, ...]:
    """Every -D option of the variant that loads A with wa-byte and B with wb-byte loads."""
    for name, w in (("A", wa), ("B", wb)):
        if w not in LOAD_WIDTHS:
            raise ValueError(f"load width of {name} must be one of {LOAD_WIDTHS} bytes, got {w!r}")
    return tile_defines(config) + (f"-DHG_LOAD_A={wa}", f"-DHG_LOAD_B={wb}")


DEFINES = defines(*CENSUS_WIDTHS)


def smem(config: wg.WgmmaTile = CONFIG) -> int:
    """Dynamic shared memory: the stages + 1 KB to align them to 1024 bytes (no mbarriers)."""
    return config.stages * config.stage_bytes + 1024


# ---------------------------------------------------------------------------- the load width

def load_width(ptr: int, row_bytes: int) -> int:
    """Bytes per global load for a row-major operand at address `ptr` whose rows are
    `row_bytes` apart: the widest of 8, 4, 2 that divides the base and the row stride (and so
    the byte offset of every row). ValueError when not even 2 does (not an fp16/bf16 array)."""
    for w in LOAD_WIDTHS:
        if ptr % w == 0 and row_bytes % w == 0:
            return w
    raise ValueError(f"level {LEVEL}: an operand at address {ptr:#x} with rows {row_bytes} bytes "
                     "apart is not 2-byte aligned")


# ---------------------------------------------------------------------------- the loader, in Python

def swz128(row: int, chunk: int) -> int:
    """native/ptx.cuh swz128: 16-byte chunk `chunk` of 128-byte row `row`, XOR-swizzled."""
    return row * 128 + ((chunk ^ (row & 7)) << 4)


@dataclass(frozen=True)
class StagedTile:
    """One operand tile of ROWS x COLS elements as THREADS threads load it with W-byte loads:
    native/wgmma_reg_loader.cuh's StagedTile<W, ROWS, COLS>, the same quantities under the same
    names, side by side with the C++ they mirror:

      LOAD_ELEMS  = W / 2                              elements per global load
      PIECE_ELEMS = W < 4 ? 2 : W / 2                  elements per shared store
      LOADS       = PIECE_ELEMS / LOAD_ELEMS           loads per piece
      PIECES      = ROWS * COLS / (PIECE_ELEMS * THREADS)
      STEP        = THREADS * PIECE_ELEMS / COLS       rows between a thread's pieces
      PANEL       = ROWS * 128                         bytes per 64-column panel
      init:  e = tid * PIECE_ELEMS; row0 = e / COLS; col = e % COLS; step = STEP * LD
             src0 = G + (R0 + row0) * LD + C0 + col
             dst0 = (col / 64) * PANEL + swz128(row0, (col % 64) / 8) + (col % 8) * 2
      load:  piece i at p = src0 + i * step; row_ok = row0 + i * STEP < rows_left;
             load l (elements p + l * LOAD_ELEMS ..) if row_ok and col + l * LOAD_ELEMS < cols_left, else 0
      store: dst = (tile + (dst0 ^ (((i * STEP) & 7) << 4))) + i * STEP * 128, PIECE_ELEMS * 2 bytes

    A is StagedTile<W_A, BM, 64> at (R0, C0) = (m0, k0), LD = K, rows_left = M - m0, cols_left = K - k0;
    B is StagedTile<W_B, 64, BN> at (k0, n0), LD = N, rows_left = K - k0, cols_left = N - n0, its
    shared tile at A_BYTES in the stage.
    """
    W: int
    ROWS: int
    COLS: int
    THREADS: int = CONFIG.threads

    @property
    def LOAD_ELEMS(self) -> int:
        return self.W // 2

    @property
    def PIECE_ELEMS(self) -> int:
        return 2 if self.W < 4 else self.W // 2

    @property
    def LOADS(self) -> int:
        return self.PIECE_ELEMS // self.LOAD_ELEMS

    @property
    def REGS(self) -> int:
        return self.PIECE_ELEMS // 2

    @property
    def PIECES(self) -> int:
        return self.ROWS * self.COLS // (self.PIECE_ELEMS * self.THREADS)

    @property
    def STEP(self) -> int:
        return self.THREADS * self.PIECE_ELEMS // self.COLS

    @property
    def PANEL(self) -> int:
        return self.ROWS * 128

    def problems(self) -> list[str]:
        """The header's static_asserts."""
        out = []
        if self.W not in LOAD_WIDTHS:
            out.append("loads of 2, 4 or 8 bytes")
        if self.COLS % 64 or (self.THREADS * self.PIECE_ELEMS) % self.COLS:
            out.append("whole rows per pass")
        if self.PIECES * self.PIECE_ELEMS * self.THREADS != self.ROWS * self.COLS:
            out.append("every piece has one thread")
        if self.STEP & (self.STEP - 1) or self.ROWS % self.STEP:
            out.append("rows per pass: a power of two")
        return out

    def init(self, LD: int, R0: int, C0: int, tid: int) -> dict:
        """init(): the thread's first piece, as element indices into G (src0) and a byte offset
        into the operand's shared tile (dst0)."""
        e = tid * self.PIECE_ELEMS
        row0, col = e // self.COLS, e % self.COLS
        return {"row0": row0, "col": col, "step": self.STEP * LD,
                "src0": (R0 + row0) * LD + C0 + col,
                "dst0": (col // 64) * self.PANEL + swz128(row0, (col % 64) // 8) + (col % 8) * 2}

    def loads(self, t: dict, rows_left: int, cols_left: int):
        """load(): (piece i, load l, first element index or None for a zero) of each load."""
        for i in range(self.PIECES):
            p = t["src0"] + i * t["step"]
            row_ok = t["row0"] + i * self.STEP < rows_left
            for l in range(self.LOADS):
                ok = row_ok and t["col"] + l * self.LOAD_ELEMS < cols_left
                yield i, l, (p + l * self.LOAD_ELEMS if ok else None)

    def stores(self, t: dict, tile: int = 0):
        """store(): (piece i, first byte in shared memory) of each store of PIECE_ELEMS * 2 bytes."""
        for i in range(self.PIECES):
            yield i, (tile + (t["dst0"] ^ (((i * self.STEP) & 7) << 4))) + i * self.STEP * 128


def operand_tiles(config: wg.WgmmaTile, wa: int, wb: int) -> tuple[StagedTile, StagedTile]:
    """The A and B StagedTile of a variant: BM x 64 and 64 x BN."""
    return (StagedTile(wa, config.bm, config.bk, config.threads),
            StagedTile(wb, config.bk, config.bn, config.threads))


def stage_image(M: int, N: int, K: int, m0: int, n0: int, k0: int, wa: int, wb: int,
                config: wg.WgmmaTile = CONFIG, base_a: int = 0, base_b: int = 0):
    """What the loader puts into one stage for the tile at (m0, n0) and K offset k0: a list of
    STAGE_BYTES entries, each (operand, global element index, byte of the element) or 0 for a
    zero byte, or None where nothing was written; plus every global load as (operand, byte
    address, bytes) with the operands at byte addresses base_a, base_b. Raises AssertionError
    if a byte is written twice or a load is part in, part out of the matrix."""
    ta, tb = operand_tiles(config, wa, wb)
    a_bytes = config.bm * config.bk * 2
    image = [None] * config.stage_bytes
    loads = []
    operands = (("A", ta, K, m0, k0, M - m0, K - k0, 0, base_a, M * K),
                ("B", tb, N, k0, n0, K - k0, N - n0, a_bytes, base_b, K * N))
    for name, tile, LD, R0, C0, rows_left, cols_left, at, base, size in operands:
        for tid in range(config.threads):
            t = tile.init(LD, R0, C0, tid)
            staged = {}
            for i, l, first in tile.loads(t, rows_left, cols_left):
                if first is not None:
                    elems = range(first, first + tile.LOAD_ELEMS)
                    assert all(0 <= e < size for e in elems), (name, tid, i, l)
                    # never part in and part out: every element of the load is in its row's range
                    r, c = divmod(first, LD)
                    assert c + tile.LOAD_ELEMS <= LD, (name, tid, i, l)
                    loads.append((name, base + 2 * first, tile.W))
                    staged[i, l] = [(name, e, b) for e in elems for b in (0, 1)]
                else:
                    staged[i, l] = [0] * tile.W
            for i, dst in tile.stores(t, at):
                data = [x for l in range(tile.LOADS) for x in staged[i, l]]
                for j, x in enumerate(data):
                    assert image[dst + j] is None, f"{name}: byte {dst + j} written twice"
                    image[dst + j] = x
    return image, loads


def expected_stage(M: int, N: int, K: int, m0: int, n0: int, k0: int,
                   config: wg.WgmmaTile = CONFIG):
    """The stage TMA would write for the same tile (v11: one A box at (k0, m0) and the B panels
    at (n0 + 64p, k0), SWIZZLE_128B, zero-filled past the matrix), in stage_image's terms."""
    a_bytes = config.bm * config.bk * 2
    image = [None] * config.stage_bytes
    for lin in range(a_bytes):                       # the A box: BM rows x 128 bytes
        r, k = lin // 128, (lin % 128) // 2
        m, kk = m0 + r, k0 + k
        image[cm.tma_swizzle_128b(lin)] = ("A", m * K + kk, lin % 2) if m < M and kk < K else 0
    for p in range(config.bn // 64):                 # B panel p: 64 k-rows x 64 columns
        for lin in range(config.bk * 128):
            kr, c = lin // 128, (lin % 128) // 2
            kk, n = k0 + kr, n0 + 64 * p + c
            at = a_bytes + p * config.bk * 128 + cm.tma_swizzle_128b(lin)
            image[at] = ("B", kk * N + n, lin % 2) if kk < K and n < N else 0
    return image


def tile_instructions(wa: int, wb: int, config: wg.WgmmaTile = CONFIG) -> dict:
    """Per thread and K tile: global loads and shared stores of each operand (the model's counts)."""
    ta, tb = operand_tiles(config, wa, wb)
    return {"loads_a": ta.PIECES * ta.LOADS, "loads_b": tb.PIECES * tb.LOADS,
            "stores_a": ta.PIECES, "stores_b": tb.PIECES,
            "store_bytes_a": ta.PIECE_ELEMS * 2, "store_bytes_b": tb.PIECE_ELEMS * 2}


# ---------------------------------------------------------------------------- host side

def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None, config=CONFIG):
    """(super_m, super_n): v9's L2 rule for this tile."""
    return wg.tile_order(M, N, K, l2_bytes, config)


def launch_config(M: int, N: int, K: int, config=CONFIG):
    grid = (cm.cdiv(M, config.bm) * cm.cdiv(N, config.bn), 1, 1)
    return grid, (config.threads, 1, 1), smem(config)


def unsupported(M: int, N: int, K: int) -> str | None:
    reason = cm.check_dims(M, N, K)
    if reason:
        return reason
    if min(M, N, K) < 1:
        return f"M, N, K must be >= 1, got M={M}, N={N}, K={K}"
    if cm.cdiv(M, CONFIG.bm) * cm.cdiv(N, CONFIG.bn) > cm.INT32_MAX:
        return "more than 2^31 - 1 output tiles"
    return None


def row_stride_bytes(a, rows: int, cols: int) -> int:
    """Bytes between the rows of a 2-D device array of 2-byte elements; ValueError unless its
    elements are contiguous along a row (the kernel walks each row element by element)."""
    cai = a.__cuda_array_interface__
    strides = cai.get("strides")
    if strides is None:
        return 2 * cols
    s_row, s_col = strides
    if cols > 1 and s_col != 2:
        raise ValueError(f"level {LEVEL}: rows must be contiguous (element stride {s_col} bytes)")
    if rows > 1 and s_row != 2 * cols:
        raise ValueError(f"level {LEVEL}: row stride {s_row} bytes, the kernel needs {2 * cols} "
                         "(a contiguous row-major matrix)")
    return 2 * cols


def variant(A, B) -> tuple[int, int]:
    """(W_A, W_B): the load widths this pair of operands allows."""
    M, K = A.shape
    N = B.shape[1]
    return (load_width(cm.device_ptr(A), row_stride_bytes(A, M, K)),
            load_width(cm.device_ptr(B), row_stride_bytes(B, K, N)))


def run(A, B, C, alpha, beta, stream=None):
    M, K = A.shape
    N = B.shape[1]
    reason = unsupported(M, N, K)
    if reason:
        raise ValueError(f"level {LEVEL} cannot run M={M}, N={N}, K={K}: {reason}")
    wa, wb = variant(A, B)
    pa, pb, pc = cm.device_ptr(A), cm.device_ptr(B), cm.device_ptr(C)
    super_m, super_n = tile_order(M, N, K)
    args = cm.pack_args(
        ("p", pa), ("p", pb), ("p", pc), ("i", M), ("i", N), ("i", K), ("f", alpha), ("f", beta),
        ("i", int(cm.vec_c(pc, N))), ("i", super_m), ("i", super_n))
    grid, block, nbytes = launch_config(M, N, K)
    cm.launch(SOURCE, KERNEL_NAMES[cm.element_type(A)], grid, block, nbytes, stream, args,
              defines(wa, wb))
