"""Microbenchmarks: the index patterns are the kinds they claim (pure), each kernel loads
the right values (simulator or GPU, tiny), and on a GPU the measured costs are sane."""
import json
import re

import pytest

from tests.conftest import GPU, gpu_only
from numba_gemm import ledgers as L
from numba_gemm import microbench as mb
from numba_gemm.registry import registry

SGEMM = [lv.name for lv in registry().values() if lv.family == "sgemm"]


@pytest.mark.parametrize("kind", [k for k in mb.KINDS if k != "ffma"])
def test_pattern_is_its_kind(kind):
    for it in (0, 1, 5):
        for j in range(mb.UNROLL):
            addrs, width = mb.lane_addresses(kind, j, it)
            got = L.shared_kind(addrs, width) if kind.startswith("lds") else L.global_kind(addrs, width)
            assert got == kind, (j, it, got)


def test_every_ledger_kind_of_the_ladder_is_measured():
    """The H200 costs file must be able to price every load kind the SGEMM levels use: each is
    measured by a microbenchmark, or named in PRICE_FALLBACK as priced like a measured one."""
    needed = set()
    for lv in SGEMM:
        needed |= set(L.cycle_ledger(lv, L.RTX4090, 4096).per_fma)
    unmeasured = needed - set(mb.KINDS)
    assert all(L.PRICE_FALLBACK.get(k) in mb.KINDS for k in unmeasured), unmeasured


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
    assert data["tensor_flops"] == pytest.approx(data["tensor_tflops"]["mma_sync"] * 1e12, rel=1e-3)
    card = L.h200(out)
    assert card.tensor_flops == data["tensor_flops"]            # the ledgers' tensor ceiling
    for lv in SGEMM:
        assert L.cycle_ledger(lv, card).cycles_per_fma is not None, lv
    json.loads(out.read_text())


# ---------------------------------------------------------------------------- tensor-core ceilings

def test_tensor_ceilings_compile_to_the_instructions_they_measure():
    """NVRTC for sm_90a, no GPU: HMMA in the mma.sync loop, HGMMA (and its fences) in the wgmma
    loop, no local memory, and no wgmma serialised by ptxas (which would measure the wrong thing)."""
    from numba_gemm import nvrtc, sass

    cubin = mb.tensor_cubin()
    census = {c.kernel: c for c in sass.census_cubin(cubin, "ceilings")}
    assert set(census) == {kernel for kernel, *_ in mb.TENSOR.values()}
    mma, wg = census["mma_sync_loop"], census["wgmma_loop"]
    assert mma.count("HMMA") >= mb.MMA_CHAINS and not wg.has("HMMA")
    assert wg.count("HGMMA") >= mb.WG_BATCH and wg.has("WARPGROUP") and not mma.has("HGMMA")
    assert mma.local_memory_ops == 0 and wg.local_memory_ops == 0
    assert wg.registers * 256 > 65536 // 2      # the accumulators leave room for one block per SM
    log = nvrtc.compile_log(mb.TENSOR_SOURCE, defines=mb.TENSOR_DEFINES)
    assert "serializ" not in log and "spill" in log
    assert all(s == ("0", "0") for s in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log))


def test_tensor_flop_counts():
    assert mb.MMA_FLOPS == 4096 and mb.WGMMA_FLOPS == 524288
    assert mb.TENSOR["wgmma"][3] == 2 * mb.WG_BATCH * mb.WGMMA_FLOPS      # two warpgroups per block


@gpu_only
def test_tensor_ceilings_are_sane():
    data = mb.run_tensor(quiet=True)
    t = data["tensor_tflops"]
    assert set(t) == set(mb.TENSOR), data.get("not_measured")
    for name, r in data["tensor"].items():
        assert r["sms_seen"] == data["sms"], name             # every SM took part
        assert 0.5 < r["sm_clock_ghz"] < 3.0
    # dense f16 peak of an H100/H200 is 4096 FLOPs per SM cycle; wgmma gets close, mma.sync not
    assert data["tensor"]["wgmma"]["flops_per_sm_cycle"] <= 4096 * 1.01
    assert t["wgmma"] > t["mma_sync"]
