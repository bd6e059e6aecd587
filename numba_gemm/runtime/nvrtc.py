"""Compile the native levels with NVRTC, cache the cubins on disk, load them.

Everything here works from pip wheels: NVRTC (nvidia-cuda-nvrtc) and the CUDA headers found
by cuda.pathfinder. Compiling needs no GPU; loading does (numba_gemm.runtime.driver), and launches go
through numba_gemm.runtime.launch.launch_native.

- compile_cubin(name, arch) -> bytes   SASS for one .cu in numba_gemm.native (cached on disk)
- compile_variant(name, defines, arch) -> bytes   the same with extra -D options
- function(name, kernel, arch, defines) -> CUfunction loaded into Numba's current context
- defines: extra "-DNAME=VALUE" options (e.g. a level's tile configuration); they are compile
  options, so they are part of the cache key.

We compile straight to CUBIN for a real architecture (sm_90a), never to PTX: the GPU's driver
may be older than this NVRTC, and a driver refuses PTX from a newer ISA, while SASS for a
supported architecture loads fine.

Cache key: sha256 of the source, every header it includes (ours and the toolkit's), the
options, the NVRTC version and the arch. Files are written to a temp name and renamed, so a
concurrent reader never sees half a cubin; a lock file lets one process compile while others
wait for its result. A cached cubin that is not a whole ELF file (truncated, overwritten), or
that the driver refuses to load, is compiled again. When the cache directory cannot be
created or written, kernels are compiled in memory (one warning per process).

Environment:
  NUMBA_GEMM_CACHE_DIR=path    cache location (default ~/.cache/numba_gemm)
  NUMBA_GEMM_SHOW_COMPILE=1    print the equivalent compile command when NVRTC runs
"""
from __future__ import annotations

import functools
import hashlib
import importlib.resources
import os
import re
import shutil
import struct
import sys
import tempfile
import threading
import warnings
from pathlib import Path

from . import driver

DEFAULT_ARCH = "sm_90a"

# -lineinfo keeps SASS readable against the source at no runtime cost. --no-cache: NVRTC 12.9+
# keeps a cache of its own, and a program served from it comes back without ptxas's -v lines
# (registers, spills), which the census reads; this module caches each cubin with its log.
BASE_OPTIONS = ("-std=c++17", "-default-device", "-lineinfo", "--ptxas-options=-v", "--no-cache")

_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)


class CompileError(RuntimeError):
    """NVRTC rejected a source; the message carries the full NVRTC log."""


# ---------------------------------------------------------------------------- locations

def native_dir() -> Path:
    return Path(str(importlib.resources.files("numba_gemm.native")))


@functools.lru_cache(maxsize=None)
def include_dirs() -> tuple[Path, ...]:
    """Our headers first, then the toolkit headers from the pip wheels (cuda_fp16.h, mma.h, cuda.h)."""
    dirs = [native_dir()]
    from cuda.pathfinder import find_nvidia_header_directory

    for lib in ("cudart", "nvrtc"):
        try:
            d = find_nvidia_header_directory(lib)
        except Exception:  # noqa: BLE001 - a missing wheel shows up as a compile error below
            d = None
        if d and Path(d) not in dirs:
            dirs.append(Path(d))
    # last resort for headers the wheels lack (e.g. crt/mma.h without nvidia-cuda-crt): a CUDA install
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    if Path(home, "include", "cuda_fp16.h").is_file() and Path(home, "include") not in dirs:
        dirs.append(Path(home, "include"))
    return tuple(dirs)


def cache_dir() -> Path:
    d = os.environ.get("NUMBA_GEMM_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "numba_gemm"
    )
    return Path(d)


@functools.lru_cache(maxsize=None)
def nvrtc_version() -> tuple[int, int]:
    from cuda.bindings import nvrtc

    err, major, minor = nvrtc.nvrtcVersion()
    _check_nvrtc(err, "nvrtcVersion")
    return int(major), int(minor)


def nvdisasm_path() -> str | None:
    found = shutil.which("nvdisasm")
    if found:
        return found
    try:
        from cuda.pathfinder import find_nvidia_binary_utility

        return find_nvidia_binary_utility("nvdisasm")
    except Exception:  # noqa: BLE001
        return None


# ---------------------------------------------------------------------------- compile

def _resolve(name: str, quoted: bool, here: Path) -> Path | None:
    candidates = ([here] if quoted else []) + list(include_dirs())
    for d in candidates:
        p = d / name
        if p.is_file():
            return p
    return None


def _dependencies(path: Path, seen: dict[Path, bytes], depth: int = 0) -> None:
    """Every file `path` includes, recursively (toolkit headers to a bounded depth)."""
    text = path.read_bytes()
    seen[path] = text
    if depth > 6:
        return
    for quote, name in _INCLUDE_RE.findall(text.decode("utf-8", "replace")):
        dep = _resolve(name, quote == '"', path.parent)
        if dep is not None and dep not in seen:
            _dependencies(dep, seen, depth + 1)


def options_for(arch: str, extra: tuple[str, ...] = ()) -> list[str]:
    return [*BASE_OPTIONS, f"-arch={arch}", *(f"-I{d}" for d in include_dirs()), *extra]


def cache_key(source_name: str, arch: str = DEFAULT_ARCH, extra: tuple[str, ...] = ()) -> str:
    src = native_dir() / source_name
    if not src.is_file():
        raise FileNotFoundError(f"no native source {source_name!r} in {native_dir()}")
    files: dict[Path, bytes] = {}
    _dependencies(src, files)
    h = hashlib.sha256()
    for p in sorted(files, key=lambda p: (p != src, p.name, str(p))):
        h.update(p.name.encode() + b"\0" + hashlib.sha256(files[p]).digest())
    # include dirs are part of the options, but their location is not what matters: content is.
    opts = [o for o in options_for(arch, extra) if not o.startswith("-I")]
    h.update(repr((opts, nvrtc_version(), arch)).encode())
    return h.hexdigest()[:32]


def _check_nvrtc(err, what: str, prog=None):
    from cuda.bindings import nvrtc

    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = _program_log(prog) if prog is not None else ""
        raise CompileError(f"{what} failed: {err}\n{log}")


def _program_log(prog) -> str:
    from cuda.bindings import nvrtc

    err, size = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return ""
    buf = b" " * size
    (err,) = nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0 ").decode("utf-8", "replace")


def _nvrtc_compile(source_name: str, arch: str, extra: tuple[str, ...]) -> tuple[bytes, str]:
    from cuda.bindings import nvrtc

    src = native_dir() / source_name
    opts = options_for(arch, extra)
    if os.environ.get("NUMBA_GEMM_SHOW_COMPILE", "0") not in ("", "0"):
        print(f"[numba_gemm] nvrtc {' '.join(opts)} {src}  (NVRTC {'.'.join(map(str, nvrtc_version()))})",
              file=sys.stderr)
    err, prog = nvrtc.nvrtcCreateProgram(src.read_bytes(), str(src).encode(), 0, [], [])
    _check_nvrtc(err, "nvrtcCreateProgram")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(
                f"NVRTC could not compile {source_name} for {arch}:\n{_program_log(prog)}"
            )
        log = _program_log(prog)
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check_nvrtc(err, "nvrtcGetCUBINSize", prog)
        cubin = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        _check_nvrtc(err, "nvrtcGetCUBIN", prog)
        return bytes(cubin), log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def atomic_write(path: Path, data: bytes) -> None:
    """Write to a temp file in the same directory, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def valid_elf(data: bytes) -> bool:
    """A whole ELF64 file: magic, and the section table and every section inside the bytes
    (a truncated or overwritten cache entry fails this)."""
    if len(data) < 64 or data[:5] != b"\x7fELF\x02":
        return False
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    if shentsize < 64 or shoff + shnum * shentsize > len(data):
        return False
    for i in range(shnum):
        sh_type, = struct.unpack_from("<I", data, shoff + i * shentsize + 4)
        off, size = struct.unpack_from("<QQ", data, shoff + i * shentsize + 24)
        if sh_type != 8 and off + size > len(data):      # 8: SHT_NOBITS occupies no file bytes
            return False
    return True


_warned = set()


def warn_once(what: str, err: Exception) -> None:
    if what not in _warned:
        _warned.add(what)
        warnings.warn(f"numba_gemm: {what} ({err}); compiling in memory for this process. "
                      "Set NUMBA_GEMM_CACHE_DIR to a writable directory to keep compiled kernels.",
                      RuntimeWarning, stacklevel=4)


def cubin_path(source_name: str, arch: str = DEFAULT_ARCH, extra: tuple[str, ...] = ()) -> Path:
    stem = Path(source_name).stem
    return cache_dir() / f"{stem}.{arch}.{cache_key(source_name, arch, extra)}.cubin"


_compile_lock = threading.Lock()


def _defines(defines) -> tuple[str, ...]:
    out = tuple(defines or ())
    for d in out:
        if not (isinstance(d, str) and d.startswith("-D") and len(d) > 2 and " " not in d):
            raise ValueError(f"a define is one '-DNAME[=VALUE]' option without spaces, got {d!r}")
    return out


def compile_cubin(source_name: str, arch: str = DEFAULT_ARCH) -> bytes:
    """SASS (a cubin) for native/<source_name>, compiled by NVRTC for `arch`, cached on disk."""
    return _compile(source_name, arch, ())


def compile_variant(source_name: str, defines, arch: str = DEFAULT_ARCH) -> bytes:
    """compile_cubin with extra -D options (a level's non-default tile configuration)."""
    return _compile(source_name, arch, _defines(defines))


def compile_log(source_name: str, arch: str = DEFAULT_ARCH, defines=()) -> str:
    """The NVRTC/ptxas log of the cached compile (register counts, spill stores and loads)."""
    defines = _defines(defines)
    path = cubin_path(source_name, arch, defines)
    _compile(source_name, arch, defines)
    if path in _logs:
        return _logs[path]
    try:
        return path.with_suffix(".log").read_text()
    except OSError:
        return ""


_cubins: dict = {}
_logs: dict = {}


def _read_cached(path: Path) -> bytes | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if valid_elf(data) else None     # a torn or corrupt entry: compile again


class file_lock:
    """An exclusive lock on `path` across processes (so one compiles while the others wait);
    a no-op where the directory cannot hold a lock file."""

    def __init__(self, path: Path):
        self.path, self.fd = path, None

    def __enter__(self):
        try:
            import fcntl

            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except (OSError, ImportError):
            if self.fd is not None:
                os.close(self.fd)
            self.fd = None
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)      # closing releases the lock


def _compile(source_name: str, arch: str, extra: tuple[str, ...]) -> bytes:
    path = cubin_path(source_name, arch, extra)
    hit = _cubins.get(path)
    if hit is not None:
        return hit
    with _compile_lock, file_lock(path.with_suffix(".lock")):
        cubin = _read_cached(path)
        if cubin is None:
            cubin, log = _nvrtc_compile(source_name, arch, extra)
            _logs[path] = log
            try:
                atomic_write(path.with_suffix(".log"), log.encode())
                atomic_write(path, cubin)
            except OSError as e:
                warn_once(f"cannot write the kernel cache in {path.parent}", e)
        _cubins[path] = cubin
    return cubin


def forget(source_name: str, arch: str = DEFAULT_ARCH, extra: tuple[str, ...] = ()) -> None:
    """Drop a cached cubin (memory and disk), e.g. one the driver refused to load."""
    path = cubin_path(source_name, arch, extra)
    _cubins.pop(path, None)
    try:
        path.unlink()
    except OSError:
        pass


# ---------------------------------------------------------------------------- load

_modules: dict = {}
_functions: dict = {}
_load_lock = threading.Lock()


def function(source_name: str, kernel_name: str, arch: str = DEFAULT_ARCH, defines=()):
    """The CUfunction `kernel_name` of native/<source_name> (compiled with `defines`), loaded
    once per context (numba_gemm.runtime.driver)."""
    defines = _defines(defines)
    ctx = driver.current_context()
    key = (ctx, source_name, kernel_name, arch, defines)
    fn = _functions.get(key)
    if fn is not None:
        return fn
    with _load_lock:
        mkey = (ctx, source_name, arch, defines)
        mod = _modules.get(mkey)
        if mod is None:
            mod = driver.load_module(compile_variant(source_name, defines, arch))
            if mod is None:                  # a corrupt cache entry: once more
                forget(source_name, arch, defines)
                mod = driver.load_module(compile_variant(source_name, defines, arch))
                if mod is None:
                    raise driver.DriverError(f"cuModuleLoadData({source_name}): the driver refuses "
                                             "a freshly compiled image (CUDA_ERROR_INVALID_IMAGE)")
            _modules[mkey] = mod
        fn = _functions[key] = driver.module_function(mod, kernel_name)
    return fn
