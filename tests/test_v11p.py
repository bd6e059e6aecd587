"""v11p (v11 on copies of A and B with 16-byte-aligned rows).

CI (no GPU): the contract and the registry order; which shapes it serves (K or N not a multiple of
8) and refuses (aligned ones, naming v11); the pitch and the copy's launch shape; the copies'
tensor maps pass every TMA rule at shapes whose own rows would not; NVRTC compiles the copy and
the GEMM kernels with the census (v11's HGMMA, UTMALDG; the copy's 16-byte stores; no local
memory); run() recorded with the driver stubbed: the two copies, then v11's kernel reading them.
GPU: exact on ragged shapes for both dtypes, alpha/beta, beta == 0 with C poisoned by NaN,
K and N from 1 to 7, bit-identical reruns, gemm() captured in a CUDA graph replaying the same bits.
    python -m pytest -q tests/test_v11p.py -m gpu
"""
import numpy as np
import pytest

from numba_gemm.hgemm import _common as cm
from numba_gemm.hgemm import _wgmma as wg
from numba_gemm.hgemm import v11p_pitched as vp
from numba_gemm.measure import check
from numba_gemm.registry import registry
from numba_gemm.runtime import driver, launch, tma
from tests.graph_replay import replays_exactly
from tests.test_hopper import census_ops

DTYPES = [np.float16] + ([cm.BF16] if cm.BF16 is not None else [])


def test_contract_and_registry_order():
    names = list(registry())
    assert names.index("v11") < names.index("v11p") < names.index("v12")
    assert vp.PARENT == "v11" and vp.CONFIG == wg.WgmmaTile() and vp.DEFINES == vp.CONFIG.defines()


def test_shapes_served_and_refused():
    for ok in [(4097, 4097, 4097), (777, 5000, 3001), (1, 1, 1), (128, 4100, 64), (64, 64, 100)]:
        assert vp.unsupported(*ok) is None, ok
    for aligned in [(4096, 4096, 4096), (1, 8, 8), (777, 5000, 3000)]:
        assert "v11" in vp.unsupported(*aligned)
    assert "2^31" in vp.unsupported(2**31, 9, 9)
    with pytest.raises(ValueError, match="v11"):
        vp.run(np.zeros((16, 8), np.float16), np.zeros((8, 16), np.float16), None, 1.0, 0.0)


def test_pitch_and_copy_launch():
    assert [vp.pitch(n) for n in (1, 7, 8, 9, 4097)] == [8, 8, 8, 16, 4104]
    (blocks,), (threads,) = vp.copy_config(4097, 4097)
    assert threads == vp.COPY_THREADS and blocks * threads >= 4097 * 4104 // 8
    assert vp.copy_config(1, 1) == ((1,), (vp.COPY_THREADS,))
    assert vp.copies_bytes(4097, 4097, 4097) == 2 * 2 * 4097 * 4097 + 2 * 2 * 4097 * 4104


def test_the_copies_pass_the_tma_rules_where_the_operands_do_not():
    M, N, K = 777, 5001, 3001
    with pytest.raises(ValueError):
        wg.check_operands("v11", 0x10000, 0x20000, M, N, K, vp.CONFIG)
    wg.check_operands("v11p", 0x10000, 0x20000, M, N, K, vp.CONFIG, (vp.pitch(K), vp.pitch(N)))
    dims, strides, _ = tma.matrix_args(0x10000, M, K, 128, 64, 2, vp.pitch(K))
    assert dims == (K, M) and strides == (2 * 3008,)          # true extent, padded stride


def test_compiles_with_its_census():
    ops = census_ops(vp.SOURCE, vp.DEFINES, [*vp.KERNEL_NAMES.values(), vp.REPITCH], vp.SASS_MUST_HAVE,
                     vp.SASS_MUST_NOT_HAVE)
    assert any(o.startswith("STG.E.128") for o in ops)             # the copy's 16-byte stores


class _Array:
    def __init__(self, ptr, shape, dtype):
        self.ptr, self.shape, self.dtype = ptr, shape, np.dtype(dtype)


def test_run_copies_both_operands_then_runs_v11s_kernel(monkeypatch):
    from numba_gemm.runtime import nvrtc

    names, maps = [], []
    monkeypatch.setattr(nvrtc, "function", lambda source, name, defines=(): names.append(name) or len(names))
    monkeypatch.setattr(driver, "allow_dynamic_smem", lambda fn, smem: None)
    monkeypatch.setattr(vp.cm, "device_ptr", lambda a: a.ptr)
    monkeypatch.setattr(vp.workspace, "scratch", lambda C, tag, n: _Array(0x7000 if "A" in tag else 0x8000, (n,), np.uint8))

    def maps_and_args(level, A, B, C, alpha, beta, config, pitched=None):
        maps.append(pitched)
        return cm.pack_args(("p", C.ptr), ("f", alpha), ("f", beta))

    monkeypatch.setattr(vp.wg, "maps_and_args", maps_and_args)
    M, N, K = 777, 5001, 3001
    A, B, C = _Array(0x1000, (M, K), np.float16), _Array(0x2000, (K, N), np.float16), _Array(0x3000, (M, N), np.float32)
    with launch.recording() as rec:
        vp.run(A, B, C, 0.5, 2.0)
    copy_a, copy_b, gemm = rec.launches
    assert names == [vp.REPITCH, "v11p_wgmma_f16"]
    assert maps == [((0x7000, 3008), (0x8000, 5008))]                # v11's maps over the copies
    for L, (src, rows, cols, dst, p) in ((copy_a, (0x1000, M, K, 0x7000, 3008)), (copy_b, (0x2000, K, N, 0x8000, 5008))):
        args, kept = L.keep
        assert [a.value for a in args] == [src, rows, cols, dst, p] and L.grid[0] == vp.copy_config(rows, cols)[0][0]
        assert [b.ptr for b in kept] == [0x7000, 0x8000]           # the copies live as long as the record
    args, _ = gemm.keep
    assert gemm.grid == vp.launch_config(M, N, K)[0] and [a.value for a in args] == [0x3000, 0.5, 2.0]


# ---------------------------------------------------------------------------- GPU

def _dev(x):
    from numba import cuda

    return cuda.to_device(x.view(np.uint16) if x.dtype == cm.BF16 else x)


SHAPES = [(1, 1, 1), (7, 3, 5), (65, 129, 77), (127, 201, 72), (300, 520, 65), (777, 5000, 3001),
          (129, 264, 1001), (1000, 1001, 1000), (4097, 257, 513), (64, 7, 4096)]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_exact_on_ragged_shapes(dtype):
    from numba import cuda

    rng = np.random.default_rng()
    for M, N, K in SHAPES:
        assert vp.unsupported(M, N, K) is None
        for alpha, beta in ((0.5, 3.0), (1.0, 0.0)):
            A, B, C = check.random_inputs(M, N, K, dtype, rng)
            C_in = C.copy() if beta != 0 else np.full((M, N), np.nan, np.float32)
            dA, dB = _dev(A), _dev(B)
            outs = []
            for _ in range(2):
                dC = cuda.to_device(C_in)
                vp.run(dA, dB, dC, alpha, beta)
                cuda.synchronize()
                outs.append(dC.copy_to_host())
            v = check.verify(outs[0], A, B, C, alpha, beta, family="hgemm")
            what = f"v11p {np.dtype(dtype).name} M={M} N={N} K={K} a={alpha} b={beta}"
            assert v.ok, f"{what}: {v}"
            assert outs[0].tobytes() == outs[1].tobytes(), f"{what}: two runs differ"


@pytest.mark.gpu
def test_captured_graph_replays_the_same_bits():
    """The two copies and the GEMM captured with the driver's stream capture, replayed
    (tests/graph_replay.py)."""
    replays_exactly("v11p", 300, 1001, 777, np.random.default_rng())
