#!/usr/bin/env python3
"""How long each Numba kernel takes to compile to PTX, with Numba's inliner as numba-cuda ships
it and with numba_gemm.ptx.inline_copy's shared memo, and whether the PTX is the same. No GPU.

    python tools/compile_times.py                       # every Numba level
    python tools/compile_times.py --level k9,k9sk --out /tmp/times.json

Each mode compiles in its own process with the simulator off (Numba numbers every compile in its
mangled names, so two compiles of one kernel in one process differ in those names). The PTX is
compared by its sha256. The table gives seconds per kernel; JSON (--out): the date, commit,
machine, numba-cuda version, command and one row per kernel {kernel, plain_s, shared_s, same}.
"""
from __future__ import annotations

import argparse
import copy
import datetime
import hashlib
import json
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def child(levels, plain: bool) -> dict:
    """{"installed": bool, "kernels": {name: [seconds, sha256 of the PTX]}} in this process."""
    from numba import cuda
    from numba.cuda.core import inline_closurecall

    from numba_gemm.explain.sass import numba_kernels
    from numba_gemm.ptx import inline_copy
    from numba_gemm.registry import get

    kernels = {}
    for level in levels:               # importing a level installs the shared memo
        module = get(level).module
        cc = (9, 0, "a") if getattr(module, "ARCH", "sm_90").endswith("a") else (9, 0)
        kernels.update({name: (*k, cc) for name, k in numba_kernels(module).items()})
    out = {"installed": isinstance(inline_closurecall.copy, inline_copy._OneMemoPerIR), "kernels": {}}
    if plain:
        inline_closurecall.copy = copy
    for name, (fn, sig, bounds, cc) in kernels.items():
        start = time.perf_counter()
        ptx, _ = cuda.compile_ptx(fn, sig, cc=cc, launch_bounds=bounds)
        out["kernels"][name] = [round(time.perf_counter() - start, 2), hashlib.sha256(ptx.encode()).hexdigest()]
    return out


def run_child(levels, plain: bool) -> dict:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--level", ",".join(levels)]
    out = subprocess.run(cmd + ["--plain"] * plain, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--level", help="comma-separated Numba levels (default: every one)")
    ap.add_argument("--out", help="write the rows as JSON")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.level.split(","), args.plain)))
        return 0

    from numba_gemm.registry import registry

    levels = args.level.split(",") if args.level else [n for n, lv in registry().items() if not lv.native]
    print(f"compiling {len(levels)} levels twice, each mode in its own process ...", flush=True)
    shared, plain = run_child(levels, False), run_child(levels, True)
    if not shared["installed"]:
        raise SystemExit("importing the levels did not install the shared memo")
    rows = [{"kernel": k, "plain_s": plain["kernels"][k][0], "shared_s": s,
             "same": plain["kernels"][k][1] == h} for k, (s, h) in shared["kernels"].items()]
    print(f"{'kernel':24} {'as shipped s':>12} {'shared memo s':>13} {'faster':>7}  same PTX")
    for r in rows:
        print(f"{r['kernel']:24} {r['plain_s']:12.2f} {r['shared_s']:13.2f} "
              f"{r['plain_s'] / max(r['shared_s'], 1e-9):6.2f}x  {'yes' if r['same'] else 'NO'}")
    total_plain, total_shared = sum(r["plain_s"] for r in rows), sum(r["shared_s"] for r in rows)
    print(f"{'total':24} {total_plain:12.1f} {total_shared:13.1f} {total_plain / total_shared:6.2f}x  "
          f"{sum(r['same'] for r in rows)} of {len(rows)} the same")
    if args.out:
        import numba_cuda

        commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        with open(args.out, "w") as f:
            json.dump({"date": datetime.date.today().isoformat(), "commit": commit,
                       "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, no GPU needed",
                       "numba_cuda": numba_cuda.__version__,
                       "command": "python tools/compile_times.py" + (f" --level {args.level}" if args.level else ""),
                       "rows": rows}, f, indent=1)
    return 0 if all(r["same"] for r in rows) else 1


if __name__ == "__main__":
    # this process only lists the levels; set here, not in main(), which a test calls in-process:
    # a pytest run on a GPU would otherwise hand the simulator to every later test
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    sys.exit(main())
