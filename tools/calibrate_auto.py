#!/usr/bin/env python3
"""Fit auto's cost model (numba_gemm.choose) to measured times and write its data file.

    python tools/calibrate_auto.py docs/data/h200_shapes_bf16.json ... --out numba_gemm/data/h200_auto.json

Inputs: JSON written by `bench.py --suite shapes --json` (per shape, every level timed), by
`bench.py --json` (one row per level and shape), or by `tools/hopper_top.py --json`, whose rows
for another tile of a level (v11:bm=64:bn=128) give that tile its own entry under that name
(its other rows are left to the suite runs: they would fit a level twice). List the inputs oldest
first: where two measured a level at the same shape, the later counts. Every (level, input dtype) with measurements
gets its own constants (blocks per SM, bandwidth efficiency, rate, fixed cost), fitted to
minimise the squared log error of predicted against measured kernel time; the fit's RMS log
error and sample count are stored beside them, and the sources with their provenance. fp16 and
bf16 are fitted together ("pooled_with" says so): the same kernels with another MMA type, within a
few per cent of each other where both were measured, and the suite may have measured only one.
"""
import argparse
import concurrent.futures
import contextlib
import datetime
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")   # the fit reads level modules, runs nothing

from numba_gemm import choose, registry  # noqa: E402
from numba_gemm.measure.shapes import geomean  # noqa: E402

TWO_BYTE = ("float16", "bfloat16")


def samples(paths):
    """{(level, dtype): [(M, N, K, ms, splits)]} from suite or bench JSON files (splits: the K
    split the level ran with, None where the file does not say). A level measured at the same
    shape by several files counts once, as the last of them measured it: list the files oldest
    first, so that a run made after a level changed replaces what it measured before."""
    out = defaultdict(dict)
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        if isinstance(data, dict) and "meta" in data and "rows" in data:      # tools/hopper_top.py
            for r in data["rows"]:
                if ":" in r["level"]:
                    out[r["level"], r["dtype"]][r["M"], r["N"], r["K"]] = r["kernel_ms"], None
            continue
        rows = data["results"] if isinstance(data, dict) else data
        for r in rows:
            if "levels" in r:      # a suite shape
                for t in r["levels"]:
                    if t["ok"] and t["kernel_ms"] == t["kernel_ms"]:
                        out[t["level"], r["dtype"]][r["M"], r["N"], r["K"]] = t["kernel_ms"], t.get("splits")
            elif r.get("ms") and r.get("ok") is not False:
                out[r["level"], r["dtype"]][r["M"], r["N"], r["K"]] = r["ms"], None
    return {key: [(*shape, *m) for shape, m in pts.items()] for key, pts in out.items()}


def level_of(name, reg):
    """(Level, run() keywords) of a level name (keywords ()) or a tile spec (v11:bm=64:bn=128:
    one of the level's TILE_CHOICES); (None, None) for anything else."""
    base = name.split(":")[0]
    lv = reg.get(base)
    if lv is None or name == base:
        return lv, ()
    tiles = {registry.spec_name(base, kw): kw for kw, _ in choose.tile_choices(lv)}
    kw = tiles.get(name)
    return (lv, kw) if kw else (None, None)


def fit_levels(measured, reg, leave_out=None, quiet=True) -> dict:
    """{level: {dtype: constants}} fitted to measured ({(level, dtype): [(M, N, K, ms, splits)]}),
    the points at shape leave_out (M, N, K) left out; fp16 and bf16 pooled (the module
    docstring). A point measured with another K split than the level now plans there is left
    out too: it no longer describes the level."""
    pts_of = {key: [p for p in pts if p[:3] != leave_out] for key, pts in measured.items()}
    keys = set(pts_of)
    keys |= {(name, d) for name, dt in pts_of if dt in TWO_BYTE for d in TWO_BYTE}
    levels, done = {}, {}           # done: fp16 and bf16 pool the same points, so fit them once
    for name, dtype in sorted(keys):
        lv, kwargs = level_of(name, reg)
        if lv is None:
            if not quiet:
                print(f"skip {name}: not a level or a tile of one here", file=sys.stderr)
            continue
        pts, pooled = pts_of.get((name, dtype), []), None
        other = next((d for d in TWO_BYTE if d != dtype), None) if dtype in TWO_BYTE else None
        if pts_of.get((name, other)):
            pooled = other
            pts = pts + pts_of[name, other]
        if not pts or choose.as_dtype(dtype) not in lv.dtypes:
            continue
        es = choose.as_dtype(dtype).itemsize
        ss = [{"M": M, "N": N, "K": K, "ms": ms, "elem_bytes": es,
               "geometry": choose.geometry(lv, M, N, K, kwargs=kwargs)}
              for M, N, K, ms, splits in pts if kwargs or choose.as_planned(lv, M, N, K, splits)]
        if not ss:
            continue
        sig = (name, tuple(sorted((s["M"], s["N"], s["K"], s["ms"]) for s in ss)))
        if sig not in done:
            done[sig] = choose.fit(ss)
        fitted = dict(done[sig])
        if pooled:
            fitted["pooled_with"] = pooled
        levels.setdefault(name, {})[dtype] = fitted
        if not quiet:
            print(f"{name:>6} {dtype:>8}: {fitted}")
    return levels


def needed(times, reg) -> set:
    """The names whose constants a pick among the levels timed at a shape reads: each of them,
    and each one's parent (a split-K or stream-K level at one slice is priced with its parent's
    constants, choose._one_slice_parent). The fits of the other levels do not move the pick."""
    names = set(times)
    for name in times:
        lv = reg.get(name.split(":")[0])
        parent = getattr(lv.module, "PARENT", None) if lv is not None else None
        if parent:
            names.add(parent)
    return names


def pick(dtype, M, N, K, times, levels) -> str:
    """The level or tile auto ranks first at M×N×K among `times`' names, with the constants `levels`."""
    choose._calibration = {"levels": levels}
    try:
        return next(q.name for q in choose.candidates(dtype, M, N, K, native=True) if q.name in times)
    finally:
        choose._calibration = None


def _left_out_pick(job) -> str:
    """pick() with constants fitted without the shape's own points (one job of holdout's pool)."""
    dtype, M, N, K, times, measured = job
    return pick(dtype, M, N, K, times, fit_levels(measured, registry.registry(), leave_out=(M, N, K)))


def holdout(paths, reg, leave_out=True, jobs=1) -> str:
    """Leave one shape out: fit without a shape, let the model pick among the levels measured
    there, and score the pick by its measured time against the fastest measured (and cuBLAS).
    Auto's quality on shapes it was not fitted to, from the runs we have. leave_out=False: one
    fit on everything, scored on the same shapes (what the refit's auto would pick there).
    Left out, each shape refits only the levels its pick reads (needed), in `jobs` processes;
    a line on stderr counts the shapes done."""
    measured = samples(paths)
    shapes_ = {}                                  # (dtype, M, N, K) -> ({level: ms}, cuBLAS ms, name)
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for r in (data.get("results", ()) if isinstance(data, dict) else data):   # suite runs only
            if "levels" in r:
                times = {t["level"]: t["kernel_ms"] for t in r["levels"] if t["ok"] and t["kernel_ms"] == t["kernel_ms"]
                         and (":" in t["level"] or (t["level"] in reg and
                              choose.as_planned(reg[t["level"]], r["M"], r["N"], r["K"], t.get("splits"))))}
                shapes_[r["dtype"], r["M"], r["N"], r["K"]] = (times, r.get("cublas_ms"), r["name"])
    order = sorted(shapes_)
    if leave_out:
        def job(key):
            dtype, M, N, K = key
            times = shapes_[key][0]
            group = TWO_BYTE if dtype in TWO_BYTE else (dtype,)    # the levels auto ranks for dtype
            names = needed(times, reg)
            return (*key, times, {k: pts for k, pts in measured.items() if k[1] in group and k[0] in names})
        picks = []
        with concurrent.futures.ProcessPoolExecutor(jobs) if jobs > 1 else contextlib.nullcontext() as pool:
            for i, name in enumerate((pool.map if pool else map)(_left_out_pick, map(job, order)), 1):
                picks.append(name)
                print(f"\rholdout: {i}/{len(order)} shapes", end="\n" if i == len(order) else "",
                      file=sys.stderr, flush=True)
    else:
        everything = fit_levels(measured, reg)
        picks = [pick(*key, shapes_[key][0], everything) for key in order]
    lines = [f"{'shape':>22} {'dtype':>8} {'pick':>6} {'best':>6} {'pick/best':>9} {'cuBLAS/pick':>11}"]
    ratios, vs_blas = [], []
    for (dtype, M, N, K), chosen in zip(order, picks):
        times, blas, name = shapes_[dtype, M, N, K]
        best = min(times, key=times.get)
        ratios.append(times[chosen] / times[best])
        if blas:
            vs_blas.append(blas / times[chosen])
        lines.append(f"{name:>22} {dtype:>8} {chosen:>6} {best:>6} {ratios[-1]:9.3f} "
                     f"{vs_blas[-1] if blas else float('nan'):11.3f}")
    lines.append(f"{'left-out' if leave_out else 'fitted'} shapes: pick/best geomean {geomean(ratios):.3f}, worst {max(ratios):.3f}; "
                 f"cuBLAS/pick geomean {geomean(vs_blas):.3f}")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", help="measured JSON files")
    p.add_argument("--out", default=str(choose.CALIBRATION), help="the data file to write")
    p.add_argument("--holdout", action="store_true",
                   help="write nothing: for each suite shape, fit without it and score auto's pick there")
    p.add_argument("--score", action="store_true",
                   help="write nothing: fit on everything, then score auto's pick on each suite shape")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="processes for --holdout, one shape each at a time (default: one per core)")
    args = p.parse_args(argv)
    reg = registry.registry()
    if args.holdout or args.score:
        print(holdout(args.inputs, reg, leave_out=args.holdout, jobs=max(1, args.jobs)))
        return 0
    levels = fit_levels(samples(args.inputs), reg, quiet=False)
    doc = {
        "about": "Constants of auto's cost model (numba_gemm.choose), fitted by tools/calibrate_auto.py "
                 "to kernel times measured on the card named here; not edited by hand.",
        "card": "NVIDIA H200 (sm_90, 132 SMs)",
        "fitted_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "sources": [os.path.basename(x) for x in args.inputs],     # oldest first (samples)
        "levels": levels,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
