"""Plans by the clusters that fit: splitk.resident_splits and the cluster levels' plan_splits with
an H100's answers stubbed; tools/cluster_residency.py's waves counted by the clusters that fit,
not by the SMs (the driver stubbed), the suite shapes each level serves, and a clear refusal
without a GPU. On a GPU: every planned launch of v11sl, v11t and v11gv at shapes whose plans
the SMs alone would put in clusters of 4 or 8 has all its clusters resident at once."""
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numba_gemm import splitk
from numba_gemm.hgemm import v11gv_gemv as gv, v11sl_splitk as sl, v11t_swapab as sw
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


# Clusters of a one-CTA-per-SM kernel (v11sl's and v11t's tiles) that fit at once on an H100, by
# cluster size (docs/data/h100_residency_resident.json: 132 117 120 110 102 105 120 CTAs)
H100 = {1: 132, 2: 66, 3: 39, 4: 30, 5: 22, 6: 17, 7: 15, 8: 15}


def test_resident_splits_lowers_s_until_every_cluster_fits():
    assert splitk.resident_splits(16, 64, 8, H100.get) == 6          # 16 clusters: 15 of 8 or 7 fit, 17 of 6
    assert splitk.resident_splits(32, 64, 4, H100.get) == 3
    assert splitk.resident_splits(15, 64, 8, H100.get) == 8          # all fit: unchanged
    assert splitk.resident_splits(200, 64, 2, H100.get) == 1         # none fits: no cluster at all
    assert splitk.resident_splits(16, 10, 8, H100.get) == 5          # 6 slices of 10 K tiles: 2, 2, 2, 2, 2, 0
    assert splitk.resident_splits(16, 64, 8, lambda c: 132 // c) == 8


@settings(max_examples=300, deadline=None)
@given(tiles=st.integers(1, 300), k_tiles=st.integers(1, 512), splits=st.integers(1, 8),
       per_gpc=st.lists(st.integers(0, 18), min_size=1, max_size=8))
def test_resident_splits_fit_never_grow_and_leave_no_slice_empty(tiles, k_tiles, splits, per_gpc):
    splits = min(splits, k_tiles)
    fits = lambda c: sum(n // c for n in per_gpc)           # GPCs of n SMs, one CTA an SM
    S = splitk.resident_splits(tiles, k_tiles, splits, fits)
    assert 1 <= S <= splits
    assert S == 1 or tiles <= fits(S)         # fits(c) never grows with c: rounding S down keeps it
    assert (S - 1) * splitk.slice_k_tiles(k_tiles, S) < k_tiles   # the last slice has work


@pytest.mark.parametrize("shape, pure, resident", [
    ((16, 1024, 4096), 8, 6),        # an 8-head KV projection at decode: 16 tiles 64 wide
    ((1, 2048, 4096), 4, 3),
    ((32, 2048, 8192), 4, 3),
])
def test_v11t_plans_by_the_clusters_that_fit(shape, pure, resident):
    tile, S = sw.plan_splits(*shape)
    assert S == pure and sw.plan_splits(*shape, clusters=lambda t, c: H100[c]) == (tile, resident)
    assert sw.plan_splits(*shape, splits=pure, clusters=lambda t, c: H100[c])[1] == pure  # forced: kept


def test_v11sl_plans_by_the_clusters_that_fit():
    tile, S = sl.plan_splits(128, 2048, 4096)
    asked = []
    assert S == 4 and sl.plan_splits(128, 2048, 4096, clusters=lambda t, c: asked.append(t) or H100[c]) == (tile, 3)
    assert set(asked) == {tile}                                      # the planned tile's kernel is asked
    assert sl.plan_splits(4096, 4096, 4096, clusters=lambda t, c: 0)[1] == 1   # no split: nothing to fit


def test_v11gv_plans_by_the_clusters_that_fit():
    assert gv.plan_splits(1, 4096, 4096) == 8
    assert gv.plan_splits(1, 4096, 4096, clusters=lambda c: 3 * 132 // c) == 8   # three CTAs an SM: all fit
    assert gv.plan_splits(1, 4096, 4096, clusters=H100.get) == 6


def test_waves_count_the_clusters_that_fit(tool, monkeypatch):
    monkeypatch.setattr(driver, "max_active_clusters", lambda fn, block, smem, c: H100[c])
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


# ---------------------------------------------------------------------------- GPU

@pytest.mark.gpu
@pytest.mark.parametrize("level", ["v11sl", "v11t", "v11gv"])
@pytest.mark.parametrize("shape", [(1, 1024, 4096), (16, 1024, 4096), (2, 2048, 4096), (32, 2048, 8192)])
def test_planned_clusters_are_resident_at_once(tool, level, shape):
    lv = get(level)
    if lv.unsupported(*shape):
        pytest.skip(lv.unsupported(*shape))
    import numpy as np

    for L in tool.recorded(lv, *shape, np.dtype(np.float16)):
        r = tool.residency(L)
        assert r["waves"] == r["waves_by_sms"] == 1, (level, shape, r)
