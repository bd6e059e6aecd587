"""Numba kernels compiled once per machine: their cubins on disk, keyed by everything that
changes the code, loaded and launched without Numba's compiler.

A Numba level's first call in a new process used to pay Numba's compile again (k7, k8: ~16 s of
typing and lowering each specialisation, ~1.5 s of NVVM and nvJitLink). Here the first compile
stores the cubin and its entry name in the cache directory the NVRTC cubins use
(numba_gemm.runtime.nvrtc.cache_dir: NUMBA_GEMM_CACHE_DIR, default ~/.cache/numba_gemm); later
processes load it with cuModuleLoadData and launch it through numba_gemm.runtime.launch.

Why not numba-cuda's own `cache=True` (0.30.4): it accepts factory-built kernels (it pickles
their closure cells), but its key is the kernel's own bytecode, those pickles and the mtime of
the kernel's source file. A helper reached by reference, such as a module-level device
function in sgemm/_common.py or an intrinsic in ptx/, is pickled by name, so
editing it leaves a stale kernel in the cache; and the key needs a live GPU context (the
compute capability comes from the current device), so nothing can be warmed or tested
without a GPU, and entries live beside the sources or in NUMBA_CACHE_DIR, not with the
NVRTC cubins.

The compile is Numba's own, step for step what `CUDADispatcher.compile` does for a kernel
(numba.cuda.dispatcher._Kernel: compile_cuda with the jit options, kernel fixup, launch
bounds, then the code library's cubin for the arch Numba's runtime picks, (9, 0, 'a') on an
H200): the SASS is the one Numba would load, and a test compares the two. Kernels that
Numba's launch must handle itself (debug, link files, extensions, cooperative groups, a
shared-memory carveout, NRT) are not cached: `function` returns None for them.

Key: sha256 of the kernel's fingerprint (its bytecode, and recursively the values of every
global, closure cell and default it reaches: device functions, intrinsics and their PTX
text, factory parameters, module constants), the source files of every project module the
walk reaches (the level and the helpers it uses), the argument types, the jit options,
the compute capability, and the versions of Python, numba, numba-cuda, llvmlite, NVVM and
nvJitLink. An entry is written to a temp file and renamed (numba_gemm.runtime.nvrtc.atomic_write),
under a lock file so that one process compiles while the others wait; an entry that is
torn, corrupt or another key's is compiled again, with a warning.
"""
from __future__ import annotations

import functools
import hashlib
import json
import sys
import threading
import types as pytypes
import warnings
from dataclasses import fields, is_dataclass
from pathlib import Path

import numpy as np

from . import driver, nvrtc

FORMAT = b"numba_gemm numba cubin 1\n"     # first line of every entry; bump when the layout changes
NO_GPU_CC = (9, 0, "a")                     # what an H200 runs: the target when there is no GPU

# Packages whose code the versions in the key stand for: their modules are not hashed.
_VERSIONED = ("numba", "llvmlite", "numpy", "cuda")
# jit options Numba's launch applies itself: a kernel with any of them set is not cached.
_NOT_CACHED = ("link", "extensions", "debug", "shared_memory_carveout", "max_registers")
# what Numba links into a kernel when its code calls them (dispatcher._Kernel)
_LINKED = ("NRT_", "nocopy_empty_reshape", "numba_attempt_nocopy_reshape")


class NotCacheable(Exception):
    """This kernel is compiled and launched by Numba as usual; the message says why."""


# ---------------------------------------------------------------------------- key

def cc_label(cc) -> str:
    return "sm_" + "".join(str(p) for p in cc)


def local_cc():
    """The compute capability Numba compiles for on the current GPU, as its runtime spells it
    (arch-specific 'a' from 9.0 up, numba.cuda.codegen); NO_GPU_CC without a GPU."""
    from . import gpu

    if not gpu.has_gpu():
        return NO_GPU_CC
    from numba import cuda

    major, minor = cuda.get_current_device().compute_capability
    return (major, minor, "a" if (major, minor) >= (9, 0) else "")


@functools.lru_cache(maxsize=None)
def _versions() -> str:
    from importlib import metadata

    from cuda.bindings import nvjitlink
    from numba.cuda.cudadrv import nvvm

    parts = [f"python={sys.version_info[:2]}"]
    for dist in ("numba", "numba-cuda", "llvmlite", "nvidia-nvvm", "nvidia-nvjitlink", "cuda-core"):
        try:
            parts.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist}=none")
    parts.append(f"nvvm={nvvm.NVVM().get_version()} nvjitlink={nvjitlink.version()}")
    return " ".join(parts)


def _versioned(module_name: str | None) -> bool:
    return (module_name or "").split(".")[0] in _VERSIONED   # None: made by exec (intrinsics.unrolled)


class _Fingerprint:
    """A deterministic digest of what Numba reads when it compiles a function: its code, and
    the values of the globals, closure cells and defaults it names, followed through device
    functions and intrinsics. Objects are named by content, never by address, so two
    processes that import the same sources get the same digest. Also collects the project
    modules it passes through (their files go into the key too)."""

    def __init__(self):
        self.h = hashlib.sha256()
        self.modules: dict[str, pytypes.ModuleType] = {}
        self._seen: dict[int, int] = {}

    def put(self, *parts) -> None:
        for p in parts:
            self.h.update(str(p).encode() + b"\0")

    def add(self, obj) -> None:
        from numba.core.types import Type
        from numba.cuda.dispatcher import CUDADispatcher
        from numba.cuda.extending import _Intrinsic

        if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
            self.put(type(obj).__name__, repr(obj))
            return
        if id(obj) in self._seen:          # a cycle or a shared helper: its first visit's number
            self.put("ref", self._seen[id(obj)])
            return
        self._seen[id(obj)] = len(self._seen)
        if isinstance(obj, (tuple, list)):
            self.put(type(obj).__name__, len(obj))
            for x in obj:
                self.add(x)
        elif isinstance(obj, dict):
            self.put("dict", len(obj))
            for k in sorted(obj, key=repr):
                self.add(k)
                self.add(obj[k])
        elif isinstance(obj, (set, frozenset)):
            self.put("set", sorted(repr(x) for x in obj))
        elif isinstance(obj, pytypes.ModuleType):
            self.put("module", obj.__name__)
            if not _versioned(obj.__name__):
                self.modules[obj.__name__] = obj
        elif isinstance(obj, CUDADispatcher):
            self.put("dispatcher")
            self.add(obj.targetoptions)
            self.add(obj.py_func)
        elif isinstance(obj, _Intrinsic):
            self.put("intrinsic", obj._name)
            self.add(obj._defn)
        elif isinstance(obj, pytypes.FunctionType) and not _versioned(obj.__module__):
            self.function(obj)
        elif isinstance(obj, (pytypes.FunctionType, pytypes.BuiltinFunctionType)):
            self.put("library function", obj.__module__, obj.__qualname__)   # versioned with its package
        elif isinstance(obj, np.ndarray):
            self.put("ndarray", obj.dtype.str, obj.shape, hashlib.sha256(obj.tobytes()).hexdigest())
        elif isinstance(obj, (Type, type)) or _versioned(type(obj).__module__):
            # Numba and llvmlite types, NumPy dtypes and scalars, classes: named by what they are
            self.put(type(obj).__module__, type(obj).__qualname__, _plain_repr(obj))
        elif is_dataclass(obj):
            self.put("dataclass", type(obj).__module__, type(obj).__qualname__)
            for f in fields(obj):
                self.put(f.name)
                self.add(getattr(obj, f.name))
        elif isinstance(obj, pytypes.SimpleNamespace):
            self.put("namespace")
            self.add(vars(obj))
        else:
            raise NotCacheable(f"no fingerprint for a {type(obj).__module__}.{type(obj).__qualname__}")

    def function(self, f: pytypes.FunctionType) -> None:
        module = sys.modules.get(f.__module__)
        if module is not None and not _versioned(f.__module__):
            self.modules[f.__module__] = module
        self.put("function", f.__module__, f.__qualname__)
        names = self.code(f.__code__)
        for name in sorted(names):
            if name in f.__globals__:
                value = f.__globals__[name]
                self.put("global", name)
                self.add(value)
                if isinstance(value, pytypes.ModuleType) and not _versioned(value.__name__):
                    # `cm.CONFIG`: attributes of a project module, read at compile time
                    for attr in sorted(names):
                        if attr != name and hasattr(value, attr):
                            self.put("attribute", name, attr)
                            self.add(getattr(value, attr))
        for cell_name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
            self.put("cell", cell_name)
            self.add(cell.cell_contents)
        self.add(f.__defaults__)
        self.add(f.__kwdefaults__)

    def code(self, co: pytypes.CodeType) -> set:
        """Put a code object (and those nested in it); return every name it reads."""
        self.put("code", co.co_name, co.co_argcount, co.co_flags, co.co_code.hex(), co.co_names,
                 co.co_varnames, co.co_freevars, co.co_cellvars)
        names = set(co.co_names)
        for c in co.co_consts:
            if isinstance(c, pytypes.CodeType):
                names |= self.code(c)
            else:
                self.add(c)
        return names


def _plain_repr(obj) -> str:
    r = repr(obj)
    if " at 0x" in r:                  # an address: says nothing about the code
        raise NotCacheable(f"no fingerprint for {r}")
    return r


def _options(dispatcher) -> dict:
    """The jit options that change the code, checked to be ones this cache reproduces."""
    opts = dict(dispatcher.targetoptions)
    for name in _NOT_CACHED:
        if opts.get(name):
            raise NotCacheable(f"jitted with {name}={opts[name]!r}")
    if opts.get("device"):
        raise NotCacheable("a device function, not a kernel")
    return {k: opts.get(k) for k in ("lineinfo", "opt", "fastmath", "forceinline", "launch_bounds", "lto")}


def kernel_key(dispatcher, argtypes, cc) -> str:
    """The cache key of `dispatcher` compiled for `argtypes` (Numba types) and `cc`."""
    from numba.core import config

    fp = _Fingerprint()
    fp.add(dispatcher.py_func)
    h = fp.h
    for name in sorted(fp.modules):
        path = getattr(fp.modules[name], "__file__", None)
        if path:                        # the level and every helper module the kernel reaches
            h.update(name.encode() + b"\0" + hashlib.sha256(Path(path).read_bytes()).digest())
    h.update(repr((tuple(str(t) for t in argtypes), sorted(_options(dispatcher).items()), tuple(cc),
                   config.FORCE_CUDA_CC, _versions(), FORMAT)).encode())
    return h.hexdigest()[:32]


def _stem(dispatcher) -> str:
    f = dispatcher.py_func
    return f"{f.__module__.rsplit('.', 1)[-1]}.{f.__name__}"


def entry_path(dispatcher, argtypes, cc) -> tuple[Path, str]:
    """(where the entry lives, its key)."""
    key = kernel_key(dispatcher, argtypes, cc)
    return nvrtc.cache_dir() / f"{_stem(dispatcher)}.{cc_label(cc)}.{key}.numba", key


# ---------------------------------------------------------------------------- entries on disk

def pack(key: str, entry: str, cubin: bytes) -> bytes:
    """An entry: the format line, a JSON header (key, kernel symbol, the cubin's size and
    sha256), a newline, the cubin."""
    head = json.dumps({"key": key, "entry": entry, "size": len(cubin),
                       "sha256": hashlib.sha256(cubin).hexdigest()})
    return FORMAT + head.encode() + b"\n" + cubin


def unpack(data: bytes, key: str) -> tuple[str, bytes]:
    """(kernel symbol, cubin) of an entry written for `key`; ValueError saying what is wrong."""
    if not data.startswith(FORMAT):
        raise ValueError("not an entry of this cache format")
    head, sep, cubin = data[len(FORMAT):].partition(b"\n")
    if not sep:
        raise ValueError("truncated header")
    try:
        meta = json.loads(head)
        entry, size, digest = meta["entry"], meta["size"], meta["sha256"]
    except (ValueError, KeyError, TypeError):
        raise ValueError("unreadable header") from None
    if meta.get("key") != key:
        raise ValueError(f"written for key {meta.get('key')!r}, not {key!r}")
    if len(cubin) != size or hashlib.sha256(cubin).hexdigest() != digest:
        raise ValueError(f"{len(cubin)} cubin bytes that do not match its header ({size} bytes, sha256)")
    if not nvrtc.valid_elf(cubin):
        raise ValueError("the cubin is not a whole ELF file")
    return entry, cubin


def read_entry(path: Path, key: str) -> tuple[str, bytes] | None:
    """The entry at `path`, or None when there is none; a damaged or foreign entry warns (it is
    then compiled again and replaced)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return unpack(data, key)
    except ValueError as e:
        warnings.warn(f"numba_gemm: cached kernel {path.name} is unusable ({e}); compiling it again",
                      RuntimeWarning, stacklevel=3)
        return None


def write_entry(path: Path, key: str, entry: str, cubin: bytes) -> None:
    try:
        nvrtc.atomic_write(path, pack(key, entry, cubin))
    except OSError as e:
        nvrtc.warn_once(f"cannot write the kernel cache in {path.parent}", e)


# ---------------------------------------------------------------------------- compile

def compile_kernel(dispatcher, argtypes, cc) -> tuple[str, bytes]:
    """(kernel symbol, cubin) of `dispatcher` for `argtypes`, compiled by Numba exactly as
    CUDADispatcher.compile does on a device of compute capability `cc`; no GPU needed."""
    from numba.core import types
    from numba.cuda.compiler import compile_cuda, kernel_fixup
    from numba.cuda.core.compiler_lock import global_compiler_lock
    from numba.cuda.cudadrv import nvvm

    opts = _options(dispatcher)
    with global_compiler_lock:
        cres = compile_cuda(dispatcher.py_func, types.void, tuple(argtypes), debug=False,
                            lineinfo=opts["lineinfo"], forceinline=opts["forceinline"],
                            fastmath=opts["fastmath"],
                            nvvm_options={"fastmath": opts["fastmath"], "opt": 3 if opts["opt"] else 0},
                            cc=tuple(cc[:2]), max_registers=None, lto=opts["lto"])
        lib = cres.library
        entry = cres.fndesc.llvm_func_name
        kernel = lib.get_function(entry)
        lib._entry_name = entry
        kernel_fixup(kernel, False)
        nvvm.set_launch_bounds(kernel, opts["launch_bounds"])
        if lib.use_cooperative:
            raise NotCacheable("uses grid synchronisation (a cooperative launch)")
        ir = lib.get_llvm_str()
        linked = [name for name in _LINKED if name in ir]
        if linked:
            raise NotCacheable(f"calls {', '.join(linked)}, which Numba links in")
        image = lib.get_cubin(cc=tuple(cc))
    return entry, bytes(getattr(image, "code", image))


_memory: dict = {}                  # path -> (kernel symbol, cubin): this process's entries
_lock = threading.Lock()


def cubin(dispatcher, argtypes, cc=None, where=None) -> tuple[str, bytes, bool]:
    """(kernel symbol, cubin, compiled now) for `dispatcher` and `argtypes` on `cc` (default:
    this machine's GPU, or NO_GPU_CC): from this process, from disk, or compiled and stored.
    `where`: entry_path's answer when the caller has it."""
    cc = tuple(local_cc() if cc is None else cc)
    argtypes = tuple(argtypes)
    path, key = where or entry_path(dispatcher, argtypes, cc)
    hit = _memory.get(path)
    if hit is not None:
        return (*hit, False)
    with _lock, nvrtc.file_lock(path.with_suffix(".lock")):
        got = read_entry(path, key)
        compiled = got is None
        if compiled:
            got = compile_kernel(dispatcher, argtypes, cc)
            write_entry(path, key, *got)
        _memory[path] = got
    return (*got, compiled)


def forget(path: Path) -> None:
    """Drop an entry (this process's copy and the file), e.g. one the driver refused."""
    _memory.pop(path, None)
    try:
        path.unlink()
    except OSError:
        pass


# ---------------------------------------------------------------------------- load

_functions: dict = {}               # (context, path) -> CUfunction
_refused: dict = {}                 # (dispatcher, argument types, cc) -> why Numba launches it itself


def function(dispatcher, argtypes):
    """The CUfunction of `dispatcher` compiled for `argtypes` (Numba types), loaded into the
    current context (Numba's primary context, numba_gemm.runtime.driver) from the cache; None for a
    kernel that Numba's own launch must handle (NotCacheable)."""
    argtypes = tuple(argtypes)
    cc = local_cc()
    if (dispatcher, argtypes, cc) in _refused:
        return None
    try:
        where = entry_path(dispatcher, argtypes, cc)
        path = where[0]
        ctx = driver.current_context()
        fn = _functions.get((ctx, path))
        if fn is not None:
            return fn
        entry, image, _ = cubin(dispatcher, argtypes, cc, where)
    except NotCacheable as e:       # asked once: a second call must not compile it again
        _refused[(dispatcher, argtypes, cc)] = str(e)
        return None
    module = driver.load_module(image)
    if module is None:              # the driver refuses the image: compile once more
        warnings.warn(f"numba_gemm: the driver refused cached kernel {path.name}; compiling it again",
                      RuntimeWarning, stacklevel=2)
        forget(path)
        entry, image, _ = cubin(dispatcher, argtypes, cc, where)
        module = driver.load_module(image)
        if module is None:
            raise driver.DriverError(f"cuModuleLoadData({path.name}): the driver refuses a freshly "
                                     "compiled image (CUDA_ERROR_INVALID_IMAGE)")
    fn = _functions[(ctx, path)] = driver.module_function(module, entry)
    return fn

