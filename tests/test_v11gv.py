"""v11gv (skinny M as a GEMV: B streamed into registers, K slices reduced in a cluster).

CI (no GPU): the contract and the registry order; the refusal of M > 2; plan_splits as a pure
function (every K step in exactly one slice, at most the cluster size, a forced split checked);
NVRTC compiles every kernel with its census (16-byte loads of B, FFMA, the cluster barrier, loads
from distributed shared memory; no tensor-core instruction, no local memory); run() recorded
with the driver stubbed: one launch, clusters of S along x when S > 1, the kernel by M and
alignment.
GPU: exact on ragged shapes for both dtypes with automatic and forced splits, beta == 0 with C
poisoned by NaN, bit-identical reruns, a captured CUDA graph replaying the same bits.
    python -m pytest -q tests/test_v11gv.py -m gpu
"""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numba_gemm import splitk
from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import v11gv_gemv as gv
from numba_gemm.measure import check
from numba_gemm.registry import registry
from numba_gemm.runtime import driver, launch
from numba_gemm.util import ceil_div
from tests.graph_replay import replays_exactly

DTYPES = [np.float16] + ([cm.BF16] if cm.BF16 is not None else [])


def test_contract_and_registry_order():
    names = list(registry())
    assert names.index("v11") < names.index("v11gv") < names.index("v11sk")
    assert registry()["v11gv"].parent == "v11sk"


def test_refuses_more_than_two_rows():
    assert gv.unsupported(3, 4096, 4096) and "v11sk" in gv.unsupported(3, 4096, 4096)
    assert all(gv.unsupported(M, 4099, 77) is None for M in (1, 2))          # any N and K
    assert "2^31" in gv.unsupported(1, 8, 2**31 - 64) and gv.unsupported(1, 8, 2**31 - 1025) is None
    with pytest.raises(ValueError, match="M ≤ 2"):
        gv.run(np.zeros((3, 8), np.float16), np.zeros((8, 8), np.float16), None, 1.0, 0.0)


def test_plan_of_decode_shapes():
    # 132 SMs: R = 1 holds 3 CTAs an SM, R = 2 two; one wave, at most 8 slices of 4 steps or more
    assert [gv.plan_splits(*s) for s in [(1, 4096, 4096), (2, 14336, 4096), (2, 8192, 8192),
                                         (1, 4096, 128), (1, 128, 4096), (2, 65536, 4096)]] == [8, 4, 8, 1, 8, 1]


@settings(max_examples=300, deadline=None)
@given(M=st.integers(1, 2), N=st.integers(1, 2**16), K=st.integers(1, 2**20), sms=st.integers(1, 264))
def test_plan_splits_covers_k_once(M, N, K, sms):
    S = gv.plan_splits(M, N, K, sms=sms)
    steps = ceil_div(K, gv.CONFIG.bk)
    per = splitk.slice_k_tiles(steps, S)
    assert 1 <= S <= gv.MAX_SPLITS
    assert (S - 1) * per < steps <= S * per                  # no empty slice, every step once
    if S > 1:
        assert per >= gv.MIN_SLICE_STEPS
        assert ceil_div(N, gv.CONFIG.bn) * S <= sms * gv.CTAS_PER_SM[gv.rows_for(M)]     # one wave


def test_forced_splits_checked():
    for bad in (0, -1, 1.5, True, 9):
        with pytest.raises(ValueError, match="splits"):
            gv.plan_splits(1, 4096, 4096, splits=bad)
    with pytest.raises(ValueError, match="splits"):
        gv.plan_splits(1, 4096, 128, splits=3)               # 2 K steps: at most 2 slices
    assert gv.plan_splits(1, 4096, 4096, splits=3) == 3
    assert gv.plan_splits(1, 4096, 64 * 7, splits=4) == 4 and splitk.slice_k_tiles(7, 4) == 2


# ---------------------------------------------------------------------------- NVRTC + census

def test_compiles_with_its_census():
    from numba_gemm.explain import sass
    from numba_gemm.runtime import nvrtc

    cubin = nvrtc.compile_variant(gv.SOURCE, gv.DEFINES)
    log = nvrtc.compile_log(gv.SOURCE, defines=gv.DEFINES)
    names = set(gv.KERNELS.values()) | set(gv.EDGE_KERNELS.values())
    assert set(sass.kernel_resources(cubin)) == names and set(gv.KERNEL_NAMES.values()) <= names
    spills = re.findall(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert len(spills) == len(names) and all(s == ("0", "0", "0") for s in spills), log
    per_kernel = {c.kernel: c for c in sass.census_cubin(cubin, "v11gv")}
    for name, c in per_kernel.items():
        for want in gv.SASS_MUST_HAVE:
            if want == "LDG.E.128" and name in gv.EDGE_KERNELS.values():
                continue                                     # the edge kernel loads 16 bits at a time
            assert c.has(want), (name, want)
        for banned in gv.SASS_MUST_NOT_HAVE + ("LDL", "STL"):
            assert not c.has(banned), (name, banned)
    # the loop's loads, 16 bytes each: 8 rows of B and R rows of A (R = 1: also the first step's, before the loop)
    # (and the first step's, before the loop)
    assert [per_kernel[f"v11gv_f16_r{r}"].opcodes.get("LDG.E.128.CONSTANT") for r in gv.ROWS] == [18, 20]
    assert [gv.rows_for(M) for M in (1, 2)] == [1, 2]


# ---------------------------------------------------------------------------- run(), recorded (no GPU)

class _Array:
    def __init__(self, ptr, shape, dtype):
        self.ptr, self.shape, self.dtype = ptr, shape, np.dtype(dtype)


@pytest.fixture
def stubbed(monkeypatch):
    from numba_gemm.runtime import nvrtc

    names = []
    monkeypatch.setattr(nvrtc, "function",
                        lambda source, name, defines=(): names.append((source, name, defines)) or 0x77)
    monkeypatch.setattr(driver, "allow_dynamic_smem", lambda fn, smem: None)
    monkeypatch.setattr(gv.cm, "sm_count", lambda: 132)
    monkeypatch.setattr(gv.cm, "resident_clusters", lambda fn, block, smem, c: 3 * 132 // c)  # every plan fits
    monkeypatch.setattr(gv.cm, "device_ptr", lambda a: a.ptr)
    return names


def _run(M, N, K, dtype=np.float16, base=0x1000, **kw):
    A, B, C = _Array(base, (M, K), dtype), _Array(0x20000, (K, N), dtype), _Array(0x30000, (M, N), np.float32)
    with launch.recording() as rec:
        gv.run(A, B, C, 0.5, -2.0, **kw)
    (L,) = rec.launches                                      # one launch, split or not
    return L


def test_run_decode_is_one_cluster_launch(stubbed):
    L = _run(1, 4096, 4096)
    assert L.grid == (16 * 8, 1, 1) and L.cluster == 8 and L.block == (256, 1, 1)
    assert L.smem == gv.smem_bytes(1)
    assert [a.value for a in L.keep[3:]] == [1, 4096, 4096, 0.5, -2.0, 512, 8]   # M N K alpha beta per S
    assert stubbed == [(gv.SOURCE, "v11gv_f16_r1", ())]


def test_run_picks_the_kernel_by_rows_and_alignment(stubbed):
    assert _run(2, 4096, 128).cluster is None                 # 2 K steps: no split
    _run(2, 4096, 4096, np.uint16)                            # bf16 bits
    _run(1, 4096, 4096)
    _run(2, 4097, 4096)                                       # rows of B not whole 16 bytes
    L = _run(1, 4096, 4096, base=0x1008)                      # A's base not 16-byte aligned
    assert L.smem == gv.smem_bytes(2)                         # the edge kernel's 2 rows, at M = 1 too
    _run(1, 4096, 4096, prefetch=False)
    assert [n for _, n, _ in stubbed] == ["v11gv_f16_r2", "v11gv_bf16_r2", "v11gv_f16_r1",
                                          "v11gv_f16_edge", "v11gv_f16_edge", "v11gv_f16_r1"]
    assert [d for *_, d in stubbed] == [()] * 5 + [gv.NO_PREFETCH]


# ---------------------------------------------------------------------------- GPU

def _dev(x):
    from numba import cuda

    return cuda.to_device(x.view(np.uint16) if x.dtype == cm.BF16 else x)


def _case(M, N, K, dtype, alpha, beta, rng, splits=None):
    """Two runs against float64 (C poisoned with NaN when beta == 0): the same bytes both times."""
    from numba import cuda

    A, B, C = check.random_inputs(M, N, K, dtype, rng)
    C_in = C.copy() if beta != 0 else np.full((M, N), np.nan, np.float32)
    dA, dB = _dev(A), _dev(B)
    S = gv.plan_splits(M, N, K, sms=gv.cm.sm_count(), splits=splits)
    what = f"v11gv {np.dtype(dtype).name} M={M} N={N} K={K} a={alpha} b={beta} S={S}"
    outs = []
    for _ in range(2):
        dC = cuda.to_device(C_in)
        gv.run(dA, dB, dC, alpha, beta, splits=splits)
        cuda.synchronize()
        outs.append(dC.copy_to_host())
    v = check.verify(outs[0], A, B, C, alpha, beta, family="hgemm")
    assert v.ok, f"{what}: {v}"
    assert outs[0].tobytes() == outs[1].tobytes(), f"{what}: two runs differ"


SHAPES = [(1, 1, 1), (1, 8, 8), (1, 4096, 4096), (1, 4097, 4095), (2, 300, 77), (2, 1000, 777),
          (2, 8192, 2048), (1, 264, 4104), (2, 255, 513), (2, 14336, 1024), (1, 257, 65), (1, 64, 2**17)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_exact_on_ragged_shapes_auto_splits(dtype):
    rng = np.random.default_rng()
    for M, N, K in SHAPES:
        _case(M, N, K, dtype, 0.5, 3.0, rng)
        _case(M, N, K, dtype, 1.0, 0.0, rng)                 # beta == 0: NaN in C must not leak


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("splits", [1, 2, 3, 7, 8])
def test_exact_with_forced_splits(dtype, splits):
    rng = np.random.default_rng()
    for M, N, K in [(1, 520, 1024), (2, 264, 1000), (2, 776, 2048), (1, 130, 1031)]:
        _case(M, N, K, dtype, -1.5, 0.25, rng, splits=splits)


@pytest.mark.gpu
def test_exact_without_prefetch():
    from numba import cuda

    rng = np.random.default_rng()
    for M, N, K in [(1, 4096, 4096), (1, 264, 1000)]:
        A, B, C = check.random_inputs(M, N, K, np.float16, rng)
        dC = cuda.to_device(C)
        gv.run(_dev(A), _dev(B), dC, 0.5, -1.0, prefetch=False)
        assert check.verify(dC.copy_to_host(), A, B, C, 0.5, -1.0, family="hgemm").ok


@pytest.mark.gpu
def test_captured_graph_replays_the_same_bits():
    assert gv.plan_splits(1, 4096, 4096, sms=gv.cm.sm_count()) > 1
    replays_exactly("v11gv", 1, 4096, 4096, np.random.default_rng())


def test_ledgers_say_what_limits_it():
    """--explain: no tensor-core wording for a level that has no tensor-core instruction."""
    from numba_gemm.explain import ledgers

    text = ledgers.explain("v11gv", "h200", n=(1, 4096, 4096))
    assert "straight into registers" in text and "bytes in flight" in text
    assert "tensor-core level" not in text
    assert "tensor-core level" in ledgers.explain("v11sk", "h200", n=(1, 4096, 4096))
