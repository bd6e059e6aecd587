"""The ledgers of one level: bytes (DRAM roofline), requests (per warp load), cycles (priced
loads per FMA), and for the tensor-core levels an L2 model of the launch order.

Each function takes a registry Level (or its name) and reads the level's own hooks:
SGEMM levels their GEOMETRY and warp_step (numba_gemm.sgemm._access), HGEMM levels their
CONFIG (bm, bn, bk), RASTER and, for RASTER "super", tile_order. A Geometry or HTile passed
explicitly replaces the module's (the tests reproduce the seed's published figures so).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ... import choose
from ...choose import Waves
from ...registry import RASTERS
from ...sgemm._access import SEGMENT, WARP, Geometry, Step, requests, sectors
from .card import Card, card


def level_of(level):
    """A registry Level from a Level or a level name."""
    if isinstance(level, str):
        from ...registry import get

        return get(level)
    return level


def geometry(level) -> Geometry:
    """A SGEMM level's GEOMETRY."""
    return level_of(level).module.GEOMETRY


def warp_steps(level, n: int | tuple[int, int, int] = 4096, geom: Geometry | None = None,
               block_xy: tuple[int, int] = (1, 1), ph: int = 1) -> list[Step]:
    """One step (a k, or a phase) of every warp of an interior block, from the level's warp_step."""
    mod = level_of(level).module
    M, N, K = (n, n, n) if isinstance(n, int) else n
    g = geom or mod.GEOMETRY
    return [mod.warp_step(M, N, K, block_xy[0], block_xy[1], w, ph, g) for w in range(g.threads // WARP)]


@dataclass(frozen=True)
class HTile:
    bm: int
    bn: int
    bk: int
    raster: str                      # "m-fastest" (2-D grid, x -> m), "n-fastest", "super"
    super_m: int = 1
    super_n: int = 1




def htile(level, n=4096, l2_bytes: int | None = None) -> HTile:
    """An HGEMM level's tile (CONFIG), launch order (RASTER) and, for "super", the
    (super_m, super_n) its tile_order chooses for this shape and L2 size (default: the
    default card's, so the ledgers never ask a device)."""
    mod = level_of(level).module
    cfg, raster = mod.CONFIG, mod.RASTER
    if raster not in RASTERS:
        raise ValueError(f"{mod.LEVEL}: RASTER {raster!r} is not one of {RASTERS}")
    sm = sn = 1
    if raster == "super":
        M, N, K = (n, n, n) if isinstance(n, int) else n
        sm, sn = mod.tile_order(M, N, K, l2_bytes if l2_bytes is not None else card().l2_bytes)
    return HTile(cfg.bm, cfg.bn, cfg.bk, raster, sm, sn)


def _name(level) -> str:
    return level if isinstance(level, str) else level.name


# ---------------------------------------------------------------------------- bytes

@dataclass
class BytesLedger:
    level: str
    M: int
    N: int
    K: int
    flops: float
    dram_bytes: float
    reuse_tile: tuple[int, int]
    peak_flops: float | None
    bandwidth: float
    model: str

    @property
    def intensity(self) -> float:
        return self.flops / self.dram_bytes

    @property
    def t_bytes(self) -> float:
        return self.dram_bytes / self.bandwidth

    @property
    def t_flops(self) -> float | None:
        return self.flops / self.peak_flops if self.peak_flops else None

    @property
    def roofline_s(self) -> float:
        return max(self.t_bytes, self.t_flops or 0.0)

    @property
    def bound(self) -> str:
        return "memory" if self.t_bytes >= (self.t_flops or 0.0) else "compute"

    def attainment(self, measured_s: float) -> float:
        """Roofline time / measured time, in % (achieved FLOP/s over the roof's FLOP/s)."""
        return 100.0 * self.roofline_s / measured_s


def tile_bytes(M, N, K, tm, tn, in_bytes=4, out_bytes=4, read_c=False) -> float:
    """DRAM bytes if each (tm × tn) output tile reads its A and B panels once, C written once."""
    tiles_m = math.ceil(M / tm)
    tiles_n = math.ceil(N / tn)
    return (in_bytes * (M * K * tiles_n + K * N * tiles_m)
            + out_bytes * M * N * (2 if read_c else 1))


def _copies(lv, M, N, K) -> tuple[int, str]:
    """(bytes, words) of the copies a level makes before its product (k8p, v11p: copies_bytes,
    with beta = 0), or (0, "") for a level that makes none."""
    copies = getattr(lv.module, "copies_bytes", None)
    if copies is None:
        return 0, ""
    b = copies(M, N, K)
    return b, f"; + {b / 1e9:.3f} GB of padded copies"


def bytes_ledger(level, card_: Card | str | None = None, n=4096,
                 geom: Geometry | None = None) -> BytesLedger:
    lv = level_of(level)
    c = card(card_)
    M, N, K = (n, n, n) if isinstance(n, int) else n
    flops = 2.0 * M * N * K
    copied, copy_words = _copies(lv, M, N, K)
    if lv.family == "sgemm":
        g = geom or geometry(lv)
        # Without shared-memory staging (tile_k == 1) nothing is shared between threads:
        # each thread is its own "block" and reads its row of A and column of B.
        tm, tn = (g.tile_m, g.tile_n) if g.staged else (g.thread_m, g.thread_n)
        b = tile_bytes(M, N, K, tm, tn) + copied
        model = (f"each {tm}×{tn} output tile reads its A and B panels from DRAM once; "
                 "C written once" + copy_words)
        return BytesLedger(lv.name, M, N, K, flops, b, (tm, tn), c.fp32_flops, c.bandwidth, model)
    # Tensor-core tiles are large enough that the per-tile model (no L2 reuse) is far from
    # the truth; the launch-order L2 model below is the DRAM estimate for these levels.
    lg = l2_ledger(lv, (M, N, K), c)
    t = lg.tile
    model = (f"{t.bm}×{t.bn} tiles, fp16 A/B, fp32 C; L2 model of the launch order: A read "
             f"{lg.a_reads}×, B read {lg.b_reads}× (no-reuse bound {lg.per_tile_bytes / 1e9:.2f} GB)"
             + copy_words)
    # each level under the roof of the instruction it issues: wgmma levels under wgmma's
    roof = c.wgmma_flops if c.wgmma_flops and "HGMMA" in lv.sass_must_have else c.tensor_flops
    return BytesLedger(lv.name, M, N, K, flops, lg.dram_bytes + copied, (t.bm, t.bn), roof,
                       c.bandwidth, model)


# ---------------------------------------------------------------------------- requests

@dataclass
class RequestLedger:
    level: str
    loads: list[tuple[str, int, int, int, str]]   # (array, width, requests, sectors, kind) per warp load
    fmas: int                                     # FMAs per thread per step (all warps alike)
    warps: int

    @property
    def requests_per_fma(self) -> float:
        return sum(r for _, _, r, _, _ in self.loads) / (self.fmas * self.warps)

    @property
    def sectors_per_fma(self) -> float:
        return sum(s for _, _, _, s, _ in self.loads) / (self.fmas * self.warps)

    @property
    def loads_per_fma(self) -> float:
        return len(self.loads) / (self.fmas * self.warps)

    @property
    def requests_per_load(self) -> float:
        return sum(r for _, _, r, _, _ in self.loads) / len(self.loads)

    def by_array(self) -> dict[str, tuple[float, float]]:
        """array -> (requests per load instruction, loads per FMA)."""
        out = {}
        for arr in sorted({a for a, *_ in self.loads}):
            rs = [r for a, _, r, _, _ in self.loads if a == arr]
            out[arr] = (sum(rs) / len(rs), len(rs) / (self.fmas * self.warps))
        return out


def request_ledger(level, n=4096, geom: Geometry | None = None) -> RequestLedger:
    steps = warp_steps(level, n, geom)
    loads = []
    for st in steps:
        for a in st.accesses:
            if a.space == "global" and a.op == "load":
                loads.append((a.array, a.width, requests(a.addrs, SEGMENT, a.width),
                              sectors(a.addrs, a.width), a.kind))
    return RequestLedger(_name(level), loads, steps[0].fmas, len(steps))


# ---------------------------------------------------------------------------- cycles

@dataclass
class CycleLedger:
    level: str
    per_fma: dict[str, float]            # kind -> warp load instructions per warp FMA
    stores_per_fma: dict[str, float]     # kind -> shared stores per FMA (not priced, as in the seed)
    card: Card
    ffma_floor: float

    def cost(self, kind: str) -> tuple[float | None, str]:
        return self.card.price(kind)

    @property
    def missing(self) -> list[str]:
        return sorted(k for k in self.per_fma if self.cost(k)[0] is None)

    def _sum(self, pred) -> float | None:
        if any(self.cost(k)[0] is None for k in self.per_fma if pred(k)):
            return None
        return sum(v * self.cost(k)[0] for k, v in self.per_fma.items() if pred(k))

    @property
    def shared_cycles(self) -> float | None:
        return self._sum(lambda k: k.startswith("lds"))

    @property
    def global_cycles(self) -> float | None:
        return self._sum(lambda k: k.startswith("ldg"))

    @property
    def cycles_per_fma(self) -> float | None:
        return self._sum(lambda k: True)

    def predicted_s(self, M, N, K) -> float | None:
        """Time if every SM retires its share of the priced instructions back to back."""
        cyc = self.cycles_per_fma
        if cyc is None:
            return None
        warp_fmas = M * N * K / WARP
        return warp_fmas * max(cyc, self.ffma_floor) / (self.card.sms * self.card.clock_ghz * 1e9)


def cycle_ledger(level, card_: Card | str | None = None, n=4096,
                 geom: Geometry | None = None) -> CycleLedger:
    c = card(card_)
    steps = warp_steps(level, n, geom)
    fmas = steps[0].fmas * len(steps)
    loads: dict[str, float] = {}
    stores: dict[str, float] = {}
    for st in steps:
        for a in st.accesses:
            if a.op == "load":
                loads[a.kind] = loads.get(a.kind, 0) + 1
            elif a.space == "shared":
                k = a.kind.replace("lds", "sts", 1)
                stores[k] = stores.get(k, 0) + 1
    return CycleLedger(_name(level), {k: v / fmas for k, v in loads.items()},
                       {k: v / fmas for k, v in stores.items()}, c, c.ffma_floor)


def predicted_speedup(prev: CycleLedger, cur: CycleLedger) -> float | None:
    a, b = prev.cycles_per_fma, cur.cycles_per_fma
    if a is None or b is None:
        return None
    return max(a, prev.ffma_floor) / max(b, cur.ffma_floor)


# ---------------------------------------------------------------------------- HGEMM: L2

@dataclass
class L2Ledger:
    level: str
    M: int
    N: int
    K: int
    tile: HTile
    l2_bytes: int
    working_set: float | None     # super-tile: (SM·BM + SN·BN)·K·2
    a_reads: float                # how many times A crosses DRAM (model)
    b_reads: float
    per_tile_bytes: float         # no L2 reuse at all
    ideal_bytes: float            # every input read once
    notes: list[str]

    @property
    def dram_bytes(self) -> float:
        return 2 * self.M * self.K * self.a_reads + 2 * self.K * self.N * self.b_reads + 4 * self.M * self.N


def l2_ledger(level, n=4096, card_: Card | str | None = None, tile: HTile | None = None) -> L2Ledger:
    """DRAM traffic of an HGEMM level under an L2 capacity model of its launch order.

    Model (a capacity argument, not a cache simulation): CTAs are issued in blockIdx order.
    An operand panel shared by consecutive CTAs is read once. An operand whose reuse comes
    only after a sweep over the whole other axis is read once if everything that streams
    through L2 in between fits, else once per sweep. The super-tile reads A once per row of
    super-tiles while its working set (SUPER_M·BM + SUPER_N·BN)·K·2 fits in L2, and B once
    per row of super-tiles. A super-tile too big for L2 keeps what its order (n fastest
    inside it) still reuses: an A panel across one of its rows (A read once per super-tile
    column), its SUPER_N B panels across its rows if they alone fit (B read once per row of
    super-tiles, else once per tile row) — so a 1 × grid_n super-tile, which is v8's order,
    gets v8's figure. With `tile` given the level's module is not read.
    """
    c = card(card_)
    M, N, K = (n, n, n) if isinstance(n, int) else n
    t = tile or htile(level, (M, N, K), c.l2_bytes)
    gm, gn = math.ceil(M / t.bm), math.ceil(N / t.bn)
    A, B = 2 * M * K, 2 * K * N
    L2 = c.l2_bytes
    notes = []
    ws = None
    if t.raster == "m-fastest":      # consecutive CTAs walk down a column band: B reused
        b_reads = 1
        a_reads = 1 if A + 2 * K * t.bn <= L2 else gn
        notes.append(f"2-D grid, x -> m: B read once; A {'fits' if a_reads == 1 else 'does not fit'} "
                     f"in L2 ({A / 1e6:.0f} MB vs {L2 / 1e6:.0f} MB) -> read {a_reads}×")
    elif t.raster == "n-fastest":
        a_reads = 1
        b_reads = 1 if B + 2 * K * t.bm <= L2 else gm
        notes.append(f"1-D grid, n fastest: A read once; B {'fits' if b_reads == 1 else 'does not fit'} "
                     f"in L2 ({B / 1e6:.0f} MB vs {L2 / 1e6:.0f} MB) -> read {b_reads}×")
    else:
        ws = (t.super_m * t.bm + t.super_n * t.bn) * K * 2
        if ws > L2:
            a_reads = math.ceil(gn / t.super_n)
            b_fits = (t.super_n * t.bn + t.bm) * K * 2 <= L2
            b_reads = math.ceil(gm / t.super_m) if b_fits else gm
            notes.append(f"super-tile working set {ws / 1e6:.1f} MB exceeds L2 {L2 / 1e6:.0f} MB: "
                         f"A read once per super-tile column ({a_reads}×), B {b_reads}× "
                         f"({'its panels fit: once per row of super-tiles' if b_fits else 'once per tile row'})")
        else:
            a_reads = 1
            rows = math.ceil(gm / t.super_m)
            b_reads = 1 if B + ws <= L2 else rows
            notes.append(f"super-tile {t.super_m}×{t.super_n}: working set {ws / 1e6:.1f} MB fits "
                         f"in L2 {L2 / 1e6:.0f} MB; A read once, B read {b_reads}× "
                         f"(once per row of super-tiles)")
    per_tile = tile_bytes(M, N, K, t.bm, t.bn, 2, 4)
    return L2Ledger(_name(level), M, N, K, t, L2, ws, a_reads, b_reads, per_tile, A + B + 4 * M * N, notes)


# ---------------------------------------------------------------------------- waves

def waves(level, n=4096, card_: Card | str | None = None, dtype="float32") -> Waves:
    """choose.waves on a card: the level's CTAs at shape n (its tile and K split, as auto sees
    them), the CTAs the card's SMs hold by its launch bounds, and auto's fitted slots per wave."""
    M, N, K = (n, n, n) if isinstance(n, int) else n
    return choose.waves(level_of(level), M, N, K, card(card_).sms, dtype)
