"""k9 (cp.async stage ring): exact on shapes that reach every edge path and specialisation,
and compiled to what it exists for — LDGSTS in the main loop and no register staging (no
LDG, no STS there), conflict-free LDS.128 of the k-contiguous A chunks, no local memory,
within the register cap of its launch bounds; the CUDA C twin compiles to the same loop.

Simulator shapes as tests/test_k7_k8.py (one to four 256-thread blocks): each specialisation,
partial tiles in M, N and K, shapes smaller than a tile, and K longer than the ring (more
tiles than stages, so stages are reused). The census compiles the kernels with their launch
bounds in a child process without the simulator: no GPU needed.
"""
import re

import numpy as np
import pytest

from tests.conftest import GPU, sgemm_case

import numba_gemm
from numba_gemm import check, choose
from numba_gemm.registry import get
from numba_gemm.sgemm import _async_stages
from numba_gemm.sgemm._loaders import vector_operands
from numba_gemm.twins import main_loop

LEVEL = "k9"
MOD = get(LEVEL).module

# (M, N, K) -> the specialisation it takes with aligned buffers
SHAPES = {
    (5, 7, 3): "edge",          # smaller than a tile in every direction
    (130, 129, 17): "edge",     # 2×2 blocks, a 1-column/2-row border, a 1-deep K tail
    (136, 132, 20): "vector",   # float4 borders in M and N, a 4-deep K tail
    (9, 8, 18): "bc",           # K % 4 != 0: A in 4-byte copies, B and C in float4
    (9, 10, 20): "a",           # N % 4 != 0: B in 4-byte copies, C in 32-bit
    (7, 12, 60): "vector",      # 8 K tiles through a 4-stage ring: every stage used twice
    (6, 5, 45): "edge",         # the same with a 5-deep tail, 4-byte copies
}


@pytest.mark.parametrize("shape", list(SHAPES), ids=[f"{m}x{n}x{k}" for m, n, k in SHAPES])
def test_exact(shape):
    M, N, K = shape
    for alpha, beta in [(1.0, 0.0), (-0.75, 2.5)]:
        A, B, C, C_in = sgemm_case(M, N, K, beta, seed=M * N + K + 9)
        out = numba_gemm.gemm(A, B, C, alpha=alpha, beta=beta, level=LEVEL)
        v = check.verify(out, A, B, C_in, alpha, beta)
        assert v.ok, f"{shape} alpha={alpha} beta={beta}: {v}"


VARIANT_SHAPES = {(7, 12, 60): (True, True), (130, 9, 37): (False, False), (9, 8, 34): (False, True)}


@pytest.mark.parametrize("stages,tile_k", [(2, 8), (3, 8), (2, 16)])
def test_variants_exact(stages, tile_k):
    """The timed experiments (run(..., stages=, tile_k=)): exact through a ring reused several
    times, on a 16-byte, an edge and a K % 4 != 0 specialisation."""
    from numba import cuda

    for (M, N, K), key in VARIANT_SHAPES.items():
        A, B, C, C_in = sgemm_case(M, N, K, 1.5, seed=K + stages)
        dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C_in)
        assert vector_operands(dA, dB, dC) == key
        MOD.run(dA, dB, dC, -0.75, 1.5, stages=stages, tile_k=tile_k)
        v = check.verify(dC.copy_to_host(), A, B, C_in, -0.75, 1.5)
        assert v.ok, f"stages={stages} tile_k={tile_k} {(M, N, K)}: {v}"


def test_variant_refuses_a_ring_past_static_shared_memory():
    with pytest.raises(ValueError, match="static shared memory"):
        MOD.variant(3, 16)
    assert MOD.variant() is MOD.SPECIALISATIONS


def test_specialisation_choice():
    """Which kernel each shape runs: rows of an operand are copied 16 bytes at a time only when
    16-byte aligned."""
    from numba import cuda

    names = {v[0]: k for k, v in MOD.SPECIALISATIONS.items()}
    for (M, N, K), kind in SHAPES.items():
        A, B, C = (cuda.to_device(x) for x in check.random_inputs(M, N, K))
        want = names[LEVEL if kind == "vector" else f"{LEVEL}_{kind}"]
        assert vector_operands(A, B, C) == want, (M, N, K)


def test_unaligned_base_takes_the_4_byte_copies():
    """K and N multiples of 4, but A starts 4 bytes into an allocation: 16-byte cp.async of A
    would fault (the simulator's twin refuses it too), so A is copied a float at a time."""
    from numba import cuda

    M, N, K = 9, 8, 20
    A_big, B, C = check.random_inputs(M, N, K + 1, rng=np.random.default_rng(4))
    A = A_big.reshape(-1)[1:1 + M * K].reshape(M, K)
    B = B[:K]
    dA = cuda.to_device(A_big).reshape(-1)[1:1 + M * K].reshape(M, K)
    dB, dC = cuda.to_device(B), cuda.to_device(C)
    assert vector_operands(dA, dB, dC) == (False, True)
    numba_gemm.gemm(dA, dB, dC, alpha=1.5, beta=-1.0, level=LEVEL)
    v = check.verify(dC.copy_to_host(), A, B, C, 1.5, -1.0)
    assert v.ok, str(v)


def test_ring_fits_static_shared_memory():
    t = MOD.TILING
    assert not t.problems() and t.threads == 256 and t.block == MOD.BLOCK
    assert MOD.STAGES >= 3
    pad = 128 // t.tile_k                       # floats after each chunk of 4 k of A
    assert MOD.SMEM_BYTES == MOD.STAGES * (t.tile_k // 4 * (4 * t.tile_m + pad) + t.tile_k * t.tile_n) * 4
    assert MOD.SMEM_BYTES <= 48 * 1024          # static shared memory
    # two blocks per SM (the launch bounds) fit the H200's 227 KB of shared memory
    assert 2 * MOD.SMEM_BYTES <= 227 * 1024


def test_thread_tile_rows_apart_cover_the_block_tile():
    """Every element of the 128×128 tile is one lane's, once: rows am + {0, 8, 16, 24} + {0, 32}."""
    t = MOD.TILING
    offs = _async_stages.row_offsets(t)
    assert offs == [0, 8, 16, 24, 32, 40, 48, 56]
    seen = set()
    for warp in range(t.warps):
        for lane in range(32):
            am = warp // t.warps_n * t.warp_m + lane // t.lanes_n
            bn = warp % t.warps_n * t.warp_n + lane % t.lanes_n * 4
            for o in offs:
                for j in range(t.thread_n):
                    seen.add((am + o, bn + j // 4 * 4 * t.lanes_n + j % 4))
    assert seen == {(r, c) for r in range(t.tile_m) for c in range(t.tile_n)}


def test_warp_step_prices_conflict_free_lds128_and_16_byte_stores():
    """The ledger view: every inner-loop shared load is a conflict-free LDS.128 (16 per 4 k, as
    k8), every copy's shared write one 16-byte store, every global load a float4; the A tile
    in chunks is read only where it was written."""
    t = MOD.TILING
    for warp in range(t.warps):
        st = MOD.warp_step(4096, 4096, 4096, 1, 2, warp, 5)
        inner = [a for a in st.accesses if a.inner]
        assert len(inner) == t.tile_k * (t.sub_m + t.sub_n)
        assert {(a.width, a.kind) for a in inner} == {(16, "lds128")}
        stores = [a for a in st.accesses if a.space == "shared" and a.op == "store"]
        assert len(stores) == t.a_loads + t.b_loads and all(a.width == 16 for a in stores)
        assert {a.kind for a in stores} == {"lds128"}             # conflict-free (the kind names no op)
        loads = [a for a in st.accesses if a.space == "global"]
        assert len(loads) == t.a_loads + t.b_loads and all(a.width == 16 for a in loads)
        assert st.fmas == t.tile_k * 64


def test_auto_keeps_k8_until_k9_is_measured():
    """No calibration for k9 yet: auto ranks it after every calibrated level, so k8 (or its
    split-K side rung) stays auto's choice at 4096³."""
    assert choose.params(LEVEL, np.float32) is None
    ranked = choose.rank(np.float32, 4096, 4096, 4096, True)
    names = [q.level for q in ranked]
    assert names[0] in ("k8", "k8sk")
    assert all(q.ms is not None for q in ranked[:names.index(LEVEL)])


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


def _copies(a_vec: bool, bc_vec: bool) -> dict:
    """{LDGSTS opcode: cp.async instructions a thread issues per K tile} of one specialisation:
    a float4 of a 16-byte-aligned operand is one 16-byte copy (cp.async.cg: LDGSTS.E.BYPASS.128),
    of any other four 4-byte copies (cp.async.ca: LDGSTS.E)."""
    t = MOD.TILING
    out = {}
    for vec, loads in ((a_vec, t.a_loads), (bc_vec, t.b_loads)):
        op = "LDGSTS.E.BYPASS.128" if vec else "LDGSTS.E"
        out[op] = out.get(op, 0) + (loads if vec else 4 * loads)
    return out


COPIES = {name: _copies(*key) for key, (name, _) in MOD.SPECIALISATIONS.items()}
COPY_BYTES = {"LDGSTS.E.BYPASS.128": 16, "LDGSTS.E": 4}


def test_copies_per_tile():
    """The shipped tiling: 2 float4 per thread per tile (one of A, one of B)."""
    assert COPIES == {"k9": {"LDGSTS.E.BYPASS.128": 2}, "k9_edge": {"LDGSTS.E": 8},
                      "k9_bc": {"LDGSTS.E": 4, "LDGSTS.E.BYPASS.128": 1},
                      "k9_a": {"LDGSTS.E.BYPASS.128": 1, "LDGSTS.E": 4}}


def check_copies(name, loop):
    """The main loop copies this specialisation's share of a tile by cp.async, of the right widths.
    How many static LDGSTS carry it is ptxas's choice: CUDA 13.5 issues each copy once with
    its zero-fill as a predicate operand, CUDA 13.0 was seen with twice the 16-byte ones in
    k9_bc/k9_a (one per arm of a branch, each executed or not). So each kind must appear at
    least as often as the thread's copies per tile and at most twice, no other kind, and the
    bytes at least the thread's share of a tile. Without cp.async (copies lost, or moved back
    to LDG + STS, which check_no_register_staging refuses) this fails."""
    got = {op: loop.count(op) for op in set(loop) if op.startswith("LDGSTS")}
    want = COPIES[name]
    assert set(got) == set(want), (name, got, want)
    for op, n in want.items():
        assert n <= got[op] <= 2 * n, (name, op, got[op], n)
    t = MOD.TILING
    need = (t.tile_m + t.tile_n) * t.tile_k * 4 // t.threads          # bytes per thread per tile
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
    # No local memory: no stack frame (spilled registers and local arrays live there), no
    # spills, and no LDL/STL that can execute. An LDL/STL with a 0-byte frame could only be a
    # never-executed filler: any other one fails here with its line.
    assert [c.stack_bytes, c.spill_stores, c.spill_loads] == [0, 0, 0], (name, c.stack_bytes)
    assert executable_local_memory(c) == [], f"{name}: local memory {executable_local_memory(c)[:6]}"
    assert c.launch_bounds == [256, 2] and 0 < c.registers <= 128, (name, c.registers)
    assert not any(op.startswith(("DFMA", "DMUL", "DADD")) for op in ops), name
    loop = main_loop(c.sass)
    body = main_loop(c.sass, operands=True)
    tk = MOD.TILE_K
    assert sum(op == "FFMA" for op in loop) == 64 * tk, name
    assert sum(op == "FFMA" for op in loop) / len(loop) >= 0.8, f"{name}: {len(loop)} instructions"
    assert loop.count("LDS.128") == 4 * tk, name          # 8 A chunks + 8 of B per 4 k
    # the only other LDS are ptxas's never-executed @!PT fillers beside LDGSTS
    assert all(_is(i, "@!PT LDS") or not _is(i, "LDS") for i in body if not i.startswith("LDS.128")), name
    # the copies: this specialisation's LDGSTS, nothing through registers
    check_copies(name, loop)
    assert not [op for op in loop if op.startswith(("LDG.", "STS"))] and "LDG" not in loop, name
    assert loop.count("LDGDEPBAR") == 1 and loop.count("DEPBAR.LE") == 1, name   # commit, wait_group
    assert sum(op.startswith("BAR.SYNC") for op in loop) == 1, name              # one barrier per tile


def test_level_promises_are_in_its_sass(census):
    from numba_gemm import sass

    assert sass.missing(get(LEVEL), list(census.values())) == []


def test_twin_compiles_to_the_same_loop():
    """The CUDA C twin (native/twins/k9.cu): every specialisation has the same LDGSTS, LDS.128
    and FFMA in its main loop, and the Numba loop is at most 2 % longer."""
    from numba_gemm import sass, twins

    try:
        twin = twins.twin_sass(LEVEL)
        numba = sass.kernel_censuses(LEVEL)
    except (sass.CensusUnavailable, ImportError, OSError) as e:
        pytest.skip(str(e))
    for name in COPIES:
        tl, nl = main_loop(twin[name]), main_loop(numba[name].sass)
        for op in ("FFMA", "LDS.128"):
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
