"""Scratch device memory for the split-K levels: their fp32 partial products.

A split-K level writes S partial products of C (S × M × N float32) and then reduces them in a
fixed order, so the result has the same bits on every run. The scratch buffer belongs to the
output: it is looked up by (device, C's address, size), so the first call that writes a given C
allocates it and every later call reuses it — outside any timed loop, and outside a CUDA graph
capture once the call has been warmed up. The launches gemm() and plan() record hold the buffer
(launch.keeping), so a replayed call writes the same memory; a buffer a captured launch writes
stays allocated for the process's life (launch.keep_for_graphs), since its graph may replay
any time. Two outputs never share a buffer; two calls writing the same C at once on two
streams race on C itself anyway.
`scratch` keeps other per-output buffers the same way (v11p's aligned copies of A and B), and
`counters` the per-tile arrival counters of a split reduced inside its kernel (k6gv): zero when
made, and zero again after every call, since the last CTA to count on each resets it.
"""
from __future__ import annotations

import threading

import numpy as np

CACHE_BYTES = 2**30   # buffers kept, in bytes; the oldest go first (a recorded launch keeps its own)
_cache: dict = {}
_lock = threading.Lock()


def _address(c) -> int:
    """C's device address: an operand record's pointer, or a device array's interface (a
    simulator array has none: its identity stands in)."""
    ptr = getattr(c, "ptr", None)
    if ptr is None:
        cai = getattr(c, "__cuda_array_interface__", None)
        ptr = cai["data"][0] if cai else id(c)
    return int(ptr)


def partials(c, splits: int, M: int, N: int):
    """A float32 device array of splits·M·N elements for partial products of output `c`
    (a device array or an operand record), on the current device."""
    return _buffer(c, splits * M * N, np.float32)


def scratch(c, tag: str, nbytes: int):
    """A uint8 device array of nbytes for output `c`, one per `tag` (what it holds)."""
    return _buffer(c, nbytes, np.uint8, tag)


def counters(c, n: int):
    """A uint32 device array of n zeros for output `c`, on the current device (the kernels that
    count on it leave it zero)."""
    return _buffer(c, n, np.uint32, "counters", zeroed=True)


def _buffer(c, n: int, dtype, tag: str = "", zeroed: bool = False):
    from numba import cuda

    key = (getattr(cuda.get_current_device(), "id", 0), _address(c), tag, n)
    with _lock:
        buf = _cache.get(key)
        if buf is None:
            while _cache and n * np.dtype(dtype).itemsize + sum(b.nbytes for b in _cache.values()) > CACHE_BYTES:
                del _cache[next(iter(_cache))]
            buf = _cache[key] = cuda.to_device(np.zeros(n, dtype)) if zeroed else cuda.device_array(n, dtype)
    return buf
