"""Hopper HGEMM levels (v11+: wgmma, warp specialisation, clusters).

CI (no GPU): the wgmma levels' shared facts, NVRTC compiles for sm_90a with the census each
level exists for (HGMMA + UTMALDG; USETMAXREG from v12; multicast TMA from v13), no local
memory, no ignored setmaxnreg (C7508) or serialised wgmma; the host mirror of the wgmma matrix descriptor against
the PTX ISA bit layout; refusals (1×1×8, 127×4099×72, 4097³: TMA needs N, K % 8 == 0). GPU:
exact on ragged shapes (1×8×8 up to 4097×4104×4096, K or N smaller than a tile) against
float64, both dtypes, alpha/beta, beta == 0 with C poisoned by NaN, offsets past 2^31 elements.
"""
import dataclasses
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numba_gemm.explain.sass import disassemble
from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import _wgmma, v11_wgmma, v12_warpspec, v13_persistent
from numba_gemm.measure import check
from numba_gemm.runtime import nvrtc

LEVELS = [v11_wgmma, v12_warpspec, v13_persistent]
ids = [lv.LEVEL for lv in LEVELS]
DTYPES = [np.float16] + ([cm.BF16] if cm.BF16 is not None else [])


@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_wgmma_level_facts(lv):
    """What the wgmma levels share beyond the contract every level meets (the registry checks it:
    test_new_level): the super-tile order, the shipped 128x256x64 tile within shared memory."""
    assert lv.RASTER == "super"
    assert (lv.CONFIG.bm, lv.CONFIG.bn, lv.CONFIG.bk) == (128, 256, 64)
    assert lv.CONFIG.smem() <= cm.SMEM_LIMIT


@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_refusals_name_the_fallback(lv):
    # the shapes that TMA cannot describe (N or K % 8 != 0) are refused, naming v9
    for shape in [(64, 64, 100), (64, 100, 64), (5, 13, 7), (1, 1, 1), (1, 1, 8), (127, 4099, 72),
                  (4097, 4097, 4097)]:
        reason = lv.unsupported(*shape)
        assert reason and "v9" in reason and "16 bytes" in reason
    assert "2^31" in lv.unsupported(2**31, 8, 8)
    for ok in [(1, 8, 8), (127, 4104, 72), (4097, 4104, 4096), (2**31 - 1, 8, 8)]:
        assert lv.unsupported(*ok) is None
    with pytest.raises(ValueError, match="v9"):
        _wgmma.check_operands(lv.LEVEL, 8, 0, 64, 64, 64, lv.CONFIG)      # unaligned base pointer


def test_gemm_refuses_before_any_launch():
    import numba_gemm

    for lv in LEVELS:
        with pytest.raises(ValueError, match="v9"):
            numba_gemm.gemm(np.ones((16, 12), np.float16), np.ones((12, 16), np.float16), level=lv.LEVEL)


@pytest.mark.parametrize("lv", LEVELS[:2], ids=ids[:2])
def test_launch_config(lv):
    grid, block, smem = lv.launch_config(8192, 8192, 8192)
    assert grid == (64 * 32, 1, 1) and block == (lv.CONFIG.threads, 1, 1) and smem <= cm.SMEM_LIMIT
    assert lv.launch_config(1, 1, 8)[0] == (1, 1, 1)
    assert lv.tile_order(8192, 8192, 8192, 60 << 20) == cm.choose_supertile(8192, 8192, 8192, 128, 256, 60 << 20)


def test_v13_persistent_grid_of_pairs():
    v13 = v13_persistent
    assert v13.pair_tiles(8192, 8192) == 32 * 32 and v13.pair_tiles(129, 257) == 2
    assert v13.launch_config(8192, 8192, 8192, max_clusters=66)[0] == (132, 1, 1)
    assert v13.launch_config(1, 8, 8, max_clusters=66)[0] == (2, 1, 1)       # one pair, one idle CTA
    assert v13.launch_config(300, 520, 64, max_clusters=66)[0] == (2 * 2 * 3, 1, 1)
    assert v13.defines() == v13.CONFIG.defines() + (
        "-DHG_CLUSTER=2", "-DHG_CLUSTER_N=0", "-DHG_TMA_STORE=1", "-DHG_C16=0") == v13.DEFINES
    assert v13.defines(1, 0, 1) == v13.CONFIG.defines() + (
        "-DHG_CLUSTER=1", "-DHG_CLUSTER_N=0", "-DHG_TMA_STORE=0", "-DHG_C16=1")
    assert "-DHG_CLUSTER_N=1" in v13.defines(along_n=1)
    assert "-DHG_CLUSTER=4" in v13.defines(4)       # 2 x 2
    with pytest.raises(ValueError, match="1, 2 or 4"):
        v13.defines(3)
    with pytest.raises(ValueError, match="0 or 1"):
        v13.defines(2, 2)
    for cluster in (1, 4):
        with pytest.raises(ValueError, match="along_n"):
            v13.defines(cluster, along_n=1)         # along N is the pair's orientation
    # the epilogue's two 8 KB boxes per consumer fit beside the stages
    assert v13.smem_bytes(1) == v13.CONFIG.smem() + 2 * 2 * 8192 <= cm.SMEM_LIMIT
    assert v13.smem_bytes(0) == v13.CONFIG.smem()
    assert v13.launch_config(8192, 8192, 8192, max_clusters=132, cluster=1)[0] == (132, 1, 1)
    sm, sn = v13.tile_order(8192, 8192, 8192, 60 << 20)
    assert sm % 2 == 0 and (sm // 2, sn) == cm.choose_supertile(8192, 8192, 8192, 256, 256, 60 << 20)
    # the kernel's decode over pairs covers every tile exactly once, odd tile-row counts included
    for M, N in [(8192, 8192), (129 * 3, 520), (128 * 7, 256 * 5)]:
        grid_m, grid_n = cm.cdiv(M, 128), cm.cdiv(N, 256)
        sm, sn = v13.tile_order(M, N, 4096, 8 << 20)
        seen = set()
        for t in range(v13.pair_tiles(M, N)):
            pm, bn = cm.supertile_decode(t, cm.cdiv(grid_m, 2), grid_n, sm // 2, sn)
            seen |= {(2 * pm + r, bn) for r in range(2) if 2 * pm + r < grid_m}
        assert seen == {(m, n) for m in range(grid_m) for n in range(grid_n)}


def test_v13_pairs_along_n():
    """along_n=1: the pair is two tiles side by side in N (one A tile, multicast in halves);
    the decode over (tile rows, pairs of tile columns) covers every tile once, odd column counts
    included, and the super-tile's N side counts whole pairs."""
    v13 = v13_persistent
    t = v13.tile(64, 64)
    assert v13.pair_tiles(4096, 128, t, along_n=1) == 64 and v13.pair_tiles(4096, 128, t) == 32 * 2
    assert v13.pair_tiles(300, 520, v13.CONFIG, along_n=1) == 3 * 2
    assert v13.launch_config(4096, 128, 4096, t, max_clusters=66, along_n=1)[0] == (128, 1, 1)
    sm, sn = v13.tile_order(8192, 8192, 8192, 60 << 20, along_n=1)
    assert sn % 2 == 0 and (sm, sn // 2) == cm.choose_supertile(8192, 8192, 8192, 128, 512, 60 << 20)
    for M, N in [(8192, 8192), (300, 520), (128 * 7, 256 * 5), (4096, 128)]:
        grid_m, grid_n = cm.cdiv(M, 128), cm.cdiv(N, 256)
        sm, sn = v13.tile_order(M, N, 4096, 8 << 20, along_n=1)
        seen = set()
        for t in range(v13.pair_tiles(M, N, along_n=1)):
            bm, pn = cm.supertile_decode(t, grid_m, cm.cdiv(grid_n, 2), sm, sn // 2)
            seen |= {(bm, 2 * pn + r) for r in range(2) if 2 * pn + r < grid_n}
        assert seen == {(m, n) for m in range(grid_m) for n in range(grid_n)}


def test_v13_two_by_two_clusters():
    """cluster=4: 2 x 2 tiles per cluster, A shared along N and B along M. The decode over
    cluster-tiles, rank r at (r % 2, r / 2) as tile_of places it, covers every tile once, odd
    tile-row and column counts included; the super-tile's sides count whole cluster-tiles."""
    v13 = v13_persistent
    t = v13.planned(v13.tile(128, 128))
    assert v13.sides(4) == (2, 2) and v13.sides(2) == (2, 1) and v13.sides(2, 1) == (1, 2)
    assert v13.pair_tiles(512, 4096, t, cluster=4) == 2 * 16
    assert v13.launch_config(512, 4096, 4096, t, max_clusters=33, cluster=4)[0] == (128, 1, 1)
    assert v13.launch_config(8192, 8192, 8192, t, max_clusters=33, cluster=4)[0] == (132, 1, 1)
    for M, N in [(8192, 8192), (300, 520), (128 * 7, 128 * 5), (512, 4096), (1, 8)]:
        grid_m, grid_n = cm.cdiv(M, 128), cm.cdiv(N, 128)
        sm, sn = v13.tile_order(M, N, 4096, 8 << 20, t, cluster=4)
        assert sm % 2 == 0 and sn % 2 == 0
        seen = []
        for q in range(v13.pair_tiles(M, N, t, cluster=4)):
            pm, pn = cm.supertile_decode(q, cm.cdiv(grid_m, 2), cm.cdiv(grid_n, 2), sm // 2, sn // 2)
            seen += [(2 * pm + r % 2, 2 * pn + r // 2) for r in range(4)
                     if 2 * pm + r % 2 < grid_m and 2 * pn + r // 2 < grid_n]
        assert sorted(seen) == [(m, n) for m in range(grid_m) for n in range(grid_n)]


# ---------------------------------------------------------------------------- the tile, from one place

def _macros(defines):
    return dict(d[2:].split("=", 1) for d in defines)


@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_defines_are_the_config(lv):
    """Every number of the tile the .cu compiles with is the CONFIG that sizes the launch."""
    c = lv.CONFIG
    m = _macros(lv.DEFINES)
    assert (int(m["HG_BM"]), int(m["HG_BN"]), int(m["HG_BK"]), int(m["HG_STAGES"])) == (c.bm, c.bn, c.bk, c.stages)
    assert int(m["HG_PRODUCER"]) == int(c.producer)
    assert ("HG_TMA_LAG" in m) == (not c.producer) and int(m.get("HG_TMA_LAG", c.tma_lag)) == c.tma_lag
    assert lv.DEFINES[:len(c.defines())] == c.defines()
    assert c.threads == 128 * (c.bm // 64 + int(c.producer))


def test_wgmma_tile_rules():
    t = _wgmma.WgmmaTile
    assert t().problems() == [] and t(bm=64).problems() == [] and t(producer=True).problems() == []
    assert t(bm=64).threads == 128 and t().threads == 256 and t(producer=True).threads == 384
    assert t(bm=64).smem() == 4 * (64 + 256) * 64 * 2 + 1024 + 64
    for bad in (t(bn=192), t(bk=32), t(bm=192), t(stages=6), t(tma_lag=1), t(stages=2, tma_lag=2)):
        assert bad.problems()
        with pytest.raises(ValueError, match="not supported"):
            bad.defines()
    assert t(stages=2, tma_lag=2, producer=True).problems() == []     # no lag without thread-0 loads


@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_source_refuses_to_compile_without_the_tile(lv):
    """No source default can stand in for the tile: without the -D options, or with any one of
    them missing, the .cu stops at #error; a tile the kernel body cannot take fails its
    static_asserts. (Front-end errors: nothing reaches ptxas, nothing is cached.)"""
    from numba_gemm.runtime import nvrtc

    with pytest.raises(nvrtc.CompileError, match="-DHG_"):
        nvrtc.compile_variant(lv.SOURCE, ())
    for i in range(len(lv.DEFINES)):
        with pytest.raises(nvrtc.CompileError, match="#error|-DHG_"):
            nvrtc.compile_variant(lv.SOURCE, lv.DEFINES[:i] + lv.DEFINES[i + 1:])
    # no m64n192k16 in wgmma.cuh; v12 is written for 256 only
    for bn in (192,) + ((64, 128) if lv.LEVEL == "v12" else ()):
        wrong_bn = tuple(f"-DHG_BN={bn}" if d.startswith("-DHG_BN=") else d for d in lv.DEFINES)
        with pytest.raises(nvrtc.CompileError, match="static assertion|static_assert"):
            nvrtc.compile_variant(lv.SOURCE, wrong_bn)
    wrong_role = tuple(f"-DHG_PRODUCER={int(not lv.CONFIG.producer)}" if d.startswith("-DHG_PRODUCER=") else d
                       for d in lv.DEFINES)
    with pytest.raises(nvrtc.CompileError, match="static assertion|static_assert"):
        nvrtc.compile_variant(lv.SOURCE, wrong_role)


# ---------------------------------------------------------------------------- descriptors

def _fields(d):
    return {"addr": d & 0x3FFF, "lbo": (d >> 16) & 0x3FFF, "sbo": (d >> 32) & 0x3FFF,
            "base": (d >> 49) & 7, "swizzle": d >> 62,
            "reserved": d & ~(0x3FFF | 0x3FFF << 16 | 0x3FFF << 32 | 7 << 49 | 3 << 62)}


@settings(max_examples=300)
@given(addr=st.integers(0, (1 << 14) - 1), lbo=st.integers(0, (1 << 14) - 1),
       sbo=st.integers(0, (1 << 14) - 1), sw=st.sampled_from(["none", "128B", "64B", "32B"]))
def test_descriptor_bit_layout(addr, lbo, sbo, sw):
    """PTX ISA: start address bits 0-13, LBO 16-29, SBO 32-45 (all >> 4), base offset 49-51,
    swizzle 62-63 (0 none, 1 128B, 2 64B, 3 32B); nothing else set."""
    d = _wgmma.smem_desc(addr * 16, lbo * 16, sbo * 16, sw)
    f = _fields(d)
    assert (f["addr"], f["lbo"], f["sbo"]) == (addr, lbo, sbo)
    assert f["base"] == 0 and f["reserved"] == 0 and d < 1 << 64
    assert f["swizzle"] == {"none": 0, "128B": 1, "64B": 2, "32B": 3}[sw]


def test_descriptor_steps_never_carry():
    """The kernel adds stage and k-step offsets to a built descriptor: they must stay in bits 0-13."""
    c = v11_wgmma.CONFIG
    top = 1024 + c.stages * c.stage_bytes            # highest operand byte + 1 (aligned base < 1 KB)
    assert top < 1 << 18
    d0 = _wgmma.smem_desc(1024, 16, 1024)
    d = _wgmma.smem_desc(1024 + (c.stages - 1) * c.stage_bytes + 3 * 2048 + 16384, 16, 1024)
    assert _fields(d)["lbo"] == _fields(d0)["lbo"] and _fields(d)["sbo"] == _fields(d0)["sbo"]
    for bad in [(8, 16, 1024), (1 << 18, 16, 1024), (0, 16, 1 << 18)]:
        with pytest.raises(ValueError):
            _wgmma.smem_desc(*bad)


# ---------------------------------------------------------------------------- NVRTC + census

def _opcodes(sass_text):
    return re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]+)", sass_text, re.M)


def census_ops(source, defines, kernel_names, must_have, must_not_have, wgmma_n=256):
    """Compile `source` with `defines`; assert its kernels, no spills, no ignored setmaxnreg or
    serialised wgmma, the instructions it must and must not have, every HGMMA 64 x wgmma_n;
    return the opcodes."""
    from numba_gemm.explain import sass
    from numba_gemm.runtime import nvrtc

    cubin = nvrtc.compile_variant(source, defines)
    log = nvrtc.compile_log(source, defines=defines)
    assert set(sass.kernel_resources(cubin)) == set(kernel_names)
    spills = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert spills and all(s == ("0", "0", "0") for s in spills), log
    assert "C7508" not in log and "C7510" not in log and "serializ" not in log.lower(), log
    ops = _opcodes(disassemble(cubin))
    for want in must_have:
        assert any(o.startswith(want) for o in ops), f"{source} {defines}: no {want} in SASS"
    for banned in tuple(must_not_have) + ("LDL", "STL"):
        assert not any(o.startswith(banned) for o in ops), f"{source} {defines}: {banned} in SASS"
    hgmma = {o for o in ops if o.startswith("HGMMA")}
    assert hgmma and all(o.startswith(f"HGMMA.64x{wgmma_n}x16.F32") for o in hgmma), hgmma
    return ops


@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_compiles_with_its_census(lv):
    ops = census_ops(lv.SOURCE, lv.DEFINES, lv.KERNEL_NAMES.values(), lv.SASS_MUST_HAVE,
                     lv.SASS_MUST_NOT_HAVE)
    if lv.PARENT != "v10":                    # v12+: the producer gives registers back, consumers take them
        assert any(o.startswith("USETMAXREG.DEALLOC") for o in ops)


@pytest.mark.parametrize("lv, defines", [(lv, lv.DEFINES) for lv in LEVELS] + [
    (v13_persistent, v13_persistent.defines(config=v13_persistent.planned(v13_persistent.tile(64, 64)), along_n=1))],
    ids=ids + ["v13-64x64-along-n"])
def test_descriptors_stay_in_uniform_registers(lv, defines):
    """The consumers take their warpgroup index from warpgroup_index() (lane 0's, by
    __shfl_sync), so the compiler knows it is warp-uniform and builds the wgmma descriptors in
    uniform registers. With
    `wg = tid / 128` the main loop moved both halves of each A descriptor across with an R2UR
    (a vector-to-uniform move, several cycles each): two per HGMMA. Now fewer than one per four
    HGMMAs is left between a kernel's first HGMMA and its last (v13 keeps two, in its tail)."""
    from numba_gemm.explain import sass

    for name, code in sass.split_functions(disassemble(nvrtc.compile_variant(lv.SOURCE, defines))).items():
        ops = _opcodes(code)
        hgmma = [i for i, o in enumerate(ops) if o.startswith("HGMMA")]
        assert hgmma, name
        moves = [o for o in ops[hgmma[0]:hgmma[-1]] if o.startswith("R2UR")]
        assert 4 * len(moves) < len(hgmma), f"{name}: {len(moves)} R2UR among its {len(hgmma)} HGMMAs"


def test_v13_register_epilogue_still_compiles_with_its_census():
    """v13's comparison variant (tma_store=0) keeps the register epilogue: no TMA store in it."""
    v13 = v13_persistent
    ops = census_ops(v13.SOURCE, v13.defines(2, 0), v13.KERNEL_NAMES.values(),
                     tuple(m for m in v13.SASS_MUST_HAVE if m != "UTMASTG.2D"), v13.SASS_MUST_NOT_HAVE)
    assert not any(o.startswith("UTMASTG") for o in ops)


@pytest.mark.parametrize("tma_store", [1, 0], ids=["tma_store", "registers"])
def test_v13_16bit_c_compiles_with_its_census(tma_store):
    """-DHG_C16=1: v13 writes C in A's type from both epilogues. The fp32 -> 16-bit pack
    (F2FP) is in that SASS and in no fp32-C variant; no spills, the level's census otherwise."""
    v13 = v13_persistent
    must = tuple(m for m in v13.SASS_MUST_HAVE if tma_store or m != "UTMASTG.2D")
    c16 = census_ops(v13.SOURCE, v13.defines(2, tma_store, 1), v13.KERNEL_NAMES.values(), must,
                     v13.SASS_MUST_NOT_HAVE)
    c32 = _opcodes(disassemble(nvrtc.compile_variant(v13.SOURCE, v13.defines(2, tma_store, 0))))
    assert any(o.startswith("F2FP") for o in c16)
    assert not any(o.startswith("F2FP") for o in c32)


# run(bm=, bn=): the tiles beside the shipped 128 x 256, for comparison; along_n=1: the pair
# along N, sharing A (the shipped tile and the three of TILE_CHOICES); cluster=4: 2 x 2 tiles
V13_TILES = [{"bm": 128, "bn": 128}, {"bm": 64, "bn": 256}, {"bm": 64, "bn": 128}, {"bm": 64, "bn": 64},
             {"bm": 128, "bn": 256, "along_n": 1}, {"bm": 128, "bn": 128, "along_n": 1},
             {"bm": 128, "bn": 64, "along_n": 1}, {"bm": 64, "bn": 64, "along_n": 1},
             {"bm": 128, "bn": 256, "cluster": 4}, {"bm": 128, "bn": 128, "cluster": 4},
             {"bm": 64, "bn": 64, "cluster": 4}]


def v13_tile_id(kw):
    return ":".join(f"{k}={v}" for k, v in kw.items())


@pytest.mark.parametrize("kw", V13_TILES, ids=v13_tile_id)
def test_v13_other_tiles_compile_with_its_census(kw):
    """v13's body at each other tile, as run() plans it: m64n{bn}k16 only, the multicast and the
    TMA-store epilogue kept, no spills (census_ops); along N, A's halves multicast and B's
    panels loaded alone."""
    v13 = v13_persistent
    config = v13.planned(v13.tile(kw["bm"], kw["bn"]))
    ops = census_ops(v13.SOURCE, v13.defines(kw.get("cluster", 2), config=config, along_n=kw.get("along_n", 0)),
                     v13.KERNEL_NAMES.values(), v13.SASS_MUST_HAVE, v13.SASS_MUST_NOT_HAVE, wgmma_n=kw["bn"])
    if kw.get("along_n"):
        assert "UTMALDG.2D" in ops                  # B: each CTA its own panels


@pytest.mark.parametrize("kw", [{}, {"bm": 64, "bn": 64, "along_n": 1}, {"bm": 128, "bn": 128, "cluster": 4}],
                         ids=lambda kw: v13_tile_id(kw) or "shipped")
def test_v13_has_one_cluster_barrier_and_no_gpu_wide_fence(kw):
    """One cluster barrier, at the start, and no GPU-wide fence anywhere: a .release arrival
    compiles to one (MEMBAR.ALL.GPU). At the end it waited for the C stores to land, and the
    producer's wait for the last releases does that barrier's job instead; at the start the
    arrival is .relaxed, the barrier set-up being fenced to the cluster already."""
    from numba_gemm.explain import sass

    v13 = v13_persistent
    config = v13.planned(v13.tile(kw.get("bm", v13.CONFIG.bm), kw.get("bn", v13.CONFIG.bn)))
    defines = v13.defines(kw.get("cluster", 2), config=config, along_n=kw.get("along_n", 0))
    for name, code in sass.split_functions(disassemble(nvrtc.compile_variant(v13.SOURCE, defines))).items():
        ops = _opcodes(code)
        assert ops.count("UCGABAR_ARV") == 1, name
        assert "MEMBAR.ALL.GPU" not in ops, name


def _dependent_levels():
    """The native levels launched as programmatic dependent launches."""
    from numba_gemm.hgemm import v11gv_gemv, v11p_pitched, v11sk_splitk, v11sl_splitk, v11t_swapab

    return [v11_wgmma, v11p_pitched, v11sk_splitk, v11sl_splitk, v11t_swapab, v11gv_gemv, v12_warpspec,
            v13_persistent]


@pytest.mark.parametrize("module", _dependent_levels(), ids=lambda m: m.LEVEL)
def test_dependent_levels_wait_for_the_previous_grid_before_their_first_load(module):
    """A level launched with programmatic dependent launch may start while the kernel before it
    still runs: in each of its GEMM kernels griddepcontrol.wait (ACQBULK) comes once, before any
    TMA load or global access, and griddepcontrol.launch_dependents (PREEXIT) lets the next call
    start. (v11p's re-pitching copy is an ordinary launch.)"""
    from numba_gemm.explain import sass

    code = sass.split_functions(disassemble(nvrtc.compile_variant(module.SOURCE, module.DEFINES)))
    gemm = {name: c for name, c in code.items() if name != getattr(module, "REPITCH", None)}
    assert gemm and set(module.KERNEL_NAMES.values()) <= set(gemm)
    for name, c in gemm.items():
        ops = _opcodes(c)
        assert ops.count("ACQBULK") == 1 and "PREEXIT" in ops, name
        first_global = min(i for i, op in enumerate(ops) if op.startswith(("UTMALDG", "LDG", "STG", "UTMASTG")))
        assert ops.index("ACQBULK") < first_global, name


def test_a_dependent_launch_config_is_cuda_hs():
    """driver.launch_config (ctypes) lays out CUlaunchConfig and its attributes byte for byte
    as cuda.bindings does: cluster dimension (id 4) and programmatic stream serialisation (id 6)."""
    import ctypes

    from cuda.bindings import driver as drv

    from numba_gemm.runtime import driver

    ids = drv.CUlaunchAttributeID
    cluster = drv.CUlaunchAttribute()
    cluster.id = ids.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    cluster.value.clusterDim.x, cluster.value.clusterDim.y, cluster.value.clusterDim.z = 2, 1, 1
    dep = drv.CUlaunchAttribute()
    dep.id = ids.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    dep.value.programmaticStreamSerializationAllowed = 1
    size = ctypes.sizeof(driver.LaunchConfig)
    assert size == 56 and ctypes.sizeof(driver.LaunchAttribute) == 72
    for attrs, cluster_size, pdl in (([cluster, dep], 2, True), ([dep], None, True), ([cluster], 2, False)):
        ref = drv.CUlaunchConfig()
        ref.gridDimX, ref.gridDimY, ref.gridDimZ = 4, 3, 1
        ref.blockDimX, ref.blockDimY, ref.blockDimZ = 384, 1, 1
        ref.sharedMemBytes = 1024
        ref.attrs, ref.numAttrs = attrs, len(attrs)
        ours = driver.launch_config((4, 3, 1), (384, 1, 1), 1024, cluster_size, pdl)
        theirs = ctypes.string_at(ref.getPtr(), size)
        mine = ctypes.string_at(ctypes.addressof(ours), size)
        assert mine[:40] == theirs[:40] and mine[48:52] == theirs[48:52]     # all but the attrs pointer
        their_attrs = ctypes.c_void_p.from_buffer_copy(theirs[40:48]).value
        assert ctypes.string_at(ctypes.addressof(ours.attrs.contents), 72 * len(attrs)) == \
            ctypes.string_at(their_attrs, 72 * len(attrs))


def test_a_dependent_launch_is_one_bound_cuLaunchKernelEx_on_each_calls_stream(monkeypatch):
    """A Launch with pdl (or a cluster) binds cuLaunchKernelEx once; each launch writes its own
    stream into the configuration (None: the legacy default stream) and passes the parameters."""
    import ctypes

    from numba_gemm.runtime import driver, launch

    seen = []

    class Lib:
        def cuLaunchKernelEx(self, config, fn, params, extra):
            cfg = config._obj
            seen.append((cfg.stream, fn.value, [cfg.attrs[i].id for i in range(cfg.count)], tuple(cfg.grid),
                         ctypes.addressof(params)))
            return 0

    monkeypatch.setattr(driver, "_lib", Lib())
    params = (ctypes.c_void_p * 1)()
    L = launch.Launch(0xF00, (3,), (128,), 0, params, [], pdl=True)
    L(0x10)
    bound = L._bound
    L(0)
    L(0x20)
    assert L._bound is bound
    p = ctypes.addressof(params)
    assert seen == [(0x10, 0xF00, [6], (3, 1, 1), p), (None, 0xF00, [6], (3, 1, 1), p),
                    (0x20, 0xF00, [6], (3, 1, 1), p)]


@pytest.mark.gpu
@pytest.mark.parametrize("module", _dependent_levels(), ids=lambda m: m.LEVEL)
def test_a_dependent_launch_sees_all_of_the_previous_calls_c(module):
    """C = A·B over a long K, then C = A2·B2 + C over one K tile, back to back: the second call
    may start while the first finishes (programmatic dependent launch) and reads C after one K
    tile, yet must see all of the first's C: the same bits as with a synchronisation between
    the two, every time."""
    from numba import cuda

    from numba_gemm.runtime import launch

    M, N, K, K2 = {"v11t": (32, 4096, 8192, 64), "v11gv": (2, 4096, 8192, 64),
                   "v11p": (1024, 510, 8190, 62)}.get(module.LEVEL, (1024, 512, 8192, 64))
    rng = np.random.default_rng()
    A, B, A2, B2 = ((rng.uniform(-1, 1, s) / 8).astype(np.float16) for s in ((M, K), (K, N), (M, K2), (K2, N)))
    dA, dB, dA2, dB2 = map(cuda.to_device, (A, B, A2, B2))
    dC = cuda.device_array((M, N), np.float32)
    with launch.recording() as first:
        module.run(dA, dB, dC, 1.0, 0.0)
    with launch.recording() as second:
        module.run(dA2, dB2, dC, 1.0, 1.0)
    assert second.launches[-1].pdl          # the GEMM (v11p copies the operands first)

    def chain(synchronise):
        cuda.to_device(np.full((M, N), np.nan, np.float32), to=dC)
        for L in first.launches:
            L(0)
        if synchronise:
            C1 = dC.copy_to_host()
        for L in second.launches:
            L(0)
        return (C1, dC.copy_to_host()) if synchronise else dC.copy_to_host()

    C1, expected = chain(True)
    assert check.verify(C1, A, B, np.zeros((M, N), np.float32), 1.0, 0.0, "hgemm").ok
    assert check.verify(expected, A2, B2, C1, 1.0, 1.0, "hgemm").ok
    for _ in range(10):
        assert chain(False).tobytes() == expected.tobytes()


def test_v13_planned_depth():
    """run() launches a tile as deep as fits beside the epilogue's boxes (the shipped 128×256
    four deep, 128×128 six), or stages= deep, which must fit: a 64×64 tile fits 13 stages of
    16 KB, not 14."""
    v13 = v13_persistent
    t = v13.tile(64, 64)
    assert (t.consumers, t.threads, t.stages) == (1, 256, 4)
    assert v13.planned(v13.CONFIG) == v13.CONFIG and v13.planned(v13.tile(128, 128)).stages == 6
    assert v13.planned(t).stages == _wgmma.MAX_STAGES and v13.planned(t, stages=6).stages == 6
    assert v13.planned(v13.tile(128, 128), tma_store=0).stages == 7      # no boxes beside it
    assert v13.extra_smem(1, t) == 2 * 8192 and v13.extra_smem(0, t) == 0
    assert v13.smem_bytes(1, v13.planned(t, stages=13)) <= cm.SMEM_LIMIT
    assert v13.smem_bytes(1, dataclasses.replace(t, stages=14)) > cm.SMEM_LIMIT
    with pytest.raises(ValueError, match="no ring of 7 stages at 128x128"):
        v13.planned(v13.tile(128, 128), stages=7)


@pytest.mark.parametrize("kw, msg", [
    ({"bn": 32}, "no tile bm=128, bn=32: bn must be one of"),
    ({"bm": 128.0}, "bm must be an int"),
    ({"bm": 64, "bn": 64, "stages": 14}, "no ring of 14 stages at 64x64"),
    ({"stages": True}, "stages must be an int"),
])
def test_v13_refuses_a_tile_it_has_no_body_for(kw, msg):
    with pytest.raises(ValueError, match=f"level v13: {msg}"):
        v13_persistent.run(None, None, None, 1.0, 0.0, **kw)


def test_c16_is_declared_by_v13_alone():
    """Only v13 says C16 = True; the registry's writes() follows it, for A's own type only."""
    from numba_gemm import registry

    f16, f32 = np.dtype(np.float16), np.dtype(np.float32)
    writers = [lv.name for lv in registry.registry().values() if lv.writes(f16, f16)]
    assert writers == ["v13"]
    v13 = registry.get("v13")
    assert v13.writes(f32, f16) and not v13.writes(f16, f32)
    if cm.BF16 is not None:
        assert v13.writes(cm.BF16, cm.BF16) and not v13.writes(f16, cm.BF16)
    with pytest.raises(ValueError, match="c16"):
        v13_persistent.defines(c16=2)


@pytest.mark.parametrize("lv", LEVELS[:2], ids=ids[:2])
def test_float32_c_levels_refuse_a_16bit_c_before_anything(lv):
    """A direct run() with a 16-bit C on a level that writes float32 would write past C: refused."""
    from types import SimpleNamespace as Arr

    A, B = Arr(shape=(16, 64), dtype=np.float16), Arr(shape=(64, 32), dtype=np.float16)
    with pytest.raises(TypeError, match=f"level {lv.LEVEL} writes C as float32, got float16"):
        lv.run(A, B, Arr(shape=(16, 32), dtype=np.float16), 1.0, 0.0)


def test_v11_body_serves_a_64_row_tile():
    """BM = 64 (one consumer warpgroup, 128 threads) compiles from the same body, both dtypes,
    with v11's census; per k stage still 4 HGMMA per kernel (one warpgroup instruction each)."""
    counts = {}
    for bm in (64, 128):
        tile = _wgmma.WgmmaTile(bm=bm)
        ops = census_ops(v11_wgmma.SOURCE, tile.defines(), v11_wgmma.KERNEL_NAMES.values(),
                         v11_wgmma.SASS_MUST_HAVE, v11_wgmma.SASS_MUST_NOT_HAVE)
        counts[bm] = sum(o.startswith("HGMMA") for o in ops)
    assert counts[64] == counts[128] > 0
    assert _wgmma.WgmmaTile(bm=64).defines() != v11_wgmma.DEFINES     # a separate cubin


# ---------------------------------------------------------------------------- on the GPU

def _run(lv, A, B, C):
    from numba import cuda

    def dev(x):
        return cuda.to_device(x.view(np.uint16) if x.dtype == cm.BF16 else x)

    return dev(A), dev(B), dev(C)


def _case(lv, M, N, K, dtype, alpha, beta, rng, c_dtype=np.float32):
    """One checked call; c_dtype: C's type (float32, or A's for a level that writes 16-bit C)."""
    from numba import cuda

    A, B, C = check.random_inputs(M, N, K, dtype, rng, c_dtype=c_dtype)
    C_in = C.copy() if beta != 0 else np.full((M, N), np.nan, c_dtype)
    dA, dB, dC = _run(lv, A, B, C_in)
    lv.run(dA, dB, dC, alpha, beta)
    cuda.synchronize()
    got = dC.copy_to_host().view(c_dtype)
    v = check.verify(got, A, B, C, alpha, beta, family="hgemm", out_dtype=c_dtype)
    assert v.ok, (f"{lv.LEVEL} {np.dtype(dtype).name} C {np.dtype(c_dtype).name} M={M} N={N} K={K} "
                  f"a={alpha} b={beta}: {v}")


# M is free (rows of A and C); N and K are the nearest multiples of 8 to the shapes
SHAPES = [(1, 8, 8), (127, 4104, 72), (128, 256, 64), (129, 264, 72),
          (300, 8, 16), (64, 264, 8), (1000, 40, 136), (37, 1032, 200), (513, 384, 1024),
          (200, 512, 4096), (4097, 4104, 4096)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_exact_on_ragged_shapes(lv, dtype):
    rng = np.random.default_rng()
    for M, N, K in SHAPES:
        assert lv.unsupported(M, N, K) is None
        _case(lv, M, N, K, dtype, 0.5, 3.0, rng)
        _case(lv, M, N, K, dtype, 1.0, 0.0, rng)     # beta == 0: NaN in C must not leak


@pytest.mark.gpu
@pytest.mark.parametrize("tma_store", [1, 0], ids=["tma_store", "registers"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_v13_exact_with_16bit_c(dtype, tma_store):
    """C in A's type: every ragged shape, alpha/beta (C read in 16 bits) and NaN-poisoned C with
    beta == 0, from both epilogues; within the fp32 bound plus one rounding to C's type."""
    from functools import partial
    from types import SimpleNamespace

    lv = SimpleNamespace(LEVEL=f"v13 tma_store={tma_store}", run=partial(v13_persistent.run, tma_store=tma_store))
    rng = np.random.default_rng()
    for M, N, K in SHAPES:
        _case(lv, M, N, K, dtype, 0.5, 3.0, rng, c_dtype=dtype)
        _case(lv, M, N, K, dtype, 1.0, 0.0, rng, c_dtype=dtype)


# more tiles than resident clusters (several tiles per CTA), an odd number of K tiles and a
# single one
V13_MORE_SHAPES = [(1000, 1000, 136), (2000, 1000, 40), (4096, 128, 4096)]


@pytest.mark.gpu
@pytest.mark.parametrize("kw", V13_TILES, ids=v13_tile_id)
def test_v13_other_tiles_exact_on_ragged_shapes(kw):
    """v13 at each other tile, fp16, float32 C: every ragged shape, alpha/beta and NaN-poisoned C."""
    from functools import partial
    from types import SimpleNamespace

    lv = SimpleNamespace(LEVEL=f"v13 {v13_tile_id(kw)}", run=partial(v13_persistent.run, **kw))
    rng = np.random.default_rng()
    for M, N, K in SHAPES + V13_MORE_SHAPES:
        _case(lv, M, N, K, np.float16, 0.5, 3.0, rng)
        _case(lv, M, N, K, np.float16, 1.0, 0.0, rng)


@pytest.mark.gpu
@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_refuses_an_unaligned_base_before_launch(lv):
    from numba import cuda

    flat = cuda.device_array(130 * 72 + 1, np.float16)
    A = flat[1:].reshape(130, 72)
    with pytest.raises(ValueError, match="v9"):
        lv.run(A, cuda.device_array((72, 264), np.float16), cuda.device_array((130, 264), np.float32), 1.0, 0.0)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(65600, 16, 32776), (16, 65600, 32776), (65600, 32776, 8)],
                         ids=["A>2^31", "B>2^31", "C>2^31"])
def test_offsets_past_2_31_elements(shape):
    """Each operand in turn holds more than 2^31 elements; check rows/columns at both ends."""
    from numba import cuda

    M, N, K = shape
    rng = np.random.default_rng()
    A = rng.integers(-2, 3, (M, K), dtype=np.int8).astype(np.float16)
    B = rng.integers(-2, 3, (K, N), dtype=np.int8).astype(np.float16)
    dA, dB = cuda.to_device(A), cuda.to_device(B)
    rows, cols = np.r_[0:3, M - 3:M], np.r_[0:3, N - 3:N]
    ref = A[rows].astype(np.float64) @ B[:, cols].astype(np.float64)
    for lv in LEVELS:                  # one set of operands for every level: they are large
        dC = cuda.device_array((M, N), np.float32)
        lv.run(dA, dB, dC, 1.0, 0.0)
        cuda.synchronize()
        got = np.concatenate([dC[0:3].copy_to_host(), dC[M - 3:M].copy_to_host()])[:, cols]
        np.testing.assert_array_equal(got.astype(np.float64), ref, err_msg=lv.LEVEL)  # exact
        del dC


@pytest.mark.gpu
def test_gemm_returns_a_16bit_c_when_asked():
    """out_dtype=A's type through gemm() and plan(): torch in and out (auto runs v13, at one of
    its tiles), NumPy in and out (bf16 as ml_dtypes.bfloat16), each within one rounding of the
    float64 result."""
    import numba_gemm

    torch = pytest.importorskip("torch")
    rng = np.random.default_rng()
    M, N, K = 300, 264, 136
    for tdt, ndt in [(torch.float16, np.float16)] + ([(torch.bfloat16, cm.BF16)] if cm.BF16 is not None else []):
        A, B, _ = check.random_inputs(M, N, K, ndt, rng)
        tA = torch.from_numpy(A.view(np.int16)).view(tdt).cuda()
        tB = torch.from_numpy(B.view(np.int16)).view(tdt).cuda()
        p = numba_gemm.plan(tA, tB, out_dtype=tdt)
        assert p.level.name.split(":")[0] == "v13" and p.C.dtype == tdt
        got = p.execute().cpu().view(torch.int16).numpy().view(ndt)
        assert check.verify(got, A, B, None, 1.0, 0.0, "hgemm", out_dtype=ndt).ok
        host = numba_gemm.gemm(A, B, out_dtype=ndt)
        assert host.dtype == ndt and check.verify(host, A, B, None, 1.0, 0.0, "hgemm", out_dtype=ndt).ok
