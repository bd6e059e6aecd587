#!/usr/bin/env python3
"""Fit auto's cost model (numba_gemm.choose) to measured times and write its data file.

    python tools/calibrate_auto.py docs/data/h200_shapes_bf16.json ... --out numba_gemm/data/h200_auto.json

Inputs: JSON written by `bench.py --suite shapes --json` (per shape, every level timed) or by
`bench.py --json` (one row per level and shape). Every (level, input dtype) with measurements
gets its own constants (blocks per SM, bandwidth efficiency, rate, fixed cost), fitted to
minimise the squared log error of predicted against measured kernel time; the fit's RMS log
error and sample count are stored beside them, and the sources with their provenance. A 2-byte
type with fewer than MIN_SAMPLES shapes is fitted together with the other one (the same kernels;
"pooled_with" says so).
"""
import argparse
import datetime
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")   # the fit reads level modules, runs nothing

from numba_gemm import choose, registry  # noqa: E402

MIN_SAMPLES = 4            # fewer than this for one 2-byte type: pool fp16 and bf16 (same kernels)
TWO_BYTE = ("float16", "bfloat16")


def samples(paths):
    """{(level, dtype): [(M, N, K, ms)]} from suite or bench JSON files."""
    out = defaultdict(list)
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        rows = data["results"] if isinstance(data, dict) else data
        for r in rows:
            if "levels" in r:      # a suite shape
                for t in r["levels"]:
                    if t["ok"] and t["kernel_ms"] == t["kernel_ms"]:
                        out[t["level"], r["dtype"]].append((r["M"], r["N"], r["K"], t["kernel_ms"]))
            elif r.get("ms") and r.get("ok") is not False:
                out[r["level"], r["dtype"]].append((r["M"], r["N"], r["K"], r["ms"]))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="+", help="measured JSON files")
    p.add_argument("--out", default=str(choose.CALIBRATION), help="the data file to write")
    p.add_argument("--merge", action="store_true",
                   help="keep the constants of (level, dtype) pairs these inputs do not measure")
    args = p.parse_args(argv)
    reg = registry.registry()
    old = choose._load(args.out) if args.merge else {"levels": {}}
    levels = old.get("levels", {})
    measured = samples(args.inputs)
    for (name, dtype), pts in sorted(measured.items()):
        if name not in reg:
            print(f"skip {name}: not a level here", file=sys.stderr)
            continue
        lv = reg[name]
        pooled = None
        if dtype in TWO_BYTE and len(pts) < MIN_SAMPLES:
            pooled = next(d for d in TWO_BYTE if d != dtype)
            pts = pts + measured.get((name, pooled), [])
        es = choose.as_dtype(dtype).itemsize
        ss = [{"M": M, "N": N, "K": K, "ms": ms, "elem_bytes": es,
               "geometry": choose.geometry(lv, M, N, K)} for M, N, K, ms in pts]
        fitted = choose.fit(ss)
        if pooled:
            fitted["pooled_with"] = pooled
        levels.setdefault(name, {})[dtype] = fitted
        print(f"{name:>6} {dtype:>8}: {fitted}")
    doc = {
        "about": "Constants of auto's cost model (numba_gemm.choose), fitted by tools/calibrate_auto.py "
                 "to kernel times measured on the card named here; not edited by hand.",
        "card": "NVIDIA H200 (sm_90, 132 SMs)",
        "fitted_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "sources": sorted(set(old.get("sources", [])) | {os.path.basename(x) for x in args.inputs})
        if args.merge else sorted(os.path.basename(x) for x in args.inputs),
        "levels": levels,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
