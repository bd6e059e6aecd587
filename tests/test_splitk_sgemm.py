"""The SGEMM split-K levels (k5sk, k8sk; k9sk, whose CTAs add the slices of a tile's parts in
the kernel): exact with every split count on ragged shapes (edge
tiles, a short last slice), deterministic, beta == 0 never reading C, every partial written;
the split plan as a pure function (hypothesis); the SASS census of the split kernels; on a GPU,
the shapes they exist for (16×8192×8192, 64×64×2**20), M·N past 2**31 and a captured graph.

The simulator runs one Python thread per GPU thread (256 per k8sk and k9sk block, 128 per k5sk block),
so its shapes are a few CTAs: S forced to 1, 2 and 3 on K of three K tiles.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda

from tests.conftest import gpu_only, sgemm_case

import numba_gemm
from numba_gemm import splitk
from numba_gemm.measure import check
from numba_gemm.measure.twins import main_loop
from numba_gemm.registry import get
from numba_gemm.runtime import workspace
from numba_gemm.sgemm import _splitk_parts
from numba_gemm.sgemm._common import u32, u64

LEVELS = ["k5sk", "k8sk", "k9sk"]


def _mod(level):
    return get(level).module


def _run(level, M, N, K, alpha, beta, splits, seed=0, poison_workspace=True, **kw):
    """C from level.run with `splits` forced, on fresh inputs; (out, A, B, C_in)."""
    from numba import cuda

    A, B, C, C_in = sgemm_case(M, N, K, beta, seed)
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
    S, _ = _mod(level).split_plan(M, N, K, splits)
    if poison_workspace and S > 1:
        # the buffer the run will use (keyed by C): NaN shows any partial left unwritten
        workspace.partials(dC, S, M, N).copy_to_device(np.full(S * M * N, np.nan, np.float32))
    _mod(level).run(dA, dB, dC, alpha, beta, splits=splits, **kw)
    return dC.copy_to_host(), A, B, C_in


def _assert_exact(level, shape, splits, alpha, beta, seed=0, **kw):
    out, A, B, C_in = _run(level, *shape, alpha, beta, splits, seed, **kw)
    v = check.verify(out, A, B, C_in, alpha, beta)
    assert v.ok, f"{level} {shape} splits={splits} alpha={alpha} beta={beta} {kw}: {v}"


# ---- exact in the simulator (and on a GPU) ------------------------------------------------

# (M, N, K): K of three K tiles, the last one short (S = 3: one tile each; S = 2: 2 + 1)
K8_SHAPES = [
    (5, 7, 19),        # smaller than a tile, K % 4 != 0, N % 4 != 0: k8sk_edge
    (12, 8, 24),       # all rows 16-byte aligned: the float4 kernel k8sk
    (9, 8, 18),        # K % 4 != 0: k8sk_bc
    (9, 10, 20),       # N % 4 != 0: k8sk_a
]
K5_SHAPES = [
    (5, 7, 70),        # one warp of four busy, a 6-deep last slice
    (33, 9, 65),       # two tile rows, the second with one row: three warps skip the multiply
    (17, 130, 96),     # two tile columns, the second one column wide; three whole slices
]
SHAPES = {"k8sk": K8_SHAPES, "k9sk": K8_SHAPES, "k5sk": K5_SHAPES}     # k9sk: the same four kernels


@pytest.mark.parametrize("splits", [1, 2, 3])
@pytest.mark.parametrize("level", LEVELS)
def test_exact_with_forced_splits(level, splits):
    for i, shape in enumerate(SHAPES[level]):
        assert _mod(level).split_plan(*shape, splits)[0] == splits
        alpha, beta = [(1.0, 0.0), (-0.75, 2.5)][i % 2]
        _assert_exact(level, shape, splits, alpha, beta, seed=i)


def test_k9sk_more_slices_than_parts_and_counters_left_at_zero(monkeypatch):
    """k9sk parks a tile's sum in min(S, 8) parts of its rows, each counted on its own: with
    S = 9 slices (one K tile each) CTA 8 starts at part 0 and the parts hold one row each, and
    every counter is zero again after the call, for the next call and a graph's replay."""
    from numba import cuda

    from numba_gemm.runtime import launch

    k9sk = _mod("k9sk")
    M, N, K = 12, 8, 72
    assert k9sk.split_plan(M, N, K, 9)[0] == 9
    A, B, C, C_in = sgemm_case(M, N, K, 2.5, seed=3)
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
    calls, real = [], launch.launch_numba
    monkeypatch.setattr(launch, "launch_numba", lambda *a, **k: (calls.append(a), real(*a, **k)))
    k9sk.run(dA, dB, dC, -0.75, 2.5, splits=9)
    v = check.verify(dC.copy_to_host(), A, B, C_in, -0.75, 2.5)
    assert v.ok, f"k9sk S = 9: {v}"
    (launched,) = calls
    counters = launched[3][-1]                         # the launch's own: one tile, 9 a tile
    assert counters.size == 9 and not counters.copy_to_host().any()


@pytest.mark.parametrize("splits", [1, 3])
def test_k8sk_narrow_tile_exact(splits):
    """run(tile_n=64): the 128×64 tile of 4 warps, on k8sk's four specialisations and across two
    column tiles."""
    for i, shape in enumerate(K8_SHAPES + [(20, 66, 24)]):
        alpha, beta = [(1.0, 0.0), (-0.75, 2.5)][i % 2]
        _assert_exact("k8sk", shape, splits, alpha, beta, seed=i, tile_n=64)


def test_k8sk_narrow_tile_plan():
    k8sk = _mod("k8sk")
    assert k8sk.grid(8192, 64, tile_n=64) == (1, 64) and k8sk.ctas_per_sm(k8sk.tiling(64)) == 4
    assert k8sk.plan_splits(8192, 64, 8192, tile_n=128) == 4 and k8sk.plan_splits(8192, 64, 8192, tile_n=64) == 8
    with pytest.raises(ValueError, match="tile_n"):
        k8sk.tiling(32)
    # its own choice: the narrow tile up to N = 64, and what auto prices is that tile
    assert [k8sk.width(N) for N in (1, 64, 65, 8192)] == [64, 64, 128, 128]
    assert k8sk.plan_splits(8192, 64, 8192) == 8 and k8sk.grid(8192, 65) == (1, 64)
    from numba_gemm import choose
    from numba_gemm.registry import registry
    assert choose.geometry(registry()["k8sk"], 8192, 64, 8192) == choose.Geometry(128, 64, 8)
    assert choose.geometry(registry()["k8sk"], 8192, 65, 8192).bn == 128


@pytest.mark.parametrize("level", LEVELS)
def test_beta_zero_never_reads_c(level):
    """beta == 0 with S = 2: C is NaN going in (sgemm_case), so a read of C would show."""
    M, N, K = SHAPES[level][0]
    _assert_exact(level, (M, N, K), 2, 0.5, 0.0, seed=5)


@pytest.mark.parametrize("level", LEVELS)
def test_deterministic(level):
    """Two runs with S = 3, from differently poisoned C and workspace, give the same bits."""
    from numba import cuda

    M, N, K = SHAPES[level][1]
    A, B, C, _ = sgemm_case(M, N, K, 1.0, seed=11)
    outs = []
    for fill in (np.nan, 7.0):
        dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
        workspace.partials(dC, 3, M, N).copy_to_device(np.full(3 * M * N, fill, np.float32))
        _mod(level).run(dA, dB, dC, 1.25, -0.5, splits=3)
        outs.append(dC.copy_to_host())
    assert outs[0].tobytes() == outs[1].tobytes()
    assert check.verify(outs[0], A, B, C, 1.25, -0.5).ok


@pytest.mark.parametrize("level", LEVELS)
def test_k_one(level):
    """K = 1: one K tile, so any forced split is one slice (and gemm()'s planned one)."""
    assert _mod(level).split_plan(3, 5, 1, 3) == (1, _mod(level).TILE_K)
    _assert_exact(level, (3, 5, 1), 3, -1.5, 2.0)


@pytest.mark.parametrize("level", LEVELS)
def test_long_k_small_output_is_split_by_the_plan(level):
    """K ≫ M·N (2×3 outputs, 32 K tiles): the plan splits it (eight slices), exactly."""
    mod = _mod(level)
    M, N, K = 2, 3, 32 * mod.TILE_K - 5
    S, kslice = mod.split_plan(M, N, K)
    assert S == 8 and kslice == 4 * mod.TILE_K
    _assert_exact(level, (M, N, K), None, 1.0, 0.0, seed=3)


@pytest.mark.parametrize("level", LEVELS)
def test_gemm_takes_the_forced_split(level, monkeypatch):
    """The module override SPLITS reaches gemm() (NumPy in, NumPy out)."""
    M, N, K = SHAPES[level][0]
    monkeypatch.setattr(_mod(level), "SPLITS", 3)
    assert _mod(level).split_plan(M, N, K) == (3, _mod(level).TILE_K)
    A, B, C, C_in = sgemm_case(M, N, K, -1.0, seed=2)
    out = numba_gemm.gemm(A, B, C, alpha=2.0, beta=-1.0, level=level)
    assert check.verify(out, A, B, C_in, 2.0, -1.0).ok


# ---- the split plan: pure functions ----------------------------------------------------------

@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=300, deadline=None)
@given(M=st.integers(1, 2**20), N=st.integers(1, 2**20), K=st.integers(1, 2**31 - 1),
       forced=st.none() | st.integers(1, 5000))
def test_slices_cover_k_once(level, M, N, K, forced):
    """Every K tile in exactly one slice, no slice empty, slice bounds within 32 bits."""
    mod = _mod(level)
    tk = mod.TILE_K
    S, kslice = mod.split_plan(M, N, K, forced)
    k_tiles = -(-K // tk)
    assert 1 <= S <= k_tiles and kslice % tk == 0 and kslice > 0
    if forced is None:
        assert S == mod.plan_splits(M, N, K) <= splitk.MAX_SPLITS
    else:
        assert S <= forced
    per = kslice // tk
    # slice z holds K tiles [z·per, min(k_tiles, (z+1)·per)): consecutive, non-empty, all of them
    assert (S - 1) * per < k_tiles <= S * per
    # the kernels' u32 arithmetic: z·kslice and z·kslice + kslice stay below 2**32
    assert (S - 1) * kslice + kslice < 2**32
    assert S <= 65535


@pytest.mark.parametrize("level", LEVELS)
@settings(max_examples=200, deadline=None)
@given(M=st.integers(1, 4096), N=st.integers(1, 8192), K=st.integers(1, 2**22))
def test_plan_is_choose_splits_on_resident_ctas(level, M, N, K):
    mod = _mod(level)
    gx, gy = mod.grid(M, N)
    k_tiles = -(-K // mod.TILE_K)
    S = mod.plan_splits(M, N, K)
    # k8sk: its 64-wide tile at N <= 64 holds twice the CTAs an SM
    slots = 132 * (mod.resident_ctas(M, N, K) if hasattr(mod, "resident_ctas") else mod.CTAS_PER_SM)
    want = splitk.choose_splits(gx * gy, k_tiles, M, N, slots)
    assert S == splitk.effective_splits(k_tiles, want)
    if gx * gy >= slots // 2:
        assert S == 1                                   # the tiles already fill the GPU
    assert S == 1 or gx * gy * S <= slots and 4 * S * M * N <= splitk.WORKSPACE_LIMIT


# the numbers the module docstrings and docs/LADDER.md quote
PLANNED = {
    "k8sk": {(16, 8192, 8192): 4, (128, 4096, 4096): 8, (512, 4096, 4096): 2, (64, 64, 2**20): 16,
             (1024, 1024, 1024): 4, (4096, 4096, 4096): 1, (128, 128, 56): 1, (128, 128, 57): 2},
    "k5sk": {(16, 8192, 8192): 10, (128, 4096, 4096): 5, (64, 64, 2**20): 16, (4096, 4096, 4096): 1},
    "k9sk": {(128, 4096, 4096): 8, (512, 4096, 4096): 2, (1024, 1024, 1024): 4, (4096, 128, 4096): 8,
             (512, 4096, 14336): 2, (4096, 4096, 4096): 1, (128, 128, 56): 1, (128, 128, 57): 2},
}


@pytest.mark.parametrize("level", LEVELS)
def test_documented_plans(level):
    for shape, S in PLANNED[level].items():
        assert _mod(level).plan_splits(*shape) == S, shape


@pytest.mark.parametrize("S", [1, 2, 3, 4, 5, 7, 8, 9])
@pytest.mark.parametrize("beta", [0.0, -0.5])
def test_reduction_adds_the_slices_in_order(S, beta):
    """splitk.reduce_partials, whose partials come four at a time, gives the bits of adding
    slice 0, 1, …, S-1 one by one in float32, for every S (a whole number of fours or not);
    values spread over 12 decades, so another order gives other bits."""
    from numba import cuda

    rng = np.random.default_rng(S)
    MN = 300                                    # two blocks of reduce_grid
    P = (rng.standard_normal(S * MN) * 10.0 ** rng.integers(-6, 6, S * MN)).astype(np.float32)
    C = rng.standard_normal(MN).astype(np.float32) if beta else np.full(MN, np.nan, np.float32)
    want = P[:MN].copy()
    for z in range(1, S):
        want = (want + P[z * MN:(z + 1) * MN]).astype(np.float32)
    want = np.float32(0.5) * want + (np.float32(beta) * C if beta else np.float32(0))
    dC = cuda.to_device(C)
    splitk.reduce(cuda.to_device(P), dC, S, 1, MN, 0.5, beta)
    assert np.array_equal(dC.copy_to_host(), want.astype(np.float32))


@cuda.jit
def _slice_sums(P, mn, S, n, out):
    """Thread t: sum_slices4 of columns 4t .. 4t+3 over the S slices of P, into out."""
    col = u32(4 * cuda.threadIdx.x)
    s = _splitk_parts.sum_slices4(P, u64(col), u64(mn), u32(S), True, col, u32(n))
    for q in range(4):
        out[col + q] = s[q]


@pytest.mark.parametrize("S", [1, 2, 8, 9, 10, 17])
def test_in_kernel_sum_adds_the_slices_in_order(S):
    """_splitk_parts.sum_slices4, the sum a tile's last CTA makes in k6gv, k6gv16, k9sk and k9st
    (slice 0, then BATCH slices at a time, the last batch cut at S), gives the bits of adding
    slice 0, 1, …, S-1 one by one in float32; columns past n load and add nothing."""
    rng = np.random.default_rng(S)
    threads, n = 8, 30                          # 32 columns, the last two past n
    MN = 4 * threads
    P = (rng.standard_normal(S * MN) * 10.0 ** rng.integers(-6, 6, S * MN)).astype(np.float32)
    want = P[:MN].copy()
    for z in range(1, S):
        want = (want + P[z * MN:(z + 1) * MN]).astype(np.float32)
    want[n:] = 0.0
    out = cuda.to_device(np.full(MN, np.nan, np.float32))
    _slice_sums[1, threads](cuda.to_device(P), MN, S, n, out)
    assert np.array_equal(out.copy_to_host(), want)


@pytest.mark.parametrize("level", LEVELS)
def test_bad_forced_splits_are_refused(level):
    for bad in (0, -1, 2.5, True, "2"):
        with pytest.raises(ValueError, match="splits"):
            _mod(level).split_plan(8, 8, 64, bad)


# ---- SASS census ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def census():
    """k8's and the split levels' kernels, from the shared census (one compile, cached)."""
    from numba_gemm.explain import sass

    try:
        got = sass.kernel_censuses("k8", "k9", *LEVELS)
    except sass.CensusUnavailable as e:
        pytest.skip(str(e))
    return {name: {"opcodes": c.opcodes, "registers": c.registers, "bounds": c.launch_bounds,
                   "spills": [c.spill_stores, c.spill_loads], "sass": c.sass}
            for name, c in got.items()}


def _common(c, name):
    ops = c["opcodes"]
    assert not any(op.startswith(("LDL", "STL")) for op in ops), f"{name}: local memory"
    assert c["spills"] == [0, 0], name
    assert not any(op.startswith(("DFMA", "DMUL", "DADD")) for op in ops), name
    assert "SR_CTAID.Z" in c["sass"], f"{name}: does not read its slice (blockIdx.z)"


def test_k8sk_census(census):
    """k8's main loop, unchanged in what it does: 4 LDS.128 and 64 FFMA per k, within the
    128-register cap of k8's launch bounds, no local memory, and about as long as k8's."""
    tk = _mod("k8sk").TILE_K
    for name in ("k8sk", "k8sk_edge"):
        c = census[name]
        _common(c, name)
        ops = c["opcodes"]
        assert ops.get("LDS.128", 0) == 4 * tk, name
        assert c["bounds"] == [256, 2] and 0 < c["registers"] <= 128, (name, c["registers"])
        loop = main_loop(c["sass"])
        assert sum(op == "FFMA" for op in loop) == 64 * tk, name
        parent = main_loop(census[name.replace("k8sk", "k8")]["sass"])
        assert len(loop) <= len(parent) + 8, f"{name}: main loop {len(loop)}, k8's {len(parent)}"
    vec = census["k8sk"]["opcodes"]
    assert vec.get("STG.E.128", 0) >= 16 and not any(op in ("LDG.E", "STG.E") for op in vec)
    narrow = census["k8sk_n64"]                      # the 128x64 tile: k8's loop in 4 warps, 4 CTAs an SM
    _common(narrow, "k8sk_n64")
    assert narrow["bounds"] == [128, 4] and 0 < narrow["registers"] <= 128, narrow["registers"]
    loop = main_loop(narrow["sass"])
    assert sum(op == "FFMA" for op in loop) == 64 * tk and narrow["opcodes"].get("LDS.128", 0) == 4 * tk


def test_k9sk_census(census):
    """k9's main loop over a slice: its work per trip (two phases, 4 LDS.128 and 64 FFMA per k)
    in at most 3 % more instructions than k9's (address work the slice bounds' registers push into
    the loop: docs/LADDER.md), within the 128-register cap, no local memory; the slices' sum (the
    partials read back through L2, LDG.E.STRONG.GPU) outside it."""
    tk = _mod("k9sk").TILE_K
    for name in ("k9sk", "k9sk_edge", "k9sk_bc", "k9sk_a"):
        c = census[name]
        _common(c, name)
        assert c["bounds"] == [256, 2] and 0 < c["registers"] <= 128, (name, c["registers"])
        loop = main_loop(c["sass"])
        assert sum(op == "FFMA" for op in loop) == 2 * 64 * tk, name          # two phases a trip
        parent = main_loop(census[name.replace("k9sk", "k9")]["sass"])
        assert len(loop) <= 1.03 * len(parent), f"{name}: main loop {len(loop)}, k9's {len(parent)}"
        assert loop.count("LDS.128") == 2 * 4 * tk, name
        assert not any(op.startswith("LDG") for op in loop if "STRONG" in op), name
    assert any("STRONG" in op for op in census["k9sk"]["opcodes"]), "no L2 load of the partials"


def test_k5sk_census(census):
    """k5's phase (1024 FFMA, 128 LDS + 64 LDS.128) behind a warp-uniform branch; registers
    that let CTAS_PER_SM blocks share an SM (the plan counts them)."""
    c = census["k5sk"]
    _common(c, "k5sk")
    loop = main_loop(c["sass"])
    ops = {op: loop.count(op) for op in set(loop)}
    assert ops.get("FFMA", 0) == 1024 and ops.get("LDS.128", 0) == 64 and ops.get("LDS", 0) == 128
    regs = -(-c["registers"] // 8) * 8                  # allocated in units of 8 per thread
    assert 65536 // (regs * 128) == _mod("k5sk").CTAS_PER_SM, c["registers"]


# ---- on a GPU --------------------------------------------------------------------------------

@gpu_only
@pytest.mark.parametrize("level", LEVELS)
def test_gpu_skinny_and_long_k(level):
    """The shapes split-K exists for, with the planned split, against float64."""
    for M, N, K in [(16, 8192, 8192), (128, 4096, 4096), (64, 64, 2**20), (1, 4097, 3001),
                    (33, 1031, 20000), (1031, 997, 1009)]:
        for beta in (0.0, -0.5):
            A, B, C, C_in = sgemm_case(M, N, K, beta, seed=K)
            out = numba_gemm.gemm(A, B, C, alpha=0.5, beta=beta, level=level)
            v = check.verify(out, A, B, C_in, 0.5, beta)
            assert v.ok, f"{level} {(M, N, K)} S={_mod(level).plan_splits(M, N, K)}: {v}"


@gpu_only
@pytest.mark.parametrize("splits", [1, 2, 3, 7, 16, 64])
@pytest.mark.parametrize("level", LEVELS)
def test_gpu_forced_splits_ragged(level, splits):
    for M, N, K in [(130, 129, 1001), (200, 260, 777), (7, 4096, 513)]:
        _assert_exact(level, (M, N, K), splits, 1.5, -2.0, seed=splits)
        _assert_exact(level, (M, N, K), splits, 1.0, 0.0, seed=splits)


@gpu_only
@pytest.mark.parametrize("level", LEVELS)
def test_gpu_deterministic_at_size(level):
    from numba import cuda

    M, N, K = 16, 8192, 8192
    A, B, C, _ = sgemm_case(M, N, K, 1.0, seed=1)
    dA, dB = cuda.to_device(A), cuda.to_device(B)
    outs = []
    for _ in range(3):
        dC = cuda.to_device(C)
        _mod(level).run(dA, dB, dC, 1.0, 1.0)
        outs.append(dC.copy_to_host().tobytes())
    assert outs[0] == outs[1] == outs[2]


@gpu_only
@pytest.mark.parametrize("level", LEVELS)
def test_gpu_partials_past_2_to_31(level, monkeypatch):
    """M·N > 2**31 with two slices: slice 1's partials start 2**31 elements into the workspace."""
    from numba import cuda

    from tests.test_sgemm import BIG, MID, _fill, _free_bytes, _pattern

    M, N, K = BIG, MID, 2 * _mod(level).TILE_K
    free = _free_bytes()
    need = 4 * (M * K + K * N + 3 * M * N)
    if need > 0.8 * free:
        pytest.skip(f"needs {need / 2**30:.1f} GiB of device memory")
    dA = cuda.device_array((M, K), np.float32)
    dB = cuda.device_array((K, N), np.float32)
    dC = cuda.device_array((M, N), np.float32)
    _fill(dA)
    _fill(dB)
    _mod(level).run(dA, dB, dC, 1.0, 0.0, splits=2)
    cuda.synchronize()
    rows = [0, 1, M // 2, M - 2, M - 1]
    cols = [0, 1, N // 2, N - 2, N - 1]
    out = np.stack([dC[r].copy_to_host()[cols] for r in rows])
    v = check.verify(out, _pattern(rows, range(K)), _pattern(range(K), cols), None, 1.0, 0.0)
    assert v.ok, str(v)
    del dA, dB, dC


@gpu_only
@pytest.mark.parametrize("level", LEVELS)
def test_gpu_graph_capture_replays_the_split(level):
    """A split call (partials + reduce: two launches and a workspace) captured by torch and
    replayed with new inputs, through gemm() and plan()."""
    torch = pytest.importorskip("torch")
    M, N, K = 64, 256, 4096
    assert _mod(level).plan_splits(M, N, K) > 1
    A = torch.rand((M, K), device="cuda") * 2 - 1
    B = torch.rand((K, N), device="cuda") * 2 - 1
    C = torch.rand((M, N), device="cuda") * 2 - 1
    C2 = torch.empty_like(C)
    p = numba_gemm.plan(A, B, C2, alpha=0.5, level=level)
    numba_gemm.gemm(A, B, C, alpha=0.5, level=level)      # warm up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        numba_gemm.gemm(A, B, C, alpha=0.5, level=level)
        p.execute()
    host = lambda t: t.detach().cpu().numpy().astype(np.float64)  # noqa: E731
    for _ in range(2):
        A.copy_(torch.rand_like(A) * 2 - 1)
        C.fill_(float("nan"))
        C2.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        for out in (C, C2):
            assert check.verify(host(out), host(A), host(B), None, 0.5, 0.0).ok


@gpu_only
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("level", LEVELS)
def test_gpu_twin_with_forced_splits(level, splits, monkeypatch):
    """The CUDA C twin runs the same plan (partials + splitk_reduce.cu) exactly."""
    from numba import cuda

    from numba_gemm.measure import twins

    monkeypatch.setattr(_mod(level), "SPLITS", splits)
    for M, N, K in [(130, 129, 1001), (16, 1000, 4096)]:
        A, B, C, C_in = sgemm_case(M, N, K, -1.0, seed=M)
        dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
        twins.twin(level).run(dA, dB, dC, 0.5, -1.0)
        v = check.verify(dC.copy_to_host(), A, B, C_in, 0.5, -1.0)
        assert v.ok, f"{level} twin {(M, N, K)} splits={splits}: {v}"


@gpu_only
@pytest.mark.parametrize("level", LEVELS)
def test_gpu_recorded_launches_hold_the_workspace(level):
    """Both launches of a split call keep the workspace alive, so a cached call cannot write
    into a buffer the workspace cache has since dropped."""
    from numba import cuda

    from numba_gemm.runtime import launch

    M, N, K = 9, 10, 300
    dA, dB, dC = (cuda.to_device(x) for x in check.random_inputs(M, N, K))
    with launch.recording() as rec:
        _mod(level).run(dA, dB, dC, 1.0, 0.0, splits=2)
    P = workspace.partials(dC, 2, M, N)
    if getattr(_mod(level), "SPLIT_IN_KERNEL", False):       # k9sk: one launch, P and the counters
        (L,) = rec.launches
        assert L.keep[1][0] is P
        assert launch.held_bytes(rec.launches) == P.nbytes + L.keep[1][1].nbytes
    else:
        assert len(rec.launches) == 2
        assert all(len(L.keep[1]) == 1 and L.keep[1][0] is P for L in rec.launches)
        assert launch.held_bytes(rec.launches) == P.nbytes          # held by both, counted once
