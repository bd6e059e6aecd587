"""k6gv, the GEMV-style level for M ≤ 8, and k6gv16, its kernel at 16 rows: exact in the
simulator (and on a GPU) for M from 1 to the tile's rows, ragged N and K, alpha and beta, NaN in C
with beta = 0, unaligned rows, forced K slices; bitwise the same on two runs; more rows than the
tile refused; their SASS census (LDG.E.128 in the float4 kernel, no local memory); k6gv auto's
fp32 pick at the suite's M ≤ 8 shapes, k6gv16 timed by the suite (uncalibrated) at M = 16."""
import numpy as np
import pytest

from tests.conftest import GPU, sgemm_case

import numba_gemm
from numba_gemm import choose
from numba_gemm.explain import sass
from numba_gemm.measure import check, shapes
from numba_gemm.sgemm import k6gv16_rows as gv16
from numba_gemm.sgemm import k6gv_skinny as gv

LEVELS = {"k6gv": gv, "k6gv16": gv16}
SIM_SHAPES = {"k6gv": [(1, 1, 1), (1, 131, 37), (3, 128, 64), (3, 5, 70), (8, 129, 33), (8, 260, 65)],
              "k6gv16": [(1, 132, 64), (9, 131, 37), (13, 5, 70), (16, 129, 65)]}
GPU_SHAPES = {"k6gv": [(1, 4096, 4096), (8, 14336, 4096), (1, 8192, 8192), (3, 4097, 1031), (8, 1000, 77)],
              "k6gv16": [(16, 8192, 8192), (16, 14336, 4096), (9, 4097, 1031), (13, 1000, 77), (1, 4096, 4096)]}
# a shape per level whose tile is partly past M (k6gv16: rows 13..15 of its second group)
SOME_ROWS = {"k6gv": 3, "k6gv16": 13}


def _device_run(mod, A, B, C, alpha, beta, splits=None):
    from numba import cuda

    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
    mod.run(dA, dB, dC, alpha, beta, splits=splits)
    return dC.copy_to_host()


def _ok(out, A, B, C_in, alpha, beta, what):
    v = check.verify(out, A, B, C_in, alpha, beta)
    assert v.ok, f"{what} alpha={alpha} beta={beta}: {v}"


@pytest.mark.parametrize("level, M, N, K", [(lv, *s) for lv, shapes in (GPU_SHAPES if GPU else SIM_SHAPES).items()
                                            for s in shapes])
@pytest.mark.parametrize("alpha, beta", [(1.0, 0.0), (-1.5, 2.0), (0.5, -0.75)])
def test_exact(level, M, N, K, alpha, beta):
    """Fresh random inputs each time; with beta = 0, C is NaN and must not leak."""
    A, B, C, C_in = sgemm_case(M, N, K, beta, np.random.SeedSequence().entropy % 2**32)
    out = numba_gemm.gemm(A, B, C, alpha=alpha, beta=beta, level=level)
    _ok(out, A, B, C_in, alpha, beta, (level, M, N, K))


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("splits", [2, 3])
def test_forced_slices_are_exact(level, splits):
    """S > 1: slices into the workspace, then the tile's last CTA adds them in order and applies
    alpha and beta (a ragged last slice: K = 100 is two 64-deep tiles, the last 36 deep)."""
    M, N, K = (LEVELS[level].MAX_M, 1000, 777) if GPU else (SOME_ROWS[level], 132, 100)
    for alpha, beta in [(1.0, 0.0), (-2.0, 0.5)]:
        A, B, C, C_in = sgemm_case(M, N, K, beta, splits)
        _ok(_device_run(LEVELS[level], A, B, C, alpha, beta, splits), A, B, C_in, alpha, beta,
            f"{level} S={splits}")


@pytest.mark.parametrize("level", LEVELS)
def test_unaligned_rows_take_the_32_bit_kernel(level):
    """B and C off a 16-byte boundary (N a multiple of 4): the _edge kernel runs, exactly."""
    from numba import cuda

    mod = LEVELS[level]
    M, N, K = (SOME_ROWS[level] + 2, 1028, 300) if GPU else (SOME_ROWS[level] + 2, 132, 40)
    A, B_big, C_big = check.random_inputs(M, N, K)
    B_big = np.random.default_rng(3).standard_normal(K * N + 1).astype(np.float32)
    C0 = np.random.default_rng(4).standard_normal(M * N + 1).astype(np.float32)
    dA = cuda.to_device(A)
    dB = cuda.to_device(B_big)[1:].reshape(K, N)
    dC = cuda.to_device(C0)[1:].reshape(M, N)
    assert mod.SPECIALISATIONS[gv.vector_operands(dA, dB, dC)][0] == f"{level}_edge"
    mod.run(dA, dB, dC, 1.5, -1.0)
    _ok(dC.copy_to_host(), A, B_big[1:].reshape(K, N), C0[1:].reshape(M, N), 1.5, -1.0, f"{level} unaligned")


@pytest.mark.parametrize("level", LEVELS)
def test_two_runs_are_bitwise_equal(level):
    """No float atomics: the warps' sum and the slices' reduction run in a fixed order."""
    mod = LEVELS[level]
    M, N, K = (mod.MAX_M, 4096, 4096) if GPU else (mod.MAX_M, 130, 96)
    A, B, C, _ = sgemm_case(M, N, K, 0.0, 11)
    first = _device_run(mod, A, B, C, 1.0, 0.0, splits=3)
    second = _device_run(mod, A, B, C, 1.0, 0.0, splits=3)
    assert first.tobytes() == second.tobytes()
    if GPU:                                         # and the level's own plan
        assert _device_run(mod, A, B, C, 1.0, 0.0).tobytes() == _device_run(mod, A, B, C, 1.0, 0.0).tobytes()


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("splits", [2, 5, 9])
def test_the_last_cta_adds_the_slices_in_order(level, splits, monkeypatch):
    """One launch; the tile's last CTA adds the S partials the slices left in the workspace in
    the order z = 0 .. S-1, whichever CTA came last: C holds exactly the float32 sum of
    P[0] + P[1] + ... taken in that order (times alpha; beta = 0), and every tile's counter is
    back to zero for the next call."""
    from numba import cuda

    from numba_gemm.runtime import launch, workspace

    mod, M = LEVELS[level], SOME_ROWS[level]
    N, K = (4100, 64 * 36) if GPU else (132, 64 * 9)       # 36 and 9 K tiles: S slices each
    A, B, C, _ = sgemm_case(M, N, K, 0.0, splits)
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
    S, _ = mod.split_plan(M, N, K, splits)
    assert S == splits
    calls = []
    real = launch.launch_numba
    monkeypatch.setattr(launch, "launch_numba", lambda *a, **k: (calls.append(a), real(*a, **k)))
    mod.run(dA, dB, dC, 0.75, 0.0, splits=splits)
    monkeypatch.undo()
    assert [a[0] for a in calls] == [mod.SPECIALISATIONS[True, True][1]]       # one launch
    P = workspace.partials(dC, S, M, N).copy_to_host().reshape(S, M, N)
    want = P[0].copy()
    for z in range(1, S):
        want += P[z]                                                           # float32, in order
    assert (dC.copy_to_host() == np.float32(0.75) * want).all()
    counters = calls[0][3][-1]                                                 # the launch's own
    assert not counters.copy_to_host().any()
    _ok(dC.copy_to_host(), A, B, C, 0.75, 0.0, f"{level} S={S}")


@pytest.mark.parametrize("level", LEVELS)
def test_refuses_more_rows_than_its_tile(level):
    mod = LEVELS[level]
    for M in (1, 3, mod.MAX_M):
        assert mod.unsupported(M, 4096, 4096) is None
    reason = mod.unsupported(mod.MAX_M + 1, 4096, 4096)
    assert f"M ≤ {mod.MAX_M}" in reason and "k5sk" in reason
    A, B, C = check.random_inputs(mod.MAX_M + 1, 16, 16)
    with pytest.raises(ValueError, match=f"M ≤ {mod.MAX_M}"):
        numba_gemm.gemm(A, B, C, level=level)


@pytest.mark.parametrize("level, M, N, K", [("k6gv", 1, 4096, 4096), ("k6gv", 8, 14336, 4096),
                                            ("k6gv", 1, 8192, 8192), ("k6gv16", 16, 8192, 8192),
                                            ("k6gv16", 16, 14336, 4096)])
def test_plan_at_the_decode_shapes(level, M, N, K):
    """Enough CTAs to fill the GPU: 132 SMs × CTAS_PER_SM resident, K split when N alone cannot."""
    mod = LEVELS[level]
    slots = 132 * mod.CTAS_PER_SM
    S, kslice = mod.split_plan(M, N, K)
    ctas = -(-N // mod.TILE_N) * S
    assert S > 1 and slots // 2 <= ctas <= slots and kslice % mod.TILE_K == 0, (M, N, K, S)


@pytest.mark.parametrize("level", LEVELS)
def test_census(level):
    """The SASS compiled here: LDG.E.128 (B), STS.128 and LDS.128 (the warps' sum), STG.E.128 in
    the float4 kernel, no local memory in either, within the launch bounds' registers."""
    mod = LEVELS[level]
    try:
        rows = {c.kernel: c for c in sass.census_levels([numba_gemm.registry.get(level)])[level]}
    except sass.CensusUnavailable as e:
        pytest.skip(str(e))
    assert set(rows) == {level, f"{level}_edge"}
    vec, edge = rows[level], rows[f"{level}_edge"]
    for op in ("LDG.E.128", "LDS.128", "STS.128", "STG.E.128"):
        assert vec.has(op), op
    assert not edge.has("LDG.E.128")
    assert vec.count("FFMA") >= mod.TILE_M * mod.THREAD_N * mod.TILE_K // gv.WARPS   # the phase, unrolled
    for c in rows.values():
        assert not c.has("LDL") and not c.has("STL"), c.kernel
        assert 0 < c.registers <= 65536 // (mod.THREADS * mod.CTAS_PER_SM)


@pytest.mark.parametrize("name, M, N, K", [s for s in shapes.SUITE if s[1] <= gv.MAX_M])
def test_auto_takes_it_at_decode(name, M, N, K):
    """Calibrated from the H200 runs (1.3-1.5x k5sk's speed there), k6gv is auto's fp32 pick at
    the suite's M <= 8 shapes, and is never ranked past 8 rows, which it refuses."""
    ranked = choose.candidates(np.float32, M, N, K, native=True)
    assert ranked[0].level == "k6gv" and ranked[0].ms is not None
    assert all(q.level != "k6gv" for q in choose.candidates(np.float32, gv.MAX_M + 1, N, K, native=True))


@pytest.mark.parametrize("name, M, N, K", [s for s in shapes.SUITE if gv.MAX_M < s[1] <= gv16.MAX_M])
def test_the_suite_times_k6gv16_until_it_is_calibrated(name, M, N, K):
    """k6gv16 has no calibration yet: auto does not run it while a calibrated level serves the
    shape, and the shape suite times it (an uncalibrated candidate), so its first suite run gives
    the samples calibrate_auto fits it from."""
    ranked = choose.candidates(np.float32, M, N, K, native=True)
    gv16_at = [q for q in ranked if q.level == "k6gv16"]
    if choose.params("k6gv16", np.float32) is None:
        assert ranked[0].ms is not None and gv16_at and gv16_at[0].ms is None
    else:
        assert gv16_at and gv16_at[0].ms is not None


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("level", LEVELS)
def test_captured_graph_replays_the_split(level):
    """The one launch, its partials and its counters captured by torch: each replay with new
    inputs is exact (the last CTA of every tile left its counter at zero for the next)."""
    torch = pytest.importorskip("torch")
    M, N, K = LEVELS[level].MAX_M, 4096, 4096
    assert LEVELS[level].plan_splits(M, N, K) > 1
    A = torch.rand((M, K), device="cuda") * 2 - 1
    B = torch.rand((K, N), device="cuda") * 2 - 1
    C = torch.rand((M, N), device="cuda") * 2 - 1
    numba_gemm.gemm(A, B, C, alpha=0.5, level=level)     # warm up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        numba_gemm.gemm(A, B, C, alpha=0.5, level=level)
    host = lambda t: t.detach().cpu().numpy().astype(np.float64)  # noqa: E731
    first = None
    for i in range(3):
        if i < 2:
            A.copy_(torch.rand_like(A) * 2 - 1)
        C.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert check.verify(host(C), host(A), host(B), None, 0.5, 0.0).ok
        if i == 1:
            first = C.clone()
    assert torch.equal(first, C)                          # the same inputs again: the same bits
