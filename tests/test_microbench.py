"""Microbenchmarks: the index patterns are the kinds they claim (pure), each kernel loads
the right values (simulator or GPU, tiny), and on a GPU the measured costs are sane."""
import json
import re

import numpy as np
import pytest

from tests.conftest import GPU, gpu_only
from numba_gemm.explain import ledgers as L
from numba_gemm.measure import load_costs as lc
from numba_gemm.measure import microbench as mb
from numba_gemm.measure import tensor_ceilings as tc
from numba_gemm.registry import registry

SGEMM = [lv.name for lv in registry().values() if lv.family == "sgemm"]


@pytest.mark.parametrize("kind", [k for k in lc.KINDS if k != "ffma"])
def test_pattern_is_its_kind(kind):
    for it in (0, 1, 5):
        for j in range(lc.UNROLL):
            addrs, width = lc.lane_addresses(kind, j, it)
            got = L.shared_kind(addrs, width) if kind.startswith("lds") else L.global_kind(addrs, width)
            assert got == kind, (j, it, got)


def test_every_ledger_kind_of_the_ladder_is_measured():
    """The H200 costs file must be able to price every load kind the SGEMM levels use: each is
    measured by a microbenchmark, or named in PRICE_FALLBACK as priced like a measured one."""
    needed = set()
    for lv in SGEMM:
        needed |= set(L.cycle_ledger(lv, L.RTX4090, 4096).per_fma)
    unmeasured = needed - set(lc.KINDS)
    assert all(L.PRICE_FALLBACK.get(k) in lc.KINDS for k in unmeasured), unmeasured


def test_kernels_load_the_right_values():
    # one block, two iterations: each kernel's sums must match the addresses it claims
    res = lc.smoke(iters=2, threads=32 if not GPU else 256)
    assert res and all(v == "ok" for v in res.values()), res


@gpu_only
def test_measured_costs_are_sane(tmp_path):
    out = tmp_path / "costs.json"
    data = mb.run_all(str(out), quiet=True)
    c = data["costs"]
    assert set(c) == set(lc.KINDS), data.get("not_measured")
    assert 0.2 <= c["ffma"] <= 0.6                      # 128 FP32 lanes per SM: 0.25 + loop
    assert c["lds_bcast"] < c["lds_free"] * 1.05 + 0.1
    assert c["lds_conflict32"] > 4 * c["lds_free"]      # 32 wavefronts against 1
    assert c["lds_conflict8"] < c["lds_conflict32"]
    assert c["ldg_x32"] > 2 * c["ldg"]
    assert 0.9 * c["ldg128"] <= c["ldg128_x8"] < c["ldg_x32"]   # 8 lines: at least ldg128's 4
    assert 0.9 * c["ldg128_x8"] <= c["ldg128_x16"] < c["ldg_x32"]   # 16 lines: at least x8's 8
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
    from numba_gemm.explain import sass
    from numba_gemm.runtime import nvrtc

    cubin = tc.tensor_cubin()
    census = {c.kernel: c for c in sass.census_cubin(cubin, "ceilings")}
    assert set(census) == {kernel for kernel, *_ in (*tc.TENSOR.values(), *tc.LDMATRIX.values())}
    for kernel, *_ in tc.LDMATRIX.values():    # the loads, summed: nothing else that could bound it
        ld = census[kernel]
        assert ld.count("LDSM") == tc.LDSM_BATCH and not ld.has("HMMA") and not ld.has("LDS")
        assert ld.local_memory_ops == 0
    mma, wg = census["mma_sync_loop"], census["wgmma_loop"]
    assert mma.count("HMMA") >= tc.MMA_CHAINS and not wg.has("HMMA")
    assert wg.count("HGMMA") >= tc.WG_BATCH and wg.has("WARPGROUP") and not mma.has("HGMMA")
    assert mma.local_memory_ops == 0 and wg.local_memory_ops == 0
    assert wg.registers * 256 > 65536 // 2      # the accumulators leave room for one block per SM
    log = nvrtc.compile_log(tc.TENSOR_SOURCE, defines=tc.TENSOR_DEFINES)
    assert "serializ" not in log and "spill" in log
    assert all(s == ("0", "0") for s in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log))


def test_tensor_flop_counts():
    assert tc.MMA_FLOPS == 4096 and tc.WGMMA_FLOPS == 524288
    assert tc.TENSOR["wgmma"][3] == 2 * tc.WG_BATCH * tc.WGMMA_FLOPS      # two warpgroups per block


def test_ldmatrix_pattern_is_conflict_free_and_reads_every_byte_once():
    """Each 8-lane phase (one 8×8 matrix) reads 128 contiguous bytes: all 32 banks once; every
    load of the loop reads its own 512 bytes of the tile; .trans hands out each b16 once."""
    seen = set()
    for it in (0, 1):
        for j in range(tc.LDSM_BATCH):
            addrs = tc.ldmatrix_addresses(j, it)
            for m in range(4):
                assert L.bank_profile(addrs[8 * m: 8 * m + 8], 16).ways == 1
            assert not seen & set(addrs)
            seen |= set(addrs)
    assert max(seen) + 16 == tc.LDSM_TILE_WORDS * 4
    from numba_gemm.ptx import ldmatrix_warp

    halves = np.arange(tc.LDSM_TILE_WORDS * 2, dtype=np.uint16)
    got = ldmatrix_warp(halves.view(np.uint8), tc.ldmatrix_addresses(3, 1), True)
    values = sorted(v for regs in got for r in regs for v in (r & 0xFFFF, r >> 16))
    start = (tc.LDSM_BATCH + 3) * tc.LDSM_BYTES // 2
    assert values == list(range(start, start + tc.LDSM_BYTES // 2))


def test_expected_ldmatrix_sums():
    """Without .trans, lane l's register i of load j is word 32 i + l of that load's 512 bytes
    (PTX: thread l gets row l / 4, elements 2 (l % 4) and + 1 of matrix i), summed mod 2^32."""
    rng = np.random.default_rng(5)
    words = rng.integers(0, 1 << 32, tc.LDSM_TILE_WORDS, dtype=np.uint64).astype(np.uint32)
    for iters in (1, 4, 7):
        want = np.zeros((32, 4), dtype=np.uint64)
        for it in range(iters):
            for j in range(tc.LDSM_BATCH):
                w0 = ((it % 2) * tc.LDSM_BATCH + j) * tc.LDSM_BYTES // 4
                want += np.array([[words[w0 + 32 * i + lane] for i in range(4)] for lane in range(32)],
                                 dtype=np.uint64)
        got = tc.expected_ldmatrix(words, False, iters)
        assert got.dtype == np.uint32 and np.array_equal(got, (want % (1 << 32)).astype(np.uint32))
    assert not np.array_equal(tc.expected_ldmatrix(words, True, 3), tc.expected_ldmatrix(words, False, 3))


@gpu_only
def test_tensor_ceilings_are_sane():
    data = mb.run_tensor(quiet=True)
    t = data["tensor_tflops"]
    assert set(t) == set(tc.TENSOR), data.get("not_measured")
    for name, r in data["tensor"].items():
        assert r["sms_seen"] == data["sms"], name             # every SM took part
        assert 0.5 < r["sm_clock_ghz"] < 3.0
    # dense f16 peak of an H100/H200 is 4096 FLOPs per SM cycle; wgmma gets close, mma.sync not
    assert data["tensor"]["wgmma"]["flops_per_sm_cycle"] <= 4096 * 1.01
    assert t["wgmma"] > t["mma_sync"]
    for name in tc.LDMATRIX:                                    # checked, every SM, plausible
        r = data["tensor"][name]
        assert r["checked"] and r["sms_seen"] == data["sms"], name
        assert 1.0 <= r["cycles_per_instr"] <= 64.0, r
        assert r["bytes_per_sm_cycle"] == pytest.approx(tc.LDSM_BYTES / r["cycles_per_instr"], rel=1e-3)


def test_ldmatrix_price_reads_the_costs_file_or_says_not_yet_measured(tmp_path):
    """The committed costs file, and a copy with an ldmatrix entry merged in by update_file (the
    path `--tensor NAMES --update FILE` takes): the table, the card and explain follow it."""
    committed = json.loads(L.H200_COSTS.read_text())
    text = L.explain("v8", "h200")
    if tc.ldmatrix_price(committed) is None:
        assert "ldmatrix_x4" in tc.format_tensor(committed) and "not yet measured" in tc.format_tensor(committed)
        assert "ldmatrix.x4 not yet measured" in text and L.h200().ldsm_cycles is None
    else:
        assert f"ldmatrix.x4 {tc.ldmatrix_price(committed):.2f} SM cycles" in text
    assert "fragment loads" not in L.explain("v11", "h200")      # wgmma: no ldmatrix
    path = tmp_path / "costs.json"
    path.write_text(L.H200_COSTS.read_text())
    entry = {"cycles_per_instr": 5.0, "instr_per_sm_cycle": 0.2, "bytes_per_sm_cycle": 102.4,
             "sm_clock_ghz": 1.8, "sms_seen": committed["sms"], "seconds": 0.01, "checked": True}
    new = {"device": committed["device"], "sms": committed["sms"], "measured_utc": "2000-01-01T00:00Z",
           "tensor": {"ldmatrix_x4": entry}, "tensor_tflops": {}, "tensor_method": "m"}
    merged = mb.update_file(str(path), new)
    assert merged["costs"] == committed["costs"] and merged["tensor"]["mma_sync"] == committed["tensor"]["mma_sync"]
    assert merged["tensor_flops"] == committed["tensor_flops"] and merged["updated"]["ldmatrix_x4"] == "2000-01-01T00:00Z"
    assert L.h200(path).ldsm_cycles == 5.0 and "ldmatrix.x4 5.00 SM cycles" in L.explain("v8", L.h200(path))
    with pytest.raises(ValueError, match="measured on"):
        mb.update_file(str(path), new | {"device": "another card"})
