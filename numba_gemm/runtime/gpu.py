"""Is there a usable CUDA GPU? Answered without importing Numba.

Numba's CUDA target is chosen when `numba.cuda` is first imported: it reads
ENABLE_CUDASIM from numba's config (filled from NUMBA_ENABLE_CUDASIM when `numba` is
imported) and binds either the simulator or the real target for the rest of the process.
So the choice has to be made before `numba.cuda` is imported. This module asks the driver
directly (libcuda through ctypes); it imports Numba only once the simulator is chosen, to run
the simulator's thread blocks without polling (sim_blocks).
"""
import ctypes
import ctypes.util
import functools
import os
import sys


class NoGPUError(RuntimeError):
    """No CUDA GPU, and Numba is not in simulator mode."""


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


def cuda_target_chosen() -> bool:
    """Whether `numba.cuda` is imported, i.e. Numba's choice of target is final."""
    return "numba.cuda" in sys.modules


def use_simulator_if_no_gpu() -> bool:
    """Turn the Numba CUDA simulator on when no GPU is present. Returns True if simulating.

    Call it before `numba.cuda` is imported (anything that uses Numba's CUDA target imports
    it). After `import numba` alone it still works: numba.cuda reads numba's config when it
    is imported, and the switch is set there too. After `numba.cuda` is imported without the
    simulator, on a machine without a GPU, it raises NoGPUError: Numba has bound its real
    target for this process and cannot switch. Once simulating, the simulator's blocks run
    as sim_blocks.install() makes them (several times faster).
    """
    if simulating():
        return _simulate()
    if has_gpu():
        return False
    if cuda_target_chosen():
        raise NoGPUError(
            "numba_gemm.use_simulator_if_no_gpu(): numba.cuda was imported before this call, "
            "without the simulator, and Numba cannot switch targets afterwards. Call it before "
            "anything imports numba.cuda (e.g. first thing after `import numba_gemm`), or run "
            "the program with NUMBA_ENABLE_CUDASIM=1 in its environment."
        )
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    config = sys.modules.get("numba.core.config")
    if config is not None:      # numba imported, numba.cuda not yet: it reads this when imported
        config.ENABLE_CUDASIM = 1
    return _simulate()


def _simulate() -> bool:
    from . import sim_blocks

    sim_blocks.install()
    return True


def simulating() -> bool:
    """Whether Numba's CUDA targets are (or, once numba.cuda is imported, will be) the simulator."""
    for name in ("numba.cuda.core.config", "numba.core.config"):    # numba.cuda's, else numba's
        config = sys.modules.get(name)
        if config is not None:
            return bool(config.ENABLE_CUDASIM)
    return simulator_requested()
