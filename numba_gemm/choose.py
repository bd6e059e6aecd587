"""level="auto" as a cost model: rank the levels that can serve a shape by predicted time.

For a level with output tile bm × bn and a K split S (1 for most levels; the split-K levels
say theirs through `plan_splits`), a shape M × N × K gives

    ctas   = ceil(M / bm) · ceil(N / bn) · S              the CTAs of the launch
    slots  = sms · blocks_per_sm                          CTAs resident at once
    waves  = ceil(ctas / slots)
    t_mma  = waves · slots · (2 · bm · bn · K / S) / rate    every slot of every wave priced,
                                                          padding rows and idle SMs included
    t_mem  = bytes / (bandwidth · bw_eff)                 A, B, C once (+ C read when beta != 0),
                                                          + the split partials written and read
    busy   = max(t_mma, t_mem) + (1 - overlap) · min(t_mma, t_mem)
    t      = t0 + slow · busy  (+ the reduction launch's t0 when S > 1)

with t_mma's waves after the first priced (1 + power_drop) times as long: the H200 is
power-bound, and a tensor-core launch that keeps every SM busy wave after wave runs at a lower
clock than its first wave (v11, v12 and v13 read 1455-1545 MHz after their turns at 8192³, in
the median of 8 rounds, and 1980 at 2048³: docs/data/h200_hopper_top.json). The FFMA levels
keep their clock (k8 and k9 read 1980 MHz at 8192³: h200_k9_async_b.json), so the fp32 levels
are fitted without it.

A split-K level that plans one slice on its parent's tile runs its parent's kernel (k8sk at
S = 1 is k8) and is priced with its parent's constants.

A stream-K level (k9st: `stream_plan`) shares the K tiles of its last waves evenly over the
resident CTAs, so where it streams its waves are not rounded up: t_mma prices ctas / slots
waves, the work itself. Where its plan has no stream part it runs its parent's kernel, priced
as the parent.

A level that reduces its slices inside the GEMM kernel (SPLIT_IN_KERNEL = True: v11sl, whose
slices add through distributed shared memory) pays neither the partials' bytes nor the second
launch. Such a level's run() also lowers S until all its clusters are resident at once (the
driver's count for the kernel, splitk.resident_splits); the model prices the split the SMs
alone give, as it has no kernel to ask. The two differ only where clusters of 3 or more CTAs
fill fewer SMs than the grid needs (on an H100: N ≤ 2048 at M ≤ 256, docs/RESULTS.md,
thirty-seventh run).

`overlap` says how much of the shorter term hides under the longer: 1 for a kernel whose
epilogue runs while the tensor cores work on the next tile (v13's persistent grid with its TMA
store), 0 for one whose CTAs compute, then write, with nothing else on the SM meanwhile. It
matters where both terms are close, e.g. short K, where writing C costs as much as the math.

`slow` is 1 where every row of A, B and C starts on a 16-byte boundary (`aligned`), else the
level's `ragged_slowdown`: rows TMA and 16-byte vector loads cannot take send a level down its
edge path (narrower loads), a different speed the tile arithmetic cannot see.

`rate` (FLOP/s of the whole GPU when every slot is busy, in the first wave), `t0` (the fixed
cost of a launch: fill, drain, epilogue), `blocks_per_sm`, `bw_eff`, `overlap`, `power_drop` and
`ragged_slowdown` are per level and per input type, in
numba_gemm/data/h200_auto.json: fitted to the shape suite's measurements
(tools/calibrate_auto.py reads a `bench.py --suite shapes --json` run), not written by hand.
A level with no calibration is ranked after those with one, in ladder order (highest first),
so a new level runs under auto only once it has been measured.

Tiles: a level whose module lists TILE_CHOICES (v11, v13: bm × bn from one source) is also
ranked as (level, tile) pairs by `rank(..., tiles=True)`, each tile other than the shipped one
under its own calibration entry, named as tools/hopper_top.py names it ("v11:bm=64:bn=128"), and
predicted from its own tile's waves (and, for a split-K level, the split its plan_splits gives
that tile) with those constants. `candidates()`, what gemm(), plan()
and the shape suite read, ranks the calibrated tiles among the levels (auto then runs the
level with that tile's run() keywords); a tile without its entry is listed, never run
(explain() shows what v11's constants would give it).
"""
from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import registry as _levels
from .runtime import driver
from .runtime.operands import as_dtype
from .util import ceil_div

CALIBRATION = Path(__file__).resolve().parent / "data" / "h200_auto.json"
DEFAULT_SMS = 132
DEFAULT_BANDWIDTH = 4.133e12


@dataclass(frozen=True)
class Geometry:
    """What the model needs of a level at a shape: its output tile and its K split, whether
    its slices reduce inside the kernel (no partials in memory, no second launch), whether
    it shares its last waves out by stream-K (no partly empty wave), and whether one resident
    grid walks the tiles (persistent: a wave is a round of tiles, priced alike)."""
    bm: int
    bn: int
    splits: int = 1
    in_kernel: bool = False
    streamed: bool = False
    persistent: bool = False

    @property
    def launches(self) -> int:
        return 2 if self.splits > 1 and not self.in_kernel else 1

    @property
    def partials(self) -> bool:
        """Whether S > 1 partial products go through memory (written, then read back)."""
        return self.launches == 2


def geometry(lv, M: int, N: int, K: int, sms: int = DEFAULT_SMS, kwargs: tuple = ()) -> Geometry:
    """The level's tile and split at this shape, from its module's own facts: plan_splits()
    (split-K levels: a split count, or (tile, splits)), else tile_for(M, N), GEOMETRY (SGEMM) or
    CONFIG (HGEMM). kwargs: one of its TILE_CHOICES as run() keywords (bm=, bn=, and others the
    tile's waves do not depend on), which a split-K level plans its split for."""
    mod = lv.module
    persistent = bool(getattr(mod, "PERSISTENT", False))
    tile, splits = None, 1
    plan = getattr(mod, "plan_splits", None)
    if plan is not None:
        got = plan(M, N, K, sms=sms, **dict(kwargs))
        tile, splits = got if isinstance(got, tuple) else (None, got)
    elif kwargs:
        kw = dict(kwargs)
        return Geometry(kw["bm"], kw["bn"], persistent=persistent)
    if tile is None:
        at = getattr(mod, "tile_for", None)        # a tile that depends on the shape (k8sk: N ≤ 64)
        tile = at(M, N) if at else getattr(mod, "GEOMETRY", None) or getattr(mod, "CONFIG")
    bm = getattr(tile, "tile_m", None) or tile.bm
    bn = getattr(tile, "tile_n", None) or tile.bn
    stream = getattr(mod, "stream_plan", None)
    streamed = stream is not None and stream(M, N, K, slots=sms * mod.CTAS_PER_SM).streams
    return Geometry(int(bm), int(bn), int(splits), bool(getattr(mod, "SPLIT_IN_KERNEL", False)), streamed,
                    persistent)


def _one_slice_parent(lv, g: Geometry, M: int, N: int, K: int, sms: int) -> str | None:
    """The parent's name where a split-K level plans one slice on its parent's tile (or a
    stream-K level no stream part), else None. There it runs its parent's kernel over all of K
    (k8sk at S = 1 is k8), so it is priced with the parent's constants: its own are fitted mostly
    where it splits, and would price the same kernel twice, differently (k8sk above k9 at 2048³,
    where k9 is 5 % faster)."""
    parent = _levels.registry().get(getattr(lv.module, "PARENT", ""))
    plans = any(hasattr(lv.module, hook) for hook in ("plan_splits", "stream_plan"))
    if g.splits != 1 or g.streamed or not plans or parent is None:
        return None
    if getattr(parent.module, "plan_splits", None) is not None:
        return None
    p = geometry(parent, M, N, K, sms)
    return parent.name if (p.bm, p.bn) == (g.bm, g.bn) else None


def as_planned(lv, M: int, N: int, K: int, splits: int | None) -> bool:
    """Whether a measurement made with `splits` (None: not recorded) is of the level as it now
    plans M×N×K: one taken at another K split, or at a shape the level now refuses, describes a
    level that no longer exists. A stream-K level counts only where its plan has a stream part:
    elsewhere it is priced as its parent, and a time taken under an older plan may have streamed."""
    if lv.unsupported(M, N, K) is not None:
        return False
    g = geometry(lv, M, N, K)
    if hasattr(lv.module, "stream_plan") and not g.streamed:
        return False
    return splits in (None, g.splits)


def _load(path=CALIBRATION) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {"levels": {}}


_calibration = None


def calibration() -> dict:
    global _calibration
    if _calibration is None:
        _calibration = _load()
    return _calibration


def params(level: str, dtype) -> dict | None:
    """The fitted constants of `level` for input dtype, or None when it has none."""
    return calibration().get("levels", {}).get(level, {}).get(as_dtype(dtype).name)


@dataclass(frozen=True)
class Prediction:
    level: str
    ms: float | None          # None: no calibration for this level and dtype
    geometry: Geometry
    why: str
    kwargs: tuple = ()        # run() keywords of a tile other than the shipped one: (("bm", 64), ...)

    @property
    def name(self) -> str:
        """The level, or the level with its tile as hopper_top specs say it: v11:bm=64:bn=128."""
        return _levels.spec_name(self.level, self.kwargs)

    def line(self, width: int = 6) -> str:
        """The name left-aligned in `width` columns, the predicted time, why."""
        t = f"{self.ms * 1e3:8.1f} µs" if self.ms is not None else "   (not calibrated)"
        return f"{self.name:<{width}} {t}  {self.why}"

    __str__ = line


def aligned(N: int, K: int, elem_bytes: int) -> bool:
    """Whether every row of A (K elements), B (N) and the float32 C (N) is a whole number of
    16-byte units, so each row starts where TMA and 16-byte vector loads can take it."""
    return (K * elem_bytes) % 16 == 0 and (N * elem_bytes) % 16 == 0 and (N * 4) % 16 == 0


def _terms(g: Geometry, M: int, N: int, K: int, elem_bytes: int, beta: float, sms: int,
           blocks_per_sm: int) -> tuple[float, float, float, int, int, int]:
    """(FLOPs the slots are priced for, bytes read, bytes written, launches, CTAs, slots) at
    geometry g."""
    ctas = ceil_div(M, g.bm) * ceil_div(N, g.bn) * g.splits
    slots = sms * blocks_per_sm
    waves = ctas / slots if g.streamed else ceil_div(ctas, slots)
    priced = waves * slots * 2.0 * g.bm * g.bn * K / g.splits
    part = 4 * M * N * g.splits if g.partials else 0            # the partials, written then read
    read = (M * K + K * N) * elem_bytes + (4 * M * N if beta else 0) + part
    return priced, read, 4 * M * N + part, g.launches, ctas, slots


def _later_waves(ctas: int, slots: int) -> float:
    """The share of the priced waves that come after the first (0 for one wave)."""
    return 1.0 - 1.0 / max(ceil_div(ctas, slots), 1)


def predict_ms(p: dict, g: Geometry, M: int, N: int, K: int, elem_bytes: int, beta: float = 0.0,
               sms: int = DEFAULT_SMS, bandwidth: float = DEFAULT_BANDWIDTH) -> tuple[float, str]:
    """(predicted ms, a one-line account) for constants p at geometry g (the module docstring)."""
    priced, read, written, launches, ctas, slots = _terms(g, M, N, K, elem_bytes, beta, sms,
                                                          p["blocks_per_sm"])
    t_mma = priced / (p["tflops"] * 1e12) * (1.0 + p.get("power_drop", 0.0) * _later_waves(ctas, slots))
    t_mem = read / (bandwidth * p["bw_eff"]) + written / (bandwidth * p.get("write_eff", p["bw_eff"]))
    slow = 1.0 if aligned(N, K, elem_bytes) else p.get("ragged_slowdown", 1.0)
    busy = max(t_mma, t_mem) + (1.0 - p.get("overlap", 1.0)) * min(t_mma, t_mem)
    t = p["t0_us"] * 1e-6 * launches + slow * busy
    waves = ceil_div(ctas, slots)
    split = f", split {g.splits}{' reduced in the kernel' * g.in_kernel}" if g.splits > 1 else ""
    split += f", ragged rows x{slow:.2f}" if slow != 1.0 else ""
    # a persistent grid launches its resident CTAs once, and they walk the tiles in rounds
    unit, wave = ("tile", "round") if g.persistent else ("CTA", "wave")
    if g.streamed:
        spread = (f"{ctas} tile{'s' * (ctas != 1)} streamed: {ctas / slots:.2f} waves of work shared evenly "
                  f"over {slots} ({sms} SMs × {p['blocks_per_sm']} fitted)")
    else:
        spread = (f"{ctas} {unit}{'s' * (ctas != 1)} in {waves} {wave}{'s' * (waves != 1)} of {slots} "
                  f"({sms} SMs × {p['blocks_per_sm']} fitted; {100 * ctas / (waves * slots):.0f} % full)")
    if p.get("power_drop") and _later_waves(ctas, slots):
        spread += f", the {wave}s after the first {1 + p['power_drop']:.2f}x as long (the clock)"
    why = f"{g.bm}x{g.bn} tiles{split}: {spread}, {'compute' if t_mma >= t_mem else 'memory'}-bound"
    return t * 1e3, why


def tile_choices(lv) -> list[tuple[tuple, object]]:
    """(run() keywords, tile) of each tile of lv's TILE_CHOICES other than its shipped CONFIG.
    An entry is a tile (run(bm=, bn=)) or a pair (tile, {more run() keywords}), as v13's pair
    of CTAs along N (along_n=1)."""
    choices = getattr(lv.module, "TILE_CHOICES", ())
    if not choices:
        return []

    def keywords(choice):
        t, more = choice if isinstance(choice, tuple) else (choice, {})
        return (("bm", t.bm), ("bn", t.bn)) + tuple(more.items()), t

    shipped = keywords(lv.module.CONFIG)[0]
    return [kt for kt in map(keywords, choices) if kt[0] != shipped]


def _tile_predictions(lv, dtype, M: int, N: int, K: int, beta: float, sms: int) -> list[Prediction]:
    """lv's other tiles at this shape: priced with their own calibration entry when it exists;
    otherwise not ranked, the why saying what lv's own constants would predict."""
    out = []
    shipped = params(lv.name, dtype)
    for kwargs, t in tile_choices(lv):
        g = geometry(lv, M, N, K, sms, kwargs)
        p = params(_levels.spec_name(lv.name, kwargs), dtype)
        if p is not None:
            ms, why = predict_ms(p, g, M, N, K, dtype.itemsize, beta, sms)
            out.append(Prediction(lv.name, ms, g, why, kwargs))
            continue
        if shipped is None:
            why = f"{t.bm}x{t.bn} tiles: {ceil_div(M, t.bm) * ceil_div(N, t.bn)} CTAs"
        else:
            ms, why = predict_ms(shipped, g, M, N, K, dtype.itemsize, beta, sms)
            why += f"; {ms * 1e3:.1f} µs with {lv.name}'s constants"
        out.append(Prediction(lv.name, None, g, why, kwargs))
    return out


def rank(dtype, M: int, N: int, K: int, native: bool, beta: float = 0.0,
         sms: int = DEFAULT_SMS, opted_out: bool = False, tiles: bool = False) -> list[Prediction]:
    """Every level that takes dtype and serves M×N×K here (native: whether native levels can
    run; opted_out: the levels with AUTO = False too), fastest predicted first; uncalibrated
    levels last, highest rung first. tiles: also each (level, tile) pair of the levels with
    TILE_CHOICES (a Prediction with kwargs), ranked among the levels once calibrated, else
    listed after every level."""
    dtype = as_dtype(dtype)
    out, pending, as_parent = [], [], set()
    for lv in reversed(list(_levels.registry().values())):
        if dtype not in lv.dtypes or not (opted_out or getattr(lv.module, "AUTO", True)):
            continue
        if lv.native and not native:
            continue
        if lv.unsupported(M, N, K) is not None:
            continue
        g = geometry(lv, M, N, K, sms)
        parent = _one_slice_parent(lv, g, M, N, K, sms)
        p = params(lv.name, dtype) if parent is None else params(parent, dtype)
        if tiles:
            pending += _tile_predictions(lv, dtype, M, N, K, beta, sms)
        if p is None:
            out.append(Prediction(lv.name, None, g, "no calibration for this level and dtype"))
            continue
        ms, why = predict_ms(p, g, M, N, K, dtype.itemsize, beta, sms)
        if parent is not None:
            how = "no stream part" if hasattr(lv.module, "stream_plan") else f"one slice on {parent}'s tile"
            why += f"; {how}: {parent}'s kernel, priced with {parent}'s constants"
            as_parent.add(lv.name)
        out.append(Prediction(lv.name, ms, g, why))
    # stable: uncalibrated keep ladder order (highest first) after the calibrated ones, and
    # uncalibrated tiles after every level; a level priced as its parent follows the parent it
    # ties with (k9sk at one slice runs k9: auto names k9)
    out += [q for q in pending if q.ms is not None]
    return sorted(out, key=lambda q: (q.ms is None, q.ms if q.ms is not None else 0.0, q.level in as_parent)) + \
        [q for q in pending if q.ms is None]


def candidates(dtype, M: int, N: int, K: int, native: bool, beta: float = 0.0,
               sms: int = DEFAULT_SMS) -> list[Prediction]:
    """What auto may run here, best first: rank() with the calibrated tiles of the levels that
    have TILE_CHOICES among the levels; a tile without its calibration entry is never run."""
    return [q for q in rank(dtype, M, N, K, native, beta, sms, tiles=True) if not q.kwargs or q.ms is not None]


# ---------------------------------------------------------------------------- what auto runs here
# The Levels gemm() and plan() try in order (numba_gemm.api), and the error when none serves.

_F32 = np.dtype(np.float32)
_native_ok: dict = {}


def native_usable(device: int) -> bool:
    """Whether the native levels can run on `device`: a real GPU of the architecture NVRTC
    compiles them for."""
    ok = _native_ok.get(device)
    if ok is None:
        from numba import cuda

        from .runtime.nvrtc import DEFAULT_ARCH

        with driver.on_device(device), cuda.gpus[device]:
            ok = driver.device_arch() == DEFAULT_ARCH
        _native_ok[device] = ok
    return ok


def auto_candidates(dtype, M: int, N: int, K: int, native: bool) -> list:
    """The levels auto may pick for this dtype and shape, best first: fastest predicted by the
    cost model (a calibrated tile of v11 as the Level variant that runs it, e.g.
    v11:bm=64:bn=64), then the uncalibrated ones highest rung first. native: whether native
    levels can run here."""
    return [_levels.get(q.level).variant(q.kwargs) for q in candidates(dtype, M, N, K, native)]


def simulator_candidates(dtype, M, N, K) -> list:
    """In the simulator, when auto's ranking has nothing that runs (fp16/bf16: only native
    levels rank), the Numba levels that take the dtype and serve the shape, AUTO = False ones
    included (v8py and v11py stay out of auto on a GPU because native levels run there),
    ranked as auto ranks: the calibrated first."""
    return [_levels.get(q.level) for q in rank(dtype, M, N, K, native=False, opted_out=True)]


def no_level(dtype, M, N, K, native, c_dtype=_F32) -> ValueError:
    """The error when no level serves this dtype, C dtype and shape here: it names the levels
    that take (or write) it and, where native levels cannot run, the Numba levels auto leaves
    out, which run when named."""
    if c_dtype != _F32:
        writers = [lv.name for lv in _levels.registry().values() if lv.writes(c_dtype, dtype)]
        return ValueError(f"no level writes {c_dtype.name} C for M={M}, N={N}, K={K} here (levels "
                          f"that write it: {', '.join(writers) or 'none'}; "
                          f"{'the native levels need a GPU of arch sm_90a; ' if not native else ''}"
                          "a float32 C is served by every level)")
    takers = [lv.name for lv in _levels.registry().values() if np.dtype(dtype) in lv.dtypes]
    why = ""
    if not native:
        why = " (the native levels need a GPU of arch sm_90a"
        named = [lv.name for lv in _levels.registry().values() if np.dtype(dtype) in lv.dtypes
                 and not lv.native and not getattr(lv.module, "AUTO", True)
                 and lv.unsupported(M, N, K) is None]
        if named:        # Numba levels auto leaves out on a GPU: they run here when named
            why += "; " + ", ".join(f"level={n!r}" for n in named) + " is a Numba level: name it to run it"
        why += ")"
    return ValueError(f"no level serves {np.dtype(dtype).name} M={M}, N={N}, K={K} here{why}; "
                      f"levels taking {np.dtype(dtype).name}: {', '.join(takers) or 'none'}")


def explain(dtype, M: int, N: int, K: int, native: bool, beta: float = 0.0, top: int = 3) -> str:
    """Auto's choice for this shape and the runners-up, with predicted times and why."""
    ranked = candidates(dtype, M, N, K, native, beta)
    if not ranked:
        return f"no level serves {as_dtype(dtype).name} {M}x{N}x{K} here"
    shown = ranked[:top]
    others = other_tiles([q.level for q in shown], dtype, M, N, K, native, beta)
    width = max(len(q.name) for q in shown + others)          # one column of names
    lines = [f"auto for {as_dtype(dtype).name} {M}x{N}x{K}: {ranked[0].name}"]
    lines += [("  -> " if i == 0 else "     ") + q.line(width) for i, q in enumerate(shown)]
    lines += wave_notes([q.level for q in shown if q.ms is not None and not q.kwargs], dtype, M, N, K)
    if others:
        lines += ["  other tiles (not calibrated: auto runs a tile once its calibration entry, named as "
                  "below, exists):"] + ["     " + q.line(width) for q in others]
    return "\n".join(lines)


def other_tiles(levels, dtype, M: int, N: int, K: int, native: bool, beta: float = 0.0) -> list:
    """The other tiles of the shown levels that have TILE_CHOICES, as rank(tiles=True) lists them
    (Predictions without a time)."""
    shown = set(levels)
    return [q for q in rank(dtype, M, N, K, native, beta, tiles=True)
            if q.kwargs and q.ms is None and q.level in shown]


# ---------------------------------------------------------------------------- waves
# One launch in waves: explain() prints them (wave_notes), the ledgers price them on a card
# (numba_gemm.explain.ledgers.waves), so they live here, below both.

@dataclass(frozen=True)
class Waves:
    """One launch against the SMs, counted two ways.

    resident: the CTAs the SMs hold at once, sms × ctas_per_sm, ctas_per_sm the level's own
    launch bound (None where the level fixes none). auto_slots: what auto's cost model counts
    as one wave, sms × its fitted blocks_per_sm, a constant fitted to measured times, not an
    occupancy (None where the level has no calibration). A wave of either is that many CTAs at
    once; both price every slot of every wave, so where ceil(ctas / resident) · resident equals
    ceil(ctas / auto_slots) · auto_slots the two counts price the same work."""
    level: str
    ctas: int
    sms: int
    ctas_per_sm: int | None
    auto_blocks_per_sm: int | None

    @property
    def resident(self) -> int | None:
        return self.sms * self.ctas_per_sm if self.ctas_per_sm else None

    @property
    def auto_slots(self) -> int | None:
        return self.sms * self.auto_blocks_per_sm if self.auto_blocks_per_sm else None

    @staticmethod
    def rounds(ctas: int, slots: int) -> int:
        return -(-ctas // slots)


def ctas_per_sm(lv, shape: tuple[int, int, int] | None = None) -> int | None:
    """CTAs one SM holds by the level's launch bounds: resident_ctas(M, N, K) of a level whose
    kernel depends on the shape (v11gv, k8sk), else CTAS_PER_SM, or the warp-tiled levels'
    launch bounds (k7, k8, k9: _warptile.blocks_per_sm of their TILING); None where the level fixes none."""
    mod = lv.module
    if shape is not None and hasattr(mod, "resident_ctas"):
        return mod.resident_ctas(*shape)
    n = getattr(mod, "CTAS_PER_SM", None)
    warptile = getattr(mod, "_warptile", None)
    if n is None and warptile is not None and hasattr(mod, "TILING"):
        n = warptile.blocks_per_sm(mod.TILING)
    return n


def waves(lv, M: int, N: int, K: int, sms: int = DEFAULT_SMS, dtype="float32") -> Waves:
    """The level's CTAs at M×N×K (its tile and K split, as auto sees them), the CTAs the SMs
    hold by its launch bounds, and auto's fitted slots per wave."""
    g = geometry(lv, M, N, K, sms=sms)
    ctas = ceil_div(M, g.bm) * ceil_div(N, g.bn) * g.splits
    p = params(lv.name, dtype)
    return Waves(lv.name, ctas, sms, ctas_per_sm(lv, (M, N, K)), p["blocks_per_sm"] if p else None)


def wave_notes(levels, dtype, M: int, N: int, K: int) -> list[str]:
    """How the "N waves of S" above relate to the CTAs the SMs hold: auto's S is SMs × a
    blocks_per_sm fitted to measured times (a constant of the cost model, not an occupancy);
    a level whose launch bounds fix its CTAs per SM (k7, k8, ...) holds SMs × that many at once,
    and both counts price every slot of every wave, so where the slots agree they price the
    same work. One line for the model, one per such level."""
    out = []
    for name in levels:
        w = waves(_levels.get(name), M, N, K, dtype=as_dtype(dtype).name)
        if w.resident is None or w.auto_slots is None:
            continue
        r, a = Waves.rounds(w.ctas, w.resident), Waves.rounds(w.ctas, w.auto_slots)
        same = "the same" if r * w.resident == a * w.auto_slots else "not the same"
        out.append(f"     {name}: {w.ctas_per_sm} CTAs per SM by its launch bounds = {w.resident} resident: "
                   f"{r} wave{'s' * (r != 1)} of {w.resident} = {r * w.resident} slots, {same} as "
                   f"auto's {a} of {w.auto_slots} = {a * w.auto_slots}")
    if out:
        out.insert(0, "  a wave above is SMs × the level's fitted blocks_per_sm (a constant of the cost "
                      "model, not an occupancy); against the CTAs the SMs hold:")
    return out


# ---------------------------------------------------------------------------- fitting

# Grids the fit searches (log-spaced rates; the fixed cost in µs; bandwidth efficiency).
_BLOCKS = (1, 2, 3, 4, 6, 8)
_T0_US = tuple(float(x) for x in np.concatenate([np.arange(2, 20, 1), np.arange(20, 80, 4)]))
_BW_EFF = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
_WRITE_EFF = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.95)
_OVERLAP = (0.0, 0.25, 0.5, 0.75, 1.0)
_POWER_DROP = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)   # to about 1980 / 1500 MHz - 1 (the module docstring)


def fit(samples: list[dict], sms: int = DEFAULT_SMS, bandwidth: float = DEFAULT_BANDWIDTH) -> dict:
    """Constants of one level and dtype that minimise the squared log error of predicted
    against measured time over samples ({"M", "N", "K", "elem_bytes", "ms", "geometry"}):
    a grid search, every point of the grid evaluated (no local minimum to get stuck in). The
    aligned shapes fix the four constants; the ragged ones (if any) then fix ragged_slowdown.
    A level measured only on ragged shapes is fitted on those with no slowdown."""
    even = [s for s in samples if aligned(s["N"], s["K"], s["elem_bytes"])]
    ragged = [s for s in samples if not aligned(s["N"], s["K"], s["elem_bytes"])]
    p = _fit_constants(even or ragged, sms, bandwidth)
    if even and ragged:
        # busy time of each ragged shape at slowdown 1; the slowdown that fits them best
        t0 = p["t0_us"] * 1e-6
        meas = np.log([s["ms"] * 1e-3 for s in ragged])
        busy = np.array([predict_ms(p, s["geometry"], s["M"], s["N"], s["K"], s["elem_bytes"], 0.0,
                                    sms, bandwidth)[0] * 1e-3 for s in ragged])
        fixed = t0 * np.array([s["geometry"].launches for s in ragged])
        busy = busy - fixed
        slows = np.geomspace(0.5, 16.0, 101)
        err = np.sum((np.log(fixed[None, :] + slows[:, None] * busy[None, :]) - meas[None, :]) ** 2, axis=1)
        p["ragged_slowdown"] = round(float(slows[np.argmin(err)]), 3)
    preds = np.log([predict_ms(p, s["geometry"], s["M"], s["N"], s["K"], s["elem_bytes"], 0.0, sms,
                               bandwidth)[0] * 1e-3 for s in samples])
    meas = np.log([s["ms"] * 1e-3 for s in samples])
    p["fit_rms_log_error"] = round(float(np.sqrt(np.mean((preds - meas) ** 2))), 4)
    p["samples"] = len(samples)
    return p


def _fit_constants(samples: list[dict], sms: int, bandwidth: float) -> dict:
    """blocks_per_sm, bw_eff, write_eff, overlap, power_drop (16-bit inputs only), tflops and
    t0_us by grid search over samples (slowdown 1). Each block of rate × t0 points is scored on
    every fourth sample first: one whose part already exceeds the best whole error so far cannot
    win and is passed over unscored (the exhaustive search's result, sooner)."""
    meas = np.log([s["ms"] * 1e-3 for s in samples])
    peak = max(2.0 * s["M"] * s["N"] * s["K"] / (s["ms"] * 1e-3) for s in samples)
    rates = peak * np.geomspace(0.9, 2.0, 24)                      # FLOP/s
    t0 = np.array(_T0_US) * 1e-6
    blocks = list(itertools.product(_BW_EFF, _WRITE_EFF, _OVERLAP))
    effs = tuple(np.array(c)[:, None, None] for c in zip(*blocks))   # every block at once: [block, rate, t0]
    drops = _POWER_DROP if samples[0]["elem_bytes"] == 2 else (0.0,)     # FFMA keeps its clock
    best = None
    for bps in _BLOCKS:
        terms = [_terms(s["geometry"], s["M"], s["N"], s["K"], s["elem_bytes"], 0.0, sms, bps)
                 for s in samples]
        priced, read, written, launches = (np.array(c) for c in list(zip(*terms))[:4])
        cols = (priced, read, written, launches, np.array([_later_waves(t[4], t[5]) for t in terms]))
        for drop in drops:
            part = _grid_error(*(c[::4] for c in cols), meas[::4], rates, t0, bandwidth, drop, *effs)
            for (eff, w_eff, ov), low in zip(blocks, part.min(axis=(1, 2))):
                if best is not None and low > best[0] * (1 + 1e-9):
                    continue
                err = _grid_error(*cols, meas, rates, t0, bandwidth, drop, eff, w_eff, ov)
                i, j = np.unravel_index(np.argmin(err), err.shape)
                if best is None or err[i, j] < best[0] - 1e-12:   # a tie keeps the earlier point
                    best = (float(err[i, j]), bps, eff, w_eff, ov, drop, float(rates[i]), float(_T0_US[j]))
    err, bps, eff, w_eff, ov, drop, rate, t0_us = best
    p = {"blocks_per_sm": bps, "bw_eff": eff, "write_eff": w_eff, "overlap": ov, "power_drop": drop,
         "t0_us": t0_us}
    return {**p, "tflops": round(_refined_rate(samples, meas, sms, bandwidth, p, rate) / 1e12, 2)}


def _grid_error(priced, read, written, launches, later, meas, rates, t0, bandwidth, drop, eff, w_eff, ov):
    """The squared log error summed over the samples given (predict_ms's model) at each rate × t0."""
    t_mma = priced[None, :] / rates[:, None] * (1.0 + drop * later)[None, :]     # [rate, sample]
    t_mem = read / (bandwidth * eff) + written / (bandwidth * w_eff)  # [sample] or [block, 1, sample]
    busy = np.maximum(t_mma, t_mem) + (1.0 - ov) * np.minimum(t_mma, t_mem)
    pred = np.log(t0[:, None] * launches[None, :] + busy[..., None, :])
    return np.sum((pred - meas) ** 2, axis=-1)


def _refined_rate(samples, meas, sms, bandwidth, p: dict, rate: float) -> float:
    """The rate between the grid's neighbours of `rate` (3.5 % apart) that fits best, the other
    constants kept: a level whose big shapes sit between two grid rates is otherwise mispriced
    by up to that much everywhere."""
    p = dict(p)
    best = None
    for r in rate * np.geomspace(1 / 1.036, 1.036, 29):
        p["tflops"] = r / 1e12
        pred = np.log([predict_ms(p, s["geometry"], s["M"], s["N"], s["K"], s["elem_bytes"], 0.0, sms,
                                  bandwidth)[0] * 1e-3 for s in samples])
        err = float(np.sum((pred - meas) ** 2))
        if best is None or err < best[0] - 1e-12:
            best = (err, float(r))
    return best[1]
