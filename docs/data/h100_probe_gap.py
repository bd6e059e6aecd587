"""The GPU's time between kernels, from the timeline probe's stamps (probe_timeline2.patch):
v13 -> v13 and v13 -> cuBLAS -> v13, queued behind a hold so the host never makes the GPU wait.
gap(v13, v13) = v13's time after its last store + before its first CTA starts; the cuBLAS call in
between adds its whole time on the GPU (launch, run, drain)."""
import statistics
import sys

import numpy as np
from numba import cuda

from numba_gemm.api import transfer_dtype
from numba_gemm.measure import check
from numba_gemm.measure.bench import parse_levels
from numba_gemm.measure.cublas import Cublas
from numba_gemm.measure.timing import _hold_kernel

f16 = np.dtype(np.float16)
hold, blas = _hold_kernel(), Cublas()
for spec in sys.argv[1:]:
    name, shape = spec.split("@")
    M, N, K = map(int, shape.split(","))
    kw = dict(p.split("=") for p in name.split(":")[1:])
    bm, bn = int(kw["bm"]), int(kw["bn"])
    (lv,) = parse_levels(name)
    A, B, C = check.random_inputs(M, N, K, dtype=f16)
    dA, dB = (cuda.to_device(x.view(transfer_dtype(f16))) for x in (A, B))
    C1, C2, Cx = (cuda.to_device(C) for _ in range(3))

    def stamps(dC):
        Ch = dC.copy_to_host()
        return np.array([[Ch[i, j + 8 * s: j + 8 * s + 2].copy().view(np.uint64)[0] for s in range(5)]
                         for i in range(0, M, bm) for j in range(0, N, bn)], dtype=np.int64)

    for _ in range(3):
        lv.run(dA, dB, C1, 1.0, 0.0); blas.gemm(dA, dB, Cx, 1.0, 0.0, in_dtype=f16)
    res = {"v13>v13": [], "v13>cublas>v13": [], "v13 span": []}
    for _ in range(15):
        for key in ("v13>v13", "v13>cublas>v13"):
            hold(3_000_000)
            lv.run(dA, dB, C1, 1.0, 0.0)
            if key != "v13>v13":
                blas.gemm(dA, dB, Cx, 1.0, 0.0, in_dtype=f16)
            lv.run(dA, dB, C2, 1.0, 0.0)
            cuda.synchronize()
            t1, t2 = stamps(C1), stamps(C2)
            res[key].append((t2[:, 0].min() - t1[:, 4].max()) / 1e3)
            res["v13 span"].append((t1[:, 4].max() - t1[:, 0].min()) / 1e3)
    print(f"=== {spec} (µs, median [min max] of 15)")
    for k, v in res.items():
        print(f"  {k:16s} {statistics.median(v):7.2f} [{min(v):6.2f} {max(v):6.2f}]")
    print(f"  cuBLAS on the GPU, launch to drain: {statistics.median(res['v13>cublas>v13']) - statistics.median(res['v13>v13']):.2f}")
