"""Programmatic dependent launch (PDL), level by level: each spec@shape's recorded launches
with the attribute as shipped and the same launches without it (the kernels' griddepcontrol
instructions are no-ops then), and cuBLAS, interleaved: back-to-back loops (20 calls between
events) on the legacy default stream and on a stream of their own, and isolated kernel time.
Both outputs must be exact and the same bits.

    python docs/data/pdl_probe.py OUT.json v11@1024,1024,1024 v11t@64,4096,4096 ...
"""
import json
import sys

import numpy as np
from numba import cuda

from numba_gemm.measure import check, timing
from numba_gemm.measure.bench import parse_levels
from numba_gemm.measure.cublas import Cublas
from numba_gemm.runtime import launch
from numba_gemm.runtime.driver import stream_handle


def recorded(lv, dA, dB, dC):
    with launch.recording() as rec:
        lv.run(dA, dB, dC, 1.0, 0.0)
    return rec.launches


def without_pdl(launches):
    return [launch.Launch(L.fn, L.grid, L.block, L.smem, L.params, L.keep, L.cluster, False) for L in launches]


def caller(launches, stream=0):
    def call():
        for L in launches:
            L(stream)
    return call


def stream_loop(stream):
    """timing.loop on `stream` (None: the legacy default stream), as timing.interleaved calls a timer."""
    return lambda fn, reps, warmup, flush_l2: timing.loop(fn, reps=max(reps, 1), warmup=warmup, stream=stream)


def probe(spec, blas, s):
    lvspec, shape = spec.split("@")
    M, N, K = map(int, shape.split(","))
    A, B, C = check.random_inputs(M, N, K, np.float16)
    dA, dB = cuda.to_device(A), cuda.to_device(B)
    (lv,) = parse_levels(lvspec)
    dC0, dC1 = (cuda.to_device(np.full((M, N), np.nan, np.float32)) for _ in range(2))
    on = recorded(lv, dA, dB, dC1)
    off = without_pdl(recorded(lv, dA, dB, dC0))
    for _ in range(3):
        caller(off)()
        caller(on)()
    out0, out1 = dC0.copy_to_host(), dC1.copy_to_host()
    exact = check.verify(out1, A, B, C, 1.0, 0.0, "hgemm").ok
    same = out0.tobytes() == out1.tobytes()
    fns = {"off": caller(off), "pdl": caller(on),
           "cublas": lambda: blas.gemm(dA, dB, dC0, 1.0, 0.0, in_dtype=np.dtype(np.float16))}
    hs = stream_handle(s)
    lp = timing.interleaved(fns, time=stream_loop(None), reps=60)
    ls = timing.interleaved({"off": caller(off, hs), "pdl": caller(on, hs)}, time=stream_loop(s), reps=60)
    kt = timing.interleaved(fns)
    row = dict(spec=spec, launches=len(on), pdl_launches=sum(L.pdl for L in on), exact=bool(exact),
               same_bits=same, **{f"loop_{n}_us": lp[n].timing.median_ms * 1e3 for n in fns},
               **{f"loop_stream_{n}_us": ls[n].timing.median_ms * 1e3 for n in ls},
               **{f"kernel_{n}_us": kt[n].timing.median_ms * 1e3 for n in fns},
               mhz=lp["pdl"].sm_clock_mhz, watts=lp["pdl"].power_w)
    print(f"{spec}: exact {exact} same {same} | loop µs off {row['loop_off_us']:.2f} pdl {row['loop_pdl_us']:.2f} "
          f"cuBLAS {row['loop_cublas_us']:.2f} | own stream off {row['loop_stream_off_us']:.2f} "
          f"pdl {row['loop_stream_pdl_us']:.2f} | kernel µs off {row['kernel_off_us']:.2f} "
          f"pdl {row['kernel_pdl_us']:.2f} cuBLAS {row['kernel_cublas_us']:.2f} | {row['mhz']} MHz", flush=True)
    return row


def main(out, specs):
    blas, s = Cublas(), cuda.stream()
    rows = []
    for spec in specs:
        rows.append(probe(spec, blas, s))
        json.dump(rows, open(out, "w"), indent=1)     # what is done survives a cut
    return all(r["exact"] and r["same_bits"] for r in rows)


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1], sys.argv[2:]) else 1)
