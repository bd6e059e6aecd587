"""The three ledgers: the seed's published figures (reproduced from the seed's geometry, passed
explicitly: test data, not a fallback), every registered level's hooks, and the request/bank
models on hand-checkable warp patterns. Pure arithmetic: no GPU, no simulator."""
import json
import math

import pytest
from hypothesis import given, settings, strategies as st

from numba_gemm.explain import ledgers as L
from numba_gemm.explain.ledgers import Geometry, HTile
from numba_gemm.registry import registry

N = 4096
LEVELS = list(registry().values())
SGEMM = [lv for lv in LEVELS if lv.family == "sgemm"]
HGEMM = [lv for lv in LEVELS if lv.family == "hgemm"]


def ids(levels):
    return [lv.name for lv in levels]


# The seed's published geometry (its RTX 4090 write-up) for the levels it has.
SEED = {
    "k1": Geometry((32, 32), 32, 32, 1, 1, 1),
    "k2": Geometry((32, 32), 32, 32, 1, 1, 1),
    "k3": Geometry((32, 32), 32, 32, 32, 1, 1),
    "k3c": Geometry((32, 32), 32, 128, 32, 1, 4),
    "k4": Geometry((32, 4), 32, 32, 32, 8, 1),
    "k5": Geometry((32, 4), 32, 128, 32, 8, 4),
    "k6": Geometry((32, 4), 32, 128, 32, 8, 4),
}
# The seed's HGEMM tiles (its RTX 5080 write-up).
SEED_HTILES = {
    "v7": HTile(128, 128, 32, "m-fastest"),
    "v8": HTile(128, 64, 64, "n-fastest"),
    "v9": HTile(128, 64, 64, "super", 16, 2),
}
# The seed's 4096 / 4097 times on the RTX 4090 (ms).
SEED_STRIDE_4090 = {"k1": {4096: 211.911, 4097: 63.675}, "k2": {4096: 25.815, 4097: 26.615}}
# External: the seed's CUDA C kernels (not in this repository) timed on the H200, as in
# docs/RESULTS.md (2026-11-29, commit bb1e37b).
SEED_CUDA_C_H200 = {"k1": {4096: 275.948, 4097: 83.927}, "k2": {4096: 22.230, 4097: 22.455}}


def seed_bytes(level, n=N):
    return L.bytes_ledger(level, L.RTX4090, n, geom=SEED[level])


def seed_cycles(level, n=N):
    return L.cycle_ledger(level, L.RTX4090, n, geom=SEED[level])


def seed_requests(level, n=N):
    return L.request_ledger(level, n, geom=SEED[level])


# ---------------------------------------------------------------- bytes ledger

@pytest.mark.parametrize("level, intensity", [
    ("k1", 0.250), ("k2", 0.250), ("k3", 7.969), ("k3c", 12.720),
    ("k4", 7.969), ("k5", 12.720), ("k6", 12.720),
])
def test_seed_intensities(level, intensity):
    assert round(seed_bytes(level).intensity, 3) == intensity


def test_intensity_formula_exact():
    # 32×32 tile: 2·32·32·K FLOPs over 4·(32+32)·K + 4·32·32 bytes per tile
    k3 = seed_bytes("k3")
    assert k3.intensity == pytest.approx(2 * 32 * 32 * N / (4 * 64 * N + 4 * 1024), rel=1e-12)
    k5 = seed_bytes("k5")
    assert k5.intensity == pytest.approx(2 * 32 * 128 * N / (4 * 160 * N + 4 * 32 * 128), rel=1e-12)


def test_k2_attainment_is_far_above_the_roofline():
    # The seed: "K2 reached 2112.7% of roofline". Its arithmetic used intensity 0.250 exactly
    # (flops/t over 0.25 × 1008 GB/s); our model also counts C's 4 bytes per output.
    k2 = seed_bytes("k2")
    flops = 2 * N**3
    assert round(100 * flops / 0.025815 / (0.25 * 1008e9), 1) == 2112.7
    assert k2.attainment(0.025815) == pytest.approx(2112.7, rel=5e-4)


@pytest.mark.parametrize("level, parent", [("k8p", "k8"), ("v11p", "v11")])
def test_a_pitched_level_pays_its_copies(level, parent):
    """k8p and v11p move their padded copies before the product: the parent's bytes plus
    copies_bytes, which the model says."""
    from numba_gemm.registry import get

    shape = (4097, 4097, 4097)
    own, base = L.bytes_ledger(level, n=shape), L.bytes_ledger(parent, n=shape)
    copies = get(level).module.copies_bytes(*shape)
    assert copies > 0 and own.dram_bytes == base.dram_bytes + copies
    assert "padded copies" in own.model and "padded copies" not in base.model


def test_k8e_bytes_are_k8ps():
    """k8e launches fewer tiles but reads A′ and B′ as often as k8p's 33 × 33 tiles at 4097³
    (32 times by the interior, once more by a strip): the per-tile model's bytes are k8p's."""
    shape = (4097, 4097, 4097)
    assert L.bytes_ledger("k8e", n=shape).dram_bytes == L.bytes_ledger("k8p", n=shape).dram_bytes


def test_roofline_uses_the_larger_time():
    c = L.RTX4090
    k5 = seed_bytes("k5")
    assert k5.roofline_s == pytest.approx(max(k5.dram_bytes / c.bandwidth, k5.flops / c.fp32_flops))
    assert k5.bound == "memory"


# ---------------------------------------------------------------- requests ledger

def test_k1_33_requests_per_fma():
    r = seed_requests("k1")
    assert r.requests_per_fma == 33
    assert r.by_array()["A"][0] == 32
    assert r.by_array()["B"][0] == 1


def test_k2_coalesced():
    r = seed_requests("k2")
    assert r.requests_per_fma == 2
    assert r.by_array() == {"A": (1.0, 1.0), "B": (1.0, 1.0)}


@pytest.mark.parametrize("level, per_fma", [("k3", 2 / 32), ("k3c", 5 / 128), ("k4", 16 / 256),
                                            ("k5", 40 / 1024), ("k6", 40 / 1024)])
def test_tiled_requests_per_fma(level, per_fma):
    assert seed_requests(level).requests_per_fma == pytest.approx(per_fma)


def test_k6_moves_instructions_not_requests():
    k5, k6 = seed_requests("k5"), seed_requests("k6")
    assert k5.requests_per_fma == k6.requests_per_fma
    assert k5.loads_per_fma == pytest.approx(4 * k6.loads_per_fma)
    assert {w for _, w, *_ in k6.loads} == {16}


def test_k1_4096_vs_4097():
    for n in (4096, 4097):
        assert seed_requests("k1", n).requests_per_fma == 33
    assert "1 distinct" in L.stride_view("k1", 4096, SEED["k1"])
    assert "16384 bytes apart" in L.stride_view("k1", 4096, SEED["k1"])
    assert "32 distinct" in L.stride_view("k1", 4097, SEED["k1"])


@pytest.mark.parametrize("n, positions, ways", [(4095, 32, 1), (4096, 1, 32), (4097, 32, 1), (4104, 4, 8)])
def test_stride_view_tells_4097_from_4104(n, positions, ways):
    """k1 exercise 2: modulo 16 KiB 4097 and 4104 look alike (32 distinct values); the word
    positions of the A load in its 128-byte lines, and the bank ways they make, do not."""
    text = L.stride_view("k1", n)
    assert f"word positions in their 128-byte lines: {positions} ({ways}-way" in text
    a = next(x for x in L.warp_steps("k1", n)[0].accesses if x.array == "A")
    assert len({x % 128 // 4 for x in a.addrs}) == positions and L.bank_profile(a.addrs, 4).ways == ways


def test_explain_names_kinds_by_what_they_are():
    """--explain prints each load kind's facts on every level, not another write-up's name for it."""
    for lv in ("k3", "k4", "k5"):
        text = L.explain(lv, "h200")
        assert "seed" not in text and "32-way" not in text
        assert "shared, 32 distinct words in 32 banks, conflict-free" in text


# ---------------------------------------------------------------- cycles ledger

def test_k2_k3_cycles_and_prediction():
    k2, k3 = seed_cycles("k2"), seed_cycles("k3")
    assert round(k2.cycles_per_fma, 2) == 3.88
    assert round(k3.cycles_per_fma, 2) == 3.34
    assert k3.per_fma == {"lds_free": 1.0, "lds_bcast": 1.0, "ldg": 0.0625}
    # the seed printed 1.162: 3.88 / 3.34 after rounding; unrounded the ledger says 1.161
    assert round(round(k2.cycles_per_fma, 2) / round(k3.cycles_per_fma, 2), 3) == 1.162
    assert round(L.predicted_speedup(k2, k3), 3) == 1.161


def test_k3_to_k4_loads_per_8_fmas():
    k3, k4 = seed_cycles("k3"), seed_cycles("k4")
    assert 8 * k3.per_fma["lds_bcast"] == 8 and 8 * k3.per_fma["lds_free"] == 8
    assert 8 * k4.per_fma["lds_bcast"] == 8 and 8 * k4.per_fma["lds_free"] == 1
    assert round(8 * k3.shared_cycles, 2) == 25.76
    assert round(8 * k4.shared_cycles, 2) == 6.96
    assert round(k3.shared_cycles / k4.shared_cycles, 2) == 3.70
    # with the global loads (0.0625 per FMA × 1.94): 3.34 -> 0.99
    assert round(k4.cycles_per_fma, 2) == 0.99
    assert round(k4.global_cycles, 2) == 0.12


def test_per_32_fmas_k3_k4_k5():
    got = [round(32 * seed_cycles(lv).shared_cycles, 1) for lv in ("k3", "k4", "k5")]
    assert got == [103.0, 27.8, 15.0]
    k5 = seed_cycles("k5")
    assert 32 * k5.per_fma["lds_bcast"] == 8 and 32 * k5.per_fma["lds_free"] == 4


def test_cycle_ledger_unit_predicts_the_seed_k2_time():
    # SM cycles per warp instruction: (M·N·K/32) × 3.88 / (128 SMs × 2.52 GHz) vs 25.815 ms
    t = seed_cycles("k2").predicted_s(N, N, N)
    assert t == pytest.approx(0.025815, rel=0.005)


def test_k6_and_k1_not_priced_on_the_4090():
    assert seed_cycles("k6").cycles_per_fma is None
    assert set(seed_cycles("k6").missing) == {"ldg128", "lds128", "lds128_bcast"}
    assert seed_cycles("k1").cycles_per_fma is None      # ldg_x32 has no seed price
    assert "total: not measured on this card (missing: ldg128, lds128, lds128_bcast)" in L.explain("k6", L.RTX4090)


def test_k6_transposed_a_store_is_8_way():
    st_ = L.warp_steps("k6", N, SEED["k6"])[0]
    a_stores = [a for a in st_.accesses if a.array == "As" and a.op == "store"]
    assert a_stores and all(a.kind == "lds_conflict8" for a in a_stores)
    assert seed_cycles("k6").stores_per_fma["sts_conflict8"] > 0


# ---------------------------------------------------------------- cards and costs

def _costs_file(tmp_path, **extra):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"device": "NVIDIA H200", "sms": 132, "clock_ghz": 1.755,
                             "copy_bandwidth_Bps": 4.2e12, **extra}))
    return p


def test_h200_not_measured_until_the_costs_are(tmp_path):
    bare = L.h200(_costs_file(tmp_path))
    assert bare.costs == {} and bare.costs_source == ""
    assert "not measured on this card" in L.explain("k3", bare)
    c = L.h200(_costs_file(tmp_path, costs={"lds_free": 1.0, "lds_bcast": 0.5, "ldg": 2.0}))
    assert c.clock_ghz == 1.755 and c.bandwidth == 4.2e12 and c.sms == 132
    assert bare.tensor_flops == json.loads(L.CARDS_JSON.read_text())["cards"]["h200"]["tensor_flops"]
    assert L.h200(_costs_file(tmp_path, tensor_flops=6.5e14)).tensor_flops == 6.5e14   # measured wins
    k3 = L.cycle_ledger("k3", c, N, SEED["k3"])
    assert k3.cycles_per_fma == pytest.approx(1.0 + 0.5 + 0.0625 * 2.0)
    assert "not measured" not in L.explain("k3", c).split("cycles ledger")[1].split("moved")[0]


def test_h200_figures_are_the_measured_file():
    """No hand-written H200 number may disagree with data/h200_costs.json."""
    data = json.loads(L.H200_COSTS.read_text())
    c = L.card("h200")
    assert (c.sms, c.clock_ghz, c.bandwidth) == (data["sms"], data["clock_ghz"], data["copy_bandwidth_Bps"])
    assert dict(c.costs) == {k: v for k, v in data["costs"].items() if v is not None}
    assert c.fp32_flops == pytest.approx(data["sms"] * 128 * 2 * data["clock_ghz"] * 1e9)
    assert any("measured" in n and "h200_costs.json" in n for n in c.notes)


def test_card_names():
    assert L.card("4090") == L.RTX4090 == L.card("RTX 4090")
    assert L.card(L.RTX5080) is L.RTX5080
    with pytest.raises(ValueError, match="unknown card"):
        L.card("a100")


# ---------------------------------------------------------------- HGEMM: L2 model

def test_supertile_working_set_and_rereads():
    t9 = SEED_HTILES["v9"]
    lg = L.l2_ledger("v9", 8192, L.RTX5080, tile=t9)
    assert lg.working_set == (16 * 128 + 2 * 64) * 8192 * 2
    assert lg.a_reads == 1 and lg.b_reads == 64 // 16
    v8 = L.l2_ledger("v8", 8192, L.RTX5080, tile=SEED_HTILES["v8"])
    assert v8.b_reads == 64                                 # the seed's ~8 GB of re-reads
    assert 2 * 8192 * 8192 * (v8.b_reads - 1) / 1e9 == pytest.approx(8.5, abs=0.2)
    v7 = L.l2_ledger("v7", 8192, L.RTX5080, tile=SEED_HTILES["v7"])
    assert v7.a_reads == 64 and v7.b_reads == 1
    for lv in ("v7", "v8", "v9"):                           # 4096: everything fits once
        lg = L.l2_ledger(lv, 4096, L.RTX5080, tile=SEED_HTILES[lv])
        assert (lg.a_reads, lg.b_reads) == (1, 1)


def test_supertile_too_big_for_l2():
    big = L.HTile(128, 64, 64, "super", 32, 4)
    lg = L.l2_ledger("v9", 8192, L.RTX5080, tile=big)
    assert lg.working_set > L.RTX5080.l2_bytes
    assert "exceeds L2" in lg.notes[0]
    assert (lg.a_reads, lg.b_reads) == (128 // 4, 64 // 32)   # B's 4 panels fit: once per band


def test_one_row_supertile_is_row_major():
    """A 1 × grid_n super-tile is v8's launch order, so the model must give v8's figure."""
    v8 = L.l2_ledger("v8", 8192, "h200", tile=L.HTile(128, 128, 64, "n-fastest", 1, 1))
    row = L.l2_ledger("v9", 8192, "h200", tile=L.HTile(128, 128, 64, "super", 1, 64))
    assert (row.a_reads, row.b_reads) == (v8.a_reads, v8.b_reads) == (1, 64)
    assert row.dram_bytes == v8.dram_bytes


# ---------------------------------------------------------------- pure request model

WIDTHS = st.sampled_from([4, 8, 16])


@settings(max_examples=60, deadline=None)
@given(base_seg=st.integers(0, 10**6), perm=st.randoms(use_true_random=False))
def test_contiguous_aligned_warp_is_one_request(base_seg, perm):
    addrs = [base_seg * 128 + 4 * l for l in range(32)]
    perm.shuffle(addrs)
    assert L.requests(addrs) == 1
    assert L.sectors(addrs) == 4


@settings(max_examples=60, deadline=None)
@given(stride=st.integers(1, 200), base_seg=st.integers(0, 10**5))
def test_stride_requests(stride, base_seg):
    addrs = [base_seg * 128 + 4 * stride * l for l in range(32)]
    assert L.requests(addrs) == min(stride, 32)
    assert L.sectors(addrs) == min(4 * stride, 32)


@settings(max_examples=40, deadline=None)
@given(off=st.integers(1, 31), base_seg=st.integers(0, 10**5))
def test_misaligned_contiguous_is_two_requests(off, base_seg):
    addrs = [base_seg * 128 + 4 * off + 4 * l for l in range(32)]
    assert L.requests(addrs) == 2


@settings(max_examples=40, deadline=None)
@given(addr=st.integers(0, 2**40).map(lambda a: a * 4))
def test_broadcast_is_one_request_one_sector(addr):
    assert L.requests([addr] * 32) == 1
    assert L.sectors([addr] * 32) == 1
    assert L.global_kind([addr] * 32) == "ldg_bcast"


@settings(max_examples=40, deadline=None)
@given(base_seg=st.integers(0, 10**5))
def test_float4_warp_is_four_requests(base_seg):
    addrs = [base_seg * 128 + 16 * l for l in range(32)]
    assert L.requests(addrs, width=16) == 4
    assert L.sectors(addrs, width=16) == 16
    assert L.global_kind(addrs, 16) == "ldg128"


@settings(max_examples=60, deadline=None)
@given(stride=st.integers(0, 96))
def test_bank_ways_is_gcd(stride):
    addrs = [4 * stride * l for l in range(32)]
    p = L.bank_profile(addrs)
    want = 1 if stride == 0 else math.gcd(stride, 32)
    assert p.ways == want
    kind = L.shared_kind(addrs)
    if stride == 0:
        assert kind == "lds_bcast"
    elif want == 1:
        assert kind == "lds_free"
    else:
        assert kind == f"lds_conflict{want}"


def test_float4_shared_patterns():
    assert L.shared_kind([16 * l for l in range(32)], 16) == "lds128"
    assert L.bank_profile([16 * l for l in range(32)], 16).wavefronts == 4
    assert L.shared_kind([64] * 32, 16) == "lds128_bcast"
    # 8 lanes of a quarter-warp 128 bytes apart: all in banks 0-3, 8-way
    assert L.bank_profile([128 * l for l in range(32)], 16).ways == 8


# ---------------------------------------------------------------- reports

def test_stride_experiment_reproduces_the_seed_split():
    s = SEED_STRIDE_4090
    text = L.stride_experiment(s["k1"][4096], s["k2"][4096], s["k1"][4097], s["k2"][4097], "RTX 4090")
    assert "8.209×" in text and "2.392×" in text and "3.43×" in text
    h = SEED_CUDA_C_H200   # docs/RESULTS.md: 12.41× and 3.74×, a 3.32× stride penalty
    text = L.stride_experiment(h["k1"][4096], h["k2"][4096], h["k1"][4097], h["k2"][4097], "H200")
    assert "12.413×" in text and "3.738×" in text and "= 3.32×" in text


# ---------------------------------------------------------------- every registered level

@pytest.mark.parametrize("lv", LEVELS, ids=ids(LEVELS))
@pytest.mark.parametrize("card", ["rtx4090", "h200"])
def test_explain_compares_with_the_parent(lv, card):
    times = {lv.name: 10.0, **({lv.parent: 20.0} if lv.parent else {})}
    text = L.explain(lv, card, times)
    assert text.startswith(f"== {lv.name} on ") and "bytes ledger" in text
    assert "measured 10.000 ms" in text
    if lv.parent:
        assert f"moved from {lv.parent}:" in text
        assert "2.000×" in text                  # the measured speedup over the parent
    else:
        assert "moved from" not in text
    if lv.family == "hgemm":           # v11gv has no tensor-core instruction: its own n/a
        assert ("n/a: tensor-core level" in text) != ("HGMMA" in getattr(lv.module, "SASS_MUST_NOT_HAVE", ()))
        assert "requests ledger: n/a" in text and "cycles ledger: n/a" in text
    else:
        assert "requests ledger (one warp" in text and "cycles ledger" in text


@pytest.mark.parametrize("lv", SGEMM, ids=ids(SGEMM))
def test_sgemm_hooks(lv):
    """GEOMETRY is self-consistent and warp_step gives every warp 32 lanes' addresses."""
    g = lv.module.GEOMETRY
    assert g.threads * g.thread_m * g.thread_n == g.tile_m * g.tile_n
    assert g.threads % 32 == 0 and g.tile_k >= 1
    steps = L.warp_steps(lv, (2 * g.tile_m + 1, 2 * g.tile_n + 1, 3 * g.tile_k + 1))
    assert len(steps) == g.threads // 32
    for st in steps:
        assert st.fmas > 0
        loads = {a.array for a in st.accesses if a.space == "global" and a.op == "load"}
        assert loads == {"A", "B"}
        assert all(len(a.addrs) == 32 and a.width in (4, 8, 16) for a in st.accesses)
    rl = L.request_ledger(lv)
    assert rl.requests_per_fma > 0 and rl.sectors_per_fma >= rl.requests_per_fma
    assert L.cycle_ledger(lv, "h200").cycles_per_fma is not None   # the H200 file prices every kind


@pytest.mark.parametrize("lv", HGEMM, ids=ids(HGEMM))
def test_hgemm_hooks(lv):
    t = L.htile(lv, 8192, 50 * 2**20)
    cfg = lv.module.CONFIG
    assert (t.bm, t.bn, t.bk) == (cfg.bm, cfg.bn, cfg.bk) and t.raster in L.RASTERS
    if t.raster == "super":
        assert (t.super_m, t.super_n) == lv.module.tile_order(8192, 8192, 8192, 50 * 2**20)
    lg = L.l2_ledger(lv, 8192, "h200")
    assert lg.ideal_bytes <= lg.dram_bytes <= lg.per_tile_bytes * 1.0001


@pytest.mark.parametrize("lv", [lv for lv in SGEMM if lv.name in SEED], ids=ids([lv for lv in SGEMM if lv.name in SEED]))
def test_shipped_geometry_is_the_seeds(lv):
    """The seed's published figures (the tests above) hold for the shipped module."""
    assert lv.module.GEOMETRY == SEED[lv.name]
    assert L.request_ledger(lv).requests_per_fma == seed_requests(lv.name).requests_per_fma
    assert L.cycle_ledger(lv, L.RTX4090).per_fma == seed_cycles(lv.name).per_fma


def test_markdown_tables_cover_the_registry():
    md = L.markdown_tables("rtx4090")
    for lv in LEVELS:
        assert f"| {lv.name} " in md
    assert "| k3 | 1.0000 |" not in md  # kinds are columns, not the first cell
    cycles = {line.split(" | ")[0][2:]: line for line in md.splitlines() if "| predicted speedup |" not in line
              and line.count("|") > 10}   # the cycles table: one column per load kind
    assert "| k2 | 1.161× |" in cycles["k3"]   # predicted over its PARENT, k2
    assert "| k3 | " in cycles["k4"]           # k4's parent is k3, not the k3c side branch


def test_supertile_comparison_is_parent_vs_level():
    text = L.supertile_comparison(8192, "h200", "v9")
    assert "  v8: " in text and "  v9: " in text


# ---------------------------------------------------------------- split loads, small and ragged sizes

def test_a_load_split_over_lines_is_priced_from_the_cards_own_prices_by_lines(tmp_path):
    """Rows not a multiple of 128 bytes apart make a warp's load straddle lines (ldg_x2 at K=48):
    priced linearly in lines between the card's two nearest measured prices of that width."""
    c = L.h200(_costs_file(tmp_path, costs={"ldg": 1.0, "ldg_x32": 32.0, "ldg128": 4.0,
                                            "ldg128_x8": 10.0, "ldg128_x16": 14.0}))
    assert c.price("ldg_x2") == (pytest.approx(2.0), "ldg..ldg_x32")
    assert c.price("ldg128_x5") == (pytest.approx(5.5), "ldg128..ldg128_x8")
    assert c.price("ldg128_x12")[0] == pytest.approx(12.0)
    assert c.price("ldg128_x20")[0] == pytest.approx(16.0)      # past the last: its segment's slope
    assert c.price_basis("ldg128_x5") == "by 128-byte lines from ldg128 and ldg128_x8"
    assert c.price_basis("ldg128") == "" and c.price("lds_conflict3") == (None, "lds_conflict3")
    one = L.h200(_costs_file(tmp_path, costs={"ldg": 1.0}))      # one point is no line model
    assert one.price("ldg_x2") == (None, "ldg_x2")
    assert L.RTX4090.price("ldg_x2") == (None, "ldg_x2")


@pytest.mark.parametrize("n", [48, (40, 36, 33), 1])
def test_explain_prices_every_load_at_small_and_ragged_sizes(n):
    from numba_gemm.registry import registry

    for name, lv in registry().items():
        text = L.explain(name, "h200", n=n)
        assert "not measured" not in text and "missing" not in text, name
        assert "0.000 ms" not in text and " 0 µs" not in text, name
        if lv.family == "sgemm":
            assert L.cycle_ledger(name, "h200", n).cycles_per_fma is not None


def test_a_small_roofline_is_printed_in_microseconds():
    bl = L.bytes_ledger("k4", "h200", 48)
    assert f"roofline {1e6 * bl.roofline_s:.3g} µs" in L.explain("k4", "h200", n=48)
    assert 0 < 1e6 * bl.roofline_s < 1
