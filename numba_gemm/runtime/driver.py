"""The CUDA driver, in one place: errors, contexts, streams, events, device attributes,
occupancy, and the two kernel launch calls, each bound once per Launch so that a launch is one
C call: cuLaunchKernel, and cuLaunchKernelEx for clusters and programmatic dependent launches.

Two bindings, each where it is cheaper:
  - the per-call path (launches and their configurations, stream and capture queries, events,
    contexts) goes to libcuda through ctypes: cheaper per call than the generated bindings;
  - set-up calls made once per kernel or device (module loads, attributes, block occupancy)
    use cuda.bindings, whose results `check` unpacks; cluster occupancy takes the launch's
    ctypes configuration.

Nothing here imports the rest of the package: operands, launch, nvrtc and the levels import it.
"""
from __future__ import annotations

import ctypes
import functools
import sys
import threading


class DriverError(RuntimeError):
    """A CUDA driver call failed."""


class LaunchError(DriverError):
    """A launch failed, or would be wrong (a CUDA graph capture it would break or miss)."""


# ---------------------------------------------------------------------------- libcuda (ctypes)

_lib = None


def _cuda():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        v, i, u, p = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint, ctypes.POINTER
        sig = {
            "cuInit": [u],
            # cuLaunchKernel(Ex) has no argtypes: Launch passes ctypes values it built once
            # (converting 11 Python ints through argtypes costs ~0.5 µs per launch)
            "cuOccupancyMaxActiveClusters": [p(i), v, p(LaunchConfig)],
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
        raise DriverError(f"{what} failed: {error_text(code)}")


def check(result, what: str):
    """Raise DriverError unless a cuda.bindings driver call succeeded; return its values."""
    from cuda.bindings import driver as drv

    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise DriverError(f"{what} failed: {error_text(int(err))}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


# ---------------------------------------------------------------------------- streams

def stream_handle(stream) -> int:
    """The driver handle of `stream`: an object with __cuda_stream__ (cuda.core, recent torch
    and CuPy), a torch stream (.cuda_stream), a CuPy stream (.ptr), a Numba or cuda.bindings
    stream (.handle), or a raw handle int (0: the legacy default stream); None is 0."""
    if stream is None:
        return 0
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
    if code:
        raise LaunchError(f"cuStreamIsCapturing failed: {error_text(code)}")
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


# ---------------------------------------------------------------------------- devices, contexts

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


def current_context() -> int:
    """Make Numba's primary context current (the arrays live there) and return its handle."""
    from cuda.bindings import driver as drv
    from numba import cuda

    cuda.current_context()
    return int(check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent"))


def device_attribute(name: str) -> int:
    """An integer CU_DEVICE_ATTRIBUTE_<name> of the current device (e.g. 'L2_CACHE_SIZE')."""
    from cuda.bindings import driver as drv

    current_context()
    dev = check(drv.cuCtxGetDevice(), "cuCtxGetDevice")
    attr = getattr(drv.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
    return int(check(drv.cuDeviceGetAttribute(attr, dev), f"cuDeviceGetAttribute({name})"))


def device_arch() -> str:
    """sm_XY[a] of the current device: 'a' (arch-specific features such as wgmma/setmaxnreg) on 9.0."""
    major = device_attribute("COMPUTE_CAPABILITY_MAJOR")
    minor = device_attribute("COMPUTE_CAPABILITY_MINOR")
    return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


# ---------------------------------------------------------------------------- modules, functions

def load_module(cubin: bytes):
    """cuModuleLoadData into the current context; None when the driver calls the image invalid
    (a corrupt cache entry, which the caller compiles again)."""
    from cuda.bindings import driver as drv

    err, mod = drv.cuModuleLoadData(cubin)
    if err == drv.CUresult.CUDA_ERROR_INVALID_IMAGE:
        return None
    return check((err, mod), "cuModuleLoadData")


def module_function(module, name: str):
    from cuda.bindings import driver as drv

    return check(drv.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")


def kernel_function(handle):
    """The CUfunction of the current context for a library kernel handle (Numba loads its cubin
    as a library: the handle is a CUkernel, while cuFuncSetAttribute and launches take the
    function)."""
    from cuda.bindings import driver as drv

    kernel = handle if isinstance(handle, drv.CUkernel) else drv.CUkernel(int(handle))
    return check(drv.cuKernelGetFunction(kernel), "cuKernelGetFunction")


_smem_set: dict = {}


def allow_dynamic_smem(fn, smem: int) -> None:
    """Let `fn` take `smem` bytes of dynamic shared memory (above 48 KiB a kernel must ask)."""
    from cuda.bindings import driver as drv

    key = int(fn)
    if smem <= 48 * 1024 or _smem_set.get(key, 0) >= smem:
        return
    check(
        drv.cuFuncSetAttribute(
            fn, drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem
        ),
        f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={smem})",
    )
    _smem_set[key] = smem


# ---------------------------------------------------------------------------- launches

def kernel_launch(head):
    """cuLaunchKernel with its first arguments bound: head is (function, grid x/y/z, block
    x/y/z, dynamic shared bytes) as the ctypes values it takes (see _cuda); the result takes
    (stream, kernel parameters, extra) and returns the CUresult. A Launch binds it once, so
    that each launch is one C call."""
    return functools.partial(_cuda().cuLaunchKernel, *head)


class LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute (cuda.h): an id, then a 64-byte value union at offset 8."""
    _fields_ = [("id", ctypes.c_int), ("_pad", ctypes.c_int), ("value", ctypes.c_uint * 16)]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuda.h): grid, block, dynamic shared bytes, stream, attributes."""
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttribute)),
                ("count", ctypes.c_uint)]


CLUSTER_DIMENSION = 4                     # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
PROGRAMMATIC_STREAM_SERIALIZATION = 6     # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION


def launch_config(grid, block, smem: int, cluster: int | None = None, pdl: bool = False) -> LaunchConfig:
    """A CUlaunchConfig with, for `cluster`, the cluster-dimension attribute (`cluster` CTAs
    along x) and, with `pdl`, programmatic stream serialisation (programmatic dependent launch:
    the kernel may start beside the previous one of its stream and waits for it itself,
    griddepcontrol.wait). Its stream is set per launch."""
    values = ([(CLUSTER_DIMENSION, (cluster, 1, 1))] if cluster else []) + \
             ([(PROGRAMMATIC_STREAM_SERIALIZATION, (1,))] if pdl else [])
    attrs = (LaunchAttribute * max(1, len(values)))()
    for a, (ident, words) in zip(attrs, values):
        a.id = ident
        a.value[:len(words)] = words
    # assigning the array to the pointer field keeps it alive with the config
    return LaunchConfig((ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*block), smem, None, attrs, len(values))


def kernel_launch_ex(fn: int, config: LaunchConfig):
    """cuLaunchKernelEx with `config` and function `fn` bound: the result takes (stream,
    kernel parameters, extra) like kernel_launch's and returns the CUresult. The stream is
    written into the config under a lock, so that two threads launching with one config cannot
    swap streams."""
    call = functools.partial(_cuda().cuLaunchKernelEx, ctypes.byref(config), ctypes.c_void_p(fn))
    lock = threading.Lock()

    def launch(stream, params, extra):
        with lock:
            config.stream = stream
            return call(params, extra)

    launch.config = config    # kept alive with the callable
    return launch


def function_attribute(fn, name: str) -> int:
    """An integer CU_FUNC_ATTRIBUTE_<name> of a loaded function (e.g. 'NUM_REGS')."""
    from cuda.bindings import driver as drv

    attr = getattr(drv.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
    return int(check(drv.cuFuncGetAttribute(attr, fn), f"cuFuncGetAttribute({name})"))


def max_active_blocks(fn, threads: int, smem: int) -> int:
    """How many CTAs of `threads` threads and `smem` dynamic shared bytes fit on one SM."""
    from cuda.bindings import driver as drv

    allow_dynamic_smem(fn, smem)
    return int(check(drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, threads, smem),
                     "cuOccupancyMaxActiveBlocksPerMultiprocessor"))


def max_active_clusters(fn, block, smem: int, cluster: int) -> int:
    """How many clusters of `cluster` CTAs of this kernel fit on the device at once."""
    allow_dynamic_smem(fn, smem)
    count = ctypes.c_int()
    config = launch_config((cluster, 1, 1), block, smem, cluster)
    _ok(_cuda().cuOccupancyMaxActiveClusters(ctypes.byref(count), int(fn), ctypes.byref(config)),
        "cuOccupancyMaxActiveClusters")
    return count.value
