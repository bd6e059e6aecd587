"""Operand records: DLPack (NumPy's export, and a hand-built CUDA capsule), __cuda_array_interface__
(fake producers), torch's accessors (a stand-in), NumPy. All on the CPU."""
import ctypes

import numpy as np
import pytest

from numba_gemm.runtime import driver, launch, operands
from numba_gemm.runtime.operands import BFLOAT16, HOST, Operand


class DLPackOnly:
    """Exposes only NumPy's DLPack export, so the DLPack reader (not the NumPy one) runs."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_numpy_dlpack_host_record():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    r = operands.read(DLPackOnly(a), "A")
    assert (r.ptr, r.shape, r.dtype, r.device) == (a.ctypes.data, (3, 4), np.float32, HOST)
    assert r.contiguous and not r.readonly
    assert np.shares_memory(r.host, a)


def test_numpy_dlpack_strides_and_read_only():
    a = np.zeros((4, 6), np.float16)
    a.flags.writeable = False
    r = operands.read(DLPackOnly(a[:, ::2]), "A")
    assert r.shape == (4, 3) and r.strides == (6, 2) and not r.contiguous
    assert r.readonly               # the DLPack 1.x flag (NumPy >= 2.1 exports versioned capsules)


def test_numpy_reader_keeps_bfloat16():
    a = np.ones((2, 3), BFLOAT16)
    r = operands.read(a, "A")
    assert r.dtype == BFLOAT16 and r.device == HOST and r.host is a


def test_contiguity_ignores_unit_dims():
    assert Operand(0, (1, 5), (99, 1), np.dtype(np.float32), 0, "x", None).contiguous
    assert not Operand(0, (2, 5), (6, 1), np.dtype(np.float32), 0, "x", None).contiguous
    with pytest.raises(ValueError):
        Operand(0, (2, 5), (6, 1), np.dtype(np.float32), 0, "x", None).reshape(10)


def test_contiguous_views_reshape_and_cut_flat_ranges():
    """What the SGEMM launches take of a record: a flat or 2-D view, and [a:b] of a flat one
    (k8e's B rows and C rows where they lie), with the pointer moved by a's bytes."""
    op = Operand(4096, (3, 4), None, np.dtype(np.float32), 0, "x", None)
    v = op.reshape(12)[4:12].reshape(2, 4)
    assert (v.ptr, v.shape, v.contiguous) == (4096 + 16, (2, 4), True)
    assert op.reshape(12)[:8].ptr == 4096 and op.reshape(4, 3).shape == (4, 3)
    for bad in (slice(0, 13), slice(5, 4), slice(0, 8, 2), 3):
        with pytest.raises(TypeError):
            op.reshape(12)[bad]
    with pytest.raises(TypeError):
        op[0:1]                                   # only flat views are cut
    with pytest.raises(ValueError):
        op.reshape(5, 3)


# --- a CUDA-device DLPack producer, with a capsule built by hand (no GPU needed to parse it)

class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _Versioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p), ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_new_capsule = ctypes.pythonapi.PyCapsule_New
_new_capsule.restype = ctypes.py_object
_new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeCudaTensor:
    """Looks like a CUDA bf16 tensor on GPU 1 to a DLPack consumer; records the stream it is given."""

    def __init__(self, shape, strides=None, code=4, bits=16, versioned=True, flags=0, ptr=0x7F0000001000):
        self.shape_arr = (ctypes.c_int64 * len(shape))(*shape)
        self.strides_arr = (ctypes.c_int64 * len(shape))(*strides) if strides else None
        t = _DLTensor(ptr, 2, 1, len(shape), code, bits, 1, self.shape_arr,
                      self.strides_arr if strides else None, 64)
        self.versioned = versioned
        self.holder = _Versioned(1, 0, None, None, flags, t) if versioned else t
        self.streams = []

    def __dlpack_device__(self):
        return (2, 1)

    def __dlpack__(self, stream=None, max_version=None):
        self.streams.append(stream)
        if self.versioned and max_version is not None:
            return _new_capsule(ctypes.addressof(self.holder), b"dltensor_versioned", None)
        return _new_capsule(ctypes.addressof(self.holder), b"dltensor", None)


def test_dlpack_cuda_bf16_record_and_stream_argument():
    x = FakeCudaTensor((3, 5), strides=(5, 1), flags=1)
    r = operands.read(x, "A", stream=0)
    assert r.dtype == BFLOAT16 and r.shape == (3, 5) and r.strides == (5, 1)
    assert r.device == 1 and r.ptr == 0x7F0000001000 + 64 and r.readonly
    assert r.library == "test_operands" and r.obj is x
    assert x.streams == [1]          # the legacy stream is 1 in DLPack's stream argument
    assert r.stream == 0             # ... and the producer has ordered its work before it
    operands.read(x, "A", stream=0x1234)
    assert x.streams[-1] == 0x1234
    cai = r.__cuda_array_interface__
    assert cai["data"] == (r.ptr, True) and cai["shape"] == (3, 5)


def test_dlpack_unversioned_and_no_strides_means_contiguous():
    r = operands.read(FakeCudaTensor((4, 2), code=2, bits=32, versioned=False), "B", stream=0)
    assert r.dtype == np.float32 and r.strides is None and r.contiguous and not r.readonly


def test_dlpack_default_stream_of_an_unknown_library_is_legacy():
    x = FakeCudaTensor((2, 2))
    assert operands.read(x, "A").stream == 0 and x.streams == [1]


def test_dlpack_odd_types_refused():
    with pytest.raises(TypeError, match="dtype code"):
        operands.read(FakeCudaTensor((2, 2), code=5, bits=64), "A", stream=0)


# --- __cuda_array_interface__ producers

class FakeCAI:
    """A device array seen only through __cuda_array_interface__, counting evaluations."""

    def __init__(self, typestr="<f4", shape=(4, 3), strides=None, stream=None, ptr=0x1000):
        self.iface = {"shape": shape, "strides": strides, "typestr": typestr,
                      "data": (ptr, False), "version": 3, "stream": stream}
        self.evaluations = 0

    @property
    def __cuda_array_interface__(self):
        self.evaluations += 1
        return self.iface


@pytest.fixture
def device_of_pointer(monkeypatch):
    monkeypatch.setattr(driver, "pointer_device", lambda ptr: 3)


def test_cai_read_once(device_of_pointer):
    x = FakeCAI(strides=(12, 4), stream=1)
    r = operands.read(x, "A")
    assert x.evaluations == 1        # a property costs microseconds each time (torch's does)
    assert (r.ptr, r.shape, r.strides, r.dtype, r.device) == (0x1000, (4, 3), (3, 1), np.float32, 3)
    assert r.stream == 0             # CAI's 1 is the legacy default stream


def test_cai_bfloat16_refused_with_a_pointer_to_dlpack(device_of_pointer):
    with pytest.raises(TypeError, match="DLPack"):
        operands.read(FakeCAI(typestr="<V2"), "A")


def test_cai_strides_not_whole_elements(device_of_pointer):
    with pytest.raises(ValueError, match="stride"):
        operands.read(FakeCAI(strides=(13, 4)), "A")


# --- torch tensors through their accessors (a stand-in with torch's method names)

class FakeTorchTensor:
    __module__ = "torch"

    def __init__(self, dtype="torch.bfloat16", device=0, requires_grad=False, neg=False):
        self.dtype, self.device_index, self.requires_grad, self.neg = dtype, device, requires_grad, neg
        self.shape = (6, 7)

    def data_ptr(self):
        return 0xABC00

    def stride(self):
        return (7, 1)

    def get_device(self):
        return self.device_index

    def is_neg(self):
        return self.neg


def test_torch_accessors():
    r = operands.read(FakeTorchTensor(), "A")
    assert (r.ptr, r.shape, r.strides, r.dtype, r.device, r.library) == \
        (0xABC00, (6, 7), (7, 1), BFLOAT16, 0, "torch")
    assert r.stream is None          # torch's work is on torch's current stream


def test_torch_requires_grad_refused():
    with pytest.raises(TypeError, match="detach"):
        operands.read(FakeTorchTensor(requires_grad=True), "B")


def test_torch_negative_bit_view_refused():
    # its memory holds the negation of its values: reading the memory would flip every sign
    with pytest.raises(TypeError, match="resolve_neg"):
        operands.read(FakeTorchTensor(neg=True), "A")


def test_not_an_array_names_the_argument():
    with pytest.raises(TypeError, match="^C: expected"):
        operands.read([[1.0]], "C")


# --- streams

class CudaStreamProtocol:
    def __cuda_stream__(self):
        return (0, 0x55)


class TorchLikeStream:
    cuda_stream = 0x66


class NumbaLikeStream:
    handle = ctypes.c_void_p(0x77)


def test_stream_handles():
    assert driver.stream_handle(CudaStreamProtocol()) == 0x55
    assert driver.stream_handle(TorchLikeStream()) == 0x66
    assert driver.stream_handle(NumbaLikeStream()) == 0x77
    assert driver.stream_handle(0) == 0 and driver.stream_handle(0x99) == 0x99
    for bad in (True, "s", 1.5):
        with pytest.raises(TypeError):
            driver.stream_handle(bad)
    with pytest.raises(ValueError):
        driver.stream_handle(-1)


def test_numba_flattened_layout():
    """Numba's ABI for an array argument: meminfo, parent, nitems, itemsize, data, shape, strides."""
    from numba import float32, int32

    layout, offsets = launch._layout((int32, float32[::1], float32))
    assert layout.format.lstrip("@") == "iPPnnPnnf"
    assert offsets == [0, 8, 16, 24, 32, 40, 48, 56, 64]


def test_flattened_layout_matches_the_ptx_entry():
    """The fast launch passes one parameter per PTX .param of the kernel Numba compiled: the
    sizes must match. Every SGEMM kernel has the one signature of sgemm._common; k1 is compiled
    in a child process with the simulator off (no GPU needed)."""
    import os
    import re
    import struct
    import subprocess
    import sys

    from numba_gemm.sgemm._common import SIGNATURE

    code = ("from numba import cuda\n"
            "from numba_gemm.sgemm import k1_naive as k\n"
            "print(cuda.compile_ptx(k.kernel.py_func, k.SIGNATURE, cc=(9, 0))[0])\n")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    entry = res.stdout[res.stdout.index(".entry"):]
    params = re.findall(r"\.param \.(\w+)", entry[:entry.index(")")])
    layout, _ = launch._layout(tuple(SIGNATURE))
    ours = [struct.calcsize(c) for c in layout.format.lstrip("@")]
    assert ours == [int(p[1:]) // 8 for p in params]            # u32/f32 -> 4 bytes, u64 -> 8
    assert len(params) == 4 + 3 * 7 + 1                          # 7 per 1-D array argument


# --- what a recorded launch carries (driver calls replaced: no GPU needed)

def _f32_record(ptr, shape):
    return Operand(ptr, shape, None, np.dtype(np.float32), 0, "test", None)


def test_recorded_numba_launch_carries_the_flattened_arguments(monkeypatch):
    import types as pytypes

    from numba import cuda

    from numba_gemm.runtime import gpu
    from numba_gemm.sgemm import k1_naive as k1

    monkeypatch.setattr(gpu, "simulating", lambda: False)
    monkeypatch.setattr(cuda, "get_current_device", lambda: pytypes.SimpleNamespace(id=0), raising=False)
    monkeypatch.setattr(launch, "_numba_function", lambda d, t, dev: (0x1234, launch._layout(t), None))
    M, N, K = 5, 6, 7
    a, b, c = _f32_record(0x1000, (M, K)), _f32_record(0x2000, (K, N)), _f32_record(0x3000, (M, N))
    with launch.recording() as rec:
        k1.run(a, b, c, 0.5, -1.5)
    (L,) = rec.launches
    assert L.fn == 0x1234 and L.grid == k1.grid(M, N) + (1,) and L.block == k1.BLOCK + (1,) and L.smem == 0
    layout, offsets = launch._layout(tuple(k1.SIGNATURE))
    base = ctypes.addressof(L.keep)
    assert [L.params[i] - base for i in range(len(offsets))] == offsets
    vals = layout.unpack(L.keep.raw[:layout.size])
    flat = lambda ptr, n: [0, 0, n, 4, ptr, n, 4]           # meminfo, parent, nitems, itemsize, data, shape, stride
    assert list(vals) == [M, N, K, 0.5] + flat(0x1000, M * K) + flat(0x2000, K * N) + [-1.5] + flat(0x3000, M * N)


def test_recorded_native_launch_carries_its_arguments(monkeypatch):
    from numba_gemm.hgemm import v8_mma as v8
    from numba_gemm.runtime import nvrtc

    monkeypatch.setattr(nvrtc, "function", lambda *a, **k: 0x99)
    monkeypatch.setattr(driver, "allow_dynamic_smem", lambda fn, smem: None)
    M, N, K = 100, 72, 40
    h = lambda ptr, shape: Operand(ptr, shape, None, np.dtype(np.float16), 0, "test", None)
    a, b, c = h(0x10000, (M, K)), h(0x20000, (K, N)), _f32_record(0x30000, (M, N))
    with launch.recording() as rec:
        v8.run(a, b, c, 2.0, 0.0)
    (L,) = rec.launches
    grid, block, smem = v8.launch_config(M, N, K)
    assert (L.fn, L.grid, L.block, L.smem) == (0x99, grid, block, smem)
    expected = v8.cm.cp_async_args(a, b, c, 2.0, 0.0, v8.cm.vec_c(c.ptr, N))
    got = [type(e).from_address(L.params[i]).value for i, e in enumerate(expected)]
    assert got == [e.value for e in expected]
    assert got[:3] == [0x10000, 0x20000, 0x30000]


def test_cluster_launch_of_v13_is_recorded_not_issued(monkeypatch):
    """v13 launches clusters (cuLaunchKernelEx): through launch_native, so it is recorded too."""
    from numba_gemm.hgemm import _wgmma, v13_persistent as v13
    from numba_gemm.runtime import nvrtc, tma

    monkeypatch.setattr(nvrtc, "function", lambda *a, **k: 0x77)
    monkeypatch.setattr(driver, "allow_dynamic_smem", lambda fn, smem: None)
    monkeypatch.setattr(v13, "resident_clusters", lambda *a, **k: 66)
    monkeypatch.setattr(v13.cm, "l2_cache_bytes", lambda: 60 * 2**20)
    monkeypatch.setattr(_wgmma, "maps_and_args", lambda *a, **k: [ctypes.c_int32(i) for i in range(6)])
    monkeypatch.setattr(tma, "cached_matrix_map", lambda *a, **k: ctypes.c_int64(0x5EC))   # C's map
    h = lambda ptr, shape: Operand(ptr, shape, None, np.dtype(np.float16), 0, "test", None)
    M, N, K = 512, 512, 256
    with launch.recording() as rec:
        v13.run(h(0x10000, (M, K)), h(0x20000, (K, N)), _f32_record(0x30000, (M, N)), 1.0, 0.0)
    (L,) = rec.launches
    assert L.fn == 0x77 and L.cluster == v13.CLUSTER and L.grid[0] % v13.CLUSTER == 0


@pytest.mark.parametrize("c_ptr, beta, tma_c", [(0x30000, 0.0, 1), (0x30008, 0.0, 0), (0x30000, 2.0, 0)])
def test_v13_tma_store_epilogue_only_where_tma_can_store(monkeypatch, c_ptr, beta, tma_c):
    """v13's TMA-store epilogue (tma_store=1) gets C's map and tma_c = 1 only for beta == 0 and a
    16-byte aligned C; otherwise the kernel's register epilogue (tma_c = 0, a stand-in map)."""
    from numba_gemm.hgemm import _wgmma, v13_persistent as v13
    from numba_gemm.runtime import nvrtc, tma

    monkeypatch.setattr(nvrtc, "function", lambda *a, **k: 0x77)
    monkeypatch.setattr(driver, "allow_dynamic_smem", lambda fn, smem: None)
    monkeypatch.setattr(v13, "resident_clusters", lambda *a, **k: 66)
    monkeypatch.setattr(v13.cm, "l2_cache_bytes", lambda: 60 * 2**20)
    maps = []
    monkeypatch.setattr(tma, "cached_matrix_map", lambda *a, **k: maps.append(a) or ctypes.c_int64(0x5EC))
    monkeypatch.setattr(_wgmma, "maps_and_args", lambda *a, **k: [ctypes.c_int64(0xA), ctypes.c_int64(0xB)]
                        + [ctypes.c_int32(i) for i in range(9)])
    h = lambda ptr, shape: Operand(ptr, shape, None, np.dtype(np.float16), 0, "test", None)
    M, N, K = 512, 520, 256
    with launch.recording() as rec:
        v13.run(h(0x10000, (M, K)), h(0x20000, (K, N)), _f32_record(c_ptr, (M, N)), 1.0, beta, tma_store=1)
    (L,) = rec.launches
    third = ctypes.c_int64.from_address(L.params[2]).value
    assert third == (0x5EC if tma_c else 0xA)
    assert ctypes.c_int32.from_address(L.params[-1]).value == tma_c
    assert L.smem == v13.smem_bytes(1) == v13.CONFIG.smem() + 4 * 64 * 128
    assert maps == ([(np.float32, c_ptr, M, N, (64, 32))] if tma_c else [])


def test_keeping_holds_an_object_in_each_launch_and_passes_them_on():
    """Launches made under launch.keeping(obj) carry obj in `keep` and reach the outer
    recording in order; nothing is issued when the block raises."""
    from numba_gemm.runtime import launch

    workspace = object()
    with launch.recording() as outer:
        with launch.keeping(workspace, 0):
            for fn in (0x10, 0x20):
                launch._issue(launch.Launch(fn, (1,), (32,), 0, None, b"args"), 0)
            assert outer.launches == []                    # held until the block ends
    assert [L.fn for L in outer.launches] == [0x10, 0x20]
    assert all(L.keep == (b"args", (workspace,)) and L.held == (workspace,) for L in outer.launches)
    with launch.recording() as outer:
        with pytest.raises(RuntimeError):
            with launch.keeping(workspace, 0):
                launch._issue(launch.Launch(0x30, (1,), (32,), 0, None, b"args"), 0)
                raise RuntimeError("refused")
    assert outer.launches == []
