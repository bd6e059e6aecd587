"""Every SGEMM level is exact for any shape, alpha and beta, on both the NumPy and the device path.

Property tests (hypothesis) run for every registered level of family "sgemm", so a new level is
tested as soon as its module exists. In the CUDA simulator one Python thread runs per GPU
thread, so shapes stay tiny there (the 1024-thread levels k3/k3c tinier still); on a GPU the
same properties run with shapes up to ~600 and more examples, plus a 64-bit indexing check.
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import GPU, gpu_only, sgemm_case

import numba_gemm
from numba_gemm.measure import check

SGEMM = [lv for lv in numba_gemm.levels() if lv.family == "sgemm"]
IDS = [lv.name for lv in SGEMM]

ALPHAS = st.sampled_from([1.0, -1.0, 0.5, -2.25, 0.0]) | st.floats(-4, 4, width=32)
BETAS = st.sampled_from([0.0, 0.0, 1.0, -1.0, 3.0, -0.5]) | st.floats(-4, 4, width=32)


def _threads(lv) -> int:
    return lv.module.GEOMETRY.threads


def _max_dims(lv):
    """Largest M, N, K drawn for a level: enough for more than one tile where affordable."""
    if GPU:
        return 600, 600, 600
    g = lv.module.GEOMETRY
    tm, tn, tk = g.tile_m, g.tile_n, max(g.tile_k, 32)
    if _threads(lv) > 256:
        # 1024-thread blocks: simulator cost is threads × blocks × phases; one partial tile
        # past the first in every direction, at most.
        return tm + 8, min(tn, 32) + 8, tk + 8
    if tm * tn >= 128 * 128:
        # 128×128 tiles of 256 threads (k7, k8, k8p): a second, partial tile in M and N, at most
        # 4 blocks; in K four whole tiles and a partial fifth (k8's 8-deep tiles: 37, so k9's
        # two phase buffers are each reused; the simulator's time grows with K); the GPU run
        # draws up to 600 each way
        return tm + 8, tn + 12, 4 * g.tile_k + 5
    return 2 * tm + 5, tn + 12, 2 * tk + 5


def _shapes(lv):
    mm, mn, mk = _max_dims(lv)
    mm = min(mm, getattr(lv.module, "MAX_M", mm))     # a skinny level (k6gv) refuses more rows
    # independent draws, 1 included, mostly not multiples of any tile; none the level refuses
    # (k8p: rows already whole float4s)
    shapes = st.tuples(st.integers(1, mm), st.integers(1, mn), st.integers(1, mk))
    return shapes.filter(lambda s: lv.unsupported(*s) is None)


def _examples(lv) -> int:
    if GPU:
        return 60
    if hasattr(lv.module, "plan_splits"):
        # a split-K level runs its parent's kernel per slice: tests/test_splitk_sgemm.py drives
        # its slices (S = 1, 2, 3, ragged); here a few draws of the registry's paths
        return 3
    if hasattr(lv.module, "edge_config"):
        # k8e's right strip is a CTA per two rows of 256 simulated threads (~10 s an example):
        # tests/test_k8e.py drives each strip and copy case by name; here a few random draws
        return 4
    return 4 if _threads(lv) > 256 else 8


def _settings(lv):
    return settings(
        max_examples=_examples(lv),
        deadline=None,
        derandomize=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def _assert_ok(out, A, B, C_in, alpha, beta, lv, shape):
    v = check.verify(out, A, B, C_in, alpha, beta)
    assert v.ok, f"{lv.name} M,N,K={shape} alpha={alpha} beta={beta}: {v}"


@pytest.mark.parametrize("lv", SGEMM, ids=IDS)
def test_numpy_path(lv):
    @_settings(lv)
    @given(shape=_shapes(lv), alpha=ALPHAS, beta=BETAS, seed=st.integers(0, 2**32 - 1))
    def prop(shape, alpha, beta, seed):
        M, N, K = shape
        A, B, C, C_in = sgemm_case(M, N, K, beta, seed)
        out = numba_gemm.gemm(A, B, C, alpha=alpha, beta=beta, level=lv.name)
        assert out is C
        _assert_ok(out, A, B, C_in, alpha, beta, lv, shape)

    prop()


@pytest.mark.parametrize("lv", SGEMM, ids=IDS)
def test_device_path(lv):
    from numba import cuda

    @_settings(lv)
    @given(shape=_shapes(lv), alpha=ALPHAS, beta=BETAS, seed=st.integers(0, 2**32 - 1))
    def prop(shape, alpha, beta, seed):
        M, N, K = shape
        A, B, C, C_in = sgemm_case(M, N, K, beta, seed)
        dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
        ret = numba_gemm.gemm(dA, dB, dC, alpha=alpha, beta=beta, level=lv.name)
        assert ret is dC      # device arrays are used in place
        _assert_ok(dC.copy_to_host(), A, B, C_in, alpha, beta, lv, shape)

    prop()


@pytest.mark.parametrize("lv", SGEMM, ids=IDS)
def test_smallest_and_one_past_each_tile(lv):
    """M = N = K = 1, and one element past a full tile in each direction (beta != 0)."""
    g = lv.module.GEOMETRY
    tm, tn, tk = g.tile_m, g.tile_n, g.tile_k
    shapes = [(1, 1, 1), (tm + 1, 2, 3), (2, 3, tk + 1)]
    if GPU or _threads(lv) <= 256:
        shapes.append((3, tn + 1, 2))
    for M, N, K in shapes:
        if lv.unsupported(M, N, K):            # e.g. k6gv past 8 rows: its refusal is tested with it
            continue
        for alpha, beta in [(1.0, 0.0), (-1.5, 2.0)]:
            A, B, C, C_in = sgemm_case(M, N, K, beta, None)
            out = numba_gemm.gemm(A, B, C, alpha=alpha, beta=beta, level=lv.name)
            _assert_ok(out, A, B, C_in, alpha, beta, lv, (M, N, K))


@gpu_only
@pytest.mark.parametrize("lv", SGEMM, ids=IDS)
def test_thousand_cube(lv):
    M, N, K = 1031, 997, 1009
    if lv.unsupported(M, N, K):
        pytest.skip(lv.unsupported(M, N, K))
    for beta in (0.0, -0.75):
        A, B, C, C_in = sgemm_case(M, N, K, beta, 7)
        out = numba_gemm.gemm(A, B, C, alpha=1.25, beta=beta, level=lv.name)
        _assert_ok(out, A, B, C_in, 1.25, beta, lv, (M, N, K))


# ---- 64-bit indexing: one operand with more than 2**31 elements ----------------------------

BIG, MID, SMALL = 2**16 + 3, 2**15 + 1, 3     # BIG * MID > 2**31


def _free_bytes() -> int:
    """Free device memory once the arrays earlier tests dropped are released: Numba frees them
    in batches, so without the flush a case could skip for memory that is only pending."""
    from numba import cuda

    ctx = cuda.current_context()
    ctx.deallocations.clear()
    return ctx.get_memory_info()[0]


def _fill(X):
    """X[i, j] = ((7i + 13j) mod 31 - 15) / 16 on the device: exact in float32, no host copy."""
    from numba import cuda, float32

    @cuda.jit
    def fill(X):
        i, j = cuda.grid(2)
        if i < X.shape[0] and j < X.shape[1]:
            X[i, j] = float32((i * 7 + j * 13) % 31 - 15) * float32(0.0625)

    fill[((X.shape[0] + 15) // 16, (X.shape[1] + 15) // 16), (16, 16)](X)


def _pattern(rows, cols):
    i = np.asarray(rows, np.int64)[:, None]
    j = np.asarray(cols, np.int64)[None, :]
    return (((i * 7 + j * 13) % 31) - 15) / 16.0


@gpu_only
@pytest.mark.parametrize("big", ["MK", "KN", "MN"])
@pytest.mark.parametrize("lv", SGEMM, ids=IDS)
def test_index_past_2_to_31(lv, big):
    from numba import cuda

    M, N, K = {"MK": (BIG, SMALL, MID), "KN": (SMALL, BIG, MID), "MN": (BIG, MID, SMALL)}[big]
    reason = lv.unsupported(M, N, K)
    if reason:
        pytest.skip(reason)
    free = _free_bytes()
    need = 4 * (M * K + K * N + M * N)
    if need > 0.8 * free:
        pytest.skip(f"needs {need / 2**30:.1f} GiB of device memory")
    dA = cuda.device_array((M, K), np.float32)
    dB = cuda.device_array((K, N), np.float32)
    dC = cuda.device_array((M, N), np.float32)
    _fill(dA)
    _fill(dB)
    numba_gemm.gemm(dA, dB, dC, alpha=1.0, beta=0.0, level=lv.name)
    cuda.synchronize()
    # sample rows and columns, including the last ones (past 2**31 elements of the big operand)
    rows = sorted({0, 1, M // 2, M - 2, M - 1} & set(range(M)))
    cols = sorted({0, 1, N // 2, N - 2, N - 1} & set(range(N)))
    A_s = _pattern(rows, range(K))
    B_s = _pattern(range(K), cols)
    out = np.stack([dC[r].copy_to_host()[cols] for r in rows])
    _assert_ok(out, A_s, B_s, None, 1.0, 0.0, lv, (M, N, K))
    del dA, dB, dC
