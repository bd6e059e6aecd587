"""Kernel launches as records: Numba kernels without Numba's per-call dispatch, native kernels
from raw pointers; recording them for gemm() and plan(), and CUDA graph capture.

Why: a Numba launch costs ~48 µs of host time (typing every argument, wrapping arrays, the
launch configuration objects), cuLaunchKernel itself a few. Here a Numba kernel is compiled
once per argument-type signature and machine (Numba's own compile, the kernels unchanged,
its cubin kept on disk by numba_gemm.runtime.numba_cache), its function handle fetched once per
device, and each launch is one cuLaunchKernel with the parameters flattened as Numba's ABI
expects for an array argument:

    meminfo (void*), parent (void*), nitems (intp), itemsize (intp), data (void*),
    shape[ndim] (intp), strides[ndim] (intp, bytes)

(numba.cuda.dispatcher._Kernel._prepare_args; scalars are passed by value). Arrays are read
through __cuda_array_interface__ (operand records and Numba device arrays alike). Native
kernels (every HGEMM level, through `launch_native`) pass ctypes values the same way.

`recording()` collects the launches a level's run() would make, as Launch objects, instead of
issuing them: gemm() caches them by everything run() reads (level, shapes, dtypes, pointers,
alpha, beta, device) and plan() keeps them, so a repeated call is one cuLaunchKernel per
launch. In the Numba CUDA simulator, Numba kernels go through Numba as usual. The driver
calls themselves are numba_gemm.runtime.driver's.
"""
from __future__ import annotations

import ctypes
import struct
import threading

from . import driver, numba_cache, operands, workspace
from .driver import LaunchError


# ---------------------------------------------------------------------------- launches

class Launch:
    """One prepared kernel launch: function handle, grid, block, dynamic shared memory, the
    parameter pointer array (with the objects it points into kept alive), for a cluster
    launch the cluster size along x, whether it is a programmatic dependent launch (pdl:
    the kernel waits for the previous one itself, so it may start beside it), and `held`: the
    device arrays `keeping` gave it (a workspace), which `held_bytes` counts."""

    __slots__ = ("fn", "grid", "block", "smem", "params", "keep", "cluster", "pdl", "held", "_bound")

    def __init__(self, fn: int, grid, block, smem: int, params, keep, cluster: int | None = None,
                 pdl: bool = False):
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        self.fn, self.grid, self.block, self.smem = fn, g, b, int(smem)
        self.params, self.keep, self.cluster, self.pdl = params, keep, cluster, pdl
        self.held = ()
        self._bound = None        # the driver call with everything but the stream bound, at the first launch

    def launch(self, stream: int) -> None:
        bound = self._bound
        if bound is None:
            bound = self._bound = self._bind()
        code = bound(ctypes.c_void_p(stream) if stream else None, self.params, None)
        if code:
            raise LaunchError(f"{'cuLaunchKernelEx' if self.cluster or self.pdl else 'cuLaunchKernel'} "
                              f"failed: {driver.error_text(code)}")

    def _bind(self):
        """cuLaunchKernelEx for a cluster or a dependent launch, cuLaunchKernel otherwise (a
        configuration costs tens of microseconds of Python: built once, here)."""
        if self.cluster or self.pdl:
            return driver.kernel_launch_ex(self.fn, driver.launch_config(self.grid, self.block, self.smem,
                                                                         self.cluster, self.pdl))
        # cuLaunchKernel's arguments before the stream, as the C types it takes (see driver._cuda)
        return driver.kernel_launch((ctypes.c_void_p(self.fn), *map(ctypes.c_uint, self.grid + self.block),
                                     ctypes.c_uint(self.smem)))

    __call__ = launch     # L(stream); the call path uses L.launch(stream), a plain method call


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
            # a caller's operand (C's own flat view, where a split of one slice writes C in
            # place) is not workspace: a launch replays on its address and does not pin it
            arrays = tuple(x for x in (self.obj if isinstance(self.obj, tuple) else (self.obj,))
                           if not isinstance(x, operands.Operand))
            for L in self.rec.launches:
                L.keep = (L.keep, arrays)
                L.held += arrays
                _issue(L, self.stream)


def held_bytes(launches) -> int:
    """Bytes of the device arrays the launches hold through `keeping`, each array once (a
    split's partials are held by both its launches)."""
    arrays = {id(x): x for L in launches for x in L.held}
    return sum(x.nbytes for x in arrays.values())


class Calls:
    """Recorded calls by key, the oldest first to go: at most SIZE of them, and together at most
    HELD_BYTES of the workspaces their launches hold (split-K partials, pitched copies), or one
    call alone whose workspace is larger (as the workspace module keeps one such buffer: the
    call warmed up just before a graph capture is still there to capture). Without the byte
    bound, a few calls at shapes past 2^31 elements kept tens of GiB after their outputs were
    gone."""

    SIZE, HELD_BYTES = 512, workspace.CACHE_BYTES     # as much as the workspace module keeps

    def __init__(self):
        self.entries: dict = {}
        self.held: dict = {}              # key -> bytes its launches hold
        self.total = 0
        self.get = self.entries.get       # the hot path's lookup, a plain dict's
        self.lock = threading.Lock()      # evicting while another thread evicts

    def remember(self, key, value, launches) -> None:
        n = held_bytes(launches)
        with self.lock:
            if key in self.entries:       # two threads recorded the same call
                self._drop(key)
            while self.entries and (len(self.entries) >= self.SIZE or self.total + n > self.HELD_BYTES):
                self._drop(next(iter(self.entries)))
            self.entries[key], self.held[key] = value, n
            self.total += n

    def _drop(self, key) -> None:
        del self.entries[key]
        self.total -= self.held.pop(key)

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.held.clear()
            self.total = 0

    def values(self):
        return self.entries.values()

    def __len__(self) -> int:
        return len(self.entries)


_captured: dict = {}        # id -> a workspace a captured launch writes (keep_for_graphs)


def keep_for_graphs(launches) -> None:
    """A graph replays its launches' addresses whenever it is launched, long after the caches
    may have let the workspaces go: a workspace a captured launch writes stays allocated while
    the process lives (each array once)."""
    for L in launches:
        for x in L.held:
            _captured[id(x)] = x


def _issue(launch: Launch, stream) -> None:
    rec = getattr(_tls, "record", None)
    if rec is not None:
        rec.append(launch)
    else:
        launch(driver.stream_handle(stream))


def launch_native(fn, grid, block, smem: int, stream, args, cluster: int | None = None,
                  pdl: bool = False) -> None:
    """The one launch of a native kernel (a CUfunction) with `args`: ctypes values, or objects
    with getPtr() (a CUtensorMap), in parameter order; `cluster`: CTAs per cluster along x
    (cuLaunchKernelEx); `pdl`: a kernel that waits for the previous grid (griddepcontrol.wait)
    before any global access, launched to start beside it. Every HGEMM level launches through here, so that gemm() and plan() can
    record its launches."""
    driver.allow_dynamic_smem(fn, smem)
    params = (ctypes.c_void_p * max(1, len(args)))(
        *[a.getPtr() if hasattr(a, "getPtr") else ctypes.addressof(a) for a in args]
    )
    _issue(Launch(int(fn), grid, block, smem, params, list(args), cluster, pdl), stream)


# Numba levels ------------------------------------------------------------------

_numba_kernels: dict = {}   # (dispatcher, argument types, device) -> (function handle, layout, dispatcher)


def _numba_types(args):
    """Numba's types for the arguments: arrays from __cuda_array_interface__ (C layout when it
    has no strides or C-contiguous ones, as Numba types them), scalars by typeof."""
    import numpy as np
    from numba import typeof, types
    from numba.np.numpy_support import from_dtype

    out = []
    for a in args:
        cai = getattr(a, "__cuda_array_interface__", None)
        if cai is None:
            out.append(typeof(a))
            continue
        dtype, shape = np.dtype(cai["typestr"]), tuple(cai["shape"])
        strides = cai.get("strides")
        c_order = strides is None or tuple(strides) == _c_strides(shape, dtype.itemsize)
        out.append(types.Array(from_dtype(dtype), len(shape), "C" if c_order else "A"))
    return tuple(out)


def _c_strides(shape, itemsize: int) -> tuple:
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


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
    """(nitems, itemsize, data pointer, shape, byte strides) of an array with
    __cuda_array_interface__ (an operand record or a Numba device array)."""
    import numpy as np

    cai = a.__cuda_array_interface__
    shape, item = tuple(cai["shape"]), np.dtype(cai["typestr"]).itemsize
    nitems = 1
    for n in shape:
        nitems *= n
    strides = cai.get("strides")
    return nitems, item, cai["data"][0], shape, tuple(strides) if strides else _c_strides(shape, item)


def _numba_function(dispatcher, argtypes, device: int):
    key = (dispatcher, argtypes, device)
    hit = _numba_kernels.get(key)
    if hit is None:
        fn = numba_cache.function(dispatcher, argtypes)
        if fn is None:
            return None                       # Numba's own launch handles these (debug, cooperative ...)
        hit = _numba_kernels[key] = (int(fn), _layout(argtypes), dispatcher)
    return hit


def loaded_function(dispatcher) -> int | None:
    """The function handle launch_numba loaded for `dispatcher` (for its attributes: registers,
    local memory), or None before its first launch."""
    return next((hit[0] for key, hit in _numba_kernels.items() if key[0] is dispatcher), None)


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
