"""The level registry: the one list of levels. Every module in numba_gemm.sgemm and
numba_gemm.hgemm whose name does not start with "_" is a level; its family is its package.

A level module carries everything the rest of the package needs about it (the level
contract):

    LEVEL = "k4"                      # name for gemm(level=...) and bench.py --level
    PARENT = "k3"                     # the level it is derived from (None for a first rung)
    TITLE = "8 rows per thread"       # a few words
    DELTA = "k4 = k3 + ..."           # the one change from PARENT, in one line
    DTYPES = (np.float32,)            # accepted input dtypes (A and B); C is float32, unless:
    C16 = True                        # optional: C may also be A's float16/bfloat16 (fp32
                                      # accumulate, alpha/beta in fp32, rounded once on the store)
    SASS_MUST_HAVE = ("LDS", ...)     # the instructions the level exists for (SASS census)
    def run(A, B, C, alpha, beta, stream=None): ...   # device arrays, already validated
    def unsupported(M, N, K) -> str | None            # optional: why a shape cannot be served

plus the hooks of its kind: Numba levels `kernel` and `SIGNATURE` (or `KERNELS`); native
levels `SOURCE` (a .cu file in native/), `KERNEL_NAMES`, `CONFIG`, `DEFINES`; the SGEMM ledger
hooks `GEOMETRY` and `warp_step`; the HGEMM ones `CONFIG`, `RASTER` and `tile_order`.

The registry checks this contract when it discovers a module (`contract_problems`: the names,
their types, DELTA's "LEVEL = PARENT ..." form, PARENT a level of the same family, SOURCE a file
in native/) and refuses one that breaks it, naming the module and what is wrong. What costs a
compile (DEFINES accepted by NVRTC, SASS_MUST_HAVE present in the SASS) is left to the tests.

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
from dataclasses import dataclass, replace
from types import ModuleType

import numpy as np

FAMILIES = ("sgemm", "hgemm")
# the launch orders an HGEMM level may declare as RASTER (the ledgers replay them)
RASTERS = ("m-fastest", "n-fastest", "super")
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
    kwargs: tuple = ()        # run() keywords of a variant (another tile): (("bm", 64), ("bn", 128))

    @property
    def native(self) -> bool:
        """A native (NVRTC-compiled) level: its module names a SOURCE file in native/."""
        return hasattr(self.module, "SOURCE")

    def run(self, A, B, C, alpha, beta, stream=None):
        return self.module.run(A, B, C, alpha, beta, stream=stream, **dict(self.kwargs))

    def variant(self, kwargs: tuple) -> "Level":
        """This level run with run() keywords `kwargs` (e.g. another tile of v11), named as
        tools/hopper_top.py names it: v11:bm=64:bn=128."""
        return replace(self, name=spec_name(self.name, kwargs), kwargs=tuple(kwargs)) if kwargs else self

    def unsupported(self, M: int, N: int, K: int) -> str | None:
        check = getattr(self.module, "unsupported", None)
        return check(M, N, K) if check else None

    def writes(self, c_dtype, ab_dtype) -> bool:
        """Whether the level can write C of `c_dtype` for inputs of `ab_dtype`: float32 always,
        A's own 16-bit type when the module says C16 = True."""
        c_dtype = np.dtype(c_dtype)
        if c_dtype == np.float32:
            return True
        return getattr(self.module, "C16", False) and c_dtype == np.dtype(ab_dtype) and c_dtype.itemsize == 2


def spec_name(level: str, kwargs: tuple) -> str:
    """A level with run() keywords, as one name: v11:bm=64:bn=128."""
    return level + "".join(f":{k}={v}" for k, v in kwargs)


def _order(name: str):
    # k1 < k2 < k3 < k3c < k4 ... < k6gv < k6gv16 < k7; v7 < v8 < v8py < v9 < v10
    m = re.fullmatch(r"([a-z])(\d+)([a-z]*\d*)", name)
    return (m.group(1), int(m.group(2)), m.group(3)) if m else (name, 0, "")


def _is_str_tuple(v, prefix: str = "") -> bool:
    return isinstance(v, (tuple, list)) and all(isinstance(x, str) and x.startswith(prefix) for x in v)


def contract_problems(mod: ModuleType, family: str) -> list[str]:
    """What `mod` lacks of the level contract (module docstring) for `family`, cheaply: names,
    types and files, nothing compiled. Empty when it meets it. PARENT's existence needs the
    other levels: registry() checks it."""
    out = []

    def need(name, ok, what):
        if not hasattr(mod, name):
            out.append(f"no {name} ({what})")
        elif not ok(getattr(mod, name)):
            out.append(f"{name} = {getattr(mod, name)!r:.80} is not {what}")

    need("LEVEL", lambda v: isinstance(v, str) and re.fullmatch(r"[a-z0-9_]+", v) is not None,
         "a lower-case name such as 'k4'")
    need("PARENT", lambda v: v is None or isinstance(v, str), "a level name or None")
    need("TITLE", lambda v: isinstance(v, str) and v.strip() != "", "a non-empty str")
    level, parent = getattr(mod, "LEVEL", "?"), getattr(mod, "PARENT", None)
    head = f"{level} = {parent} " if parent else f"{level} = "
    need("DELTA", lambda v: isinstance(v, str) and v.startswith(head), f"a str starting {head!r}")

    def dtypes(v):
        try:
            got = [np.dtype(d) for d in v]
        except (TypeError, ValueError):
            return False
        return np.dtype(np.float32 if family == "sgemm" else np.float16) in got

    need("DTYPES", dtypes, "a tuple of NumPy dtypes with " + ("float32" if family == "sgemm" else "float16"))
    need("SASS_MUST_HAVE", lambda v: _is_str_tuple(v) and len(v) > 0, "a non-empty tuple of SASS opcodes")
    if hasattr(mod, "SASS_MUST_NOT_HAVE"):
        need("SASS_MUST_NOT_HAVE", _is_str_tuple, "a tuple of SASS opcodes")
    need("run", callable, "run(A, B, C, alpha, beta, stream=None)")
    if hasattr(mod, "unsupported"):
        need("unsupported", callable, "unsupported(M, N, K) -> str | None")
    if hasattr(mod, "C16"):
        need("C16", lambda v: isinstance(v, bool), "True or False (whether C may be A's 16-bit type)")

    if hasattr(mod, "SOURCE"):                                     # native: NVRTC compiles it
        import importlib.resources

        native = importlib.resources.files("numba_gemm.native")
        need("SOURCE", lambda v: isinstance(v, str) and native.joinpath(v).is_file(),
             "the name of a .cu file in native/")
        kinds = {"f16", "bf16"} if family == "hgemm" else None
        need("KERNEL_NAMES", lambda v: isinstance(v, dict) and len(v) > 0
             and all(isinstance(sym, str) and sym for sym in v.values()) and (kinds is None or set(v) == kinds),
             "a dict of kernel symbols by element type" + (" ('f16', 'bf16')" if kinds else ""))
        need("DEFINES", lambda v: _is_str_tuple(v, "-D"), "a tuple of -D options")
        if family != "hgemm":                                      # (hgemm: below, with its fields)
            need("CONFIG", lambda v: True, "the tile the launch and the ledgers read")
    elif not (hasattr(mod, "KERNELS") or hasattr(mod, "kernel") and hasattr(mod, "SIGNATURE")):
        out.append("neither KERNELS nor kernel + SIGNATURE (a Numba level's kernels for the census)")
    elif hasattr(mod, "KERNELS"):
        need("KERNELS", lambda v: isinstance(v, dict) and len(v) > 0
             and all(isinstance(e, tuple) and len(e) == 2 for e in v.values()),
             "a dict name -> (kernel, signature)")

    if family == "sgemm":
        need("GEOMETRY", lambda v: True, "the launch shape the ledgers read")
        need("warp_step", callable, "warp_step(M, N, K, bx, by, warp, ph, g) for the ledgers")
    else:
        need("CONFIG", lambda v: all(isinstance(getattr(v, f, None), int) for f in ("bm", "bn", "bk", "threads")),
             "a tile with int bm, bn, bk and threads")
        need("RASTER", lambda v: v in RASTERS, f"one of {', '.join(RASTERS)}")
        if getattr(mod, "RASTER", None) == "super":
            need("tile_order", callable, "tile_order(M, N, K, l2_bytes) -> (super_m, super_n), as RASTER is 'super'")
    return out


def _level(mod: ModuleType, family: str) -> Level:
    bad = contract_problems(mod, family)
    if bad:
        raise ValueError(f"level module {mod.__name__} ({family}) does not meet the level contract "
                         f"(numba_gemm.registry): {'; '.join(bad)}")
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
                raise ValueError(f"level module {lv.module.__name__} ({lv.family}) does not meet the "
                                 f"level contract: PARENT {lv.parent!r} is not a {lv.family} level")
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
