#!/usr/bin/env python3
"""Do a cluster level's planned CTAs all fit on the GPU at once? Needs a GPU; launches nothing.

A split-K plan such as v11sl's, v11t's or v11gv's sizes the grid to fill the SMs once: S slices
of each tile, one cluster of S CTAs per tile. But a cluster's CTAs must be resident together on
one GPC, and the GPCs need not hold a whole number of clusters: on an H100, clusters of 4 of
v11t's 64x64 tile fit 120 of the 132 SMs, so a plan of 128 CTAs took a second wave
(docs/RESULTS.md, thirty-sixth run). The plans now lower S until every cluster fits
(splitk.resident_splits); a forced `splits` is kept, so LEVEL:splits=S shows a plan as the SMs
alone would size it. For each level and shape this script records the launches run() would make
(no kernel runs), then asks the driver (cuOccupancyMaxActiveClusters) how many clusters of each
size 1..8 of that kernel, with its block and shared memory, fit at once, and says how many waves
the planned grid then takes.

    python tools/cluster_residency.py                              # v11sl, v11t, v11gv at their suite shapes
    python tools/cluster_residency.py --level v11t,v11t:splits=8 --shape 16,1024,4096 --json out.json
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))                   # the checkout, before any installed copy
from numba_gemm.util import ceil_div, commit  # noqa: E402

SIZES = range(1, 9)                             # the portable cluster sizes


def suite_shapes(lv) -> list[tuple[int, int, int]]:
    """The shape suite's shapes the level serves."""
    from numba_gemm.measure.shapes import SUITE

    return [(M, N, K) for _, M, N, K in SUITE if lv.unsupported(M, N, K) is None]


def recorded(lv, M: int, N: int, K: int, dtype):
    """The launches lv's run() makes at M x N x K on zeroed device operands, recorded, not issued."""
    import numpy as np
    from numba import cuda

    from numba_gemm.runtime import launch

    dA, dB = (cuda.to_device(np.zeros(s, np.uint16 if dtype.name == "bfloat16" else dtype)) for s in ((M, K), (K, N)))
    dC = cuda.device_array((M, N), np.float32)
    with launch.recording() as rec:
        lv.run(dA, dB, dC, 1.0, 0.0)
    return rec.launches


def residency(L) -> dict:
    """One recorded launch: its grid, cluster and what fits of it at once."""
    from numba_gemm.runtime import driver

    ctas, cluster = L.grid[0] * L.grid[1] * L.grid[2], L.cluster or 1
    fits = {c: driver.max_active_clusters(L.fn, L.block, L.smem, c) for c in SIZES}
    slots, resident = fits[1], fits[cluster] * cluster     # clusters of 1: every SM's CTAs
    return {"ctas": ctas, "threads": L.block[0] * L.block[1] * L.block[2], "smem": L.smem, "cluster": cluster,
            "resident_ctas": {c: n * c for c, n in fits.items()}, "slots": slots,
            "waves_by_sms": ceil_div(ctas, slots), "waves": ceil_div(ctas, max(resident, 1))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--level", default="v11sl,v11t,v11gv",
                   help="comma list of levels, with run() keywords as bench.py takes them (default %(default)s)")
    p.add_argument("--shape", action="append", default=[],
                   help="M,N,K (repeatable; default: the shape suite's shapes each level serves)")
    p.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"], help="default %(default)s")
    p.add_argument("--json", help="write the rows here, with the card, date, commit and command")
    args = p.parse_args(argv)
    from numba_gemm.runtime import gpu

    if gpu.simulator_requested() or not gpu.has_gpu():
        print("cluster_residency.py asks the driver about a GPU's SMs: no CUDA GPU here (or "
              "NUMBA_ENABLE_CUDASIM is set)", file=sys.stderr)
        return 2
    import numpy as np
    from numba import cuda

    from numba_gemm.hgemm import _common as cm
    from numba_gemm.measure.bench import parse_levels

    dtype, sms, rows = np.dtype(args.dtype if args.dtype == "float16" else cm.BF16), cm.sm_count(), []
    print(f"{'level':<14} {'M×N×K':>16} {'CTAs':>5} {'cluster':>7} {'resident':>8} {'waves':>5} "
          f"{'by SMs':>6}   CTAs resident in clusters of 1..8")
    for name in args.level.split(","):
        (lv,) = parse_levels(name)
        shapes = [tuple(map(int, s.split(","))) for s in args.shape] or suite_shapes(lv)
        for M, N, K in shapes:
            if lv.unsupported(M, N, K):
                print(f"{name:<14} {M}×{N}×{K}: refused ({lv.unsupported(M, N, K)})")
                continue
            for L in recorded(lv, M, N, K, dtype):
                r = residency(L)
                rows.append({"level": name, "M": M, "N": N, "K": K, **r})
                flag = "  <- more waves than the SMs need" if r["waves"] > r["waves_by_sms"] else ""
                print(f"{name:<14} {f'{M}×{N}×{K}':>16} {r['ctas']:>5} {r['cluster']:>7} "
                      f"{r['resident_ctas'][r['cluster']]:>8} {r['waves']:>5} {r['waves_by_sms']:>6}   "
                      + " ".join(str(n) for n in r["resident_ctas"].values()) + flag)
    if args.json:
        card = cuda.get_current_device().name
        meta = {"card": card.decode() if isinstance(card, bytes) else card, "sms": sms,
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "commit": commit(), "command": "python tools/cluster_residency.py " + " ".join(argv or sys.argv[1:])}
        Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
