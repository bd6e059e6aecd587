"""v8py: the level contract, v8's tile, and exact results on ragged shapes.

Without a GPU the whole kernel runs in the simulator with the intrinsics' Python twins
(numba_gemm.ptx): a 128-thread block is slow there, so the simulator cases are the smallest
shapes that still reach every path — the fast kernel with all three stages refilled, the
element-wise loads for rows that are not 16-byte aligned, an unaligned base, a 2 x 2 grid
in n-fastest order, partial tiles in M, N and K, alpha/beta, beta == 0 with C poisoned. On a
GPU the same cases run for real, with v8's ragged shapes and offsets past 2^31 elements.
"""
import numpy as np
import pytest

from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import v8_mma
from numba_gemm.hgemm import v8py_mma as v8py
from numba_gemm.measure import check
from numba_gemm.registry import get

F16, BF16 = np.dtype(np.float16), cm.BF16
DTYPES = [F16] + ([BF16] if BF16 is not None else [])


def test_level_contract():
    assert (v8py.LEVEL, v8py.PARENT, v8py.RASTER) == ("v8py", "v8", "n-fastest")
    assert v8py.SASS_MUST_HAVE == ("HMMA", "LDSM", "LDGSTS")   # the contract's names: the registry's check
    assert set(v8py.KERNELS) == {"v8py_f16", "v8py_f16_general", "v8py_bf16", "v8py_bf16_general"}
    assert v8py.kernel is v8py.KERNELS["v8py_f16"][0]
    assert v8py.AUTO is False                            # auto keeps choosing native levels
    lv = get("v8py")
    assert lv.family == "hgemm" and not lv.native and not hasattr(v8py, "SOURCE")
    assert get("v8").native


def test_same_tile_as_v8():
    assert v8py.CONFIG == v8_mma.CONFIG
    assert (v8py.BM, v8py.BN, v8py.BK, v8py.STAGES, v8py.THREADS) == (128, 128, 64, 3, 128)
    assert v8py.SMEM == v8_mma.CONFIG.smem() == 3 * 32768 + 1024
    assert v8py.STAGE_BYTES == v8_mma.CONFIG.stage_bytes


def test_specialisation_by_row_alignment():
    assert v8py.specialisation("f16", True, True) == "v8py_f16"
    assert v8py.specialisation("bf16", True, True) == "v8py_bf16"
    for vec in ((False, True), (True, False), (False, False)):
        assert v8py.specialisation("f16", *vec) == "v8py_f16_general"
        assert v8py.specialisation("bf16", *vec) in v8py.KERNELS


def test_unsupported():
    assert v8py.unsupported(5, 7, 3) is None
    assert "2^31" in v8py.unsupported(2**31, 8, 8)


def _device(x, offset=0):
    """x on the device as the kernels take it (bf16 as uint16 bits), its base `offset`
    elements past an allocation's start (offset 1: rows no longer 16-byte aligned)."""
    from numba import cuda

    bits = x.view(np.uint16) if x.dtype == BF16 else x
    if offset == 0:
        return cuda.to_device(bits)
    flat = cuda.to_device(np.zeros(bits.size + offset, bits.dtype))
    view = flat[offset:].reshape(bits.shape)
    view.copy_to_device(np.ascontiguousarray(bits))
    return view


def _case(M, N, K, dtype, alpha, beta, offset=0, rng=None):
    """One checked run; `offset` moves A's base (A element-wise, B still by cp.async)."""
    from numba import cuda

    A, B, C = check.random_inputs(M, N, K, dtype, rng or np.random.default_rng())
    C_in = C.copy() if beta != 0 else np.full((M, N), np.nan, np.float32)
    dC = cuda.to_device(C_in)
    v8py.run(_device(A, offset), _device(B), dC, alpha, beta)
    out = dC.copy_to_host()
    verdict = check.verify(out, A, B, C, alpha, beta, family="hgemm")
    assert verdict.ok, f"v8py {dtype.name} M={M} N={N} K={K} a={alpha} b={beta} offset={offset}: {verdict}"


# (M, N, K, dtype, alpha, beta, base offset): what each reaches
SMALL = [
    pytest.param(20, 24, 200, F16, 0.5, 2.0, 0, id="fast-4-k-tiles"),     # stages reused; K tail 8
    pytest.param(9, 17, 67, BF16, 1.0, 0.0, 0, id="general-bf16-beta0"),  # K, N % 8 != 0; K tail < 8
    pytest.param(129, 130, 8, F16, -1.5, 0.25, 0, id="grid-2x2"),         # edge rows and columns
    pytest.param(8, 16, 24, F16, 1.0, 0.0, 1, id="unaligned-base"),       # A element-wise, B cp.async
]


@pytest.mark.parametrize("M, N, K, dtype, alpha, beta, offset", SMALL)
def test_small_ragged_shapes(M, N, K, dtype, alpha, beta, offset):
    if dtype is None:
        pytest.skip("no bfloat16 (ml_dtypes missing)")
    _case(M, N, K, dtype, alpha, beta, offset)


RAGGED = [(1, 1, 1), (128, 256, 64), (129, 257, 65), (300, 520, 72), (1000, 40, 136),
          (37, 1031, 200), (513, 384, 1024), (4096, 264, 8)]
ODD = [(33, 40, 13), (70, 41, 64), (129, 259, 77), (5, 3, 1)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_ragged_and_unaligned_shapes(dtype):
    rng = np.random.default_rng()
    for M, N, K in RAGGED + ODD:
        _case(M, N, K, dtype, 0.5, 3.0, rng=rng)
        _case(M, N, K, dtype, 1.0, 0.0, rng=rng)     # beta == 0: NaN in C must not leak
    _case(130, 264, 72, dtype, 1.0, 0.0, offset=1, rng=rng)


@pytest.mark.gpu
def test_gemm_api_end_to_end():
    import numba_gemm

    rng = np.random.default_rng()
    for dtype in DTYPES:
        A, B, C = check.random_inputs(200, 136, 96, dtype, rng)
        out = numba_gemm.gemm(A, B, C.copy(), alpha=0.5, beta=2.0, level="v8py")
        assert check.verify(out, A, B, C, 0.5, 2.0, family="hgemm").ok


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(65600, 16, 32776), (16, 65600, 32776), (65600, 32776, 8)],
                         ids=["A>2^31", "B>2^31", "C>2^31"])
def test_offsets_past_2_31_elements(shape):
    """Each operand in turn holds more than 2^31 elements. The big operand is ones except
    its first and last three rows (A) or columns (B), which are random small integers, so
    the corners of C that read them are exact in fp32 and check the far offsets."""
    from numba import cuda

    M, N, K = shape
    rng = np.random.default_rng()
    A = np.ones((M, K), np.float16)
    B = np.ones((K, N), np.float16)
    rows, cols = np.r_[0:3, M - 3:M], np.r_[0:3, N - 3:N]
    A[rows] = rng.integers(-2, 3, (6, K))
    B[:, cols] = rng.integers(-2, 3, (K, 6))
    dC = cuda.device_array((M, N), np.float32)
    v8py.run(cuda.to_device(A), cuda.to_device(B), dC, 1.0, 0.0)
    cuda.synchronize()
    ref = A[rows].astype(np.float64) @ B[:, cols].astype(np.float64)
    got = np.concatenate([dC[0:3].copy_to_host(), dC[M - 3:M].copy_to_host()])[:, cols]
    np.testing.assert_array_equal(got.astype(np.float64), ref)


def test_census_of_all_specialisations():
    """Every compiled specialisation has the tensor-core instructions and keeps its 128
    accumulators in registers (no local memory), as v8's cubin does."""
    from numba_gemm.explain import sass

    kernels = {c.kernel: c for c in sass.census_level("v8py")}
    assert set(kernels) == set(v8py.KERNELS)
    for name, c in kernels.items():
        assert c.count("HMMA") == 128, name              # one 64-deep stage, fully unrolled
        assert c.count("LDSM") == 32, name
        assert c.local_memory_ops == 0 and c.spill_stores == 0, name
        assert c.registers <= 255, name                  # two 128-thread blocks per SM
        assert c.has("LDGSTS"), name
        assert c.has("STS") == name.endswith("_general"), name   # element-wise loads only there
