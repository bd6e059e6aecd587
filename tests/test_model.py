"""numba_gemm.explain.model: the NumPy blocked algorithm is exact against A @ B for ragged shapes, its
tilings are the levels' own, and its thread tiles are the ones the kernels compute."""
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from numba_gemm.explain import model as md

SMALL = md.Tiling(tile_m=32, tile_n=16, tile_k=4, warp_m=32, warp_n=16)    # one warp of 4×4 tiles
SMALL2 = md.Tiling(tile_m=64, tile_n=32, tile_k=8, warp_m=32, warp_n=16, stages=3)   # 4 warps
SMALL_WG = replace(md.V11, tile_n=32, warp_n=32, tile_k=32)   # two warpgroups, k steps of 16


def _ints(rng, *shape):
    return rng.integers(-8, 9, shape).astype(np.float64)   # integer sums: exact in any order


@settings(max_examples=25, deadline=None)
@given(M=st.integers(1, 70), N=st.integers(1, 40), K=st.integers(1, 21),
       tiling=st.sampled_from([SMALL, SMALL2, SMALL_WG]), beta=st.sampled_from([0.0, -1.5]),
       seed=st.integers(0, 2**16))
def test_blocked_gemm_is_exact(M, N, K, tiling, beta, seed):
    rng = np.random.default_rng(seed)
    A, B, C = _ints(rng, M, K), _ints(rng, K, N), _ints(rng, M, N)
    want = 0.5 * (A @ B) + beta * C
    if beta == 0:
        C[...] = np.nan                              # BLAS: C is write-only when beta == 0
    got = md.gemm(A, B, C, 0.5, beta, tiling)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("tiling", [md.K7, md.K8, md.V11], ids=["k7", "k8", "v11"])
def test_shipped_tilings_ragged(tiling):
    rng = np.random.default_rng(1)
    M, N, K = tiling.tile_m + 3, tiling.tile_n + 5, 2 * tiling.tile_k + 1
    A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    np.testing.assert_allclose(md.gemm(A, B, t=tiling), A @ B, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("t", [md.K7, md.K8, md.V11, SMALL, SMALL2, SMALL_WG])
def test_thread_tiles_cover_the_block_tile_once(t):
    count = np.zeros((t.tile_m, t.tile_n), int)
    for warp in range(t.warps):
        for lane in range(t.threads_per_warp):
            rows, cols = md.thread_tile(t, warp, lane)
            assert (len(rows), len(cols)) == (t.thread_m, t.thread_n)
            count[np.ix_(rows, cols)] += 1
    assert (count == 1).all()


def test_tilings_are_the_levels():
    from numba_gemm.hgemm._wgmma import WgmmaTile
    from numba_gemm.registry import get

    for name, t in (("k7", md.K7), ("k8", md.K8)):
        w = get(name).module.TILING
        assert (w.tile_m, w.tile_n, w.tile_k, w.warp_m, w.warp_n, w.lanes_n) == \
               (t.tile_m, t.tile_n, t.tile_k, t.warp_m, t.warp_n, t.lanes_n)
        assert (w.thread_m, w.thread_n, w.warps) == (t.thread_m, t.thread_n, t.warps)
    v = WgmmaTile()
    assert (v.bm, v.bn, v.bk, v.stages, v.consumers) == (md.V11.tile_m, md.V11.tile_n, md.V11.tile_k,
                                                         md.V11.stages, md.V11.warps)


def test_thread_tile_is_the_kernels():
    """k8's first 4×4 piece (_warptile's thread_tile, run as Python in the simulator) and v11's
    accumulator fragment (ptx.wgmma_acc_coords) are the model's."""
    from numba_gemm.ptx import wgmma_acc_coords
    from numba_gemm.registry import get

    from conftest import SIMULATOR

    if SIMULATOR:
        from numba_gemm.sgemm import _warptile

        p = _warptile.make(get("k8").module.TILING, True, True)
        for warp in range(md.K8.warps):
            for lane in range(md.WARP):
                rows, cols = md.thread_tile(md.K8, warp, lane)
                assert tuple(int(x) for x in p.thread_tile(lane, warp)) == (rows[0], cols[0])
    for t in range(128):
        rows, cols = md.thread_tile(md.V11, 0, t)
        want = {wgmma_acc_coords(t, i) for i in range(128)}
        assert {(int(r), int(c)) for r in rows for c in cols} == want


def test_owner():
    assert md.owner(md.K8, 40, 17) == {"row0": 0, "col0": 0, "warp": 0, "lane": 8, "i": 4, "j": 5}
    assert md.owner(md.V11, 200, 300)["row0"] == 128 and md.owner(md.V11, 200, 300)["warp"] == 1
