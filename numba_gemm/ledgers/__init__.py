"""The three ledgers: why each level of the ladder is faster than the one below it.

A roofline alone ("bytes ledger") explains few of the SGEMM steps: k2 reaches twenty times
its DRAM roofline because its bytes come from L1/L2, and k3 raises the arithmetic intensity
32× for a 1.16× gain. Two more ledgers, both computed here from each level's own index
mapping, explain what the roofline cannot:

* **bytes**    FLOPs, DRAM bytes under the level's tiling (each block reads its A and B panels
               from DRAM once, C is written once), intensity, roofline time on a card,
               attainment of a measured time.
* **requests** global-memory requests per warp-level load and per FMA: the distinct 128-byte
               segments (and 32-byte sectors) that the 32 lanes of one warp touch, from the
               addresses the level's index mapping generates. k1: 32 + 1 = 33 per FMA.
* **cycles**   shared and global loads per FMA, split by kind (broadcast, conflict-free,
               n-way bank conflict, 128-bit), each priced in SM cycles per warp-level
               instruction at full occupancy. The RTX 4090 prices are the seed's; the H200
               prices come from `python -m numba_gemm.microbench` (a JSON file in
               numba_gemm/data/); without it the ledger says "not measured on this card".

The unit of the cycle ledger is the SM's throughput: a cost c means one SM retires one such
warp instruction every c cycles when it is full of warps. Hence the time it predicts,
t = (M·N·K / 32 warp-FMAs) × cycles per FMA / (SMs × clock); for the seed's k2 on the 4090
this gives 25.8 ms against 25.815 ms measured.

Everything here is plain Python arithmetic (no GPU, no Numba at import). The index mappings
are each level module's `warp_step` (its types in numba_gemm/ledgers/access.py), applied to
the same constants the kernels use (BLOCK, TILE_M/N/K, THREAD_M/N), read from the level
modules when they are importable and otherwise taken from the seed.
"""
from __future__ import annotations

import importlib
import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .access import (  # noqa: F401  (re-exported)
    BANK_BYTES, BANKS, F32, SECTOR, SEGMENT, WARP, Access, BankProfile, Geometry, Step,
    bank_profile, global_kind, global_load, lanes, requests, sectors, shared_access, shared_kind,
)

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
H200_COSTS = DATA_DIR / "h200_costs.json"


# What the seed calls each kind. Its "32-way" load is 32 lanes reading 32 distinct words,
# one per bank (conflict-free, full width), not a 32-way bank conflict.
KIND_NAMES = {
    "lds_bcast": "shared, broadcast (1 word for 32 lanes)",
    "lds_free": "shared, 32 distinct words, conflict-free (the seed's '32-way')",
    "lds128": "shared, 128-bit, conflict-free",
    "lds128_bcast": "shared, 128-bit broadcast",
    "ldg": "global, 32-bit, 1 request",
    "ldg_bcast": "global, 32-bit broadcast (1 sector)",
    "ldg128": "global, 128-bit, coalesced",
    "ffma": "FFMA (the FP32 pipe, for scale)",
}


def kind_name(kind: str) -> str:
    if kind in KIND_NAMES:
        return KIND_NAMES[kind]
    if kind.startswith("lds") and "_conflict" in kind:
        return f"shared, {kind.rsplit('conflict', 1)[1]}-way bank conflict"
    if kind.startswith("ldg") and "_x" in kind:
        return f"global, {kind.rsplit('_x', 1)[1]} requests per instruction"
    return kind


# A kind the card has no price for may be priced as another, as the seed did (it priced
# k2's broadcast A load and coalesced B load alike at 1.94 cycles).
PRICE_FALLBACK = {"ldg_bcast": "ldg"}


# =======================================================================================
# Cards
# =======================================================================================

@dataclass(frozen=True)
class Card:
    name: str
    sms: int
    clock_ghz: float                 # SM clock the cycle costs are counted in
    bandwidth: float                 # bytes/s: the DRAM ceiling (copy: read + write)
    l2_bytes: int
    fp32_lanes_per_sm: int = 128
    tensor_flops: float | None = None   # fp16 in / fp32 accumulate ceiling
    costs: Mapping[str, float] = field(default_factory=dict)  # SM cycles per warp instruction
    costs_source: str = ""           # "" = not measured on this card
    notes: tuple[str, ...] = ()

    @property
    def fp32_flops(self) -> float:
        return self.sms * self.fp32_lanes_per_sm * 2 * self.clock_ghz * 1e9

    @property
    def ffma_floor(self) -> float:
        """SM cycles per warp FFMA when the FP32 pipe is the only limit (0.25 on 128 lanes)."""
        return WARP / self.fp32_lanes_per_sm

    def price(self, kind: str) -> tuple[float | None, str]:
        """(cycles, the kind actually priced) or (None, kind) when not measured here."""
        if kind in self.costs:
            return self.costs[kind], kind
        alt = PRICE_FALLBACK.get(kind)
        if alt is not None and alt in self.costs:
            return self.costs[alt], alt
        return None, kind

    def with_costs_from(self, path: str | os.PathLike) -> "Card":
        """This card with the costs (and measured clock/bandwidth) of a microbench JSON."""
        data = json.loads(Path(path).read_text())
        costs = {k: float(v) for k, v in data.get("costs", {}).items() if v is not None}
        notes = list(self.notes)
        kw = {}
        if data.get("clock_ghz"):
            kw["clock_ghz"] = float(data["clock_ghz"])
        if data.get("copy_bandwidth_Bps"):
            kw["bandwidth"] = float(data["copy_bandwidth_Bps"])
            notes.append("bandwidth: measured device-to-device copy (read + write)")
        if data.get("sms"):
            kw["sms"] = int(data["sms"])
        src = f"measured by numba_gemm.microbench on {data.get('device', '?')}"
        if data.get("measured_utc"):
            src += f", {data['measured_utc']}"
        return replace(self, costs=costs, costs_source=src, notes=tuple(notes), **kw)


RTX4090 = Card(
    name="RTX 4090",
    sms=128,
    clock_ghz=2.52,
    bandwidth=1008e9,
    l2_bytes=72 * 2**20,
    tensor_flops=None,
    costs={"lds_free": 2.686, "lds_bcast": 0.534, "ldg": 1.94},
    costs_source="the seed's microbenchmarks on an RTX 4090",
    notes=("bandwidth: datasheet 1008 GB/s, as the seed's roofline used",
           "clock: 2.52 GHz boost"),
)

RTX5080 = Card(
    name="RTX 5080",
    sms=84,
    clock_ghz=2.62,
    bandwidth=960e9,
    l2_bytes=64 * 2**20,
    tensor_flops=115e12,
    notes=("tensor ceiling: the seed's ~115 TFLOPS 'practical peak' for fp16 mma.sync",),
)

_H200_BASE = Card(
    name="H200",
    sms=132,
    clock_ghz=1.98,
    bandwidth=4.3e12,
    l2_bytes=60 * 2**20,
    tensor_flops=639e12,
    notes=("bandwidth: ~4.3 TB/s device-to-device copy measured (read + write)",
           "clock: 1.98 GHz (read by nvidia-smi under load)",
           "tensor ceiling: mma.sync m16n8k16 register loop measured 639 TFLOPS; "
           "cuBLAS fp16 reaches ~711 through wgmma, which v7-v10 do not use"),
)


def h200(costs_json: str | os.PathLike | None = None) -> Card:
    """The H200 with the measured costs from `costs_json` (default: the committed data file)."""
    path = Path(costs_json) if costs_json else H200_COSTS
    if path.exists():
        return _H200_BASE.with_costs_from(path)
    return _H200_BASE


CARDS: dict[str, Callable[[], Card]] = {
    "h200": h200,
    "rtx4090": lambda: RTX4090,
    "4090": lambda: RTX4090,
    "rtx5080": lambda: RTX5080,
    "5080": lambda: RTX5080,
}


def card(name_or_card: "str | Card | None" = None) -> Card:
    if isinstance(name_or_card, Card):
        return name_or_card
    key = (name_or_card or "h200").lower().replace(" ", "").replace("-", "")
    if key.endswith(".json"):
        return h200(name_or_card)
    try:
        return CARDS[key]()
    except KeyError:
        raise ValueError(f"unknown card {name_or_card!r}: one of {sorted(CARDS)} or a .json") from None


# =======================================================================================
# Level geometry (the kernels' own constants)
# =======================================================================================

SEED_GEOMETRY: dict[str, Geometry] = {
    "k1": Geometry((32, 32), 32, 32, 1, 1, 1),
    "k2": Geometry((32, 32), 32, 32, 1, 1, 1),
    "k3": Geometry((32, 32), 32, 32, 32, 1, 1),
    "k3c": Geometry((32, 32), 32, 128, 32, 1, 4),
    "k4": Geometry((32, 4), 32, 32, 32, 8, 1),
    "k5": Geometry((32, 4), 32, 128, 32, 8, 4),
    "k6": Geometry((32, 4), 32, 128, 32, 8, 4),
}

SGEMM_MODULES = {
    "k1": "k1_naive", "k2": "k2_coalesced", "k3": "k3_tiled", "k3c": "k3c_coarsened",
    "k4": "k4_column8", "k5": "k5_outer", "k6": "k6_vectorized",
}
SGEMM_LEVELS = tuple(SGEMM_MODULES)


@dataclass(frozen=True)
class HTile:
    bm: int
    bn: int
    bk: int
    raster: str                      # "m-fastest" (2-D grid, x -> m), "n-fastest", "super"
    super_m: int = 1
    super_n: int = 1


SEED_HTILES: dict[str, HTile] = {
    "v7": HTile(128, 128, 32, "m-fastest"),
    "v8": HTile(128, 64, 64, "n-fastest"),
    "v9": HTile(128, 64, 64, "super", 16, 2),
    "v10": HTile(128, 64, 64, "super", 16, 2),
}
HGEMM_MODULES = {"v7": "v7_wmma", "v8": "v8_mma", "v9": "v9_supertile", "v10": "v10_tma"}
HGEMM_LEVELS = tuple(HGEMM_MODULES)
ALL_LEVELS = SGEMM_LEVELS + HGEMM_LEVELS


def _module(level: str):
    """The level module if it can be imported, else None (never raises)."""
    fam, mods = ("sgemm", SGEMM_MODULES) if level in SGEMM_MODULES else ("hgemm", HGEMM_MODULES)
    names = [mods[level]]
    try:  # the registry knows the real file name when it differs from the expected one
        pkg = importlib.import_module(f"numba_gemm.{fam}")
        import pkgutil
        names += [m.name for m in pkgutil.iter_modules(pkg.__path__)
                  if m.name.split("_")[0] == level and m.name not in names]
    except Exception:
        pass
    for name in names:
        try:
            mod = importlib.import_module(f"numba_gemm.{fam}.{name}")
        except Exception:
            continue
        if getattr(mod, "LEVEL", level) == level:
            return mod
    return None


def geometry(level: str, use_module: bool = True) -> tuple[Geometry, str]:
    """(geometry, source): the level module's constants when importable, else the seed's."""
    seed = SEED_GEOMETRY[level]
    mod = _module(level) if use_module else None
    if mod is None:
        return seed, "seed (level module not importable)"
    try:
        g = Geometry(tuple(mod.BLOCK), mod.TILE_M, mod.TILE_N, mod.TILE_K,
                     mod.THREAD_M, mod.THREAD_N)
    except AttributeError as e:
        return seed, f"seed (module lacks {e.name})"
    if g != seed:
        return g, f"module {mod.__name__} (differs from the seed's {seed})"
    return g, f"module {mod.__name__} (= seed)"


def htile(level: str, use_module: bool = True, n=4096, l2_bytes: int | None = None) -> tuple[HTile, str]:
    """(tile, source) of an HGEMM level: the module's BM/BN/BK and, for super-tiled levels,
    the (super_m, super_n) its `tile_order(M, N, K, l2_bytes)` chooses for this shape."""
    seed = SEED_HTILES[level]
    mod = _module(level) if use_module else None
    if mod is None:
        return seed, "seed (level module not importable)"

    def first(*names, default=None):
        for nm in names:
            if hasattr(mod, nm):
                return getattr(mod, nm)
        return default

    sm, sn = first("SUPER_M", "TSM", default=seed.super_m), first("SUPER_N", "TSN", default=seed.super_n)
    order = getattr(mod, "tile_order", None)
    if callable(order) and seed.raster == "super":
        M, N, K = (n, n, n) if isinstance(n, int) else n
        try:
            sm, sn = order(M, N, K, l2_bytes if l2_bytes is not None else _H200_BASE.l2_bytes)
        except Exception:
            pass
    t = HTile(
        first("BM", "BLOCK_M", "TILE_M", default=seed.bm),
        first("BN", "BLOCK_N", "TILE_N", default=seed.bn),
        first("BK", "BLOCK_K", "TILE_K", default=seed.bk),
        first("RASTER", default=seed.raster),
        sm, sn,
    )
    return t, f"module {mod.__name__}" + (" (= seed)" if t == seed else f" (seed: {seed.bm}×{seed.bn}×{seed.bk}"
                                          + (f", super {seed.super_m}×{seed.super_n}" if seed.raster == "super" else "") + ")")


# =======================================================================================
# Index mappings: the addresses one warp touches in one step of each level
# =======================================================================================

def _mapping(level: str) -> Callable[..., Step]:
    """The level module's warp_step (imported when needed: the level modules import .access)."""
    return importlib.import_module(f"numba_gemm.sgemm.{SGEMM_MODULES[level]}").warp_step


def warp_steps(level: str, n: int | tuple[int, int, int] = 4096, geom: Geometry | None = None,
               block_xy: tuple[int, int] = (1, 1), ph: int = 1) -> list[Step]:
    """One step (a k, or a phase) for every warp of an interior block."""
    M, N, K = (n, n, n) if isinstance(n, int) else n
    g = geom or geometry(level)[0]
    fn = _mapping(level)
    warps = g.threads // WARP
    return [fn(M, N, K, block_xy[0], block_xy[1], w, ph, g) for w in range(warps)]


# =======================================================================================
# The ledgers
# =======================================================================================

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


def bytes_ledger(level: str, card_: Card | str | None = None, n=4096,
                 geom: Geometry | None = None) -> BytesLedger:
    c = card(card_)
    M, N, K = (n, n, n) if isinstance(n, int) else n
    flops = 2.0 * M * N * K
    if level in SGEMM_MODULES:
        g = geom or geometry(level)[0]
        # Without shared-memory staging (tile_k == 1) nothing is shared between threads:
        # each thread is its own "block" and reads its row of A and column of B.
        tm, tn = (g.tile_m, g.tile_n) if g.staged else (g.thread_m, g.thread_n)
        b = tile_bytes(M, N, K, tm, tn)
        model = (f"each {tm}×{tn} output tile reads its A and B panels from DRAM once; "
                 "C written once")
        return BytesLedger(level, M, N, K, flops, b, (tm, tn), c.fp32_flops, c.bandwidth, model)
    # Tensor-core tiles are large enough that the per-tile model (no L2 reuse) is far from
    # the truth; the launch-order L2 model below is the DRAM estimate for these levels.
    lg = l2_ledger(level, (M, N, K), c)
    t = lg.tile
    model = (f"{t.bm}×{t.bn} tiles, fp16 A/B, fp32 C; L2 model of the launch order: A read "
             f"{lg.a_reads}×, B read {lg.b_reads}× (no-reuse bound {lg.per_tile_bytes / 1e9:.2f} GB)")
    return BytesLedger(level, M, N, K, flops, lg.dram_bytes, (t.bm, t.bn), c.tensor_flops,
                       c.bandwidth, model)


@dataclass
class RequestLedger:
    level: str
    loads: list[tuple[str, int, int, int, str]]   # (array, width, requests, sectors, kind) per warp load
    fmas: int                                     # FMAs per thread per step (all warps alike)
    warps: int
    stride_note: str = ""

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


def request_ledger(level: str, n=4096, geom: Geometry | None = None) -> RequestLedger:
    steps = warp_steps(level, n, geom)
    loads = []
    for st in steps:
        for a in st.accesses:
            if a.space == "global" and a.op == "load":
                loads.append((a.array, a.width, requests(a.addrs, SEGMENT, a.width),
                              sectors(a.addrs, a.width), a.kind))
    return RequestLedger(level, loads, steps[0].fmas, len(steps))


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


def cycle_ledger(level: str, card_: Card | str | None = None, n=4096,
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
    return CycleLedger(level, {k: v / fmas for k, v in loads.items()},
                       {k: v / fmas for k, v in stores.items()}, c, c.ffma_floor)


def predicted_speedup(prev: CycleLedger, cur: CycleLedger) -> float | None:
    a, b = prev.cycles_per_fma, cur.cycles_per_fma
    if a is None or b is None:
        return None
    return max(a, prev.ffma_floor) / max(b, cur.ffma_floor)


# =======================================================================================
# HGEMM: L2 and the super-tile
# =======================================================================================

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


def l2_ledger(level: str, n=4096, card_: Card | str | None = None, tile: HTile | None = None) -> L2Ledger:
    """DRAM traffic of an HGEMM level under an L2 capacity model of its launch order.

    Model (a capacity argument, not a cache simulation): CTAs are issued in blockIdx order.
    An operand panel shared by consecutive CTAs is read once. An operand whose reuse comes
    only after a sweep over the whole other axis is read once if everything that streams
    through L2 in between fits, else once per sweep. The super-tile reads A once per row of
    super-tiles while its working set (SUPER_M·BM + SUPER_N·BN)·K·2 fits in L2, and B once
    per row of super-tiles.
    """
    c = card(card_)
    M, N, K = (n, n, n) if isinstance(n, int) else n
    t = tile or htile(level, n=(M, N, K), l2_bytes=c.l2_bytes)[0]
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
            a_reads, b_reads = gn, gm
            notes.append(f"super-tile working set {ws / 1e6:.1f} MB exceeds L2 {L2 / 1e6:.0f} MB: "
                         "panels are evicted before reuse (per-tile bound)")
        else:
            a_reads = 1
            rows = math.ceil(gm / t.super_m)
            b_reads = 1 if B + ws <= L2 else rows
            notes.append(f"super-tile {t.super_m}×{t.super_n}: working set {ws / 1e6:.1f} MB fits "
                         f"in L2 {L2 / 1e6:.0f} MB; A read once, B read {b_reads}× "
                         f"(once per row of super-tiles)")
    per_tile = tile_bytes(M, N, K, t.bm, t.bn, 2, 4)
    return L2Ledger(level, M, N, K, t, L2, ws, a_reads, b_reads, per_tile, A + B + 4 * M * N, notes)


def supertile_comparison(n=8192, card_: Card | str | None = None) -> str:
    """DRAM traffic of v8's order vs v9's super-tile at size n: the entry the v9 step moves."""
    c = card(card_)
    v8 = l2_ledger("v8", n, c)
    v9 = l2_ledger("v9", n, c)
    lines = [f"L2 model at {n}³ on {c.name} (L2 {c.l2_bytes / 2**20:.0f} MiB):"]
    for lg in (v8, v9):
        lines.append(f"  {lg.level}: A read {lg.a_reads}×, B read {lg.b_reads}×, "
                     f"DRAM {lg.dram_bytes / 1e9:.2f} GB (ideal {lg.ideal_bytes / 1e9:.2f} GB, "
                     f"no-reuse bound {lg.per_tile_bytes / 1e9:.2f} GB)")
        lines += [f"      {s}" for s in lg.notes]
    return "\n".join(lines)


# =======================================================================================
# The 4096 / 4097 experiment
# =======================================================================================

SEED_STRIDE_4090 = {"k1": {4096: 211.911, 4097: 63.675}, "k2": {4096: 25.815, 4097: 26.615}}
SEED_CUDA_C_H200 = {"k1": {4096: 275.9, 4097: 83.75}, "k2": {4096: 21.96, 4097: 22.20}}


def stride_view(n: int, geom: Geometry | None = None) -> str:
    """What the request ledger sees of k1's A load at size n (and what it cannot see)."""
    st = warp_steps("k1", n, geom)[0]
    a = st.accesses[0]
    addrs = a.addrs
    stride = addrs[1] - addrs[0]
    low14 = len({x % (16 * 1024) for x in addrs})
    return (f"k1 @ {n}: A load lanes {stride} bytes apart -> {requests(addrs)} requests, "
            f"{sectors(addrs)} sectors; B load {requests(st.accesses[1].addrs)} request; "
            f"addresses mod 16 KiB: {low14} distinct value(s) across the 32 lanes")


def stride_experiment(k1_4096: float, k2_4096: float, k1_4097: float, k2_4097: float,
                      label: str = "this card") -> str:
    """Split k1/k2 at 4096 into coalescing (the 4097 ratio) and the power-of-two stride penalty."""
    r96 = k1_4096 / k2_4096
    r97 = k1_4097 / k2_4097
    pen = r96 / r97
    lines = [
        f"4096 vs 4097 on {label} (ms):",
        f"             N=4096      N=4097",
        f"  k1     {k1_4096:10.3f}  {k1_4097:10.3f}   k1 is {k1_4096 / k1_4097:.2f}× slower at 4096",
        f"  k2     {k2_4096:10.3f}  {k2_4097:10.3f}   k2 changes {100 * (k2_4097 / k2_4096 - 1):+.1f}%",
        f"  k1/k2  {r96:9.3f}×  {r97:9.3f}×",
        f"  coalescing alone (the 4097 ratio): {r97:.3f}×; power-of-two stride penalty: "
        f"{r96:.3f} / {r97:.3f} = {pen:.2f}×; check {r97:.3f} × {pen:.2f} = {r97 * pen:.3f}×",
        "  Request ledger: " + stride_view(4096),
        "                  " + stride_view(4097),
        "  The request ledger is the same at both sizes (33 per FMA): the penalty is not in it.",
        "  At 4096 every lane's address is the same modulo 16 KiB (rows are exactly 16 KiB",
        "  apart), so any cache set, L2 slice or DRAM channel chosen from address bits below 14",
        "  receives all 32 lines of the warp; at 4097 the rows drift by 4 bytes each and the",
        "  low bits spread. Which of these structures the hardware actually indexes that way",
        "  (and its hash) is not documented: the ledger stops here. ncu can look: L1 hit rate",
        "  (l1tex__t_sector_hit_rate), L2 hit rate (lts__t_sector_hit_rate) and DRAM bytes",
        "  (dram__bytes_read.sum) for k1 at 4096 and 4097, with --clock-control none.",
    ]
    return "\n".join(lines)


# =======================================================================================
# Reports
# =======================================================================================

def _f(x, fmt="{:.3f}", none="n/m"):
    return none if x is None else fmt.format(x)


def _level_family(level: str) -> str:
    if level in SGEMM_MODULES:
        return "sgemm"
    if level in HGEMM_MODULES:
        return "hgemm"
    raise ValueError(f"unknown level {level!r}: one of {', '.join(ALL_LEVELS)}")


def _previous(level: str) -> str | None:
    fam = SGEMM_LEVELS if level in SGEMM_MODULES else HGEMM_LEVELS
    i = fam.index(level)
    return fam[i - 1] if i else None


def _moved(a, b, tol=0.05) -> str:
    if a is None or b is None:
        return "?"
    r = a / b if b else float("inf")
    return f"{r:.3f}×" + (" (moved)" if abs(r - 1) > tol else "")


def explain(level_name: str, card_: Card | str | None = None, measured_ms=None, n=4096) -> str:
    """The three ledgers of one level as text, what moved from the previous level, and the
    predicted speedup next to the measured one.

    measured_ms: None, a float (this level's time at size n), or a dict {level: ms} — with
    the previous level's time in it, the measured speedup is printed too.
    """
    level = level_name.lower()
    fam = _level_family(level)
    c = card(card_)
    M, N, K = (n, n, n) if isinstance(n, int) else n
    ms = measured_ms.get(level) if isinstance(measured_ms, Mapping) else measured_ms
    prev = _previous(level)
    prev_ms = measured_ms.get(prev) if isinstance(measured_ms, Mapping) and prev else None
    out = [f"== {level} on {c.name}, M=N=K={M}" if M == N == K else f"== {level} on {c.name}, {M}×{N}×{K}"]

    bl = bytes_ledger(level, c, (M, N, K))
    out.append("bytes ledger")
    out.append(f"  FLOPs {bl.flops:.4g}; DRAM bytes {bl.dram_bytes:.4g} ({bl.model})")
    out.append(f"  intensity {bl.intensity:.3f} FLOP/byte; roofline {1e3 * bl.roofline_s:.3f} ms "
               f"({bl.bound}-bound: bytes {1e3 * bl.t_bytes:.3f} ms at {c.bandwidth / 1e12:.2f} TB/s, "
               f"FLOPs {_f(bl.t_flops and 1e3 * bl.t_flops, '{:.3f}')} ms)")
    if ms:
        out.append(f"  measured {ms:.3f} ms = {bl.flops / ms / 1e9:.1f} TFLOPS; attainment "
                   f"{bl.attainment(ms / 1e3):.1f}% of the roofline"
                   + (("  (>100% on a memory roof: its bytes come from L1/L2, not DRAM)"
                       if bl.bound == "memory" else
                       "  (>100% on a compute roof: faster than the ceiling this card record uses)")
                      if bl.attainment(ms / 1e3) > 100 else ""))

    if fam == "hgemm":
        t, src = htile(level, n=(M, N, K), l2_bytes=c.l2_bytes)
        out.append(f"  tile {t.bm}×{t.bn}×{t.bk}, launch order {t.raster} ({src})")
        lg = l2_ledger(level, (M, N, K), c)
        out.append(f"  L2 model: DRAM {lg.dram_bytes / 1e9:.3f} GB (ideal {lg.ideal_bytes / 1e9:.3f}, "
                   f"no reuse {lg.per_tile_bytes / 1e9:.3f}); " + "; ".join(lg.notes))
        if lg.working_set:
            out.append(f"  super-tile working set (SM·BM + SN·BN)·K·2 = {lg.working_set / 1e6:.1f} MB "
                       f"vs L2 {c.l2_bytes / 1e6:.1f} MB")
        out.append("requests ledger: n/a: tensor-core level (tiles move as 16-byte cp.async / TMA "
                   "boxes, every warp load is fully coalesced by construction)")
        out.append("cycles ledger: n/a: tensor-core level (the limit is the mma.sync pipe and "
                   "the pipeline depth, not LDS prices; see the SASS census)")
        if prev:
            pb = bytes_ledger(prev, c, (M, N, K))
            pl = l2_ledger(prev, (M, N, K), c)
            out.append(f"moved from {prev}: intensity {_moved(bl.intensity, pb.intensity)}, "
                       f"modelled DRAM bytes {_moved(pl.dram_bytes, lg.dram_bytes)}")
        if ms and prev_ms:
            out.append(f"measured {prev}/{level} = {prev_ms / ms:.3f}×")
        return "\n".join(out)

    g, gsrc = geometry(level)
    out.append(f"  geometry: block {g.block[0]}×{g.block[1]}, tile {g.tile_m}×{g.tile_n}×{g.tile_k}, "
               f"{g.thread_m}×{g.thread_n} outputs/thread ({gsrc})")
    rl = request_ledger(level, (M, N, K), g)
    out.append("requests ledger (one warp, 128-byte segments / 32-byte sectors)")
    for arr, (rpl, lpf) in rl.by_array().items():
        out.append(f"  {arr}: {rpl:.2f} requests per warp load, {lpf:.4f} loads per FMA")
    out.append(f"  total {rl.requests_per_fma:.4f} requests per FMA, {rl.sectors_per_fma:.4f} sectors per FMA")
    if level == "k1":
        out.append("  " + stride_view(N, g))

    cl = cycle_ledger(level, c, (M, N, K), g)
    out.append(f"cycles ledger (SM cycles per warp instruction; prices: {c.costs_source or 'not measured on this card'})")
    for kind, v in sorted(cl.per_fma.items()):
        price, priced_as = cl.cost(kind)
        p = "not measured on this card" if price is None else (
            f"× {price:.3f} = {v * price:.4f}" + (f" (priced as {priced_as})" if priced_as != kind else ""))
        out.append(f"  {kind:16s} {v:.4f} per FMA  {p}   [{kind_name(kind)}]")
    for kind, v in sorted(cl.stores_per_fma.items()):
        out.append(f"  {kind:16s} {v:.4f} per FMA  (shared store: counted, not priced)")
    if cl.cycles_per_fma is None:
        out.append(f"  total: not measured on this card (missing: {', '.join(cl.missing)})")
    else:
        out.append(f"  total {cl.cycles_per_fma:.3f} cycles per FMA (shared {cl.shared_cycles:.3f} + "
                   f"global {cl.global_cycles:.3f}); shared loads per 8 FMAs {8 * cl.shared_cycles:.2f}, "
                   f"per 32 FMAs {32 * cl.shared_cycles:.1f}; FFMA floor {cl.ffma_floor:.2f}")
        t = cl.predicted_s(M, N, K)
        out.append(f"  cycle-ledger time {1e3 * t:.3f} ms at {c.clock_ghz:.2f} GHz × {c.sms} SMs"
                   + (f" (measured {ms:.3f} ms)" if ms else ""))

    if prev:
        pb = bytes_ledger(prev, c, (M, N, K))
        pr = request_ledger(prev, (M, N, K))
        pc = cycle_ledger(prev, c, (M, N, K))
        out.append(f"moved from {prev}: intensity {_moved(bl.intensity, pb.intensity)}; "
                   f"requests/FMA {_moved(pr.requests_per_fma, rl.requests_per_fma)}; "
                   f"load instructions/FMA {_moved(pr.loads_per_fma + sum(v for k, v in pc.per_fma.items() if k.startswith('lds')), rl.loads_per_fma + sum(v for k, v in cl.per_fma.items() if k.startswith('lds')))}; "
                   f"cycles/FMA {_moved(pc.cycles_per_fma, cl.cycles_per_fma)}")
        sp = predicted_speedup(pc, cl)
        line = f"predicted {prev}->{level} speedup (cycles ledger): {_f(sp, '{:.3f}×', 'not measured on this card')}"
        if ms and prev_ms:
            meas = prev_ms / ms
            line += f"; measured {meas:.3f}×"
            if sp:
                miss = 100 * (meas / sp - 1)
                line += f" ({miss:+.0f}% vs prediction)"
        out.append(line)
    return "\n".join(out)


def markdown_tables(card_: Card | str | None = None, n=4096, measured_ms: Mapping | None = None,
                    levels: Sequence[str] = ALL_LEVELS) -> str:
    """The ledgers of every level as Markdown tables (docs/LADDER.md is built from these)."""
    c = card(card_)
    M = N = K = n
    meas = measured_ms or {}
    pending = f"{c.name}: to be measured" if c.name == "H200" else "—"
    out = [f"Ledgers at M=N=K={n} on {c.name} (bandwidth {c.bandwidth / 1e12:.2f} TB/s, "
           f"FP32 {c.fp32_flops / 1e12:.1f} TFLOPS"
           + (f", tensor {c.tensor_flops / 1e12:.0f} TFLOPS" if c.tensor_flops else "")
           + f"; prices: {c.costs_source or 'not measured on this card'}).", ""]
    out += ["| level | reuse tile | FLOPs | DRAM bytes | intensity (FLOP/B) | roofline ms | bound | measured ms | attainment |",
            "|---|---|---|---|---|---|---|---|---|"]
    for lv in levels:
        bl = bytes_ledger(lv, c, n)
        m = meas.get(lv)
        out.append(f"| {lv} | {bl.reuse_tile[0]}×{bl.reuse_tile[1]} | {bl.flops:.3g} | {bl.dram_bytes:.3g} | "
                   f"{bl.intensity:.3f} | {1e3 * bl.roofline_s:.3f} | {bl.bound} | "
                   f"{_f(m, '{:.3f}', pending)} | "
                   f"{_f(m and bl.attainment(m / 1e3), '{:.1f}%', '—')} |")
    out.append("")
    sg = [lv for lv in levels if lv in SGEMM_MODULES]
    if sg:
        out += ["| level | A: requests/load | B: requests/load | loads/FMA | requests/FMA | sectors/FMA |",
                "|---|---|---|---|---|---|"]
        for lv in sg:
            rl = request_ledger(lv, n)
            ba = rl.by_array()
            out.append(f"| {lv} | {ba['A'][0]:.2f} | {ba['B'][0]:.2f} | {rl.loads_per_fma:.4f} | "
                       f"{rl.requests_per_fma:.4f} | {rl.sectors_per_fma:.4f} |")
        out.append("")
        kinds = sorted({k for lv in sg for k in cycle_ledger(lv, c, n).per_fma})
        head = " | ".join(kinds)
        out += [f"| level | {head} | cycles/FMA | predicted speedup | measured speedup |",
                "|---|" + "---|" * (len(kinds) + 3)]
        prev = None
        for lv in sg:
            cl = cycle_ledger(lv, c, n)
            cells = []
            for k in kinds:
                v = cl.per_fma.get(k)
                cells.append("—" if v is None else f"{v:.4f}")
            sp = predicted_speedup(cycle_ledger(prev, c, n), cl) if prev else None
            ms_sp = (meas[prev] / meas[lv]) if prev and meas.get(prev) and meas.get(lv) else None
            out.append(f"| {lv} | " + " | ".join(cells) +
                       f" | {_f(cl.cycles_per_fma, '{:.3f}', 'not measured on this card')} | "
                       f"{_f(sp, '{:.3f}×', '—')} | {_f(ms_sp, '{:.3f}×', '—' if not prev else pending)} |")
            prev = lv
        out.append("")
        priced = sorted({k for lv in sg for k in cycle_ledger(lv, c, n).per_fma})
        out.append("Prices (SM cycles per warp instruction): " + ", ".join(
            f"{k} {_f(c.price(k)[0], '{:.3f}', 'not measured on this card')}" for k in priced))
        out.append("")
    hg = [lv for lv in levels if lv in HGEMM_MODULES]
    if hg:
        out += ["| level | tile BM×BN×BK | launch order | A reads | B reads | DRAM GB (L2 model) | no-reuse GB | super-tile working set |",
                "|---|---|---|---|---|---|---|---|"]
        for size in sorted({n, 8192}):
            for lv in hg:
                lg = l2_ledger(lv, size, c)
                t = lg.tile
                out.append(f"| {lv} @{size} | {t.bm}×{t.bn}×{t.bk} | {t.raster}"
                           + (f" {t.super_m}×{t.super_n}" if t.raster == "super" else "")
                           + f" | {lg.a_reads}× | {lg.b_reads}× | {lg.dram_bytes / 1e9:.3f} | "
                           f"{lg.per_tile_bytes / 1e9:.3f} | "
                           + (f"{lg.working_set / 1e6:.1f} MB" if lg.working_set else "—") + " |")
        out.append("")
    return "\n".join(out)


def check_modules(n=4096) -> list[str]:
    """Compare each SGEMM module's constants with the seed's geometry; '' lines mean agreement."""
    report = []
    for lv in SGEMM_LEVELS:
        g, src = geometry(lv)
        report.append(f"{lv}: {src}")
    for lv in HGEMM_LEVELS:
        t, src = htile(lv)
        report.append(f"{lv}: {src}")
    return report


if __name__ == "__main__":  # pragma: no cover - a quick look
    import sys

    name = sys.argv[1] if len(sys.argv) > 1 else "rtx4090"
    print(markdown_tables(name))
