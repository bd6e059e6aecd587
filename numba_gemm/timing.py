"""Timing the way Triton's do_bench does: warm up, CUDA events around each call, median.

Optionally the L2 is flushed between calls (a memset of a buffer larger than the L2), so that
a figure can say whether its inputs started in L2 or in DRAM. On an H200 the L2 is 60 MiB: a
4096² float32 problem (3 × 64 MB) does not fit, but K-panels of it do, which is why the
seed's K2 read "2112.7 % of the DRAM roofline" on a card with 75.5 MB of L2.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

L2_FLUSH_BYTES = 256 << 20   # well above the H200's 60 MiB and the 4090's 72 MiB


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    reps: int
    l2_flushed: bool

    def tflops(self, flops: float) -> float:
        return flops / (self.median_ms * 1e-3) / 1e12


def reps_for(first_ms: float, budget_ms: float = 400.0, lo: int = 3, hi: int = 50) -> int:
    """Enough repeats for a stable median, within a time budget (k1 at 4096 takes ~0.3 s)."""
    return max(lo, min(hi, int(budget_ms / max(first_ms, 1e-3))))


def bench(fn, *, reps: int | None = None, warmup: int = 1, flush_l2: bool = False,
          budget_ms: float = 400.0) -> Timing:
    """Median time of fn() in ms, measured with CUDA events on the default stream.

    `warmup` untimed calls first; `reps` timed calls (default: as many as fit `budget_ms`,
    judged from the last warm-up call, or from the first timed one when warmup=0).
    """
    if warmup < 0 or (reps is not None and reps < 1):
        raise ValueError(f"bench: warmup must be >= 0 and reps >= 1 (got warmup={warmup}, reps={reps})")
    from numba import cuda
    from numba.cuda.cudadrv.driver import device_memset

    flush = cuda.device_array(L2_FLUSH_BYTES, dtype="u1") if flush_l2 else None
    start, stop = cuda.event(), cuda.event()

    def once() -> float:
        if flush is not None:
            device_memset(flush, 0, flush.nbytes)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop)

    first = None
    for _ in range(warmup):
        first = once()
    times = []
    if reps is None:
        if first is None:   # no warm-up: the first timed call sizes the run
            first = once()
            times.append(first)
        reps = reps_for(first, budget_ms)
    while len(times) < reps:
        times.append(once())
    return Timing(statistics.median(times), min(times), max(times), len(times), flush_l2)
