"""bench.py: the front door runs and checks a level (in the simulator without a GPU); its level
listing, groups and "× prev" come from the registry."""
import json

import numpy as np
import pytest

import bench
from numba_gemm.measure import bench as nb
from numba_gemm.registry import FAMILIES, registry
from tests.conftest import GPU

LEVELS = list(registry().values())
SIM_ONLY = pytest.mark.skipif(GPU, reason="the simulator path (a GPU run times 4096³)")


def test_level_groups_in_ladder_order():
    for family in FAMILIES:
        assert [lv.name for lv in nb.parse_levels(family)] == [lv.name for lv in LEVELS if lv.family == family]
    assert [lv.name for lv in nb.parse_levels("all")] == [lv.name for lv in LEVELS]
    a, b = LEVELS[0].name, LEVELS[1].name
    assert [lv.name for lv in nb.parse_levels(f"{b}, {a} ,{b}")] == [b, a]
    with pytest.raises(ValueError, match="unknown level"):
        nb.parse_levels("k99")


def test_a_level_with_run_keywords_is_its_own_competitor():
    """LEVEL:name=value: the level run with that run() keyword, under that name; the keyword must
    be one its run() takes, the value an integer."""
    gv, forced = nb.parse_levels("k6gv, k6gv:splits=16")
    assert (gv.name, forced.name, forced.kwargs, forced.module) == ("k6gv", "k6gv:splits=16", (("splits", 16),),
                                                                    gv.module)
    assert nb.parse_levels("v11:bm=64:bn=128")[0].kwargs == (("bm", 64), ("bn", 128))
    with pytest.raises(ValueError, match="no run.. keyword 'tile' .its run.. takes splits."):
        nb.parse_levels("k6gv:tile=3")
    with pytest.raises(ValueError, match="takes none"):
        nb.parse_levels("k1:splits=2")
    with pytest.raises(ValueError, match="give an integer"):
        nb.parse_levels("k6gv:splits=many")
    with pytest.raises(SystemExit, match="checked and timed only; --explain"):
        bench.main(["--level", "k6gv:splits=2", "--explain"])


def test_a_level_with_run_keywords_is_compared_with_the_level_as_shipped():
    rows = [nb.Result("k6", 1, 4096, 4096, "float32", "gpu", ms=4.0),
            nb.Result("k6gv", 1, 4096, 4096, "float32", "gpu", ms=2.0),
            nb.Result("k6gv:splits=16", 1, 4096, 4096, "float32", "gpu", ms=1.0)]
    nb.link_speedups(rows)
    assert [(r.prev_level, r.speedup_prev) for r in rows] == [(None, None), ("k6", 2.0), ("k6gv", 2.0)]


@SIM_ONLY
def test_a_level_with_run_keywords_runs_beside_the_level(tmp_path):
    out = tmp_path / "r.json"
    assert bench.main(["--level", "k6gv,k6gv:splits=2", "--shape", "2,130,256", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert [(r["level"], r["ok"]) for r in rows] == [("k6gv", True), ("k6gv:splits=2", True)]


def test_parents_are_registered_levels_of_the_same_family():
    for lv in LEVELS:
        if lv.parent is not None:
            assert registry()[lv.parent].family == lv.family, lv.name
    assert any(lv.parent is None for lv in LEVELS)


def test_help_lists_every_level_from_the_registry(capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--help"])
    text = capsys.readouterr().out
    for lv in LEVELS:
        assert f"{lv.parent or '-':>5} -> {lv.name:<6} {lv.title}" in text
    assert "groups: all, " + ", ".join(FAMILIES[:1]) in text


def test_unknown_level_exits_with_a_message(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--level", "k99"])
    assert "unknown level 'k99'" in str(e.value.code)


@SIM_ONLY
def test_simulator_run_checks_and_writes_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert bench.main(["--level", "k2", "--shape", "9,7,5", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "simulator" in text and "Timings need a GPU" in text
    (row,) = json.loads(out.read_text())
    assert (row["level"], row["M"], row["N"], row["K"], row["ok"]) == ("k2", 9, 7, 5, True)
    assert row["ms"] is None
    assert all(row[k] is None for k in ("sm_clock_mhz", "power_w", "cublas_sm_clock_mhz", "cublas_power_w",
                                        "rounds"))


def test_native_level_is_skipped_not_failed_in_the_simulator():
    native = [lv for lv in LEVELS if lv.native]
    r = nb.Runner(simulator=True).run(native[0], 8, 8, 8)
    assert r.ok is None and "need a GPU" in r.note


@pytest.mark.parametrize("lv", [lv for lv in LEVELS if lv.native], ids=lambda lv: lv.name)
def test_without_a_gpu_the_gpu_is_the_reason_a_native_level_is_skipped(lv):
    """At the simulator's ragged shape the TMA levels' stride rule also applies; the reason
    given is the one that applies first here: no GPU."""
    r = nb.Runner(simulator=True).run(lv, *nb.SIM_SHAPE)
    assert r.ok is None and r.note == "skipped: native CUDA levels need a GPU (see --sass for the static census)"


def test_speedups_are_over_the_parent():
    # a level whose parent is not the level before it on the ladder (k4 after the k3c side branch)
    names = list(registry())
    lv = next(lv for lv in LEVELS if lv.parent and names[names.index(lv.name) - 1] != lv.parent)
    side = names[names.index(lv.name) - 1]
    dt = lv.dtypes[0].name
    rs = [nb.Result(lv.parent, 8, 8, 8, dt, "gpu", ms=8.0), nb.Result(side, 8, 8, 8, dt, "gpu", ms=1.0),
          nb.Result(lv.name, 8, 8, 8, dt, "gpu", ms=2.0), nb.Result(lv.name, 9, 9, 9, dt, "gpu", ms=3.0)]
    nb.link_speedups(rs)
    assert rs[2].speedup_prev == 4.0 and rs[2].prev_level == lv.parent
    assert rs[3].speedup_prev is None            # no parent timed at that shape
    assert f"4.00 ({lv.parent})" in nb.format_table(rs)


def _patched(monkeypatch, name, wrong):
    lv = nb.parse_levels(name)[0]
    real_run = lv.module.run

    def run(A, B, C, alpha, beta, stream=None):
        real_run(A, B, C, alpha, beta, stream)
        host = C.copy_to_host()
        wrong(host, alpha, beta)
        C.copy_to_device(host)

    monkeypatch.setattr(lv.module, "run", run)


def test_a_wrong_result_exits_nonzero(monkeypatch, capsys):
    def off_by_one(host, alpha, beta):
        host[0, 0] += 1.0

    _patched(monkeypatch, "k2", off_by_one)
    assert bench.main(["--level", "k2", "--shape", "6,5,4", "--reps", "1"]) == 1
    assert "WRONG" in capsys.readouterr().out


def test_the_timed_configuration_is_checked(monkeypatch, capsys):
    """Wrong only at alpha = 1, beta = 0 (what is timed): caught."""
    def wrong_when_timed(host, alpha, beta):
        if (alpha, beta) == (1.0, 0.0):
            host[-1, -1] *= 2.0

    _patched(monkeypatch, "k2", wrong_when_timed)
    assert bench.main(["--level", "k2", "--shape", "6,5,4", "--reps", "1"]) == 1
    assert "alpha=1.0, beta=0.0" in capsys.readouterr().out


def test_c_is_poisoned_with_nan_when_beta_is_zero(monkeypatch):
    """A level that reads C when beta == 0 (0 × NaN = NaN) fails the check."""
    lv = nb.parse_levels("k2")[0]
    real_run = lv.module.run
    seen = []

    def reads_c(A, B, C, alpha, beta, stream=None):
        seen.append(np.isnan(C.copy_to_host()).all() if beta == 0 else None)
        real_run(A, B, C, alpha, beta if beta else 1e-30, stream)

    monkeypatch.setattr(lv.module, "run", reads_c)
    r = nb.Runner(simulator=True).run(lv, 6, 5, 4)
    assert seen == [None, True] and r.ok is False and "beta=0.0" in r.note


def test_the_products_once_give_the_verdicts_computed_each_time():
    """check.Products (A@B and |A|@|B| in float64, computed once per shape) changes no verdict."""
    from numba_gemm.measure import check

    rng = np.random.default_rng(3)
    A, B, C = check.random_inputs(9, 7, 33, dtype=np.float16, rng=rng)
    products = check.Products(A, B)
    good = check.reference(A, B, C, 0.5, -1.5).astype(np.float32)
    bad = good.copy()
    bad[8, 6] += 1e-2
    for out in (good, bad):
        for C_in, alpha, beta in ((C, 0.5, -1.5), (None, 1.0, 0.0)):
            once = check.verify(out, A, B, C_in, alpha, beta, "hgemm", products=products)
            assert once == check.verify(out, A, B, C_in, alpha, beta, "hgemm")
    assert not check.verify(bad, A, B, C, 0.5, -1.5, "hgemm", products=products).ok


def test_the_levels_of_a_shape_are_checked_on_one_sample_of_rows_with_the_last(monkeypatch):
    """Past CHECK_ROWS rows each shape draws its rows once (the float64 products computed once
    for every level) and the last row, in the edge tile, is always among them: a level wrong
    only there is caught every time, not at the sample's chance."""
    from numba_gemm.measure import check

    made = []
    real = check.Products

    class Counted(real):
        def __init__(self, A, B):
            made.append(A.shape)
            super().__init__(A, B)

    monkeypatch.setattr(check, "Products", Counted)
    monkeypatch.setattr(nb, "CHECK_ROWS", 3)
    runner = nb.Runner(simulator=True, seed=5)
    assert all(r.ok for r in runner.run_shape(nb.parse_levels("k2,k3"), 40, 5, 4))
    assert made == [(3, 4)]
    rows, _ = runner.checked_rows(40, 5, 4, np.dtype(np.float32))
    assert len(set(rows)) == 3 and rows[-1] == 39

    def last_row_wrong(host, alpha, beta):
        host[-1, 0] += 1.0

    _patched(monkeypatch, "k2", last_row_wrong)
    for seed in range(4):
        assert nb.Runner(simulator=True, seed=seed).run(nb.parse_levels("k2")[0], 40, 5, 4).ok is False


def test_bench_without_warmup(monkeypatch):
    from numba_gemm.measure.timing import bench as time_it

    calls = []
    t = time_it(lambda: calls.append(1), warmup=0, reps=2)
    assert (t.reps, len(calls)) == (2, 2)
    calls.clear()
    t = time_it(lambda: calls.append(1), warmup=0, budget_ms=1e9)   # sized by the first timed call
    assert t.reps == len(calls) == 50
    with pytest.raises(ValueError):
        time_it(lambda: None, warmup=-1)


def test_bench_holds_the_gpu_until_the_call_is_enqueued(monkeypatch):
    """The GPU-side hold doubles while it lasts less than the host takes to enqueue the timed
    call; a call that no hold can cover (it waits for the GPU itself) is timed host included."""
    import time

    from numba import config, cuda

    from numba_gemm.measure import timing

    holds_ns = []

    class Event:   # the hold's event reports the hold's length, the start event the kernel's
        def __init__(self):
            self.kind = ("hold", "start", "stop")[len(events) % 3]
            events.append(self)

        def record(self):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return holds_ns[-1] * 1e-6 if self.kind == "hold" else 1.0

    events, clock = [], [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(config, "ENABLE_CUDASIM", False)
    monkeypatch.setattr(cuda, "event", Event)
    monkeypatch.setattr(timing, "_hold_kernel", lambda: holds_ns.append)
    enqueue = lambda ms: clock.__setitem__(0, clock[0] + ms * 1e-3)
    t = timing.bench(lambda: enqueue(0.5), warmup=0, reps=2)
    assert (t.median_ms, t.hold_ms) == (1.0, 0.8) and holds_ns == [2e5, 4e5, 8e5, 8e5]
    monkeypatch.setattr(timing, "HOLD_MAX_MS", 1.0)
    holds_ns.clear()
    t = timing.bench(lambda: enqueue(3.0), warmup=0, reps=1)   # slower than any hold
    assert t.hold_ms == 0.0 and holds_ns == [2e5, 4e5, 8e5, 1.6e6]


def test_the_holds_occupancy_warning_is_silenced_and_only_it():
    """Numba warns about a one-block grid, its message in terminal bold where colour is on; the
    hold's launch must not print it, and any other warning must still get through."""
    import warnings

    from numba.cuda.core.errors import NumbaPerformanceWarning as Perf

    from numba_gemm.measure import timing

    low = "Grid size {} will likely result in GPU under-utilization due to low occupancy."
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with timing.one_thread_on_purpose():
            warnings.warn(Perf(low.format(1)))                                  # as Numba says it
            warnings.warn(Perf(f"\x1b[1m{low.format(1)}\x1b[0m", highlighting=False))   # in bold
            warnings.warn(Perf(low.format(2)))
    assert [str(w.message) for w in seen] == [str(Perf(low.format(2)))]


def test_plot_draws_the_docs_ladder_chart(tmp_path):
    pytest.importorskip("matplotlib")
    from numba_gemm.explain.figures import ladder_chart

    rs = [nb.Result("k2", 4096, 4096, 4096, "float32", "gpu", ms=23.6, tflops=5.8, cublas_tflops=50.4),
          nb.Result("k3", 4096, 4096, 4096, "float32", "gpu", ms=16.3, tflops=8.4, cublas_tflops=50.4),
          nb.Result("k3", 1000, 2000, 300, "float32", "gpu", ms=0.2, tflops=6.0, cublas_tflops=None)]
    import matplotlib.pyplot as plt

    before = plt.get_fignums()
    out = tmp_path / "ladder.png"
    ladder_chart(str(out), [r.as_dict() for r in rs], {"date": "2026-12-01", "commit": "abc1234"})
    assert out.stat().st_size > 1000
    assert plt.get_fignums() == before           # closed: a notebook would display it again


def test_overhead_header_names_card_date_commit_and_command(monkeypatch):
    """bench.py --overhead's table can be reproduced from its header line alone."""
    import re

    from numba_gemm.measure import overhead

    row = {"level": "k2", "dtype": "float32", "library": "torch", "read": 3.0, "validate": 1.0,
           "launch": 5.0, "kernel": 2.5, "gemm": 12.0, "plan": 8.0, "torch.mm": 11.0}
    monkeypatch.setattr(overhead, "measure", lambda levels, calls: [row])
    monkeypatch.setattr(overhead, "card", lambda torch: "NVIDIA H200")
    text = overhead.report([], command="python bench.py --overhead --level k2")
    head = text.splitlines()[0]
    assert "NVIDIA H200" in head and "`python bench.py --overhead --level k2`" in head
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", head)
    assert re.search(r"commit ([0-9a-f]{7,}(\+changes)?|unknown)", head)
    assert re.search(r"k2\s+float32\s+3\.0\s+1\.0\s+5\.0\s+2\.5\s+12\.0\s+8\.0\s+11\.0\s+1\.09\s+0\.73", text)


@pytest.mark.skipif(GPU, reason="without a GPU --explain runs nothing")
def test_explain_without_a_gpu_explains_4096_without_a_run(capsys):
    assert bench.main(["--level", "k1,v9", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "k1 on H200, M=N=K=4096" in out and "v9 on H200, M=N=K=4096" in out
    from numba_gemm.explain import ledgers

    roof = 1e3 * ledgers.bytes_ledger("k1", "h200", 4096).roofline_s
    assert f"roofline {roof:.3f} ms" in out and "0.000 ms" not in out and "missing" not in out
    assert "max rel err" not in out            # no simulator run, no results table


@pytest.mark.parametrize("lv", LEVELS, ids=lambda lv: lv.name)
def test_overhead_gives_each_level_operands_of_its_own_dtype(lv):
    """bench.py --overhead builds every level's operands (NumPy to Numba arrays here, as on a GPU
    without torch); each must pass that level's validation (v8py is Numba yet takes fp16)."""
    from numba_gemm import api
    from numba_gemm.measure import overhead
    from numba_gemm.runtime import operands

    dtype = overhead.operand_dtype(lv)
    assert dtype in lv.dtypes
    M, N, K = overhead.operand_shape(lv)                                  # k6gv: 8 rows; v11p: K = 63
    A, B, C = overhead._operands(dtype, None, M, K)
    recs = [operands.read(x, n) for x, n in ((A, "A"), (B, "B"), (C, "C"))]
    assert api.validate(*recs, 0.0, lv) == (M, N, K) and N == overhead.N


def test_gpu_run_test_chunks_cover_every_test_file_once():
    """tools/gpu_run.sh splits the GPU suite into chunks: every test file is in exactly one, and
    every file a chunk names exists (a renamed file would silently drop out)."""
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("bash") is None:
        pytest.skip("needs bash")
    root = Path(__file__).resolve().parent.parent
    script = ('source <(sed -n "/^TEST_CHUNK1=/,/^}/p" tools/gpu_run.sh); '
              'for i in $(seq 1 $TEST_CHUNKS); do echo $(chunk_files $i); done')
    out = subprocess.run(["bash", "-c", script], cwd=root, capture_output=True, text=True, check=True).stdout
    chunks = [line.split() for line in out.splitlines()]
    files = [f for c in chunks for f in c]
    assert len(chunks) >= 2 and all(chunks)
    assert sorted(files) == sorted(f"tests/{p.name}" for p in (root / "tests").glob("test_*.py"))


def _gpu_run(tmp_path, steps, **env):
    """tools/gpu_run.sh STEPS with python3 and nvidia-smi as stand-ins that log their arguments:
    (the script's last line of output, the logged calls)."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("bash") is None or shutil.which("timeout") is None:
        pytest.skip("needs bash and timeout")
    stubs = tmp_path / "bin"
    if not stubs.exists():
        stubs.mkdir()
        for name in ("python3", "nvidia-smi"):
            (stubs / name).write_text('#!/bin/sh\necho "$*" >> "$CALLS"\n')
            (stubs / name).chmod(0o755)
    calls = tmp_path / f"calls_{len(list(tmp_path.glob('calls_*')))}"
    calls.write_text("")
    script = Path(__file__).resolve().parent.parent / "tools" / "gpu_run.sh"
    env = dict(os.environ, PATH=f"{stubs}{os.pathsep}{os.environ['PATH']}", OUT=str(tmp_path / "out"),
               CALLS=str(calls), NUMBA_GEMM_CACHE_DIR=str(tmp_path / "cache"), **env)
    out = subprocess.run(["bash", str(script), *steps], cwd=tmp_path, env=env,
                         capture_output=True, text=True, check=True).stdout
    return (out.splitlines() or [""])[-1], calls.read_text()


def test_gpu_run_under_a_budget_starts_only_the_steps_that_fit(tmp_path):
    """BUDGET=S: a step starts only while the least time it takes is left; the last line names
    those that did not start."""
    last, calls = _gpu_run(tmp_path, ["env", "warm", "shapes"], BUDGET="100")
    assert last == "not started within BUDGET=100 s: warm shapes"     # env (60 s) fits; warm (200), shapes (150) do not
    assert "numba_gemm warm" not in calls and "bench.py" not in calls
    last, calls = _gpu_run(tmp_path, ["env", "warm", "shapes"], BUDGET="600")
    assert "not started" not in last
    assert "-m numba_gemm warm" in calls
    assert [d for d in ("fp32", "fp16", "bf16") if f"--suite shapes --dtype {d}" in calls] == ["fp32", "fp16", "bf16"]


def test_gpu_run_hgemm_step_takes_shapes(tmp_path):
    """HGEMM_SHAPES gives the hgemm step rectangular shapes (a narrow-N comparison of run()
    keywords); without it the step times the squares 4096 and 8192."""
    _, calls = _gpu_run(tmp_path, ["hgemm"], HGEMM_LEVELS="v13:stages=12,v11sl", HGEMM_DTYPES="fp16",
                        HGEMM_SHAPES="4096,128,4096 8192,128,8192")
    assert "bench.py --level v13:stages=12,v11sl --shape 4096,128,4096 --shape 8192,128,8192 --dtype fp16" in calls
    _, calls = _gpu_run(tmp_path, ["hgemm"])
    assert [line.split(" --json")[0] for line in calls.splitlines() if "bench.py" in line] == [
        f"bench.py --level hgemm --size 4096,8192 --dtype {dt}" for dt in ("fp16", "bf16")]


# ---------------------------------------------------------------------------- interleaved timing

class Timed:
    """A GPU Runner without a GPU: the levels' checks run in the simulator, the timed calls only
    say who they are (timing.bench is a stand-in whose time is the competitor's own), NVML reads
    fixed values; the log holds the checks and the timing calls in their order."""
    MS = {"k2": 4.0, "k3": 2.0, "cuBLAS": 1.0, "k2 twin": 3.0, "k3 twin": 1.5}

    def __init__(self, monkeypatch, cublas_fails=None):
        from numba_gemm.measure import timing, twins

        self.log, self.timing = [], False
        for name in ("k2", "k3"):
            lv = nb.parse_levels(name)[0]
            monkeypatch.setattr(lv.module, "run", self._logged(name, lv.module.run))

        class Blas:
            def gemm(blas, *a, **k):
                if cublas_fails == "gemm":
                    raise RuntimeError("no cuBLAS here")
                self.log.append(("cuBLAS", 1.0, 0.0))

        def make_blas(runner):
            if cublas_fails == "handle":
                raise RuntimeError("no libcublas")
            return Blas()

        class Twin:
            def __init__(twin, name):
                twin.name = name

            def run(twin, A, B, C, alpha, beta):
                self.log.append((f"{twin.name} twin", alpha, beta))

        monkeypatch.setattr(nb.Runner, "cublas", make_blas)
        monkeypatch.setattr(twins, "twin", Twin)
        monkeypatch.setattr(timing, "bench", self.bench)
        monkeypatch.setattr(timing, "gpu_state", lambda: (1755.0, 612.0))

    def _logged(self, name, real):
        def run(A, B, C, alpha, beta, stream=None):
            self.log.append((name, alpha, beta))
            if not self.timing:
                real(A, B, C, alpha, beta, stream)
        return run

    def bench(self, fn, *, reps=None, warmup=1, flush_l2=False):
        from numba_gemm.measure.timing import Timing

        self.timing = True
        fn()
        self.timing = False
        name = self.log.pop()[0]
        self.log.append(("timed" if warmup == 0 else "warm-up", name))
        return Timing(self.MS[name], self.MS[name], self.MS[name], reps or 3, flush_l2, 0.2)

    def timed(self):
        return [e[1] for e in self.log if e[0] == "timed"]


def test_interleaved_checks_every_level_then_times_them_in_rotating_rounds(monkeypatch):
    from numba_gemm.measure import timing

    t = Timed(monkeypatch)
    runner = nb.Runner(simulator=False, reps=6, twins=False)
    rows = runner.run_shape(nb.parse_levels("k2,k3"), 6, 5, 4)
    first_timing = next(i for i, e in enumerate(t.log) if e[0] in ("timed", "warm-up"))
    checks = [e[0] for e in t.log[:first_timing]]
    assert checks == ["k2"] * len(nb.CHECKED) + ["k3"] * len(nb.CHECKED)   # correctness first
    rounds = timing.rounds_for(3)
    assert [e[1] for e in t.log if e[0] == "warm-up"] == ["k2", "k3", "cuBLAS"]
    assert t.timed() == [n for r in range(rounds) for n in timing.rotation(["k2", "k3", "cuBLAS"], r)]
    for r in rows:
        assert r.ok and r.rounds == rounds and r.ms == t.MS[r.level]
        assert r.cublas_ms == t.MS["cuBLAS"] and r.pct_cublas == 100 * t.MS["cuBLAS"] / t.MS[r.level]
        assert (r.sm_clock_mhz, r.power_w, r.cublas_sm_clock_mhz, r.cublas_power_w) == (1755.0, 612.0) * 2


def test_the_twins_are_competitors_too(monkeypatch):
    from numba_gemm.measure import timing

    t = Timed(monkeypatch)
    rows = nb.Runner(simulator=False, reps=2).run_shape(nb.parse_levels("k2,k3"), 6, 5, 4)
    order = ["k2", "k2 twin", "k3", "k3 twin", "cuBLAS"]
    assert t.timed() == [n for r in range(timing.rounds_for(5)) for n in timing.rotation(order, r)]
    assert [r.twin_ms for r in rows] == [t.MS["k2 twin"], t.MS["k3 twin"]]


def test_no_interleave_times_each_level_after_its_check(monkeypatch):
    t = Timed(monkeypatch)
    rows = nb.Runner(simulator=False, twins=False, interleave=False).run_shape(
        nb.parse_levels("k2,k3"), 6, 5, 4)
    events = [e[0] if e[0] not in ("timed", "warm-up") else f"time {e[1]}" for e in t.log]
    checks = len(nb.CHECKED)
    assert events == ["k2"] * checks + ["time k2", "time cuBLAS"] + ["k3"] * checks + ["time k3"]
    for r in rows:
        assert r.rounds is None and r.ms == t.MS[r.level] and r.cublas_ms == t.MS["cuBLAS"]
        assert (r.sm_clock_mhz, r.power_w, r.cublas_sm_clock_mhz, r.cublas_power_w) == (1755.0, 612.0) * 2


@pytest.mark.parametrize("where", ["handle", "gemm"])
def test_without_cublas_the_levels_are_still_timed_interleaved(monkeypatch, where):
    t = Timed(monkeypatch, cublas_fails=where)
    rows = nb.Runner(simulator=False, twins=False).run_shape(nb.parse_levels("k2,k3"), 6, 5, 4)
    assert "cuBLAS" not in t.timed()
    for r in rows:
        assert r.ms == t.MS[r.level] and r.rounds and r.cublas_ms is None and r.pct_cublas is None
        assert "cuBLAS baseline unavailable: no " in r.note


def test_the_table_shows_clock_and_power_and_how_it_was_timed():
    rs = [nb.Result("k2", 8, 8, 8, "float32", "gpu", ok=True, rel_err=0.0, ms=2.0, tflops=1.0,
                    sm_clock_mhz=1755.0, power_w=612.4, cublas_ms=1.0, cublas_sm_clock_mhz=1980.0, rounds=6),
          nb.Result("k3", 8, 8, 8, "float32", "gpu", ok=True, rel_err=0.0, ms=1.0, tflops=2.0, rounds=6)]
    text = nb.format_table(rs)
    head, _, k2, k3 = text.splitlines()[:4]
    cols = head.split("  ")
    cols = [c.strip() for c in cols if c.strip()]
    assert cols[5:10] == ["ms", "TFLOPS", "SM MHz", "W", "cuBLAS ms"]
    assert k2.split()[5:12] == ["2.000", "1.00", "1755", "612", "1.000", "-", "1980"]
    assert k3.split()[5:9] == ["1.000", "2.00", "-", "-"]             # no NVML: "-", no crash
    assert "timed in 6 rounds of rotating order with cuBLAS;" in text
    alone = nb.format_table([nb.Result("k2", 8, 8, 8, "float32", "gpu", ms=2.0)])
    assert "timed one after another;" in alone and "rounds" not in alone
