"""v11sl (v11sk with the reduction inside the GEMM kernel).

CI (no GPU): the contract and the registry order; the tile rule (BM by M, BN the narrowest wgmma
width covering N) and plan_splits as pure functions (every K tile in exactly one slice, S·tiles
within the SMs, S at most the portable cluster size); NVRTC compiles for the tiles the rule picks,
with the census (HGMMA, the cluster barrier, loads from distributed shared memory; no local
memory); run() recorded with the driver stubbed: one launch either way, clusters of S along x
when S > 1, S and the slice length as its last arguments.
GPU: exact on ragged shapes for both dtypes, automatic and forced S and tiles, beta == 0 with C
poisoned by NaN, bit-identical reruns, calls with other splits on one output after each other,
K ≫ M·N, a captured CUDA graph replaying the same bits.
    python -m pytest -q tests/test_v11sl.py -m gpu
"""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numba_gemm import splitk
from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import _wgmma as wg
from numba_gemm.hgemm import v11sl_splitk as sl
from numba_gemm.measure import check
from numba_gemm.registry import registry
from numba_gemm.runtime import driver, launch
from numba_gemm.util import ceil_div
from tests.graph_replay import replays_exactly
from tests.test_hopper import census_ops

DTYPES = [np.float16] + ([cm.BF16] if cm.BF16 is not None else [])


def test_contract_and_registry_order():
    names = list(registry())
    assert names.index("v11sk") < names.index("v11sl") < names.index("v12")
    assert sl.PARENT == "v11sk" and sl.DEFINES == sl.CONFIG.defines()


def test_refusals_as_v11():
    for shape in [(64, 64, 100), (64, 100, 64), (1, 1, 1), (127, 4099, 72)]:
        reason = sl.unsupported(*shape)
        assert reason and "v9" in reason and "16 bytes" in reason
    for ok in [(1, 8, 8), (127, 4104, 72), (64, 64, 2**20)]:
        assert sl.unsupported(*ok) is None
    with pytest.raises(ValueError, match="v9"):
        sl.run(np.zeros((16, 12), np.float16), np.zeros((12, 16), np.float16), None, 1.0, 0.0)


def test_tile_rule():
    assert [(sl.tile_for(M, N).bm, sl.tile_for(M, N).bn, sl.tile_for(M, N).stages)
            for M, N in [(16, 8192), (64, 64), (65, 64), (4096, 128), (128, 4096)]] == \
        [(64, 64, 4), (64, 64, 4), (128, 64, 4), (128, 64, 4), (128, 64, 4)]
    assert sl.tile_for(4096, 4096, bm=64, bn=128) == dataclasses.replace(sl.CONFIG, bm=64, bn=128)
    deep = wg.deepest(sl.tile_for(4096, 128))                    # 8 stages of 24 KB fit, up to MAX_STAGES
    assert deep.stages == wg.MAX_STAGES and deep.smem() <= cm.SMEM_LIMIT
    wide = wg.deepest(sl.tile_for(128, 4096, bn=256))             # 48 KB stages: 4 is all that fits
    assert wide.stages == 4 and dataclasses.replace(wide, stages=5).smem() > cm.SMEM_LIMIT
    for bad in [dict(bm=32), dict(bn=96), dict(bm=256), dict(stages=1), dict(bn=256, stages=5)]:
        with pytest.raises(ValueError, match="no tile"):
            sl.tile_for(128, 128, **bad)


def test_plan_of_the_measured_shapes():
    # one CTA per SM: the deepest pipeline; a larger grid keeps 4 stages (two CTAs an SM)
    plans = [sl.plan_splits(*shape) for shape in [(4096, 128, 4096), (128, 4096, 4096), (16, 8192, 8192),
                                                  (1024, 1024, 1024), (512, 4096, 4096)]]
    assert [(t.bm, t.bn, t.stages, s) for t, s in plans] == \
        [(128, 64, 8, 2), (128, 64, 8, 2), (64, 64, 8, 1), (128, 64, 8, 1), (128, 64, 4, 1)]
    assert sl.plan_splits(4096, 128, 4096, stages=4)[0].stages == 4      # a forced depth is kept
    assert sl.plan_splits(4096, 4096, 4096) == (sl.tile_for(4096, 4096), 1)


@settings(max_examples=300, deadline=None)
@given(M=st.integers(1, 20000), n8=st.integers(1, 4096), k8=st.integers(1, 2**17),
       sms=st.integers(1, 264))
def test_plan_splits_covers_k_once(M, n8, k8, sms):
    N, K = 8 * n8, 8 * k8
    tile, S = sl.plan_splits(M, N, K, sms=sms)
    tiles = ceil_div(M, tile.bm) * ceil_div(N, tile.bn)
    assert tile == (wg.deepest(sl.tile_for(M, N)) if tiles * S <= sms else sl.tile_for(M, N))
    tiles, k_tiles = ceil_div(M, tile.bm) * ceil_div(N, tile.bn), ceil_div(K, 64)
    assert 1 <= S <= min(sl.MAX_SPLITS, k_tiles)
    per = splitk.slice_k_tiles(k_tiles, S)
    assert (S - 1) * per < k_tiles <= S * per                              # no empty slice, all covered
    if S > 1:
        assert S * tiles <= sms and 4 * S * M * N <= splitk.WORKSPACE_LIMIT
        assert per >= sl.MIN_SLICE_K_TILES


def test_a_tile_is_priced_with_its_own_split():
    """choose.geometry of v11sl with a tile's run() keywords: the split plan_splits gives that
    tile (how auto would price a tile of a split-K level), not the shipped tile's."""
    from numba_gemm import choose

    lv = registry()["v11sl"]
    assert choose.tile_choices(lv) == []                 # no tile but CONFIG for auto
    assert choose.geometry(lv, 4096, 128, 4096, kwargs=(("bm", 128), ("bn", 128))) == \
        choose.Geometry(128, 128, 4, True)
    assert choose.geometry(lv, 128, 4096, 4096, kwargs=(("bm", 128), ("bn", 256))).splits == 8
    assert choose.geometry(lv, 4096, 128, 4096) == choose.Geometry(128, 64, 2, True)


def test_forced_splits_refused_when_out_of_range():
    for bad in (0, -1, 1.5, True, 65, 9):
        with pytest.raises(ValueError, match="splits"):
            sl.plan_splits(128, 256, 4096, splits=bad)                  # 64 K tiles, clusters <= 8
    assert sl.plan_splits(128, 256, 4096, splits=3)[1] == 3 and sl.plan_splits(64, 64, 2**20)[1] == 8


# ---------------------------------------------------------------------------- NVRTC + census

@pytest.mark.parametrize("bm, bn", [(128, 256), (64, 256), (128, 128), (128, 64)])
def test_compiles_with_its_census(bm, bn):
    census_ops(sl.SOURCE, sl.tile_for(4096, 4096, bm=bm, bn=bn).defines(), sl.KERNEL_NAMES.values(),
               sl.SASS_MUST_HAVE, sl.SASS_MUST_NOT_HAVE, wgmma_n=bn)


# ---------------------------------------------------------------------------- run(), recorded (no GPU)

class _Array:
    def __init__(self, ptr, shape, dtype):
        self.ptr, self.shape, self.dtype = ptr, shape, np.dtype(dtype)


@pytest.fixture
def stubbed(monkeypatch):
    from numba_gemm.runtime import nvrtc

    defines = []

    def function(source, name, defines_=()):
        defines.append((source, name, defines_))
        return 0x77

    monkeypatch.setattr(nvrtc, "function", lambda source, name, defines=(): function(source, name, defines))
    monkeypatch.setattr(driver, "allow_dynamic_smem", lambda fn, smem: None)
    monkeypatch.setattr(sl.cm, "sm_count", lambda: 132)
    monkeypatch.setattr(sl.cm, "resident_clusters", lambda fn, block, smem, c: 132 // c)  # every plan fits
    monkeypatch.setattr(sl.wg, "maps_and_args", lambda level, A, B, C, alpha, beta, config: cm.pack_args(
        ("p", C.ptr), ("f", alpha), ("f", beta)))
    monkeypatch.setattr(sl.wg, "check_operands", lambda *a: None)
    monkeypatch.setattr(sl.cm, "device_ptr", lambda a: a.ptr)
    return defines


def test_run_without_a_split_is_v11s_launch(stubbed):
    A, B, C = _Array(0x1000, (4096, 4096), np.float16), _Array(0x2000, (4096, 4096), np.float16), \
        _Array(0x3000, (4096, 4096), np.float32)
    with launch.recording() as rec:
        sl.run(A, B, C, 0.5, 2.0)
    (L,) = rec.launches
    assert L.grid == (32 * 64, 1, 1) and not L.cluster
    assert [a.value for a in L.keep[:3]] == [0x3000, 0.5, 2.0] and [a.value for a in L.keep[-2:]] == [64, 1]
    assert stubbed == [(sl.SOURCE, "v11sl_splitk_f16", sl.CONFIG.defines())]


def test_run_with_a_split_is_one_cluster_launch(stubbed):
    M, N, K = 4096, 128, 4096
    A, B = _Array(0x1000, (M, K), np.uint16), _Array(0x2000, (K, N), np.uint16)
    C = _Array(0x3000, (M, N), np.float32)
    with launch.recording() as rec:
        sl.run(A, B, C, -1.5, 0.25)
    (L,) = rec.launches                                          # no reduction launch
    tile = wg.deepest(sl.tile_for(M, N))
    assert L.grid == (64 * 2, 1, 1) and L.cluster == 2              # the 2 slices of a tile: one cluster
    assert L.block == (tile.threads, 1, 1) and L.smem == tile.smem()
    assert [a.value for a in L.keep[:3]] == [0x3000, -1.5, 0.25]   # C, alpha and beta: applied once
    assert [a.value for a in L.keep[-2:]] == [32, 2]               # 32 K tiles a slice, S = 2
    assert stubbed[0][1] == "v11sl_splitk_bf16" and stubbed[0][2] == tile.defines()


# ---------------------------------------------------------------------------- GPU

def _dev(x):
    from numba import cuda

    return cuda.to_device(x.view(np.uint16) if x.dtype == cm.BF16 else x)


def _case(M, N, K, dtype, alpha, beta, rng, **kw):
    """Two runs against float64 (C poisoned with NaN when beta == 0): the same bytes both times.
    Returns the output."""
    from numba import cuda

    A, B, C = check.random_inputs(M, N, K, dtype, rng)
    C_in = C.copy() if beta != 0 else np.full((M, N), np.nan, np.float32)
    dA, dB = _dev(A), _dev(B)
    tile, S = sl.plan_splits(M, N, K, sms=sl.cm.sm_count(), splits=kw.get("splits"), bm=kw.get("bm"),
                             bn=kw.get("bn"))
    what = f"v11sl {np.dtype(dtype).name} M={M} N={N} K={K} a={alpha} b={beta} {kw} -> {tile.label()}, S={S}"
    outs = []
    for _ in range(2):
        dC = cuda.to_device(C_in)
        sl.run(dA, dB, dC, alpha, beta, **kw)
        cuda.synchronize()
        outs.append(dC.copy_to_host())
    v = check.verify(outs[0], A, B, C, alpha, beta, family="hgemm")
    assert v.ok, f"{what}: {v}"
    assert outs[0].tobytes() == outs[1].tobytes(), f"{what}: two runs differ"
    return outs[0]


SHAPES = [(1, 8, 8), (16, 8192, 1024), (37, 1032, 1000), (64, 264, 2048), (65, 256, 512),
          (100, 520, 4096), (128, 4096, 4096), (129, 264, 1000), (300, 8, 2056), (4096, 128, 4096),
          (8192, 64, 2048), (1000, 40, 136), (4097, 4104, 512), (777, 120, 3000)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_exact_on_ragged_shapes_auto_splits(dtype):
    rng = np.random.default_rng()
    seen = set()
    for M, N, K in SHAPES:
        if sl.unsupported(M, N, K):
            continue
        tile, S = sl.plan_splits(M, N, K, sms=sl.cm.sm_count())
        seen.add((tile.bm, tile.bn, S > 1))
        _case(M, N, K, dtype, 0.5, 3.0, rng)
        _case(M, N, K, dtype, 1.0, 0.0, rng)         # beta == 0: NaN in C must not leak
    assert {(64, 64, True), (128, 64, True), (128, 64, False)} <= seen


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("splits", [1, 2, 3, 7, 8])
def test_exact_with_forced_splits_and_tiles(dtype, splits):
    rng = np.random.default_rng()
    for (M, N, K), tile in [((16, 520, 1024), {}), ((65, 264, 1000), dict(bn=64)),
                            ((200, 776, 2048), dict(bm=64, bn=128)), ((300, 136, 1032), dict(bn=256))]:
        _case(M, N, K, dtype, -1.5, 0.25, rng, splits=splits, **tile)
        _case(M, N, K, dtype, 1.0, 0.0, rng, splits=splits, **tile)


@pytest.mark.gpu
def test_other_splits_on_the_same_output_after_each_other():
    """One C, the same tiles, S = 8, 2, 5, 1, 8 in turn."""
    from numba import cuda

    rng = np.random.default_rng()
    M, N, K = 256, 512, 4096
    A, B, C = check.random_inputs(M, N, K, np.float16, rng)
    dA, dB, dC = _dev(A), _dev(B), cuda.to_device(C)
    for S in (8, 2, 5, 1, 8):
        dC.copy_to_device(C)
        sl.run(dA, dB, dC, 0.5, -1.0, splits=S)
        v = check.verify(dC.copy_to_host(), A, B, C, 0.5, -1.0, family="hgemm")
        assert v.ok, f"S={S}: {v}"


@pytest.mark.gpu
def test_k_much_longer_than_m_n():
    rng = np.random.default_rng()
    assert sl.plan_splits(64, 64, 2**20, sms=sl.cm.sm_count())[1] > 1
    _case(64, 64, 2**20, np.float16, 0.5, 3.0, rng)


@pytest.mark.gpu
def test_captured_graph_replays_the_same_bits():
    """A cluster launch captured with the driver's stream capture, replayed (tests/graph_replay.py)."""
    assert sl.plan_splits(4096, 128, 4096, sms=sl.cm.sm_count())[1] > 1
    replays_exactly("v11sl", 4096, 128, 4096, np.random.default_rng())
