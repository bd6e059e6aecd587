"""Where SASS censuses (numba_gemm.explain.sass) are kept and taken: a census compiles every kernel of a
level (~40 s for k6), so each is cached on disk per level, keyed by everything it depends on;
a process that runs the CUDA simulator takes its Numba levels' censuses in child processes with
the simulator off; and each level's progress is printed to stderr as `[census] ...` lines
(NUMBA_GEMM_CENSUS_PROGRESS=0 silences them).

A census travels here as plain dicts (dataclasses.asdict of a sass.Census): this module knows
where censuses come from and go, not what they hold, so it does not import numba_gemm.explain.sass.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CENSUS_MODULES = ("sass.py", "census_cache.py")   # the census's own code: a change takes it again
_HELD = "NUMBA_GEMM_CENSUS_LOCK_HELD"             # set while this process (or its parent) holds the lock


def progress_on() -> bool:
    return os.environ.get("NUMBA_GEMM_CENSUS_PROGRESS", "1") not in ("", "0")


def progress(msg: str) -> None:
    if progress_on():
        print(f"[census] {msg}", file=sys.stderr, flush=True)


def timed(name, fn):
    """fn(), between two progress lines that say how long it took."""
    progress(f"{name}: compiling ...")
    t = time.perf_counter()
    r = fn()
    progress(f"{name}: done in {time.perf_counter() - t:.1f} s")
    return r


def _run_streaming_progress(cmd, env):
    """subprocess.run(cmd) with the child's [census] lines passed to our stderr as they come.
    stdout (the JSON, SASS included: megabytes) is drained by a thread meanwhile, so a full pipe
    never blocks the child."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    chunks = []
    reader = threading.Thread(target=lambda: chunks.append(p.stdout.read()))
    reader.start()
    err = []
    for line in p.stderr:
        if line.startswith("[census]"):
            sys.stderr.write(line)
            sys.stderr.flush()
        else:
            err.append(line)
    reader.join()
    p.wait()
    return subprocess.CompletedProcess(cmd, p.returncode, "".join(chunks), "".join(err))


def in_children(kernels: list[str]) -> dict[str, dict]:
    """Census Numba kernels ("level:kernel") with the simulator off, in child processes
    (`python -m numba_gemm.explain.sass --kernels`): one per CPU (at most one per kernel), the
    kernels dealt out round-robin, since each compile is single-threaded. Dealt by kernel, not by
    level: a level's kernels compile side by side (k9st's four took 158 s in one process, one
    after another, on a 16-CPU machine), and no child needs more than its one import."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    root = str(Path(os.path.abspath(__file__)).parents[2])   # the directory that holds numba_gemm
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    env["NUMBA_GEMM_CENSUS_PROGRESS"] = "1" if progress_on() else "0"
    workers = max(1, min(len(kernels), os.cpu_count() or 1))
    groups = [kernels[i::workers] for i in range(workers)]

    def run(group):
        out = _run_streaming_progress([sys.executable, "-m", "numba_gemm.explain.sass", "--kernels", *group], env)
        if out.returncode != 0:
            raise RuntimeError(f"SASS census of {group} failed in a child process:\n{out.stderr[-4000:]}")
        return json.loads(out.stdout)

    data = {}
    with ThreadPoolExecutor(workers) as pool:
        for part in pool.map(run, groups):
            data.update(part)
    return {k: data[k] for k in kernels}


@functools.lru_cache(maxsize=None)
def _tool_versions() -> str:
    from importlib import metadata

    # nvrtc is imported where it is used, as in sass: it loads the CUDA bindings, which
    # importing the census does not need

    parts = []
    for dist in ("numba", "numba-cuda", "cuda-core", "cuda-bindings", "nvidia-nvjitlink", "nvidia-cuda-nvdisasm"):
        try:
            parts.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    from ..runtime import nvrtc

    nvdisasm = nvrtc.nvdisasm_path()
    if nvdisasm:
        parts.append(subprocess.run([nvdisasm, "--version"], capture_output=True, text=True).stdout)
    return "\n".join(parts)


def census_key(level) -> str:
    """sha256 of what a level's census depends on: its sources (a native level: the NVRTC cache
    key of its shipped tile; a Numba level: every module of its package and the intrinsics),
    the census's own modules, and the compiler and disassembler versions."""
    from ..runtime import nvrtc

    here = Path(__file__).parent
    h = hashlib.sha256()
    for name in CENSUS_MODULES:
        h.update((here / name).read_bytes())
    if level.native:
        h.update(nvrtc.cache_key(level.module.SOURCE, nvrtc.DEFAULT_ARCH,
                                 tuple(getattr(level.module, "DEFINES", ()))).encode())
    else:
        files = sorted(Path(level.module.__file__).parent.glob("*.py"))
        files.append(here.parent / "ptx" / "intrinsics.py")
        for f in files:
            h.update(f.name.encode() + b"\0" + f.read_bytes())
    h.update(_tool_versions().encode())
    return h.hexdigest()[:32]


def cache_path(level) -> Path:
    from ..runtime import nvrtc

    return nvrtc.cache_dir() / "census" / f"{level.name}.{census_key(level)}.json"


def load(level) -> list[dict] | None:
    """The cached census of a level as JSON, or None (not cached, or unreadable: taken again)."""
    try:
        return json.loads(cache_path(level).read_text())
    except (OSError, ValueError):
        return None


def store(level, censuses: list[dict]) -> None:
    from ..runtime import nvrtc

    try:
        nvrtc.atomic_write(cache_path(level), json.dumps(censuses).encode())
    except OSError:
        pass             # a read-only cache: the census is simply taken again next time


@contextlib.contextmanager
def one_taker():
    """Held while a process takes censuses: pytest workers or tools started together then
    compile each level once, and the others read it from the cache (an advisory file lock; none
    where the cache cannot be written or the platform has no fcntl). The census children of the
    holder inherit it through the environment and do not wait for it."""
    from ..runtime import nvrtc

    if os.environ.get(_HELD):
        yield
        return
    try:
        import fcntl

        path = nvrtc.cache_dir() / "census.lock"      # beside the census entries, not among them
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a")
    except (ImportError, OSError):
        yield
        return
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        os.environ[_HELD] = "1"
        try:
            yield
        finally:
            del os.environ[_HELD]

