"""bench.py: the front door runs and checks a level (in the simulator without a GPU)."""
import json

import pytest

import bench
from numba_gemm import bench as nb
from tests.conftest import GPU


def test_level_groups_in_ladder_order():
    names = [lv.name for lv in nb.parse_levels("sgemm")]
    assert names == ["k1", "k2", "k3", "k3c", "k4", "k5", "k6"]
    assert [lv.name for lv in nb.parse_levels("hgemm")] == ["v7", "v8", "v8py", "v9", "v10"]
    assert [lv.name for lv in nb.parse_levels("k2, k1 ,k2")] == ["k2", "k1"]
    with pytest.raises(ValueError, match="unknown level"):
        nb.parse_levels("k7")


def test_unknown_level_exits_with_a_message(capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--level", "k99"])
    assert "unknown level 'k99'" in str(e.value.code)


@pytest.mark.skipif(GPU, reason="the simulator path (a GPU run times 4096³)")
def test_simulator_run_checks_and_writes_json(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert bench.main(["--level", "k2", "--shape", "9,7,5", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "simulator" in text and "Timings need a GPU" in text
    (row,) = json.loads(out.read_text())
    assert (row["level"], row["M"], row["N"], row["K"], row["ok"]) == ("k2", 9, 7, 5, True)
    assert row["ms"] is None


def test_native_level_is_skipped_not_failed_in_the_simulator():
    r = nb.Runner(simulator=True).run(nb.parse_levels("v8")[0], 8, 8, 8)
    assert r.ok is None and "need a GPU" in r.note


def test_speedups_link_within_a_shape():
    rs = [nb.Result("k1", 8, 8, 8, "float32", "gpu", ms=8.0), nb.Result("k2", 8, 8, 8, "float32", "gpu", ms=2.0),
          nb.Result("k1", 9, 9, 9, "float32", "gpu", ms=3.0)]
    nb.link_speedups(rs)
    assert rs[1].speedup_prev == 4.0 and rs[1].prev_level == "k1"
    assert rs[2].speedup_prev is None
    assert "4.00 (k1)" in nb.format_table(rs)


def test_a_wrong_result_exits_nonzero(monkeypatch, capsys):
    lv = nb.parse_levels("k2")[0]
    real_run = lv.module.run

    def off_by_one(A, B, C, alpha, beta, stream=None):
        real_run(A, B, C, alpha, beta, stream)
        host = C.copy_to_host()
        host[0, 0] += 1.0
        C.copy_to_device(host)

    monkeypatch.setattr(lv.module, "run", off_by_one)
    assert bench.main(["--level", "k2", "--shape", "6,5,4", "--reps", "1"]) == 1
    assert "WRONG" in capsys.readouterr().out


def test_plot_draws_bars_cublas_and_rooflines(tmp_path):
    pytest.importorskip("matplotlib")
    from numba_gemm.plot import plot_ladder, roofline_tflops

    rs = [nb.Result("k2", 4096, 4096, 4096, "float32", "gpu", ms=23.6, tflops=5.8, cublas_tflops=50.4),
          nb.Result("k3", 4096, 4096, 4096, "float32", "gpu", ms=16.3, tflops=8.4, cublas_tflops=50.4)]
    out = tmp_path / "ladder.png"
    plot_ladder(rs, str(out))
    assert out.stat().st_size > 1000
    # k3's 32x32 tiles raise the bytes-ledger roofline 32-fold over k2's (7.969 vs 0.250 FLOP/B)
    assert roofline_tflops("k3", (4096,) * 3) / roofline_tflops("k2", (4096,) * 3) == pytest.approx(7.969 / 0.25, rel=1e-3)
