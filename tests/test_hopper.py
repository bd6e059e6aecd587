"""Hopper HGEMM levels (v11+: wgmma; v12 ping-pong consumers; v13 a persistent ping-pong grid).

CI (no GPU): the wgmma levels' shared facts, NVRTC compiles for sm_90a with the census each
level exists for (HGMMA + UTMALDG; USETMAXREG and the order barrier from v12), no local
memory, no ignored setmaxnreg (C7508) or serialised wgmma; the host mirror of the wgmma matrix descriptor against
the PTX ISA bit layout; refusals (1×1×8, 127×4099×72, 4097³: TMA needs N, K % 8 == 0). GPU:
exact on ragged shapes (1×8×8 up to 4097×4104×4096, K or N smaller than a tile) against
float64, both dtypes, alpha/beta, beta == 0 with C poisoned by NaN, offsets past 2^31 elements.
"""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numba_gemm import check
from numba_gemm.sass import disassemble
from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import _wgmma, v11_wgmma, v12_warpspec, v13_persistent

LEVELS = [v11_wgmma, v12_warpspec, v13_persistent]
ids = [lv.LEVEL for lv in LEVELS]
DTYPES = [np.float16] + ([cm.BF16] if cm.BF16 is not None else [])


@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_wgmma_level_facts(lv):
    """What the wgmma levels share beyond the contract every level meets (the registry checks it:
    test_new_level): the super-tile order, 128 accumulators per consumer thread (v11: 64 rows of
    a shared 128x256 tile; v12, v13: a whole 128x128 tile each), within shared memory."""
    c = lv.CONFIG
    assert lv.RASTER == "super"
    assert (c.bm, c.bn, c.bk) == ((128, 128, 64) if c.pingpong else (128, 256, 64))
    assert c.pingpong == (lv.LEVEL != "v11") and c.producer == c.pingpong
    assert (c.bm if c.pingpong else 64) * c.bn // 128 == 128
    assert c.smem() <= cm.SMEM_LIMIT


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
    """v11 and v12: one CTA per 128x256 block tile (v12's two consumers own its two halves)."""
    grid, block, smem = lv.launch_config(8192, 8192, 8192)
    assert grid == (64 * 32, 1, 1) and block == (lv.CONFIG.threads, 1, 1) and smem <= cm.SMEM_LIMIT
    assert lv.launch_config(1, 1, 8)[0] == (1, 1, 1)
    assert lv.tile_order(8192, 8192, 8192, 60 << 20) == cm.choose_supertile(8192, 8192, 8192, 128, 256, 60 << 20)


def _v12_tiles(M, N, bid, super_m, super_n):
    """v12_warpspec.cu's HalfTiles for CTA `bid`: the 128x128 tiles its consumers take, in turn."""
    grid_m, grid_n = cm.cdiv(M, 128), cm.cdiv(N, 128)
    bm, bp = cm.supertile_decode(bid, grid_m, cm.cdiv(grid_n, 2), super_m, super_n)
    return [(bm, 2 * bp + i) for i in range(min(2, grid_n - 2 * bp))]


def _v13_tiles(M, N, bid, G, super_m, super_n):
    """v13_persistent.cu's StridedTiles for CTA `bid` of G."""
    grid_m, grid_n = cm.cdiv(M, 128), cm.cdiv(N, 128)
    return [cm.supertile_decode(t, grid_m, grid_n, super_m, super_n)
            for t in range(bid, grid_m * grid_n, G)]


@settings(max_examples=60, deadline=None)
@given(M=st.integers(1, 3000), N=st.integers(1, 3000), sms=st.integers(1, 132))
def test_pingpong_grids_cover_every_tile_once(M, N, sms):
    """Both ping-pong grids hand every 128x128 tile of C to exactly one consumer turn; v13's
    CTAs (one per SM, no more than tiles) take every G-th tile, so their counts differ by <= 1."""
    tiles = {(m, n) for m in range(cm.cdiv(M, 128)) for n in range(cm.cdiv(N, 128))}
    sm, sn = v12_warpspec.tile_order(M, N, 4096, 8 << 20)
    grid = v12_warpspec.launch_config(M, N, 4096)[0][0]
    got = [t for b in range(grid) for t in _v12_tiles(M, N, b, sm, sn)]
    assert sorted(got) == sorted(tiles) and all(_v12_tiles(M, N, b, sm, sn) for b in range(grid))
    G = v13_persistent.launch_config(M, N, 4096, sms=sms)[0][0]
    assert G == min(sms, len(tiles))
    sm, sn = v13_persistent.tile_order(M, N, 4096, 8 << 20)
    per_cta = [_v13_tiles(M, N, b, G, sm, sn) for b in range(G)]
    assert sorted(t for ts in per_cta for t in ts) == sorted(tiles)
    assert max(map(len, per_cta)) - min(map(len, per_cta)) <= 1


def test_pingpong_source_states_its_turns():
    """The order barrier the ring's correctness rests on: consumer c waits on named barrier 1 + c
    before its tile's first full[s] wait, and hands over on 2 - c (the other's) after issuing
    its last wgmma, before wgmma.wait_group 0 — only when the other consumer has a next tile."""
    from numba_gemm import nvrtc

    src = (nvrtc.native_dir() / "pingpong.cuh").read_text()
    body = src[src.index("// ---- consumer warpgroups"):]
    order = [body.index(s) for s in ("if (i > 0) turn_wait(c);", "mbar_wait(full",
                                     "if (i + 1 < count) turn_hand_over(c);", "wgmma_wait<0>();")]
    assert order == sorted(order)
    assert '"bar.sync %0, 256;\\n" :: "r"(1 + c)' in src and '"bar.arrive %0, 256;\\n" :: "r"(2 - c)' in src


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
    assert int(m["HG_PINGPONG"]) == int(c.pingpong)
    assert c.threads == 128 * ((2 if c.pingpong else c.bm // 64) + int(c.producer))


def test_wgmma_tile_rules():
    t = _wgmma.WgmmaTile
    assert t().problems() == [] and t(bm=64).problems() == [] and t(producer=True).problems() == []
    assert t(bm=64).threads == 128 and t().threads == 256 and t(producer=True).threads == 384
    assert t(bm=64).smem() == 4 * (64 + 256) * 64 * 2 + 1024 + 64
    pp = dict(producer=True, pingpong=True)
    assert t(bn=128, **pp).problems() == [] and t(bm=64, **pp).problems() == []
    assert t(bn=128, **pp).threads == 384 and t(bn=128, stages=6, **pp).smem() == 6 * 32768 + 1024 + 96
    for bad in (t(bn=128), t(bk=32), t(bm=192), t(stages=6), t(tma_lag=1), t(stages=2, tma_lag=2),
                t(pingpong=True, bn=128), t(bm=128, bn=256, **pp), t(bn=128, stages=8, **pp)):
        assert bad.problems()
        with pytest.raises(ValueError, match="not supported"):
            bad.defines()
    assert t(stages=2, tma_lag=2, producer=True).problems() == []     # no lag without thread-0 loads


@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_source_refuses_to_compile_without_the_tile(lv):
    """No source default can stand in for the tile: without the -D options, or with any one of
    them missing, the .cu stops at #error; a tile the kernel body cannot take fails its
    static_asserts. (Front-end errors: nothing reaches ptxas, nothing is cached.)"""
    from numba_gemm import nvrtc

    with pytest.raises(nvrtc.CompileError, match="-DHG_"):
        nvrtc.compile_variant(lv.SOURCE, ())
    for i in range(len(lv.DEFINES)):
        with pytest.raises(nvrtc.CompileError, match="#error|-DHG_"):
            nvrtc.compile_variant(lv.SOURCE, lv.DEFINES[:i] + lv.DEFINES[i + 1:])
    wrong_bn = tuple("-DHG_BN=64" if d.startswith("-DHG_BN=") else d for d in lv.DEFINES)
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


def census_ops(source, defines, kernel_names, must_have, must_not_have):
    """Compile `source` with `defines`; assert its kernels, no spills, no ignored setmaxnreg or
    serialised wgmma, the instructions it must and must not have; return the opcodes."""
    from numba_gemm import nvrtc, sass

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
    return ops


@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_compiles_with_its_census(lv):
    ops = census_ops(lv.SOURCE, lv.DEFINES, lv.KERNEL_NAMES.values(), lv.SASS_MUST_HAVE,
                     lv.SASS_MUST_NOT_HAVE)
    n = lv.CONFIG.bn if lv.CONFIG.pingpong else 256
    assert any(o.startswith(f"HGMMA.64x{n}x16.F32") for o in ops)
    if lv.PARENT != "v10":                    # v12+: the producer gives registers back, consumers take them
        assert any(o.startswith("USETMAXREG.DEALLOC") for o in ops)


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

    dA, dB, dC = dev(A), dev(B), cuda.to_device(C)
    return dA, dB, dC


def _case(lv, M, N, K, dtype, alpha, beta, rng):
    from numba import cuda

    A, B, C = check.random_inputs(M, N, K, dtype, rng)
    C_in = C.copy() if beta != 0 else np.full((M, N), np.nan, np.float32)
    dA, dB, dC = _run(lv, A, B, C_in)
    lv.run(dA, dB, dC, alpha, beta)
    cuda.synchronize()
    v = check.verify(dC.copy_to_host(), A, B, C, alpha, beta, family="hgemm")
    assert v.ok, f"{lv.LEVEL} {np.dtype(dtype).name} M={M} N={N} K={K} a={alpha} b={beta}: {v}"


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
