"""The CUDA C twins (numba_gemm.measure.twins): one per SGEMM level, compiled by NVRTC to the same
instructions the level exists for, and exact like the level on a GPU."""
from pathlib import Path

import pytest

from tests.conftest import GPU, gpu_only, sgemm_case

import numba_gemm
from numba_gemm.explain import sass
from numba_gemm.measure import check, twins
from numba_gemm.runtime import nvrtc
from numba_gemm.sgemm import _splitk_parts, _warptile

SGEMM = [lv.name for lv in numba_gemm.levels() if lv.family == "sgemm"]


@pytest.mark.parametrize("level", SGEMM)
def test_every_sgemm_level_has_a_twin(level):
    assert twins.has_twin(level), f"native/{twins.source(level)} is missing"


@pytest.mark.parametrize("level", SGEMM)
def test_docstring_header_names_the_twins_to_diff_and_the_run(level):
    """The first line of each SGEMM level's docstring (the llm.c habit): its parent's twin and
    its own to diff, and the bench.py command that checks and times it."""
    lv = numba_gemm.registry.get(level)
    read, run = lv.module.__doc__.splitlines()[0].split(" · ")
    own = f"native/{twins.source(level)}"
    assert run == f"run: python bench.py --level {level}"
    if lv.parent is None:
        assert read.startswith(f"read: {own} ")
    else:
        assert read == f"read: diff native/{twins.source(lv.parent)} {own}"
    assert (Path(twins.__file__).resolve().parents[2] / own).is_file()


def test_only_sgemm_levels_have_twins():
    hgemm = [lv.name for lv in numba_gemm.levels() if lv.family == "hgemm"]
    for name in hgemm:
        assert not twins.has_twin(name)
    if hgemm:
        with pytest.raises(ValueError):
            twins.twin(hgemm[0])


@pytest.mark.parametrize("level", SGEMM)
def test_twin_compiles_to_the_levels_instructions(level):
    """NVRTC builds every kernel the level has (same names), with the level's SASS_MUST_HAVE."""
    try:
        kernels = twins.census(level)
    except (ImportError, OSError, sass.CensusUnavailable) as e:      # no NVRTC / nvdisasm here
        pytest.skip(str(e))
    t = twins.twin(level)
    assert {c.kernel for c in kernels} == set(t.kernel_names)
    for prefix in numba_gemm.registry.get(level).module.SASS_MUST_HAVE:
        assert any(c.has(prefix) for c in kernels), f"{level} twin: no {prefix}"
    for c in kernels:
        assert c.registers > 0
        assert not c.has("DFMA") and not c.has("DMUL"), c.kernel


# ---- the tile comes from Python ------------------------------------------------------------


def _options(level):
    return dict(d[2:].split("=") for d in twins.defines(level))


def _compile(level, options):
    try:
        return nvrtc.compile_variant(twins.source(level), tuple(f"-D{k}={v}" for k, v in options.items()))
    except (ImportError, OSError) as e:                               # no NVRTC here
        pytest.skip(str(e))


@pytest.mark.parametrize("level", SGEMM)
def test_twin_options_are_the_levels_constants(level):
    mod = numba_gemm.registry.get(level).module
    got = {k: int(v) for k, v in _options(level).items()}
    # a level that reduces its K slices in the kernel (k6gv, k9sk) also gets its sum's batch
    in_kernel = {"SUM_BATCH": _splitk_parts.BATCH} if getattr(mod, "SPLIT_IN_KERNEL", False) else {}
    if hasattr(mod, "TILING"):
        t = mod.TILING
        assert got == {"WT_TM": t.tile_m, "WT_TN": t.tile_n, "WT_TK": t.tile_k, "WT_WM": t.warp_m,
                       "WT_WN": t.warp_n, "WT_LANES_N": t.lanes_n, "WT_A_PAD": _warptile.A_PAD,
                       "WT_MIN_BLOCKS": _warptile.blocks_per_sm(t), **in_kernel}
        assert (mod.TILE_M, mod.TILE_N, mod.TILE_K) == (t.tile_m, t.tile_n, t.tile_k)
    else:
        assert got == {"TILE_M": mod.TILE_M, "TILE_N": mod.TILE_N, "TILE_K": mod.TILE_K,
                       "THREAD_M": mod.THREAD_M, "THREAD_N": mod.THREAD_N,
                       "BLOCK_X": mod.BLOCK[0], "BLOCK_Y": mod.BLOCK[1], **in_kernel}


@pytest.mark.parametrize("level", SGEMM)
def test_twin_does_not_compile_without_its_tile(level):
    with pytest.raises(nvrtc.CompileError, match="numba_gemm.measure.twins.defines"):
        _compile(level, {})


@pytest.mark.parametrize("level", ["k5", "k8"])       # one twin per header: tile.cuh, warptile.cuh
def test_each_tile_option_is_required(level):
    options = _options(level)
    for name in options:
        with pytest.raises(nvrtc.CompileError, match="numba_gemm.measure.twins.defines"):
            _compile(level, {k: v for k, v in options.items() if k != name})


@pytest.mark.parametrize("level, change, message", [
    ("k5", {"BLOCK_Y": "2"}, "k5: a TILE x TILE A tile"),               # threads do not cover the tile
    ("k6", {"THREAD_M": "4", "BLOCK_Y": "8"}, "k6: a thread's rows of A are two float4s"),
    ("k8", {"WT_WM": "48"}, "warp tiles must divide the block tile"),
])
def test_a_tile_the_body_cannot_run_does_not_compile(level, change, message):
    with pytest.raises(nvrtc.CompileError, match=message):
        _compile(level, {**_options(level), **change})


def _loop_ffma(text):
    return sum(op == "FFMA" for op in twins.main_loop(text))


@pytest.mark.parametrize("level", [n for n in SGEMM if n not in ("k1", "k2")])    # k1, k2: no tile phases
def test_main_loop_is_one_phase_of_the_levels_tile(level):
    """Per trip of the K loop, every kernel of the twin issues tile_k × thread_m × thread_n FFMA
    of the Numba level's tile per phase (k9 runs two phases a trip)."""
    try:
        texts = twins.twin_sass(level)
    except (ImportError, OSError) as e:
        pytest.skip(str(e))
    mod = numba_gemm.registry.get(level).module
    g, trip = mod.GEOMETRY, getattr(mod, "PHASES_PER_TRIP", 1)     # k9: two phases per trip
    for name, text in texts.items():
        t = twins.twin(level)
        if name in (t.copy_kernel, t.edge_kernel, t.tail_kernel):   # copies, strips, K tail: no tile phases
            continue
        assert _loop_ffma(text) == trip * g.tile_k * g.thread_m * g.thread_n, name


@pytest.mark.parametrize("level, change, ffma", [
    ("k5", {"THREAD_M": "4", "BLOCK_Y": "8"}, 32 * 4 * 4),    # 4 rows per thread, 256 threads
    ("k8", {"WT_TK": "16"}, 16 * 8 * 8),                     # k7's 16-deep phase
])
def test_another_tile_is_a_python_value(level, change, ffma):
    """Options other than the shipped ones build that tile (the loop follows them)."""
    cubin = _compile(level, {**_options(level), **change})
    for name, text in sass.split_functions(sass.disassemble(cubin)).items():
        assert _loop_ffma(text) == ffma, name


# ---- on a GPU: exact like the levels ------------------------------------------------------


SHAPES = [(1, 1, 1), (5, 7, 3), (130, 129, 17), (136, 132, 20), (9, 8, 18), (9, 10, 20),
          (1031, 997, 1009), (512, 512, 512), (4097, 33, 65), (139, 136, 17)]   # the last: k8e in place


@gpu_only
@pytest.mark.parametrize("level", SGEMM)
def test_twin_exact(level):
    from numba import cuda

    t = twins.twin(level)
    for i, (M, N, K) in enumerate(SHAPES):
        if numba_gemm.registry.get(level).unsupported(M, N, K):    # k6gv: M <= 8 only
            continue
        for alpha, beta in [(1.0, 0.0), (0.5, -1.5)]:
            A, B, C, C_in = sgemm_case(M, N, K, beta, i)
            dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
            t.run(dA, dB, dC, alpha, beta)
            v = check.verify(dC.copy_to_host(), A, B, C_in, alpha, beta)
            assert v.ok, f"{level} twin ({t.kernel_name(dA, dB, dC)}) {(M, N, K)} beta={beta}: {v}"


@gpu_only
@pytest.mark.parametrize("level", ["k6", "k7", "k8", "k9"])
def test_twin_unaligned_rows(level):
    """K, N multiples of 4 but A off a 16-byte boundary: the 32-bit-A kernel runs, exactly."""
    from numba import cuda

    M, N, K = 300, 260, 76
    A_big, B, C = check.random_inputs(M, N, K + 1)
    B = B[:K].copy()
    dA = cuda.to_device(A_big).reshape(-1)[1:1 + M * K].reshape(M, K)
    dB, dC = cuda.to_device(B), cuda.to_device(C)
    t = twins.twin(level)
    assert t.kernel_name(dA, dB, dC) == f"{level}_bc"
    t.run(dA, dB, dC, 1.0, 1.0)
    v = check.verify(dC.copy_to_host(), dA.copy_to_host(), B, C, 1.0, 1.0)
    assert v.ok, str(v)
