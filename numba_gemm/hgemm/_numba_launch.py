"""What the HGEMM levels written in numba.cuda (v8py, v11py) share to launch through
numba_gemm.runtime.launch.launch_native with their own dynamic shared memory: the loaded function of a
compiled kernel, and a flat array as the parameters Numba's ABI gives it."""
from __future__ import annotations

import ctypes

_FUNCTIONS: dict = {}     # (context, dispatcher, signature) -> CUfunction


def function(dispatcher, signature):
    """The CUfunction of `dispatcher` compiled for `signature` in the current context: compiled
    once per machine (numba_gemm.runtime.numba_cache), loaded once per context."""
    from ..runtime import driver, numba_cache

    key = (driver.current_context(), dispatcher, signature)
    fn = _FUNCTIONS.get(key)
    if fn is None:
        fn = numba_cache.function(dispatcher, signature)
        if fn is None:           # e.g. debug info asked for (NUMBA_CUDA_DEBUGINFO): Numba compiles it
            handle = dispatcher.compile(signature)._codelibrary.get_cufunc().handle
            fn = driver.kernel_function(handle)
        _FUNCTIONS[key] = fn
    return fn


def array_args(ptr: int, n: int, itemsize: int) -> list:
    """A 1-D C-contiguous array as a Numba kernel receives it: meminfo, parent, nitems,
    itemsize, data, shape[0], strides[0] (seven parameters)."""
    c64 = ctypes.c_int64
    return [ctypes.c_void_p(0), ctypes.c_void_p(0), c64(n), c64(itemsize), ctypes.c_void_p(ptr),
            c64(n), c64(itemsize)]
