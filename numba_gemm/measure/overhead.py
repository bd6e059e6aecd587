"""Host cost per call of gemm() and plan(), by stage, next to torch.mm (bench.py --overhead).

At 64³ a kernel takes a few microseconds of GPU time, so a call's wall time in a loop is its
host cost: what it takes to turn Python objects into one kernel launch. Stages:

  read      operands.read() of A, B and C (the records)
  validate  api.validate() on the records
  launch    the recorded cuLaunchKernel(s) alone
  gemm()    the whole call, C given. Repeated with the same torch tensors it is a cache hit
            keyed by the tensors' own fields, which skips read and validate (a first call,
            other libraries' operands and plan() creation pay them); then stream, capture
            check, launch
  plan()    Plan.execute(): stream, capture check, launch
  kernel    GPU time per launch alone (torch only): the launches queued behind a sleep kernel
            run back to back, so this is the floor of a call; a level whose launch stage is
            near it is GPU-bound at this size, not host-bound

Each host figure is the median over 5 rounds of the wall time of `calls` back-to-back calls,
divided by `calls`, with the device synchronised before and after each round. The header
line names the card, the date (UTC), the commit and the command.
"""
from __future__ import annotations

import statistics
import time
from datetime import datetime, timezone

import numpy as np

from ..util import commit

N = 64
SLEEP_CYCLES = 20_000_000      # ~10 ms at 2 GHz: longer than queuing the timed launches
KERNEL_CALLS = 100


def card(torch) -> str:
    if torch is not None:
        return torch.cuda.get_device_name()
    from numba import cuda

    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


def _per_call(fn, sync, calls: int) -> float:
    fn()
    sync()
    rounds = []
    for _ in range(5):
        sync()
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        rounds.append((time.perf_counter() - t) / calls)
    return statistics.median(rounds) * 1e6


def _kernel_time(launches, stream, torch):
    """GPU µs per call of `launches` on `stream` (torch's current one), queued behind a sleep."""
    sleep = getattr(torch.cuda, "_sleep", None)
    if sleep is None:
        return None
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    sleep(SLEEP_CYCLES)
    start.record()
    for _ in range(KERNEL_CALLS):
        for L in launches:
            L(stream)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / KERNEL_CALLS


def operand_dtype(level) -> np.dtype:
    """The input dtype a level is measured with: its first (v8py is Numba yet takes fp16)."""
    return level.dtypes[0]


def operand_shape(level) -> tuple[int, int, int]:
    """(M, N, K) of the level's operands: N³, with fewer rows for a level that serves only skinny
    M (k6gv: 8), K = N - 1 for one that serves only rows TMA cannot take (v11p) and one row past
    a 128-row tile besides for one that serves only a thin border past whole tiles (k8e)."""
    M = min(N, getattr(level.module, "MAX_M", N))
    shapes = [(M, N, N), (M, N, N - 1), (129, N, N - 1)]
    return next((s for s in shapes if level.unsupported(*s) is None), shapes[1])


def _operands(dtype, torch, M: int = N, K: int = N):
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    if torch is not None:
        tdt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype.name]
        return (torch.from_numpy(A).to("cuda", tdt), torch.from_numpy(B).to("cuda", tdt),
                torch.empty((M, N), dtype=torch.float32, device="cuda"))
    from numba import cuda

    from ..api import transfer_dtype

    return (cuda.to_device(A.astype(dtype).view(transfer_dtype(dtype))),
            cuda.to_device(B.astype(dtype).view(transfer_dtype(dtype))),
            cuda.device_array((M, N), np.float32))


def measure(levels, calls: int = 2000) -> list[dict]:
    from .. import api
    from ..runtime import driver, operands

    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        sync = torch.cuda.synchronize
    else:
        from numba import cuda

        sync = cuda.synchronize
    rows = []
    ref = {}
    if torch is not None:
        for name in sorted({operand_dtype(lv).name for lv in levels}):
            tdt = getattr(torch, name)
            a = torch.rand((N, N), device="cuda", dtype=tdt)
            b = torch.rand((N, N), device="cuda", dtype=tdt)
            ref[name] = _per_call(lambda: torch.mm(a, b), sync, calls)
    from .bench import Progress

    bar = Progress(len(levels))        # the first call of each level compiles it: minutes in all
    for lv in levels:
        bar.step(f"{lv.name}: compile, then {calls} calls per stage")
        dtype = operand_dtype(lv)
        M, _, K = operand_shape(lv)
        A, B, C = _operands(dtype, torch, M, K)
        recs = [operands.read(x, n) for x, n in ((A, "A"), (B, "B"), (C, "C"))]
        p = api.plan(A, B, C, level=lv.name)
        sub = p.prepared.submission
        S, _ = api._call_stream(sub.library, sub.producer, sub.device, None)
        row = {"level": lv.name, "dtype": dtype.name, "library": "torch" if torch else "numba"}
        row["read"] = _per_call(lambda: [operands.read(x, n) for x, n in ((A, "A"), (B, "B"), (C, "C"))],
                                lambda: None, calls)
        row["validate"] = _per_call(lambda: api.validate(*recs, 0.0, lv), lambda: None, calls)
        row["launch"] = _per_call(lambda: [L(S) for L in sub.launches], sync, calls)
        row["gemm"] = _per_call(lambda: api.gemm(A, B, C, level=lv.name), sync, calls)
        row["plan"] = _per_call(p.execute, sync, calls)
        row["kernel"] = _kernel_time(sub.launches, S, torch) if torch is not None else None
        row["torch.mm"] = ref.get(dtype.name)
        rows.append(row)
    bar.close()
    if torch is not None:
        x = torch.empty((N, N), device="cuda")
        rows.append({"level": "(read one torch tensor)", "dtype": "float32", "library": "torch",
                     "accessors": _per_call(lambda: operands.read(x, "A"), lambda: None, calls),
                     "dlpack": _per_call(lambda: operands._read_dlpack_or_cai(x, "A", driver.current_stream("torch", 0)),
                                         lambda: None, calls),
                     "cai": _per_call(lambda: operands._read_cai(x, "A", None), lambda: None, calls)})
    return rows


def report(levels, calls: int = 2000, command: str = "python bench.py --overhead") -> str:
    try:
        import torch
    except ImportError:
        torch = None
    rows = measure(levels, calls)
    head = ["level", "dtype", "read", "validate", "launch", "kernel", "gemm()", "plan()", "torch.mm",
            "gemm/mm", "plan/mm"]
    out = [head]
    extra = []
    for r in rows:
        if "accessors" in r:
            extra.append(f"reading one torch tensor: accessors {r['accessors']:.1f} µs, DLPack "
                         f"{r['dlpack']:.1f} µs, __cuda_array_interface__ {r['cai']:.1f} µs")
            continue
        mm = r["torch.mm"]
        kernel = f"{r['kernel']:.1f}" if r["kernel"] is not None else "-"
        out.append([r["level"], r["dtype"]] + [f"{r[k]:.1f}" for k in ("read", "validate", "launch")]
                   + [kernel] + [f"{r[k]:.1f}" for k in ("gemm", "plan")]
                   + ([f"{mm:.1f}", f"{r['gemm'] / mm:.2f}", f"{r['plan'] / mm:.2f}"] if mm else ["-", "-", "-"]))
    widths = [max(len(row[i]) for row in out) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in out]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lib = rows[0]["library"] if rows else "-"
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    skinny = "".join(f" ({lv.name}: {'×'.join(map(str, operand_shape(lv)))})" for lv in levels
                     if operand_shape(lv) != (N, N, N))
    return "\n".join([f"host µs per call at {N}³{skinny}, {lib} operands, C given (median of 5 × {calls} calls); "
                      f"{card(torch)}, {when}, commit {commit()}, `{command}`"]
                     + lines + extra)
