"""tools/first_call.py: its plan and commands without a GPU; the whole measurement of one level
with one."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from numba_gemm.registry import registry

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "first_call.py"


def _run(*args, timeout=300):
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


def test_dry_run_plans_every_level_and_dtype_then_the_warm_step(tmp_path):
    out = _run("--dry-run", "--cache-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    cold = [line.split() for line in out.stdout.splitlines() if line.split()[:1] == ["cold"]]
    planned = {(c[-5], c[-4]) for c in cold}
    expected = {(lv.name, d.name) for lv in registry().values() for d in lv.dtypes}
    expected |= {("auto", d) for d in ("float32", "float16", "bfloat16")}
    assert planned == expected
    for c in cold:      # a fresh, empty cache directory for each cold process
        assert c[1] == f"NUMBA_GEMM_CACHE_DIR={tmp_path}/cold/{c[-5]}-{c[-4]}"
    assert f"NUMBA_GEMM_CACHE_DIR={tmp_path}/warm" in out.stdout and "-m numba_gemm warm" in out.stdout
    assert not list(tmp_path.iterdir())                    # a dry run makes nothing


def test_levels_are_measured_at_a_shape_they_serve():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import first_call
    finally:
        sys.path.remove(str(ROOT / "tools"))
    for row in first_call.plan(None, 1000):
        assert "shape" in row, row
        if row["level"] != "auto":
            assert registry()[row["level"]].unsupported(*row["shape"]) is None
    # 1001 breaks the TMA levels' rule (K and N multiples of 8): the next multiple of 128 serves
    rows = first_call.plan("v11", 1001)
    assert {tuple(r["shape"]) for r in rows} == {(1024, 1024, 1024)}


def test_without_a_gpu_it_says_so(tmp_path):
    from numba_gemm.runtime.gpu import has_gpu

    if has_gpu():
        pytest.skip("a GPU is here")
    out = _run("--out", str(tmp_path / "x.json"), "--level", "k1")
    assert out.returncode != 0 and "no GPU" in out.stderr


@pytest.mark.gpu
def test_one_level_cold_then_cached(tmp_path):
    out = _run("--out", str(tmp_path / "fc.json"), "--level", "k1", "--size", "256",
               "--cache-dir", str(tmp_path / "c"), "--jobs", "1", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads((tmp_path / "fc.json").read_text())
    (row,) = doc["rows"]
    assert row["level"] == "k1" and row["dtype"] == "float32" and row["shape"] == [256] * 3
    assert row["cold_s"] > 0 and 0 < row["cached_s"] < 1.0 and row["err"] < 1e-4
    assert doc["card"] and doc["commit"] and doc["warm_rc"] == 0
