"""Microbenchmarks that price the cycle ledger on the GPU at hand.

    python -m numba_gemm.measure.microbench --out numba_gemm/data/h200_costs.json

A full run measures every load kind in SM cycles per warp-level instruction, the SM clock and
the copy bandwidth (numba_gemm.measure.load_costs: Numba kernels), then the tensor-core ceilings and
the ldmatrix prices (numba_gemm.measure.tensor_ceilings: native kernels), and writes them as one costs
file, the input of numba_gemm.explain.ledgers.card.

    python -m numba_gemm.measure.microbench --tensor          # tensor ceilings and ldmatrix prices only
    python -m numba_gemm.measure.microbench --tensor ldmatrix_x4,ldmatrix_x4_trans \
        --update numba_gemm/data/h200_costs.json      # measure some, merge them into a costs file
    python -m numba_gemm.measure.microbench --kinds ldg128_x16 --update numba_gemm/data/h200_costs.json

In the Numba CUDA simulator (no GPU) `run_all(smoke_only=True)` runs each kernel once at a tiny
size and checks the values it loaded, so the index patterns are tested in CI; the timings
there mean nothing and are not written.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone

if __name__ == "__main__":   # run as a program: choose the simulator before numba is imported.
    from numba_gemm.runtime.gpu import use_simulator_if_no_gpu   # (Imported, the caller has chosen.)

    use_simulator_if_no_gpu()

from numba_gemm.measure.load_costs import (KINDS, SIMULATOR, UNROLL, device_facts, measure_clock,  # noqa: E402
                                   measure_copy_bandwidth, measure_kinds, smoke)
from numba_gemm.measure.tensor_ceilings import (TENSOR, TENSOR_METHOD, TENSOR_NAMES,  # noqa: E402
                                        format_tensor, measure_tensor_into)


def _write_json(path: str, data: dict) -> None:
    with open(path, "w") as fh:
        json.dump(data, fh, indent=1)
        fh.write("\n")


def run_tensor(out_path: str | None = None, quiet: bool = False, names=None) -> dict:
    """The tensor-core ceilings and the ldmatrix prices (or `names` of them); JSON at out_path."""
    import numba

    data = {"schema": 1, **device_facts(),
            "tensor_tflops": {}, "tensor": {}, "tensor_method": TENSOR_METHOD,
            "numba": numba.__version__,
            "measured_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")}
    measure_tensor_into(data, names)
    if out_path:
        _write_json(out_path, data)
    if not quiet:
        print(format_tensor(data))
    return data


def run_all(out_path: str | None = None, kinds=None, smoke_only: bool | None = None,
            quiet: bool = False) -> dict:
    """Measure every kind (GPU) or smoke-test every kernel (simulator); write JSON if asked."""
    if smoke_only is None:
        smoke_only = SIMULATOR
    if smoke_only:
        res = smoke(kinds)
        if not quiet:
            for k, v in res.items():
                print(f"{k:16s} {v}")
            print("simulator: index patterns checked; no timings (run on a GPU to measure)")
        return {"smoke": res}
    t_start = time.time()
    facts = device_facts()
    costs, spread, problems = measure_kinds(kinds)
    clock = measure_clock()
    bw = measure_copy_bandwidth()
    tensor = {"tensor_tflops": {}, "tensor": {}, "not_measured": problems}
    if kinds is None:
        measure_tensor_into(tensor)
    import numba
    data = {
        "schema": 1,
        **facts,
        "clock_ghz": round(clock, 4),
        "copy_bandwidth_Bps": round(bw, -6),
        "unit": "SM cycles per warp-level instruction at full occupancy (median over SMs)",
        "costs": costs,
        "spread_min_max_sms": spread,
        "not_measured": problems,
        "tensor_tflops": tensor["tensor_tflops"],
        # the ledgers' tensor ceiling for the mma.sync levels (numba_gemm.explain.ledgers.card reads it)
        **({"tensor_flops": tensor["tensor"]["mma_sync"]["tflops"] * 1e12} if "mma_sync" in tensor["tensor"] else {}),
        "tensor": tensor["tensor"],
        "tensor_method": TENSOR_METHOD,
        "method": (f"{UNROLL} independent loads per loop iteration, each consumed by one FADD; "
                   f"256 threads per block, {facts['max_threads_per_sm'] // 256} blocks per SM; "
                   "clock64 span per SM / warp instructions on that SM; global loads from a "
                   "32 KB L1-resident array; copy bandwidth = 2 × bytes / time of a 1 GiB "
                   "device-to-device copy (10 copies per event pair, median of 5 pairs)"),
        "numba": numba.__version__,
        "measured_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "seconds": round(time.time() - t_start, 1),
    }
    if out_path:
        _write_json(out_path, data)
    if not quiet:
        print(format_table(data))
    return data


SEED_4090 = {"lds_free": 2.686, "lds_bcast": 0.534, "ldg": 1.94}


def format_table(data: dict) -> str:
    lines = [f"{data['device']} (cc {data['cc'][0]}.{data['cc'][1]}, {data['sms']} SMs): "
             f"clock {data['clock_ghz']:.3f} GHz, copy {data['copy_bandwidth_Bps'] / 1e12:.2f} TB/s",
             f"{'kind':16s} {'cycles':>8s} {'min':>8s} {'max':>8s} {'4090 (seed)':>12s}"]
    for k, v in data["costs"].items():
        lo, hi, _ = data["spread_min_max_sms"][k]
        seed = SEED_4090.get(k)
        lines.append(f"{k:16s} {v:8.3f} {lo:8.3f} {hi:8.3f} {seed if seed else '':>12}")
    for k, why in data.get("not_measured", {}).items():
        if k not in TENSOR_NAMES:
            lines.append(f"{k:16s} not measured: {why}")
    lines.append(f"({data['seconds']} s; unit: {data['unit']})")
    if data.get("tensor"):
        lines.append(format_tensor(data))
    return "\n".join(lines)


def update_file(path: str, new: dict) -> dict:
    """Merge the measurements of `new` (a --kinds or --tensor run) into the costs file at `path`,
    keeping everything else; each merged entry is dated in "updated"."""
    with open(path) as fh:
        data = json.load(fh)
    if (data.get("device"), data.get("sms")) != (new["device"], new["sms"]):
        raise ValueError(f"{path} was measured on {data.get('device')}, this is {new['device']}")
    stamp = new["measured_utc"]
    for kind, cost in new.get("costs", {}).items():
        data["costs"][kind] = cost
        data["spread_min_max_sms"][kind] = new["spread_min_max_sms"][kind]
        data.setdefault("updated", {})[kind] = stamp
    for name, r in new.get("tensor", {}).items():
        data.setdefault("tensor", {})[name] = r
        data.setdefault("updated", {})[name] = stamp
        if name in TENSOR:
            data.setdefault("tensor_tflops", {})[name] = new["tensor_tflops"][name]
            if name == "mma_sync":
                data["tensor_flops"] = r["tflops"] * 1e12
    for name in (*new.get("costs", {}), *new.get("tensor", {})):
        data.get("not_measured", {}).pop(name, None)
    if new.get("tensor"):
        data["tensor_method"] = new["tensor_method"]
    _write_json(path, data)
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="write the costs JSON here (e.g. numba_gemm/data/h200_costs.json)")
    ap.add_argument("--update", metavar="FILE",
                    help="measure only --kinds or --tensor and merge them into this costs file, "
                         "keeping its other entries (each merged one dated under 'updated')")
    ap.add_argument("--kinds", help="comma-separated subset of: " + ", ".join(KINDS))
    ap.add_argument("--smoke", action="store_true", help="only run each kernel once and check it")
    ap.add_argument("--tensor", nargs="?", const=",".join(TENSOR_NAMES), metavar="NAMES",
                    help="only the tensor-core ceilings and ldmatrix prices (default: all of "
                         f"{', '.join(TENSOR_NAMES)}): needs a GPU")
    a = ap.parse_args(argv)
    if a.update and not (a.kinds or a.tensor):
        ap.error("--update merges a partial run: give --kinds or --tensor")
    if a.tensor:
        if SIMULATOR:
            ap.error("the tensor-core ceilings are native kernels: they need a GPU")
        names = a.tensor.split(",")
        unknown = [n for n in names if n not in TENSOR_NAMES]
        if unknown:
            ap.error(f"unknown tensor measurements: {unknown} (one of {', '.join(TENSOR_NAMES)})")
        data = run_tensor(a.out, names=names)
        if a.update:
            update_file(a.update, data)
        return 0 if set(data["tensor"]) == set(names) else 1
    kinds = a.kinds.split(",") if a.kinds else None
    if kinds:
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            ap.error(f"unknown kinds: {unknown}")
    if a.update and (a.smoke or SIMULATOR):
        ap.error("--update needs a GPU measurement")
    res = run_all(a.out, kinds, smoke_only=True if a.smoke else None)
    if "smoke" in res:
        bad = {k: v for k, v in res["smoke"].items() if v != "ok" and not v.startswith("skipped")}
        return 1 if bad else 0
    if a.update:
        update_file(a.update, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
