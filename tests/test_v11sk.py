"""v11sk (v11 + split-K).

CI (no GPU): the contract and the registry order; plan_splits as a pure function (hypothesis:
every K tile in exactly one slice, no empty slice, S·tiles within the SMs when S > 1, the
workspace within its limit, the row tile by M) and the forced split count; NVRTC compiles for
both row tiles with the census (HGMMA, UTMALDG, WARPGROUP.ARRIVE; no HMMA, LDSM, local memory),
the source refusing to compile without its tile; run() recorded with the driver stubbed: one
launch for S == 1 (C, alpha, beta), the split launch (grid (tiles, S), raw partials: alpha 1,
beta 0, the workspace as the output) plus the reduction, both keeping the workspace alive.
GPU: exact on ragged shapes for both dtypes and both row tiles, automatic and forced S,
alpha/beta, beta == 0 with C poisoned by NaN, K = 8 and 16, K ≫ M·N (64×64×2^20),
bit-identical reruns, gemm()/plan(), a captured CUDA graph replaying the same bits (torch's
capture, and the driver's), recorded launches keeping their workspace.
    python -m pytest -q tests/test_v11sk.py -m gpu
"""
import ctypes

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numba_gemm import splitk
from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import v11sk_splitk as sk
from numba_gemm.measure import check
from numba_gemm.registry import registry
from numba_gemm.runtime import driver, launch
from numba_gemm.util import ceil_div
from tests.graph_replay import replays_exactly
from tests.test_hopper import census_ops

DTYPES = [np.float16] + ([cm.BF16] if cm.BF16 is not None else [])


def test_contract_and_registry_order():
    names = list(registry())
    assert names.index("v11") < names.index("v11sk") < names.index("v12")
    assert sk.PARENT == "v11"          # the rest of the contract: registry.contract_problems
    assert sk.DEFINES == sk.CONFIG.defines()
    assert (sk.TILES[64].bm, sk.TILES[64].threads, sk.TILES[128].bm, sk.TILES[128].threads) == (64, 128, 128, 256)
    assert all(t.smem() <= cm.SMEM_LIMIT and t.problems() == [] for t in sk.TILES.values())
    assert sk.SPLITS is None


def test_refusals_as_v11():
    for shape in [(64, 64, 100), (64, 100, 64), (1, 1, 1), (1, 1, 8), (127, 4099, 72)]:
        reason = sk.unsupported(*shape)
        assert reason and "v9" in reason and "16 bytes" in reason
    assert "2^31" in sk.unsupported(2**31, 8, 8)
    for ok in [(1, 8, 8), (127, 4104, 72), (64, 64, 2**20), (2**31 - 1, 8, 8)]:
        assert sk.unsupported(*ok) is None
    with pytest.raises(ValueError, match="v9"):
        sk.run(np.zeros((16, 12), np.float16), np.zeros((12, 16), np.float16), None, 1.0, 0.0)


# ---------------------------------------------------------------------------- the split rule

def test_plan_of_the_measured_shapes():
    # the shapes that leave v11's grid mostly idle: each now fills 128 of 132 SMs
    assert [(t.bm, s) for t, s in (sk.plan_splits(16, 8192, 8192), sk.plan_splits(128, 4096, 4096),
                                   sk.plan_splits(512, 4096, 4096))] == [(64, 4), (128, 8), (128, 2)]
    assert sk.plan_splits(4096, 4096, 4096)[1] == 1           # 256 tiles fill the GPU already
    assert sk.plan_splits(64, 64, 2**20) == (sk.TILES[64], 16)
    assert sk.plan_splits(16, 8192, 8)[1] == sk.plan_splits(16, 8192, 16)[1] == 1   # one K tile
    assert sk.plan_splits(65, 256, 4096)[0].bm == 128 and sk.plan_splits(64, 256, 4096)[0].bm == 64


@settings(max_examples=400, deadline=None)
@given(M=st.integers(1, 20000), n8=st.integers(1, 4096), k8=st.integers(1, 2**17),
       sms=st.integers(1, 264))
def test_plan_splits_covers_k_once(M, n8, k8, sms):
    N, K = 8 * n8, 8 * k8
    tile, S = sk.plan_splits(M, N, K, sms=sms)
    assert tile.bm == (64 if M <= 64 else 128) and tile is sk.tile_for(M)
    tiles = ceil_div(M, tile.bm) * ceil_div(N, tile.bn)
    k_tiles = ceil_div(K, 64)
    assert 1 <= S <= min(splitk.MAX_SPLITS, k_tiles)
    ranges = sk.slices(K, tile, S)
    assert all(lo < hi for lo, hi in ranges)                              # no empty slice
    covered = [k for lo, hi in ranges for k in range(lo, hi)]
    assert covered == list(range(k_tiles))                                # each K tile once, in order
    if S > 1:
        assert S * tiles <= sms
        assert 4 * S * M * N <= splitk.WORKSPACE_LIMIT
        assert all(hi - lo >= sk.MIN_SLICE_K_TILES for lo, hi in ranges[:-1])
    # the kernel's own arithmetic: slice z = blockIdx.y starts at z * per and runs per tiles,
    # cut at k_tiles
    per = splitk.slice_k_tiles(k_tiles, S)
    assert ranges == [(z * per, min(z * per + per, k_tiles)) for z in range(S)]
    assert (S - 1) * per < k_tiles and S * per < 2**31


@settings(max_examples=200, deadline=None)
@given(M=st.integers(1, 3000), n8=st.integers(1, 512), k8=st.integers(1, 4096), data=st.data())
def test_forced_splits(M, n8, k8, data):
    N, K = 8 * n8, 8 * k8
    k_tiles = ceil_div(K, 64)
    want = data.draw(st.integers(1, k_tiles))
    if 4 * want * M * N > splitk.WORKSPACE_LIMIT and want > 1:
        with pytest.raises(ValueError, match="workspace"):
            sk.plan_splits(M, N, K, splits=want)
        return
    tile, S = sk.plan_splits(M, N, K, splits=want)
    assert S == splitk.effective_splits(k_tiles, want) <= want     # rounded: no empty slice
    ranges = sk.slices(K, tile, S)
    assert all(lo < hi for lo, hi in ranges) and ranges[-1][1] == k_tiles and ranges[0][0] == 0


def test_forced_splits_refusals_and_the_module_switch(monkeypatch):
    for bad in (0, -1, 1.5, True, 65):
        with pytest.raises(ValueError, match="splits"):
            sk.plan_splits(128, 256, 4096, splits=bad)                  # 64 K tiles
    monkeypatch.setattr(sk, "SPLITS", 3)
    assert sk.plan_splits(128, 256, 4096) == (sk.TILES[128], 3)
    assert sk.plan_splits(128, 256, 4096, splits=1)[1] == 1             # the argument wins
    monkeypatch.setattr(sk, "SPLITS", None)
    assert sk.plan_splits(128, 256, 4096, sms=132)[1] == 8                # 64 K tiles, 8 per slice


def test_launch_config():
    grid, block, smem = sk.launch_config(16, 8192, 8192, splits=4)
    assert grid == (32, 4, 1) and block == (128, 1, 1) and smem == sk.TILES[64].smem()
    grid, block, smem = sk.launch_config(512, 4096, 4096, splits=2)
    assert grid == (64, 2, 1) and block == (256, 1, 1) and smem == sk.TILES[128].smem()


# ---------------------------------------------------------------------------- NVRTC + census

@pytest.mark.parametrize("bm", [64, 128])
def test_compiles_with_its_census(bm):
    census_ops(sk.SOURCE, sk.TILES[bm].defines(), sk.KERNEL_NAMES.values(), sk.SASS_MUST_HAVE,
               sk.SASS_MUST_NOT_HAVE)


def test_source_refuses_to_compile_without_the_tile():
    from numba_gemm.runtime import nvrtc

    with pytest.raises(nvrtc.CompileError, match="-DHG_"):
        nvrtc.compile_variant(sk.SOURCE, ())
    d = sk.TILES[64].defines()
    with pytest.raises(nvrtc.CompileError, match="-DHG_TMA_LAG"):
        nvrtc.compile_variant(sk.SOURCE, tuple(x for x in d if not x.startswith("-DHG_TMA_LAG")))


# ---------------------------------------------------------------------------- run(), recorded (no GPU)

class _Array:
    """A stand-in device array: shape, dtype and an address."""

    def __init__(self, ptr, shape, dtype):
        self.ptr, self.shape, self.dtype = ptr, shape, np.dtype(dtype)


@pytest.fixture
def stubbed(monkeypatch):
    """run() with the driver stubbed: compiles, tensor maps and the reduction recorded."""
    from numba_gemm.runtime import nvrtc

    calls = {"maps": [], "reduce": [], "defines": []}

    def function(source, name, defines=()):
        calls["defines"].append((source, name, tuple(defines)))
        return 0x77

    def maps_and_args(level, A, B, C, alpha, beta, config):
        calls["maps"].append((C, alpha, beta, config))
        return [ctypes.c_int32(-1), ctypes.c_int32(-2)] + cm.pack_args(
            ("p", C.ptr), ("i", A.shape[0]), ("i", B.shape[1]), ("i", A.shape[1]), ("f", alpha),
            ("f", beta), ("i", 1), ("i", 1), ("i", 1))

    def reduce(P, C, S, M, N, alpha, beta, stream=None):
        calls["reduce"].append((P, C, S, M, N, alpha, beta))
        launch._issue(launch.Launch(0x88, (1,), (256,), 0, None, b"packed"), stream)

    monkeypatch.setattr(nvrtc, "function", function)
    monkeypatch.setattr(driver, "allow_dynamic_smem", lambda fn, smem: None)
    monkeypatch.setattr(sk.cm, "sm_count", lambda: 132)
    monkeypatch.setattr(sk.wg, "maps_and_args", maps_and_args)
    monkeypatch.setattr(sk.wg, "check_operands", lambda *a: calls["maps"].append("checked"))
    monkeypatch.setattr(sk.cm, "device_ptr", lambda a: a.ptr)
    monkeypatch.setattr(sk.splitk, "reduce", reduce)
    monkeypatch.setattr(sk.workspace, "partials", lambda C, S, M, N: _Array(0x5000, (S * M * N,), np.float32))
    return calls


def _holds(keep, obj, depth=0):
    if keep is obj:
        return True
    if depth < 4 and isinstance(keep, (list, tuple)):
        return any(_holds(k, obj, depth + 1) for k in keep)
    return getattr(keep, "owner", None) is obj


def test_run_without_a_split_is_one_launch_into_c(stubbed):
    A, B, C = _Array(0x1000, (4096, 4096), np.float16), _Array(0x2000, (4096, 4096), np.float16), \
        _Array(0x3000, (4096, 4096), np.float32)
    with launch.recording() as rec:
        sk.run(A, B, C, 0.5, 2.0)
    (L,) = rec.launches
    assert L.fn == 0x77 and L.grid == (16 * 32, 1, 1) and L.block == (256, 1, 1)
    assert stubbed["maps"] == ["checked", (C, 0.5, 2.0, sk.TILES[128])] and stubbed["reduce"] == []
    assert stubbed["defines"] == [(sk.SOURCE, "v11sk_splitk_f16", sk.TILES[128].defines())]
    assert L.keep[2].value == 0x3000 and L.keep[-1].value == 64     # C; per = all 64 K tiles


@pytest.mark.parametrize("M, S", [(16, 4), (128, 8)])
def test_run_with_a_split_records_partials_then_the_reduction(stubbed, M, S):
    N, K = 8192 if M == 16 else 4096, 8192 if M == 16 else 4096
    A, B = _Array(0x1000, (M, K), np.uint16), _Array(0x2000, (K, N), np.uint16)
    C = _Array(0x3000, (M, N), np.float32)
    with launch.recording() as rec:
        sk.run(A, B, C, -1.5, 0.25)
    main, red = rec.launches
    tile = sk.tile_for(M)
    assert main.grid == (ceil_div(M, tile.bm) * ceil_div(N, 256), S, 1) and main.block == (tile.threads, 1, 1)
    assert main.smem == tile.smem() and red.fn == 0x88
    checked, (P, alpha, beta, config) = stubbed["maps"]
    assert checked == "checked"                                  # the TMA rules before the workspace
    assert (alpha, beta, config) == (1.0, 0.0, tile)             # raw partials into the workspace
    args = main.keep[0]                                            # (the arguments, the workspace)
    assert args[2].value == 0x5000 and args[-1].value == ceil_div(K, 64) // S
    assert stubbed["reduce"] == [(P, C, S, M, N, -1.5, 0.25)]    # alpha and beta once, in the reduction
    assert stubbed["defines"][0][1] == "v11sk_splitk_bf16" and stubbed["defines"][0][2] == tile.defines()
    for L in (main, red):                                         # a replayed record keeps the workspace
        assert _holds(L.keep, P), L


def test_forced_split_reaches_the_grid(stubbed):
    A, B, C = _Array(0x1000, (300, 512), np.float16), _Array(0x2000, (512, 520), np.float16), \
        _Array(0x3000, (300, 520), np.float32)
    with launch.recording() as rec:
        sk.run(A, B, C, 1.0, 0.0, splits=3)                       # 8 K tiles: 3, 3, 2
    assert rec.launches[0].grid == (3 * 3, 3, 1) and rec.launches[0].keep[0][-1].value == 3


# ---------------------------------------------------------------------------- on the GPU

def _dev(x):
    from numba import cuda

    return cuda.to_device(x.view(np.uint16) if x.dtype == cm.BF16 else x)


def _case(M, N, K, dtype, alpha, beta, rng, splits=None, twice=True):
    """One run against float64 (C poisoned with NaN when beta == 0); with `twice`, a second run
    on the same inputs must give the same bytes. Returns the output."""
    from numba import cuda

    A, B, C = check.random_inputs(M, N, K, dtype, rng)
    C_in = C.copy() if beta != 0 else np.full((M, N), np.nan, np.float32)
    dA, dB = _dev(A), _dev(B)
    outs = []
    for _ in range(2 if twice else 1):
        dC = cuda.to_device(C_in)
        with launch.recording() as rec:
            sk.run(dA, dB, dC, alpha, beta, splits=splits)
        for L in rec.launches:
            L(0)
        cuda.synchronize()
        tile, S = sk.plan_splits(M, N, K, sms=sk.cm.sm_count(), splits=splits)
        assert len(rec.launches) == (1 if S == 1 else 2) and rec.launches[0].grid[1] == S
        outs.append(dC.copy_to_host())
    v = check.verify(outs[0], A, B, C, alpha, beta, family="hgemm")
    what = f"v11sk {np.dtype(dtype).name} M={M} N={N} K={K} a={alpha} b={beta} splits={splits}->{S}"
    assert v.ok, f"{what}: {v}"
    if twice:
        assert outs[0].tobytes() == outs[1].tobytes(), f"{what}: two runs differ"
    return outs[0]


# M ragged on both sides of 64 and 128; N and K multiples of 8 (TMA); K not a multiple of 64
SHAPES = [(1, 8, 8), (16, 8192, 1024), (37, 1032, 1000), (64, 264, 2048), (65, 256, 512),
          (100, 520, 4096), (128, 4096, 4096), (129, 264, 1000), (300, 8, 2056), (16, 8192, 8192),
          (512, 4096, 4096), (1000, 40, 136), (4097, 4104, 512)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_exact_on_ragged_shapes_auto_splits(dtype):
    rng = np.random.default_rng()
    split_seen = set()
    for M, N, K in SHAPES:
        assert sk.unsupported(M, N, K) is None
        tile, S = sk.plan_splits(M, N, K, sms=sk.cm.sm_count())
        split_seen.add((tile.bm, S > 1))
        _case(M, N, K, dtype, 0.5, 3.0, rng)
        _case(M, N, K, dtype, 1.0, 0.0, rng)         # beta == 0: NaN in C must not leak
    assert split_seen == {(64, False), (64, True), (128, False), (128, True)}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("splits", [1, 2, 3, 7, 16])
def test_exact_with_forced_splits(dtype, splits):
    rng = np.random.default_rng()
    for M, N, K in [(16, 520, 1024), (64, 256, 1032), (65, 264, 1000), (200, 776, 2048)]:
        _case(M, N, K, dtype, -1.5, 0.25, rng, splits=splits)
        _case(M, N, K, dtype, 1.0, 0.0, rng, splits=splits)


@pytest.mark.gpu
@pytest.mark.parametrize("K", [8, 16])
def test_one_k_tile(K):
    rng = np.random.default_rng()
    for M, N in [(1, 8), (16, 8192), (64, 264), (129, 1032)]:
        for dtype in DTYPES:
            _case(M, N, K, dtype, 0.5, 3.0, rng)
            _case(M, N, K, dtype, 1.0, 0.0, rng, splits=1)


@pytest.mark.gpu
def test_k_much_longer_than_m_n():
    """64×64×2^20: 16 slices of 1024 K tiles each; K coordinates up to 2^20."""
    rng = np.random.default_rng()
    assert sk.plan_splits(64, 64, 2**20, sms=sk.cm.sm_count())[1] > 1
    _case(64, 64, 2**20, np.float16, 0.5, 3.0, rng)
    _case(64, 64, 2**20, np.float16, 1.0, 0.0, rng, twice=False)


@pytest.mark.gpu
def test_gemm_and_plan_end_to_end_same_bits():
    import numba_gemm
    from numba import cuda

    rng = np.random.default_rng()
    for dtype in DTYPES:
        for M, N, K in [(16, 8192, 2048), (128, 1024, 4096)]:
            A, B, C = check.random_inputs(M, N, K, dtype, rng)
            assert sk.plan_splits(M, N, K, sms=sk.cm.sm_count())[1] > 1
            out = numba_gemm.gemm(A, B, C.copy(), alpha=0.5, beta=2.0, level="v11sk")
            assert check.verify(out, A, B, C, 0.5, 2.0, family="hgemm").ok
            dA, dB = _dev(A), _dev(B)
            if dtype == np.float16:               # device arrays: a recorded, cached call
                dC = cuda.to_device(np.full((M, N), np.nan, np.float32))
                numba_gemm.gemm(dA, dB, dC, level="v11sk")
                first = dC.copy_to_host()
                assert check.verify(first, A, B, None, 1.0, 0.0, family="hgemm").ok
                p = numba_gemm.plan(dA, dB, dC, level="v11sk")
                for _ in range(2):
                    dC.copy_to_device(np.full((M, N), np.nan, np.float32))
                    p.execute()
                    cuda.synchronize()
                    assert dC.copy_to_host().tobytes() == first.tobytes()


@pytest.mark.gpu
def test_captured_graph_replays_the_same_bits_torch():
    """As tests/test_api.py captures: gemm() and a plan in a torch CUDA graph, after a warm-up
    outside the capture (which allocates the workspaces); each replay gives the eager bytes,
    and a replay after A changed is exact."""
    torch = pytest.importorskip("torch")
    import numba_gemm

    M, N, K = 16, 8192, 4096
    assert sk.plan_splits(M, N, K, sms=sk.cm.sm_count())[1] > 1
    g = torch.Generator(device="cpu")
    g.manual_seed(int(np.random.default_rng().integers(2**31)))
    A = (torch.rand((M, K), generator=g) * 2 - 1).to("cuda", torch.float16)
    B = (torch.rand((K, N), generator=g) * 2 - 1).to("cuda", torch.float16)
    C0 = (torch.rand((M, N), generator=g) * 2 - 1).to("cuda")
    C, C2 = C0.clone(), torch.full_like(C0, float("nan"))
    p = numba_gemm.plan(A, B, C2, level="v11sk")
    numba_gemm.gemm(A, B, C, alpha=0.5, beta=-2.0, level="v11sk")        # warm-up, eager
    torch.cuda.synchronize()
    eager, eager2 = C.clone(), None
    p.execute()
    torch.cuda.synchronize()
    eager2 = C2.clone()
    graph = torch.cuda.CUDAGraph()
    C.copy_(C0)
    with torch.cuda.graph(graph):
        numba_gemm.gemm(A, B, C, alpha=0.5, beta=-2.0, level="v11sk")
        p.execute()
    for _ in range(2):
        C.copy_(C0)
        C2.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(C.view(torch.int32), eager.view(torch.int32))
        assert torch.equal(C2.view(torch.int32), eager2.view(torch.int32))
    A.copy_(torch.rand_like(A.float()).to(A.dtype))
    C.copy_(C0)
    graph.replay()
    torch.cuda.synchronize()
    host = lambda t: t.float().cpu().numpy().astype(np.float64)   # noqa: E731
    assert check.verify(host(C), host(A), host(B), host(C0), 0.5, -2.0, family="hgemm").ok
    assert check.verify(host(C2), host(A), host(B), None, 1.0, 0.0, family="hgemm").ok


@pytest.mark.gpu
def test_captured_graph_replays_the_same_bits_driver():
    """The same without torch: the split launch and the reduction captured with the driver's
    stream capture, replayed (tests/graph_replay.py)."""
    assert sk.plan_splits(16, 8192, 4096, sms=sk.cm.sm_count())[1] > 1
    replays_exactly("v11sk", 16, 8192, 4096, np.random.default_rng())


@pytest.mark.gpu
def test_recorded_launches_keep_the_workspace():
    """gemm() caches its recorded launches; they must hold the workspace they write, even
    after workspace's own cache lets it go."""
    import gc

    import numba_gemm
    from numba import cuda
    from numba_gemm import api
    from numba_gemm.runtime import workspace

    rng = np.random.default_rng()
    M, N, K = 16, 8192, 2048
    A, B, _ = check.random_inputs(M, N, K, np.float16, rng)
    dA, dB = cuda.to_device(A), cuda.to_device(B)
    dC = cuda.to_device(np.full((M, N), np.nan, np.float32))
    api._launch_cache.clear()                 # this call's record is then the only one
    numba_gemm.gemm(dA, dB, dC, level="v11sk")
    first = dC.copy_to_host()
    (lv, recorded), = api._launch_cache.values()
    assert lv.name == "v11sk" and len(recorded) == 2              # split: partials + reduction
    bufs = [b for b in workspace._cache.values() if all(_holds(L.keep, b) for L in recorded)]
    assert len(bufs) == 1
    workspace._cache.clear()
    del bufs
    gc.collect()
    junk = cuda.to_device(np.full(4 * M * N, np.nan, np.float32))   # would reuse a freed buffer
    dC.copy_to_device(np.full((M, N), np.nan, np.float32))
    numba_gemm.gemm(dA, dB, dC, level="v11sk")                      # the cached record
    assert dC.copy_to_host().tobytes() == first.tobytes()
    del junk


@pytest.mark.gpu
def test_a_captured_graph_outlives_the_caches():
    """A graph replays its workspace's address long after gemm() was called: with every cache
    emptied, freed memory released and a NaN-filled array allocated where freed partials would
    land, the replay gives the eager bytes and leaves that array alone (launch.keep_for_graphs
    held the partials; freed, the replay would write its partials into the new array)."""
    import gc

    torch = pytest.importorskip("torch")
    import numba_gemm
    from numba import cuda
    from numba_gemm import api
    from numba_gemm.runtime import workspace

    M, N, K = 16, 8192, 4096
    S = sk.plan_splits(M, N, K, sms=sk.cm.sm_count())[1]
    assert S > 1
    g = torch.Generator(device="cpu")
    g.manual_seed(int(np.random.default_rng().integers(2**31)))
    A = (torch.rand((M, K), generator=g) * 2 - 1).to("cuda", torch.float16)
    B = (torch.rand((K, N), generator=g) * 2 - 1).to("cuda", torch.float16)
    C = torch.full((M, N), float("nan"), device="cuda")
    numba_gemm.gemm(A, B, C, level="v11sk")                  # warm-up: records, allocates P
    torch.cuda.synchronize()
    eager = C.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        numba_gemm.gemm(A, B, C, level="v11sk")
    api._launch_cache.clear()
    api._torch_cache.clear()
    workspace._cache.clear()
    gc.collect()
    cuda.current_context().deallocations.clear()             # free what nothing holds now
    junk = cuda.to_device(np.full(S * M * N, np.nan, np.float32))
    C.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(C.view(torch.int32), eager.view(torch.int32))
    assert np.isnan(junk.copy_to_host()).all()
