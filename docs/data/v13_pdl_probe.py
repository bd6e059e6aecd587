"""PROBE: v13 with programmatic dependent launch (pdl=1) against main's v13 and cuBLAS.

1. A chain: C1 = A·B (fp16 C), then D = C1·B2, launched back to back 40 times with no sync,
   pdl=1 against pdl=0: D must be bitwise the same every time (the second launch waits for the
   first's C1).
2. Per spec@shape: pdl=1 output bitwise equal to pdl=0's; then back-to-back loops (20 calls
   between events) and isolated kernel time, interleaved, v13 / v13:pdl=1 / cuBLAS.
"""
import json
import sys

import numpy as np
from numba import cuda

from numba_gemm.measure import check, timing
from numba_gemm.measure.bench import parse_levels
from numba_gemm.measure.cublas import Cublas
from numba_gemm.runtime import launch
from pdl_probe import caller, stream_loop     # beside this file: the loops of docs/data/pdl_probe.py


def record(lv, dA, dB, dC):
    with launch.recording() as rec:
        lv.run(dA, dB, dC, 1.0, 0.0)
    return rec.launches


def chain():
    rng = np.random.default_rng(1)
    M, N, K = 1024, 512, 2048
    A = (rng.uniform(-1, 1, (M, K)) / 8).astype(np.float16)
    B = (rng.uniform(-1, 1, (K, N)) / 8).astype(np.float16)
    B2 = (rng.uniform(-1, 1, (N, N))).astype(np.float16)
    dA, dB, dB2 = map(cuda.to_device, (A, B, B2))
    outs = {}
    for pdl in (0, 1):
        (lv,) = parse_levels(f"v13:bm=128:bn=128:pdl={pdl}")
        dC1 = cuda.to_device(np.full((M, N), np.nan, np.float16))
        dD = cuda.to_device(np.full((M, N), np.nan, np.float32))
        first, second = record(lv, dA, dB, dC1), record(lv, dC1, dB2, dD)
        got = []
        for i in range(40):
            cuda.to_device(np.full((M, N), np.nan, np.float16), to=dC1)
            cuda.synchronize()
            caller(first)()
            caller(second)()
            got.append(dD.copy_to_host())
        outs[pdl] = got
    ref = outs[0][0]
    ok = all(np.isfinite(ref).all() and (g.tobytes() == ref.tobytes()) for g in outs[0] + outs[1])
    print(f"chain 1024x512x2048 then x512: pdl=0 and pdl=1, 40 runs each: {'bitwise equal' if ok else 'DIFFERENT'}")
    return ok


def main(specs):
    ok = chain()
    rows = []
    blas = Cublas()
    s = cuda.stream()
    from numba_gemm.runtime.driver import stream_handle
    hs = stream_handle(s)
    for spec in specs:
        lvspec, shape = spec.split("@")
        M, N, K = map(int, shape.split(","))
        A, B, C = check.random_inputs(M, N, K, np.float16)
        dA, dB = cuda.to_device(A), cuda.to_device(B)
        (l0,) = parse_levels(lvspec)
        (l1,) = parse_levels(lvspec + ":pdl=1")
        dC0, dC1 = cuda.to_device(np.full((M, N), np.nan, np.float32)), cuda.to_device(np.full((M, N), np.nan, np.float32))
        r0, r1 = record(l0, dA, dB, dC0), record(l1, dA, dB, dC1)
        c0, c1 = caller(r0), caller(r1)
        for _ in range(3):
            c0(); c1()
        out0, out1 = dC0.copy_to_host(), dC1.copy_to_host()
        v = check.verify(out0, A, B, C, 1.0, 0.0, "hgemm")
        same = out0.tobytes() == out1.tobytes()
        ok &= bool(v.ok and same)
        cb = lambda: blas.gemm(dA, dB, dC0, 1.0, 0.0, in_dtype=np.dtype(np.float16))
        fns = {"main": c0, "pdl": c1, "cublas": cb}
        lp = timing.interleaved(fns, time=stream_loop(None), reps=60)
        ls = timing.interleaved({"main": caller(r0, hs), "pdl": caller(r1, hs)}, time=stream_loop(s), reps=60)
        kt = timing.interleaved(fns)
        row = dict(spec=spec, exact=bool(v.ok), pdl_same_bits=same,
                   **{f"loop_{n}_us": lp[n].timing.median_ms * 1e3 for n in fns},
                   **{f"loop_stream_{n}_us": ls[n].timing.median_ms * 1e3 for n in ls},
                   **{f"kernel_{n}_us": kt[n].timing.median_ms * 1e3 for n in fns},
                   mhz=lp["main"].sm_clock_mhz)
        rows.append(row)
        print(f"{spec}: exact {v.ok} same {same} | loop µs main {row['loop_main_us']:.2f} pdl {row['loop_pdl_us']:.2f} "
              f"cuBLAS {row['loop_cublas_us']:.2f} | own stream: main {row['loop_stream_main_us']:.2f} "
              f"pdl {row['loop_stream_pdl_us']:.2f} | kernel µs main {row['kernel_main_us']:.2f} "
              f"pdl {row['kernel_pdl_us']:.2f} cuBLAS {row['kernel_cublas_us']:.2f} | {row['mhz']} MHz", flush=True)
    return ok, rows


if __name__ == "__main__":
    out = sys.argv[1]
    ok, rows = main(sys.argv[2:])
    json.dump(rows, open(out, "w"), indent=1)
    sys.exit(0 if ok else 1)
