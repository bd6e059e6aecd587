"""v11t (v11sl on the transposed product: M ≤ 32 on wgmma's N).

CI (no GPU): the contract and the registry order; refusals (M > 32, TMA's rule); the tile rule
(MT the smaller of 16 and 32 holding M, as many stages as fit) and plan_splits as pure functions
(every K tile in exactly one slice, never an empty one, S·tiles within the SMs, S at most the
portable cluster size); NVRTC compiles every tile with the census (HGMMA 64 × MT, the cluster
barrier, loads from distributed shared memory; no local memory, no serialised wgmma); run()
recorded with the driver stubbed: one launch, clusters of S along x when S > 1, the slice length
and S as its last arguments.
GPU: exact on ragged shapes for both dtypes, automatic and forced S and NT, beta == 0 with C
poisoned by NaN, bit-identical reruns, K ≫ M·N, a captured CUDA graph replaying the same bits.
    python -m pytest -q tests/test_v11t.py -m gpu
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numba_gemm import splitk
from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import v11t_swapab as sw
from numba_gemm.measure import check
from numba_gemm.registry import registry
from numba_gemm.runtime import driver, launch
from numba_gemm.util import ceil_div
from tests.graph_replay import replays_exactly
from tests.test_hopper import census_ops

DTYPES = [np.float16] + ([cm.BF16] if cm.BF16 is not None else [])


def test_contract_and_registry_order():
    names = list(registry())
    assert names.index("v11sl") < names.index("v11t") < names.index("v12")
    assert sw.PARENT == "v11sl" and sw.DEFINES == sw.CONFIG.defines()
    assert (sw.CONFIG.bm, sw.CONFIG.bn, sw.CONFIG.threads) == (16, 128, 256)


def test_refusals():
    reason = sw.unsupported(33, 4096, 4096)
    assert reason and "v11sk" in reason and "32" in reason
    for shape in [(16, 64, 100), (16, 100, 64)]:                 # TMA's 16-byte rows, as v11
        reason = sw.unsupported(*shape)
        assert reason and "v9" in reason and "16 bytes" in reason
    for ok in [(1, 8, 8), (32, 4104, 72), (16, 8192, 2**20)]:
        assert sw.unsupported(*ok) is None
    with pytest.raises(ValueError, match="v11sk"):
        sw.run(np.zeros((128, 64), np.float16), np.zeros((64, 64), np.float16), None, 1.0, 0.0)


def test_tile_rule():
    assert [sw.tile_for(M, 4096).mt for M in (1, 16, 17, 32)] == [16, 16, 32, 32]
    for M in (16, 32):
        for nt in (64, 128):
            tile = sw.tile_for(M, 4096, nt=nt)
            deeper = sw.SwapTile(tile.mt, nt, tile.stages + 1)
            assert tile.smem() <= cm.SMEM_LIMIT
            assert tile.stages == sw.MAX_STAGES or deeper.smem() > cm.SMEM_LIMIT   # as deep as fits
    assert sw.tile_for(16, 4096).stages == 12                     # 18 KB stages
    assert sw.tile_for(16, 4096, stages=4).stages == 4
    for bad in [dict(nt=96), dict(nt=256), dict(stages=2), dict(stages=13)]:
        with pytest.raises(ValueError, match="no tile"):
            sw.tile_for(16, 4096, **bad)


def test_plan_of_the_decode_shapes():
    plans = [sw.plan_splits(*shape) for shape in [(16, 8192, 8192), (16, 14336, 4096), (3, 1000, 776),
                                                  (32, 4096, 4096), (16, 4096, 4096)]]
    # at N = 4096 128-wide tiles would take 4 slices: 64-wide ones take 2
    assert [(t.mt, t.nt, s) for t, s in plans] == [(16, 128, 2), (16, 128, 1), (16, 128, 1), (32, 64, 2),
                                                    (16, 64, 2)]
    assert sw.plan_splits(32, 4096, 4096, nt=128)[1] == 4


@settings(max_examples=200, deadline=None)
@given(M=st.integers(1, 32), n8=st.integers(1, 4096), k8=st.integers(1, 2**17), sms=st.integers(1, 264))
def test_plan_narrows_the_tile_only_past_two_slices(M, n8, k8, sms):
    N, K = 8 * n8, 8 * k8
    tile, S = sw.plan_splits(M, N, K, sms=sms)
    wide, S_wide = sw.plan_splits(M, N, K, sms=sms, nt=128)
    assert (tile, S) == ((wide, S_wide) if S_wide <= sw.NARROW_AFTER else sw.plan_splits(M, N, K, sms=sms, nt=64))


@settings(max_examples=300, deadline=None)
@given(M=st.integers(1, 32), n8=st.integers(1, 4096), k8=st.integers(1, 2**17), sms=st.integers(1, 264),
       nt=st.sampled_from([64, 128]))
def test_plan_splits_covers_k_once(M, n8, k8, sms, nt):
    N, K = 8 * n8, 8 * k8
    tile, S = sw.plan_splits(M, N, K, sms=sms, nt=nt)
    assert tile == sw.tile_for(M, N, nt=nt) and tile.mt >= M
    tiles, k_tiles = ceil_div(N, tile.nt), ceil_div(K, 64)
    assert 1 <= S <= min(sw.MAX_SPLITS, k_tiles)
    per = splitk.slice_k_tiles(k_tiles, S)
    assert (S - 1) * per < k_tiles <= S * per                    # no empty slice (the kernel's do-while)
    if S > 1:
        assert S * tiles <= sms and per >= sw.MIN_SLICE_K_TILES


def test_forced_splits_refused_when_out_of_range():
    for bad in (0, -1, 1.5, True, 65, 9):
        with pytest.raises(ValueError, match="splits"):
            sw.plan_splits(16, 256, 4096, splits=bad)               # 64 K tiles, clusters <= 8
    assert sw.plan_splits(16, 256, 4096, splits=3)[1] == 3


# ---------------------------------------------------------------------------- NVRTC + census

@pytest.mark.parametrize("M", [16, 32])
@pytest.mark.parametrize("nt", [64, 128])
def test_compiles_with_its_census(M, nt):
    tile = sw.tile_for(M, 4096, nt=nt)
    census_ops(sw.SOURCE, tile.defines(), sw.KERNEL_NAMES.values(), sw.SASS_MUST_HAVE,
               sw.SASS_MUST_NOT_HAVE, wgmma_n=tile.mt)


# ---------------------------------------------------------------------------- run(), recorded (no GPU)

class _Array:
    def __init__(self, ptr, shape, dtype):
        self.ptr, self.shape, self.dtype = ptr, shape, np.dtype(dtype)


@pytest.fixture
def stubbed(monkeypatch):
    from numba_gemm.runtime import nvrtc

    compiled = []
    monkeypatch.setattr(nvrtc, "function",
                        lambda source, name, defines=(): compiled.append((source, name, defines)) or 0x77)
    monkeypatch.setattr(driver, "allow_dynamic_smem", lambda fn, smem: None)
    monkeypatch.setattr(sw.cm, "sm_count", lambda: 132)
    monkeypatch.setattr(sw.cm, "resident_clusters", lambda fn, block, smem, c: 132 // c)  # every plan fits
    # v11's maps and arguments without the super-tile order (run() asks for none)
    monkeypatch.setattr(sw.wg, "maps_and_args", lambda level, A, B, C, alpha, beta, config, super_tiles: cm.pack_args(
        ("p", C.ptr), ("f", alpha), ("f", beta), *([("i", -1), ("i", -2)] if super_tiles else [])))
    return compiled


def test_run_with_a_split_is_one_cluster_launch(stubbed):
    M, N, K = 16, 8192, 8192
    A, B = _Array(0x1000, (M, K), np.uint16), _Array(0x2000, (K, N), np.uint16)
    C = _Array(0x3000, (M, N), np.float32)
    with launch.recording() as rec:
        sw.run(A, B, C, -1.5, 0.25)
    (L,) = rec.launches
    tile = sw.tile_for(M, N)
    assert L.grid == (64 * 2, 1, 1) and L.cluster == 2              # the 2 slices of a tile: one cluster
    assert L.block == (256, 1, 1) and L.smem == tile.smem()
    assert [a.value for a in L.keep] == [0x3000, -1.5, 0.25, 64, 2]  # no super-tile order; per, S
    assert set(stubbed) == {(sw.SOURCE, "v11t_swapab_bf16", tile.defines())}   # the plan's residency asks it too


def test_run_without_a_split_has_no_cluster(stubbed):
    A, B, C = _Array(0x1000, (8, 776), np.float16), _Array(0x2000, (776, 1000), np.float16), \
        _Array(0x3000, (8, 1000), np.float32)
    with launch.recording() as rec:
        sw.run(A, B, C, 0.5, 2.0, nt=64)
    (L,) = rec.launches
    assert L.grid == (16, 1, 1) and not L.cluster and L.block == (128, 1, 1)
    assert [a.value for a in L.keep[-2:]] == [13, 1]


# ---------------------------------------------------------------------------- GPU

def _dev(x):
    from numba import cuda

    return cuda.to_device(x.view(np.uint16) if x.dtype == cm.BF16 else x)


def _case(M, N, K, dtype, alpha, beta, rng, **kw):
    """Two runs against float64 (C poisoned with NaN when beta == 0): the same bytes both times."""
    from numba import cuda

    A, B, C = check.random_inputs(M, N, K, dtype, rng)
    C_in = C.copy() if beta != 0 else np.full((M, N), np.nan, np.float32)
    dA, dB = _dev(A), _dev(B)
    tile, S = sw.plan_splits(M, N, K, sms=sw.cm.sm_count(), splits=kw.get("splits"), nt=kw.get("nt"))
    what = f"v11t {np.dtype(dtype).name} M={M} N={N} K={K} a={alpha} b={beta} {kw} -> {tile}, S={S}"
    outs = []
    for _ in range(2):
        dC = cuda.to_device(C_in)
        sw.run(dA, dB, dC, alpha, beta, **kw)
        cuda.synchronize()
        outs.append(dC.copy_to_host())
    v = check.verify(outs[0], A, B, C, alpha, beta, family="hgemm")
    assert v.ok, f"{what}: {v}"
    assert outs[0].tobytes() == outs[1].tobytes(), f"{what}: two runs differ"


SHAPES = [(1, 8, 8), (3, 1000, 776), (16, 8192, 1024), (16, 4104, 4096), (17, 520, 1000), (32, 264, 2048),
          (29, 1032, 1000), (32, 4096, 4096), (32, 8, 2056), (8, 136, 72), (30, 14336, 512)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_exact_on_ragged_shapes_auto_splits(dtype):
    rng = np.random.default_rng()
    seen = set()
    for M, N, K in SHAPES:
        tile, S = sw.plan_splits(M, N, K, sms=sw.cm.sm_count())
        seen.add((tile.mt, S > 1))
        _case(M, N, K, dtype, 0.5, 3.0, rng)
        _case(M, N, K, dtype, 1.0, 0.0, rng)         # beta == 0: NaN in C must not leak
    assert {(16, True), (16, False), (32, True), (32, False)} <= seen


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("splits", [1, 2, 3, 7, 8])
def test_exact_with_forced_splits_and_widths(dtype, splits):
    rng = np.random.default_rng()
    for (M, N, K), nt in [((16, 520, 1024), 128), ((31, 264, 1000), 64), ((5, 776, 2048), 64),
                          ((32, 136, 1032), 128)]:
        _case(M, N, K, dtype, -1.5, 0.25, rng, splits=splits, nt=nt)
        _case(M, N, K, dtype, 1.0, 0.0, rng, splits=splits, nt=nt)


@pytest.mark.gpu
def test_k_much_longer_than_m_n():
    rng = np.random.default_rng()
    assert sw.plan_splits(16, 64, 2**20, sms=sw.cm.sm_count())[1] > 1
    _case(16, 64, 2**20, np.float16, 0.5, 3.0, rng)


@pytest.mark.gpu
def test_captured_graph_replays_the_same_bits():
    """A cluster launch captured with the driver's stream capture, replayed (tests/graph_replay.py)."""
    assert sw.plan_splits(16, 8192, 8192, sms=sw.cm.sm_count())[1] > 1
    replays_exactly("v11t", 16, 8192, 8192, np.random.default_rng())
