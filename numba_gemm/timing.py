"""Timing the way Triton's do_bench does: warm up, CUDA events around each call, median.

The events measure the kernel, not the host: before each timed call a one-thread kernel holds
the GPU (sleeps) for longer than the host takes to enqueue the start event, the call and the
stop event, so the GPU never idles inside the timed window waiting for the host to launch.
Without the hold, an event pair around one call of a 0.2 ms kernel also counts the 10-30 µs
the Python launch path takes (that cost is measured on its own by `bench.py --overhead`). Each
call checks that the hold did cover the host's enqueue time and doubles it if not.

Optionally the L2 is flushed between calls (a memset of a buffer larger than the L2), so that
a figure can say whether its inputs started in L2 or in DRAM. On an H200 the L2 is 60 MiB: a
4096² float32 problem (3 × 64 MB) does not fit, but K-panels of it do, which is why the
seed's K2 read "2112.7 % of the DRAM roofline" on a card with 75.5 MB of L2.
"""
from __future__ import annotations

import contextlib
import functools
import statistics
import warnings
from dataclasses import dataclass

L2_FLUSH_BYTES = 256 << 20   # well above the H200's 60 MiB and the 4090's 72 MiB
HOLD_MS = 0.2        # first hold; the Python launch paths here take 0.01-0.05 ms to enqueue
HOLD_MAX_MS = 50.0   # a call slower than this to enqueue is timed host included (hold_ms 0)


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    reps: int
    l2_flushed: bool
    hold_ms: float = 0.0   # the GPU-side hold before each timed call (0: none: host included)

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
    import time

    from numba import config, cuda
    from numba.cuda.cudadrv.driver import device_memset

    flush = cuda.device_array(L2_FLUSH_BYTES, dtype="u1") if flush_l2 else None
    hold_start, start, stop = cuda.event(), cuda.event(), cuda.event()
    hold_ms = 0.0 if config.ENABLE_CUDASIM else HOLD_MS

    def once() -> float:
        nonlocal hold_ms
        while True:
            if flush is not None:
                device_memset(flush, 0, flush.nbytes)
            if hold_ms:
                t0 = time.perf_counter()
                hold_start.record()
                _hold_kernel()(int(hold_ms * 1e6))
            start.record()
            fn()
            stop.record()
            enqueue_ms = (time.perf_counter() - t0) * 1e3 if hold_ms else 0.0
            stop.synchronize()
            # The hold began on the GPU no earlier than t0 on the host, so if it lasted longer
            # than the host took to enqueue start, fn and stop, the GPU never waited for them.
            if not hold_ms or hold_start.elapsed_time(start) > enqueue_ms:
                return start.elapsed_time(stop)
            if hold_ms >= HOLD_MAX_MS:   # fn waits for the GPU itself: no hold can cover it
                hold_ms = 0.0
            else:
                hold_ms *= 2

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
    return Timing(statistics.median(times), min(times), max(times), len(times), flush_l2, hold_ms)


@functools.cache
def _hold_kernel():   # compiled on first use: importing this module needs no GPU
    from numba import cuda

    @cuda.jit("void(int64)")
    def hold(ns):
        """Keep the GPU busy for about `ns` nanoseconds (one thread, nanosleep in 1 µs steps)."""
        slept = 0
        while slept < ns:
            cuda.nanosleep(1000)
            slept += 1000

    def launch(ns: int):
        with one_thread_on_purpose():
            hold[1, 1](ns)

    return launch


@contextlib.contextmanager
def one_thread_on_purpose():
    """Silence Numba's low-occupancy warning for the hold's one-thread grid, and nothing else.
    The pattern may not anchor at the start: Numba wraps the message in terminal bold."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Grid size 1 will likely")
        yield


def loop(fn, *, calls: int = 20, reps: int = 5, warmup: int = 2) -> Timing:
    """Back-to-back time per call, in ms: `calls` calls of fn() between two events on the
    default stream, median over `reps` such loops. What a training loop sees: the host enqueues
    while the GPU runs, the clock and power settle at their loop values, and a call whose host
    cost exceeds its kernel time shows that cost."""
    import statistics

    from numba import cuda

    for _ in range(warmup):
        fn()
    start, stop = cuda.event(), cuda.event()
    per_call = []
    for _ in range(reps):
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        per_call.append(start.elapsed_time(stop) / calls)
    return Timing(statistics.median(per_call), min(per_call), max(per_call), reps * calls, False)
