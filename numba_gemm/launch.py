"""Kernel launches from cached handles: Numba kernels without Numba's per-call dispatch, native
kernels from raw pointers; streams, contexts and CUDA graph capture.

Why: a Numba launch costs ~48 µs of host time (typing every argument, wrapping arrays, the
launch configuration objects), cuLaunchKernel itself a few. Here a Numba kernel is compiled
once per argument-type signature (Numba's own compile, the kernels unchanged), its function
handle fetched once per device, and each launch is one cuLaunchKernel with the parameters
flattened as Numba's ABI expects for an array argument:

    meminfo (void*), parent (void*), nitems (intp), itemsize (intp), data (void*),
    shape[ndim] (intp), strides[ndim] (intp, bytes)

(numba.cuda.dispatcher._Kernel._prepare_args; scalars are passed by value). Native kernels
(numba_gemm.nvrtc) pass ctypes values the same way.

`recording()` collects the launches a level's run() would make, as Launch objects, instead of
issuing them: gemm() caches them by everything run() reads (level, shapes, dtypes, pointers,
alpha, beta, device) and plan() keeps them, so a repeated call is one cuLaunchKernel per
launch. In the Numba CUDA simulator, Numba kernels go through Numba as usual.

Driver calls on the launch path go to libcuda through ctypes (cheaper per call than the
generated bindings); compiling and loading stay in numba and numba_gemm.nvrtc.
"""
from __future__ import annotations

import ctypes
import struct
import sys
import threading


class LaunchError(RuntimeError):
    """A CUDA driver call on the launch path failed, or a launch would be wrong (capture)."""


# ---------------------------------------------------------------------------- libcuda

_lib = None


def _cuda():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        v, i, u, p = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.POINTER
        sig = {
            "cuInit": [u],
            # cuLaunchKernel has no argtypes: Launch passes ctypes values it built once
            # (converting 11 Python ints through argtypes costs ~0.5 µs per launch)
            "cuStreamIsCapturing": [v, p(i)],
            "cuPointerGetAttribute": [v, i, ctypes.c_uint64],
            "cuCtxGetCurrent": [p(v)],
            "cuCtxPushCurrent_v2": [v],
            "cuCtxPopCurrent_v2": [p(v)],
            "cuDevicePrimaryCtxRetain": [p(v), i],
            "cuDeviceGet": [p(i), i],
            "cuEventCreate": [p(v), u],
            "cuEventRecord": [v, v],
            "cuStreamWaitEvent": [v, v, u],
            "cuGetErrorName": [i, p(ctypes.c_char_p)],
            "cuGetErrorString": [i, p(ctypes.c_char_p)],
        }
        for name, args in sig.items():
            f = getattr(lib, name)
            f.argtypes, f.restype = args, ctypes.c_int
        _ok(lib.cuInit(0), "cuInit")
        _lib = lib
    return _lib


CAPTURE_IMPLICIT = 906     # CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
OUT_OF_MEMORY = 2          # CUDA_ERROR_OUT_OF_MEMORY


def error_text(code: int) -> str:
    lib = _cuda()
    name, desc = ctypes.c_char_p(), ctypes.c_char_p()
    lib.cuGetErrorName(code, ctypes.byref(name))
    lib.cuGetErrorString(code, ctypes.byref(desc))
    return f"{(name.value or b'?').decode()}: {(desc.value or b'?').decode()}"


def _ok(code: int, what: str):
    if code:
        raise LaunchError(f"{what} failed: {error_text(code)}")


# ---------------------------------------------------------------------------- streams

def stream_handle(stream) -> int:
    """The driver handle of `stream`: an object with __cuda_stream__ (cuda.core, recent torch
    and CuPy), a torch stream (.cuda_stream), a CuPy stream (.ptr), a Numba or cuda.bindings
    stream (.handle), or a raw handle int (0: the legacy default stream)."""
    if isinstance(stream, bool):
        raise TypeError("stream must be a stream object or a raw handle int, not a bool")
    if isinstance(stream, int):
        if stream < 0:
            raise ValueError(f"stream handle must be >= 0, got {stream}")
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        _, h = proto() if callable(proto) else proto
        return int(h)
    for attr in ("cuda_stream", "ptr"):
        h = getattr(stream, attr, None)
        if isinstance(h, int):
            return h
    h = getattr(stream, "handle", None)
    if h is not None:
        if isinstance(h, ctypes.c_void_p):
            return h.value or 0
        return int(h)
    raise TypeError(
        f"stream must have __cuda_stream__, be a torch/CuPy/Numba stream or a raw handle int; "
        f"got {type(stream).__name__}"
    )


def current_stream(library: str, device: int) -> int:
    """The stream `library` considers current on `device` (where its pending work is ordered):
    torch's and CuPy's current stream; Numba's default stream; the legacy stream otherwise."""
    if library == "torch":
        torch = sys.modules["torch"]
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        # the raw form is what torch's own compiled kernels use: one C call, no Stream object
        return int(raw(device)) if raw is not None else int(torch.cuda.current_stream(device).cuda_stream)
    if library == "cupy":
        import cupy

        with cupy.cuda.Device(device):
            return int(cupy.cuda.get_current_stream().ptr)
    if library == "numba":
        from numba.core import config

        return 2 if config.CUDA_PER_THREAD_DEFAULT_STREAM else 0
    return 0


def is_capturing(stream: int) -> bool:
    """True while `stream` is being captured into a CUDA graph. Raises LaunchError when a launch
    there would break another stream's capture (the legacy stream during a global capture)."""
    status = ctypes.c_int()
    code = _cuda().cuStreamIsCapturing(stream or None, status)     # ctypes passes it by reference
    if code == CAPTURE_IMPLICIT:
        raise LaunchError(
            "a CUDA graph is being captured on another stream and this call would run on the "
            "legacy default stream, which the capture forbids: pass stream= the capturing "
            "stream (for torch tensors, omit stream to use torch's current stream)"
        )
    _ok(code, "cuStreamIsCapturing")
    return status.value == 1     # CU_STREAM_CAPTURE_STATUS_ACTIVE


def refuse_if_library_capturing(library: str, device: int, stream: int) -> None:
    """The producer library is capturing a graph on its current stream and `stream` is another,
    non-capturing one: launching there would run eagerly, outside the graph (a stale replay)."""
    if library == "torch":
        torch = sys.modules["torch"]
        capturing = torch.cuda.is_current_stream_capturing()
    elif library == "cupy":
        import cupy

        with cupy.cuda.Device(device):
            capturing = cupy.cuda.get_current_stream().is_capturing()
    else:
        return
    if capturing and current_stream(library, device) != stream:
        raise LaunchError(
            f"{library} is capturing a CUDA graph on its current stream, but this call was given "
            f"stream {stream:#x}, which is not capturing: the kernel would run now, outside the "
            "graph. Omit stream= (or pass the capturing stream) to have it captured."
        )


_events: dict = {}


def wait(stream: int, producer: int, device: int) -> None:
    """Order `stream` after the work queued so far on `producer` (an event, no host wait)."""
    ev = _events.get(device)
    if ev is None:
        h = ctypes.c_void_p()
        _ok(_cuda().cuEventCreate(ctypes.byref(h), 2), "cuEventCreate")   # DISABLE_TIMING
        ev = _events[device] = h.value
    _ok(_cuda().cuEventRecord(ev, producer or None), "cuEventRecord")
    _ok(_cuda().cuStreamWaitEvent(stream or None, ev, 0), "cuStreamWaitEvent")


# ---------------------------------------------------------------------------- devices

def pointer_device(ptr: int) -> int:
    """CUDA ordinal of the device that owns device pointer `ptr`."""
    ordinal = ctypes.c_int()
    code = _cuda().cuPointerGetAttribute(ctypes.byref(ordinal), 9, ptr)  # DEVICE_ORDINAL
    if code:
        raise TypeError(f"pointer {ptr:#x} is not CUDA device memory ({error_text(code)})")
    return ordinal.value


_primary: dict = {}


def primary_context(device: int) -> int:
    ctx = _primary.get(device)
    if ctx is None:
        lib = _cuda()
        dev, h = ctypes.c_int(), ctypes.c_void_p()
        _ok(lib.cuDeviceGet(ctypes.byref(dev), device), f"cuDeviceGet({device})")
        _ok(lib.cuDevicePrimaryCtxRetain(ctypes.byref(h), dev), "cuDevicePrimaryCtxRetain")
        ctx = _primary[device] = h.value
    return ctx


class on_device:
    """Make `device`'s primary context current for a block (push/pop only when it is not)."""

    __slots__ = ("ctx", "pushed")

    def __init__(self, device: int):
        self.ctx = _primary.get(device) or primary_context(device)
        self.pushed = False

    def __enter__(self):
        cur = ctypes.c_void_p()
        _cuda().cuCtxGetCurrent(cur)        # ctypes passes it by reference
        if cur.value != self.ctx:
            _ok(_cuda().cuCtxPushCurrent_v2(self.ctx), "cuCtxPushCurrent")
            self.pushed = True
        return self

    def __exit__(self, *exc):
        if self.pushed:
            _cuda().cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))


# ---------------------------------------------------------------------------- launches

class Launch:
    """One prepared kernel launch: function handle, grid, block, dynamic shared memory, the
    parameter pointer array (with the objects it points into kept alive) and, for a cluster
    launch, the cluster size along x."""

    __slots__ = ("fn", "grid", "block", "smem", "params", "keep", "cluster", "_config", "_head")

    def __init__(self, fn: int, grid, block, smem: int, params, keep, cluster: int | None = None):
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        self.fn, self.grid, self.block, self.smem = fn, g, b, int(smem)
        self.params, self.keep, self.cluster, self._config = params, keep, cluster, None
        # cuLaunchKernel's arguments before the stream, as the C types it takes (see _cuda)
        self._head = (ctypes.c_void_p(fn), *map(ctypes.c_uint, g + b), ctypes.c_uint(self.smem))

    def __call__(self, stream: int) -> None:
        if self.cluster:
            return self._launch_cluster(stream)
        code = _cuda().cuLaunchKernel(*self._head, ctypes.c_void_p(stream) if stream else None,
                                      self.params, None)
        if code:
            raise LaunchError(f"cuLaunchKernel failed: {error_text(code)}")

    def _launch_cluster(self, stream: int) -> None:
        # cuLaunchKernelEx with the cluster-dimension attribute (the generated bindings build
        # the CUlaunchConfig once; only its stream changes between calls, under a lock so that
        # two threads launching this Launch cannot swap streams)
        from cuda.bindings import driver as drv

        if self._config is None:
            cfg = drv.CUlaunchConfig()
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = self.grid
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = self.block
            cfg.sharedMemBytes = self.smem
            attr = drv.CUlaunchAttribute()
            attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = self.cluster, 1, 1
            cfg.attrs = [attr]
            cfg.numAttrs = 1
            self._config = (cfg, drv.CUfunction(self.fn), ctypes.addressof(self.params))
        cfg, fn, params = self._config
        with _cluster_lock:
            cfg.hStream = drv.CUstream(stream)
            (err,) = drv.cuLaunchKernelEx(cfg, fn, params, 0)
        if err != drv.CUresult.CUDA_SUCCESS:
            raise LaunchError(f"cuLaunchKernelEx failed: {error_text(int(err))}")


_cluster_lock = threading.Lock()
_tls = threading.local()


class recording:
    """Within this block, launch_native/launch_numba collect Launch objects into .launches
    instead of launching (thread-local)."""

    def __enter__(self):
        self.outer = getattr(_tls, "record", None)
        self.launches = []
        _tls.record = self.launches
        return self

    def __exit__(self, *exc):
        _tls.record = self.outer


class keeping:
    """Launches made within this block hold `obj` as well (e.g. a workspace their arguments
    point into), for as long as they live: gemm() and plan() replay recorded launches long
    after the call that made them. They are issued (or recorded by an outer `recording`) when
    the block ends."""

    def __init__(self, obj, stream):
        self.obj, self.stream, self.rec = obj, stream, recording()

    def __enter__(self):
        self.rec.__enter__()
        return self

    def __exit__(self, *exc):
        self.rec.__exit__(*exc)
        if exc[0] is None:
            for L in self.rec.launches:
                L.keep = (L.keep, self.obj)
                _issue(L, self.stream)


def _issue(launch: Launch, stream) -> None:
    rec = getattr(_tls, "record", None)
    if rec is not None:
        rec.append(launch)
    else:
        launch(stream_handle(stream) if stream is not None else 0)


def launch_native(fn, grid, block, smem: int, stream, args, cluster: int | None = None) -> None:
    """A native kernel (a cuda.bindings CUfunction) with `args`: ctypes values, or objects with
    getPtr() (a CUtensorMap), in parameter order; `cluster`: CTAs per cluster along x."""
    params = (ctypes.c_void_p * max(1, len(args)))(
        *[a.getPtr() if hasattr(a, "getPtr") else ctypes.addressof(a) for a in args]
    )
    _issue(Launch(int(fn), grid, block, smem, params, list(args), cluster), stream)


# Numba levels ------------------------------------------------------------------

_numba_kernels: dict = {}   # (dispatcher, argument types, device) -> (function handle, layout)


def _numba_types(args):
    from numba import typeof, types
    from numba.np.numpy_support import from_dtype

    from .operands import Operand

    out = []
    for a in args:
        if isinstance(a, Operand):
            out.append(types.Array(from_dtype(a.dtype), len(a.shape), "C" if a.contiguous else "A"))
        else:
            out.append(typeof(a))
    return tuple(out)


def _layout(argtypes):
    """struct format of the flattened parameters, with each one's offset (natural alignment)."""
    from numba import types

    codes = []
    for t in argtypes:
        if isinstance(t, types.Array):
            codes += ["P", "P", "n", "n", "P"] + ["n"] * (2 * t.ndim)
        elif isinstance(t, types.Integer):
            codes.append({(8, True): "b", (8, False): "B", (16, True): "h", (16, False): "H",
                          (32, True): "i", (32, False): "I", (64, True): "q", (64, False): "Q"}
                         [t.bitwidth, t.signed])
        elif t == types.float32:
            codes.append("f")
        elif t == types.float64:
            codes.append("d")
        else:
            raise NotImplementedError(f"no fast launch for a {t} argument")
    offsets = [struct.calcsize("@" + "".join(codes[:i + 1])) - struct.calcsize(c)
               for i, c in enumerate(codes)]
    return struct.Struct("@" + "".join(codes)), offsets


def _array_fields(a):
    """(nitems, itemsize, data pointer, shape, byte strides) of an Operand or a Numba device array."""
    from .operands import Operand

    if isinstance(a, Operand):
        item = a.dtype.itemsize
        shape = a.shape
        if a.strides is None:
            strides, step = [], item
            for n in reversed(shape):
                strides.append(step)
                step *= n
            strides = tuple(reversed(strides))
        else:
            strides = tuple(s * item for s in a.strides)
        return a.size, item, a.ptr, shape, strides
    cai = a.__cuda_array_interface__
    ptr = cai["data"][0]
    item = a.dtype.itemsize
    return a.size, item, ptr, tuple(a.shape), tuple(a.strides)


def _numba_function(dispatcher, argtypes, device: int):
    key = (dispatcher, argtypes, device)
    hit = _numba_kernels.get(key)
    if hit is None:
        kernel = dispatcher.compile(argtypes)
        if getattr(kernel, "debug", False) or getattr(kernel, "extensions", None) or \
                getattr(kernel, "cooperative", False):
            return None                       # Numba's own launch handles these
        handle = kernel._codelibrary.get_cufunc().handle
        fn = handle.value if isinstance(handle, ctypes.c_void_p) else int(handle)
        hit = _numba_kernels[key] = (fn, _layout(argtypes), kernel)
    return hit


def launch_numba(dispatcher, grid, block, args, stream=None) -> None:
    """dispatcher[grid, block, stream](*args), through a cached handle unless simulating."""
    from . import gpu

    if gpu.simulating():
        if stream is None:
            dispatcher[grid, block](*args)
        else:
            dispatcher[grid, block, stream](*args)
        return
    from numba import cuda

    argtypes = _numba_types(args)
    device = cuda.get_current_device().id
    hit = _numba_function(dispatcher, argtypes, device)
    if hit is None:
        if getattr(_tls, "record", None) is not None:
            raise LaunchError(f"{dispatcher.__name__}: a debug/cooperative Numba kernel cannot be recorded")
        dispatcher[grid, block, 0 if stream is None else stream](*args)
        return
    from numba import types

    fn, (layout, offsets), _ = hit
    values = []
    for t, a in zip(argtypes, args):
        if isinstance(t, types.Array):
            nitems, item, ptr, shape, strides = _array_fields(a)
            values += [0, 0, nitems, item, ptr, *shape, *strides]
        else:
            values.append(a.item() if hasattr(a, "item") else a)
    buf = ctypes.create_string_buffer(layout.size)
    layout.pack_into(buf, 0, *values)
    base = ctypes.addressof(buf)
    params = (ctypes.c_void_p * len(offsets))(*[base + o for o in offsets])
    _issue(Launch(fn, grid, block, 0, params, buf), stream)
