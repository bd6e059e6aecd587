"""bench.py refuses bad flags before any level runs (argparse: exit 2), and what it cannot
deliver here (a size beyond the simulator or memory, timings without a GPU) in one line."""
import pytest

import bench
from tests.conftest import GPU


@pytest.mark.parametrize("argv", [
    ["--size", "abc"], ["--size", "-5"], ["--size", "0"], ["--size", "64,"], ["--shape", "a,b,c"],
    ["--shape", "4,4"], ["--shape", "4,0,4"], ["--seed", "-1"], ["--reps", "0"], ["--level", ""],
    ["--level", " , "],
])
def test_bad_flags_are_argparse_errors(argv, capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(argv)
    assert e.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_output_paths_checked_before_running(tmp_path, capsys, monkeypatch):
    from numba_gemm.measure import bench as nb

    monkeypatch.setattr(nb.Runner, "run_shape", lambda *a, **k: pytest.fail("a level ran"))
    for flag in ("--json", "--csv"):
        with pytest.raises(SystemExit) as e:
            bench.main(["--level", "k1", flag, str(tmp_path / "missing" / "out")])
        assert e.value.code == 2 and "does not exist" in capsys.readouterr().err


def test_plot_without_matplotlib_checked_first(tmp_path, capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "matplotlib" else real(n, *a))
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--plot", str(tmp_path / "p.png")])
    assert e.value.code == 2 and "matplotlib" in capsys.readouterr().err


def test_good_flags_parse():
    a = bench.parse_args(["--size", "64,65", "--shape", "1,2,3", "--seed", "0", "--reps", "1"])
    assert a.size == [64, 65] and a.shape == [(1, 2, 3)] and a.seed == 0 and a.reps == 1


def test_all_skipped_exits_nonzero(capsys):
    from tests.conftest import GPU

    if GPU:
        pytest.skip("native levels run on a GPU")
    assert bench.main(["--level", "v9", "--shape", "8,8,8"]) == 1
    assert "NOTHING RAN" in capsys.readouterr().err


def test_sass_without_nvdisasm_is_one_line(monkeypatch):
    from numba_gemm.explain import sass

    def missing():
        raise sass.CensusUnavailable("nvdisasm not found: pip install nvidia-cuda-nvdisasm")

    monkeypatch.setattr(sass, "find_nvdisasm", missing)
    with pytest.raises(SystemExit) as e:
        bench.main(["--level", "k6", "--sass"])
    msg = str(e.value.code)
    assert "\n" not in msg and "pip install nvidia-cuda-nvdisasm" in msg


def test_census_cached_per_level_on_disk(tmp_path, monkeypatch):
    from numba_gemm import registry
    from numba_gemm.explain import census_cache, sass

    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path))
    calls = []

    def fake(levels):
        calls.append([lv.name for lv in levels])
        return {lv.name: [sass.Census(lv.name, lv.name, {"FFMA": 3}, registers=40)] for lv in levels}

    monkeypatch.setattr(sass, "census_levels_uncached", fake)
    lvs = [registry.get("k2"), registry.get("v7")]
    first = sass.census_levels(lvs)
    again = sass.census_levels(lvs)
    assert calls == [["k2", "v7"]] and again == first
    assert sorted(p.name.split(".")[0] for p in (tmp_path / "census").iterdir()) == ["k2", "v7"]
    census_cache.cache_path(lvs[0]).write_text("{not json")        # a corrupt entry: taken again
    sass.census_levels(lvs)
    assert calls[-1] == ["k2"]


@pytest.mark.parametrize("flag, attr", [("--no-twins", "twins"), ("--no-interleave", "interleave")])
def test_no_flags_reach_the_runner(monkeypatch, flag, attr):
    from numba_gemm.measure import bench as nb

    seen = []
    real = nb.Runner.__init__

    def init(self, *a, **k):
        real(self, *a, **k)
        seen.append(getattr(self, attr))

    monkeypatch.setattr(nb.Runner, "__init__", init)
    monkeypatch.setattr(nb.Runner, "run_shape", lambda self, levels, *a, **k:
                        [nb.Result(lv.name, *a[:3], "float32", "simulator") for lv in levels])
    for argv, on in ((["--level", "k2"], True), (["--level", "k2", flag], False)):
        bench.main(argv)
        assert seen.pop() is on


def test_help_explains_interleaving_and_the_clock_and_power_columns(capsys):
    import dataclasses

    from numba_gemm.measure import bench as nb

    with pytest.raises(SystemExit):
        bench.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--no-interleave" in text and "rounds of rotating order" in text
    assert "SM MHz and W columns" in text and "NVML" in text
    fields = {f.name for f in dataclasses.fields(nb.Result)}
    for key in ("sm_clock_mhz", "power_w", "cublas_sm_clock_mhz", "cublas_power_w", "rounds"):
        assert key in text and key in fields


# ---------------------------------------------------------------------------- refused or explained up front

def _no_run(monkeypatch):
    from numba_gemm.measure import bench as nb

    monkeypatch.setattr(nb.Runner, "run_shape", lambda *a, **k: pytest.fail("a level ran"))


def _refusal(argv, simulator=True):
    from numba_gemm.measure import bench as nb

    args = bench.parse_args(argv)
    levels = nb.parse_levels(args.level or "k4")
    return bench.refusal(args, levels, bench.shapes_from(args, simulator), simulator)


def test_the_simulator_limit_is_one_rule_with_gemms_warning():
    from numba_gemm import api
    from numba_gemm.measure import bench as nb

    assert nb.SIM_MAX_FLOPS == api.SIM_WARN_FLOPS == 2 * 128**3
    assert _refusal(["--size", "128"]) is None
    why = _refusal(["--level", "k1,k2", "--size", "64,129,4097"])
    assert "129×129×129, 4097×4097×4097 are too large for the CUDA simulator" in why
    assert "--explain" in why and "\n" not in why
    assert _refusal(["--shape", "4096,1,1"]) is None           # a large side is not a large product
    assert _refusal(["--size", "4096"], simulator=False) is None


@pytest.mark.skipif(GPU, reason="without a GPU")
def test_a_size_beyond_the_simulator_is_refused_at_once(monkeypatch):
    _no_run(monkeypatch)
    with pytest.raises(SystemExit) as e:
        bench.main(["--level", "k1,k2", "--size", "4096,4097"])
    msg = str(e.value.code)
    assert msg.startswith("bench.py: 4096×4096×4096, 4097×4097×4097 are too large") and "\n" not in msg


@pytest.mark.skipif(GPU, reason="without a GPU")
def test_explain_beyond_the_simulator_explains_from_the_ledgers(monkeypatch, capsys):
    _no_run(monkeypatch)
    assert bench.main(["--level", "k2", "--explain", "--size", "4096,48"]) == 0
    out = capsys.readouterr().out
    assert "4096×4096×4096 is beyond what the CUDA simulator runs" in out and "nothing run" in out
    assert "k2 on H200, M=N=K=4096" in out and "k2 on H200, M=N=K=48" in out
    assert "max rel err" not in out


def test_no_check_and_plot_need_a_gpu(tmp_path):
    pytest.importorskip("matplotlib")
    why = _refusal(["--no-check"])
    assert "--no-check leaves nothing to do without a GPU" in why and "\n" not in why
    why = _refusal(["--plot", str(tmp_path / "x.png")])
    assert "timings need a GPU" in why and "\n" not in why
    assert _refusal(["--no-check", "--explain"]) is None      # the ledgers: something to do
    assert _refusal(["--no-check"], simulator=False) is None


@pytest.mark.skipif(GPU, reason="without a GPU")
def test_no_check_on_a_cpu_runs_nothing(monkeypatch):
    _no_run(monkeypatch)
    with pytest.raises(SystemExit) as e:
        bench.main(["--level", "k2", "--no-check"])
    assert "--no-check" in str(e.value.code)


def test_memory_needed_counts_the_float64_check_and_the_simulators_device():
    from numba_gemm.measure import bench as nb

    M, N, K = 4, 1000, 1000
    host, dev = nb.memory_needed(M, N, K, 4, simulator=False)
    assert dev == 4 * (M * K + K * N) + 4 * M * N
    assert host >= dev + 16 * K * N                  # B and |B| in float64 (check.scale)
    assert nb.memory_needed(M, N, K, 4, simulator=True) == (host + dev, 0)
    assert nb.memory_needed(M, N, K, 2, simulator=False)[1] < dev    # fp16 inputs


def test_a_size_that_does_not_fit_in_host_memory_is_one_line(monkeypatch):
    import math

    from numba_gemm.measure import bench as nb

    avail = nb.host_memory_available()
    if avail is None:
        pytest.skip("available memory unknown here")
    n = math.isqrt(avail // 4) + 1                   # C alone is larger than what is available
    _no_run(monkeypatch)
    monkeypatch.setattr(nb, "device_memory_free", lambda: None)   # the host is the limit here
    with pytest.raises(SystemExit) as e:
        bench.main(["--level", "k2", "--size", str(n)])
    msg = str(e.value.code)
    assert msg.startswith(f"bench.py: {n}×{n}×{n} (k2) needs ") and "of host memory" in msg
    assert "available" in msg and "\n" not in msg


def test_dtype_with_sgemm_levels_only_is_a_note():
    from numba_gemm.measure import bench as nb

    args = bench.parse_args(["--level", "k2,k3", "--dtype", "bf16"])
    (note,) = bench.notes(args, nb.parse_levels(args.level))
    assert note.startswith("note: --dtype bf16") and "k2, k3 take float32 only" in note
    for argv in (["--level", "k2,v9", "--dtype", "bf16"], ["--level", "k2"]):
        args = bench.parse_args(argv)
        assert bench.notes(args, nb.parse_levels(args.level)) == []


@pytest.mark.skipif(GPU, reason="the simulator path")
def test_dtype_note_is_printed_and_the_run_goes_on(capsys):
    assert bench.main(["--level", "k2", "--dtype", "bf16", "--shape", "6,5,4"]) == 0
    err = capsys.readouterr().err
    assert "note: --dtype bf16 is the HGEMM levels' input type; k2 takes float32 only" in err


def test_suite_explain_runs_nothing_and_lists_every_shape(monkeypatch, capsys):
    from numba_gemm.measure import bench as nb, shapes

    monkeypatch.setattr(nb.Runner, "run_shape", lambda *a, **k: pytest.fail("a level ran"))
    monkeypatch.setattr(shapes, "run_shape", lambda *a, **k: pytest.fail("a shape ran"))
    for dtype in ("fp32", "bf16"):
        assert bench.main(["--suite", "shapes", "--explain", "--dtype", dtype]) == 0
        out = capsys.readouterr().out
        assert all(f"{name}: {M}x{N}x{K}" in out for name, M, N, K in shapes.SUITE)
        assert out.count("roofline") > len(shapes.SUITE) and out.count("auto for") == len(shapes.SUITE)


@pytest.mark.skipif(GPU, reason="what a machine without a GPU says")
def test_suite_without_a_gpu_says_what_to_run_instead(capsys):
    assert bench.main(["--suite", "shapes"]) == 2
    assert "--suite shapes --explain" in capsys.readouterr().err


def test_dtype_fp32_is_the_suites(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--level", "k4", "--dtype", "fp32"])
    assert "--dtype fp32 is for --suite" in str(e.value.code)


def test_a_recorded_command_names_its_output_files_not_their_paths():
    line = bench.command_line(["--suite", "shapes", "--json", "/some/dir/shapes_bf16.json"])
    assert line.endswith(" --suite shapes --json shapes_bf16.json")


def test_only_picks_suite_shapes_by_name(capsys):
    """--only narrows --suite shapes to named shapes; an unknown name, or --only without the
    suite, is an argparse error that lists the names."""
    assert bench.main(["--suite", "shapes", "--explain", "--dtype", "fp16", "--only", "square 512,M=128"]) == 0
    out = capsys.readouterr().out
    assert "square 512: 512x512x512" in out and "M=128: 128x4096x4096" in out
    assert "square 1024" not in out
    for argv in (["--suite", "shapes", "--only", "square 513"], ["--level", "k4", "--only", "square 512"]):
        with pytest.raises(SystemExit):
            bench.parse_args(argv)
        err = capsys.readouterr().err
        assert "--only" in err
    bench.parse_args(["--suite", "shapes", "--only", "square 512"])
    # names with a comma of their own are matched whole, beside the name before the comma
    args = bench.parse_args(["--suite", "shapes", "--only", "M=128, wide,M=128,decode M=16, up-proj"])
    assert args.only == ["M=128, wide", "M=128", "decode M=16, up-proj"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--suite", "shapes", "--only", "M=128, narrow"])
    assert "'narrow'" in capsys.readouterr().err
