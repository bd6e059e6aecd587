#!/usr/bin/env python3
"""Turn bench.py --json output into the markdown tables of docs/RESULTS.md.

    python tools/results_table.py out/sgemm.json [--seed out/seed.txt]
    python tools/results_table.py out/shapes_bf16.json      (a --suite shapes run)

--seed adds the seed's CUDA C times (the output of its timing main) as a yardstick column.
A suite run gives one row per shape: auto's pick (with its K splits), the fastest level timed,
cuBLAS, the two ratios (cuBLAS time / auto's: kernel time and back-to-back loop) and % roofline.
"""
import argparse
import json
import re


def seed_times(path):
    """{(name, n): ms} from lines like 'seed K3c  n=4096     15.832 ms ...'."""
    times = {}
    for line in open(path):
        m = re.match(r"seed (\S+)\s+n=(\d+)\s+([\d.]+) ms", line)
        if m:
            times[(m.group(1).lower(), int(m.group(2)))] = float(m.group(3))
    return times


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("json")
    p.add_argument("--seed", help="the seed's CUDA C timings (text)")
    args = p.parse_args()
    rows = json.load(open(args.json))
    if isinstance(rows, dict) and "results" in rows:   # a suite run, wrapped with its provenance
        print(suite_table(rows))
        return
    seed = seed_times(args.seed) if args.seed else {}
    head = "| level | M×N×K | dtype | ms | TFLOPS | % cuBLAS | × prev |"
    sep = "|---|---|---|---|---|---|---|"
    if seed:
        head += " seed CUDA C ms | Numba / CUDA C |"
        sep += "---|---|"
    print(head)
    print(sep)
    cublas = {}
    for r in rows:
        if not r["ms"]:
            continue
        prev = f"{r['speedup_prev']:.2f}×" if r["speedup_prev"] else "-"
        line = (f"| {r['level']} | {r['M']}×{r['N']}×{r['K']} | {r['dtype']} | {r['ms']:.3f} | "
                f"{r['tflops']:.2f} | {_f(r['pct_cublas'])} | {prev} |")
        if seed:
            s = seed.get((r["level"], r["M"])) if r["M"] == r["N"] == r["K"] else None
            line += f" {s:.3f} | {r['ms'] / s:.3f} |" if s else " - | - |"
        print(line)
        if r["cublas_ms"]:
            cublas[(r["M"], r["N"], r["K"], r["dtype"])] = (r["cublas_ms"], r["cublas_tflops"])
    for (M, N, K, dt), (ms, tf) in cublas.items():
        print(f"| cuBLAS | {M}×{N}×{K} | {dt} | {ms:.3f} | {tf:.2f} | 100.0 | - |" + (" | |" if seed else ""))


def suite_table(run: dict) -> str:
    """The markdown table of one bench.py --suite shapes --json run."""
    lines = ["| shape | M×N×K | auto | its µs | best timed | its µs | cuBLAS µs | auto/cuBLAS kernel "
             "| auto/cuBLAS loop | % roofline |", "|---|---|---|---:|---|---:|---:|---:|---:|---:|"]
    for r in run["results"]:
        timed = {t["level"]: t for t in r["levels"] if t["ok"]}
        auto, best = timed[r["auto"]], timed[r["best"]]
        pick = r["auto"] + (f" (S={auto['splits']})" if auto["splits"] > 1 else "")
        lines.append(f"| {r['name']} | {r['M']}×{r['N']}×{r['K']} | {pick} | {auto['kernel_ms'] * 1e3:.1f} | "
                     f"{r['best']} | {best['kernel_ms'] * 1e3:.1f} | {r['cublas_ms'] * 1e3:.1f} | "
                     f"{r['auto_vs_cublas']:.3f} | {r['auto_vs_cublas_loop']:.3f} | "
                     f"{100 * r['roofline_ms'] / auto['kernel_ms']:.0f} |")
    return "\n".join(lines)


def _f(x):
    return "-" if x is None else f"{x:.1f}"

if __name__ == "__main__":
    main()
