"""The CUDA C twins (numba_gemm.twins): one per SGEMM level, compiled by NVRTC to the same
instructions the level exists for, and exact like the level on a GPU."""
import pytest

from tests.conftest import GPU, gpu_only, sgemm_case

import numba_gemm
from numba_gemm import check, sass, twins

SGEMM = [lv.name for lv in numba_gemm.levels() if lv.family == "sgemm"]


@pytest.mark.parametrize("level", SGEMM)
def test_every_sgemm_level_has_a_twin(level):
    assert twins.has_twin(level), f"native/{twins.source(level)} is missing"


def test_only_sgemm_levels_have_twins():
    hgemm = [lv.name for lv in numba_gemm.levels() if lv.family == "hgemm"]
    for name in hgemm:
        assert not twins.has_twin(name)
    if hgemm:
        with pytest.raises(ValueError):
            twins.twin(hgemm[0])


@pytest.mark.parametrize("level", SGEMM)
def test_twin_compiles_to_the_levels_instructions(level):
    """NVRTC builds every kernel the level has (same names), with the level's SASS_MUST_HAVE."""
    try:
        kernels = twins.census(level)
    except (ImportError, OSError, sass.CensusUnavailable) as e:      # no NVRTC / nvdisasm here
        pytest.skip(str(e))
    t = twins.twin(level)
    assert {c.kernel for c in kernels} == set(t.kernel_names)
    for prefix in numba_gemm.registry.get(level).module.SASS_MUST_HAVE:
        assert any(c.has(prefix) for c in kernels), f"{level} twin: no {prefix}"
    for c in kernels:
        assert c.registers > 0
        assert not c.has("DFMA") and not c.has("DMUL"), c.kernel


# ---- on a GPU: exact like the levels ------------------------------------------------------


SHAPES = [(1, 1, 1), (5, 7, 3), (130, 129, 17), (136, 132, 20), (9, 8, 18), (9, 10, 20),
          (1031, 997, 1009), (512, 512, 512), (4097, 33, 65)]


@gpu_only
@pytest.mark.parametrize("level", SGEMM)
def test_twin_exact(level):
    from numba import cuda

    t = twins.twin(level)
    for i, (M, N, K) in enumerate(SHAPES):
        for alpha, beta in [(1.0, 0.0), (0.5, -1.5)]:
            A, B, C, C_in = sgemm_case(M, N, K, beta, i)
            dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
            t.run(dA, dB, dC, alpha, beta)
            v = check.verify(dC.copy_to_host(), A, B, C_in, alpha, beta)
            assert v.ok, f"{level} twin ({t.kernel_name(dA, dB, dC)}) {(M, N, K)} beta={beta}: {v}"


@gpu_only
@pytest.mark.parametrize("level", ["k6", "k7", "k8"])
def test_twin_unaligned_rows(level):
    """K, N multiples of 4 but A off a 16-byte boundary: the 32-bit-A kernel runs, exactly."""
    from numba import cuda

    M, N, K = 300, 260, 76
    A_big, B, C = check.random_inputs(M, N, K + 1)
    B = B[:K].copy()
    dA = cuda.to_device(A_big).reshape(-1)[1:1 + M * K].reshape(M, K)
    dB, dC = cuda.to_device(B), cuda.to_device(C)
    t = twins.twin(level)
    assert t.kernel_name(dA, dB, dC) == f"{level}_bc"
    t.run(dA, dB, dC, 1.0, 1.0)
    v = check.verify(dC.copy_to_host(), dA.copy_to_host(), B, C, 1.0, 1.0)
    assert v.ok, str(v)
