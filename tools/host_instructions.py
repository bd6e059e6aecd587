#!/usr/bin/env python3
"""Host work of a repeated gemm() or plan() call, without a GPU: the driver is replaced by the
stand-in of tests/test_call_cache.py (its launches do nothing), then OP runs CALLS times. Run it
under callgrind, which counts instructions, at two numbers of calls:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python tools/host_instructions.py gemm 20000
    valgrind --tool=callgrind --callgrind-out-file=/dev/null python tools/host_instructions.py gemm 40000

(instructions per call) = (Collected(40000) - Collected(20000)) / 20000: the start-up (imports
and the first, recording call) is the same in both and cancels, which a run of 0 calls does not
do exactly. Set PYTHONHASHSEED=0. Run it in two checkouts to compare the Python side of a call
between commits; a GPU run (bench.py --overhead) adds the driver's own time, which this leaves
out.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pytest  # noqa: E402

import numba_gemm  # noqa: E402
from tests import test_call_cache as stub  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("op", choices=("gemm", "plan"), help="gemm(): the torch fast path; plan: Plan.execute")
    p.add_argument("calls", type=int)
    args = p.parse_args()
    fixture = stub.gpu_stub         # the fixture's own function (pytest's name for it varies)
    make = fixture._get_wrapped_function() if hasattr(fixture, "_get_wrapped_function") else \
        fixture.__pytest_wrapped__.obj
    driver = next(make(pytest.MonkeyPatch()))
    driver.cuLaunchKernel = lambda *a: 0        # only the package's side of a launch
    A, B, C = stub.mats()
    numba_gemm.gemm(A, B, C, level="k2")       # record once: what follows is the repeated call
    plan = numba_gemm.plan(A, B, C, level="k2")
    call = plan.execute if args.op == "plan" else (lambda: numba_gemm.gemm(A, B, C, level="k2"))
    for _ in range(args.calls):
        call()
    return 0


if __name__ == "__main__":
    sys.exit(main())
