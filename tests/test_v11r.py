"""v11r (v11 with register-staged loads instead of TMA: any shape).

CI (no GPU): the contract and the registry order (v11 < v11r < v11sk); every shape served,
TMA-describable ones included; the load width as a pure function (hypothesis: it divides the
base and every row's byte offset, and no wider of 8/4/2 does); the loader model (hypothesis:
for shapes, tile positions and base offsets drawn at random, every byte of both stage tiles
written exactly once, each where TMA's SWIZZLE_128B would put it — compared byte for byte with
the stage TMA would write — zeros outside M, N, K, every load aligned to its width and never
part in and part out of the matrix; a warp's stores conflict-free, its loads of a piece
contiguous along a row) and a mutated model failing that check; NVRTC compiles for five width
variants, f16 and bf16, with the census (HGMMA, WARPGROUP.ARRIVE/DEPBAR; no UTMALDG, HMMA, LDSM,
local memory; registers within the cap; the operand loads and stores exactly as the model counts
them on top of v11's epilogue); the source refusing to compile without its widths, its tile or
with 2 stages; run() recorded with the driver stubbed (the variant picked from the pointers and
row strides, the grid, the arguments, refusals before launch).
GPU: exact against float64 on ragged shapes (K and/or N not multiples of 8, odd M, K < 64),
every width variant, bases at odd element offsets, alpha/beta, beta == 0 with C poisoned by
NaN, fp16 and bf16, a large ragged cube (2047x2049x2051, sampled rows), offsets past 2^31
elements, gemm() end to end.
    python -m pytest -q tests/test_v11r.py -m gpu
"""
import ctypes
import re

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from numba_gemm.explain.sass import disassemble
from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import _wgmma
from numba_gemm.hgemm import v11r_ragged as vr
from numba_gemm.measure import check
from numba_gemm.registry import registry
from numba_gemm.runtime import driver, launch
from numba_gemm.util import ceil_div
from tests.test_hopper import census_ops

DTYPES = [np.float16] + ([cm.BF16] if cm.BF16 is not None else [])
C = vr.CONFIG


# ---------------------------------------------------------------------------- contract

def test_contract_and_registry_order():
    names = list(registry())
    assert names.index("v11") < names.index("v11r") < names.index("v11sk") < names.index("v12")
    assert vr.PARENT == "v11"          # the rest of the contract: registry.contract_problems
    assert (C.bm, C.bn, C.bk, C.stages, C.producer, C.threads) == (128, 256, 64, 3, False, 256)
    assert vr.smem() == 3 * 48 * 1024 + 1024 <= cm.SMEM_LIMIT
    assert vr.DEFINES == vr.defines(*vr.CENSUS_WIDTHS)
    assert "UTMALDG" in vr.SASS_MUST_NOT_HAVE and "HGMMA" in vr.SASS_MUST_HAVE


def test_defines_are_the_config_plus_the_widths():
    m = dict(d[2:].split("=", 1) for d in vr.defines(8, 2))
    assert (int(m["HG_BM"]), int(m["HG_BN"]), int(m["HG_BK"]), int(m["HG_STAGES"])) == (C.bm, C.bn, C.bk, C.stages)
    assert int(m["HG_PRODUCER"]) == 0 and "HG_TMA_LAG" not in m      # no TMA ring to lag
    assert (int(m["HG_LOAD_A"]), int(m["HG_LOAD_B"])) == (8, 2)
    assert len({vr.defines(a, b) for a in vr.LOAD_WIDTHS for b in vr.LOAD_WIDTHS}) == 9
    for bad in (16, 1, 0, 3, "8"):
        with pytest.raises(ValueError, match="load width"):
            vr.defines(bad, 2)
    for tile in (_wgmma.WgmmaTile(bm=128, stages=2), _wgmma.WgmmaTile(bm=128, producer=True),
                 _wgmma.WgmmaTile(bm=128, bn=128)):
        with pytest.raises(ValueError, match="cannot take"):
            vr.defines(8, 8, tile)


def test_every_shape_is_served():
    for shape in [(1, 1, 1), (5, 3, 1), (33, 40, 13), (64, 64, 100), (64, 100, 64), (127, 4099, 72),
                  (2047, 2049, 2051), (4097, 4097, 4097), (2**31 - 1, 8, 8), (8, 2**31 - 1, 8),
                  (8, 8, 2**31 - 1),
                  (128, 256, 64), (4096, 4096, 4096)]:             # TMA could describe these two
        assert vr.unsupported(*shape) is None, shape
    assert "2^31" in vr.unsupported(2**31, 8, 8) and "2^31" in vr.unsupported(8, 8, 2**31)
    assert vr.unsupported(0, 8, 8) and vr.unsupported(8, 8, 0)
    # v11 refuses what v11r serves
    assert _wgmma.tma_rule(127, 4099, 72) and vr.unsupported(127, 4099, 72) is None


def test_launch_config():
    grid, block, smem = vr.launch_config(2047, 2049, 2051)
    assert grid == (16 * 9, 1, 1) and block == (256, 1, 1) and smem == vr.smem()
    assert vr.launch_config(1, 1, 1)[0] == (1, 1, 1)
    assert vr.tile_order(8192, 8192, 8192, 60 << 20) == cm.choose_supertile(8192, 8192, 8192, 128, 256, 60 << 20)


# ---------------------------------------------------------------------------- the load width

@settings(max_examples=500, deadline=None)
@given(ptr=st.integers(0, 2**48).map(lambda x: 2 * x), row_elems=st.integers(1, 2**31 - 1),
       rows=st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=8))
@example(ptr=0, row_elems=8, rows=[1]).via("16-byte rows")
@example(ptr=2, row_elems=8, rows=[1]).via("odd element offset")
@example(ptr=4, row_elems=6, rows=[1]).via("4-byte base and rows")
def test_load_width_is_the_widest_dividing_base_and_rows(ptr, row_elems, rows):
    row_bytes = 2 * row_elems
    w = vr.load_width(ptr, row_bytes)
    assert w in (8, 4, 2)
    assert ptr % w == 0 and all((ptr + r * row_bytes) % w == 0 for r in rows)
    wider = [x for x in vr.LOAD_WIDTHS if x > w]
    # no wider width divides both the base and the stride (for one of them, row 0 or row 1 fails)
    assert all(ptr % x or (ptr + row_bytes) % x for x in wider)


def test_load_width_examples_and_refusal():
    assert [vr.load_width(p, r) for p, r in [(0, 16), (256, 4096), (2, 16), (4, 16), (8, 12),
                                              (0, 14), (16, 4100), (16, 4098), (1024, 8)]] == [8, 8, 2, 4, 4, 2, 4, 2, 8]
    for bad in [(1, 16), (3, 2), (0, 1), (256, 7)]:
        with pytest.raises(ValueError, match="2-byte aligned"):
            vr.load_width(*bad)


# ---------------------------------------------------------------------------- the loader model

def test_geometry_of_each_width():
    """The header's static_asserts hold for the shipped tile (and a 64-row one), and the
    per-thread counts the docs quote."""
    for tile in (C, _wgmma.WgmmaTile(bm=64, stages=3)):
        for w in vr.LOAD_WIDTHS:
            for t in vr.operand_tiles(tile, w, w):
                assert t.problems() == [], (tile.label(), t)
    got = {w: vr.tile_instructions(w, w) for w in vr.LOAD_WIDTHS}
    assert got[8] == {"loads_a": 8, "loads_b": 16, "stores_a": 8, "stores_b": 16, "store_bytes_a": 8, "store_bytes_b": 8}
    assert got[4] == {"loads_a": 16, "loads_b": 32, "stores_a": 16, "stores_b": 32, "store_bytes_a": 4, "store_bytes_b": 4}
    assert got[2] == {"loads_a": 32, "loads_b": 64, "stores_a": 16, "stores_b": 32, "store_bytes_a": 4, "store_bytes_b": 4}
    for w in vr.LOAD_WIDTHS:   # every thread moves its 96 elements of the 128x64 + 64x256 tile
        g = got[w]
        assert (g["loads_a"] + g["loads_b"]) * w // 2 == 96
        assert g["stores_a"] * g["store_bytes_a"] + g["stores_b"] * g["store_bytes_b"] == 192
    assert vr.StagedTile(2, 128, 64).STEP == 8 and vr.StagedTile(8, 64, 256).STEP == 4


def _check_stage(M, N, K, bm, bn, kt, off_a, off_b, config=C):
    """The model's stage for tile (bm, bn), K tile kt, operands at element offsets off_a, off_b
    from 16-byte-aligned allocations: equal to TMA's, all loads aligned to their width."""
    base_a, base_b = 1 << 20, 1 << 30                     # 16-byte aligned allocations
    pa, pb = base_a + 2 * off_a, base_b + 2 * off_b
    wa, wb = vr.load_width(pa, 2 * K), vr.load_width(pb, 2 * N)
    m0, n0, k0 = bm * config.bm, bn * config.bn, kt * config.bk
    image, loads = vr.stage_image(M, N, K, m0, n0, k0, wa, wb, config, pa, pb)
    want = vr.expected_stage(M, N, K, m0, n0, k0, config)
    assert None not in image, "a byte of the stage is not written"
    assert image == want, next(i for i, (x, y) in enumerate(zip(image, want)) if x != y)
    for name, addr, w in loads:
        assert addr % w == 0 and w == (wa if name == "A" else wb)
    return wa, wb


@st.composite
def stage_cases(draw):
    M, N, K = draw(st.integers(1, 300)), draw(st.integers(1, 600)), draw(st.integers(1, 200))
    return (M, N, K, draw(st.integers(0, ceil_div(M, 128) - 1)), draw(st.integers(0, ceil_div(N, 256) - 1)),
            draw(st.integers(0, ceil_div(K, 64) - 1)), draw(st.integers(0, 7)), draw(st.integers(0, 7)))


@settings(max_examples=60, deadline=None)
@given(case=stage_cases())
@example(case=(2047, 2049, 2051, 15, 8, 32, 0, 0)).via("the large cube's last tile")
@example(case=(128, 256, 64, 0, 0, 0, 0, 0)).via("a shape TMA describes: W = 8")
@example(case=(130, 264, 72, 1, 1, 1, 1, 1)).via("odd element offsets: W = 2")
@example(case=(100, 300, 100, 0, 1, 1, 2, 2)).via("4-byte bases: W = 4")
@example(case=(1, 1, 1, 0, 0, 0, 0, 0)).via("one element")
def test_loader_writes_the_stage_tma_would(case):
    _check_stage(*case)


def test_loader_covers_every_width_pair():
    """One stage per (W_A, W_B) pair, on an interior and an edge tile."""
    seen = set()
    for K, off_a in [(200, 0), (202, 0), (201, 0), (200, 2), (200, 1)]:
        for N, off_b in [(600, 0), (602, 0), (601, 0)]:
            seen.add(_check_stage(300, N, K, 1, 1, 1, off_a, off_b))
            seen.add(_check_stage(300, N, K, 2, 2, 3, off_a, off_b))
    assert seen == {(a, b) for a in vr.LOAD_WIDTHS for b in vr.LOAD_WIDTHS}


def test_a_64_row_tile_writes_the_stage_too():
    """The header is written for THREADS = 128 as well (A's STEP below 8: the XOR walk)."""
    tile = _wgmma.WgmmaTile(bm=64, stages=3)
    for off in (0, 1, 2):
        _check_stage(100, 300, 130, 1, 1, 2, off, off, tile)


def test_a_model_without_the_xor_walk_fails_the_check(monkeypatch):
    """The comparison has teeth: dropping the (i * STEP) % 8 term of the store address (right
    only where STEP is a multiple of 8) breaks B's layout, as would any other slip."""
    def stores(self, t, tile=0):
        for i in range(self.PIECES):
            yield i, tile + t["dst0"] + i * self.STEP * 128

    _check_stage(256, 512, 128, 0, 0, 0, 0, 0)
    monkeypatch.setattr(vr.StagedTile, "stores", stores)
    with pytest.raises(AssertionError):
        _check_stage(256, 512, 128, 0, 0, 0, 0, 0)


@pytest.mark.parametrize("w", vr.LOAD_WIDTHS)
def test_warp_stores_are_conflict_free_and_loads_run_along_rows(w):
    """Per warp and piece: 4-byte stores hit 32 distinct banks; 8-byte stores (two half-warp
    phases) 32 distinct banks per half; the elements a warp's loads of one piece read form one
    contiguous run per matrix row."""
    M, N, K = 1024, 1024, 1024
    for tile, LD, R0, C0 in ((vr.StagedTile(w, C.bm, C.bk), K, 128, 64), (vr.StagedTile(w, C.bk, C.bn), N, 64, 256)):
        for warp in range(C.threads // 32):
            ts = [tile.init(LD, R0, C0, 32 * warp + lane) for lane in range(32)]
            stores = [dict(tile.stores(t)) for t in ts]
            loads = [[(i, e) for i, _l, e in tile.loads(t, 10**9, 10**9)] for t in ts]
            for i in range(tile.PIECES):
                nbytes = tile.PIECE_ELEMS * 2
                for phase in ([range(32)] if nbytes == 4 else [range(16), range(16, 32)]):
                    banks = [(stores[lane][i] // 4 + j) % 32 for lane in phase for j in range(nbytes // 4)]
                    assert len(set(banks)) == len(banks) == 32
                elems = sorted(e + x for lane in range(32) for (p, e) in loads[lane] if p == i
                               for x in range(tile.LOAD_ELEMS))
                rows = {}
                for e in elems:
                    rows.setdefault(e // LD, []).append(e)
                for run in rows.values():
                    assert run == list(range(run[0], run[0] + len(run)))
                assert len(rows) == ceil_div(32 * tile.PIECE_ELEMS, tile.COLS)


# ---------------------------------------------------------------------------- NVRTC + census

VARIANTS = [(2, 2), (4, 4), (8, 8), (8, 2), (2, 8)]


@pytest.fixture(scope="module")
def v11_epilogue_loads():
    """v11 loads nothing but C in its epilogue (TMA brings A and B): its LDG counts by width."""
    from numba_gemm.explain import sass
    from numba_gemm.hgemm import v11_wgmma
    from numba_gemm.runtime import nvrtc

    cubin = nvrtc.compile_variant(v11_wgmma.SOURCE, v11_wgmma.DEFINES)
    (c, *_) = sass.census_cubin(cubin, "v11")
    return {k: c.classes.get(k, 0) for k in ("LDG.E", "LDG.E.64", "LDG.E.U16")}


@pytest.mark.parametrize("wa, wb", VARIANTS, ids=[f"A{a}B{b}" for a, b in VARIANTS])
def test_compiles_with_its_census(wa, wb, v11_epilogue_loads):
    from numba_gemm.explain import sass
    from numba_gemm.runtime import nvrtc

    d = vr.defines(wa, wb)
    census_ops(vr.SOURCE, d, vr.KERNEL_NAMES.values(), vr.SASS_MUST_HAVE, vr.SASS_MUST_NOT_HAVE)
    cubin = nvrtc.compile_variant(vr.SOURCE, d)
    counts = vr.tile_instructions(wa, wb)
    want_ldg = dict(v11_epilogue_loads)
    want_sts = {"STS": 0, "STS.64": 0}
    for op in ("a", "b"):
        w = wa if op == "a" else wb
        want_ldg[{2: "LDG.E.U16", 4: "LDG.E", 8: "LDG.E.64"}[w]] += 2 * counts[f"loads_{op}"]   # tile 0 + loop
        want_sts[{4: "STS", 8: "STS.64"}[counts[f"store_bytes_{op}"]]] += 2 * counts[f"stores_{op}"]
    for c in sass.census_cubin(cubin, "v11r", nvrtc.compile_log(vr.SOURCE, defines=d)):
        assert 0 < c.registers <= min(255, 65536 // C.threads)       # one CTA of 256 threads per SM
        assert c.local_memory_ops == 0 and c.spill_stores == 0 and c.spill_loads == 0
        cls = c.classes
        assert {k: cls.get(k, 0) for k in want_ldg} == want_ldg, c.kernel
        assert {k: cls.get(k, 0) for k in want_sts} == want_sts, c.kernel
        assert c.count("HGMMA") == 4 and c.count("BAR") == 2     # tile 0 + one per K tile
        assert c.count("UTMALDG") == 0 and c.count("SYNCS") == 0               # no TMA, no mbarrier


def test_loop_order_in_sass():
    """The K loop's order, as the hazard notes in the .cu assume: between the barrier after
    tile 0 and the loop's barrier come the loads of tile kt+1, the wgmma of kt, the stores of
    kt+1, the proxy fence, wait_group 1, then the barrier."""
    from numba_gemm.explain import sass
    from numba_gemm.runtime import nvrtc

    for wa, wb in ((8, 8), (2, 2)):
        text = sass.split_functions(disassemble(nvrtc.compile_variant(vr.SOURCE, vr.defines(wa, wb))))
        ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]+)",
                         text[vr.KERNEL_NAMES["f16"]], re.M)
        bars = [i for i, o in enumerate(ops) if o.startswith("BAR.SYNC")]
        assert len(bars) == 2
        marks = {"LDG": "L", "HGMMA": "M", "STS": "S", "FENCE.VIEW.ASYNC": "F",
                 "WARPGROUP.DEPBAR": "W", "BAR.SYNC": "B"}
        kinds = "".join(next((k for p, k in marks.items() if o.startswith(p)), "")
                        for o in ops[bars[0] + 1:bars[1] + 1])
        assert re.sub(r"(.)\1+", r"\1", kinds) == "LMSFWB", kinds
        # wait_group 1 in the loop, wait_group 0 before the epilogue
        assert re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x\d)", text[vr.KERNEL_NAMES["f16"]]) == ["0x1", "0x0"]


def test_source_refuses_to_compile_without_its_options():
    from numba_gemm.runtime import nvrtc

    d = vr.defines(2, 2)
    with pytest.raises(nvrtc.CompileError, match="-DHG_"):
        nvrtc.compile_variant(vr.SOURCE, ())
    for drop in ("-DHG_LOAD_A=", "-DHG_LOAD_B=", "-DHG_BM=", "-DHG_STAGES="):
        with pytest.raises(nvrtc.CompileError, match="#error|-DHG_"):
            nvrtc.compile_variant(vr.SOURCE, tuple(x for x in d if not x.startswith(drop)))
    two = tuple("-DHG_STAGES=2" if x.startswith("-DHG_STAGES=") else x for x in d)
    with pytest.raises(nvrtc.CompileError, match="static assertion|static_assert"):
        nvrtc.compile_variant(vr.SOURCE, two)
    odd = tuple("-DHG_LOAD_A=16" if x.startswith("-DHG_LOAD_A=") else x for x in d)
    with pytest.raises(nvrtc.CompileError, match="static assertion|static_assert"):
        nvrtc.compile_variant(vr.SOURCE, odd)


# ---------------------------------------------------------------------------- run(), recorded (no GPU)

class _Array:
    """A stand-in device array: shape, dtype, an address and (optionally) byte strides."""

    def __init__(self, ptr, shape, dtype, strides=None):
        self.ptr, self.shape, self.dtype, self._strides = ptr, shape, np.dtype(dtype), strides

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "strides": self._strides, "typestr": self.dtype.str,
                "data": (self.ptr, False), "version": 3}


@pytest.fixture
def stubbed(monkeypatch):
    from numba_gemm.runtime import nvrtc

    compiled = []

    def function(source, name, defines=()):
        compiled.append((source, name, tuple(defines)))
        return 0x77

    monkeypatch.setattr(nvrtc, "function", function)
    monkeypatch.setattr(driver, "allow_dynamic_smem", lambda fn, smem: None)
    monkeypatch.setattr(cm, "l2_cache_bytes", lambda: 60 << 20)
    return compiled


@pytest.mark.parametrize("M, N, K, off_a, off_b, dtype, want", [
    (2047, 2049, 2051, 0, 0, np.float16, (2, 2)),
    (128, 256, 64, 0, 0, np.float16, (8, 8)),        # TMA-describable: the widest loads
    (130, 264, 72, 1, 0, np.uint16, (2, 8)),         # A's base an odd element in
    (130, 262, 74, 2, 0, np.float16, (4, 4)),
    (33, 41, 12, 0, 3, np.uint16, (8, 2)),
])
def test_run_picks_the_variant_from_pointers_and_rows(stubbed, M, N, K, off_a, off_b, dtype, want):
    A = _Array(0x10000 + 2 * off_a, (M, K), dtype)
    B = _Array(0x20000 + 2 * off_b, (K, N), dtype, strides=(2 * N, 2))
    Cm = _Array(0x30000, (M, N), np.float32)
    with launch.recording() as rec:
        vr.run(A, B, Cm, 0.5, 3.0)
    (L,) = rec.launches
    kind = "bf16" if dtype == np.uint16 else "f16"
    assert stubbed == [(vr.SOURCE, vr.KERNEL_NAMES[kind], vr.defines(*want))]
    assert L.grid == (ceil_div(M, 128) * ceil_div(N, 256), 1, 1) and L.block == (256, 1, 1)
    assert L.smem == vr.smem()
    vals = [a.value for a in L.keep]
    sm, sn = cm.choose_supertile(M, N, K, 128, 256, 60 << 20)
    assert vals[:6] == [A.ptr, B.ptr, Cm.ptr, M, N, K] and vals[6:8] == [0.5, 3.0]
    assert vals[8:] == [int(N % 2 == 0), sm, sn]


def test_run_refuses_before_any_launch(stubbed):
    f16 = np.float16
    with launch.recording() as rec:
        with pytest.raises(ValueError, match="2\\^31"):
            vr.run(_Array(0, (2**31, 8), f16), _Array(0, (8, 8), f16), _Array(0, (2**31, 8), np.float32), 1.0, 0.0)
        with pytest.raises(ValueError, match="2-byte aligned"):
            vr.run(_Array(0x10001, (8, 8), f16), _Array(0, (8, 8), f16), _Array(0, (8, 8), np.float32), 1.0, 0.0)
        with pytest.raises(ValueError, match="row stride"):      # a column slice: rows 2 elements longer
            vr.run(_Array(0, (8, 6), f16, strides=(16, 2)), _Array(0, (6, 8), f16), _Array(0, (8, 8), np.float32), 1.0, 0.0)
        with pytest.raises(ValueError, match="contiguous"):
            vr.run(_Array(0, (8, 8), f16), _Array(0, (8, 8), f16, strides=(32, 4)), _Array(0, (8, 8), np.float32), 1.0, 0.0)
        with pytest.raises(TypeError):
            vr.run(_Array(0, (8, 8), np.float32), _Array(0, (8, 8), np.float32), _Array(0, (8, 8), np.float32), 1.0, 0.0)
    assert rec.launches == [] and stubbed == []


def test_gemm_serves_a_ragged_shape_with_v11r_by_name():
    """Without a GPU gemm() says so rather than fall back (native level)."""
    import numba_gemm
    from numba_gemm.runtime import gpu

    if not gpu.simulating():
        pytest.skip("simulator only")
    with pytest.raises(Exception, match="needs a GPU"):
        numba_gemm.gemm(np.ones((16, 13), np.float16), np.ones((13, 15), np.float16), level="v11r")


# ---------------------------------------------------------------------------- on the GPU

def _dev(x, offset=0):
    """x on the device (bf16 as uint16 bits), its base `offset` elements into an allocation."""
    from numba import cuda

    bits = x.view(np.uint16) if x.dtype == cm.BF16 else x
    if offset == 0:
        return cuda.to_device(bits)
    flat = cuda.device_array(bits.size + offset, bits.dtype)
    view = flat[offset:].reshape(bits.shape)
    view.copy_to_device(np.ascontiguousarray(bits))
    return view


def _case(M, N, K, dtype, alpha, beta, rng, off_a=0, off_b=0, want=None, rows=None):
    """One run against float64 (C poisoned with NaN when beta == 0); `want`: the (W_A, W_B)
    variant the operands must select; `rows`: check only these rows (large shapes)."""
    from numba import cuda

    A, B, Cin = check.random_inputs(M, N, K, dtype, rng)
    C0 = Cin.copy() if beta != 0 else np.full((M, N), np.nan, np.float32)
    dA, dB, dC = _dev(A, off_a), _dev(B, off_b), cuda.to_device(C0)
    if want is not None:
        assert vr.variant(dA, dB) == want
    vr.run(dA, dB, dC, alpha, beta)
    cuda.synchronize()
    out = dC.copy_to_host()
    if rows is not None:
        v = check.verify(out[rows], A[rows], B, Cin[rows], alpha, beta, family="hgemm")
    else:
        v = check.verify(out, A, B, Cin, alpha, beta, family="hgemm")
    what = f"v11r {np.dtype(dtype).name} M={M} N={N} K={K} offsets {off_a},{off_b} a={alpha} b={beta}"
    assert v.ok, f"{what}: {v}"


RAGGED = [(1, 1, 1), (5, 3, 1), (1, 7, 9), (33, 40, 13), (70, 41, 64), (129, 259, 77),
          (64, 64, 100), (64, 100, 64), (127, 4099, 72), (300, 520, 73), (1000, 40, 137),
          (37, 1031, 200), (513, 383, 1025), (255, 257, 63), (4095, 18, 4097),
          (128, 256, 64), (129, 264, 72)]          # the last two: shapes TMA describes


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_exact_on_ragged_shapes(dtype):
    rng = np.random.default_rng()
    for M, N, K in RAGGED:
        assert vr.unsupported(M, N, K) is None
        _case(M, N, K, dtype, 0.5, 3.0, rng)
        _case(M, N, K, dtype, 1.0, 0.0, rng)     # beta == 0: NaN in C must not leak


# (K, off_a) -> W_A and (N, off_b) -> W_B: every variant, from the shape or the base
WIDTH_CASES = [((136, 0), 8), ((138, 0), 4), ((137, 0), 2), ((136, 2), 4), ((136, 1), 2)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_width_variant_is_exact(dtype):
    rng = np.random.default_rng()
    seen = set()
    for (K, off_a), wa in WIDTH_CASES:
        for (N, off_b), wb in WIDTH_CASES:
            N = N + 264                    # more than one 256-column tile
            _case(259, N, K, dtype, -1.5, 0.25, rng, off_a, off_b, want=(wa, wb))
            _case(259, N, K, dtype, 1.0, 0.0, rng, off_a, off_b, want=(wa, wb))
            seen.add((wa, wb))
    assert seen == {(a, b) for a in vr.LOAD_WIDTHS for b in vr.LOAD_WIDTHS}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_misaligned_bases_of_an_aligned_shape(dtype):
    """A shape TMA could describe, with bases at odd element offsets (v11 refuses these)."""
    rng = np.random.default_rng()
    for off_a, off_b in [(1, 0), (0, 1), (1, 3), (2, 6)]:
        _case(130, 264, 72, dtype, 1.0, 0.0, rng, off_a, off_b)
        _case(130, 264, 72, dtype, 0.5, 3.0, rng, off_a, off_b)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_large_ragged_cube_sampled_rows(dtype):
    rng = np.random.default_rng()
    M, N, K = 2047, 2049, 2051
    rows = np.unique(np.r_[0:3, M - 130:M - 125, M - 3:M, rng.integers(0, M, 64)])
    _case(M, N, K, dtype, 0.5, 3.0, rng, rows=rows, want=(2, 2))
    _case(M, N, K, dtype, 1.0, 0.0, rng, rows=rows, want=(2, 2))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(65600, 16, 32775), (16, 65601, 32776), (65600, 32777, 7)],
                         ids=["A>2^31", "B>2^31", "C>2^31"])
def test_offsets_past_2_31_elements_with_ragged_rows(shape):
    """Each operand in turn holds more than 2^31 elements, its rows not 16-byte aligned."""
    from numba import cuda

    M, N, K = shape
    rng = np.random.default_rng()
    A = rng.integers(-2, 3, (M, K), dtype=np.int8).astype(np.float16)
    B = rng.integers(-2, 3, (K, N), dtype=np.int8).astype(np.float16)
    dA, dB = cuda.to_device(A), cuda.to_device(B)
    dC = cuda.device_array((M, N), np.float32)
    vr.run(dA, dB, dC, 1.0, 0.0)
    cuda.synchronize()
    rows, cols = np.r_[0:3, M - 3:M], np.r_[0:3, N - 3:N]
    ref = A[rows].astype(np.float64) @ B[:, cols].astype(np.float64)
    got = np.concatenate([dC[0:3].copy_to_host(), dC[M - 3:M].copy_to_host()])[:, cols]
    np.testing.assert_array_equal(got.astype(np.float64), ref)     # small integers: exact


@pytest.mark.gpu
def test_gemm_end_to_end():
    import numba_gemm

    rng = np.random.default_rng()
    for dtype in DTYPES:
        A, B, Cin = check.random_inputs(200, 137, 95, dtype, rng)
        out = numba_gemm.gemm(A, B, Cin.copy(), alpha=0.5, beta=2.0, level="v11r")
        assert check.verify(out, A, B, Cin, 0.5, 2.0, family="hgemm").ok
