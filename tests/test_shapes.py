"""The shape suite and auto's cost model, without a GPU: rooflines, the model's arithmetic, the
fit, the calibration data against the runs it was fitted to, and --suite shapes --explain."""
import json
import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from numba_gemm import choose, registry
from numba_gemm.explain.ledgers.card import DATA_DIR
from numba_gemm.measure import shapes

DOCS_DATA = DATA_DIR.parent.parent / "docs" / "data"


def test_suite_covers_what_users_call():
    names = [s[0] for s in shapes.SUITE]
    assert len(names) == len(set(names)) and 18 <= len(names) <= 24
    dims = [s[1:] for s in shapes.SUITE]
    assert any(M == 1 for M, N, K in dims) and any(M == 16 for M, N, K in dims)
    assert any(K <= 1024 and M >= 4096 and N >= 4096 for M, N, K in dims)      # short K
    assert any(N <= 128 for M, N, K in dims)                                   # narrow N
    assert any(K % 8 or N % 8 for M, N, K in dims)                             # rows TMA refuses
    assert {4096, 8192, 4097} <= {M for M, N, K in dims if M == N == K}


def test_roofline_bounds():
    # 16x8192x8192 bf16: B (128 MiB) dominates; 4096^3 is compute-bound
    r = shapes.roofline(16, 8192, 8192, "bfloat16")
    assert r.bound == "memory"
    assert r.bytes == (16 * 8192 + 8192 * 8192) * 2 + 4 * 16 * 8192
    flops, bw, _ = shapes.ceilings("bfloat16")
    assert r.seconds == pytest.approx(r.bytes / bw)
    assert shapes.roofline(4096, 4096, 4096, np.float32).bound == "compute"
    # beta != 0 reads C too
    assert shapes.roofline(64, 64, 64, np.float32, beta=1.0).bytes - \
        shapes.roofline(64, 64, 64, np.float32).bytes == 4 * 64 * 64


def test_geometry_of_every_level():
    for lv in registry.registry().values():
        g = choose.geometry(lv, 4096, 4096, 4096)
        assert g.bm >= 1 and g.bn >= 1 and g.splits >= 1, lv.name


P = {"blocks_per_sm": 2, "bw_eff": 0.8, "tflops": 40.0, "t0_us": 10.0}


@given(M=st.integers(1, 128), N=st.integers(1, 4096), K=st.integers(1, 4096))
@settings(max_examples=60, deadline=None)
def test_padding_rows_are_priced(M, N, K):
    """A 128-row tile costs the same slots for M = 1..128: the model charges the padding."""
    g = choose.Geometry(128, 128)
    a, _ = choose.predict_ms(dict(P, bw_eff=1e9), g, M, N, K, 4)   # memory term out of the way
    b, _ = choose.predict_ms(dict(P, bw_eff=1e9), g, 128, N, K, 4)
    assert a == pytest.approx(b)


def test_waves_quantise():
    g = choose.Geometry(128, 128)
    one, _ = choose.predict_ms(P, g, 128 * 264, 128, 4096, 4)       # 264 CTAs: one full wave of 2x132
    more, why = choose.predict_ms(P, g, 128 * 265, 128, 4096, 4)    # one more CTA: a second wave
    assert more - P["t0_us"] / 1e3 == pytest.approx(2 * (one - P["t0_us"] / 1e3), rel=1e-6)
    assert "265 CTAs in 2 waves" in why


def test_a_persistent_grid_is_worded_as_rounds_of_tiles():
    """A persistent level (v13) launches its resident CTAs once and walks the tiles: auto's
    account counts tiles and rounds, priced as the CTAs and waves of a launch per tile."""
    g, gp = choose.Geometry(128, 128), choose.Geometry(128, 128, persistent=True)
    t, why = choose.predict_ms(P, g, 128 * 265, 128, 4096, 4)
    tp, why_p = choose.predict_ms(P, gp, 128 * 265, 128, 4096, 4)
    assert tp == t and "265 CTAs in 2 waves" in why and "265 tiles in 2 rounds" in why_p
    assert choose.geometry(registry.get("v13"), 4096, 4096, 4096).persistent
    assert not choose.geometry(registry.get("v11"), 4096, 4096, 4096).persistent


def test_later_waves_run_at_the_power_bound_clock():
    """power_drop prices the waves after the first (1 + power_drop) times as long: one wave is
    priced as without it, two waves as 1 + (1 + drop)."""
    g, drop = choose.Geometry(128, 128), 0.2
    for M, waves in ((128 * 264, 1), (128 * 265, 2), (128 * 264 * 4, 4)):
        plain, _ = choose.predict_ms(P, g, M, 128, 4096, 2)
        hot, why = choose.predict_ms(dict(P, power_drop=drop), g, M, 128, 4096, 2)
        assert ("the waves after the first 1.20x as long" in why) == (waves > 1), why
        t0 = P["t0_us"] / 1e3
        assert hot - t0 == pytest.approx((plain - t0) * (1 + drop * (waves - 1) / waves), rel=1e-9)


def test_fit_recovers_the_power_drop_of_16_bit_levels_only():
    """A tensor-core level's later waves slow down by the fitted power_drop; an fp32 level is
    fitted without one (its FFMA keep the clock), whatever its times."""
    truth = {"blocks_per_sm": 1, "bw_eff": 0.9, "write_eff": 0.5, "overlap": 1.0, "power_drop": 0.2,
             "tflops": 900.0, "t0_us": 6.0}
    shapes_ = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192), (1024, 1024, 1024),
               (512, 4096, 4096), (16, 16384, 8192), (4096, 4096, 512), (4096, 14336, 4096)]
    g = choose.Geometry(128, 256)
    for elem_bytes in (2, 4):
        samples = [{"M": M, "N": N, "K": K, "elem_bytes": elem_bytes, "geometry": g,
                    "ms": choose.predict_ms(truth, g, M, N, K, elem_bytes)[0]} for M, N, K in shapes_]
        got = choose.fit(samples)
        if elem_bytes == 2:
            assert got["power_drop"] == 0.2 and got["fit_rms_log_error"] < 0.02
        else:
            assert got["power_drop"] == 0.0


@pytest.mark.parametrize("elem_bytes", [2, 4])
@pytest.mark.parametrize("seed", range(2))
def test_passing_over_blocks_leaves_the_fit_as_the_whole_search(elem_bytes, seed, monkeypatch):
    """The fit scores each grid block on a quarter of the samples first and passes over those
    whose part already exceeds the best error so far. On noisy times of mixed tiles, splits and
    waves it returns exactly what it returns when every block is scored on every sample (the
    part's bound made 0), having passed over some."""
    rng = np.random.default_rng(seed)
    truth = {"blocks_per_sm": 2, "bw_eff": 0.75, "write_eff": 0.6, "overlap": 0.5, "power_drop": 0.1,
             "tflops": 600.0, "t0_us": 9.0}
    samples = []
    for i in range(16):
        M, N, K = (int(x) for x in 2 ** rng.integers(7, 15, 3))
        g = choose.Geometry(int(rng.choice([64, 128])), int(rng.choice([64, 128, 256])), int(rng.choice([1, 2, 4])))
        # the noise on the samples scored first: the bound is then close to the whole error
        ms = choose.predict_ms(truth, g, M, N, K, elem_bytes)[0] * float(np.exp(rng.normal(0, 0.3 * (i % 4 == 0))))
        samples.append({"M": M, "N": N, "K": K, "ms": ms, "elem_bytes": elem_bytes, "geometry": g})
    scored = []                                      # per call: a whole block (True) or a part
    grid_error = choose._grid_error

    def counted(*a):
        scored.append(np.ndim(a[-3]) == 0)
        return grid_error(*a)

    def no_bound(*a):
        return grid_error(*a) if np.ndim(a[-3]) == 0 else np.zeros((len(a[-3]), len(a[6]), len(a[7])))

    monkeypatch.setattr(choose, "_grid_error", counted)
    got = choose._fit_constants(samples, choose.DEFAULT_SMS, choose.DEFAULT_BANDWIDTH)
    monkeypatch.setattr(choose, "_grid_error", no_bound)
    assert got == choose._fit_constants(samples, choose.DEFAULT_SMS, choose.DEFAULT_BANDWIDTH)
    blocks = len(choose._BLOCKS) * len(choose._BW_EFF) * len(choose._WRITE_EFF) * len(choose._OVERLAP)
    blocks *= len(choose._POWER_DROP) if elem_bytes == 2 else 1
    assert sum(scored) < blocks


def test_split_adds_partials_and_a_launch():
    p = dict(P, tflops=1e9)          # compute term out of the way: bytes and launches only
    plain, _ = choose.predict_ms(p, choose.Geometry(128, 128, 1), 16, 8192, 8192, 2)
    split, why = choose.predict_ms(p, choose.Geometry(128, 128, 4), 16, 8192, 8192, 2)
    extra_bytes = 2 * 4 * 16 * 8192 * 4
    assert split - plain == pytest.approx(P["t0_us"] / 1e3 + extra_bytes / (4.133e12 * 0.8) * 1e3)
    assert "split 4" in why


def test_fit_recovers_known_constants():
    truth = {"blocks_per_sm": 2, "bw_eff": 0.8, "tflops": 50.0, "t0_us": 12.0}
    shapes_ = [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096),
               (16, 16384, 16384), (1, 16384, 8192), (8, 8192, 16384), (3000, 200, 1000)]
    samples = []
    for M, N, K in shapes_:            # a small tile: the skinny shapes are bound by their bytes
        g = choose.Geometry(16, 64)
        ms, _ = choose.predict_ms(truth, g, M, N, K, 4)
        samples.append({"M": M, "N": N, "K": K, "ms": ms, "elem_bytes": 4, "geometry": g})
    got = choose.fit(samples)
    assert got["blocks_per_sm"] == 2 and got["bw_eff"] == 0.8 and got["t0_us"] == 12.0
    assert got["tflops"] == pytest.approx(50.0, rel=0.04)      # the rate grid's step
    assert got["fit_rms_log_error"] < 0.04


def test_written_bytes_have_their_own_efficiency():
    """C's bytes (and the partials' writes) are priced at write_eff, what is read at bw_eff."""
    p = dict(P, tflops=1e9)          # compute term out of the way
    g = choose.Geometry(128, 128)
    M, N, K = 8192, 8192, 256
    fast, _ = choose.predict_ms(dict(p, write_eff=0.8), g, M, N, K, 2)
    slow, _ = choose.predict_ms(dict(p, write_eff=0.4), g, M, N, K, 2)
    assert slow - fast == pytest.approx(4 * M * N / 4.133e12 * (1 / 0.4 - 1 / 0.8) * 1e3)
    same, _ = choose.predict_ms(p, g, M, N, K, 2)              # no write_eff: bw_eff for both
    assert same == pytest.approx(choose.predict_ms(dict(p, write_eff=0.8), g, M, N, K, 2)[0])


def test_overlap_hides_the_shorter_term():
    g = choose.Geometry(128, 128)
    M, N, K = 4096, 4096, 512
    hidden, _ = choose.predict_ms(dict(P, overlap=1.0), g, M, N, K, 2)
    serial, _ = choose.predict_ms(dict(P, overlap=0.0), g, M, N, K, 2)
    half, _ = choose.predict_ms(dict(P, overlap=0.5), g, M, N, K, 2)
    t_mma, _ = choose.predict_ms(dict(P, bw_eff=1e9, overlap=1.0), g, M, N, K, 2)
    t_mem, _ = choose.predict_ms(dict(P, tflops=1e9, overlap=1.0), g, M, N, K, 2)
    shorter = min(t_mma, t_mem) - P["t0_us"] / 1e3
    assert serial - hidden == pytest.approx(shorter, rel=1e-6)
    assert half - hidden == pytest.approx(shorter / 2, rel=1e-6)


def test_fit_recovers_write_efficiency_and_overlap():
    truth = {"blocks_per_sm": 1, "bw_eff": 0.9, "write_eff": 0.5, "overlap": 0.0, "tflops": 700.0,
             "t0_us": 6.0}
    shapes_ = [(4096, 4096, 4096), (8192, 8192, 256), (4096, 4096, 512), (1, 8192, 8192),
               (16, 16384, 8192), (2048, 2048, 2048), (8192, 8192, 8192), (128, 28672, 8192)]
    g = choose.Geometry(128, 256)
    samples = [{"M": M, "N": N, "K": K, "elem_bytes": 2, "geometry": g,
                "ms": choose.predict_ms(truth, g, M, N, K, 2)[0]} for M, N, K in shapes_]
    got = choose.fit(samples)
    assert (got["bw_eff"], got["write_eff"], got["overlap"]) == (0.9, 0.5, 0.0)
    assert got["fit_rms_log_error"] < 0.04


def test_ragged_rows_are_priced_by_their_own_slowdown():
    assert choose.aligned(4096, 4096, 2) and not choose.aligned(4096, 4097, 2)
    assert not choose.aligned(4097, 4096, 2)                # B's and C's rows
    assert choose.aligned(4100, 4100, 4) and not choose.aligned(4100, 4098, 4)
    truth = dict(P, ragged_slowdown=3.0)
    g = choose.Geometry(128, 128)
    even, _ = choose.predict_ms(truth, g, 4096, 4096, 4096, 2)
    odd, why = choose.predict_ms(truth, g, 4096, 4096, 4095, 2)
    assert odd - P["t0_us"] / 1e3 == pytest.approx(3.0 * (even - P["t0_us"] / 1e3), rel=1e-3)
    assert "ragged rows x3.00" in why
    # the fit: the aligned shapes fix the constants, the ragged ones the slowdown
    shapes_ = [(512, 512, 512), (2048, 2048, 2048), (4096, 4096, 4096), (16, 16384, 16384),
               (1, 16384, 8192), (777, 5000, 3001), (4097, 4097, 4097)]
    samples = [{"M": M, "N": N, "K": K, "ms": choose.predict_ms(truth, g, M, N, K, 2)[0],
                "elem_bytes": 2, "geometry": g} for M, N, K in shapes_]
    got = choose.fit(samples)
    assert got["ragged_slowdown"] == pytest.approx(3.0, rel=0.04)
    assert "ragged_slowdown" not in choose.fit(samples[:5])   # no ragged shape: nothing to fit

def test_calibration_names_real_levels_and_sources():
    data = choose.calibration()
    reg = registry.registry()
    assert data["levels"]
    for name, per_dtype in data["levels"].items():
        base = name.split(":")[0]          # a level, or one of its other tiles (v11:bm=64:bn=64)
        assert base in reg
        if name != base:
            assert name in {registry.spec_name(base, kw) for kw, _ in choose.tile_choices(reg[base])}, name
        for dtype, p in per_dtype.items():
            assert choose.as_dtype(dtype) in reg[base].dtypes
            assert p["tflops"] > 0 and p["blocks_per_sm"] >= 1 and 0 < p["bw_eff"] <= 1
    for src in data["sources"]:
        assert (DOCS_DATA / src).exists(), src


def _measured():
    """{(dtype, M, N, K): {level: ms}} from the runs the calibration was fitted to, oldest first:
    a later run's time of a level at a shape replaces an earlier one's, as in the fit."""
    out = {}
    for src in choose.calibration()["sources"]:
        rows = json.loads((DOCS_DATA / src).read_text())
        if isinstance(rows, dict) and "meta" in rows:   # tools/hopper_top.py: levels and v11's tiles
            for r in rows["rows"]:
                if r["level"] != "cublas":
                    out.setdefault((r["dtype"], r["M"], r["N"], r["K"]), {})[r["level"]] = r["kernel_ms"]
            continue
        rows = rows["results"] if isinstance(rows, dict) else rows
        for r in rows:
            if "levels" in r:
                for t in r["levels"]:
                    if t["ok"] and math.isfinite(t["kernel_ms"]) and (":" in t["level"] or (   # a tile of v11
                            t["level"] in registry.registry() and
                            choose.as_planned(registry.get(t["level"]), r["M"], r["N"], r["K"], t.get("splits")))):
                        out.setdefault((r["dtype"], r["M"], r["N"], r["K"]), {})[t["level"]] = t["kernel_ms"]
            elif r.get("ms"):
                out.setdefault((r["dtype"], r["M"], r["N"], r["K"]), {})[r["level"]] = r["ms"]
    return out


# Where auto misses the 3 % bar on the data it was fitted to, measured (every suite run
# and skinny run in its sources; docs/data/h200_auto_score.txt). 16-bit: at 8192³ in bf16 it picks
# v13, which ran 8 % slower than v11 there while 1 % faster in fp16; the two dtypes share one fit,
# and which of the two is faster changes from run to run on this power-bound card. At narrow N 64
# it picks v11sl where v11's 64x64 tile was 5 % faster. In fp32, at 1036x1031x999 it picks k8sk
# where k5sk is 5 % faster (97 µs against 93; predicted 5 % apart the other way). (At M = 64 it
# picked v11t where v11sl was 8-10 % faster, until v11t stopped at M = 32.)
KNOWN_MISSES = {("bfloat16", 8192, 8192, 8192),
                ("float16", 8192, 64, 8192), ("bfloat16", 8192, 64, 8192),
                ("float32", 1036, 1031, 999)}


@pytest.mark.parametrize("key", sorted(_measured()), ids=lambda k: "{}-{}x{}x{}".format(*k))
def test_auto_on_its_own_measurements(key):
    """On every shape the calibration was fitted to, auto's pick among the levels measured
    there is within 3 % of the fastest of them (the issue's bar, on the data we have)."""
    dtype, M, N, K = key
    times = _measured()[key]
    pick = next(q.name for q in choose.candidates(dtype, M, N, K, native=True) if q.name in times)
    within = times[pick] <= 1.03 * min(times.values())
    # a known miss stays listed only while it is one: fixed, it must leave KNOWN_MISSES
    assert within != (key in KNOWN_MISSES), (pick, times)


def test_uncalibrated_levels_rank_last(monkeypatch):
    monkeypatch.setattr(choose, "_calibration", {"levels": {"k5": {"float32": P}}})
    ranked = choose.rank(np.float32, 64, 64, 64, native=False)
    # k5 and k5sk, which plans one slice on k5's tile here (k5's kernel, priced as k5)
    priced = [q for q in ranked if q.ms is not None]
    assert sorted(q.level for q in priced) == ["k5", "k5sk"] and priced[0].ms == priced[1].ms
    assert "priced with k5's constants" in next(q.why for q in priced if q.level == "k5sk")
    assert all(q.ms is None for q in ranked[2:])
    # the rest keep ladder order, highest rung first
    order = list(registry.registry())
    idx = [order.index(q.level) for q in ranked[2:]]
    assert idx == sorted(idx, reverse=True)


def test_a_one_slice_split_is_priced_as_its_parent():
    """k8sk at one slice on k8's tile is k8's kernel: the same price as k8, never above k9 where
    k9's constants say it is faster; split, or on its own narrow tile, it keeps its own."""
    def price(M, N, K):
        return {q.level: q for q in choose.rank(np.float32, M, N, K, native=False)}

    at = price(2048, 2048, 2048)
    assert at["k8sk"].geometry.splits == 1 and at["k8sk"].ms == at["k8"].ms
    assert "k8's kernel" in at["k8sk"].why
    split = price(16, 8192, 8192)["k8sk"]
    assert split.geometry.splits > 1 and "kernel, priced" not in split.why
    narrow = price(8192, 64, 8192)["k8sk"]                  # its 128x64 tile: not k8's
    assert narrow.geometry.bn == 64 and "kernel, priced" not in narrow.why


def test_explain_runs_nothing_and_names_every_shape():
    text = shapes.explain("bfloat16", native=True)
    for name, M, N, K in shapes.SUITE:
        assert f"{name}: {M}x{N}x{K}" in text
    assert "roofline" in text and "auto for bfloat16" in text
    text32 = shapes.explain(np.float32, native=False)
    assert "FFMA peak" in text32
    for line in text32.splitlines():
        if line.strip().startswith("->"):
            assert line.split()[1].startswith("k")       # no native level without a GPU


@pytest.mark.gpu
def test_run_shape_checks_and_times_on_a_gpu():
    """The suite's runner on one small skinny shape: every candidate checked exact (C poisoned),
    timed in both modes, cuBLAS beside it; auto is one of the levels timed."""
    from numba_gemm.measure.bench import Runner

    for dtype in ("float32", "bfloat16"):
        r = shapes.run_shape(Runner(False, seed=1), "small skinny", 16, 1024, 2048, dtype)
        assert r.levels and all(t.ok for t in r.levels), r.note
        assert r.auto in [t.level for t in r.levels]
        assert all(t.kernel_ms > 0 and t.loop_ms > 0 for t in r.levels)
        assert r.cublas_ms and r.cublas_loop_ms
        assert "geomean auto/cuBLAS" in shapes.format_table([r])
        import torch                                      # the GPU machine has it, with CUDA
        assert r.torch_loop_ms > 0 and r.ratio(torch=True) == r.torch_loop_ms / r._timed(r.auto).loop_ms
        assert "geomean auto/torch.mm back-to-back" in shapes.format_table([r]), torch.__version__


def test_explain_relates_auto_waves_to_resident_ctas():
    """auto's "N waves of S" says what S is (SMs × the fitted blocks_per_sm), and a level whose
    launch bounds fix its CTAs per SM gets a line setting its waves against the resident CTAs:
    k9 (and k8) at 4096³ hold 264, 4 waves of 264 = 8 waves of 132 = 1056 slots."""
    from numba_gemm.explain import ledgers

    text = choose.explain("float32", 4096, 4096, 4096, native=True)
    w = ledgers.waves("k8", 4096)
    assert w.resident == 264 and w.auto_slots == 132
    assert "1024 CTAs in 8 waves of 132 (132 SMs × 1 fitted; 97 % full)" in text
    assert "not an occupancy" in text
    assert ("k9: 2 CTAs per SM by its launch bounds = 264 resident: 4 waves of 264 = 1056 slots, "
            "the same as auto's 8 of 132 = 1056") in text
    small = choose.explain("float32", 1024, 1024, 1024, native=True, top=10)
    assert "k8: 2 CTAs per SM by its launch bounds = 264 resident: 1 wave of 264 = 264 slots, " \
           "not the same as auto's 1 of 132 = 132" in small


def test_table_gives_the_loop_against_both_cublas_calls():
    """The back-to-back column against nvmath's cuBLAS and against torch.mm, each named; a run
    without torch leaves its column '-' and its geomean line out."""
    r = shapes.ShapeResult("s", 64, 64, 64, "float16", 0.001, "memory", "v11", cublas_ms=0.010,
                           cublas_loop_ms=0.030, torch_loop_ms=0.020)
    r.levels.append(shapes.Timed("v11", True, 0.0, 0.008, 0.010, 0.009))
    assert (r.ratio(), r.ratio(loop=True), r.ratio(torch=True)) == (0.010 / 0.008, 3.0, 2.0)
    head, _, row, *rest = shapes.format_table([r]).splitlines()
    assert "loop: auto/cuBLAS" in head and "loop: auto/torch.mm" in head
    assert row.split()[7:10] == ["1.250", "3.000", "2.000"]
    assert "geomean auto/torch.mm back-to-back: 2.000" in "\n".join(rest)
    assert r.as_dict()["auto_vs_torch_loop"] == 2.0
    r.torch_loop_ms = None
    head, _, row, *rest = shapes.format_table([r]).splitlines()
    assert row.split()[9] == "-" and "torch.mm back-to-back" not in "\n".join(rest)


def _fake_timers(monkeypatch, fail=()):
    """timing.bench and timing.loop that call fn once and time it by what it logged (ms: 1 + its
    index in NAMES, doubled in a loop); NVML reads 1755 MHz, 600 W. A name in `fail` raises."""
    from numba_gemm.measure import timing

    log = []

    def timed(kind, scale):
        def time(fn, *, reps=None, warmup=1, flush_l2=False, calls=None, stream=None):
            fn()
            name = log.pop()
            if name in fail:
                raise RuntimeError(f"{name} broke")
            log.append((kind if warmup == 0 else "warm-up", name, reps))
            ms = scale * (1 + NAMES.index(name))
            return timing.Timing(ms, ms, ms, reps or 3, False)
        return time

    monkeypatch.setattr(timing, "bench", timed("kernel", 1.0))
    monkeypatch.setattr(timing, "loop", timed("loop", 2.0))
    monkeypatch.setattr(timing, "gpu_state", lambda: (1755.0, 600.0))
    return log, {n: (lambda n=n: log.append(n)) for n in NAMES}


NAMES = ["v11", "v13", "cuBLAS", "torch.mm"]


def test_the_suite_times_levels_and_cublas_together_in_rotating_rounds(monkeypatch):
    """Kernel time: the levels and cuBLAS (not torch.mm) in rounds of rotating order; loops: the
    levels, cuBLAS and torch.mm the same way, one loop each per round; every competitor gets its
    own time and the clock read after its rounds."""
    from numba_gemm.measure import timing

    log, fns = _fake_timers(monkeypatch)
    kernel, loops = shapes.time_together({"v11": fns["v11"], "v13": fns["v13"]},
                                         {"cuBLAS": fns["cuBLAS"], "torch.mm": fns["torch.mm"]}, reps=6)
    in_kernel, in_loop = ["v11", "v13", "cuBLAS"], NAMES
    assert [n for k, n, _ in log if k == "kernel"] == \
        [n for r in range(timing.rounds_for(3)) for n in timing.rotation(in_kernel, r)]
    assert [n for k, n, _ in log if k == "loop"] == \
        [n for r in range(timing.rounds_for(4, shapes.LOOP_REPS)) for n in timing.rotation(in_loop, r)]
    assert {reps for k, _, reps in log if k == "loop"} == {1}
    assert {n: s.timing.median_ms for n, s in kernel.items()} == {"v11": 1.0, "v13": 2.0, "cuBLAS": 3.0}
    assert {n: s.timing.median_ms for n, s in loops.items()} == {"v11": 2.0, "v13": 4.0, "cuBLAS": 6.0,
                                                                 "torch.mm": 8.0}
    assert {(s.sm_clock_mhz, s.power_w) for s in [*kernel.values(), *loops.values()]} == {(1755.0, 600.0)}


def test_a_yardstick_that_fails_is_left_out_and_a_level_that_fails_stops_the_shape(monkeypatch):
    """cuBLAS failing leaves the levels timed and its error recorded; a level failing while timed
    is an error; a mode with nothing in it (torch.mm alone has no kernel-time round) is empty."""
    _, fns = _fake_timers(monkeypatch, fail={"cuBLAS"})
    kernel, loops = shapes.time_together({"v11": fns["v11"]}, {"cuBLAS": fns["cuBLAS"]})
    assert kernel["v11"].timing.median_ms == 1.0 and kernel["cuBLAS"].timing is None
    assert "cuBLAS broke" in str(loops["cuBLAS"].error)
    kernel, loops = shapes.time_together({}, {"torch.mm": fns["torch.mm"]})   # nothing else to time
    assert kernel == {} and loops["torch.mm"].timing.median_ms == 8.0
    assert shapes.time_together({}, {}) == ({}, {})
    _, fns = _fake_timers(monkeypatch, fail={"v13"})
    with pytest.raises(RuntimeError, match="v13 broke"):
        shapes.time_together({"v13": fns["v13"]}, {"cuBLAS": fns["cuBLAS"]})


def test_run_shape_checks_first_then_times_what_passed_with_its_clock(monkeypatch):
    """In the simulator, k2 and k3 at a small ragged shape: both checked exact on the rows the
    runner draws once (check.rows_to_check: the last among them), then handed to time_together
    with cuBLAS and torch.mm; each row takes its own times and clock, cuBLAS and torch.mm theirs.
    A level that fails its check is not timed."""
    from numba_gemm.measure import bench as nb, check
    from numba_gemm.measure.timing import Sampled, Timing

    seen = {}

    def together(calls, yardsticks, reps=None):
        seen.update(calls=sorted(calls), yardsticks=sorted(yardsticks))
        def s(ms, mhz):
            return Sampled(Timing(ms, ms, ms, 5, False), mhz, 500.0, 5)
        kernel = {"k2": s(4.0, 1700.0), "k3": s(3.0, 1710.0), "cuBLAS": s(2.0, 1720.0)}
        loops = {"k2": s(5.0, None), "k3": s(4.5, None), "cuBLAS": s(2.5, None), "torch.mm": s(2.2, None)}
        return kernel, loops

    monkeypatch.setattr(shapes, "time_together", together)
    monkeypatch.setattr(nb.Runner, "cublas", lambda self: object())
    monkeypatch.setattr(shapes, "torch_mm", lambda dA, dB, dtype: lambda: None)
    monkeypatch.setattr(nb, "CHECK_ROWS", 4)
    runner = nb.Runner(False, seed=3)
    r = shapes.run_shape(runner, "small ragged", 37, 9, 5, "float32", levels=["k2", "k3"])
    (rows, _), = runner._checked.values()
    assert len(rows) == 4 and rows[-1] == 36
    assert seen == {"calls": ["k2", "k3"], "yardsticks": ["cuBLAS", "torch.mm"]}
    assert all(t.ok and t.rel_err < 1e-6 for t in r.levels) and not r.note
    got = {t.level: (t.kernel_ms, t.loop_ms, t.sm_clock_mhz) for t in r.levels}
    assert got == {"k2": (4.0, 5.0, 1700.0), "k3": (3.0, 4.5, 1710.0)}
    assert (r.cublas_ms, r.cublas_loop_ms, r.torch_loop_ms, r.cublas_sm_clock_mhz) == (2.0, 2.5, 2.2, 1720.0)
    assert "SM clock after the kernel-time rounds (NVML): 1700–1720 MHz" in shapes.format_table([r])

    def cublas_broke(calls, yardsticks, reps=None):
        kernel, loops = together(calls, yardsticks, reps)
        return {**kernel, "cuBLAS": Sampled(None, error=RuntimeError("no handle"))}, loops

    monkeypatch.setattr(shapes, "time_together", cublas_broke)
    r = shapes.run_shape(runner, "small ragged", 37, 9, 5, "float32", levels=["k2", "k3"])
    assert r.cublas_ms is None and r.cublas_loop_ms == 2.5 and "cuBLAS failed while timed: no handle" in r.note
    monkeypatch.setitem(check.RTOL, "sgemm", 0.0)       # no rounding allowed: both fail
    r = shapes.run_shape(runner, "small ragged", 37, 9, 5, "float32", levels=["k2", "k3"])
    assert seen["calls"] == [] and not any(t.ok for t in r.levels)
    assert "k2 WRONG" in r.note and "k3 WRONG" in r.note
    assert all(math.isnan(t.kernel_ms) for t in r.levels)


def test_a_run_on_another_card_says_whose_ceilings_the_roofline_uses():
    """The roofline columns and auto's constants are the H200's: a run on another card says so
    under its table, and a run on the H200 (or of unknown card) adds no line."""
    r = shapes.ShapeResult("s", 64, 64, 64, "float16", 0.001, "memory", "v11", cublas_ms=0.010)
    r.levels.append(shapes.Timed("v11", True, 0.0, 0.008, 0.010, 0.009))
    h100 = shapes.format_table([r], "NVIDIA H100 80GB HBM3 (sm_90)").splitlines()[-1]
    assert h100.startswith("note: this ran on NVIDIA H100") and "the H200's measured ceilings" in h100
    assert shapes.choose.CALIBRATION.name in h100
    for card in ("NVIDIA H200 (sm_90)", ""):
        assert "note:" not in shapes.format_table([r], card)


def calibrate_auto(monkeypatch):
    """tools/calibrate_auto.py as a module, importable by name (where a process pool's workers
    find its jobs), with the simulator on as the tool sets it; both undone after the test."""
    import importlib.util

    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    spec = importlib.util.spec_from_file_location("calibrate_auto", DOCS_DATA.parent.parent / "tools" / "calibrate_auto.py")
    cal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cal)
    monkeypatch.setitem(sys.modules, "calibrate_auto", cal)
    return cal


def test_a_later_run_replaces_what_an_earlier_one_measured(tmp_path, monkeypatch):
    """calibrate_auto.samples: one point per level and shape, the last file's (files oldest
    first), so a level measured again after it changed is fitted as it is now."""
    cal = calibrate_auto(monkeypatch)
    row = {"level": "k8e", "M": 777, "N": 5000, "K": 3001, "dtype": "float32", "ok": True}
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps([dict(row, ms=0.97), dict(row, M=4097, N=4097, K=4097, ms=3.2)]))
    new.write_text(json.dumps({"results": [{"M": 777, "N": 5000, "K": 3001, "dtype": "float32",
                                            "levels": [{"level": "k8e", "ok": True, "kernel_ms": 0.73}]}]}))
    got = sorted(cal.samples([str(old), str(new)])["k8e", "float32"])
    assert got == [(777, 5000, 3001, 0.73, None), (4097, 4097, 4097, 3.2, None)]
    assert sorted(cal.samples([str(new), str(old)])["k8e", "float32"])[0][3] == 0.97


def test_holdout_refits_what_each_pick_reads_in_parallel(tmp_path, monkeypatch):
    """calibrate_auto.holdout: a shape's pick reads the constants of the levels timed there and
    of their parents (a split-K level at one slice is priced as its parent), so only those are
    refitted; the table is the same in one process or several."""
    cal = calibrate_auto(monkeypatch)
    reg = registry.registry()
    assert cal.needed({"k9sk": 1.0, "k6": 2.0}, reg) == {"k9sk", "k9", "k6", "k5"}

    rng = np.random.default_rng(3)
    rows = []
    for M, N, K in ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 512, 4096), (512, 4096, 1024)):
        flops = 2.0 * M * N * K
        rows.append({"name": f"{M}x{N}x{K}", "M": M, "N": N, "K": K, "dtype": "float32", "cublas_ms": flops / 5e10,
                     "levels": [{"level": lv, "ok": True, "kernel_ms": flops / rate * float(np.exp(rng.normal(0, 0.1)))}
                                for lv, rate in (("k6", 2e10), ("k8", 4e10), ("k9", 4.2e10))]})
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"results": rows}))
    table = cal.holdout([str(path)], reg, jobs=1)
    assert table == cal.holdout([str(path)], reg, jobs=2)
    assert len(table.splitlines()) == 1 + 4 + 1 and "left-out shapes" in table
