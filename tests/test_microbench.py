"""Microbenchmarks: the index patterns are the kinds they claim (pure), each kernel loads
the right values (simulator or GPU, tiny), and on a GPU the measured costs are sane."""
import json

import pytest

from tests.conftest import GPU, gpu_only
from numba_gemm import ledgers as L
from numba_gemm import microbench as mb
from numba_gemm.registry import registry

SGEMM = [lv for lv in registry().values() if lv.family == "sgemm"]


@pytest.mark.parametrize("kind", [k for k in mb.KINDS if k != "ffma"])
def test_pattern_is_its_kind(kind):
    for it in (0, 1, 5):
        for j in range(mb.UNROLL):
            addrs, width = mb.lane_addresses(kind, j, it)
            got = L.shared_kind(addrs, width) if kind.startswith("lds") else L.global_kind(addrs, width)
            assert got == kind, (j, it, got)


def test_every_ledger_kind_of_the_ladder_is_measured():
    """The H200 costs file must be able to price every load kind the SGEMM levels use."""
    needed = set()
    for lv in SGEMM:
        needed |= set(L.cycle_ledger(lv, L.RTX4090, 4096).per_fma)
    assert needed <= set(mb.KINDS)


def test_kernels_load_the_right_values():
    # one block, two iterations: each kernel's sums must match the addresses it claims
    res = mb.smoke(iters=2, threads=32 if not GPU else 256)
    assert res and all(v == "ok" for v in res.values()), res


@gpu_only
def test_measured_costs_are_sane(tmp_path):
    out = tmp_path / "costs.json"
    data = mb.run_all(str(out), quiet=True)
    c = data["costs"]
    assert set(c) == set(mb.KINDS), data.get("not_measured")
    assert 0.2 <= c["ffma"] <= 0.6                      # 128 FP32 lanes per SM: 0.25 + loop
    assert c["lds_bcast"] < c["lds_free"] * 1.05 + 0.1
    assert c["lds_conflict32"] > 4 * c["lds_free"]      # 32 wavefronts against 1
    assert c["lds_conflict8"] < c["lds_conflict32"]
    assert c["ldg_x32"] > 2 * c["ldg"]
    assert 1e12 < data["copy_bandwidth_Bps"] < 1e13
    assert 0.5 < data["clock_ghz"] < 3.0
    card = L.h200(out)
    for lv in SGEMM:
        assert L.cycle_ledger(lv, card).cycles_per_fma is not None, lv.name
    json.loads(out.read_text())
