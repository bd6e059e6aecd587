"""The level registry: the one list of levels. Every module in numba_gemm.sgemm and
numba_gemm.hgemm whose name does not start with "_" is a level; its family is its package.

A level module carries everything the rest of the package needs about it (the level
contract):

    LEVEL = "k4"                      # name for gemm(level=...) and bench.py --level
    PARENT = "k3"                     # the level it is derived from (None for a first rung)
    TITLE = "8 rows per thread"       # a few words
    DELTA = "k4 = k3 + ..."           # the one change from PARENT, in one line
    DTYPES = (np.float32,)            # accepted input dtypes (A and B); C is always float32
    SASS_MUST_HAVE = ("LDS", ...)     # the instructions the level exists for (SASS census)
    def run(A, B, C, alpha, beta, stream=None): ...   # device arrays, already validated
    def unsupported(M, N, K) -> str | None            # optional: why a shape cannot be served

plus the hooks of its kind: Numba levels `kernel` and `SIGNATURE` (or `KERNELS`); native
levels `SOURCE` (a .cu file in native/), `KERNEL_NAMES`, `CONFIG`, `DEFINES`; the SGEMM ledger
hooks `GEOMETRY` and `warp_step`; the HGEMM ones `CONFIG`, `RASTER` and `tile_order`.

Levels from outside the package: the environment variable NUMBA_GEMM_EXTRA_LEVELS lists
importable modules as `family:module` entries separated by commas, e.g.

    NUMBA_GEMM_EXTRA_LEVELS=sgemm:my_levels.k7_warptile python bench.py --level k7

They join the registry (and so gemm(), bench.py, the ledgers, the SASS census and the
registry-driven tests) exactly as a module in the package does. Being an environment
variable, it reaches a bench.py subprocess too.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
import re
from dataclasses import dataclass
from types import ModuleType

import numpy as np

FAMILIES = ("sgemm", "hgemm")
EXTRA_LEVELS_ENV = "NUMBA_GEMM_EXTRA_LEVELS"


@dataclass(frozen=True)
class Level:
    name: str
    parent: str | None
    title: str
    delta: str
    dtypes: tuple
    family: str
    sass_must_have: tuple
    module: ModuleType

    @property
    def native(self) -> bool:
        """A native (NVRTC-compiled) level: its module names a SOURCE file in native/."""
        return hasattr(self.module, "SOURCE")

    def run(self, A, B, C, alpha, beta, stream=None):
        return self.module.run(A, B, C, alpha, beta, stream=stream)

    def unsupported(self, M: int, N: int, K: int) -> str | None:
        check = getattr(self.module, "unsupported", None)
        return check(M, N, K) if check else None


def _order(name: str):
    # k1 < k2 < k3 < k3c < k4 ... ; v7 < v8 < v8py < v9 < v10
    m = re.fullmatch(r"([a-z])(\d+)([a-z]*)", name)
    return (m.group(1), int(m.group(2)), m.group(3)) if m else (name, 0, "")


def _level(mod: ModuleType, family: str) -> Level:
    return Level(
        name=mod.LEVEL,
        parent=mod.PARENT,
        title=mod.TITLE,
        delta=mod.DELTA,
        dtypes=tuple(np.dtype(d) for d in mod.DTYPES),
        family=family,
        sass_must_have=tuple(mod.SASS_MUST_HAVE),
        module=mod,
    )


def extra_modules() -> list[tuple[str, str]]:
    """(family, module name) of the levels NUMBA_GEMM_EXTRA_LEVELS adds."""
    out = []
    for entry in filter(None, (e.strip() for e in os.environ.get(EXTRA_LEVELS_ENV, "").split(","))):
        family, sep, name = entry.partition(":")
        if not sep or family not in FAMILIES or not name:
            raise ValueError(f"{EXTRA_LEVELS_ENV}: {entry!r} is not family:module with family "
                             f"one of {', '.join(FAMILIES)}")
        out.append((family, name))
    return out


_REGISTRY: dict[str, Level] | None = None


def registry() -> dict[str, Level]:
    """All levels, in ladder order (SGEMM first, then HGEMM)."""
    global _REGISTRY
    if _REGISTRY is None:
        found = []
        for family in FAMILIES:
            pkg = importlib.import_module(f"numba_gemm.{family}")
            for info in pkgutil.iter_modules(pkg.__path__):
                if not info.name.startswith("_"):
                    found.append(_level(importlib.import_module(f"numba_gemm.{family}.{info.name}"), family))
        found += [_level(importlib.import_module(name), family) for family, name in extra_modules()]
        found.sort(key=lambda lv: (FAMILIES.index(lv.family), _order(lv.name)))
        levels = {}
        for lv in found:
            if lv.name in levels:
                raise ValueError(f"two modules define level {lv.name!r}: "
                                 f"{levels[lv.name].module.__name__} and {lv.module.__name__}")
            levels[lv.name] = lv
        for lv in found:
            parent = levels.get(lv.parent)
            if lv.parent is not None and (parent is None or parent.family != lv.family):
                raise ValueError(f"level {lv.name}: PARENT {lv.parent!r} is not a {lv.family} level")
        _REGISTRY = levels
    return _REGISTRY


def refresh() -> None:
    """Forget the registry, so that the next call reads the level modules (and
    NUMBA_GEMM_EXTRA_LEVELS) again."""
    global _REGISTRY
    _REGISTRY = None


def get(name: str) -> Level:
    levels = registry()
    try:
        return levels[name.lower()]
    except KeyError:
        raise ValueError(
            f"unknown level {name!r}; choose one of: {', '.join(levels)}"
        ) from None
