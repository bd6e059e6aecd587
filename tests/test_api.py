"""gemm() rejects bad input with a clear error before any launch, and lists its levels."""
import numpy as np
import pytest

import numba_gemm
from numba_gemm import registry as L
from numba_gemm.measure import check


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


def test_overlapping_host_c_refused():
    """NumPy operands follow the device rule: C sharing bytes with A or B is refused (their
    copies would hide it, a device kernel would not), and is checked before any launch."""
    X = np.random.default_rng().standard_normal(3 * 36).astype(np.float32)
    A, B = X[:36].reshape(6, 6), np.random.default_rng().standard_normal((6, 6)).astype(np.float32)
    for C in (A, X[18:54].reshape(6, 6), B):     # C is A, half over A, C is B
        with pytest.raises(ValueError, match="overlaps"):
            numba_gemm.gemm(A, B, C, level="k1")
    C = X[36:72].reshape(6, 6)                 # right after A: touches it, shares no byte
    out = numba_gemm.gemm(A, B, C, level="k1")
    assert out is C and check.verify(C, A, B, None, 1.0, 0.0).ok


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


# --- level="auto": the cost model's ranking, never a level that refuses the shape

from hypothesis import given, settings, strategies as st  # noqa: E402

from numba_gemm import api, choose  # noqa: E402
from numba_gemm.runtime.operands import BFLOAT16  # noqa: E402

DIMS = st.one_of(st.integers(1, 300), st.integers(1, 2**34))


@settings(max_examples=200, deadline=None)
@given(M=DIMS, N=DIMS, K=DIMS, dtype=st.sampled_from([np.float32, np.float16, BFLOAT16]),
       native=st.booleans())
def test_auto_never_picks_a_level_that_refuses(M, N, K, dtype, native):
    cands = choose.auto_candidates(dtype, M, N, K, native)
    eligible = [lv for lv in numba_gemm.levels() if np.dtype(dtype) in lv.dtypes
                and (native or not lv.native) and getattr(lv.module, "AUTO", True)]
    # the candidates are exactly the eligible levels that serve the shape (and a level's
    # calibrated tiles, as variants of it: v11:bm=64:bn=64) ...
    assert sorted(lv.name for lv in cands if not lv.kwargs) == sorted(
        lv.name for lv in eligible if lv.unsupported(M, N, K) is None)
    assert all(lv.name.split(":")[0] in {e.name for e in eligible} for lv in cands if lv.kwargs)
    # ... fastest predicted first, the uncalibrated after them in ladder order (highest first)
    ranked = choose.candidates(dtype, M, N, K, native)
    assert [lv.name for lv in cands] == [q.name for q in ranked]
    assert [q for q in ranked if not q.kwargs] == choose.rank(dtype, M, N, K, native)
    times = [q.ms for q in ranked if q.ms is not None]
    assert times == sorted(times)
    assert all(q.ms is None for q in ranked[len(times):])


def test_auto_on_todays_ladder():
    # v10+ need K and N multiples of 8; v9 serves any shape
    odd = [lv.name for lv in choose.auto_candidates(BFLOAT16, 65, 63, 61, True)]
    assert "v10" not in odd and "v9" in odd
    assert choose.auto_candidates(np.float16, 64, 64, 64, False) == []
    # the measured H200 suite (h200_shapes_fp32.json): at 512^3 k5's tile split 4 ways over K
    # (k5sk, 18.2 µs) beats k5 (30.3 µs) and k6; at 4096^3 k9 (2.81 ms) beats k8 and k8sk (the
    # same kernel unsplit, 2.92 ms; h200_sgemm_k9_unrolled.json)
    assert choose.auto_candidates(np.float32, 512, 512, 512, True)[0].name == "k5sk"
    assert choose.auto_candidates(np.float32, 4096, 4096, 4096, True)[0].name == "k9"


def test_a_new_level_is_ranked_without_an_edit(monkeypatch):
    import types as pytypes

    from numba_gemm import registry as R

    mod = pytypes.SimpleNamespace(LEVEL="k99", unsupported=lambda M, N, K: "never" if N == 7 else None,
                                  CONFIG=pytypes.SimpleNamespace(bm=32, bn=32))
    new = R.Level(name="k99", parent="k6", title="t", delta="k99 = ...", dtypes=(np.dtype(np.float32),),
                  family="sgemm", sass_must_have=(), module=mod)
    reg = dict(R.registry())
    order = list(reg.values())
    i = max(j for j, lv in enumerate(order) if lv.family == "sgemm")
    order.insert(i + 1, new)
    monkeypatch.setattr(R, "_REGISTRY", {lv.name: lv for lv in order})
    # not yet measured: a candidate, after every priced level (a split level planning one slice
    # on its parent's tile is priced as its parent: choose._one_slice_parent)
    names = [lv.name for lv in choose.auto_candidates(np.float32, 8, 8, 8, True)]
    priced = [q.name for q in choose.candidates(np.float32, 8, 8, 8, True) if q.ms is not None]
    assert "k99" in names and names[:names.index("k99")] == priced
    # calibrated fast: first
    cal = {"levels": dict(choose.calibration()["levels"],
                          k99={"float32": {"blocks_per_sm": 8, "bw_eff": 1.0, "tflops": 1e6, "t0_us": 0.1}})}
    monkeypatch.setattr(choose, "_calibration", cal)
    assert choose.auto_candidates(np.float32, 8, 8, 8, True)[0].name == "k99"
    assert "k99" not in [lv.name for lv in choose.auto_candidates(np.float32, 8, 7, 8, True)]
    mod.AUTO = False
    assert "k99" not in [lv.name for lv in choose.auto_candidates(np.float32, 8, 8, 8, True)]


# --- without a GPU (the simulator, or one clear error)

needs_simulator = pytest.mark.skipif(not numba_gemm.runtime.gpu.simulating(), reason="simulator only")


@needs_simulator
def test_auto_runs_in_the_simulator():
    A, B = _mats(M=5, N=6, K=7)
    out = numba_gemm.gemm(A, B)
    assert isinstance(out, np.ndarray) and check.verify(out, A, B, None, 1.0, 0.0).ok


@needs_simulator
@pytest.mark.parametrize("level", ["v9"])
def test_native_levels_need_a_gpu_before_any_copy(level, monkeypatch):
    from numba import cuda

    def no_copy(*a, **k):
        raise AssertionError("copied before refusing")

    monkeypatch.setattr(cuda, "to_device", no_copy)
    A, B = _mats(dtype=np.float16)
    with pytest.raises((api.NoGPUError, ValueError), match="GPU"):
        numba_gemm.gemm(A, B, level=level)


@needs_simulator
def test_fp16_auto_runs_v8py_in_the_simulator():
    """Only the Numba levels run in the simulator; for fp16 that is v8py, which auto ranks
    nowhere else (test_auto_rule_on_todays_ladder: no candidate without native levels)."""
    A, B = _mats(M=3, N=5, K=4, dtype=np.float16)
    p = numba_gemm.plan(A, B)
    assert p.level.name == "v8py"
    out = p.execute()
    assert out.dtype == np.float32 and check.verify(out, A, B, None, 1.0, 0.0).ok


def test_no_level_message_names_the_numba_hgemm_level():
    """A GPU without sm_90a has no fp16 level in auto's ranking: the error names v8py, which
    runs when named."""
    msg = str(choose.no_level(np.float16, 64, 64, 64, native=False))
    assert "sm_90a" in msg and "level='v8py'" in msg
    assert "v8py" not in str(choose.no_level(np.float16, 64, 64, 64, native=True)).split(";")[0]


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

    if numba_gemm.runtime.gpu.has_gpu():
        pytest.skip("this machine has a GPU")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    code = ("import numba, numpy as np, numba_gemm\n"
            "numba_gemm.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("numba_gemm.runtime.gpu.NoGPUError") and "NUMBA_ENABLE_CUDASIM=1" in last
    assert "use_simulator_if_no_gpu() first" in last      # numba.cuda not imported: still possible
    assert "CudaSupportError" not in out.stderr
    assert api.NoGPUError is numba_gemm.runtime.gpu.NoGPUError is numba_gemm.NoGPUError


def _fresh_python(code):
    """Run `code` in a new interpreter without NUMBA_ENABLE_CUDASIM (Numba's target is chosen
    once per process)."""
    import os
    import subprocess
    import sys

    if numba_gemm.runtime.gpu.has_gpu():
        pytest.skip("this machine has a GPU")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)


def test_simulator_turned_on_after_import_numba():
    """After `import numba` (numba.cuda not yet imported) the switch still takes: numba.cuda
    reads numba's config when it is imported."""
    out = _fresh_python(
        "import numba, numpy as np, numba_gemm, sys\n"
        "assert 'numba.cuda' not in sys.modules\n"
        "assert numba_gemm.use_simulator_if_no_gpu() is True\n"
        "from numba import cuda\n"
        "assert cuda.jit.__module__.startswith('numba.cuda.simulator')\n"
        "A = np.arange(6, dtype=np.float32).reshape(2, 3); B = np.ones((3, 2), np.float32)\n"
        "assert (numba_gemm.gemm(A, B, level='k1') == A @ B).all()\n"
        "print('ok')\n")
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_simulator_after_numba_cuda_import_raises_and_says_why():
    """After `from numba import cuda` Numba has bound its real target: the call raises
    (not True followed by a NoGPUError from gemm), and gemm() then says why as well."""
    out = _fresh_python(
        "from numba import cuda\n"
        "import numpy as np, numba_gemm\n"
        "try:\n"
        "    numba_gemm.use_simulator_if_no_gpu()\n"
        "except numba_gemm.NoGPUError as e:\n"
        "    print('raised:', e)\n"
        "numba_gemm.gemm(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))\n")
    assert out.returncode == 1
    first = out.stdout.strip()
    assert first.startswith("raised:") and "numba.cuda was imported before" in first
    assert "NUMBA_ENABLE_CUDASIM=1" in first
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("numba_gemm.runtime.gpu.NoGPUError") and "already imported" in last


# ============================================================================ on a GPU
# torch / CuPy / Numba tensors, bf16, streams, graph capture, OOM and a soak. Run there with
#   python -m pytest -q tests/test_api.py -m gpu          (NUMBA_GEMM_SOAK=10000 for the soak)

def _torch():
    return pytest.importorskip("torch")


def _host64(t):
    return t.detach().float().cpu().numpy().astype(np.float64)


SHAPES = [(70, 72, 40), (33, 31, 29), (1, 1, 1)]


def _family_dtypes(lv):
    return ["float32"] if lv.family == "sgemm" else ["float16", "bfloat16"]


LEVEL_DTYPES = [(lv.name, d) for lv in L.registry().values() for d in _family_dtypes(lv)]


def _tensors(torch, M, N, K, dtype, device="cuda", seed=None):
    g = torch.Generator(device="cpu")
    g.manual_seed(int(np.random.default_rng().integers(2**31)) if seed is None else seed)
    A = (torch.rand((M, K), generator=g) * 2 - 1).to(device, getattr(torch, dtype))
    B = (torch.rand((K, N), generator=g) * 2 - 1).to(device, getattr(torch, dtype))
    C = (torch.rand((M, N), generator=g) * 2 - 1).to(device)
    return A, B, C


@pytest.mark.gpu
@pytest.mark.parametrize("level, dtype", LEVEL_DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_torch_tensors_every_level_exact(level, dtype, shape):
    torch = _torch()
    lv = L.get(level)
    A, B, C = _tensors(torch, *(shape[0], shape[1], shape[2]), dtype)
    fam = lv.family
    if lv.unsupported(*shape):
        with pytest.raises(ValueError, match=level):
            numba_gemm.gemm(A, B, C, level=level)
        return
    C0 = _host64(C)
    C.fill_(float("nan"))            # beta == 0: C is write-only
    assert numba_gemm.gemm(A, B, C, level=level) is C
    torch.cuda.synchronize()
    assert check.verify(_host64(C), _host64(A), _host64(B), None, 1.0, 0.0, family=fam).ok
    C.copy_(torch.from_numpy(C0.astype(np.float32)))
    numba_gemm.gemm(A, B, C, alpha=0.5, beta=-1.5, level=level)
    out = numba_gemm.gemm(A, B, level=level)                     # torch in -> torch out
    assert isinstance(out, torch.Tensor) and out.device == A.device and out.dtype == torch.float32
    torch.cuda.synchronize()
    assert check.verify(_host64(C), _host64(A), _host64(B), C0, 0.5, -1.5, family=fam).ok
    assert check.verify(_host64(out), _host64(A), _host64(B), None, 1.0, 0.0, family=fam).ok


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(65, 63, 61), (128, 128, 64)])
def test_torch_auto(dtype, shape):
    torch = _torch()
    A, B, _ = _tensors(torch, *shape, dtype)
    out = numba_gemm.gemm(A, B)
    torch.cuda.synchronize()
    fam = "sgemm" if dtype == "float32" else "hgemm"
    assert check.verify(_host64(out), _host64(A), _host64(B), None, 1.0, 0.0, family=fam).ok
    assert numba_gemm.plan(A, B).level.name == choose.auto_candidates(np.dtype(np.float32) if fam == "sgemm"
                                                                      else np.dtype(np.float16), *shape, True)[0].name


@pytest.mark.gpu
def test_auto_falls_back_when_v10_refuses_the_pointer():
    torch = _torch()
    X = torch.rand(64 * 64 + 1, device="cuda").half()
    A = X[1:].view(64, 64)                         # 2-byte offset: TMA refuses the base
    B = torch.rand((64, 64), device="cuda").half()
    with pytest.raises(ValueError, match="v10"):
        numba_gemm.gemm(A, B, level="v10")
    p = numba_gemm.plan(A, B)
    assert p.level.name != "v10"
    torch.cuda.synchronize()
    out = p.execute()
    torch.cuda.synchronize()
    assert check.verify(_host64(out), _host64(A), _host64(B), None, 1.0, 0.0, family="hgemm").ok


@pytest.mark.gpu
def test_numba_cupy_numpy_in_their_own_types_out():
    from numba import cuda

    A, B = _mats(M=40, N=36, K=33)
    out = numba_gemm.gemm(cuda.to_device(A), cuda.to_device(B))
    assert isinstance(out, type(cuda.device_array(1)))
    assert check.verify(out.copy_to_host(), A, B, None, 1.0, 0.0).ok
    A16, B16 = A.astype(BFLOAT16), B.astype(BFLOAT16)
    out = numba_gemm.gemm(A16, B16)
    assert isinstance(out, np.ndarray) and check.verify(out, A16, B16, None, 1.0, 0.0, family="hgemm").ok
    cupy = pytest.importorskip("cupy")
    out = numba_gemm.gemm(cupy.asarray(A), cupy.asarray(B))
    assert isinstance(out, cupy.ndarray) and check.verify(out.get(), A, B, None, 1.0, 0.0).ok
    out = numba_gemm.gemm(cupy.asarray(A.astype(np.float16)), cupy.asarray(B.astype(np.float16)))
    assert isinstance(out, cupy.ndarray)


@pytest.mark.gpu
def test_fast_path_skips_numba_dispatch(monkeypatch):
    torch = _torch()
    from numba_gemm.sgemm import k6_vectorized as k6

    A, B, C = _tensors(torch, 64, 64, 64, "float32")
    numba_gemm.gemm(A, B, C, level="k6")
    B2 = B.clone()                                  # a new pointer: a cache miss, recorded again

    def no_dispatch(*a, **k):
        raise AssertionError("Numba's dispatcher was called")

    monkeypatch.setattr(type(k6.kernel), "call", no_dispatch)
    numba_gemm.gemm(A, B2, C, level="k6")
    torch.cuda.synchronize()
    assert check.verify(_host64(C), _host64(A), _host64(B2), None, 1.0, 0.0).ok


@pytest.mark.gpu
@pytest.mark.parametrize("level", ["k6", "v10"])
def test_torch_current_stream_and_explicit_streams(level):
    torch = _torch()
    dtype = "float32" if level == "k6" else "float16"
    A, B, C = _tensors(torch, 128, 128, 64, dtype)
    new = torch.rand_like(A.float()).to(A.dtype)
    numba_gemm.gemm(A, B, C, level=level)           # warm up: compile and load outside the test
    torch.cuda.synchronize()
    fam = "sgemm" if level == "k6" else "hgemm"
    s, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    from cuda.core import Device

    dev = Device()
    dev.set_current()
    others = [None, s2, s2.cuda_stream, dev.create_stream()]
    for other in others:
        new = torch.rand_like(A.float()).to(A.dtype)
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)           # ~10 ms: a launch on the wrong stream races A's update
            A.copy_(new)
            numba_gemm.gemm(A, B, C, level=level, stream=other)
        torch.cuda.synchronize()
        ok = check.verify(_host64(C), _host64(A), _host64(B), None, 1.0, 0.0, family=fam).ok
        assert ok, f"stream={other!r}"


@pytest.mark.gpu
@pytest.mark.parametrize("level, c16", [("k6", False), ("v10", False), ("v13", False), ("v13", True),
                                        ("auto", False), ("auto", True)])
def test_cuda_graph_capture_replays(level, c16):
    """Captured calls replay exactly; v13 with its TMA-store epilogue and with a 16-bit C too."""
    torch = _torch()
    dtype = "float32" if level == "k6" else "float16"
    fam = "sgemm" if level == "k6" else "hgemm"
    A, B, C = _tensors(torch, 96, 128, 64, dtype)
    if c16:
        C = C.to(A.dtype)
    C2 = torch.empty_like(C)
    p = numba_gemm.plan(A, B, C2, level=level)
    numba_gemm.gemm(A, B, C, level=level)           # warm up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        numba_gemm.gemm(A, B, C, level=level)
        p.execute()
    for _ in range(2):
        A.copy_(torch.rand_like(A.float()).to(A.dtype))
        C.fill_(float("nan"))
        C2.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        for out in (C, C2):
            assert check.verify(_host64(out), _host64(A), _host64(B), None, 1.0, 0.0, family=fam,
                                out_dtype=np.float16 if c16 else np.float32).ok


@pytest.mark.gpu
def test_capture_refuses_an_eager_launch_on_another_stream():
    torch = _torch()
    A, B, C = _tensors(torch, 64, 64, 64, "float32")
    numba_gemm.gemm(A, B, C, level="k6")
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    from numba_gemm.runtime.driver import LaunchError

    with torch.cuda.graph(g):
        with pytest.raises(LaunchError, match="capturing"):
            numba_gemm.gemm(A, B, C, level="k6", stream=side)
        with pytest.raises(LaunchError, match="capture"):
            numba_gemm.gemm(A, B, C, level="k6", stream=0)
        numba_gemm.gemm(A, B, C, level="k6")


@pytest.mark.gpu
def test_overlap_and_device_checks():
    torch = _torch()
    X = torch.rand(3 * 64 * 64, device="cuda")
    A, C = X[: 64 * 64].view(64, 64), X[2048: 2048 + 64 * 64].view(64, 64)
    with pytest.raises(ValueError, match="overlaps"):
        numba_gemm.gemm(A, torch.rand((64, 64), device="cuda"), C)
    with pytest.raises(TypeError, match="mix"):
        numba_gemm.gemm(A, np.ones((64, 64), np.float32))
    if torch.cuda.device_count() < 2:
        return
    A1, B1, _ = _tensors(torch, 40, 36, 33, "float32", device="cuda:1")
    before = torch.cuda.current_device()
    out = numba_gemm.gemm(A1, B1)
    assert out.device == A1.device and torch.cuda.current_device() == before
    torch.cuda.synchronize(1)
    assert check.verify(_host64(out), _host64(A1), _host64(B1), None, 1.0, 0.0).ok
    with pytest.raises(ValueError, match="one GPU"):
        numba_gemm.gemm(A1, torch.rand((33, 36), device="cuda:0"))


@pytest.mark.gpu
def test_out_of_memory_is_clear_and_the_process_goes_on():
    torch = _torch()
    A = torch.rand((2**18, 1), device="cuda")
    B = torch.rand((1, 2**18), device="cuda")           # C would be 256 GiB
    with pytest.raises(MemoryError, match="out of device memory"):
        numba_gemm.gemm(A, B)
    from numba import cuda

    with pytest.raises(MemoryError):
        numba_gemm.gemm(cuda.to_device(np.ones((2**18, 1), np.float32)),
                        cuda.to_device(np.ones((1, 2**18), np.float32)))
    test_torch_auto("float16", (65, 63, 61))


@pytest.mark.gpu
def test_soak_random_shapes_levels_dtypes_flat_memory():
    import os
    import time

    torch = _torch()
    count = int(os.environ.get("NUMBA_GEMM_SOAK", "3000"))
    budget = float(os.environ.get("NUMBA_GEMM_SOAK_SECONDS", "60"))
    rng = np.random.default_rng()
    names = [lv.name for lv in numba_gemm.levels()] + ["auto"]
    t0, done, base = time.perf_counter(), 0, None
    for i in range(count):
        level = names[rng.integers(len(names))]
        fam = L.get(level).family if level != "auto" else ("sgemm" if rng.random() < 0.5 else "hgemm")
        dtype = "float32" if fam == "sgemm" else ("float16", "bfloat16")[rng.integers(2)]
        M, N, K = (int(x) for x in rng.integers(1, 200, 3))
        if rng.random() < 0.3:
            M, N, K = (8 * max(1, d // 8) for d in (M, N, K))
        A, B, C = _tensors(torch, M, N, K, dtype)
        beta = float(rng.choice([0.0, -1.5]))
        C0 = _host64(C)
        try:
            out = numba_gemm.gemm(A, B, C if beta or rng.random() < 0.5 else None, alpha=0.5, beta=beta, level=level)
        except ValueError:
            assert level != "auto" and L.get(level).unsupported(M, N, K)
            continue
        torch.cuda.synchronize()
        v = check.verify(_host64(out), _host64(A), _host64(B), C0, 0.5, beta, family=fam)
        assert v.ok, (level, dtype, M, N, K, beta, str(v))
        done += 1
        if i == 200:
            del A, B, C, out
            torch.cuda.synchronize()
            base = (torch.cuda.memory_allocated(), torch.cuda.mem_get_info()[0])
        if time.perf_counter() - t0 > budget:
            break
    torch.cuda.synchronize()
    print(f"\nsoak: {done} exact calls in {time.perf_counter() - t0:.1f} s")
    if base is not None:
        import gc

        gc.collect()
        assert torch.cuda.memory_allocated() <= base[0] + 2**20
        assert torch.cuda.mem_get_info()[0] >= base[1] - 256 * 2**20


def test_readme_snippet_runs_as_written(tmp_path):
    """The first snippet of README's "Using it", in a fresh process (simulator chosen by the
    snippet itself when there is no GPU)."""
    import os
    import re
    import subprocess
    import sys

    readme = open(os.path.join(os.path.dirname(__file__), "..", "README.md")).read()
    section = readme[readme.index("## Using it"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "k1" in out.stdout and "v10" in out.stdout


@needs_simulator
def test_simulator_warns_for_big_shapes(monkeypatch):
    monkeypatch.setattr(api, "SIM_WARN_FLOPS", 10)
    A, B = _mats(M=2, N=3, K=4)
    with pytest.warns(UserWarning, match="simulator"):
        numba_gemm.gemm(A, B, level="k1")


def test_validate_refuses_a_shape_the_named_level_cannot_serve():
    from numba_gemm.runtime.operands import Operand

    f16 = np.dtype(np.float16)
    a = Operand(0x1000, (16, 12), None, f16, 0, "t", None)
    b = Operand(0x9000, (12, 65536 * 128 + 1), None, f16, 0, "t", None)     # never allocated
    with pytest.raises(ValueError, match="level v10 cannot run"):
        api.validate(a, Operand(0x9000, (12, 16), None, f16, 0, "t", None), None, 0.0, L.get("v10"))
    with pytest.raises(ValueError, match="level v7 cannot run.*grid"):
        api.validate(a, b, None, 0.0, L.get("v7"))
    assert api.validate(a, b, None, 0.0, None) == (16, 65536 * 128 + 1, 12)   # auto decides later


def test_validate_takes_a_16bit_c_only_for_the_levels_that_write_it():
    """C may be A's own float16/bfloat16 for a C16 level (v13) or auto; every other level, and
    any other C dtype, is refused before launch with the levels that write it named."""
    from numba_gemm.runtime.operands import Operand

    f16, f32 = np.dtype(np.float16), np.dtype(np.float32)
    a = Operand(0x1000, (16, 64), None, f16, 0, "t", None)
    b = Operand(0x9000, (64, 32), None, f16, 0, "t", None)
    c16 = Operand(0x20000, (16, 32), None, f16, 0, "t", None)
    assert api.validate(a, b, c16, 0.0, L.get("v13")) == (16, 32, 64)
    assert api.validate(a, b, c16, 0.0, None) == (16, 32, 64)
    with pytest.raises(TypeError, match="level v11 writes C as float32 only.*: v13"):
        api.validate(a, b, c16, 0.0, L.get("v11"))
    with pytest.raises(TypeError, match="level v11 writes C as float32 only"):
        api.validate(a, b, None, 0.0, L.get("v11"), out=f16)          # C to be made as fp16
    with pytest.raises(TypeError, match="out_dtype float32 differs from C's dtype float16"):
        api.validate(a, b, c16, 0.0, None, out=f32)
    if BFLOAT16 is not None:
        c_bf = Operand(0x20000, (16, 32), None, BFLOAT16, 0, "t", None)
        with pytest.raises(TypeError, match="C must be float32, or float16 as A and B; got bfloat16"):
            api.validate(a, b, c_bf, 0.0, None)
    a32 = Operand(0x1000, (16, 64), None, f32, 0, "t", None)
    b32 = Operand(0x9000, (64, 32), None, f32, 0, "t", None)
    with pytest.raises(TypeError, match="C must be float32; got float16"):
        api.validate(a32, b32, c16, 0.0, None)


def test_out_dtype_accepts_numpy_names_and_torch_dtypes():
    from numba_gemm.runtime.operands import as_dtype

    assert as_dtype("float16") == np.float16 and as_dtype(np.float32) == np.float32
    if BFLOAT16 is not None:
        assert as_dtype("bfloat16") == BFLOAT16
    torch = pytest.importorskip("torch")
    assert as_dtype(torch.float16) == np.float16
    if BFLOAT16 is not None:
        assert as_dtype(torch.bfloat16) == BFLOAT16
    with pytest.raises(TypeError, match="not a dtype"):
        as_dtype("fp17")


@needs_simulator
def test_no_numba_level_writes_a_16bit_c():
    """In the simulator only Numba levels run, and none writes a 16-bit C: auto says so."""
    A, B = _mats(M=4, N=8, K=8)
    A, B = A.astype(np.float16), B.astype(np.float16)
    with pytest.raises(ValueError, match="no level writes float16 C.*v13"):
        numba_gemm.gemm(A, B, out_dtype=np.float16)
    with pytest.raises(TypeError, match="level v8py writes C as float32 only"):
        numba_gemm.gemm(A, B, out_dtype="float16", level="v8py")
