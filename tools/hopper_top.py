#!/usr/bin/env python3
"""The top of the HGEMM ladder against its parents and cuBLAS, timed interleaved.

For each dtype and size: every level is checked against the float64 reference first (alpha,
beta != 0, then beta = 0 over a NaN-poisoned C), then the levels and cuBLAS are timed in
rounds of rotating order (A B C D, B C D A, ...) so that clock and temperature drift falls on
all of them alike; per level the median over the rounds of
  kernel  time per call with the host's launch cost hidden (numba_gemm.measure.timing.bench), and
  loop    back-to-back calls between two events (numba_gemm.measure.timing.loop): each call
          the level's run() with its whole host path in Python (plan, kernel lookup, arguments),
          which numba_gemm.gemm() pays once per operands and then replays as recorded launches
          (bench.py --suite shapes times that),
with the SM clock and board power (NVML) read after each level's turn. The table gives each
rung against its parent and against cuBLAS; --json keeps every round.

A level may be given with integer keyword arguments for its module's run(),
LEVEL:name=value[:name=value], e.g. v13:cluster=1 (v13's persistent grid without the cluster);
such a variant is compared with the level as shipped. --dtypes float32 times SGEMM levels the
same way against cuBLAS's SGEMM, e.g. k7,k8,k8sk:splits=4 (k8sk with 4 slices of K: its run()).
--check-shapes adds ragged shapes on which every competitor is checked (alpha/beta and
NaN-poisoned C) before any timing.

--out chooses C's type: float32 (default), same (A's 16-bit type, for the levels that write it,
and cuBLAS with the same output), or both: each competitor and cuBLAS run both ways, a 16-bit C
row labelled LEVEL/c16 and compared with the same level's float32 C as its "parent".

    python tools/hopper_top.py --levels v11,v12,v13 --sizes 2048,4096,8192 --json top.json
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np


def write_json(args, rows) -> None:
    from numba import cuda

    from numba_gemm.util import commit

    name = cuda.get_current_device().name
    meta = {"date": time.strftime("%Y-%m-%d"), "commit": commit(),
            "device": name.decode() if isinstance(name, bytes) else name,
            "command": " ".join(sys.argv), "rounds": args.rounds, "out": args.out}
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1)


def verdicts(lv, A, B, C, dA, dB, dC, rows, products) -> list:
    """lv's result on `rows` against float64, for each (alpha, beta) bench.py checks: C read
    (beta != 0), then C poisoned with NaN, which beta == 0 must never read. C's dtype (float32
    or A's 16-bit type) is the one the level writes; dC holds it (bf16 as uint16 bits).
    products: check.Products(A[rows], B), computed once for every level of the shape."""
    from numba import cuda

    from numba_gemm.api import transfer_dtype
    from numba_gemm.measure import check
    from numba_gemm.measure.bench import CHECKED

    bits = transfer_dtype(C.dtype)
    out = []
    for alpha, beta in CHECKED:
        cuda.to_device((C if beta else np.full_like(C, np.nan)).view(bits), to=dC)
        lv.run(dA, dB, dC, alpha, beta)
        got = dC.copy_to_host().view(C.dtype)[rows]
        out.append(check.verify(got, A[rows], B, C[rows] if beta else None, alpha, beta, lv.family,
                                out_dtype=C.dtype, products=products))
    return out


def _report(lv, what: str, vs: list) -> bool:
    ok = all(v.ok for v in vs)
    print(f"{lv.label} {what}: {'ok' if ok else 'WRONG'} ({'; '.join(map(str, vs))})", flush=True)
    return ok


class Competitor:
    """A level, or a level run with keyword arguments (`spec` LEVEL:name=value...)."""

    def __init__(self, spec: str, c16: bool = False, both: bool = False):
        from numba_gemm import registry
        from numba_gemm.measure.bench import run_keywords

        name, *changes = spec.split(":")
        self.level, self.c16 = registry.get(name), c16
        if c16 and not getattr(self.level.module, "C16", False):
            raise SystemExit(f"level {name} writes C as float32 only: --out same/both needs C16 levels")
        self.label = spec + ("/c16" if c16 and both else "")
        self.family = self.level.family
        self.parent = spec if c16 and both else name if changes else self.level.parent
        self.kwargs = dict(run_keywords(self.level, changes))

    def run(self, A, B, C, alpha, beta):
        self.level.module.run(A, B, C, alpha, beta, **self.kwargs)


def cublas_label(c16: bool) -> str:
    return "cublas/c16" if c16 else "cublas"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--levels", default="v11,v12,v13", help="comma list of HGEMM levels (default %(default)s)")
    p.add_argument("--sizes", default="2048,4096,8192", help="M = N = K values, or MxNxK (default %(default)s)")
    p.add_argument("--dtypes", default="float16,bfloat16", help="default %(default)s")
    p.add_argument("--rounds", type=int, default=8, help="interleaved rounds (default %(default)s)")
    p.add_argument("--reps", type=int, default=10, help="kernel-time calls per level and round")
    p.add_argument("--calls", type=int, default=20, help="back-to-back calls per loop")
    p.add_argument("--json", help="write every round here (rewritten after each size: a run cut "
                                  "short keeps the sizes it finished)")
    p.add_argument("--check-shapes", default="",
                   help="space-separated M,N,K shapes every competitor is checked on first")
    p.add_argument("--out", choices=("float32", "same", "both"), default="float32",
                   help="C's type: float32, A's 16-bit type (same), or both (default %(default)s)")
    args = p.parse_args()

    from numba import cuda

    from numba_gemm.api import transfer_dtype
    from numba_gemm.hgemm._common import DTYPES
    from numba_gemm.measure import check
    from numba_gemm.measure.cublas import Cublas
    from numba_gemm.measure.timing import bench, gpu_state, loop, median_or_none, rotation

    blas = Cublas()
    c16s = {"float32": (False,), "same": (True,), "both": (False, True)}[args.out]
    levels = [Competitor(s, c16, len(c16s) == 2) for s in args.levels.split(",") for c16 in c16s]
    dtypes = {np.dtype(d).name: np.dtype(d) for d in (np.float32, *DTYPES)}   # float32: the SGEMM levels
    rows, table = [], []

    def c_of(C, dtype, c16):        # the host C and a device C of the competitor's type
        C = C.astype(dtype) if c16 else C
        return C, cuda.to_device(C.view(transfer_dtype(C.dtype)))

    for dname in args.dtypes.split(","):
        for shape in args.check_shapes.split():
            M, N, K = (int(x) for x in shape.split(","))
            A, B, C = check.random_inputs(M, N, K, dtype=dtypes[dname])
            dA = cuda.to_device(A.view(transfer_dtype(dtypes[dname])))
            dB = cuda.to_device(B.view(transfer_dtype(dtypes[dname])))
            products = check.Products(A, B)
            for lv in levels:
                Cx, dC = c_of(C, dtypes[dname], lv.c16)
                if not _report(lv, f"{M}x{N}x{K} {dname}",
                               verdicts(lv, A, B, Cx, dA, dB, dC, np.arange(M), products)):
                    return 1
    for dname in args.dtypes.split(","):
        dtype = dtypes[dname]
        for spec in args.sizes.split(","):
            M, N, K = (int(x) for x in spec.split("x")) if "x" in spec else (int(spec),) * 3
            A, B, C = check.random_inputs(M, N, K, dtype=dtype)
            dA = cuda.to_device(A.view(transfer_dtype(dtype)))
            dB = cuda.to_device(B.view(transfer_dtype(dtype)))
            dCs = {c16: c_of(C, dtype, c16) for c16 in c16s}
            rows_checked = check.rows_to_check(M, 256, np.random.default_rng(0))
            products = check.Products(A[rows_checked], B)
            runs = {cublas_label(c16): (lambda c16=c16: blas.gemm(dA, dB, dCs[c16][1], 1.0, 0.0,
                                                                 in_dtype=dtype, c16=c16))
                    for c16 in c16s}
            for lv in levels:
                Cx, dC = dCs[lv.c16]
                if not _report(lv, f"{M}x{N}x{K} {dname}",
                               verdicts(lv, A, B, Cx, dA, dB, dC, rows_checked, products)):
                    return 1
                runs[lv.label] = (lambda lv=lv, dC=dC: lv.run(dA, dB, dC, 1.0, 0.0))
            names = list(runs)
            for fn in runs.values():   # warm: modules loaded, clocks up
                loop(fn, calls=5, reps=1, warmup=1)
            per = {n: {"kernel": [], "loop": [], "clock": [], "power": []} for n in names}
            for r in range(args.rounds):
                for n in rotation(names, r):
                    per[n]["kernel"].append(bench(runs[n], reps=args.reps, warmup=1).median_ms)
                    per[n]["loop"].append(loop(runs[n], calls=args.calls, reps=1, warmup=0).median_ms)
                    clock, power = gpu_state()
                    per[n]["clock"].append(clock)
                    per[n]["power"].append(power)
            flops = 2.0 * M * N * K
            for n in names:
                d = per[n]
                med = {k: statistics.median(d[k]) for k in ("kernel", "loop")}
                rows.append({"level": n, "M": M, "N": N, "K": K, "dtype": dname,
                             "kernel_ms": med["kernel"], "loop_ms": med["loop"],
                             "kernel_tflops": flops / med["kernel"] / 1e9,
                             "loop_tflops": flops / med["loop"] / 1e9,
                             "sm_clock_mhz": median_or_none(d["clock"]), "power_w": median_or_none(d["power"]),
                             "rounds": d})
            base = {r["level"]: r for r in rows if (r["M"], r["N"], r["K"], r["dtype"]) == (M, N, K, dname)}
            for lv in levels:
                r, blas_r = base[lv.label], base[cublas_label(lv.c16)]   # cuBLAS with the same C type
                parent = base.get(lv.parent)
                table.append((dname, f"{M}x{N}x{K}", lv.label, r["kernel_tflops"],
                              blas_r["kernel_ms"] / r["kernel_ms"], blas_r["loop_ms"] / r["loop_ms"],
                              parent["kernel_ms"] / r["kernel_ms"] if parent else None,
                              parent["loop_ms"] / r["loop_ms"] if parent else None,
                              r["sm_clock_mhz"], r["power_w"]))
            for c16 in c16s:
                c = base[cublas_label(c16)]
                table.append((dname, f"{M}x{N}x{K}", cublas_label(c16), c["kernel_tflops"], 1.0, 1.0,
                              None, None, c["sm_clock_mhz"], c["power_w"]))
            if args.json:             # after every size: a run cut short keeps what it measured
                write_json(args, rows)
    f = lambda x, nd=3: "-" if x is None else f"{x:.{nd}f}"
    print(f"{'dtype':9} {'shape':15} {'level':15} {'TFLOPS':>7} {'xcuBLAS':>8} {'(loop)':>7} "
          f"{'xparent':>8} {'(loop)':>7} {'MHz':>5} {'W':>4}")
    for d, s, n, tf, xc, xcl, xp, xpl, mhz, w in table:
        print(f"{d:9} {s:15} {n:15} {tf:7.1f} {f(xc):>8} {f(xcl):>7} {f(xp):>8} {f(xpl):>7} "
              f"{f(mhz, 0):>5} {f(w, 0):>4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
