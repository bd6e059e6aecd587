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


def loop(fn, *, calls: int = 20, reps: int = 5, warmup: int = 2, stream=None) -> Timing:
    """Back-to-back time per call, in ms: `calls` calls of fn() between two events on `stream`
    (a Numba stream; default: the legacy default stream, where fn() must launch too), median
    over `reps` such loops. What a training loop sees: the host enqueues while the GPU runs, the
    clock and power settle at their loop values, and a call whose host cost exceeds its kernel
    time shows that cost."""
    import statistics

    from numba import cuda

    for _ in range(warmup):
        fn()
    start, stop = cuda.event(), cuda.event()
    per_call = []
    for _ in range(reps):
        start.record(stream=stream or 0)
        for _ in range(calls):
            fn()
        stop.record(stream=stream or 0)
        stop.synchronize()
        per_call.append(start.elapsed_time(stop) / calls)
    return Timing(statistics.median(per_call), min(per_call), max(per_call), reps * calls, False)


# ---------------------------------------------------------------------------- interleaved rounds
# The H200 is power-bound: a kernel timed after others runs on a warmer chip at a lower clock.
# Competitors timed in rounds of rotating order share that drift instead of one of them taking it.

MIN_ROUNDS = 5


def rounds_for(n: int, min_rounds: int = MIN_ROUNDS) -> int:
    """Rounds for n competitors: whole rotations (each competitor in each place equally often),
    at least `min_rounds`."""
    if n < 1:
        raise ValueError(f"rounds_for: no competitors (n={n})")
    return n * -(-min_rounds // n)


def rotation(competitors, round_: int) -> list:
    """Round `round_`'s order: the list rotated left by round_ (A B C, B C A, C A B, A B C ...)."""
    k = round_ % len(competitors)
    return list(competitors[k:]) + list(competitors[:k])


def over_rounds(timings: list[Timing]) -> Timing:
    """One competitor's rounds as one Timing: the median of the rounds' medians, the extremes of
    all its calls, every timed call counted, and the shortest hold (0 if any round had none)."""
    return Timing(statistics.median(t.median_ms for t in timings), min(t.min_ms for t in timings),
                  max(t.max_ms for t in timings), sum(t.reps for t in timings),
                  timings[0].l2_flushed, min(t.hold_ms for t in timings))


def median_or_none(xs) -> float | None:
    """The median of the readings that were taken (None where NVML gave none)."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


@dataclass
class Sampled:
    """A competitor's time and the GPU's SM clock (MHz) and board power (W) read right after
    its timed calls; interleaved, the medians over the rounds it was timed in."""
    timing: Timing | None
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    rounds: int = 0                  # 0: timed alone
    error: Exception | None = None   # an optional competitor that failed, then left out


def interleaved(fns: dict, *, reps: int | None = None, budget_ms: float = 400.0,
                flush_l2: bool = False, min_rounds: int = MIN_ROUNDS, optional=(),
                time=None, sample=None) -> dict[str, Sampled]:
    """Time the competitors `fns` ({name: fn}) in rounds of rotating order; per name, the
    median over the rounds (over_rounds) and the median clock and power read after its calls.

    A warm-up of each, in the first round's order and not counted, sizes its calls per round:
    `reps` in all (default: as many as fit `budget_ms`, as bench sizes them), spread over the
    rounds. `time(fn, reps=, warmup=, flush_l2=)` times one competitor's calls of a round
    (default bench); `sample()` reads (MHz, W) (default gpu_state). A competitor named in
    `optional` that raises is left out of later rounds, its error recorded; any other error
    propagates."""
    time = time or bench
    sample = sample or gpu_state
    names = list(fns)
    rounds = rounds_for(len(names), min_rounds)
    out = {n: Sampled(None) for n in names}
    per_round, times, readings = {}, {n: [] for n in names}, {n: [] for n in names}

    def attempt(name, call):
        try:
            return call()
        except Exception as exc:
            if name not in optional:
                raise
            out[name].error = exc
            return None

    for name in names:
        t = attempt(name, lambda: time(fns[name], reps=1, warmup=1, flush_l2=flush_l2))
        if t is not None:
            total = reps or reps_for(t.median_ms, budget_ms)
            per_round[name] = max(1, -(-total // rounds))
    for r in range(rounds):
        for name in rotation(names, r):
            if out[name].error is not None:
                continue
            t = attempt(name, lambda: time(fns[name], reps=per_round[name], warmup=0, flush_l2=flush_l2))
            if t is not None:
                times[name].append(t)
                readings[name].append(sample())
    for name in names:
        if times[name] and out[name].error is None:
            out[name] = Sampled(over_rounds(times[name]), median_or_none(c for c, _ in readings[name]),
                                median_or_none(w for _, w in readings[name]), len(times[name]))
    return out


def gpu_state() -> tuple[float | None, float | None]:
    """(SM clock in MHz, board power in W) of the current GPU now, from NVML; None for a reading
    NVML cannot give, both None without NVML or a GPU: a record beside a time, never a failure.
    Power is the instantaneous reading: the default one averages over a second, longer than a
    competitor's calls in a round."""
    handle = _nvml_handle()
    if handle is None:
        return None, None
    import pynvml

    clock = power = None
    try:
        clock = float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))
    except pynvml.NVMLError:
        pass
    try:
        (field,) = pynvml.nvmlDeviceGetFieldValues(handle, [pynvml.NVML_FI_DEV_POWER_INSTANT])
        if field.nvmlReturn == pynvml.NVML_SUCCESS:
            power = field.value.uiVal / 1e3   # mW
    except pynvml.NVMLError:
        pass
    return clock, power


@functools.cache
def _nvml_handle():
    """NVML's handle of the GPU Numba uses (matched by PCI address: NVML does not follow
    CUDA_VISIBLE_DEVICES), or None where there is no NVML or no GPU."""
    from numba import config

    if config.ENABLE_CUDASIM:
        return None
    try:
        import pynvml
        from numba import cuda

        pynvml.nvmlInit()
        pci = cuda.get_current_device().get_device_identity()
        return pynvml.nvmlDeviceGetHandleByPciBusId(
            f"{pci['pci_domain_id']:x}:{pci['pci_bus_id']:x}:{pci['pci_device_id']:x}.0")
    except Exception:   # no pynvml, no driver library, no device: readings are None
        return None
