#!/usr/bin/env python3
"""What the first numba_gemm.gemm() call of a fresh process costs, per level and dtype: cold
(an empty cache directory: every kernel compiled) and cached (after `python -m numba_gemm
warm` filled the directory). Needs a GPU.

    python tools/first_call.py --out docs/data/h200_first_call.json
    python tools/first_call.py --out /tmp/fc.json --level k1,k8,v11,auto --size 1000
    python tools/first_call.py --dry-run          # the plan and the commands; no GPU needed

Each measurement is its own process: NumPy inputs of the level's smallest supported shape
from --size up (1000³ for most; 1×1000×1000 for k6gv, which serves M ≤ 8), the CUDA context
made first (not timed), then the wall time of one gemm() call until its result is back on the
host (the registry read, compiling or loading the kernels, the launch, the copies). The cached
run also times a second call, and both check the result against float64. `auto` rows (one per
dtype) time level="auto".

Cache directories live under --cache-dir (default: a new temp dir): cold/<level>-<dtype>/
(one empty directory per measurement) and warm/ (what the warm step filled). The JSON holds
the card, date, commit, command, the warm step's wall time and one row per level and dtype:
{level, dtype, shape, cold_s, cached_s, second_s, err}.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))                   # the checkout, before any installed copy
from numba_gemm.util import commit  # noqa: E402
DTYPES = ("float32", "float16", "bfloat16")     # what "auto" is measured for


def _env(cache: Path) -> dict:
    env = dict(os.environ, NUMBA_GEMM_CACHE_DIR=str(cache))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def plan(levels: str | None, size: int) -> list[dict]:
    """One entry per (level, dtype): the shape it is measured at, or why it is skipped."""
    from numba_gemm.registry import get, registry

    names = [n.strip() for n in levels.split(",") if n.strip()] if levels else [*registry(), "auto"]
    out = []
    for name in names:
        if name == "auto":
            out += [{"level": "auto", "dtype": d, "shape": [size] * 3} for d in DTYPES]
            continue
        lv = get(name)
        for dt in lv.dtypes:
            # the first size from --size up, in steps of 128, that the level serves
            sizes = [size] + [s for s in range(128 * (size // 128 + 1), 4 * size + 1, 128)]
            # then one row (M = 1) at those sizes, for a level that serves skinny M only (k6gv),
            # then K = size + 1, for one that serves only rows TMA cannot take (v11p), then one
            # past those sizes, for one that serves only a thin border past whole tiles (k8e)
            shapes = ([(s, s, s) for s in sizes] + [(1, s, s) for s in sizes] + [(size, size, size + 1)]
                      + [(s + 1, s + 1, s + 1) for s in sizes])
            ok = next((s for s in shapes if lv.unsupported(*s) is None), None)
            row = {"level": lv.name, "dtype": dt.name}
            row.update({"shape": list(ok)} if ok else {"skipped": lv.unsupported(size, size, size)})
            out.append(row)
    return out


def child_command(row: dict) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", row["level"], row["dtype"],
            *map(str, row["shape"])]


def child(level: str, dtype_name: str, M: int, N: int, K: int, twice: bool) -> dict:
    """In a fresh process: the first gemm() call (and, if `twice`, a second one), timed."""
    import numpy as np
    from numba import cuda

    import numba_gemm
    from numba_gemm.hgemm._common import DTYPES as HALF

    dtype = next(d for d in map(np.dtype, (np.float32, *HALF)) if d.name == dtype_name)
    cuda.current_context()                      # the context is not what is measured
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(dtype)
    B = rng.standard_normal((K, N)).astype(dtype)
    t = time.perf_counter()
    C = numba_gemm.gemm(A, B, level=level)
    first = time.perf_counter() - t
    second = None
    if twice:
        t = time.perf_counter()
        C = numba_gemm.gemm(A, B, level=level)
        second = time.perf_counter() - t
    ref = A.astype(np.float64) @ B.astype(np.float64)
    err = float(np.abs(np.asarray(C, np.float64) - ref).max() / np.abs(ref).max())
    name = cuda.get_current_device().name
    return {"first_s": first, "second_s": second, "err": err,
            "device": name.decode() if isinstance(name, bytes) else str(name)}


def _measure(row: dict, cache: Path, twice: bool, timeout: int) -> dict:
    cmd = child_command(row) + (["--twice"] if twice else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=_env(cache), cwd=ROOT, timeout=timeout)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _fmt(v) -> str:
    return f"{v:8.2f}" if isinstance(v, float) else f"{'-' if v is None else v:>8}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--out", help="JSON file to write (required unless --dry-run)")
    p.add_argument("--level", help="comma-separated levels, 'auto' among them (default: all, and auto)")
    p.add_argument("--size", type=int, default=1000, help="M = N = K to start from (default 1000)")
    p.add_argument("--cache-dir", help="where the cold and warm cache directories go (default: a new temp dir)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes of the warm step")
    p.add_argument("--timeout", type=int, default=900, help="seconds allowed per measured process")
    p.add_argument("--dry-run", action="store_true", help="print the plan and commands, run nothing")
    p.add_argument("--child", nargs=5, metavar=("LEVEL", "DTYPE", "M", "N", "K"), help=argparse.SUPPRESS)
    p.add_argument("--twice", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.child:
        level, dtype, *shape = args.child
        print(json.dumps(child(level, dtype, *map(int, shape), args.twice)))
        return 0
    if not args.dry_run and not args.out:
        p.error("--out is required (or --dry-run)")

    rows = plan(args.level, args.size)
    if args.cache_dir:
        base = Path(args.cache_dir)
    elif args.dry_run:
        base = Path(tempfile.gettempdir(), "numba_gemm_first_call_XXXX")   # made when it runs
    else:
        base = Path(tempfile.mkdtemp(prefix="numba_gemm_first_call_"))
    warm_dir = base / "warm"
    warm_cmd = [sys.executable, "-m", "numba_gemm", "warm", "--jobs", str(args.jobs)]
    if all(r["level"] != "auto" for r in rows):       # auto may pick any level: then warm them all
        warm_cmd += ["--level", ",".join(dict.fromkeys(r["level"] for r in rows))]

    if args.dry_run:
        print(f"cache directories under {base}")
        for r in rows:
            if "skipped" in r:
                print(f"  {r['level']:6s} {r['dtype']:9s} skipped: {r['skipped']}")
            else:
                cold = base / "cold" / f"{r['level']}-{r['dtype']}"
                print(f"  cold   NUMBA_GEMM_CACHE_DIR={cold} {' '.join(child_command(r))}")
        print(f"  warm   NUMBA_GEMM_CACHE_DIR={warm_dir} {' '.join(warm_cmd)}")
        print(f"  cached NUMBA_GEMM_CACHE_DIR={warm_dir} ... --twice   (each row again)")
        return 0

    from numba_gemm.runtime.gpu import has_gpu

    if not has_gpu():
        sys.exit("first_call: no GPU here (use --dry-run to see the plan)")
    measured = [r for r in rows if "shape" in r]
    for i, r in enumerate(measured, 1):
        cold = base / "cold" / f"{r['level']}-{r['dtype']}"
        cold.mkdir(parents=True, exist_ok=False)     # empty: everything compiles
        r["cold"] = _measure(r, cold, False, args.timeout)
        print(f"[cold {i}/{len(measured)}] {r['level']} {r['dtype']}: {r['cold']}", flush=True)
    t = time.perf_counter()
    warm = subprocess.run(warm_cmd, env=_env(warm_dir), cwd=ROOT)
    warm_s = time.perf_counter() - t
    for i, r in enumerate(measured, 1):
        r["cached"] = _measure(r, warm_dir, True, args.timeout)
        print(f"[cached {i}/{len(measured)}] {r['level']} {r['dtype']}: {r['cached']}", flush=True)

    out_rows, device = [], None
    for r in rows:
        cold, cached = r.get("cold", {}), r.get("cached", {})
        device = device or cold.get("device") or cached.get("device")
        row = {"level": r["level"], "dtype": r["dtype"], "shape": r.get("shape"),
               "cold_s": cold.get("first_s"), "cached_s": cached.get("first_s"),
               "second_s": cached.get("second_s"),
               "err": max((x["err"] for x in (cold, cached) if "err" in x), default=None)}
        for what, x in (("skipped", r), ("cold_error", cold), ("cached_error", cached)):
            key = "skipped" if what == "skipped" else "error"
            if key in x:
                row[what] = x[key]
        out_rows.append(row)
    doc = {"card": device, "date": datetime.date.today().isoformat(), "commit": commit(),
           "command": "python tools/first_call.py " + " ".join(sys.argv[1:] if argv is None else argv),
           "warm_command": " ".join(["python", *warm_cmd[1:]]), "warm_rc": warm.returncode,
           "warm_s": round(warm_s, 1), "rows": out_rows}
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")

    print(f"\n{'level':8s}{'dtype':>10s}{'shape':>7s}{'cold_s':>9s}{'cached_s':>9s}{'second_s':>9s}{'err':>10s}")
    for row in out_rows:
        dims = row["shape"] or []
        shape = dims[0] if len(set(dims)) == 1 else "x".join(map(str, dims)) if dims else "-"
        err = f"{row['err']:10.1e}" if row["err"] is not None else f"{'-':>10s}"
        print(f"{row['level']:8s}{row['dtype']:>10s}{shape:>7}{_fmt(row['cold_s'])} {_fmt(row['cached_s'])} "
              f"{_fmt(row['second_s'])}{err}")
    print(f"warm step: {warm_s:.1f} s (rc {warm.returncode}); written {args.out}")
    bad = [r for r in out_rows if "cold_error" in r or "cached_error" in r]
    return 1 if bad or warm.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
