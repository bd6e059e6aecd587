"""The wgmma tile family: v11 (and v11sk, which shares its K loop) at bm ∈ {64, 128} ×
bn ∈ {64, 128, 256}, from one source.

CI (no GPU): every tile compiles with NVRTC for sm_90a, its HGMMA 64 x bn (m64n{bn}k16), no local
memory or spills, no serialised wgmma, registers following the bn / 2 accumulators; both
epilogues (registers and TMA stores) at every width and C type; WgmmaTile's problems() and
defines() for good and bad tiles, the shared memory and boxes following the record; v11.run's
bm/bn keywords refused with a clear error before anything is touched, and a recorded launch of
another tile with its own grid, block, shared memory and cubin. GPU: each tile exact on ragged
shapes, both dtypes, alpha/beta and NaN-poisoned C with beta == 0.
    python -m pytest -q tests/test_wgmma_tiles.py -m gpu
"""
import ctypes
import dataclasses
import re

import numpy as np
import pytest

from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import _wgmma as wg
from numba_gemm.hgemm import v11_wgmma as v11
from numba_gemm.hgemm import v11sk_splitk as v11sk
from numba_gemm.runtime import nvrtc
from numba_gemm.util import ceil_div
from tests.test_hopper import DTYPES, SHAPES, _case, _macros, _opcodes, census_ops

TILES = [(bm, bn) for bm in (64, 128) for bn in wg.WGMMA_N]
tile_ids = [f"{bm}x{bn}" for bm, bn in TILES]


# ---------------------------------------------------------------------------- the record

@pytest.mark.parametrize("bm, bn", TILES, ids=tile_ids)
def test_every_tile_is_one_record(bm, bn):
    """Shared memory, threads, boxes, grid and -D options all follow the record."""
    t = v11.tile(bm, bn)
    assert (t.bm, t.bn, t.bk, t.stages, t.tma_lag, t.producer) == (bm, bn, 64, 4, 2, False)
    assert t.problems() == [] and t.threads == 128 * (bm // 64)
    assert t.stage_bytes == bm * 128 + (bn // 64) * 8192 and t.stage_bytes % 1024 == 0
    assert t.smem() == 4 * t.stage_bytes + 1024 + 64 <= cm.SMEM_LIMIT
    assert wg.boxes(t) == ((bm, 64), (64, 64))          # B arrives as bn / 64 panels of one box
    m = _macros(t.defines())
    assert (int(m["HG_BM"]), int(m["HG_BN"]), int(m["HG_STAGES"]), int(m["HG_TMA_LAG"])) == (bm, bn, 4, 2)
    assert v11.launch_config(1000, 1000, 64, t) == ((ceil_div(1000, bm) * ceil_div(1000, bn), 1, 1),
                                                    (t.threads, 1, 1), t.smem())
    assert (v11.tile(bm, bn).defines() == v11.DEFINES) == ((bm, bn) == (128, 256))   # its own cubin


def test_bad_tiles_are_refused():
    t = wg.WgmmaTile
    for bad, why in [(t(bn=192), "bn must be one of"), (t(bn=32), "bn must be one of"),
                     (t(bm=256), "bm must be 64 or 128")]:
        assert any(why in p for p in bad.problems()), bad
        with pytest.raises(ValueError, match="not supported"):
            bad.defines()
    assert t(bn=64, producer=True).problems() == [] == t(bm=64, bn=64, producer=True).problems()


@pytest.mark.parametrize("kw, msg", [
    ({"bm": 32}, "no tile bm=32, bn=256: bm must be 64 or 128"),
    ({"bn": 192}, r"no tile bm=128, bn=192: bn must be one of \(64, 128, 256\)"),
    ({"bm": 64, "bn": 512}, "no tile bm=64, bn=512"),
    ({"bn": True}, "bn must be an int, got True"),
    ({"bm": "64"}, "bm must be an int, got '64'"),
    ({"bn": 128.0}, "bn must be an int, got 128.0"),
])
def test_run_refuses_a_tile_before_touching_anything(kw, msg):
    with pytest.raises(ValueError, match=f"level v11: {msg}"):
        v11.run(None, None, None, 1.0, 0.0, **kw)


def test_run_with_another_tile_launches_that_tile(monkeypatch):
    """Recorded, no GPU: the tile's cubin (its -D options), grid, block and shared memory."""
    from numba_gemm.runtime import driver, launch

    compiled, mapped = [], []

    def function(source, name, defines=()):
        compiled.append((source, name, tuple(defines)))
        return 0x77

    def maps_and_args(level, A, B, C, alpha, beta, config):
        mapped.append(config)
        return [ctypes.c_int32(-1)]

    class _Array:
        def __init__(self, shape, dtype):
            self.shape, self.dtype = shape, np.dtype(dtype)

    monkeypatch.setattr(nvrtc, "function", function)
    monkeypatch.setattr(driver, "allow_dynamic_smem", lambda fn, smem: None)
    monkeypatch.setattr(v11.wg, "maps_and_args", maps_and_args)
    monkeypatch.setattr(v11.cm, "sm_count", lambda: 132)
    A, B, C = _Array((512, 1024), np.float16), _Array((1024, 512), np.float16), _Array((512, 512), np.float32)
    big = _Array((4096, 1024), np.float16), _Array((1024, 4096), np.float16), _Array((4096, 4096), np.float32)
    with launch.recording() as rec:
        v11.run(A, B, C, 1.0, 0.0, bm=64, bn=128)
        v11.run(A, B, C, 1.0, 0.0)
        v11.run(*big, 1.0, 0.0, bm=64, bn=64)
        v11.run(A, B, C, 1.0, 0.0, bm=64, bn=64)
    small, shipped, many, narrow = rec.launches
    t, n = v11.tile(64, 128), v11.tile(64, 64)
    deep = dataclasses.replace(n, stages=8)        # 64 tiles on 132 SMs: as deep as fits, up to 8
    assert (small.grid, small.block, small.smem) == ((8 * 4, 1, 1), (128, 1, 1), t.smem())   # 128 wide: 4
    assert (shipped.grid, shipped.block, shipped.smem) == ((4 * 2, 1, 1), (256, 1, 1), v11.CONFIG.smem())
    assert (many.grid, many.smem) == ((64 * 64, 1, 1), n.smem())               # 4096 tiles: 4 stages
    assert (narrow.grid, narrow.smem) == ((8 * 8, 1, 1), deep.smem())
    assert mapped == [t, v11.CONFIG, n, n]                     # the maps are the tile's, at any depth
    assert [c[2] for c in compiled] == [t.defines(), v11.DEFINES, n.defines(), deep.defines()]


def test_hopper_top_spec_times_a_tile(monkeypatch):
    from tests.test_hopper_top import top

    c = top.Competitor("v11:bm=64:bn=128")
    assert (c.parent, c.kwargs) == ("v11", {"bm": 64, "bn": 128})
    seen = []
    monkeypatch.setattr(v11, "run", lambda *a, **k: seen.append(k))
    c.run("A", "B", "C", 1.0, 0.0)
    assert seen == [{"bm": 64, "bn": 128}]


# ---------------------------------------------------------------------------- auto

AUTO_SHAPES = [(512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048), (4096, 128, 4096),
               (128, 4096, 4096), (4096, 4096, 256), (4096, 4096, 4096)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_auto_ranks_the_calibrated_tiles_among_the_levels(dtype, monkeypatch):
    """candidates() (what gemm(), plan() and the suite read) is rank() with v11's calibrated
    tiles placed by their own predictions: the levels keep their order, every tile it offers
    has its entry, explain() names the pick as a spec; a tile whose entry is gone is listed by
    rank(tiles=True), unpriced, and never offered."""
    from numba_gemm import choose

    for shape in AUTO_SHAPES:
        plain, cand = choose.rank(dtype, *shape, native=True), choose.candidates(dtype, *shape, native=True)
        assert not any(q.kwargs for q in plain)
        assert [q for q in cand if not q.kwargs] == plain
        assert all(q.ms is not None and choose.params(q.name, dtype) is not None for q in cand if q.kwargs)
        assert [q.ms for q in cand if q.ms is not None] == sorted(q.ms for q in cand if q.ms is not None)
        text = choose.explain(dtype, *shape, native=True, top=3)
        assert text.splitlines()[0] == f"auto for {dtype} {'x'.join(map(str, shape))}: {cand[0].name}"
    cal = choose.calibration()
    gone = {k: v for k, v in cal["levels"].items() if k != "v11:bm=64:bn=64"}
    monkeypatch.setattr(choose, "_calibration", {**cal, "levels": gone})
    assert all(q.name != "v11:bm=64:bn=64" for q in choose.candidates(dtype, 512, 512, 512, native=True))
    listed = [q for q in choose.rank(dtype, 512, 512, 512, native=True, tiles=True) if q.name == "v11:bm=64:bn=64"]
    assert len(listed) == 1 and listed[0].ms is None


def test_a_calibrated_tile_is_ranked_by_its_own_waves(monkeypatch):
    """Given an entry for v11:bm=64:bn=64 (here v11's own constants), that tile is priced from its
    own CTAs: at 512^3 its 64 CTAs beat the 8 of 128x256 and it ranks above v11 with its keywords;
    at 4096^3 (4096 CTAs, 32 waves) it prices the same work as v11. rank() without tiles is
    unchanged. (v11's power_drop set to 0 here: it prices the waves after the first higher, and
    the 64x64 tile has more of its work in them.)"""
    from numba_gemm import choose

    cal = choose.calibration()
    cool = {d: {**p, "power_drop": 0.0} for d, p in cal["levels"]["v11"].items()}
    levels = {k: v for k, v in cal["levels"].items() if ":" not in k} | {"v11": cool}   # no tile calibrated ...
    patched = {**cal, "levels": {**levels, "v11:bm=64:bn=64": cool}}                    # ... but this one
    monkeypatch.setattr(choose, "_calibration", {**cal, "levels": levels})
    before = choose.rank("float16", 512, 512, 512, native=True)
    monkeypatch.setattr(choose, "_calibration", patched)
    tiled = choose.rank("float16", 512, 512, 512, native=True, tiles=True)
    names = [q.name for q in tiled]
    tile = tiled[names.index("v11:bm=64:bn=64")]
    v11 = next(q for q in before if q.name == "v11")
    assert names.index("v11:bm=64:bn=64") < names.index("v11")
    assert (tile.kwargs, tile.geometry) == ((("bm", 64), ("bn", 64)), choose.Geometry(64, 64))
    assert "64 CTAs in 1 wave" in tile.why and tile.ms < v11.ms
    assert choose.rank("float16", 512, 512, 512, native=True) == before
    big = {q.name: q.ms for q in choose.rank("float16", 4096, 4096, 4096, native=True, tiles=True)}
    assert big["v11:bm=64:bn=64"] == pytest.approx(big["v11"])
    priced = re.compile(rf"v11:bm=64:bn=64 +{tile.ms * 1e3:.1f} µs  64x64 tiles: 64 CTAs in 1 wave")
    assert priced.search(choose.explain("float16", 512, 512, 512, native=True, top=len(tiled)))


# ---------------------------------------------------------------------------- NVRTC + census

def _registers(source, defines):
    return {int(r) for r in re.findall(r"Used (\d+) registers", nvrtc.compile_log(source, defines=defines))}


@pytest.mark.parametrize("lv", [v11, v11sk], ids=["v11", "v11sk"])
@pytest.mark.parametrize("bm, bn", TILES, ids=tile_ids)
def test_every_tile_compiles_with_its_census(lv, bm, bn):
    """m64n{bn}k16 and nothing wider, both dtypes; no spills or local memory (census_ops);
    registers follow the bn / 2 accumulators (128 x 256: 154 = 128 + 26)."""
    t = wg.WgmmaTile(bm=bm, bn=bn)
    ops = census_ops(lv.SOURCE, t.defines(), lv.KERNEL_NAMES.values(), lv.SASS_MUST_HAVE,
                     lv.SASS_MUST_NOT_HAVE, wgmma_n=bn)
    assert {o for o in ops if o.startswith("HGMMA")} == {f"HGMMA.64x{bn}x16.F32", f"HGMMA.64x{bn}x16.F32.BF16"}
    assert sum(o.startswith("HGMMA") for o in ops) % 4 == 0               # whole 64-deep stages
    regs = _registers(lv.SOURCE, t.defines())
    assert len(regs) == 1 and bn // 2 < regs.pop() <= bn // 2 + 32


def _per_kernel(sass_text):
    out, name = {}, None
    for line in sass_text.splitlines():
        m = re.match(r"\s*\.text\.(\w+):", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name:
            out[name] += _opcodes(line + "\n")
    return out


def test_both_epilogues_compile_at_every_width():
    """native/wgmma_epilogues.cu: per width and C type, the register path's global stores and the
    TMA path's shared stores (N / 4 pairs per thread) and bulk stores (one per 128-byte box
    column: N * sizeof(C) / 128); 16-bit C packed by F2FP; no local memory."""
    from numba_gemm.explain import sass

    src = "wgmma_epilogues.cu"
    cubin = nvrtc.compile_variant(src, ())
    log = nvrtc.compile_log(src)
    spills = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert len(spills) == 9 and all(s == ("0", "0", "0") for s in spills), log
    ops = _per_kernel(sass.disassemble(cubin))
    sizes = {"f32": 4, "f16": 2, "bf16": 2}
    assert set(ops) == {f"epi_{n}_{c}" for n in wg.WGMMA_N for c in sizes}
    for n in wg.WGMMA_N:
        for c, size in sizes.items():
            k = ops[f"epi_{n}_{c}"]
            count = lambda p: sum(o.startswith(p) for o in k)
            assert count("UTMASTG.2D") == n * size // 128, (n, c)
            assert count("STS") == n // 4 and count("STG") > 0, (n, c)
            assert (count("F2FP") > 0) == (size == 2) and count("LDL") == count("STL") == 0, (n, c)


# ---------------------------------------------------------------------------- on the GPU

# test_hopper's ragged shapes without the 4097 cube (the shipped tile's test has it), plus an N
# that leaves a partial 64-wide panel (200 = 3 x 64 + 8)
GPU_SHAPES = [s for s in SHAPES if s[0] < 4097] + [(260, 200, 520)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("bm, bn", TILES, ids=tile_ids)
def test_every_tile_exact_on_ragged_shapes(bm, bn, dtype):
    from functools import partial
    from types import SimpleNamespace

    lv = SimpleNamespace(LEVEL=f"v11 bm={bm} bn={bn}", run=partial(v11.run, bm=bm, bn=bn))
    rng = np.random.default_rng()
    for M, N, K in GPU_SHAPES:
        _case(lv, M, N, K, dtype, 0.5, 3.0, rng)
        _case(lv, M, N, K, dtype, 1.0, 0.0, rng)     # beta == 0: NaN in C must not leak


def test_auto_runs_a_calibrated_tile_with_its_keywords(monkeypatch):
    """gemm()'s candidates are Levels: a calibrated tile comes as v11's Level variant named by
    its spec, whose run() passes the tile's keywords to v11's run()."""
    from numba_gemm import choose

    first = choose.candidates("float16", 512, 512, 512, native=True)[0]
    lv = choose.auto_candidates(np.dtype(np.float16), 512, 512, 512, native=True)[0]
    assert (lv.name, lv.kwargs) == (first.name, first.kwargs) and first.kwargs
    seen = []
    monkeypatch.setattr(lv.module, "run", lambda *a, **k: seen.append(k))
    lv.run("A", "B", "C", 1.0, 0.0)
    assert seen == [{"stream": None, **dict(first.kwargs)}]
    assert lv.writes(np.float32, np.float16) and lv.unsupported(512, 512, 512) is None
