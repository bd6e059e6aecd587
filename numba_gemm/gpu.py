"""Is there a usable CUDA GPU? Answered without importing Numba.

Numba reads NUMBA_ENABLE_CUDASIM once, at import, so the choice between the real GPU and
the simulator has to be made before `numba` is imported. This module asks the driver
directly (libcuda through ctypes) and never touches Numba.
"""
import ctypes
import ctypes.util
import functools
import os
import sys


@functools.lru_cache(maxsize=None)
def gpu_count() -> int:
    """Number of CUDA devices the driver reports; 0 when there is no driver or no device."""
    names = ["libcuda.so.1", "libcuda.so", ctypes.util.find_library("cuda")]
    for name in filter(None, names):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        count = ctypes.c_int(0)
        if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    return 0


def has_gpu() -> bool:
    return gpu_count() > 0


def simulator_requested() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def use_simulator_if_no_gpu() -> bool:
    """Turn the Numba CUDA simulator on when no GPU is present. Returns True if simulating.

    Must run before the first `import numba`.
    """
    if not simulator_requested() and not has_gpu():
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    return simulator_requested()


def simulating() -> bool:
    """Whether Numba's CUDA targets are (or, once numba is imported, will be) the simulator."""
    config = sys.modules.get("numba.core.config")
    if config is not None:
        return bool(config.ENABLE_CUDASIM)
    return simulator_requested()
