"""Interleaved timing (numba_gemm.measure.timing): the rotation of competitors over rounds, the median
per competitor over the rounds, and the NVML readings beside them; none of it needs a GPU (the
timer and the reading are stubbed)."""
import statistics
import sys
import types
from collections import Counter

import pytest
from hypothesis import given, strategies as st

from numba_gemm.measure import timing
from numba_gemm.measure.timing import Timing

names = st.lists(st.text("ABCDEFGHIJ", min_size=1, max_size=3), min_size=1, max_size=12, unique=True)


@given(names, st.integers(0, 100))
def test_every_competitor_runs_once_per_round(competitors, r):
    order = timing.rotation(competitors, r)
    assert sorted(order) == sorted(competitors)


@given(names, st.integers(0, 3))
def test_each_place_equally_often_over_whole_rotations(competitors, start):
    n = len(competitors)
    for rounds in (n, timing.rounds_for(n)):
        places = Counter((i, c) for r in range(start, start + rounds)
                         for i, c in enumerate(timing.rotation(competitors, r)))
        assert set(places.values()) == {rounds // n} and len(places) == n * n


@given(names, st.integers(0, 100))
def test_each_round_starts_one_further_along(competitors, r):
    """A B C, B C A, C A B: the next round is this one with its first moved to the end."""
    this, nxt = timing.rotation(competitors, r), timing.rotation(competitors, r + 1)
    assert nxt == this[1:] + this[:1]
    assert timing.rotation(competitors, 0) == competitors


@given(st.integers(1, 40), st.integers(1, 20))
def test_rounds_are_whole_rotations_and_no_more(n, least):
    rounds = timing.rounds_for(n, least)
    assert rounds % n == 0 and rounds >= least and rounds - n < least


def test_rounds_need_a_competitor():
    with pytest.raises(ValueError):
        timing.rounds_for(0)


def _t(median, lo=None, hi=None, reps=2, hold=0.2):
    return Timing(median, median if lo is None else lo, median if hi is None else hi, reps, False, hold)


def test_over_rounds_is_the_median_of_the_rounds():
    ts = [_t(3.0, 2.5, 3.5), _t(1.0, 0.9, 1.1), _t(2.0, 1.8, 9.0, hold=0.0), _t(10.0, reps=3)]
    t = timing.over_rounds(ts)
    assert t.median_ms == 2.5                     # between 2.0 and 3.0: a warm outlier moves nothing
    assert (t.min_ms, t.max_ms, t.reps) == (0.9, 10.0, 9)
    assert t.hold_ms == 0.0                       # a round timed host included: said so
    assert timing.over_rounds(ts[:3]).median_ms == 2.0


@given(st.lists(st.floats(0.001, 1e3), min_size=1, max_size=30))
def test_over_rounds_spans_its_rounds(medians):
    t = timing.over_rounds([_t(m) for m in medians])
    assert min(medians) <= t.median_ms <= max(medians)
    assert t.median_ms == statistics.median(medians) and t.reps == 2 * len(medians)


def test_readings_median_skips_what_nvml_did_not_give():
    assert timing.median_or_none([None, None]) is None
    assert timing.median_or_none([1400.0, None, 1980.0, 1755.0]) == 1755.0


# ---------------------------------------------------------------------------- the rounds themselves

class Bench:
    """A stand-in for timing.bench: logs each call's competitor and phase; a timed call takes
    its competitor's base time plus `drift` for every timed call before it (a warming GPU)."""

    def __init__(self, base, drift=0.0, fail=()):
        self.base, self.drift, self.fail = base, drift, set(fail)
        self.log = []

    def fns(self):
        return {name: (lambda name=name: name) for name in self.base}

    def __call__(self, fn, *, reps, warmup, flush_l2):
        name = fn()
        if name in self.fail and warmup == 0:
            raise RuntimeError(f"{name} broke")
        self.log.append((name, "warm-up" if warmup else "timed", reps))
        if warmup:
            return Timing(self.base[name], self.base[name], self.base[name], reps, flush_l2)
        ms = self.base[name] + self.drift * sum(phase == "timed" for _, phase, _ in self.log[:-1])
        return Timing(ms, ms, ms, reps, flush_l2, 0.2)


def test_warm_up_first_then_rotating_rounds():
    b = Bench({"v11": 1.0, "v12": 2.0, "cuBLAS": 4.0})
    out = timing.interleaved(b.fns(), reps=9, time=b, sample=lambda: (None, None))
    rounds = timing.rounds_for(3)
    assert [n for n, phase, _ in b.log if phase == "warm-up"] == ["v11", "v12", "cuBLAS"]
    timed = [n for n, phase, _ in b.log if phase == "timed"]
    assert [timed[3 * r:3 * r + 3] for r in range(rounds)] == \
        [timing.rotation(["v11", "v12", "cuBLAS"], r) for r in range(rounds)]
    per_round = -(-9 // rounds)                   # --reps 9 spread over the rounds
    assert {reps for _, phase, reps in b.log if phase == "timed"} == {per_round}
    for name, s in out.items():
        assert s.rounds == rounds and s.timing.reps == per_round * rounds
        assert s.timing.median_ms == b.base[name] and s.error is None


def test_the_budget_sizes_each_competitors_calls_per_round():
    b = Bench({"slow": 100.0, "fast": 0.5})
    timing.interleaved(b.fns(), budget_ms=400.0, time=b, sample=lambda: (None, None))
    rounds = timing.rounds_for(2)
    for name in b.base:
        total = timing.reps_for(b.base[name], 400.0)
        assert {reps for n, phase, reps in b.log if n == name and phase == "timed"} == \
            {max(1, -(-total // rounds))}


@given(st.integers(2, 8), st.integers(1, 12))
def test_a_warming_gpu_favours_no_place_in_the_order(n, least):
    """Every call slower than the one before: equal kernels come out within one round's drift
    of each other; timed one after another, the last would trail the first by all the calls of
    the n - 1 before it (at least two rounds' worth)."""
    b = Bench({str(i): 1.0 for i in range(n)}, drift=1e-3)
    out = timing.interleaved(b.fns(), reps=1, min_rounds=least, time=b, sample=lambda: (None, None))
    medians = [s.timing.median_ms for s in out.values()]
    assert max(medians) - min(medians) <= (n - 1) * 1e-3 + 1e-12


def test_clock_and_power_are_read_after_each_competitors_calls():
    b = Bench({"A": 1.0, "B": 2.0, "C": 3.0})
    seen = []

    def sample():   # a distinct reading each time, power missing every third
        seen.append(b.log[-1])
        k = len(seen)
        return 1400.0 + 10 * k, None if k % 3 == 0 else 600.0 + k

    out = timing.interleaved(b.fns(), reps=3, min_rounds=3, time=b, sample=sample)
    assert seen == [e for e in b.log if e[1] == "timed"]   # one reading after each timed call
    for name in b.base:
        mine = [k for k, (n, _, _) in enumerate(seen, 1) if n == name]
        assert len(mine) == 3 and out[name].sm_clock_mhz == statistics.median(1400.0 + 10 * k for k in mine)
        watts = [600.0 + k for k in mine if k % 3]
        assert out[name].power_w == (statistics.median(watts) if watts else None)


def test_without_nvml_the_readings_are_none():
    b = Bench({"A": 1.0, "B": 2.0})
    out = timing.interleaved(b.fns(), reps=2, time=b, sample=lambda: (None, None))
    assert all(s.sm_clock_mhz is None and s.power_w is None and s.timing for s in out.values())


def test_an_optional_competitor_that_fails_is_left_out():
    b = Bench({"v13": 1.0, "cuBLAS": 2.0}, fail={"cuBLAS"})
    out = timing.interleaved(b.fns(), reps=4, optional=["cuBLAS"], time=b, sample=lambda: (None, None))
    assert out["cuBLAS"].timing is None and "cuBLAS broke" in str(out["cuBLAS"].error)
    assert out["v13"].rounds == timing.rounds_for(2) and out["v13"].timing.median_ms == 1.0
    assert [n for n, phase, _ in b.log if phase == "timed"].count("cuBLAS") == 0


def test_a_level_that_fails_is_an_error():
    b = Bench({"v13": 1.0, "cuBLAS": 2.0}, fail={"v13"})
    with pytest.raises(RuntimeError, match="v13 broke"):
        timing.interleaved(b.fns(), reps=4, optional=["cuBLAS"], time=b, sample=lambda: (None, None))


# ---------------------------------------------------------------------------- NVML

def test_gpu_state_without_a_gpu_or_nvml_is_none(monkeypatch):
    monkeypatch.setattr(timing, "_nvml_handle", lambda: None)
    assert timing.gpu_state() == (None, None)


def test_the_simulator_has_no_nvml_handle():
    from numba import config

    if not config.ENABLE_CUDASIM:
        pytest.skip("a GPU here")
    assert timing._nvml_handle() is None


def _fake_pynvml(monkeypatch, clock, power_mw, power_ok=True):
    class NVMLError(Exception):
        pass

    def get_clock(handle, which):
        if clock is None:
            raise NVMLError("not supported")
        assert which == nv.NVML_CLOCK_SM
        return clock

    def fields(handle, ids):
        assert ids == [nv.NVML_FI_DEV_POWER_INSTANT]
        value = types.SimpleNamespace(uiVal=power_mw)
        return [types.SimpleNamespace(nvmlReturn=nv.NVML_SUCCESS if power_ok else 3, value=value)]

    nv = types.SimpleNamespace(NVMLError=NVMLError, NVML_CLOCK_SM=1, NVML_FI_DEV_POWER_INSTANT=186,
                               NVML_SUCCESS=0, nvmlDeviceGetClockInfo=get_clock,
                               nvmlDeviceGetFieldValues=fields)
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    monkeypatch.setattr(timing, "_nvml_handle", lambda: "gpu0")


def test_gpu_state_reads_mhz_and_watts(monkeypatch):
    _fake_pynvml(monkeypatch, clock=1755, power_mw=612_500)
    assert timing.gpu_state() == (1755.0, 612.5)


def test_a_reading_nvml_cannot_give_is_none_and_the_other_stands(monkeypatch):
    _fake_pynvml(monkeypatch, clock=None, power_mw=612_500)
    assert timing.gpu_state() == (None, 612.5)
    _fake_pynvml(monkeypatch, clock=1980, power_mw=0, power_ok=False)
    assert timing.gpu_state() == (1980.0, None)
