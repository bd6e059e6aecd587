"""The level registry (numba_gemm.registry): every module in numba_gemm.sgemm and numba_gemm.hgemm is a level.

A level module exposes the same small surface (the level contract):

    LEVEL = "k4"                      # name used by gemm(level=...) and bench.py --level
    TITLE = "8 rows per thread"       # a few words
    DELTA = "k4 = k3 + ..."           # what changed from the previous level, in one line
    DTYPES = (np.float32,)            # accepted input dtypes (A and B); C is always float32
    def run(A, B, C, alpha, beta, stream=None): ...   # device arrays, already validated
    def unsupported(M, N, K) -> str | None            # optional: why a shape cannot be served

Numba levels also expose `kernel` (the @cuda.jit function) and `SIGNATURE` (its argument
types) so the SASS census can compile them without a GPU; native levels expose `SOURCE`
(the .cu file name in native/) and `KERNEL_NAME`.

Adding a level is one file here plus one section in docs/LADDER.md: nothing else to edit.
"""
from __future__ import annotations

import importlib
import pkgutil
import re
from dataclasses import dataclass
from types import ModuleType

import numpy as np

FAMILIES = ("sgemm", "hgemm")


@dataclass(frozen=True)
class Level:
    name: str
    title: str
    delta: str
    dtypes: tuple
    family: str
    module: ModuleType

    @property
    def native(self) -> bool:
        """CUDA C compiled by NVRTC (the module names its SOURCE), not a Numba kernel."""
        return hasattr(self.module, "SOURCE")

    def run(self, A, B, C, alpha, beta, stream=None):
        return self.module.run(A, B, C, alpha, beta, stream=stream)

    def unsupported(self, M: int, N: int, K: int) -> str | None:
        check = getattr(self.module, "unsupported", None)
        return check(M, N, K) if check else None


def _order(name: str):
    # k1 < k2 < k3 < k3c < k4 ... ; v7 < v8 < v9 < v10
    m = re.fullmatch(r"([a-z])(\d+)([a-z]*)", name)
    return (m.group(1), int(m.group(2)), m.group(3)) if m else (name, 0, "")


_REGISTRY: dict[str, Level] | None = None


def registry() -> dict[str, Level]:
    """All levels, in ladder order (SGEMM first, then HGEMM)."""
    global _REGISTRY
    if _REGISTRY is None:
        found = []
        for family in FAMILIES:
            pkg = importlib.import_module(f"numba_gemm.{family}")
            for info in pkgutil.iter_modules(pkg.__path__):
                if info.name.startswith("_"):
                    continue
                mod = importlib.import_module(f"numba_gemm.{family}.{info.name}")
                found.append(
                    Level(
                        name=mod.LEVEL,
                        title=mod.TITLE,
                        delta=mod.DELTA,
                        dtypes=tuple(np.dtype(d) for d in mod.DTYPES),
                        family=family,
                        module=mod,
                    )
                )
        found.sort(key=lambda lv: (FAMILIES.index(lv.family), _order(lv.name)))
        _REGISTRY = {lv.name: lv for lv in found}
    return _REGISTRY


def get(name: str) -> Level:
    levels = registry()
    try:
        return levels[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown level {name!r}; choose one of: {', '.join(levels)}"
        ) from None


def previous(level: Level) -> Level | None:
    """The level just below this one on the same ladder (None for the first rung)."""
    same = [lv for lv in registry().values() if lv.family == level.family]
    i = same.index(level)
    return same[i - 1] if i > 0 else None
