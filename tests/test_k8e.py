"""k8e (k8p with its thin border row and column as matrix-vector products).

CI (no GPU): the refusals (aligned rows: k8's; no thin border: k8p's); the plan as pure
functions (M', N', the interior's grid, the right strip's grid); run()'s launches with the
launcher stubbed (the copies, k9's kernel on the whole tiles, k6gv or k6gv16 on the bottom rows,
edge_columns on the right columns, the copy back, in that order); exactness in the simulator on
small shapes with either strip or both, beta != 0 and beta == 0 over a NaN-poisoned C, with
B and C copied and in place (N % 4 == 0: only A copied, the K tail by k_tail).
GPU: exact on ragged shapes, bit-identical reruns, a captured graph replaying the same bits.
k8es (k8e with its interior by k9st's stream-K kernel and plan): the interior's plan, its
launches, exactness in the simulator with the interior streamed (slots forced to 3), and on a
GPU as k8e's. The registry-driven tests (test_sgemm, test_twins, test_sass) cover the rest of the contract.
    python -m pytest -q tests/test_k8e.py -m gpu
"""
import numpy as np
import pytest

from numba_gemm.runtime import launch
from numba_gemm.registry import registry
from numba_gemm.sgemm import k6gv16_rows as k6gv16
from numba_gemm.sgemm import k6gv_skinny as k6gv
from numba_gemm.sgemm import k8_double_buffer as k8
from numba_gemm.sgemm import k8e_edges as k8e
from numba_gemm.sgemm import k8p_pitched as k8p
from numba_gemm.sgemm import k9_unrolled as k9
from tests.conftest import exact_twice
from tests.graph_replay import replays_exactly


def test_contract_and_refusals():
    assert registry()["k8e"].parent == "k8p"
    assert "k8 runs without the copies" in k8e.unsupported(4096, 4096, 4096)
    assert "k8 runs without the copies" in k8e.unsupported(4097, 4096, 4096)   # k8p's refusal first
    assert "use k8p" in k8e.unsupported(4096, 4096, 4097)                      # no border at all
    assert "use k8p" in k8e.unsupported(4113, 4113, 4097)                      # 17 rows, 20 padded columns
    assert "use k8p" in k8e.unsupported(100, 7, 5)                             # one partial tile: no interior
    for shape in [(4097, 4097, 4097), (4100, 4100, 4097), (4097, 4096, 4097), (4096, 4097, 4096),
                  (130, 133, 9), (5, 130, 7), (2**16 + 1, 2**15 + 1, 3)]:    # past 2^31: u64
        assert k8e.unsupported(*shape) is None, shape


def test_plan_at_4097_cubed_and_around_it():
    assert k8e.plan(4097, 4097, 4097) == (4096, 4096) and k8e.grid(4097, 4097) == (32, 32)
    assert k8p.grid(4097, 4097) == (33, 33)                  # the tiles k8e does not launch
    assert k8e.edge_config(4097, 4097) == ((2048,), (32, 8))  # 2 rows a CTA, its 8 warps split K
    assert k8e.plan(4104, 4104, 4097) == (4096, 4096)        # 8 rows; 8 columns, two float4s
    assert k8e.plan(4097, 4096, 4097) == (4096, 4096) and k8e.grid(4097, 4096) == (32, 32)
    assert k8e.plan(4112, 4097, 4097) == (4096, 4096)        # 16 rows: one k6gv16 pass
    assert k8e.plan(4113, 4097, 4097) == (4113, 4096)        # 17 rows: a 33rd row of tiles
    assert k8e.grid(4113, 4097) == (32, 33)
    assert k8e.plan(777, 5000, 3001) == (768, 4992) and k8e.grid(777, 5000) == (39, 6)   # one wave
    assert k8e.plan(129, 5, 7) == (128, 8) and k8e.grid(129, 5) == (1, 1)
    assert k8e.plan(5, 130, 7) == (5, 128) and k8e.grid(5, 130) == (1, 1)
    assert k8e.EDGE == k6gv16.MAX_M == 2 * k6gv.MAX_M


def test_b_and_c_in_place_where_their_rows_are_whole_float4s():
    """N % 4 == 0: only A is copied, cut to K4 = K - K mod 4 columns (the tail is k_tail's);
    otherwise k8p's copies. The ledgers read the same plan."""
    assert k8e.copies(777, 5000, 3001, 0.0) == [("A", 777, 3001, 777, 3000)]
    assert k8e.copies(777, 5000, 3001, 1.0) == [("A", 777, 3001, 777, 3000)]   # C is never copied
    assert k8e.row_lengths(777, 5000, 3001) == (3000, 5000)
    assert k8e.copies_bytes(777, 5000, 3001) == 4 * (777 * 3000 * 2) + 8 * 777 * 5000
    for shape in [(4097, 4097, 4097), (130, 133, 9), (130, 136, 3)]:         # N % 4 != 0, or K < 4
        assert not k8e.direct(*shape[1:])
        assert k8e.copies(*shape, 0.0) == k8p.copies(*shape, 0.0)
        assert k8e.copies_bytes(*shape) == k8p.copies_bytes(*shape)
        assert k8e.row_lengths(*shape) == k8p.row_lengths(*shape)
    from numba import cuda

    A, C = cuda.device_array((130, 9), np.float32), cuda.device_array((130, 136), np.float32)
    B = cuda.device_array(9 * 136 + 1, np.float32)
    assert k8e.in_place_for(A, B[:-1].reshape(9, 136), C)
    assert not k8e.in_place_for(A, B[1:].reshape(9, 136), C)      # 4 bytes past 16: copies


def test_in_place_launches_the_a_copy_the_product_then_the_tail(monkeypatch):
    calls = []
    monkeypatch.setattr(launch, "launch_numba", lambda fn, grid, block, args, stream=None:
                        calls.append((fn, grid, args)))
    from numba import cuda

    A, B = cuda.device_array((139, 9), np.float32), cuda.device_array((9, 132), np.float32)
    k8e.run(A, B, cuda.device_array((139, 132), np.float32), 0.5, 0.0)
    gemv16 = k6gv16.SPECIALISATIONS[True, True][1]
    assert [c[0] for c in calls] == [k8p.repitch, k9.kernel, gemv16, k8e.edge_columns, k8e.k_tail]
    assert [int(a) for a in calls[0][2][1:3]] + [int(a) for a in calls[0][2][4:]] == [139, 9, 139, 8]
    assert [int(a) for a in calls[1][2][:3]] == [139, 132, 8]                # M, N, K4: B and C as they are
    assert [int(a) for a in calls[-1][2][:4]] == [139, 132, 9, 8]            # the k left: 8


def test_run_launches_copies_interior_bottom_right_then_the_copy_back(monkeypatch):
    calls = []
    monkeypatch.setattr(launch, "launch_numba", lambda fn, grid, block, args, stream=None:
                        calls.append((fn, grid, block, args)))
    from numba import cuda

    A, B = cuda.device_array((130, 9), np.float32), cuda.device_array((9, 133), np.float32)
    for beta, copies in ((0.0, 2), (1.5, 3)):
        calls.clear()
        k8e.run(A, B, cuda.device_array((130, 133), np.float32), 0.5, beta)
        assert [c[0] for c in calls] == ([k8p.repitch] * copies + [k9.kernel, k6gv.SPECIALISATIONS[True, True][1],
                                         k8e.edge_columns, k8p.repitch])
        fn, grid, block, args = calls[copies]
        assert grid == (1, 1) and block == k8.BLOCK                                    # the one whole tile
        assert [int(a) for a in args[:3]] == [130, 136, 12] and float(args[6]) == beta  # M, pitch(N), pitch(K)
        _, grid, _, args = calls[copies + 1]
        assert grid[:2] == (2, 1) and [int(a) for a in args[:3]] == [2, 136, 12]        # rows 128, 129
        _, grid, block, args = calls[copies + 2]
        assert (grid, block) == ((64,), (32, 8)) and [int(a) for a in args[:4]] == [128, 12, 136, 128]
    with pytest.raises(ValueError, match="use k8p"):
        k8e.run(cuda.device_array((4, 7), np.float32), cuda.device_array((7, 4), np.float32), None, 1.0, 0.0)


def test_the_bottom_strip_is_one_pass_k6gv_to_8_rows_k6gv16_past_them(monkeypatch):
    calls = []
    monkeypatch.setattr(launch, "launch_numba", lambda fn, grid, block, args, stream=None:
                        calls.append((fn, args)))
    from numba import cuda

    gemv, gemv16 = k6gv.SPECIALISATIONS[True, True][1], k6gv16.SPECIALISATIONS[True, True][1]
    for M, level, rows in [(139, gemv16, 11), (144, gemv16, 16), (136, gemv, 8), (129, gemv, 1)]:
        calls.clear()
        A, B = cuda.device_array((M, 9), np.float32), cuda.device_array((9, 8), np.float32)
        k8e.run(A, B, cuda.device_array((M, 8), np.float32), 1.0, 0.0)
        strips = [(fn, int(args[0])) for fn, args in calls if fn in (gemv, gemv16)]
        assert strips == [(level, rows)], M                                   # rows 128 .. M-1, B read once
        assert k8e.edge_columns not in [fn for fn, _ in calls]                # N = 8: no right strip


def _case(M, N, K, alpha, beta, rng):
    exact_twice("k8e", M, N, K, alpha, beta, rng)


def test_exact_on_small_shapes_with_strips():
    """In the simulator too: the right strip alone (beta != 0 reads C through its copy), the
    bottom strip alone and both (beta == 0 never reads C: the NaN must not reach the result)."""
    rng = np.random.default_rng()
    _case(5, 130, 7, -0.75, 2.5, rng)
    _case(129, 5, 7, 1.0, 0.0, rng)
    _case(130, 133, 9, 0.5, 0.0, rng)
    _case(139, 5, 7, 0.5, -1.5, rng)                 # a bottom strip of 11 rows: one k6gv16 pass
    _case(139, 8, 7, 0.5, -1.5, rng)                 # B and C in place: the K tail by k_tail
    _case(139, 8, 7, 1.0, 0.0, rng)
    _case(5, 132, 7, -0.75, 2.5, rng)                # in place, the right strip beside the tail


@pytest.mark.gpu
def test_exact_on_ragged_shapes():
    rng = np.random.default_rng()
    for M, N, K in [(129, 131, 133), (1025, 1031, 999), (1036, 1031, 999), (300, 2049, 2051), (2049, 2050, 7),
                    (4100, 129, 65), (777, 5000, 3001), (1030, 1032, 998), (2049, 2052, 5)]:   # the last: in place
        _case(M, N, K, 0.5, -1.5, rng)
        _case(M, N, K, 1.0, 0.0, rng)


@pytest.mark.gpu
def test_captured_graph_replays_the_same_bits():
    replays_exactly("k8e", 257, 259, 261, np.random.default_rng(), dtype=np.float32)
    replays_exactly("k8e", 257, 260, 261, np.random.default_rng(), dtype=np.float32)   # in place


# ---- k8es: k8e with its interior shared out by stream-K (k9st's kernel and plan) ----------------

from numba_gemm.sgemm import k8es_streamk as k8es  # noqa: E402
from numba_gemm.sgemm import k9st_streamk as k9st  # noqa: E402


def test_k8es_plans_the_interior_alone():
    """k9st's plan over k8e's whole tiles: at 777×5000×3001 the 234 interior tiles, 0.89 of a
    wave, shared by 264 CTAs; at 4097³ 1024 tiles, 0.97 of four waves, and whole waves: k8e
    itself."""
    assert registry()["k8es"].parent == "k8e"
    assert k8es.interior_plan(777, 5000, 3000) == (768, 39, k9st.StreamPlan(234, 375, 0, 264))
    assert k8es.interior_plan(4097, 4097, 4100) == (4096, 32, k9st.StreamPlan(1024, 513, 1024, 0))
    assert k8es.stream_plan(4097, 4097, 4097) == k8es.interior_plan(4097, 4097, 4100)[2]
    assert not k8es.interior_plan(33 * 128 + 5, 8 * 128 + 3, 4096)[2].streams     # 33 × 8 = 264 tiles
    for shape in [(4096, 4096, 4096), (100, 7, 5)]:
        assert k8es.unsupported(*shape) == k8e.unsupported(*shape)


def test_k8es_launches_k8es_interior_kernel_where_it_streams(monkeypatch):
    """In place at 139×132×70 on 3 slots: A's copy, the interior as one stream launch over
    the first 128 rows (its plan's grid, the workspace held), the strips, the K tail."""
    calls = []
    monkeypatch.setattr(launch, "launch_numba", lambda fn, grid, block, args, stream=None:
                        calls.append((fn, grid, args)))
    monkeypatch.setattr(k9st, "SLOTS", 3)
    from numba import cuda

    A, B = cuda.device_array((139, 70), np.float32), cuda.device_array((70, 132), np.float32)
    C = cuda.device_array((139, 132), np.float32)
    m, tiles_n, p = k8es.interior_plan(139, 132, 68)
    assert (m, tiles_n, p) == (128, 1, k9st.StreamPlan(1, 9, 0, 2))
    k8es.run(A, B, C, 1.0, 0.0)
    fns = [fn for fn, _, _ in calls]
    assert fns[0] is k8p.repitch and fns[1] is k8es.kernel and fns[-1] is k8e.k_tail
    assert calls[1][1] == p.grid and int(calls[1][2][0]) == m and int(calls[1][2][3]) == tiles_n
    assert k8e.edge_columns in fns and fns.count(k8e.k_tail) == 1


def test_k8es_exact_with_a_streamed_interior(monkeypatch):
    """In the simulator on 3 slots, so that two CTAs share the interior's one tile: with B and
    C copied (N % 4 != 0) and in place (N % 4 == 0, the K tail by k_tail), both strips."""
    monkeypatch.setattr(k9st, "SLOTS", 3)
    rng = np.random.default_rng()
    for M, N, K, alpha, beta, k in [(130, 133, 70, 1.0, 0.0, 72), (139, 132, 70, 0.5, -1.5, 68)]:
        assert k8es.interior_plan(M, N, k)[2].streams
        exact_twice("k8es", M, N, K, alpha, beta, rng)


@pytest.mark.gpu
def test_k8es_exact_on_ragged_shapes():
    rng = np.random.default_rng()
    for M, N, K in [(1025, 1031, 999), (300, 2049, 2051), (4100, 129, 65), (777, 5000, 3001), (2049, 2052, 5)]:
        exact_twice("k8es", M, N, K, 0.5, -1.5, rng)
        exact_twice("k8es", M, N, K, 1.0, 0.0, rng)


@pytest.mark.gpu
def test_k8es_captured_graph_replays_the_same_bits():
    replays_exactly("k8es", 777, 1029, 300, np.random.default_rng(), dtype=np.float32)
    replays_exactly("k8es", 777, 1032, 301, np.random.default_rng(), dtype=np.float32)   # in place
