"""What `python -m numba_gemm warm` compiles, kernel by kernel: the names of a level's kernels,
and warm_one, the unit of work of the command's worker processes.

A module of its own because a worker (a spawned process) finds warm_one by importing its module,
which a package's __main__ is not; at the root because a worker finds its level through the
registry, which runtime/ (numba_cache, nvrtc: the caches it fills) does not import.
"""
from __future__ import annotations

import time

from .registry import get
from .runtime import numba_cache, nvrtc


def kernels_of(level) -> list[str]:
    """The names of what warming `level` compiles: a Numba level's KERNELS (or its kernel) and
    HELPER_KERNELS, a native level's SOURCE with its shipped DEFINES and, as SOURCE:name, each
    of its WARM_VARIANTS (other -D sets its run() may compile: v11's tiles, v13's 16-bit C)."""
    m = level.module
    if level.native:
        return [m.SOURCE, *(f"{m.SOURCE}:{v}" for v in getattr(m, "WARM_VARIANTS", {}))]
    return list(_numba_kernels(m, level.name))


def _numba_kernels(module, level_name: str) -> dict:
    """{name: (dispatcher, signature)} of a Numba level: its KERNELS (or its kernel), then its
    HELPER_KERNELS."""
    return {**(getattr(module, "KERNELS", None) or {level_name: (module.kernel, module.SIGNATURE)}),
            **getattr(module, "HELPER_KERNELS", {})}


def warm_one(level_name: str, name: str, cc) -> tuple[bool, float]:
    """Compile one kernel of a level, or find it cached: (compiled now, seconds). `name` is one
    of kernels_of(level); cc: the Numba target. What each worker of the warm-up runs."""
    t = time.perf_counter()
    level = get(level_name)
    m = level.module
    if level.native:
        variant = name.partition(":")[2]
        defines = tuple(m.WARM_VARIANTS[variant] if variant else m.DEFINES)
        compiled = not nvrtc.cubin_path(m.SOURCE, nvrtc.DEFAULT_ARCH, defines).is_file()
        nvrtc.compile_variant(m.SOURCE, defines)
    else:
        kernel, signature = _numba_kernels(m, level_name)[name]
        compiled = numba_cache.cubin(kernel, signature, cc)[2]
    return compiled, time.perf_counter() - t
