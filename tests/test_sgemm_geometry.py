"""Each SGEMM level's ledger facts against its own kernel launch: GEOMETRY is what run()
launches, and warp_step's addresses are the block's tiles. Pure Python (no kernel runs),
except the last test, which runs k2's tuned kernel in the simulator or on the GPU."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numba_gemm.explain import ledgers
from numba_gemm.measure import check
from numba_gemm.registry import registry
from numba_gemm.sgemm._access import WARP

SGEMM = [lv for lv in registry().values() if lv.family == "sgemm"]
IDS = [lv.name for lv in SGEMM]
F32 = 4


def _launch(module, M, N, K):
    """(grid, block) that module.run() launches for an M×N×K product (nothing runs)."""
    from numba_gemm.runtime import launch

    seen = []
    mp = pytest.MonkeyPatch()
    for name in ("launch", "launch_in_kernel", "launch_stream"):   # k6gv, k9sk: split in the kernel; k9st
        if hasattr(module, name):
            mp.setattr(module, name, lambda kernel, grid, block, *a, **kw: seen.append((grid, block)))
    mp.setattr(launch, "launch_numba", lambda *a, **kw: None)   # k8p's copies: not the GEMM's launch
    try:
        A, B, C = (np.zeros(s, np.float32) for s in ((M, K), (K, N), (M, N)))
        module.run(A, B, C, 1.0, 0.0)
    finally:
        mp.undo()
    (launch,) = seen
    return launch


def _row_axis(module):
    """Which grid axis (0 = x, 1 = y) runs over the rows of C, from the launch itself."""
    g = module.GEOMETRY
    M, N = 5 * g.tile_m, 3 * g.tile_n - 1    # 5 row tiles, 3 column tiles: tell them apart
    if hasattr(module, "plan"):              # k8e: a thin bottom row, which its tiles leave out
        M += 1
    grid, _ = _launch(module, M, N, 8)
    assert sorted(grid) == [3, 5], grid
    return grid.index(5)


@pytest.mark.parametrize("level", SGEMM, ids=IDS)
def test_geometry_is_what_run_launches(level):
    mod = level.module
    g = mod.GEOMETRY
    assert ledgers.geometry(level.name) == g        # the ledgers price this geometry
    assert g.tile_m % g.thread_m == 0 and g.tile_n % g.thread_n == 0
    # each thread computes thread_m × thread_n outputs: the block's threads cover its tile
    assert g.threads * g.thread_m * g.thread_n == g.tile_m * g.tile_n
    axis = _row_axis(mod)
    for M, N, K in [(1, 1, 1), (37, 130, 5), (g.tile_m, g.tile_n, 64), (g.tile_m + 1, 3 * g.tile_n - 1, 3)]:
        if level.unsupported(M, N, K):                  # k8p: aligned rows are k8's
            continue
        grid, block = _launch(mod, M, N, K)
        t = mod.tile_for(M, N) if hasattr(mod, "tile_for") else g     # k8sk: 64 wide where N ≤ 64
        assert tuple(block) == t.block
        if hasattr(mod, "stream_plan") and mod.stream_plan(M, N, K).streams:   # k9st: one CTA a share
            assert tuple(grid) == mod.stream_plan(M, N, K).grid
            continue
        rows, cols = grid[axis], grid[1 - axis]
        m, n = mod.plan(M, N, K) if hasattr(mod, "plan") else (M, N)   # k8e: the whole tiles only
        assert (rows, cols) == (-(-m // t.tile_m), -(-n // t.tile_n)), (M, N, grid)


def _elements(access, ncols):
    """{(row, col)} of a matrix with `ncols` columns touched by a global access."""
    out = set()
    for a in access.addrs:
        for e in range(a // F32, (a + access.width) // F32):
            out.add(divmod(e, ncols))
    return out


def _shared(access):
    return {e for a in access.addrs for e in range(a // F32, (a + access.width) // F32)}


@pytest.mark.parametrize("level", SGEMM, ids=IDS)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_warp_step_touches_exactly_the_block_tiles(level, data):
    """For an interior block and phase, the block's warps together load exactly its A tile
    (its tile_m rows × the phase's tile_k columns) and its B tile (tile_k rows × its tile_n
    columns), do tile_m·tile_n FMAs per k, and read from shared memory only what they stored."""
    mod = level.module
    g = mod.GEOMETRY
    axis = _row_axis(mod)
    gm, gn, gk = (data.draw(st.integers(1, 3)) for _ in range(3))
    M = gm * g.tile_m + data.draw(st.integers(0, g.tile_m - 1))
    N = gn * g.tile_n + data.draw(st.integers(0, g.tile_n - 1))
    K = gk * g.tile_k + data.draw(st.integers(0, g.tile_k - 1))
    bm, bn, ph = (data.draw(st.integers(0, top - 1)) for top in (gm, gn, gk))   # an interior block
    bx, by = (bm, bn) if axis == 0 else (bn, bm)

    rows = set(range(bm * g.tile_m, (bm + 1) * g.tile_m))
    cols = set(range(bn * g.tile_n, (bn + 1) * g.tile_n))
    ks = set(range(ph * g.tile_k, (ph + 1) * g.tile_k))
    a_cols, b_cols = getattr(mod, "row_lengths", lambda M, N, K: (K, N))(M, N, K)   # k8p: its copies
    a_seen, b_seen = set(), set()
    stored, loaded = {}, {}
    for warp in range(g.threads // WARP):
        step = mod.warp_step(M, N, K, bx, by, warp, ph, g)
        assert step.fmas * g.threads == g.tile_m * g.tile_n * g.tile_k
        for acc in step.accesses:
            assert len(acc.addrs) == WARP
            if acc.space == "global":
                assert acc.op == "load" and not acc.inner
                if acc.array == "A":
                    a_seen |= _elements(acc, a_cols)
                else:
                    assert acc.array == "B"
                    b_seen |= _elements(acc, b_cols)
            else:
                assert acc.array in ("As", "Bs")
                into = loaded if acc.op == "load" else stored
                into.setdefault(acc.array, set()).update(_shared(acc))
                assert acc.inner == (acc.op == "load")
    assert a_seen == {(r, k) for r in rows for k in ks}
    assert b_seen == {(k, c) for k in ks for c in cols}
    if g.staged:
        assert len(stored["As"]) == g.tile_m * g.tile_k      # one word per element of the tile
        for name in stored:                                 # k6gv stages A only: B goes to registers
            assert loaded[name] <= stored[name], name
        assert not stored["As"] & stored.get("Bs", set())   # the two tiles do not overlap
    else:
        assert not stored and not loaded


@pytest.mark.parametrize("M, N, K", [(1, 1, 1), (33, 35, 7), (40, 36, 12), (5, 64, 2)])
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (0.5, -1.5)])
def test_k2_tuned_kernel_is_exact(M, N, K, alpha, beta):
    """k2's hand-unrolled variant (not the level's kernel, so the level tests do not run it):
    K % 4 remainders of 0..3, partial blocks, beta == 0 with NaN in C."""
    from numba import cuda

    from numba_gemm.sgemm import k2_coalesced as k2

    A, B, C = check.random_inputs(M, N, K)
    C_in = C.copy()
    if beta == 0:
        C[:] = np.nan
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
    k2.run(dA, dB, dC, alpha, beta, tuned=True)
    verdict = check.verify(dC.copy_to_host(), A, B, C_in, alpha, beta)
    assert verdict.ok, verdict
