"""Read the timeline probe (probe_timeline.patch) out of C: per CTA, %globaltimer at its start,
its first and last full stage, its last MMA, its store done; its smid, rank and tile."""
import sys

import numpy as np
from numba import cuda

from numba_gemm.api import transfer_dtype
from numba_gemm.measure import check
from numba_gemm.measure.bench import parse_levels

f16 = np.dtype(np.float16)
for spec in sys.argv[1:]:
    name, shape = spec.split("@")
    M, N, K = map(int, shape.split(","))
    kw = dict(p.split("=") for p in name.split(":")[1:])
    bm, bn = int(kw["bm"]), int(kw["bn"])
    (lv,) = parse_levels(name)
    A, B, C = check.random_inputs(M, N, K, dtype=f16)
    dA, dB = (cuda.to_device(x.view(transfer_dtype(f16))) for x in (A, B))
    dC = cuda.to_device(C)
    for _ in range(5):
        lv.run(dA, dB, dC, 1.0, 0.0)
    cuda.synchronize()
    Ch = dC.copy_to_host()
    rows = []
    for i in range(0, M, bm):
        for j in range(0, N, bn):
            v = [Ch[r, j + 8 * s: j + 8 * s + 2].copy().view(np.uint64)[0] for r in (i, i + 8) for s in range(8)]
            rows.append(np.array(v))
    t = np.array(rows, dtype=np.int64)
    t0 = t[:, 0].min()
    rel = (t[:, :5] - t0) / 1e3   # µs
    print(f"=== {spec}: {len(t)} tiles; µs after the first CTA's start, percentiles 0 10 50 90 100")
    pro = (t[:, [8, 9, 10, 11, 12, 15, 13, 14]] - t0) / 1e3 if t[:, 8].any() else np.zeros((len(t), 0))
    names = ["start", "first stage", "last stage", "last MMA", "stored"]
    pnames = ["t0 start", "t0 ring init", "t0 cluster", "prod maxnreg", "prod 1st arr", "prod 1st tma",
              "cons cluster", "cons maxnreg"]
    for nm, col in list(zip(names, rel.T)) + list(zip(pnames, pro.T)):
        q = np.percentile(col, [0, 10, 50, 90, 100])
        print(f"  {nm:12s} " + " ".join(f"{x:7.2f}" for x in q))
    d = np.diff(rel, axis=1)
    for k, nm in enumerate(["start->first", "first->last", "last->MMA", "MMA->stored"]):
        q = np.percentile(d[:, k], [0, 10, 50, 90, 100])
        print(f"  {nm:12s} " + " ".join(f"{x:7.2f}" for x in q))
    print(f"  span {rel[:, 4].max():.2f} µs; per CTA: start first last mma stored (µs), smid rank tile")
    for r, p, row in zip(rel, pro, t):
        print("   " + " ".join(f"{x:7.2f}" for x in r) + f"  {row[7] & 0xffffffff:4d} {row[5]} {row[6]} |"
              + " ".join(f"{x:7.2f}" for x in p))
