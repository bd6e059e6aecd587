"""The cards the ledgers price on, loaded from numba_gemm/data only.

data/cards.json holds each card's specification (L2 size, FP32 lanes, tensor ceiling, and for
cards this project has not measured, the figures its source states). A card with a
"measured" file takes its SM count, SM clock, copy bandwidth and load prices from that file,
written by `python -m numba_gemm.measure.microbench --out ...`; nothing here restates those numbers.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from ...sgemm._access import WARP

DATA_DIR = Path(__file__).resolve().parents[2] / "data"   # numba_gemm/data
CARDS_JSON = DATA_DIR / "cards.json"
H200_COSTS = DATA_DIR / "h200_costs.json"

# A kind the card has no price for may be priced as another, as the seed did (it priced
# k2's broadcast A load and coalesced B load alike at 1.94 cycles). The ledger says so
# ("priced as ..."). ldg128_x8 (k7/k8: a warp's float4 loads of A span 8 rows of 64 bytes) moves
# the same 16 sectors as a coalesced ldg128 but touches 8 lines instead of 4; microbench measures
# it (kind ldg128_x8), and a costs file written before that kind existed prices it as ldg128.
# ldg128_x16 (the 8-deep k8: 2 lanes per row, 16 rows of 32 bytes) is measured too (16.00
# cycles on the H200: about one cycle per line, as ldg128 4.05 and ldg128_x8 8.00); a file
# without it prices it as ldg128_x8.
PRICE_FALLBACK = {"ldg_bcast": "ldg", "ldg128_x8": "ldg128", "ldg128_x16": "ldg128_x8"}

# A global load that splits over r 128-byte lines (ldg_x{r}, ldg128_x{r}): rows whose stride is
# not a multiple of 128 bytes (any K or N not a multiple of 32 floats, e.g. 48 or 4097) straddle
# lines. Its price is read off the card's own measured prices of that width against their line
# counts (the H200: about one cycle per line, ldg 1.03 at 1 line to ldg_x32 32.0 at 32), linear
# between the two nearest; a card with fewer than two such prices (the seed's 4090) leaves it
# unpriced. The least lines of a full warp: 32 lanes × width / 128 bytes.
_BASE_LINES = {"ldg": 1, "ldg64": 2, "ldg128": 4}


@dataclass(frozen=True)
class Card:
    name: str
    sms: int
    clock_ghz: float                 # SM clock the cycle costs are counted in
    bandwidth: float                 # bytes/s: the DRAM ceiling (copy: read + write)
    l2_bytes: int
    fp32_lanes_per_sm: int = 128
    tensor_flops: float | None = None   # fp16 in / fp32 accumulate ceiling (mma.sync)
    wgmma_flops: float | None = None    # the same through wgmma (Hopper), when measured
    costs: Mapping[str, float] = field(default_factory=dict)  # SM cycles per warp instruction
    costs_source: str = ""           # "" = not measured on this card
    ldsm_cycles: float | None = None    # SM cycles per warp ldmatrix.x4 (None: not yet measured)
    notes: tuple[str, ...] = ()

    @property
    def fp32_flops(self) -> float:
        return self.sms * self.fp32_lanes_per_sm * 2 * self.clock_ghz * 1e9

    @property
    def ffma_floor(self) -> float:
        """SM cycles per warp FFMA when the FP32 pipe is the only limit (0.25 on 128 lanes)."""
        return WARP / self.fp32_lanes_per_sm

    def price(self, kind: str) -> tuple[float | None, str]:
        """(cycles, the kind actually priced) or (None, kind) when not measured here; a split
        load priced by its lines gives the two kinds it was read off, "a..b"."""
        if kind in self.costs:
            return self.costs[kind], kind
        alt = PRICE_FALLBACK.get(kind)
        if alt is not None and alt in self.costs:
            return self.costs[alt], alt
        by_lines = self._price_by_lines(kind)
        if by_lines is not None:
            return by_lines
        return None, kind

    def price_basis(self, kind: str) -> str:
        """How `kind` got its price, for the ledger's text ("" when measured as such)."""
        price, used = self.price(kind)
        if price is None or used == kind:
            return ""
        if ".." in used:
            return f"by 128-byte lines from {' and '.join(used.split('..'))}"
        return f"priced as {used}"

    def _price_by_lines(self, kind: str) -> tuple[float, str] | None:
        prefix, _, r = kind.partition("_x")
        if prefix not in _BASE_LINES or not r.isdigit():
            return None
        by_x = {}
        for k, v in sorted(self.costs.items()):   # one price per line count
            if _lines(k) is not None and k.partition("_x")[0] == prefix:
                by_x.setdefault(_lines(k), (v, k))
        points = sorted((x, v, k) for x, (v, k) in by_x.items())
        if len(points) < 2:
            return None
        lines = int(r)
        # the segment around `lines`, or the nearest one at either end
        i = next((j for j in range(1, len(points)) if points[j][0] >= lines), len(points) - 1)
        (x0, y0, k0), (x1, y1, k1) = points[i - 1], points[i]
        return y0 + (y1 - y0) * (lines - x0) / (x1 - x0), f"{k0}..{k1}"


def _lines(kind: str) -> int | None:
    """The 128-byte lines a full warp's global load of this kind touches (None: not such a load)."""
    prefix, sep, r = kind.partition("_x")
    if prefix not in _BASE_LINES:
        return None
    if not sep:
        return _BASE_LINES[prefix]
    return int(r) if r.isdigit() else None


def _specs() -> dict:
    return json.loads(CARDS_JSON.read_text())["cards"]


def load(key: str, measured: str | os.PathLike | None = None) -> Card:
    """The card `key` of data/cards.json; `measured` replaces its microbenchmark file."""
    spec = _specs()[key]
    notes = list(spec.get("notes", ()))
    kw = dict(name=spec["name"], l2_bytes=int(spec["l2_bytes"]),
              fp32_lanes_per_sm=int(spec.get("fp32_lanes_per_sm", 128)),
              tensor_flops=spec.get("tensor_flops"))
    if measured is not None:
        path = Path(measured)
    else:
        path = DATA_DIR / spec["measured"] if "measured" in spec else None
    if path is None:
        kw.update(sms=int(spec["sms"]), clock_ghz=float(spec["clock_ghz"]),
                  bandwidth=float(spec["bandwidth_Bps"]),
                  costs={k: float(v) for k, v in spec.get("costs", {}).items()},
                  costs_source=spec.get("costs_source", ""))
    else:
        data = json.loads(path.read_text())
        kw.update(sms=int(data["sms"]), clock_ghz=float(data["clock_ghz"]),
                  bandwidth=float(data["copy_bandwidth_Bps"]),
                  costs={k: float(v) for k, v in data.get("costs", {}).items() if v is not None})
        ldsm = data.get("tensor", {}).get("ldmatrix_x4")   # microbench --tensor
        if ldsm:
            kw["ldsm_cycles"] = float(ldsm["cycles_per_instr"])
        if data.get("tensor_flops"):   # written by a full microbench run (its mma.sync loop)
            kw["tensor_flops"] = float(data["tensor_flops"])
        wgmma = data.get("tensor_tflops", {}).get("wgmma")
        if wgmma:                      # microbench --tensor's wgmma loop
            kw["wgmma_flops"] = 1e12 * float(wgmma)
        if kw["tensor_flops"]:
            notes.append(f"tensor ceiling {kw['tensor_flops'] / 1e12:.0f} TFLOPS: "
                         + (f"measured, {path.name}" if data.get("tensor_flops") else
                            "cards.json (not in the measured file yet)"))
        if kw["costs"]:
            updated = sorted({stamp[:10] for stamp in data.get("updated", {}).values()})
            kw["costs_source"] = (f"measured by numba_gemm.measure.microbench on {data.get('device', '?')}"
                                  + (f", {data['measured_utc']}" if data.get("measured_utc") else "")
                                  + (f"; {len(data['updated'])} entries re-measured "
                                     f"{', '.join(updated)}" if updated else ""))
        notes.insert(0, f"SMs, clock {kw['clock_ghz']:.3f} GHz and bandwidth "
                        f"{kw['bandwidth'] / 1e12:.2f} TB/s (device-to-device copy, read + write): "
                        f"measured, {path.name}")
    return Card(notes=tuple(notes), **kw)


def h200(costs_json: str | os.PathLike | None = None) -> Card:
    """The H200 as measured in `costs_json` (default: the committed data/h200_costs.json)."""
    return load("h200", costs_json)


RTX4090 = load("rtx4090")
RTX5080 = load("rtx5080")

_ALIASES = {"h200": "h200", "rtx4090": "rtx4090", "4090": "rtx4090", "rtx5080": "rtx5080", "5080": "rtx5080"}


def card(name_or_card: "str | os.PathLike | Card | None" = None) -> Card:
    """A Card from a name (h200, rtx4090/4090, rtx5080/5080), a microbench .json (an H200), or a Card."""
    if isinstance(name_or_card, Card):
        return name_or_card
    raw = str(name_or_card or "h200")
    if raw.endswith(".json"):
        return h200(raw)
    key = raw.lower().replace(" ", "").replace("-", "")
    try:
        return load(_ALIASES[key])
    except KeyError:
        raise ValueError(f"unknown card {name_or_card!r}: one of {sorted(_ALIASES)} or a .json") from None
