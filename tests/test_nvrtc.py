"""NVRTC compile, on-disk cache and SASS of the native levels (runs without a GPU).

The levels are the registry's native ones, each compiled as it ships (its SOURCE with its
DEFINES: the same cubin the census and a launch use)."""
import re

import pytest

from numba_gemm.explain.sass import disassemble
from numba_gemm.registry import registry
from numba_gemm.runtime import nvrtc

LEVELS = [lv.module for lv in registry().values() if lv.native]
BY_NAME = {m.LEVEL: m for m in LEVELS}


@pytest.fixture(scope="module")
def sass():
    return {lv.LEVEL: disassemble(nvrtc.compile_variant(lv.SOURCE, lv.DEFINES)) for lv in LEVELS}


def _function(text, name):
    parts = re.split(r"\n\s*\.text\.", text)
    for p in parts[1:]:
        if p.startswith(name + ":"):
            return p
    raise AssertionError(f"{name} not in the cubin")


@pytest.mark.parametrize("lv", LEVELS, ids=lambda m: m.LEVEL)
def test_every_source_compiles_for_sm_90a_with_both_entries(lv, sass):
    for kind in ("f16", "bf16"):
        _function(sass[lv.LEVEL], lv.KERNEL_NAMES[kind])


@pytest.mark.parametrize("lv", LEVELS, ids=lambda m: m.LEVEL)
def test_sass_has_what_the_level_exists_for_and_no_spills(lv, sass):
    body = _function(sass[lv.LEVEL], lv.KERNEL_NAMES["f16"])
    ops = set(re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", body, re.M))
    for prefix in lv.SASS_MUST_HAVE:
        assert any(op.startswith(prefix) for op in ops), f"{lv.LEVEL}: no {prefix} in SASS"
    assert not any(op.startswith(("LDL", "STL")) for op in ops), f"{lv.LEVEL} uses local memory"
    log = nvrtc.compile_log(lv.SOURCE, defines=lv.DEFINES)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert spills and all(s == ("0", "0") for s in spills), log


def test_v10_loads_by_tma_only(sass):
    body = _function(sass["v10"], BY_NAME["v10"].KERNEL_NAMES["f16"])
    assert "UTMALDG.2D" in body and "LDGSTS" not in body
    # the K loop has no block-wide barrier: the only BAR.SYNC follows the mbarrier init
    assert body.count("BAR.SYNC") == 1


def test_cache_on_disk_and_key(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(nvrtc, "_cubins", {})
    cubin = nvrtc.compile_cubin("v7_wmma.cu")
    files = sorted(p.name for p in tmp_path.iterdir())
    assert any(f.endswith(".cubin") for f in files) and any(f.endswith(".log") for f in files)
    assert not any(f.endswith(".tmp") for f in files)
    assert cubin[:4] == b"\x7fELF"
    assert nvrtc.compile_cubin("v7_wmma.cu") == cubin           # in-process hit
    monkeypatch.setattr(nvrtc, "_cubins", {})
    assert nvrtc.compile_cubin("v7_wmma.cu") == cubin           # on-disk hit
    k = nvrtc.cache_key("v7_wmma.cu")
    assert k != nvrtc.cache_key("v7_wmma.cu", "sm_80")
    assert k != nvrtc.cache_key("v7_wmma.cu", extra=("-DX=1",))
    assert nvrtc.cache_key("v9_supertile.cu") != nvrtc.cache_key("v8_mma.cu")


def test_cache_key_covers_included_headers(tmp_path, monkeypatch):
    (tmp_path / "h.cuh").write_text("#define V 1\n")
    (tmp_path / "k.cu").write_text('#include "h.cuh"\nextern "C" __global__ void k(int* p) { *p = V; }\n')
    monkeypatch.setattr(nvrtc, "native_dir", lambda: tmp_path)
    k1 = nvrtc.cache_key("k.cu")
    (tmp_path / "h.cuh").write_text("#define V 2\n")
    assert nvrtc.cache_key("k.cu") != k1


def test_compile_error_carries_the_log(tmp_path, monkeypatch):
    (tmp_path / "bad.cu").write_text('extern "C" __global__ void k() { undeclared_thing(); }\n')
    monkeypatch.setattr(nvrtc, "native_dir", lambda: tmp_path)
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(nvrtc.CompileError, match="undeclared_thing"):
        nvrtc.compile_cubin("bad.cu")


def test_show_compile(tmp_path, monkeypatch, capsys):
    (tmp_path / "ok.cu").write_text('extern "C" __global__ void k(float* p) { p[threadIdx.x] *= 2.f; }\n')
    monkeypatch.setattr(nvrtc, "native_dir", lambda: tmp_path)
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NUMBA_GEMM_SHOW_COMPILE", "1")
    cubin = nvrtc.compile_cubin("ok.cu")
    err = capsys.readouterr().err
    assert "-arch=sm_90a" in err and "ok.cu" in err
    assert "EXIT" in disassemble(cubin)


def test_census_cli_prints_each_kernels_sass(capsys):
    from numba_gemm.explain import sass

    assert sass.main(["v7", "--sass"]) == 0
    out = capsys.readouterr().out
    assert out.count("// ===== v7: ") == 2 and out.count("HMMA") > 0


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


@pytest.mark.parametrize("lv", LEVELS, ids=lambda m: m.LEVEL)
def test_each_level_source_stands_alone(lv):
    """A level's .cu includes headers only - never another level - and has no hooks for one."""
    text = (nvrtc.native_dir() / lv.SOURCE).read_text()
    included = _INCLUDE.findall(text)
    assert included and all(name.endswith(".cuh") for name in included), included
    for hook in ("HG_ENTRY", "HG_NO_ENTRY", "HG_TILE_ORDER_DEFINED"):
        assert hook not in text


def test_a_tiled_source_without_its_tile_options_does_not_compile(tmp_path, monkeypatch):
    # tile_config.cuh has no default tile: only the level's CONFIG can say what it is
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path))
    with pytest.raises(nvrtc.CompileError, match="HG_"):
        nvrtc.compile_cubin("v8_mma.cu")
