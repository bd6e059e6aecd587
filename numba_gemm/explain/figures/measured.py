"""The measured figures of docs/ (the roofline, the ladder, the size curve): their input, the
roofline's arithmetic and label layout, and the charts.

The measured figures read `python bench.py --json FILE`
output (`--results`), in one of three forms:
  - a raw bench.py --json file (a list of results), as written;
  - a manifest of raw files, which says what ran where and makes every bar traceable to its
    command (the files are named relative to the manifest, kept beside it in docs/data/; a
    later run of the same level and shape replaces an earlier one):
        {"card": "NVIDIA H200 (sm_90, 132 SMs), driver ...", "date": "...", "commit": "...",
         "runs": [{"command": "python bench.py --level sgemm --size 4096 --json h200_sgemm.json",
                   "json": "h200_sgemm.json"}, ...]}
  - {"provenance": {...}, "results": [...]}: results gathered by other means, which must say
    so ("transcribed_from"), and the figures then say so.
The committed input is the manifest docs/data/h200_ladder.json.
Simulator timings are never plotted: results without a GPU mode are refused.
bench.py --plot draws the ladder of the run it has just made (ladder_chart).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from .. import ledgers
from .draw import BLUE, GREEN, GREY, ORANGE, RED, _plt, _save

ROOT = Path(__file__).resolve().parents[3]   # the checkout (this is numba_gemm/explain/figures/measured.py)
DATA_DIR = ROOT / "docs" / "data"
# The figures' default input: the manifest of the raw bench.py --json files of the H200 runs.
RESULTS_JSON = DATA_DIR / "h200_ladder.json"
CURVE_JSON = DATA_DIR / "h200_curve.json"   # the manifest of the size-curve runs


def load_results(path=RESULTS_JSON) -> tuple[list[dict], dict]:
    """(results, provenance) from a raw bench.py --json file, a manifest of them, or results
    wrapped with their provenance (module docstring). Only GPU measurements are returned: a
    simulator run has no timings worth plotting."""
    path = Path(path)
    data = json.loads(path.read_text())
    if isinstance(data, list):                       # raw bench.py --json
        results, prov = data, {"files": [path.name]}
    elif "runs" in data:                             # a manifest of raw files
        prov = {k: v for k, v in data.items() if k != "runs"}
        prov["commands"] = [run["command"] for run in data["runs"]]
        prov["files"] = [run["json"] for run in data["runs"]]
        results = []
        for run in data["runs"]:
            raw = json.loads((path.parent / run["json"]).read_text())
            if isinstance(raw, dict) and "results" in raw:   # results wrapped with their provenance
                raw = raw["results"]
            if not isinstance(raw, list):
                raise ValueError(f"{run['json']}: not a raw bench.py --json file (a list of results)")
            if run.get("levels"):                            # the run's other rows are context only
                raw = [r for r in raw if r["level"] in run["levels"]]
            source = {"json": run["json"], "command": run["command"], "commit": run.get("commit"),
                      "date": run.get("date", data.get("date"))}
            results += [dict(r, run=source) for r in raw]   # each result says which run it is
    else:
        results, prov = data["results"], data.get("provenance", {})
    latest = {}   # a later run of the same level and shape replaces an earlier one
    for r in results:
        if r.get("mode") == "gpu" and r.get("ms"):
            latest[(r["level"], r["M"], r["N"], r["K"], r["dtype"])] = r
    timed = list(latest.values())
    if not timed:
        raise ValueError(f"{path}: no GPU timings (simulator results are never plotted)")
    return timed, prov


def tensor_ceilings() -> dict[str, float]:
    """The compute roofs in FLOP/s: "fp32" (the card's FP32 lanes at its clock) and the measured
    tensor-core ceilings of numba_gemm/data/h200_costs.json, "mma_sync" and "wgmma"."""
    c = ledgers.h200()
    measured = json.loads(Path(ledgers.H200_COSTS).read_text()).get("tensor_tflops", {})
    out = {"fp32": c.fp32_flops}
    out.update({k: 1e12 * v for k, v in measured.items()})
    return out


def compute_roof(level: str) -> str:
    """Which compute roof a level runs under: "wgmma" when its SASS must have HGMMA, "mma_sync"
    for the other tensor-core levels, "fp32" for the SGEMM levels."""
    from ...registry import get

    lv = get(level)
    if lv.family == "sgemm":
        return "fp32"
    return "wgmma" if "HGMMA" in getattr(lv.module, "SASS_MUST_HAVE", ()) else "mma_sync"


def tile_intensity(level: str, n=4096) -> float:
    """FLOP per DRAM byte under the per-tile model for every level alike: each output tile reads
    its A and B panels once (fp32 or 2-byte inputs), C (fp32) written once. For the SGEMM levels
    it is the bytes ledger's own model; for the tensor-core levels the bytes ledger uses the L2
    model of the launch order, and this is its no-reuse bound (`l2_ledger(...).per_tile_bytes`)."""
    M, N, K = (n, n, n) if isinstance(n, int) else n
    b = ledgers.bytes_ledger(level, "h200", (M, N, K))
    if ledgers.level_of(level).family == "sgemm":
        return b.intensity
    return b.flops / ledgers.l2_ledger(level, (M, N, K), ledgers.h200()).per_tile_bytes


def roofline_points(results: list[dict], card: str = "h200") -> list[dict]:
    """Each measured level at its bytes-ledger intensity ("intensity": the per-tile model for
    the SGEMM levels, the L2 model of the launch order for the tensor-core levels) and at the
    per-tile model for all ("tile_intensity", tile_intensity), under the roof of the instruction
    it multiplies with (compute_roof): the roofline min(ceiling, intensity × copy bandwidth) at the
    bytes-ledger intensity, and the level's attainment of it in %."""
    c, ceilings = ledgers.h200(), tensor_ceilings()
    out = []
    for r in results:
        shape = (r["M"], r["N"], r["K"])
        x = ledgers.bytes_ledger(r["level"], card, shape).intensity
        roof = compute_roof(r["level"])
        roof_tflops = min(ceilings[roof], x * c.bandwidth) / 1e12
        out.append({"level": r["level"], "n": r["M"], "dtype": r["dtype"], "intensity": x,
                    "tile_intensity": tile_intensity(r["level"], shape), "tflops": r["tflops"],
                    "roof": roof, "roof_tflops": roof_tflops,
                    "attainment": 100.0 * r["tflops"] / roof_tflops})
    return out


def tile_model_points(results: list[dict], card: str = "h200") -> list[dict]:
    """The roofline figure's points: roofline_points with every level at the one byte model
    that all levels have, the per-tile model ("intensity" = tile_intensity), its roofline and
    attainment there (above 100 %: the level reads some bytes from L2 more than once, which the
    per-tile model counts as DRAM traffic), and "peak": its TFLOPS in % of its own
    instruction's compute ceiling (what the labels show: it needs no byte model)."""
    c, ceilings = ledgers.h200(), tensor_ceilings()
    out = []
    for p in roofline_points(results, card):
        x = p["tile_intensity"]
        roof_tflops = min(ceilings[p["roof"]], x * c.bandwidth) / 1e12
        out.append(dict(p, intensity=x, roof_tflops=roof_tflops,
                        attainment=100.0 * p["tflops"] / roof_tflops,
                        peak=100.0 * p["tflops"] * 1e12 / ceilings[p["roof"]]))
    return out


def roof_label(p: dict) -> str:
    """A roofline point's label: level, TFLOPS, and the % of its own instruction's peak when the
    point has one (tile_model_points), else its attainment of its own roofline."""
    if "peak" in p:
        return f"{p['level']} {p['tflops']:.3g} ({p['peak']:.2g} %)" if p["peak"] < 10 else \
            f"{p['level']} {p['tflops']:.3g} ({p['peak']:.0f} %)"
    return f"{p['level']} {p['tflops']:.3g} ({p['attainment']:.0f} %)"


def label_layout(points: list[dict], gap: float = 0.1, char: float = 0.034,
                 cluster: float = 2.0) -> dict[str, tuple[float, float, str]]:
    """level -> (x, y, "left" | "right"): where each roofline label goes on the log-log axes.

    Points whose intensities are within a factor `cluster` of each other share a column of
    labels beside them; within a column the labels are stacked in the order of their TFLOPS at
    least `gap` decades apart, each as close to its point's height as the others allow. A
    column goes to the right of its points unless the next column is nearer than its labels are
    wide (`char` decades per character), then to the left. label_boxes() gives the boxes, which
    the tests check do not overlap."""
    pts = sorted(points, key=lambda p: p["intensity"])
    cols: list[list[dict]] = []
    for p in pts:
        if cols and p["intensity"] <= cluster * cols[-1][0]["intensity"]:
            cols[-1].append(p)
        else:
            cols.append([p])
    out = {}
    for i, col in enumerate(cols):
        lo, hi = min(p["intensity"] for p in col), max(p["intensity"] for p in col)
        width = char * max(len(roof_label(p)) for p in col)
        nxt = cols[i + 1][0]["intensity"] if i + 1 < len(cols) else math.inf
        side = "right" if math.log10(nxt) - math.log10(1.3 * hi) > width + 0.05 else "left"
        x = 1.3 * hi if side == "right" else lo / 1.3
        col = sorted(col, key=lambda p: p["tflops"])
        ys = [math.log10(p["tflops"]) for p in col]
        for j in range(1, len(ys)):                       # push up to keep the gap ...
            ys[j] = max(ys[j], ys[j - 1] + gap)
        shift = (sum(math.log10(p["tflops"]) for p in col) - sum(ys)) / len(ys)
        ys = [y + min(0.0, shift) for y in ys]            # ... then re-centre downwards
        for p, y in zip(col, ys):
            out[p["level"]] = (x, 10 ** y, side)
    return out


def label_boxes(points: list[dict], layout: dict, gap: float = 0.1, char: float = 0.034) -> dict:
    """level -> (x0, x1, y0, y1) in decades: the box label_layout() reserves for each label."""
    out = {}
    for p in points:
        x, y, side = layout[p["level"]]
        w, lx, ly = char * len(roof_label(p)), math.log10(x), math.log10(y)
        x0, x1 = (lx, lx + w) if side == "right" else (lx - w, lx)
        out[p["level"]] = (x0, x1, ly - gap / 2, ly + gap / 2)
    return out


# =======================================================================================
# Drawing


def _prov_line(prov: dict) -> str:
    line = ", ".join(str(prov[k]) for k in ("card", "date", "commit") if prov.get(k))
    line = line or ", ".join(prov.get("files", []))   # a raw file alone: its name
    return line + (" (transcribed from docs/RESULTS.md)" if prov.get("transcribed_from") else "")


def cublas_lines(results: list[dict], n: int = 4096) -> dict[str, float]:
    """dtype -> the cuBLAS TFLOPS the roofline draws at n³: that of the run which timed the most
    levels of that dtype there (the ladder's run, whose cuBLAS the tables quote), not of a later
    run of one level beside its own cuBLAS call. Ties: the run met first."""
    runs: dict[str, dict[str, list[dict]]] = {}
    for r in results:
        if r["M"] == r["N"] == r["K"] == n and r.get("cublas_tflops"):
            runs.setdefault(r["dtype"], {}).setdefault((r.get("run") or {}).get("json"), []).append(r)
    return {dtype: max(by.values(), key=len)[0]["cublas_tflops"] for dtype, by in runs.items()}


ROOF_STYLE = {"fp32": (BLUE, "-", "FP32 (k1–k8)"), "mma_sync": (GREEN, "--", "mma.sync (v7–v10, v8py)"),
              "wgmma": (ORANGE, "-.", "wgmma (v11–v13)")}


def draw_roofline(path, results_path=RESULTS_JSON, n: int = 4096):
    """Every measured level at its per-tile intensity (tile_model_points: one byte model for
    all) under the roof of its own instruction."""
    plt = _plt()
    import numpy as np

    results, prov = load_results(results_path)
    pts = tile_model_points([r for r in results if r["M"] == n])
    c, ceilings = ledgers.h200(), tensor_ceilings()
    fig, ax = plt.subplots(figsize=(12, 7.2))
    x = np.logspace(-1.2, 3.6, 200)
    bw = c.bandwidth / 1e12
    for roof, (color, ls, who) in ROOF_STYLE.items():
        ax.plot(x, np.minimum(x * bw, ceilings[roof] / 1e12), color=color, lw=2, ls=ls,
                label=f"{who}: {ceilings[roof] / 1e12:.0f} TFLOPS, {bw:.2f} TB/s", zorder=1)
    labels = label_layout(pts)
    for p in pts:
        color = ROOF_STYLE[p["roof"]][0]
        ax.scatter(p["intensity"], p["tflops"], s=45, color=color, zorder=3, edgecolor="black", lw=0.4)
        lx, ly, side = labels[p["level"]]
        ax.annotate(roof_label(p), (p["intensity"], p["tflops"]), xytext=(lx, ly), textcoords="data",
                    fontsize=8, va="center", ha="left" if side == "right" else "right", zorder=4,
                    bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none", alpha=0.85),
                    arrowprops=dict(arrowstyle="-", color=GREY, lw=0.5, shrinkA=0, shrinkB=3))
    for dtype, tf in sorted(cublas_lines(results, n).items()):
        ax.axhline(tf, color=RED, ls=":", lw=1, zorder=1)
        ax.text(0.07, tf * 1.06, f"cuBLAS {dtype} {tf:.0f}", color=RED, fontsize=8)
    above = [p["level"] for p in pts if p["attainment"] > 100]
    if above:
        ax.text(0.07, 0.075, f"above the DRAM roof of this model: {', '.join(above)}.\nThey read panels "
                "from L2 (k2: from L1/L2) more than once; the per-tile model\ncounts every tile's panels "
                "as DRAM bytes (the bytes ledger of docs/LADDER.md\nfollows the launch order for v7+: the "
                "L2 model).", fontsize=8, color=GREY)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.06, 4000)
    ax.set_ylim(0.06, 2000)
    ax.set_xlabel("arithmetic intensity, FLOP per DRAM byte — one byte model for every level: per "
                  "tile (each output tile reads its A and B panels once, C written once)")
    ax.set_ylabel("TFLOPS (measured)")
    ax.set_title(f"Roofline, {n}³ on the H200. Measured: {_prov_line(prov)}.\nLabel: level, TFLOPS, "
                 "(% of the peak of the instruction it multiplies with: FP32, mma.sync or wgmma). Ceilings and "
                 "bandwidth: numba_gemm/data/h200_costs.json", fontsize=10)
    ax.legend(loc="lower right", fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    fig.tight_layout()
    _save(fig, path)


def draw_ladder(path, results_path=RESULTS_JSON):
    """TFLOPS per level with cuBLAS: one panel per input type, one bar per size."""
    ladder_chart(path, *load_results(results_path))


def ladder_chart(path, results: list[dict], prov: dict) -> None:
    """draw_ladder's chart of timed results (dicts of bench.py --json's fields) and their
    provenance (load_results; {"card": ..., "date": ...} for a run just made)."""
    plt = _plt()
    dtypes = sorted({r["dtype"] for r in results}, key=lambda d: d != "float32")
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(12, 4.2 * len(dtypes)), squeeze=False,
                             layout="constrained")
    for ax, dtype in zip(axes[:, 0], dtypes):
        rs = [r for r in results if r["dtype"] == dtype]
        shapes = sorted({(r["M"], r["N"], r["K"]) for r in rs})
        names = list(dict.fromkeys(r["level"] for r in rs)) + ["cuBLAS"]
        w = 0.8 / len(shapes)
        for j, shape in enumerate(shapes):
            mine = [r for r in rs if (r["M"], r["N"], r["K"]) == shape]
            by = {r["level"]: r["tflops"] for r in mine}
            by["cuBLAS"] = next((r["cublas_tflops"] for r in mine if r.get("cublas_tflops")), 0)
            xs = [i + (j - (len(shapes) - 1) / 2) * w for i in range(len(names))]
            vals = [by.get(nm, 0) for nm in names]
            colors = [RED if nm == "cuBLAS" else (BLUE if dtype == "float32" else GREEN) for nm in names]
            size = f"{shape[0]}³" if len(set(shape)) == 1 else "×".join(map(str, shape))
            ax.bar(xs, vals, w * 0.95, color=colors, alpha=1.0 if j == 0 else 0.6,
                   edgecolor="black", lw=0.4, label=size + (" (lighter)" if j else ""))
            for x, v in zip(xs, vals):
                ax.annotate(f"{v:.1f}" if v < 100 else f"{v:.0f}", (x, v), ha="center", va="bottom",
                            fontsize=7.5)
        ax.set_xticks(range(len(names)), names)
        ax.set_ylabel("TFLOPS")
        if dtype == "float32":
            ax.set_yscale("log")
        ax.set_title(f"{dtype} inputs ({'Numba SGEMM' if dtype == 'float32' else 'native HGEMM, fp32 accumulate'})",
                     fontsize=10, loc="left")
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle(f"The ladder against cuBLAS (same buffers, same process). {_prov_line(prov)}",
                 fontsize=11)
    _save(fig, path)


def draw_curve(path, results_path=CURVE_JSON):
    """TFLOPS against size (kernel time): one panel per input type, a line per level, cuBLAS
    dashed."""
    plt = _plt()
    results, prov = load_results(results_path)
    dtypes = sorted({r["dtype"] for r in results}, key=lambda d: d != "float32")
    fig, axes = plt.subplots(len(dtypes), 1, figsize=(9, 5 * len(dtypes)), squeeze=False,
                             layout="constrained")
    for ax, dtype in zip(axes[:, 0], dtypes):
        rs = [r for r in results if r["dtype"] == dtype]
        levels = list(dict.fromkeys(r["level"] for r in rs))
        for i, lv in enumerate(levels):
            mine = sorted((r for r in rs if r["level"] == lv), key=lambda r: r["M"])
            ax.plot([r["M"] for r in mine], [r["tflops"] for r in mine], marker="o", ms=4,
                    color=plt.cm.viridis(i / max(1, len(levels) - 1)), label=lv)
        base = sorted({r["M"]: r["cublas_tflops"] for r in rs if r.get("cublas_tflops")}.items())
        ax.plot([n for n, _ in base], [t for _, t in base], "--", color=RED, lw=2, label="cuBLAS")
        ax.set_xscale("log", base=2)
        ax.set_xticks([n for n, _ in base], [f"{n}³" for n, _ in base])
        ax.set_xlabel("M = N = K")
        ax.set_ylabel("TFLOPS (kernel time)")
        ax.grid(True, alpha=0.25)
        ax.legend(fontsize=8, ncol=2)
        ax.set_title(f"{dtype} inputs", fontsize=10, loc="left")
    fig.suptitle(f"TFLOPS against size. Measured: {_prov_line(prov)}", fontsize=11)
    _save(fig, path)
