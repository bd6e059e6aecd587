"""v11py: the level contract, v11's tile, exact results on ragged shapes, and its census.

Without a GPU the whole kernel runs in the simulator with the intrinsics' Python twins
(numba_gemm.ptx: TMA with its swizzle and zero fill, counted mbarrier phases, wgmma evaluated
from the descriptors at wait_group). A 256-thread block is slow there, so the simulator cases
are the smallest shapes that reach every path: stages reused (the empty-barrier waits), a
2 x 2 grid with a partial tile in M and a B tile of one panel, K tails that TMA zero-fills,
alpha/beta, beta == 0 with C poisoned, fp16 and bf16. On a GPU the same cases run for real,
with v11's test shapes.
"""

import numpy as np
import pytest

from numba_gemm.explain import sass
from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import _wgmma as wg
from numba_gemm.hgemm import v11_wgmma as v11
from numba_gemm.hgemm import v11py_wgmma as v11py
from numba_gemm.measure import check
from numba_gemm.registry import get

F16, BF16 = np.dtype(np.float16), cm.BF16
DTYPES = [F16] + ([BF16] if BF16 is not None else [])


def test_level_contract():
    assert (v11py.LEVEL, v11py.PARENT, v11py.RASTER) == ("v11py", "v11", "super")
    assert v11py.SASS_MUST_HAVE == ("HGMMA", "UTMALDG", "SYNCS", "WARPGROUP.ARRIVE")
    assert v11py.SASS_MUST_NOT_HAVE == ("HMMA", "LDSM")
    assert set(v11py.KERNELS) == {"v11py_f16", "v11py_bf16"}
    assert v11py.kernel is v11py.KERNELS["v11py_f16"][0]
    assert v11py.AUTO is False                       # auto keeps choosing native levels
    assert v11py.ARCH == "sm_90a"
    lv = get("v11py")
    assert lv.family == "hgemm" and not lv.native and lv.parent == "v11"


def test_same_tile_as_v11():
    assert v11py.CONFIG == v11.CONFIG
    assert (v11py.BM, v11py.BN, v11py.BK, v11py.STAGES, v11py.TMA_LAG, v11py.THREADS) == \
        (128, 256, 64, 4, 2, 256)
    assert v11py.SMEM == v11.CONFIG.smem() == 4 * 49152 + 1024 + 64
    assert (v11py.BOX_A, v11py.BOX_B) == wg.boxes(v11.CONFIG) == ((128, 64), (64, 64))
    assert v11py.launch_config(300, 520, 72) == v11.launch_config(300, 520, 72)


def test_unsupported_is_v11s():
    for shape in [(5, 8, 8), (5, 8, 12), (5, 12, 8), (2**31, 8, 8)]:
        assert v11py.unsupported(*shape) == v11.unsupported(*shape)
    assert v11py.unsupported(5, 8, 12) and "v9" in v11py.unsupported(5, 8, 12)


@pytest.mark.parametrize("addr, lbo, sbo", [(1024, 16, 1024), (0x3FFF0, 8192, 1024), (49152 + 1024, 8192, 1024)])
def test_device_descriptor_is_the_host_mirror(addr, lbo, sbo):
    """The kernel's smem_desc (run in Python here) is _wgmma.smem_desc bit for bit."""
    from numba_gemm import ptx

    if not ptx.SIMULATOR:
        pytest.skip("the device function runs as Python only in the simulator")
    assert int(v11py.smem_desc(np.uint32(addr), np.uint32(lbo), np.uint32(sbo))) == wg.smem_desc(addr, lbo, sbo)


def test_device_supertile_is_the_host_decode():
    from numba_gemm import ptx

    if not ptx.SIMULATOR:
        pytest.skip("the device function runs as Python only in the simulator")
    for grid_m, grid_n, sm, sn in [(3, 5, 2, 2), (7, 2, 3, 1), (1, 1, 1, 1), (4, 9, 4, 3)]:
        got = [tuple(int(x) for x in v11py.supertile(np.uint32(b), np.uint32(grid_m), np.uint32(grid_n),
                                                      np.uint32(sm), np.uint32(sn)))
               for b in range(grid_m * grid_n)]
        assert got == [cm.supertile_decode(b, grid_m, grid_n, sm, sn) for b in range(grid_m * grid_n)]


def _device(x, offset=0):
    """x on the device as the kernels take it (bf16 as uint16 bits), its base `offset`
    elements past an allocation's start."""
    from numba import cuda

    bits = x.view(np.uint16) if x.dtype == BF16 else x
    if offset == 0:
        return cuda.to_device(bits)
    flat = cuda.to_device(np.zeros(bits.size + offset, bits.dtype))
    view = flat[offset:].reshape(bits.shape)
    view.copy_to_device(np.ascontiguousarray(bits))
    return view


def _case(M, N, K, dtype, alpha, beta, rng=None):
    from numba import cuda

    A, B, C = check.random_inputs(M, N, K, dtype, rng or np.random.default_rng())
    C_in = C.copy() if beta != 0 else np.full((M, N), np.nan, np.float32)
    dC = cuda.to_device(C_in)
    v11py.run(_device(A), _device(B), dC, alpha, beta)
    verdict = check.verify(dC.copy_to_host(), A, B, C, alpha, beta, family="hgemm")
    assert verdict.ok, f"v11py {dtype.name} M={M} N={N} K={K} a={alpha} b={beta}: {verdict}"


# (M, N, K, dtype, alpha, beta): what each reaches
SMALL = [
    pytest.param(70, 72, 328, F16, 0.5, 2.0, id="stages-reused"),      # 6 k-tiles: empty waits; K tail 8
    pytest.param(130, 264, 8, F16, -1.5, 0.25, id="grid-2x2"),         # M ragged; a 1-panel B tile
    pytest.param(9, 136, 72, BF16, 1.0, 0.0, id="bf16-beta0"),         # 3 panels; C NaN-poisoned
]


@pytest.mark.parametrize("M, N, K, dtype, alpha, beta", SMALL)
def test_small_ragged_shapes(M, N, K, dtype, alpha, beta):
    if dtype is None:
        pytest.skip("no bfloat16 (ml_dtypes missing)")
    _case(M, N, K, dtype, alpha, beta)


def test_refuses_what_tma_cannot_describe():
    """Before any launch: K or N not a multiple of 8, or a base that is not 16-byte aligned."""
    from numba import cuda

    A = np.ones((8, 12), np.float16)
    with pytest.raises(ValueError, match="v9"):
        v11py.run(_device(A), _device(np.ones((12, 8), np.float16)), cuda.to_device(np.zeros((8, 8), np.float32)), 1.0, 0.0)
    with pytest.raises(ValueError, match="16-byte"):
        v11py.run(_device(np.ones((8, 8), np.float16), offset=1), _device(np.ones((8, 8), np.float16)),
                  cuda.to_device(np.zeros((8, 8), np.float32)), 1.0, 0.0)


# ---- the census: compiled for sm_90a (wgmma needs it) in a child without the simulator ----

@pytest.fixture(scope="module")
def census():
    """v11py's kernels from the shared census (compiled for sm_90a without the simulator)."""
    try:
        got = sass.kernel_censuses("v11py")
    except sass.CensusUnavailable as e:
        pytest.skip(str(e))
    return {name: {"opcodes": c.opcodes, "registers": c.registers, "spills": c.spill_stores,
                   "local": c.local_memory_ops} for name, c in got.items()}


def _count(opcodes, prefix):
    return sum(n for op, n in opcodes.items() if op == prefix or op.startswith(prefix + "."))


def test_census_is_v11s(census):
    """Both specialisations: the wgmma, TMA and mbarrier instructions, no mma.sync or
    ldmatrix, 128 accumulators in registers (no local memory, no spills), within the 255 a
    256-thread block with __launch_bounds__(256, 1) may use; 4 HGMMA (one stage, 4 k16 steps,
    as v11) and no serialization of them (a 64-bit division would call a ptxas routine)."""
    assert set(census) == set(v11py.KERNELS)
    for name, c in census.items():
        ops = c["opcodes"]
        for want in v11py.SASS_MUST_HAVE + ("WARPGROUP.DEPBAR",):
            assert _count(ops, want) or any(o.startswith(want) for o in ops), (name, want)
        for banned in v11py.SASS_MUST_NOT_HAVE + ("LDL", "STL", "CALL"):
            assert not any(o.startswith(banned) for o in ops), (name, banned)
        assert _count(ops, "HGMMA") == 4, name               # nvdisasm: HGMMA.64x256x16.F32
        # the epilogue as v11's fast path: 64 pairs of floats per thread, 8 bytes per store (and
        # per load of C for beta != 0); with 4-byte stores it was 128 of each
        assert ops.get("STG.E.64") == 64 and ops.get("LDG.E.64") == 64, name
        assert not ops.get("STG.E") and not ops.get("LDG.E"), name
        assert c["local"] == 0 and c["spills"] == 0, name
        assert c["registers"] <= 255, name


# ---- on the GPU -------------------------------------------------------------------------

RAGGED = [(128, 256, 64), (129, 264, 72), (300, 520, 72), (1000, 40, 136), (37, 1032, 200),
          (513, 384, 1024), (4096, 264, 8), (1, 8, 8)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_ragged_shapes_on_the_gpu(dtype):
    rng = np.random.default_rng()
    for M, N, K in RAGGED:
        _case(M, N, K, dtype, 0.5, 3.0, rng=rng)
        _case(M, N, K, dtype, 1.0, 0.0, rng=rng)     # beta == 0: NaN in C must not leak


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_bitwise_equal_to_v11(dtype):
    """Same tile, same wgmma sequence, same order of accumulation: the same bits as v11."""
    from numba import cuda

    rng = np.random.default_rng()
    for M, N, K in [(300, 520, 200), (1024, 1024, 1024)]:
        A, B, C = check.random_inputs(M, N, K, dtype, rng)
        outs = []
        for level in (v11py, v11):
            dC = cuda.to_device(C)
            level.run(_device(A), _device(B), dC, 0.5, 2.0)
            outs.append(dC.copy_to_host())
        np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.gpu
def test_gemm_api_end_to_end():
    import numba_gemm

    rng = np.random.default_rng()
    for dtype in DTYPES:
        A, B, C = check.random_inputs(200, 136, 96, dtype, rng)
        out = numba_gemm.gemm(A, B, C.copy(), alpha=0.5, beta=2.0, level="v11py")
        assert check.verify(out, A, B, C, 0.5, 2.0, family="hgemm").ok
