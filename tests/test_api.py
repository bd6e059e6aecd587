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
