"""gemm()'s launch caches on a CPU: the driver, torch and the compiled kernel are replaced by
stand-ins, so that what a call would launch, on which stream and device, can be read back.

The fast path for torch tensors skips reading and validating the operands when the call's
fields equal those of a call that passed them; these tests change one field at a time and
check that the call is validated again (and refused, where it must be) or launches what
that field says, never the cached launch of the earlier call.
"""
import contextlib
import ctypes
import sys
import types

import numpy as np
import pytest

from numba_gemm import api, registry
from numba_gemm.runtime import driver, gpu, launch, operands, workspace
from numba_gemm.sgemm import _common as sg

TORCH_STREAM = 0x5000           # torch's current stream, unless a test changes it


class Tensor:
    """The accessors of a torch CUDA tensor that numba_gemm reads."""

    __module__ = "torch"

    def __init__(self, shape, dtype="torch.float32", ptr=0x10000, strides=None, device=0):
        self.shape, self.dtype, self.ptr, self.device = tuple(shape), dtype, ptr, device
        self.strides = strides or (shape[1], 1)
        self.requires_grad, self.neg = False, False

    def data_ptr(self):
        return self.ptr

    def stride(self):
        return self.strides

    def get_device(self):
        return self.device

    def is_neg(self):
        return self.neg


class Driver:
    """libcuda's launch-path entry points: records launches and stream waits."""

    def __init__(self):
        self.launches, self.waits, self.capturing = [], [], set()
        self.current_ctx = None

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        layout, _ = launch._layout(tuple(sg.SIGNATURE))
        values = layout.unpack(ctypes.string_at(params[0], layout.size))
        self.launches.append({"fn": fn.value, "stream": stream.value if stream else 0,
                              "ctx": self.current_ctx, "values": values})
        return 0

    def cuStreamIsCapturing(self, stream, status):
        status.value = 1 if (stream or 0) in self.capturing else 0
        return 0

    def cuCtxGetCurrent(self, cur):
        cur.value = self.current_ctx
        return 0

    def cuCtxPushCurrent_v2(self, ctx):
        self.pushed, self.current_ctx = self.current_ctx, ctx
        return 0

    def cuCtxPopCurrent_v2(self, out):
        self.current_ctx = self.pushed
        return 0

    def cuEventCreate(self, handle, flags):
        handle._obj.value = 0xE0
        return 0

    def cuEventRecord(self, event, stream):
        self.recorded = stream or 0
        return 0

    def cuStreamWaitEvent(self, stream, event, flags):
        self.waits.append((self.recorded, stream or 0))     # (producer, waiting stream)
        return 0


def unpack(values):
    """(M, N, K, alpha, beta, A pointer, B pointer, C pointer) of a launch of SGEMM's signature."""
    M, N, K, alpha = values[:4]
    a, b, beta, c = values[4:11], values[11:18], values[18], values[19:26]
    return M, N, K, alpha, beta, a[4], b[4], c[4]


@pytest.fixture
def gpu_stub(monkeypatch):
    """A 'GPU' session: two devices, a fake torch, empty caches; yields the driver stand-in."""
    from numba import cuda

    drv = Driver()
    state = types.SimpleNamespace(stream=TORCH_STREAM, capturing=False, device=0)
    torch = types.ModuleType("torch")
    torch.Tensor = Tensor
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda dev: state.stream)
    torch.cuda = types.SimpleNamespace(is_current_stream_capturing=lambda: state.capturing)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(operands, "_Tensor", None)
    monkeypatch.setattr(api, "_mode", "gpu")
    monkeypatch.setattr(api, "_launch_cache", launch.Calls())
    monkeypatch.setattr(api, "_torch_cache", launch.Calls())
    monkeypatch.setattr(driver, "_lib", drv)
    monkeypatch.setattr(driver, "_primary", {0: 0xC0, 1: 0xC1})
    monkeypatch.setattr(driver, "_events", {})
    monkeypatch.setattr(gpu, "simulating", lambda: False)

    @contextlib.contextmanager
    def on(dev):
        state.device = dev
        yield

    monkeypatch.setattr(cuda, "gpus", type("Gpus", (), {"__getitem__": lambda self, d: on(d)})(),
                        raising=False)
    monkeypatch.setattr(cuda, "get_current_device", lambda: types.SimpleNamespace(id=state.device),
                        raising=False)
    # the compiled kernel's handle: one per device, so that a launch says which device it is for
    monkeypatch.setattr(launch, "_numba_function",
                        lambda d, t, dev: (0xF00 + dev, launch._layout(t), None))
    validated = []
    real_validate = api.validate
    monkeypatch.setattr(api, "validate", lambda *a: validated.append(a) or real_validate(*a))
    drv.state, drv.validated = state, validated
    yield drv


def mats(M=64, N=64, K=64, base=0x100000, dtype="torch.float32"):
    return (Tensor((M, K), dtype, base), Tensor((K, N), dtype, base + 0x100000),
            Tensor((M, N), "torch.float32", base + 0x200000))


def test_a_repeated_call_is_one_cached_launch(gpu_stub):
    A, B, C = mats()
    assert api.gemm(A, B, C, alpha=0.5, level="k2") is C
    assert api.gemm(A, B, C, alpha=0.5, level="k2") is C
    assert len(gpu_stub.validated) == 1          # the second call was a hit: not validated again
    first, second = gpu_stub.launches
    assert first == second
    assert first["fn"] == 0xF00 and first["stream"] == TORCH_STREAM and first["ctx"] == 0xC0
    assert unpack(first["values"]) == (64, 64, 64, 0.5, 0.0, A.ptr, B.ptr, C.ptr)


def _variants():
    """(what changes, call arguments) for calls that must not reuse the first call's launch."""
    A, B, C = mats()
    yield "A pointer", (Tensor(A.shape, ptr=0x900000), B, C), {}
    yield "B pointer", (A, Tensor(B.shape, ptr=0x980000), C), {}
    yield "C pointer", (A, B, Tensor(C.shape, ptr=0xA00000)), {}
    yield "shape", (Tensor((32, 64), ptr=A.ptr), B, Tensor((32, 64), ptr=C.ptr)), {}
    yield "alpha", (A, B, C), {"alpha": 2.0}
    yield "beta", (A, B, C), {"beta": 3.0}


@pytest.mark.parametrize("what,args,kw", list(_variants()), ids=[v[0] for v in _variants()])
def test_cache_tells_every_launch_field_apart(gpu_stub, what, args, kw):
    A, B, C = mats()
    api.gemm(A, B, C, level="k2")
    api.gemm(*args, level="k2", **kw)
    assert len(gpu_stub.validated) == 2          # a miss: read and validated again
    A2, B2, C2 = args
    M, K = A2.shape
    N = B2.shape[1]
    alpha, beta = kw.get("alpha", 1.0), kw.get("beta", 0.0)
    got = unpack(gpu_stub.launches[-1]["values"])
    assert got == (M, N, K, alpha, beta, A2.ptr, B2.ptr, C2.ptr)


def test_cache_tells_the_sign_of_a_zero_alpha_apart(gpu_stub):
    # 0.0 == -0.0, but alpha = -0.0 writes -0.0 into C where 0.0 writes +0.0
    api.gemm(*mats(), alpha=0.0, level="k2")
    api.gemm(*mats(), alpha=-0.0, level="k2")
    assert [str(unpack(L["values"])[3]) for L in gpu_stub.launches] == ["0.0", "-0.0"]


def test_cache_tells_devices_apart(gpu_stub):
    api.gemm(*mats(), level="k2")
    on1 = [Tensor(t.shape, ptr=t.ptr, device=1) for t in mats()]     # same pointers, GPU 1
    api.gemm(*on1, level="k2")
    L = gpu_stub.launches[-1]
    assert L["fn"] == 0xF01 and L["ctx"] == 0xC1   # GPU 1's kernel, in GPU 1's context
    assert len(gpu_stub.validated) == 2


def test_cache_never_skips_a_refusal(gpu_stub):
    """Each operand once cached, then changed in a field the checks look at: refused."""
    A, B, C = mats()
    api.gemm(A, B, C, level="k2")
    n = len(gpu_stub.launches)
    with pytest.raises(TypeError, match="dtype"):
        api.gemm(Tensor(A.shape, "torch.float16", A.ptr), Tensor(B.shape, "torch.float16", B.ptr), C,
                 level="k2")
    with pytest.raises(ValueError, match="contiguous"):
        api.gemm(Tensor(A.shape, ptr=A.ptr, strides=(1, 64)), B, C, level="k2")
    with pytest.raises(ValueError, match="overlaps"):
        api.gemm(A, B, Tensor(C.shape, ptr=A.ptr), level="k2")
    with pytest.raises(ValueError, match="one GPU"):
        api.gemm(A, B, Tensor(C.shape, ptr=C.ptr, device=1), level="k2")
    with pytest.raises(ValueError, match="beta"):
        api.gemm(A, B, alpha=1.0, beta=1.0, level="k2")
    with pytest.raises(TypeError, match="alpha"):
        api.gemm(A, B, C, alpha=True, level="k2")
    with pytest.raises(ValueError, match="unknown level"):
        api.gemm(A, B, C, level="k99")
    A.requires_grad = True
    with pytest.raises(TypeError, match="detach"):
        api.gemm(A, B, C, level="k2")
    A.requires_grad, C.neg = False, True
    with pytest.raises(TypeError, match="resolve_neg"):
        api.gemm(A, B, C, level="k2")
    assert len(gpu_stub.launches) == n


def test_a_strided_unit_dimension_is_its_own_entry(gpu_stub):
    # a 1×N matrix may carry any row stride and still be C-contiguous: validated, then keyed
    A, B, C = mats(M=1)
    api.gemm(A, B, C, level="k2")
    api.gemm(Tensor(A.shape, ptr=A.ptr, strides=(999, 1)), B, C, level="k2")
    assert len(gpu_stub.validated) == 2 and len(gpu_stub.launches) == 2


def test_hit_runs_on_the_stream_of_this_call(gpu_stub):
    A, B, C = mats()
    api.gemm(A, B, C, level="k2")
    gpu_stub.state.stream = 0x6000                   # torch's current stream changed
    api.gemm(A, B, C, level="k2")
    api.gemm(A, B, C, level="k2", stream=0x7000)     # an explicit stream
    assert [L["stream"] for L in gpu_stub.launches] == [TORCH_STREAM, 0x6000, 0x7000]
    # the explicit stream first waits for torch's, where the inputs were produced
    assert gpu_stub.waits == [(0x6000, 0x7000)]
    assert len(gpu_stub.validated) == 1


def test_hit_keeps_the_capture_rules(gpu_stub):
    A, B, C = mats()
    api.gemm(A, B, C, level="k2")                    # warmed up outside the capture
    gpu_stub.state.capturing = True                  # torch captures on its current stream
    gpu_stub.capturing.add(TORCH_STREAM)
    with pytest.raises(driver.LaunchError, match="outside the graph"):
        api.gemm(A, B, C, level="k2", stream=0x7000)
    api.gemm(A, B, C, level="k2")                    # on torch's stream: captured
    assert [L["stream"] for L in gpu_stub.launches] == [TORCH_STREAM, TORCH_STREAM]


def test_plan_runs_on_the_stream_of_each_execute(gpu_stub):
    A, B, C = mats()
    p = api.plan(A, B, C, alpha=0.25, level="k2")
    p.execute()
    gpu_stub.state.stream = 0x6000
    p.execute()
    p.execute(stream=0x7000)
    assert [L["stream"] for L in gpu_stub.launches] == [TORCH_STREAM, 0x6000, 0x7000]
    assert gpu_stub.waits == [(0x6000, 0x7000)]
    assert unpack(gpu_stub.launches[0]["values"]) == (64, 64, 64, 0.25, 0.0, A.ptr, B.ptr, C.ptr)


def test_other_libraries_take_the_record_path_keyed_by_strides(gpu_stub, monkeypatch):
    """Operands read through __cuda_array_interface__: the records' key, strides included."""
    monkeypatch.setattr(driver, "pointer_device", lambda ptr: 0)

    class CAI:
        def __init__(self, shape, ptr, strides=None):
            self.__cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (ptr, False),
                                             "strides": strides, "version": 3, "stream": 0x8000}

    A, B, C = CAI((1, 8), 0x1000), CAI((8, 4), 0x2000), CAI((1, 4), 0x3000)
    api.gemm(A, B, C, level="k2")
    api.gemm(A, B, C, level="k2")
    A2 = CAI((1, 8), 0x1000, strides=(4096, 4))      # the same memory, another (legal) stride
    api.gemm(A2, B, C, level="k2")
    assert len(api._launch_cache) == 2 and not api._torch_cache
    assert [L["stream"] for L in gpu_stub.launches] == [0x8000] * 3   # the producers' stream


def test_a_failed_launch_raises_with_the_drivers_reason(gpu_stub, monkeypatch):
    """The bound cuLaunchKernel of a recorded launch: its first launch binds it, later ones call
    it directly; a nonzero CUresult raises LaunchError with the driver's text, every time."""
    A, B, C = mats()
    api.gemm(A, B, C, level="k2")
    api.gemm(A, B, C, level="k2")
    assert len(gpu_stub.launches) == 2
    (L,) = next(iter(api._torch_cache.values())).launches
    monkeypatch.setattr(driver, "error_text", lambda code: f"CUDA_ERROR_{code}: stub")
    gpu_stub.cuLaunchKernel = lambda *a: 719
    L._bound = None                       # bind again, to the failing entry point
    for _ in range(2):
        with pytest.raises(driver.LaunchError, match="cuLaunchKernel failed: CUDA_ERROR_719"):
            api.gemm(A, B, C, level="k2")


def held(*arrays):
    """A recorded launch that holds `arrays` as its workspace (host arrays stand in: only their
    nbytes is read)."""
    return types.SimpleNamespace(held=arrays)


def test_caches_keep_at_most_their_bytes_of_workspace():
    """The caches drop their oldest calls until the workspaces they hold fit HELD_BYTES (a call
    that alone holds more is kept alone), count an array two launches hold once, and still keep
    at most SIZE calls."""
    calls = launch.Calls()
    calls.HELD_BYTES, calls.SIZE = 1000, 4
    shared = np.empty(400, np.uint8)
    calls.remember("a", 1, [held(shared), held(shared)])           # a split's two launches: 400
    calls.remember("b", 2, [held(np.empty(400, np.uint8))])
    assert list(calls.entries) == ["a", "b"] and calls.total == 800
    calls.remember("c", 3, [held(np.empty(300, np.uint8))])        # 1100 > 1000: "a" goes
    assert list(calls.entries) == ["b", "c"] and calls.total == 700
    calls.remember("c", 3, [held(np.empty(300, np.uint8))])        # recorded twice: counted once
    assert calls.total == 700 and len(calls) == 2
    calls.remember("huge", 4, [held(np.empty(1001, np.uint8))])    # kept, alone
    assert list(calls.entries) == ["huge"] and calls.total == 1001
    calls.remember("d", 5, [held(np.empty(1, np.uint8))])          # and the next call drops it
    assert list(calls.entries) == ["d"] and calls.total == 1
    for key in "efgh":
        calls.remember(key, 0, [held()])
    assert list(calls.entries) == ["e", "f", "g", "h"] and calls.total == 0
    assert calls.get("h") == 0 and calls.get("b") is None
    calls.clear()
    assert len(calls) == 0 and calls.total == 0 and calls.get("h") is None


def test_a_captured_call_keeps_its_workspace_for_good(gpu_stub, monkeypatch):
    """A graph may replay a call long after the caches dropped it: a launch submitted while its
    stream captures keeps its workspace in launch._captured; one submitted eagerly does not."""
    monkeypatch.setattr(launch, "_captured", {})
    work, ran = np.empty(64, np.float32), []
    L = types.SimpleNamespace(held=(work,), launch=ran.append)
    sub = api.Submission(0, [L], "torch", None, ((), ()))
    sub.submit()
    assert ran == [TORCH_STREAM] and not launch._captured
    gpu_stub.state.capturing = True
    gpu_stub.capturing.add(TORCH_STREAM)
    sub.submit()
    assert ran == [TORCH_STREAM] * 2 and launch._captured == {id(work): work}


def test_keeping_holds_workspace_but_not_the_callers_operand():
    """A split of one slice writes C in place and passes C's own flat view to `keeping` beside
    its counters: the recorded launch holds (and the caches count) the counters alone, and it
    does not pin the caller's array."""
    C = operands.read(np.ones((4, 8), np.float32), "C")
    counters = np.zeros(16, np.uint32)
    with launch.recording() as rec, launch.keeping((C.reshape(32), counters), None):
        launch._issue(types.SimpleNamespace(keep=None, held=()), None)
    (L,) = rec.launches
    assert [x is counters for x in L.held] == [True] and launch.held_bytes([L]) == counters.nbytes
    assert all(not isinstance(x, operands.Operand) for x in L.keep[1])


class Workspace:
    """A workspace buffer on the stub 'GPU': a device array's interface at a made-up address,
    with the views the SGEMM levels cut from it."""

    def __init__(self, n, dtype, ptr=0x9000_0000, shape=None):
        self.dtype, self.ptr, self.shape = np.dtype(dtype), ptr, shape or (n,)
        self.nbytes = int(np.prod(self.shape)) * self.dtype.itemsize
        self.__cuda_array_interface__ = {"shape": self.shape, "strides": None, "version": 3,
                                         "typestr": self.dtype.str, "data": (ptr, False)}

    def view(self, dtype):
        return Workspace(self.nbytes // np.dtype(dtype).itemsize, dtype, self.ptr)

    def reshape(self, *shape):
        return Workspace(0, self.dtype, self.ptr, shape)

    def __getitem__(self, k):
        return Workspace(k.stop - (k.start or 0), self.dtype, self.ptr + (k.start or 0) * self.dtype.itemsize)


SGEMM_LEVELS = [n for n, lv in registry.registry().items() if lv.family == "sgemm"]


@pytest.mark.parametrize("level", SGEMM_LEVELS)
def test_every_sgemm_level_records_its_call_into_the_caches(gpu_stub, monkeypatch, level):
    """Each Numba level's call at the shapes it takes (one-slice splits, ragged borders, split
    plans) is recorded once and replayed from the caches, whose launches hold (and count) only
    workspace: a split of one slice hands C's own view to `keeping`, where held_bytes once met
    the caller's operand on a GPU."""
    monkeypatch.setattr(workspace, "_buffer", lambda c, n, dtype, tag="", zeroed=False: Workspace(n, dtype))
    ran = 0
    for M, N, K in ((1, 1, 1), (4, 64, 1024), (129, 4, 5), (130, 202, 73), (128, 4096, 4096)):
        A, B, C = Tensor((M, K), ptr=1 << 40), Tensor((K, N), ptr=2 << 40), Tensor((M, N), ptr=3 << 40)
        before = len(gpu_stub.launches)
        try:
            api.gemm(A, B, C, level=level)
        except ValueError:              # a shape the level refuses
            continue
        ran, first, validated = ran + 1, len(gpu_stub.launches), len(gpu_stub.validated)
        api.gemm(A, B, C, level=level)
        assert len(gpu_stub.validated) == validated            # the second call was a cache hit
        assert len(gpu_stub.launches) - first == first - before > 0
        held = [x for sub in api._torch_cache.values() for L in sub.launches for x in L.held]
        assert all(isinstance(x, Workspace) for x in held)     # workspace only, no operand
        assert api._torch_cache.total == launch.held_bytes(L for sub in api._torch_cache.values()
                                                           for L in sub.launches)
    assert ran, f"{level} took none of the shapes"
