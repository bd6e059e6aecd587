"""k8p (k8 on copies of A, B and C in rows of whole float4s).

CI (no GPU): the refusal of aligned shapes; the copy plan as a pure function (pitches, the copy
of C only when beta != 0, the bytes); run()'s launches with the launcher stubbed (the copies,
k8's aligned kernel on the padded shape, the copy back, in that order); exactness in the
simulator on a small ragged shape with beta != 0 and with beta == 0 over a NaN-poisoned C.
GPU: exact on ragged shapes up to a few thousand, bit-identical reruns, a captured graph
replaying the same bits. The registry-driven tests (test_sgemm, test_twins, test_sass) cover
the rest of the level contract.
    python -m pytest -q tests/test_k8p.py -m gpu
"""
import numpy as np
import pytest

from numba_gemm.registry import registry
from numba_gemm.runtime import launch
from numba_gemm.sgemm import k8_double_buffer as k8
from numba_gemm.sgemm import k8p_pitched as k8p
from tests.conftest import exact_twice
from tests.graph_replay import replays_exactly


def test_contract_and_refusal_of_aligned_rows():
    assert registry()["k8p"].parent == "k8"
    assert "k8 runs without the copies" in k8p.unsupported(4096, 4096, 4096)
    assert k8p.unsupported(4096, 4096, 4097) is None and k8p.unsupported(4096, 4097, 4096) is None
    assert k8p.unsupported(7, 8, 5) is None and k8p.unsupported(2**16, 2**15 + 1, 3) is None   # past 2^31: u64


def test_copy_plan():
    assert [k8p.pitch(n) for n in (1, 4, 5, 4097)] == [4, 4, 8, 4100]
    assert [c[0] for c in k8p.copies(5, 7, 9, 0.0)] == ["A", "B", "C out"]
    assert k8p.copies(5, 7, 9, 2.0) == [("A", 5, 9, 5, 12), ("B", 9, 7, 12, 8), ("C in", 5, 7, 5, 8),
                                        ("C out", 5, 8, 5, 7)]
    # each copy reads what it keeps of its source and writes all of its destination, 4 bytes each
    assert k8p.copies_bytes(5, 7, 9, 0.0) == 4 * ((45 + 60) + (63 + 96) + (35 + 35))
    assert k8p.grid(5, 7) == k8.grid(5, 8) and k8p.copy_config(5000, 4100) == ((17, 1250), (256,))
    assert k8p.copy_config(2**22, 8)[0] == (1, 65535)            # rows past grid y: strided


def test_run_launches_copies_then_k8_then_the_copy_back(monkeypatch):
    calls = []
    monkeypatch.setattr(launch, "launch_numba", lambda fn, grid, block, args, stream=None:
                        calls.append((fn, grid, block, args)))
    from numba import cuda

    A, B = cuda.device_array((5, 9), np.float32), cuda.device_array((9, 7), np.float32)
    for beta, copies in ((0.0, 2), (1.5, 3)):
        calls.clear()
        k8p.run(A, B, cuda.device_array((5, 7), np.float32), 0.5, beta)
        assert [c[0] for c in calls] == [k8p.repitch] * copies + [k8p.kernel, k8p.repitch]
        fn, grid, block, args = calls[copies]
        assert grid == k8.grid(5, 8) and block == k8.BLOCK
        assert [int(a) for a in args[:3]] == [5, 8, 12] and float(args[6]) == beta   # M, pitch(N), pitch(K)
        *_, out = calls[-1]
        assert [int(x) for x in (out[1], out[2], out[4], out[5])] == [5, 8, 5, 7]     # C′ (5 × 8) into C (5 × 7)
    with pytest.raises(ValueError, match="k8 runs without the copies"):
        k8p.run(cuda.device_array((4, 8), np.float32), cuda.device_array((8, 4), np.float32), None, 1.0, 0.0)


def _case(M, N, K, alpha, beta, rng):
    exact_twice("k8p", M, N, K, alpha, beta, rng)


def test_exact_on_a_small_ragged_shape():
    """In the simulator too (one CTA of k8's kernel): beta != 0 reads C through its copy; beta
    == 0 never reads C, so the NaN in it must not reach the result."""
    rng = np.random.default_rng()
    _case(5, 7, 9, -0.75, 2.5, rng)
    _case(3, 6, 5, 1.0, 0.0, rng)


@pytest.mark.gpu
def test_exact_on_ragged_shapes():
    rng = np.random.default_rng()
    for M, N, K in [(1, 1, 1), (129, 131, 133), (1000, 1001, 999), (300, 4, 2051), (2049, 2050, 7)]:
        _case(M, N, K, 0.5, -1.5, rng)
        _case(M, N, K, 1.0, 0.0, rng)


@pytest.mark.gpu
def test_captured_graph_replays_the_same_bits():
    replays_exactly("k8p", 257, 259, 261, np.random.default_rng(), dtype=np.float32)
