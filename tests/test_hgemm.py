"""HGEMM levels (every level of the registry's hgemm family): host logic here (the level contract
is the registry's, checked when it discovers a module: tests/test_new_level.py); correctness on
the GPU only.

GPU tests: fresh random fp16/bf16 inputs on ragged shapes, alpha/beta, beta == 0 with C
poisoned by NaN, shapes whose rows are not 16-byte aligned (served by the element-wise fallback
of the cp.async levels, refused before launch by v10), and offsets past 2^31 elements. All
compared with check.verify(family="hgemm").
"""
import functools
import re
from pathlib import Path

import numpy as np
import pytest

from numba_gemm.explain.sass import disassemble
from numba_gemm.hgemm import _common as cm
from numba_gemm.measure import check
from numba_gemm.registry import registry
from tools import hgemm_sweep

LEVELS = [lv.module for lv in registry().values() if lv.family == "hgemm"]
ids = [m.LEVEL for m in LEVELS]
SWEPT = hgemm_sweep.sweepable()      # the levels that take a TileConfig
DTYPES = [np.float16] + ([cm.BF16] if cm.BF16 is not None else [])
LEVEL = {m.LEVEL: m for m in LEVELS}


@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_docstring_header_names_the_diff_and_the_run(lv):
    """The first line of each level's docstring (the llm.c habit): the two files to diff — the
    parent's .cu and this level's (a Numba level's module against its parent, its native twin) —
    and the bench.py command that checks and times it."""
    root = Path(__file__).resolve().parent.parent
    read, run = lv.__doc__.splitlines()[0].split(" · ")
    assert run == f"run: python bench.py --level {lv.LEVEL} --dtype fp16"
    own = f"native/{lv.SOURCE}" if hasattr(lv, "SOURCE") else f"numba_gemm/hgemm/{Path(lv.__file__).name}"
    if lv.PARENT is None:
        assert read.startswith(f"read: {own} ")
    else:
        assert read.startswith(f"read: diff native/{LEVEL[lv.PARENT].SOURCE} {own}")
    for path in re.findall(r"\b(?:native|numba_gemm)/[\w/]+\.(?:cu|py)\b", read):
        assert (root / path).is_file(), path


@pytest.mark.parametrize("lv", list(SWEPT.values()), ids=list(SWEPT))
def test_shipped_tile_is_valid_and_fully_specified(lv):
    tma = any(d.startswith("-DHG_TMA_LAG=") for d in lv.DEFINES)
    c = lv.CONFIG
    assert c.problems(tma) == [] and lv.DEFINES == c.defines(tma)
    grid, block, smem = lv.launch_config(8192, 8192, 8192)
    assert grid == ((8192 // c.bm) * (8192 // c.bn), 1, 1) and block == (c.threads, 1, 1)
    assert smem == c.smem(tma) <= 227 * 1024
    assert lv.launch_config(1, 1, 1)[0] == (1, 1, 1)


def test_v7_config_states_the_tile_its_source_hard_codes():
    from numba_gemm.runtime import nvrtc

    v7 = LEVEL["v7"]
    src = (nvrtc.native_dir() / v7.SOURCE).read_text()
    c = v7.CONFIG
    assert f"constexpr int BM = {c.bm}, BN = {c.bn}, BK = {c.bk};" in src
    assert f"constexpr int WARPS_M = {c.warps_m}, WARPS_N = {c.warps_n};" in src
    assert re.search(r"Smem \{\s+bits16 a\[%d\]" % c.stages, src)   # double buffer
    assert v7.DEFINES == () and "HG_" not in src


def test_v7_grid_and_limits():
    v7 = LEVEL["v7"]
    assert v7.launch_config(4097, 129, 5)[0] == (33, 2, 1)
    assert v7.unsupported(1, 128 * 65536, 8) is not None
    assert v7.unsupported(5, 7, 3) is None


def test_v9_is_v8_with_another_tile_order_and_v10_has_its_own_tile():
    v8, v9, v10 = LEVEL["v8"], LEVEL["v9"], LEVEL["v10"]
    assert v9.CONFIG == v8.CONFIG and v9.DEFINES == v8.DEFINES
    assert (v8.RASTER, v9.RASTER, v10.RASTER) == ("n-fastest", "super", "super")
    assert (v10.CONFIG.bm, v10.CONFIG.bn, v10.CONFIG.stages) == (128, 256, 4)
    assert v10.SMEM == 197696
    assert v10.tile_order(8192, 8192, 8192, 60 << 20) == cm.choose_supertile(8192, 8192, 8192, 128, 256, 60 << 20)


@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_dims_past_int32_are_refused(lv):
    assert "2^31" in lv.unsupported(2**31, 8, 8)


def test_pack_args_and_element_type():
    args = cm.pack_args(("p", 2**40), ("i", 7), ("f", 0.5))
    assert [a.value for a in args] == [2**40, 7, 0.5]
    with pytest.raises(ValueError):
        cm.pack_args(("i", 2**31))

    class Fake:
        def __init__(self, dt):
            self.dtype = np.dtype(dt)

    assert cm.element_type(Fake(np.float16)) == "f16"
    assert cm.element_type(Fake(np.uint16)) == "bf16"
    with pytest.raises(TypeError):
        cm.element_type(Fake(np.float32))
    assert cm.rows_16b_aligned(256, 8) and not cm.rows_16b_aligned(256, 12) and not cm.rows_16b_aligned(258, 8)
    assert cm.vec_c(256, 6) and not cm.vec_c(260, 6) and not cm.vec_c(256, 7)


def test_gemm_refuses_v10_shape_before_any_launch():
    import numba_gemm

    A = np.ones((16, 12), np.float16)
    B = np.ones((12, 16), np.float16)
    with pytest.raises(ValueError, match="v9"):
        numba_gemm.gemm(A, B, level="v10")


# ---------------------------------------------------------------------------- on the GPU

def _run(lv, A, B, C, alpha, beta, offset=0):
    """Run a level directly on device arrays (bf16 as uint16 bits); C poisoned by the caller."""
    from numba import cuda

    def dev(x):
        bits = x.view(np.uint16) if x.dtype == cm.BF16 else x
        if offset == 0:
            return cuda.to_device(bits)
        flat = cuda.device_array(bits.size + offset, bits.dtype)   # base `offset` elements in
        view = flat[offset:].reshape(bits.shape)
        view.copy_to_device(np.ascontiguousarray(bits))
        return view

    dA, dB, dC = dev(A), dev(B), cuda.to_device(C)
    lv.run(dA, dB, dC, alpha, beta)
    cuda.synchronize()
    return dC.copy_to_host()


def _case(lv, M, N, K, dtype, alpha, beta, rng, offset=0):
    A, B, C = check.random_inputs(M, N, K, dtype, rng)
    C_in = C.copy() if beta != 0 else np.full((M, N), np.nan, np.float32)
    out = _run(lv, A, B, C_in, alpha, beta, offset)
    v = check.verify(out, A, B, C, alpha, beta, family="hgemm")
    assert v.ok, f"{lv.LEVEL} {np.dtype(dtype).name} M={M} N={N} K={K} a={alpha} b={beta}: {v}"


RAGGED = [(1, 1, 1), (128, 256, 64), (129, 257, 65), (300, 520, 72), (1000, 40, 136),
          (37, 1031, 200), (513, 384, 1024), (4096, 264, 8)]
ODD = [(33, 40, 13), (70, 41, 64), (129, 259, 77), (5, 3, 1)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_ragged_shapes_alpha_beta(lv, dtype):
    rng = np.random.default_rng()
    for M, N, K in RAGGED:
        if lv.unsupported(M, N, K):
            continue
        _case(lv, M, N, K, dtype, 0.5, 3.0, rng)
        _case(lv, M, N, K, dtype, 1.0, 0.0, rng)     # beta == 0: NaN in C must not leak


def test_cp_async_levels_serve_unaligned_rows_and_v10_refuses_them():
    for name in ("v7", "v8", "v9"):   # the element-wise fallback loads serve them
        assert all(LEVEL[name].unsupported(*s) is None for s in ODD)
    assert all("16 bytes" in LEVEL["v10"].unsupported(*s) for s in ODD if s[1] % 8 or s[2] % 8)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("lv", LEVELS, ids=ids)
def test_rows_not_16_byte_aligned_are_exact_or_refused_before_launch(lv, dtype):
    rng = np.random.default_rng()
    for M, N, K in ODD:
        if lv.unsupported(M, N, K):
            continue
        _case(lv, M, N, K, dtype, -1.5, 0.25, rng)
        _case(lv, M, N, K, dtype, 1.0, 0.0, rng)
    if lv.unsupported(130, 264, 72):                           # v11p (aligned rows go to v11), v11gv (M > 8)
        return
    try:                                                       # aligned shape, unaligned base
        _case(lv, 130, 264, 72, dtype, 1.0, 0.0, rng, offset=1)
    except ValueError as e:                                    # v10: TMA needs a 16-byte base
        assert lv.LEVEL not in ("v7", "v8", "v9") and "16" in str(e), e


@pytest.mark.gpu
def test_v10_refuses_an_unaligned_base_before_launch():
    rng = np.random.default_rng()
    with pytest.raises(ValueError, match="v9"):
        _case(LEVEL["v10"], 130, 264, 72, np.float16, 1.0, 0.0, rng, offset=1)


@pytest.mark.gpu
def test_gemm_api_end_to_end():
    import numba_gemm

    rng = np.random.default_rng()
    for level in LEVEL:
        # TMA levels need rows of whole 16 bytes, v11p takes only rows that are not, v11gv M <= 2,
        # v11t M <= 32 on rows TMA can take
        shape = next(s for s in [(200, 137, 97), (200, 136, 96), (2, 137, 97), (24, 136, 96)]
                     if not LEVEL[level].unsupported(*s))
        for dtype in DTYPES:
            A, B, C = check.random_inputs(*shape, dtype, rng)
            out = numba_gemm.gemm(A, B, C.copy(), alpha=0.5, beta=2.0, level=level)
            assert check.verify(out, A, B, C, 0.5, 2.0, family="hgemm").ok, (level, shape)


@functools.lru_cache(maxsize=1)
def _big_operands(M, N, K):
    """Small random integers on the device, one shape at a time: building a 4 GB operand takes
    longer than every level's kernel on it, so the levels of one shape share it."""
    from numba import cuda

    rng = np.random.default_rng()
    A = rng.integers(-2, 3, (M, K), dtype=np.int8).astype(np.float16)
    B = rng.integers(-2, 3, (K, N), dtype=np.int8).astype(np.float16)
    r = min(3, M)                                   # the first and last r rows (and 3 columns)
    rows, cols = np.r_[0:r, M - r:M], np.r_[0:3, N - 3:N]
    ref = A[rows].astype(np.float64) @ B[:, cols].astype(np.float64)   # small integers: exact in fp32
    return cuda.to_device(A), cuda.to_device(B), cuda.device_array((M, N), np.float32), cols, ref


@pytest.mark.gpu
@pytest.mark.parametrize("lv", LEVELS, ids=ids)
@pytest.mark.parametrize("shape", [(65600, 16, 32776), (16, 65600, 32776), (65600, 32776, 8)],
                         ids=["A>2^31", "B>2^31", "C>2^31"])
def test_offsets_past_2_31_elements(lv, shape):
    """Each operand in turn holds more than 2^31 elements; check rows/columns near the end."""
    from numba import cuda

    M, N, K = shape
    if lv.unsupported(M, N, K):     # v11p takes only rows that are not whole 16 bytes, v11gv M <= 2
        M, N, K = next(s for s in [(M, N + 1, K + 1), (2, N, K)] if not lv.unsupported(*s))
        if max(M * K, K * N, M * N) <= 2**31:
            pytest.skip(f"{lv.LEVEL}: no shape it serves puts 2^31 elements in this operand")
    dA, dB, dC, cols, ref = _big_operands(M, N, K)
    r = min(3, M)
    nan_rows = np.full((r, N), np.nan, np.float32)
    dC[0:r].copy_to_device(nan_rows)          # the checked rows, poisoned: beta == 0 must write them
    dC[M - r:M].copy_to_device(nan_rows)
    lv.run(dA, dB, dC, 1.0, 0.0)
    cuda.synchronize()
    tail = dC[M - r:M].copy_to_host()[:, cols]
    np.testing.assert_array_equal(np.asarray(tail, np.float64), ref[r:])
    head = dC[0:r].copy_to_host()[:, cols]
    np.testing.assert_array_equal(np.asarray(head, np.float64), ref[:r])


# ---------------------------------------------------------------------------- tile configurations

SWEEP_TILES = [
    cm.TileConfig(bm=128, bn=128, stages=3, warps_m=2, warps_n=2, min_blocks=2),
    cm.TileConfig(bm=128, bn=128, stages=3, warps_m=2, warps_n=4, min_blocks=2, frag_pipe=True),
    cm.TileConfig(bm=256, bn=128, warps_m=4, warps_n=4, frag_pipe=True),
    cm.TileConfig(bm=128, bn=256, warps_m=4, warps_n=4, frag_pipe=True, tma_lag=1),
]


def test_tile_options_are_complete_and_distinct():
    t = cm.TileConfig(bm=256, bn=128, warps_m=4, warps_n=4, frag_pipe=True, tma_lag=1)
    d = t.defines()
    assert d == ("-DHG_BM=256", "-DHG_BN=128", "-DHG_BK=64", "-DHG_STAGES=4", "-DHG_WARPS_M=4",
                 "-DHG_WARPS_N=4", "-DHG_MIN_BLOCKS=1", "-DHG_FRAG_PIPE=1")
    assert t.defines(tma=True) == d + ("-DHG_TMA_LAG=1",)
    assert len({c.defines(tma=True) for c in SWEEP_TILES}) == len(SWEEP_TILES)


def test_tile_config_rules():
    assert cm.TileConfig(bk=32).problems()                                   # 128-byte rows only
    assert cm.TileConfig(stages=5).problems()                                # 241 KB of smem
    assert cm.TileConfig(bm=128, bn=128, warps_m=2, warps_n=16).problems()   # 8-wide warp tiles
    assert cm.TileConfig(bm=512, bn=64, warps_m=8, warps_n=1, stages=2).problems(tma=True)  # A box > 256
    assert cm.TileConfig(tma_lag=4).problems(tma=True) and not cm.TileConfig(tma_lag=4).problems()
    for t in SWEEP_TILES:
        assert t.problems(tma=True) == [], t.label()
        assert all(o.startswith("-DHG_") for o in t.defines(tma=True))
    assert "-DHG_TMA_LAG=1" in SWEEP_TILES[-1].defines(tma=True)
    assert "-DHG_TMA_LAG=1" not in SWEEP_TILES[-1].defines()
    for lv in SWEPT.values():                                               # before any launch
        with pytest.raises(ValueError, match="not supported"):
            lv.run(None, None, None, 1.0, 0.0, config=cm.TileConfig(bk=32))


def test_the_sweep_candidates_are_valid_and_hold_every_shipped_tile():
    for name, t in hgemm_sweep.CANDIDATES.items():
        assert t.problems(tma=True) == [], name
    for name in SWEPT:
        assert any(hgemm_sweep.shipped(name, t) for t in hgemm_sweep.CANDIDATES.values()), name
    assert hgemm_sweep.shipped("v10", hgemm_sweep.CANDIDATES["base"])
    assert hgemm_sweep.shipped("v8", hgemm_sweep.CANDIDATES["c128"])


@pytest.mark.parametrize("level", ["v8", "v10"])   # a cp.async and a TMA pipeline
def test_a_two_block_per_sm_tile_compiles_within_128_registers(level):
    from numba_gemm.explain import sass
    from numba_gemm.runtime import nvrtc

    source, kernel = LEVEL[level].SOURCE, LEVEL[level].KERNEL_NAMES["f16"]
    t = SWEEP_TILES[1]
    d = hgemm_sweep.defines(level, t)
    cubin = nvrtc.compile_variant(source, d)
    res = sass.kernel_resources(cubin)
    assert set(res) == {kernel}                                   # no bf16 entry with HG_NO_BF16
    assert res[kernel]["registers"] <= 65536 // (2 * t.threads)   # two blocks per SM fit
    log = nvrtc.compile_log(source, defines=d)
    assert re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log) == [("0", "0")], log
    assert "HMMA" in disassemble(cubin)
    assert nvrtc.cache_key(source, extra=d) != nvrtc.cache_key(source)


@pytest.mark.gpu
@pytest.mark.parametrize("tile", SWEEP_TILES, ids=lambda t: t.label().replace(" ", "_"))
@pytest.mark.parametrize("lv", list(SWEPT.values()), ids=list(SWEPT))
def test_other_tiles_are_exact_on_ragged_shapes(lv, tile):
    from numba import cuda

    rng = np.random.default_rng()
    for M, N, K in [(129, 257, 65), (333, 776, 200), (1000, 40, 136), (37, 1031, 8), (64, 600, 1024), (70, 41, 77)]:
        if lv.unsupported(M, N, K):
            continue
        for alpha, beta in ((0.5, 3.0), (1.0, 0.0)):
            A, B, C = check.random_inputs(M, N, K, np.float16, rng)
            dC = cuda.to_device(C.copy() if beta else np.full_like(C, np.nan))
            lv.run(cuda.to_device(A), cuda.to_device(B), dC, alpha, beta, config=tile)
            v = check.verify(dC.copy_to_host(), A, B, C, alpha, beta, family="hgemm")
            assert v.ok, f"{lv.LEVEL} {tile.label()} M={M} N={N} K={K} b={beta}: {v}"
