"""The on-disk NVRTC cache survives faults: torn or corrupt entries, an unusable directory, and
8 processes compiling the same kernel at once. CPU only (NVRTC needs no GPU); a tiny kernel."""
import hashlib
import os
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

from numba_gemm.runtime import nvrtc

TINY = 'extern "C" __global__ void tiny(float* x) { x[threadIdx.x] *= 2.0f; }\n'


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "tiny.cu").write_text(TINY)
    cache = tmp_path / "cache"
    monkeypatch.setattr(nvrtc, "native_dir", lambda: src)
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(cache))
    monkeypatch.setattr(nvrtc, "_cubins", {})
    monkeypatch.setattr(nvrtc, "_logs", {})
    monkeypatch.setattr(nvrtc, "_warned", set())
    return src, cache


def _count_compiles(monkeypatch):
    calls = []
    real = nvrtc._nvrtc_compile

    def counting(*a):
        calls.append(a)
        return real(*a)

    monkeypatch.setattr(nvrtc, "_nvrtc_compile", counting)
    return calls


def test_fresh_compile_is_cached_on_disk(tiny, monkeypatch):
    calls = _count_compiles(monkeypatch)
    cubin = nvrtc.compile_cubin("tiny.cu")
    assert nvrtc.valid_elf(cubin) and nvrtc.cubin_path("tiny.cu").read_bytes() == cubin
    monkeypatch.setattr(nvrtc, "_cubins", {})
    assert nvrtc.compile_cubin("tiny.cu") == cubin and len(calls) == 1    # read back, not rebuilt


def test_compile_log_is_cached_with_the_cubin(tiny, monkeypatch):
    """The SASS census reads ptxas's log (spills) of a cubin compiled in another process: it
    comes back from the disk cache, without compiling again."""
    log = nvrtc.compile_log("tiny.cu")
    assert "Function properties for tiny" in log and "spill stores" in log
    assert nvrtc.cubin_path("tiny.cu").with_suffix(".log").read_text() == log
    monkeypatch.setattr(nvrtc, "_cubins", {})
    monkeypatch.setattr(nvrtc, "_logs", {})
    calls = _count_compiles(monkeypatch)
    assert nvrtc.compile_log("tiny.cu") == log and calls == []


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_torn_or_corrupt_entry_is_recompiled(tiny, monkeypatch, damage):
    good = nvrtc.compile_cubin("tiny.cu")
    path = nvrtc.cubin_path("tiny.cu")
    path.write_bytes({"truncate": good[: len(good) // 2], "garbage": os.urandom(len(good)),
                      "empty": b""}[damage])
    monkeypatch.setattr(nvrtc, "_cubins", {})
    calls = _count_compiles(monkeypatch)
    assert nvrtc.compile_cubin("tiny.cu") == good and len(calls) == 1
    assert path.read_bytes() == good                                     # repaired on disk


def test_unusable_cache_directory_compiles_in_memory_and_warns_once(tiny, monkeypatch, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(blocker / "cache"))   # cannot be created
    with pytest.warns(RuntimeWarning, match="compiling in memory") as rec:
        cubin = nvrtc.compile_cubin("tiny.cu")
        other = nvrtc.compile_variant("tiny.cu", ["-DUNUSED=1"])
    assert len(rec) == 1 and nvrtc.valid_elf(cubin) and nvrtc.valid_elf(other)
    assert "tiny" in nvrtc.compile_log("tiny.cu")          # ptxas's log, kept in memory


def test_read_only_cache_directory(tiny, monkeypatch):
    _, cache = tiny
    cache.mkdir()
    if os.geteuid() == 0:       # root writes anywhere: make the write itself fail as EACCES would
        def refuse(*a, **k):
            raise PermissionError(13, "Permission denied", str(cache))

        monkeypatch.setattr(nvrtc.tempfile, "mkstemp", refuse)
    else:
        cache.chmod(0o500)
    try:
        with pytest.warns(RuntimeWarning, match="cannot write the kernel cache"):
            assert nvrtc.valid_elf(nvrtc.compile_cubin("tiny.cu"))
        with warnings.catch_warnings():
            warnings.simplefilter("error")                  # once per process, not per kernel
            nvrtc.compile_variant("tiny.cu", ["-DOTHER=2"])
    finally:
        cache.chmod(0o700)


CHILD = textwrap.dedent("""
    import hashlib, os, sys, time
    from pathlib import Path
    from numba_gemm.runtime import nvrtc
    nvrtc.native_dir = lambda: Path(sys.argv[1])
    compiled = []
    real = nvrtc._nvrtc_compile
    nvrtc._nvrtc_compile = lambda *a: compiled.append(1) or real(*a)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.005)
    cubin = nvrtc.compile_cubin("tiny.cu")
    print(hashlib.sha256(cubin).hexdigest(), len(compiled))
""")


def test_eight_processes_compiling_at_once(tiny, tmp_path):
    src, cache = tiny
    go = tmp_path / "go"
    env = dict(os.environ, NUMBA_GEMM_CACHE_DIR=str(cache))
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, str(src), str(go)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    time.sleep(1.0)          # let them import, then start them together
    go.write_text("go")
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    digests = {o.split()[0] for o, _ in outs}
    compiles = sum(int(o.split()[1]) for o, _ in outs)
    disk = nvrtc.cubin_path("tiny.cu").read_bytes()
    assert digests == {hashlib.sha256(disk).hexdigest()} and nvrtc.valid_elf(disk)
    assert compiles == 1                       # the lock: one compiled, seven read its result
    assert not [p for p in cache.iterdir() if p.name.endswith(".tmp")]
