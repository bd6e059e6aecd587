"""gemm() rejects bad input with a clear error before any launch, and lists its levels."""
import numpy as np
import pytest

import numba_gemm
from numba_gemm import check
from numba_gemm import registry as L


def _mats(M=5, N=6, K=7, dtype=np.float32):
    rng = np.random.default_rng()
    return rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)


def test_levels_listed_in_ladder_order():
    names = [lv.name for lv in numba_gemm.levels()]
    sgemm = [n for n in names if n.startswith("k")]
    assert sgemm == sorted(sgemm, key=L._order)
    for lv in numba_gemm.levels():
        assert lv.title and lv.delta.startswith(lv.name), lv.name


def test_order_key():
    assert sorted(["v10", "k3c", "k3", "v9", "k1", "k6"], key=L._order) == ["k1", "k3", "k3c", "k6", "v9", "v10"]


def test_unknown_level():
    A, B = _mats()
    with pytest.raises(ValueError, match="unknown level 'k99'"):
        numba_gemm.gemm(A, B, level="k99")


def test_wrong_dtype():
    A, B = _mats(dtype=np.float64)
    with pytest.raises(TypeError, match="float32"):
        numba_gemm.gemm(A, B, level="k1")


def test_mixed_dtypes():
    A, _ = _mats()
    _, B = _mats(dtype=np.float16)
    with pytest.raises(TypeError):
        numba_gemm.gemm(A, B, level="k1")


def test_inner_dimension_mismatch():
    A, _ = _mats(K=7)
    _, B = _mats(K=8)
    with pytest.raises(ValueError, match="inner dimensions"):
        numba_gemm.gemm(A, B, level="k1")


def test_not_a_matrix():
    A, B = _mats()
    with pytest.raises(ValueError, match="2-D"):
        numba_gemm.gemm(A.ravel(), B, level="k1")


def test_non_contiguous():
    A, B = _mats(M=6, K=6, N=6)
    with pytest.raises(ValueError, match="contiguous"):
        numba_gemm.gemm(A.T, B, level="k1")


def test_bad_c():
    A, B = _mats(M=5, N=6)
    with pytest.raises(ValueError, match="shape"):
        numba_gemm.gemm(A, B, np.zeros((6, 5), np.float32), level="k1")
    with pytest.raises(TypeError, match="C must be float32"):
        numba_gemm.gemm(A, B, np.zeros((5, 6), np.float64), level="k1")


def test_beta_needs_c():
    A, B = _mats()
    with pytest.raises(ValueError, match="beta"):
        numba_gemm.gemm(A, B, beta=1.0, level="k1")


def test_not_an_array():
    _, B = _mats()
    with pytest.raises(TypeError, match="NumPy array"):
        numba_gemm.gemm([[1.0]], B, level="k1")


def test_mixed_host_and_device():
    from numba import cuda

    A, B = _mats()
    with pytest.raises(TypeError, match="mix"):
        numba_gemm.gemm(cuda.to_device(A), B, level="k1")


def test_result_written_into_host_c():
    A, B = _mats(M=3, N=4, K=5)
    C = np.random.default_rng().standard_normal((3, 4)).astype(np.float32)
    C0 = C.copy()
    out = numba_gemm.gemm(A, B, C, alpha=2.0, beta=-0.5, level="k2")
    assert out is C
    assert check.verify(C, A, B, C0, 2.0, -0.5).ok


# --- arguments are checked first, each error names its argument

@pytest.mark.parametrize("level", [None, 6, ("k1",)])
def test_level_must_be_a_name(level):
    A, B = _mats()
    with pytest.raises(TypeError, match="level must be"):
        numba_gemm.gemm(A, B, level=level)


@pytest.mark.parametrize("name, value, exc", [
    ("alpha", "x", TypeError), ("beta", "0", TypeError), ("alpha", True, TypeError),
    ("alpha", float("nan"), ValueError), ("beta", 1e39, ValueError), ("alpha", None, TypeError),
])
def test_scalars_are_real_and_named(name, value, exc):
    A, B = _mats()
    with pytest.raises(exc, match=name):
        numba_gemm.gemm(A, B, level="k1", **{name: value})


def test_numpy_scalars_accepted():
    A, B = _mats(M=2, N=3, K=4)
    out = numba_gemm.gemm(A, B, alpha=np.float32(2), beta=np.int64(0), level="k1")
    assert check.verify(out, A, B, None, 2.0, 0.0).ok


def test_read_only_c_refused():
    A, B = _mats(M=2, N=3, K=4)
    C = np.zeros((2, 3), np.float32)
    C.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        numba_gemm.gemm(A, B, C, level="k1")


# --- level="auto": a documented rule, never a level that refuses the shape

from hypothesis import given, settings, strategies as st  # noqa: E402

from numba_gemm import api  # noqa: E402
from numba_gemm.operands import BFLOAT16  # noqa: E402

DIMS = st.one_of(st.integers(1, 300), st.integers(1, 2**34))


@settings(max_examples=300, deadline=None)
@given(M=DIMS, N=DIMS, K=DIMS, dtype=st.sampled_from([np.float32, np.float16, BFLOAT16]),
       native=st.booleans())
def test_auto_never_picks_a_level_that_refuses(M, N, K, dtype, native):
    cands = api.auto_candidates(dtype, M, N, K, native)
    ranked = [lv for lv in reversed(numba_gemm.levels()) if np.dtype(dtype) in lv.dtypes
              and (native or not lv.native) and getattr(lv.module, "AUTO", True)]
    # the candidates are exactly the ranked levels that serve the shape, best first
    assert cands == [lv for lv in ranked if lv.unsupported(M, N, K) is None]
    for lv in cands:
        assert np.dtype(dtype) in lv.dtypes and lv.unsupported(M, N, K) is None
        assert native or not lv.native


def test_auto_rule_on_todays_ladder():
    top = {lv.family: lv.name for lv in numba_gemm.levels()}     # last of each ladder
    assert api.auto_candidates(np.float32, 64, 64, 64, True)[0].name == top["sgemm"]
    assert api.auto_candidates(np.float16, 64, 64, 64, True)[0].name == top["hgemm"]
    # v10 needs K and N multiples of 8; v9 serves any shape
    odd = [lv.name for lv in api.auto_candidates(BFLOAT16, 65, 63, 61, True)]
    assert "v10" not in odd and "v9" in odd
    assert api.auto_candidates(np.float16, 64, 64, 64, False) == []


def test_a_new_level_is_ranked_without_an_edit(monkeypatch):
    import types as pytypes

    from numba_gemm import registry as R

    mod = pytypes.SimpleNamespace(LEVEL="k99", unsupported=lambda M, N, K: "never" if N == 7 else None)
    new = R.Level("k99", "t", "k99 = ...", (np.dtype(np.float32),), "sgemm", mod)
    reg = dict(R.registry())
    order = list(reg.values())
    i = max(j for j, lv in enumerate(order) if lv.family == "sgemm")
    order.insert(i + 1, new)
    monkeypatch.setattr(R, "_REGISTRY", {lv.name: lv for lv in order})
    assert api.auto_candidates(np.float32, 8, 8, 8, True)[0].name == "k99"
    assert api.auto_candidates(np.float32, 8, 7, 8, True)[0].name != "k99"
    mod.AUTO = False
    assert api.auto_candidates(np.float32, 8, 8, 8, True)[0].name != "k99"


# --- without a GPU (the simulator, or one clear error)

needs_simulator = pytest.mark.skipif(not numba_gemm.gpu.simulating(), reason="simulator only")


@needs_simulator
def test_auto_runs_in_the_simulator():
    A, B = _mats(M=5, N=6, K=7)
    out = numba_gemm.gemm(A, B)
    assert isinstance(out, np.ndarray) and check.verify(out, A, B, None, 1.0, 0.0).ok


@needs_simulator
@pytest.mark.parametrize("level", ["v9", "auto"])
def test_native_levels_need_a_gpu_before_any_copy(level, monkeypatch):
    from numba import cuda

    def no_copy(*a, **k):
        raise AssertionError("copied before refusing")

    monkeypatch.setattr(cuda, "to_device", no_copy)
    A, B = _mats(dtype=np.float16)
    with pytest.raises((api.NoGPUError, ValueError), match="GPU"):
        numba_gemm.gemm(A, B, level=level)


@needs_simulator
def test_plan_in_the_simulator_rereads_contents():
    A, B = _mats(M=4, N=5, K=6)
    C = np.random.default_rng().standard_normal((4, 5)).astype(np.float32)
    C0 = C.copy()
    p = numba_gemm.plan(A, B, C, alpha=0.5, beta=-1.5, level="k2")
    assert p.execute() is C and check.verify(C, A, B, C0, 0.5, -1.5).ok
    A[...] = np.random.default_rng().standard_normal(A.shape)
    C0 = C.copy()
    p()
    assert check.verify(C, A, B, C0, 0.5, -1.5).ok


def test_no_gpu_and_no_simulator_is_one_clear_error(tmp_path):
    import os
    import subprocess
    import sys

    if numba_gemm.gpu.has_gpu():
        pytest.skip("this machine has a GPU")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    code = ("import numba, numpy as np, numba_gemm\n"
            "numba_gemm.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("numba_gemm.api.NoGPUError") and "NUMBA_ENABLE_CUDASIM=1" in last
    assert "CudaSupportError" not in out.stderr
