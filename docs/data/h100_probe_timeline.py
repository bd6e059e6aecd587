"""Read the timeline probe (h100_probe_timeline.patch) out of C after v13 ran with it.

    python h100_probe_timeline.py LEVEL@M,N,K ...        the last of five calls, per CTA
    python h100_probe_timeline.py --gap LEVEL@M,N,K ...  the GPU's time between two calls

LEVEL names a tile, e.g. v13:bm=64:bn=64:along_n=1. Per CTA the patch stamps %globaltimer (ns)
in consumer 0's thread 0 (row 0 of its tile's C: its start, first and last full stage, last
MMA, stores issued; then its rank, tile and smid) and in thread 0 and the producer (row 8: ring
initialised, cluster barrier passed, setmaxnreg, first stage armed and issued).

--gap queues, behind a 3 ms hold so that the host never keeps the GPU waiting, v13 then v13
again, and v13, cuBLAS, v13: the second call's first CTA start less the first call's last store
is what lies between two v13 calls on the GPU; with cuBLAS between them, the difference is
cuBLAS's whole time on the GPU, from its launch to its drain.
"""
import statistics
import sys

import numpy as np
from numba import cuda

from numba_gemm.api import transfer_dtype
from numba_gemm.measure import check
from numba_gemm.measure.bench import parse_levels

F16 = np.dtype(np.float16)
PERCENTILES = [0, 10, 50, 90, 100]


class Probe:
    """One level at one shape, its inputs on the device, and the stamps its calls leave in C."""

    def __init__(self, spec: str):
        name, shape = spec.split("@")
        self.M, self.N, self.K = map(int, shape.split(","))
        kw = dict(p.split("=") for p in name.split(":")[1:])
        self.bm, self.bn = int(kw["bm"]), int(kw["bn"])
        (self.lv,) = parse_levels(name)
        A, B, self.C = check.random_inputs(self.M, self.N, self.K, dtype=F16)
        self.dA, self.dB = (cuda.to_device(x.view(transfer_dtype(F16))) for x in (A, B))

    def run(self, dC):
        self.lv.run(self.dA, self.dB, dC, 1.0, 0.0)

    def stamps(self, dC) -> np.ndarray:
        """One row per tile: its 16 stamps (rows 0 and 8 of the tile, 8 each)."""
        Ch = dC.copy_to_host()
        return np.array([[Ch[r, j + 8 * s: j + 8 * s + 2].copy().view(np.uint64)[0]
                          for r in (i, i + 8) for s in range(8)]
                         for i in range(0, self.M, self.bm) for j in range(0, self.N, self.bn)],
                        dtype=np.int64)


def timeline(spec: str):
    p = Probe(spec)
    dC = cuda.to_device(p.C)
    for _ in range(5):
        p.run(dC)
    cuda.synchronize()
    t = p.stamps(dC)
    t0 = t[:, 0].min()
    rel = (t[:, :5] - t0) / 1e3   # µs
    pro = (t[:, [8, 9, 10, 11, 12, 15, 13, 14]] - t0) / 1e3 if t[:, 8].any() else np.zeros((len(t), 0))
    print(f"=== {spec}: {len(t)} tiles; µs after the first CTA's start, percentiles 0 10 50 90 100")
    names = ["start", "first stage", "last stage", "last MMA", "stored"]
    pnames = ["t0 start", "t0 ring init", "t0 cluster", "prod maxnreg", "prod 1st arr", "prod 1st tma",
              "cons cluster", "cons maxnreg"]
    steps = ["start->first", "first->last", "last->MMA", "MMA->stored"]
    for nm, col in list(zip(names, rel.T)) + list(zip(pnames, pro.T)) + list(zip(steps, np.diff(rel, axis=1).T)):
        print(f"  {nm:12s} " + " ".join(f"{x:7.2f}" for x in np.percentile(col, PERCENTILES)))
    print(f"  span {rel[:, 4].max():.2f} µs; per CTA: start first last mma stored (µs), smid rank tile")
    for r, q, row in zip(rel, pro, t):
        print("   " + " ".join(f"{x:7.2f}" for x in r) + f"  {row[7] & 0xffffffff:4d} {row[5]} {row[6]} |"
              + " ".join(f"{x:7.2f}" for x in q))


def gap(spec: str, hold, blas, trials: int = 15):
    p = Probe(spec)
    C1, C2, Cx = (cuda.to_device(p.C) for _ in range(3))
    for _ in range(3):
        p.run(C1)
        blas.gemm(p.dA, p.dB, Cx, 1.0, 0.0, in_dtype=F16)
    res = {"v13>v13": [], "v13>cublas>v13": [], "v13 span": []}
    for _ in range(trials):
        for key in ("v13>v13", "v13>cublas>v13"):
            hold(3_000_000)
            p.run(C1)
            if key != "v13>v13":
                blas.gemm(p.dA, p.dB, Cx, 1.0, 0.0, in_dtype=F16)
            p.run(C2)
            cuda.synchronize()
            t1, t2 = p.stamps(C1), p.stamps(C2)
            res[key].append((t2[:, 0].min() - t1[:, 4].max()) / 1e3)
            res["v13 span"].append((t1[:, 4].max() - t1[:, 0].min()) / 1e3)
    print(f"=== {spec} (µs, median [min max] of {trials})")
    for k, v in res.items():
        print(f"  {k:16s} {statistics.median(v):7.2f} [{min(v):6.2f} {max(v):6.2f}]")
    cublas = statistics.median(res["v13>cublas>v13"]) - statistics.median(res["v13>v13"])
    print(f"  cuBLAS on the GPU, launch to drain: {cublas:.2f}")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[:1] == ["--gap"]:
        from numba_gemm.measure.cublas import Cublas
        from numba_gemm.measure.timing import _hold_kernel

        hold, blas = _hold_kernel(), Cublas()
        for spec in args[1:]:
            gap(spec, hold, blas)
    else:
        for spec in args:
            timeline(spec)
