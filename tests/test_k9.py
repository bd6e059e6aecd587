"""k9 (k8 + B copied by cp.async): exact on shapes that reach every edge path and
specialisation, and compiled to what it exists for — LDGSTS for B in the main loop, A still
through registers (one LDG + transposing STS per float4, as k8), no B staging (no STS.128),
conflict-free LDS.128, no local memory, within the register cap of its launch bounds; the CUDA
C twin compiles to the same loop; auto's fp32 picks are what they were without k9.

Simulator shapes as tests/test_k7_k8.py (one to four 256-thread blocks): each specialisation,
partial tiles in M, N and K, shapes smaller than a tile, and K longer than the ring (more tiles
than stages, so every stage is reused). The census compiles the kernels with their launch
bounds in a child process without the simulator: no GPU needed.
"""
import re

import numpy as np
import pytest

from tests.conftest import GPU, sgemm_case

import numba_gemm
from numba_gemm import check, choose
from numba_gemm.registry import get
from numba_gemm.sgemm._loaders import vector_operands
from numba_gemm.twins import main_loop

LEVEL = "k9"
MOD = get(LEVEL).module

# (M, N, K) -> the specialisation it takes with aligned buffers
SHAPES = {
    (5, 7, 3): "edge",          # smaller than a tile in every direction
    (130, 129, 17): "edge",     # 2×2 blocks, a 1-column/2-row border, a 1-deep K tail
    (136, 132, 20): "vector",   # float4 borders in M and N, a 4-deep K tail
    (9, 8, 18): "bc",           # K % 4 != 0: A in 32-bit loads, B by 16-byte copies, C in float4
    (9, 10, 20): "a",           # N % 4 != 0: B by 4-byte copies, C in 32-bit
    (7, 12, 60): "vector",      # 8 K tiles through a 3-stage ring: every stage used twice or more
    (6, 5, 45): "edge",         # the same with a 5-deep tail, 4-byte copies
}


def _run_device(M, N, K, alpha, beta, seed, stages=None):
    """The level's run() on device arrays (C poisoned with NaN where beta == 0: the kernel
    itself must not read it), checked against float64."""
    from numba import cuda

    A, B, C, C_in = sgemm_case(M, N, K, beta, seed=seed)
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
    if stages is None:
        MOD.run(dA, dB, dC, alpha, beta)
    else:
        MOD.run(dA, dB, dC, alpha, beta, stages=stages)
    return check.verify(dC.copy_to_host(), A, B, C_in, alpha, beta)


@pytest.mark.parametrize("shape", list(SHAPES), ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
def test_exact(shape):
    M, N, K = shape
    for alpha, beta in [(1.0, 0.0), (-0.75, 2.5)]:
        A, B, C, C_in = sgemm_case(M, N, K, beta, seed=M * N + K + 9)
        out = numba_gemm.gemm(A, B, C, alpha=alpha, beta=beta, level=LEVEL)
        v = check.verify(out, A, B, C_in, alpha, beta)
        assert v.ok, f"{shape} alpha={alpha} beta={beta}: {v}"


@pytest.mark.parametrize("shape", [(7, 12, 60), (9, 10, 20), (9, 8, 18)], ids=["vector", "a", "bc"])
def test_nan_in_c_does_not_leak_with_beta_zero(shape):
    """BLAS: with beta == 0 C is write-only. Through run() on device arrays, so the kernel is
    handed the NaN-poisoned C (gemm()'s NumPy path would not upload it)."""
    v = _run_device(*shape, alpha=1.25, beta=0.0, seed=sum(shape))
    assert v.ok, f"{shape}: {v}"


@pytest.mark.parametrize("stages", [2, 4])
def test_other_ring_depths_exact(stages):
    """run(..., stages=): the ring as an experiment (tools/hopper_top.py's k9:stages=2), exact
    through a ring reused several times on a 16-byte, a 4-byte-copy and an edge shape."""
    for M, N, K in [(7, 12, 60), (9, 10, 44), (130, 9, 37)]:
        v = _run_device(M, N, K, -0.75, 1.5, seed=K + stages, stages=stages)
        assert v.ok, f"stages={stages} {(M, N, K)}: {v}"


def test_variant_refuses_a_ring_it_cannot_build():
    with pytest.raises(ValueError, match="stages"):
        MOD.variant(1)
    with pytest.raises(ValueError, match="static shared memory"):
        MOD.variant(7)
    assert MOD.variant() is MOD.SPECIALISATIONS


def test_specialisation_choice():
    """Which kernel each shape runs: B is copied 16 bytes at a time only when its rows (and C's)
    are 16-byte aligned."""
    from numba import cuda

    names = {v[0]: k for k, v in MOD.SPECIALISATIONS.items()}
    for (M, N, K), kind in SHAPES.items():
        A, B, C = (cuda.to_device(x) for x in check.random_inputs(M, N, K))
        want = names[LEVEL if kind == "vector" else f"{LEVEL}_{kind}"]
        assert vector_operands(A, B, C) == want, (M, N, K)


def test_unaligned_base_of_b_takes_the_4_byte_copies():
    """K and N multiples of 4, but B starts 4 bytes into an allocation: a 16-byte cp.async of B
    would fault (the simulator's twin refuses it too), so B is copied a float at a time."""
    from numba import cuda

    M, N, K = 9, 8, 20
    A, B_big, C = check.random_inputs(M, N + 1, K, rng=np.random.default_rng(4))
    C = C[:, :N].copy()
    B = B_big.reshape(-1)[1:1 + K * N].reshape(K, N)
    dB = cuda.to_device(B_big).reshape(-1)[1:1 + K * N].reshape(K, N)
    dA, dC = cuda.to_device(A), cuda.to_device(C)
    assert vector_operands(dA, dB, dC) == (True, False)
    numba_gemm.gemm(dA, dB, dC, alpha=1.5, beta=-1.0, level=LEVEL)
    v = check.verify(dC.copy_to_host(), A, B, C, 1.5, -1.0)
    assert v.ok, str(v)


def test_ring_fits_two_blocks_per_sm():
    t = MOD.TILING
    assert not t.problems() and t.threads == 256 and t.block == MOD.BLOCK
    assert t == get("k8").module.TILING                          # k8's tiling, unchanged
    assert MOD.STAGES in (2, 3)
    assert MOD.SMEM_BYTES == MOD.STAGES * t.tile_k * ((t.tile_m + 4) + t.tile_n) * 4
    assert MOD.SMEM_BYTES <= 48 * 1024 and 2 * MOD.SMEM_BYTES <= 227 * 1024


def test_warp_step_is_k8s_phase():
    """The ledger view: k8's accesses (the copies write where k8's STS.128 of B wrote, B
    stages 4 KB apart: the same banks), conflict-free LDS.128 in the inner loop."""
    t = MOD.TILING
    k8 = get("k8").module
    for warp in range(t.warps):
        st = MOD.warp_step(4096, 4096, 4096, 1, 2, warp, 5)
        inner = [a for a in st.accesses if a.inner]
        assert len(inner) == t.tile_k * (t.sub_m + t.sub_n)
        assert {(a.width, a.kind) for a in inner} == {(16, "lds128")}
        loads = [a for a in st.accesses if a.space == "global"]
        assert len(loads) == t.a_loads + t.b_loads and all(a.width == 16 for a in loads)
        assert st.fmas == t.tile_k * 64
        ref = k8.warp_step(4096, 4096, 4096, 1, 2, warp, 5)
        assert [(a.space, a.op, a.width, a.kind) for a in st.accesses] == \
               [(a.space, a.op, a.width, a.kind) for a in ref.accesses]


SHAPES_AUTO = [(64, 64, 64), (512, 512, 512), (1024, 1024, 1024), (4096, 4096, 4096), (4097, 4097, 4097),
               (8192, 8192, 8192), (128, 4096, 4096), (4096, 128, 4096), (256, 256, 16384), (1000, 1000, 33)]


@pytest.mark.parametrize("native", [True, False])
def test_auto_fp32_picks_unchanged_until_k9_is_measured(monkeypatch, native):
    """No calibration for k9 yet: auto ranks it after every calibrated level and picks, for
    float32, exactly what it picked before k9 joined the registry."""
    from numba_gemm import registry

    assert choose.params(LEVEL, np.float32) is None
    with_k9 = {s: choose.rank(np.float32, *s, native) for s in SHAPES_AUTO}
    full = registry.registry()
    monkeypatch.setattr(choose._levels, "registry", lambda *a, **k: {n: lv for n, lv in full.items() if n != LEVEL})
    for s, ranked in with_k9.items():
        names = [q.level for q in ranked]
        assert LEVEL in names, s
        assert all(q.ms is not None for q in ranked[:names.index(LEVEL)]), s
        without = [q.level for q in choose.rank(np.float32, *s, native)]
        assert names[0] == without[0] != LEVEL, s
        assert [n for n in names if n != LEVEL] == without, s


# ---- SASS census ---------------------------------------------------------------------------

def _is(instruction, opcode):
    return re.match(rf"(@!?P\w+\s+)?{opcode}\b", instruction) is not None


@pytest.fixture(scope="module")
def census():
    from numba_gemm import sass

    try:
        got = sass.kernel_censuses(LEVEL)
    except sass.CensusUnavailable as e:
        pytest.skip(str(e))
    return {name: got[name] for name, _ in MOD.SPECIALISATIONS.values()}


def _copies(bc_vec: bool) -> dict:
    """{LDGSTS opcode: cp.async a thread issues per K tile} of one specialisation: B's float4 is
    one 16-byte copy (cp.async.cg: LDGSTS.E.BYPASS.128) where B's rows are 16-byte aligned,
    else four 4-byte copies (cp.async.ca: LDGSTS.E)."""
    b = MOD.TILING.b_loads
    return {"LDGSTS.E.BYPASS.128": b} if bc_vec else {"LDGSTS.E": 4 * b}


COPIES = {name: _copies(key[1]) for key, (name, _) in MOD.SPECIALISATIONS.items()}
COPY_BYTES = {"LDGSTS.E.BYPASS.128": 16, "LDGSTS.E": 4}


def test_copies_per_tile():
    """The shipped tiling: one float4 of B per thread per tile."""
    assert COPIES == {"k9": {"LDGSTS.E.BYPASS.128": 1}, "k9_edge": {"LDGSTS.E": 4},
                      "k9_bc": {"LDGSTS.E.BYPASS.128": 1}, "k9_a": {"LDGSTS.E": 4}}


def check_copies(name, loop):
    """The main loop copies this specialisation's share of a B tile by cp.async, of the right
    widths. How many static LDGSTS carry it is ptxas's choice (a zero-fill as a predicate
    operand, or one copy per arm of a branch), so each kind must appear at least as often as
    the thread's copies per tile and at most twice, no other kind, and the bytes at least the
    thread's share of a B tile."""
    got = {op: loop.count(op) for op in set(loop) if op.startswith("LDGSTS")}
    want = COPIES[name]
    assert set(got) == set(want), (name, got, want)
    for op, n in want.items():
        assert n <= got[op] <= 2 * n, (name, op, got[op], n)
    t = MOD.TILING
    need = t.tile_n * t.tile_k * 4 // t.threads                      # bytes per thread per B tile
    assert sum(n * COPY_BYTES[op] for op, n in want.items()) == need, name
    assert sum(n * COPY_BYTES[op] for op, n in got.items()) >= need, name
    return got


def executable_local_memory(census) -> list[str]:
    """Local-memory instructions of a kernel that can run: every LDL/STL (spills are marked
    "SpillRefill" by nvdisasm, local arrays are not) except ptxas's never-executed fillers,
    predicated on the always-false @!PT."""
    out = []
    for line in census.sass.splitlines():
        m = re.match(r"^\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if m and re.match(r"(@!?U?P\w+\s+)?(LDL|STL)\b", m.group(1)) and not m.group(1).startswith("@!PT "):
            out.append(m.group(1).split("(*")[0].strip() + (" (spill)" if "SpillRefill" in line else ""))
    return out


def test_local_memory_check_tells_fillers_from_accesses():
    """What test_census counts as local memory, on nvdisasm lines: a spill, a local array's
    access and a predicated one count; ptxas's @!PT filler does not."""
    from types import SimpleNamespace

    lines = ["        /*0cf0*/                   STL [R1], R20        (*\"SpillRefill\"*);",
             "        /*0d00*/                   LDL.64 R2, [R1+0x8] ;",
             "        /*0d10*/               @P0 LDL R4, [R1] ;",
             "        /*0d20*/              @!PT LDL RZ, [RZ] ;",
             "        /*0d30*/              @!PT LDS RZ, [RZ] ;",
             "        /*0d40*/                   LDS.128 R4, [R8] ;"]
    got = executable_local_memory(SimpleNamespace(sass="\n".join(lines)))
    assert got == ["STL [R1], R20 (spill)", "LDL.64 R2, [R1+0x8]", "@P0 LDL R4, [R1]"]


@pytest.mark.parametrize("name", list(COPIES))
def test_census(census, name):
    c = census[name]
    ops = c.opcodes
    # No local memory: no stack frame, no spills, and no LDL/STL that can execute.
    assert [c.stack_bytes, c.spill_stores, c.spill_loads] == [0, 0, 0], (name, c.stack_bytes)
    assert executable_local_memory(c) == [], f"{name}: local memory {executable_local_memory(c)[:6]}"
    assert c.launch_bounds == [256, 2] and 0 < c.registers <= 128, (name, c.registers)
    assert not any(op.startswith(("DFMA", "DMUL", "DADD")) for op in ops), name
    loop = main_loop(c.sass)
    body = main_loop(c.sass, operands=True)
    tk, t = MOD.TILE_K, MOD.TILING
    assert sum(op == "FFMA" for op in loop) == 64 * tk, name
    assert sum(op == "FFMA" for op in loop) / len(loop) >= 0.8, f"{name}: {len(loop)} instructions"
    assert loop.count("LDS.128") == 4 * tk, name             # k8's multiply: 2 of A + 2 of B per k
    # the only other LDS are ptxas's never-executed @!PT fillers beside LDGSTS
    assert all(_is(i, "@!PT LDS") or not _is(i, "LDS") for i in body if not i.startswith("LDS.128")), name
    # B: cp.async only, nothing through registers; A: k8's path (read-only LDG, 4 STS per float4)
    check_copies(name, loop)
    a_vec = name in ("k9", "k9_a")
    ldg = [i for i in body if _is(i, "LDG")]
    assert ldg and all(".CONSTANT" in i for i in ldg), (name, ldg)
    assert len(ldg) == (t.a_loads if a_vec else 4 * t.a_loads), (name, ldg)
    sts = [op for op in loop if op.startswith("STS")]
    assert sts == ["STS"] * 4 * t.a_loads, (name, sts)        # A transposed; no STS.128 of B
    assert loop.count("LDGDEPBAR") == 1 and loop.count("DEPBAR.LE") == 1, name   # commit, wait_group
    assert sum(op.startswith("BAR.SYNC") for op in loop) == 1, name              # one barrier per tile


def test_level_promises_are_in_its_sass(census):
    from numba_gemm import sass

    assert sass.missing(get(LEVEL), list(census.values())) == []


def test_twin_compiles_to_the_same_loop():
    """The CUDA C twin (native/twins/k9.cu): every specialisation has the same LDGSTS, LDS.128,
    STS and FFMA in its main loop, and the Numba loop is at most 2 % longer."""
    from numba_gemm import sass, twins

    try:
        twin = twins.twin_sass(LEVEL)
        numba = sass.kernel_censuses(LEVEL)
    except (sass.CensusUnavailable, ImportError, OSError) as e:
        pytest.skip(str(e))
    for name in COPIES:
        tl, nl = main_loop(twin[name]), main_loop(numba[name].sass)
        for op in ("FFMA", "LDS.128", "STS"):
            assert tl.count(op) == nl.count(op), (name, op)
        check_copies(name, tl), check_copies(name, nl)      # static LDGSTS counts: ptxas's choice
        assert len(nl) <= 1.02 * len(tl), f"{name}: main loop {len(nl)} instructions, the twin's {len(tl)}"


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
def test_gpu_ragged_and_large():
    for M, N, K in [(4097, 4097, 257), (1031, 997, 1009), (128, 128, 4096), (1, 4096, 4), (4096, 4096, 4096)]:
        for beta in (0.0, -0.5):
            A, B, C, C_in = sgemm_case(M, N, K, beta, seed=K)
            out = numba_gemm.gemm(A, B, C, alpha=0.5, beta=beta, level=LEVEL)
            v = check.verify(out, A, B, C_in, 0.5, beta)
            assert v.ok, f"{(M, N, K)}: {v}"


@pytest.mark.skipif(not GPU, reason="needs a CUDA GPU")
@pytest.mark.parametrize("stages", [2, 4])
def test_gpu_other_ring_depths(stages):
    for M, N, K in [(4097, 4097, 257), (1031, 996, 1009), (4096, 4096, 4096)]:
        v = _run_device(M, N, K, 0.5, 0.0, seed=K, stages=stages)
        assert v.ok, f"stages={stages} {(M, N, K)}: {v}"
