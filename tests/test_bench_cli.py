"""bench.py refuses bad flags before any level runs (argparse: exit 2)."""
import pytest

import bench


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
    from numba_gemm import bench as nb

    monkeypatch.setattr(nb.Runner, "run", lambda *a, **k: pytest.fail("a level ran"))
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
    from numba_gemm import sass

    def missing():
        raise sass.CensusUnavailable("nvdisasm not found: pip install nvidia-cuda-nvdisasm")

    monkeypatch.setattr(sass, "find_nvdisasm", missing)
    with pytest.raises(SystemExit) as e:
        bench.main(["--level", "k6", "--sass"])
    msg = str(e.value.code)
    assert "\n" not in msg and "pip install nvidia-cuda-nvdisasm" in msg


def test_census_cached_per_level_on_disk(tmp_path, monkeypatch):
    from numba_gemm import registry, sass

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
    sass.census_cache_path(lvs[0]).write_text("{not json")        # a corrupt entry: taken again
    sass.census_levels(lvs)
    assert calls[-1] == ["k2"]


def test_no_twins_reaches_the_runner(monkeypatch):
    from numba_gemm import bench as nb

    seen = []
    real = nb.Runner.__init__

    def init(self, *a, **k):
        seen.append(k.get("twins"))
        real(self, *a, **k)

    monkeypatch.setattr(nb.Runner, "__init__", init)
    monkeypatch.setattr(nb.Runner, "run", lambda self, lv, *a, **k: nb.Result(lv.name, *a[:3], "float32", "simulator"))
    for argv, twins in ((["--level", "k2"], True), (["--level", "k2", "--no-twins"], False)):
        bench.main(argv)
        assert seen.pop() is twins
