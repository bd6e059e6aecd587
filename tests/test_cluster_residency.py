"""tools/cluster_residency.py: waves counted by the clusters that fit, not by the SMs (the
driver stubbed), the suite shapes each level serves, and a clear refusal without a GPU. On a
GPU the script itself is the measurement (tools/gpu_run.sh residency)."""
import sys
from pathlib import Path

import pytest

from numba_gemm.registry import get
from numba_gemm.runtime import driver, gpu
from numba_gemm.runtime.launch import Launch

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tool():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import cluster_residency
    finally:
        sys.path.remove(str(ROOT / "tools"))
    return cluster_residency


def test_waves_count_the_clusters_that_fit(tool, monkeypatch):
    # clusters of 1, 2, 4 and 8 as an H100 answered for v11t's 64x64 tile at M = 64
    # (docs/data/h100_cluster_residency.txt); the other sizes, not asked there, one cluster
    fits = {1: 132, 2: 66, 4: 30, 8: 15}
    monkeypatch.setattr(driver, "max_active_clusters", lambda fn, block, smem, c: fits.get(c, 1))
    four = tool.residency(Launch(0x1, (128,), (128,), 230624, [], [], cluster=4))
    assert (four["ctas"], four["slots"], four["waves_by_sms"], four["waves"]) == (128, 132, 1, 2)
    assert four["resident_ctas"][4] == 120 and four["resident_ctas"][2] == 132
    pair = tool.residency(Launch(0x1, (128,), (128,), 230624, [], [], cluster=2))
    assert pair["waves"] == pair["waves_by_sms"] == 1
    lone = tool.residency(Launch(0x1, (264,), (128,), 230624, [], []))
    assert (lone["cluster"], lone["waves"]) == (1, 2)


def test_default_shapes_are_the_suites_the_level_serves(tool):
    shapes = tool.suite_shapes(get("v11t"))
    assert shapes and all(M <= 32 and get("v11t").unsupported(M, N, K) is None for M, N, K in shapes)


def test_without_a_gpu_it_says_so(tool, monkeypatch, capsys):
    monkeypatch.setattr(gpu, "has_gpu", lambda: False)
    assert tool.main([]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err
