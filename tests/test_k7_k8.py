"""k7 (warp tiling), k8 (double buffering) and k9 (k8 with both buffers written out): exact on shapes that reach every edge path,
and compiled to what they exist for — conflict-free LDS.128 feeding a main loop that is
mostly FFMA, no local memory, within the register cap their launch bounds set.

The simulator runs one Python thread per GPU thread (256 per block here), so the shapes are
one to four blocks, chosen to hit each of the four specialisations, a partial tile in M, N
and K, and shapes smaller than one tile. The census compiles the kernels as they launch
(with their launch bounds) in a child process without the simulator: no GPU needed.
"""
import re

import numpy as np
import pytest

from tests.conftest import GPU, sgemm_case

import numba_gemm
from numba_gemm.measure import check
from numba_gemm.measure.twins import main_loop
from numba_gemm.registry import get
from numba_gemm.sgemm import _warptile
from numba_gemm.sgemm._loaders import vector_operands

LEVELS = ["k7", "k8", "k9"]

# (M, N, K) -> the specialisation it takes with aligned buffers
SHAPES = {
    (5, 7, 3): "edge",          # smaller than a tile in every direction
    (130, 129, 17): "edge",     # 2×2 blocks, a 1-column/2-row border, a 1-deep K tail
    (136, 132, 20): "vector",   # float4 borders in M and N, a 4-deep K tail
    (9, 8, 18): "bc",           # K % 4 != 0: A in 32-bit, B and C in float4
    (9, 10, 20): "a",           # N % 4 != 0: B and C in 32-bit
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("shape", list(SHAPES), ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
def test_exact(level, shape):
    M, N, K = shape
    for alpha, beta in [(1.0, 0.0), (-0.75, 2.5)]:
        A, B, C, C_in = sgemm_case(M, N, K, beta, seed=M * N + K)
        out = numba_gemm.gemm(A, B, C, alpha=alpha, beta=beta, level=level)
        v = check.verify(out, A, B, C_in, alpha, beta)
        assert v.ok, f"{level} {shape} alpha={alpha} beta={beta}: {v}"


@pytest.mark.parametrize("level", LEVELS)
def test_specialisation_choice(level):
    """Which kernel each shape runs: rows of an operand move as float4 only when 16-byte aligned."""
    from numba import cuda

    mod = get(level).module
    names = {v[0]: k for k, v in mod.SPECIALISATIONS.items()}
    for (M, N, K), kind in SHAPES.items():
        A, B, C = (cuda.to_device(x) for x in check.random_inputs(M, N, K))
        want = names[level if kind == "vector" else f"{level}_{kind}"]
        assert vector_operands(A, B, C) == want, (M, N, K)


@pytest.mark.parametrize("level", LEVELS)
def test_unaligned_base_takes_the_32_bit_path(level):
    """K and N multiples of 4, but A starts 4 bytes into an allocation: float4 loads of A would
    fault, so the kernel for 32-bit A runs and the result is exact."""
    M, N, K = 9, 8, 20
    rng = np.random.default_rng(3)
    A_big, B, C = check.random_inputs(M, N, K + 1, rng=rng)
    A = A_big.reshape(-1)[1:1 + M * K].reshape(M, K)      # misaligned by one float
    B = B[:K]
    from numba import cuda

    dA = cuda.to_device(A_big).reshape(-1)[1:1 + M * K].reshape(M, K)
    dB, dC = cuda.to_device(B), cuda.to_device(C)
    assert vector_operands(dA, dB, dC) == (False, True)
    numba_gemm.gemm(dA, dB, dC, alpha=1.5, beta=-1.0, level=level)
    v = check.verify(dC.copy_to_host(), A, B, C, 1.5, -1.0)
    assert v.ok, str(v)


@pytest.mark.parametrize("level", LEVELS)
def test_tiling_is_consistent(level):
    mod = get(level).module
    t = mod.TILING
    assert not t.problems()
    assert t.threads == 256 and t.block == mod.BLOCK
    assert (t.thread_m, t.thread_n) == (8, 8)
    assert mod.GEOMETRY.threads * t.thread_m * t.thread_n == t.tile_m * t.tile_n


@pytest.mark.parametrize("level", LEVELS)
def test_warp_step_prices_conflict_free_lds128(level):
    """The ledger view: every inner-loop shared load of every warp is one conflict-free LDS.128,
    4 per k for 64 FMAs; global loads are float4s."""
    mod = get(level).module
    t = mod.TILING
    for warp in range(t.warps):
        st = mod.warp_step(4096, 4096, 4096, 1, 2, warp, 3)
        inner = [a for a in st.accesses if a.inner]
        assert len(inner) == t.tile_k * (t.sub_m + t.sub_n)
        assert {(a.width, a.kind) for a in inner} == {(16, "lds128")}
        loads = [a for a in st.accesses if a.space == "global"]
        assert len(loads) == t.a_loads + t.b_loads and all(a.width == 16 for a in loads)
        assert st.fmas == t.tile_k * t.thread_m * t.thread_n


# ---- SASS census ---------------------------------------------------------------------------

def _is(instruction, opcode):
    """`instruction` (predicate, opcode, operands) is an `opcode`[.modifiers]."""
    return re.match(rf"(@!?P\d\s+)?{opcode}\b", instruction) is not None


@pytest.fixture(scope="module")
def census():
    """The levels' kernels from the shared census (one compile, cached), each with its CUDA C
    twin's SASS where NVRTC is here."""
    from numba_gemm.explain import sass
    from numba_gemm.measure import twins

    try:
        got = sass.kernel_censuses(*LEVELS)
    except sass.CensusUnavailable as e:
        pytest.skip(str(e))
    out = {}
    for level in LEVELS:
        try:
            twin, twin_error = twins.twin_sass(level), None
        except Exception as e:          # no NVRTC here: the twin comparison is skipped
            twin, twin_error = {}, f"CUDA C twin not compiled: {e!r}"
        for name in (level, level + "_edge"):
            c = got[name]
            out[name] = {"opcodes": c.opcodes, "registers": c.registers, "bounds": c.launch_bounds,
                         "spills": [c.spill_stores, c.spill_loads], "sass": c.sass,
                         "twin_sass": twin.get(name), "twin_error": twin_error}
    return out


@pytest.mark.parametrize("level", LEVELS)
def test_census(census, level):
    mod = get(level).module
    t, tk = mod.TILING, mod.TILE_K               # k per phase: k7 16, k8 and k9 8
    tk *= getattr(mod, "PHASES_PER_TRIP", 1)     # k9's loop: two phases per trip
    lds = t.sub_m + t.sub_n                      # float4s a lane reads per k: 4
    for name in (level, level + "_edge"):
        c = census[name]
        ops = c["opcodes"]
        # lds LDS.128 per k, tile_k k per phase, fully unrolled (the loop's only); nothing narrower
        assert ops.get("LDS.128", 0) == lds * tk, name
        assert sum(n for op, n in ops.items() if op.startswith("LDS")) == lds * tk, name
        assert not any(op.startswith(("LDL", "STL")) for op in ops), f"{name}: local memory"
        assert c["spills"] == [0, 0], name
        # the launch bounds (256 threads, 2 blocks per SM) cap registers at 128
        assert c["bounds"] == [256, 2] and 0 < c["registers"] <= 128, (name, c["registers"])
        assert not any(op.startswith(("DFMA", "DMUL", "DADD")) for op in ops), name
        loop = main_loop(c["sass"])
        ffma = sum(op == "FFMA" for op in loop)
        assert ffma == t.thread_m * t.thread_n * tk, (name, ffma)   # tile_k k × a thread's outputs
        assert ffma / len(loop) >= 0.8, f"{name}: FFMA {ffma} of {len(loop)} in the main loop"
        body = main_loop(c["sass"], operands=True)
        # A and B through the read-only path (load4_readonly / load_readonly), as in the twins
        ldg = [i for i in body if _is(i, "LDG")]
        assert ldg and all(".CONSTANT" in i for i in ldg), (name, ldg)
        # the tile stores fold their offsets: one address register per tile (before the
        # 64-bit shared indices, each float of a transposed A float4 had its own)
        bases = {re.search(r"\[(R\d+)", i).group(1) for i in body if _is(i, "STS")}
        assert len(bases) == 2, (name, sorted(bases))
    vec = census[level]["opcodes"]
    assert vec.get("STS.128", 0) >= 2 and vec.get("STG.E.128", 0) >= 16
    assert not any(op in ("LDG.E", "STG.E") for op in vec)   # no 32-bit global access


@pytest.mark.parametrize("level", LEVELS)
def test_main_loop_close_to_the_twin(census, level):
    """The Python tax, statically: the Numba main loop is at most 2 % longer than the CUDA C
    twin's (the same ptxas compiles both). The first k7 was 1180 against 1148 (+2.8 %), before
    its read-only loads and 64-bit shared indices."""
    for name in (level, level + "_edge"):
        c = census[name]
        if c["twin_sass"] is None:
            pytest.skip(c["twin_error"] or f"the twin has no kernel {name}")
        numba, twin = len(main_loop(c["sass"])), len(main_loop(c["twin_sass"]))
        assert numba <= 1.02 * twin, f"{name}: main loop {numba} instructions, the twin's {twin}"


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("level", LEVELS)
def test_gpu_ragged_and_large(level):
    for M, N, K in [(4097, 4097, 257), (1031, 997, 1009), (128, 128, 4096), (1, 4096, 4)]:
        for beta in (0.0, -0.5):
            A, B, C, C_in = sgemm_case(M, N, K, beta, seed=K)
            out = numba_gemm.gemm(A, B, C, alpha=0.5, beta=beta, level=level)
            v = check.verify(out, A, B, C_in, 0.5, beta)
            assert v.ok, f"{level} {(M, N, K)}: {v}"


def test_the_wide_tilings_of_the_tile_search_build_for_k9():
    """tools/k7_tiles.py --levels k9: each wide candidate is a valid tiling for k9's pipeline
    (one A float4 per thread) whose launch bounds keep 256 threads on an SM, so a thread may
    have 255 registers for its 128 accumulators; the first is k9's own."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("k7_tiles", Path(__file__).parents[1] / "tools" / "k7_tiles.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    k9 = get("k9").module
    first, *wide = [tool.tiling(c) for c in tool.CANDIDATES["k9"]]
    assert first == k9.TILING
    for t in wide:
        assert not t.problems() and t.a_loads == 1, t
        assert t.threads * _warptile.blocks_per_sm(t) == 256 and t.thread_m * t.thread_n == 128, t
        assert _warptile.make(t, True, True).unrolled_buffers is not None
