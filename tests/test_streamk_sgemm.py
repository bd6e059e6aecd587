"""k9st, stream-K on k9's loop: exact in the simulator on every kernel it has (whole tiles before
a stream part, tiles shared by two and by three CTAs, ragged edges), beta == 0 never reading
C, every part written before it is read; the stream plan as a pure function (hypothesis); the
SASS census; on a GPU, the shapes it exists for, forced plans, bitwise determinism and the order
of the parts, M·N past 2**31 and a captured graph.

The simulator runs one Python thread per GPU thread (256 per block), so its shapes are a few
CTAs: the resident CTAs the plan shares the work over are forced small (run(slots=...)).
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import gpu_only, sgemm_case
from tests.graph_replay import replays_exactly

import numba_gemm
from numba_gemm import choose
from numba_gemm.measure import check
from numba_gemm.measure.twins import main_loop
from numba_gemm.registry import get, registry
from numba_gemm.runtime import workspace

LEVEL = "k9st"
MOD = get(LEVEL).module


def _run(M, N, K, alpha, beta, slots, seed=0):
    """C from k9st's run() with `slots` forced, on fresh inputs and a NaN-poisoned workspace
    (NaN shows any part read before it is written); (out, A, B, C_in)."""
    from numba import cuda

    A, B, C, C_in = sgemm_case(M, N, K, beta, seed)
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
    p = MOD.stream_plan(M, N, K, slots)
    if p.streams:
        P, _ = MOD.buffers(dC, p)
        P.copy_to_device(np.full(P.size, np.nan, np.float32))
    MOD.run(dA, dB, dC, alpha, beta, slots=slots)
    return dC.copy_to_host(), A, B, C_in


def _assert_exact(shape, slots, alpha, beta, seed=0):
    out, A, B, C_in = _run(*shape, alpha, beta, slots, seed)
    v = check.verify(out, A, B, C_in, alpha, beta)
    assert v.ok, f"k9st {shape} slots={slots} alpha={alpha} beta={beta} {MOD.stream_plan(*shape, slots)}: {v}"


def _parts(p):
    """{stream tile s: the stream CTAs sharing it, lo .. hi} of plan p, from the kernel's own
    arithmetic."""
    n = (p.tiles - p.whole) * p.iters
    q, r = divmod(n, p.ctas)
    return {s: (int(MOD.owner(s * p.iters, q, r, p.ctas)), int(MOD.owner((s + 1) * p.iters - 1, q, r, p.ctas)))
            for s in range(p.tiles - p.whole)}


# ---- exact in the simulator (and on a GPU) ------------------------------------------------

# (M, N, K), slots, the kernel it runs, what the plan makes of it
SIM_CASES = [
    ((300, 260, 100), 4, "k9st"),       # 9 tiles: 4 whole, 5 shared by 4 CTAs (1.25 tiles each)
    ((130, 129, 37), 3, "k9st_edge"),   # 4 ragged tiles shared by 3 CTAs, K % 4 != 0, N % 4 != 0
    ((9, 8, 70), 3, "k9st_bc"),         # one tile, 9 K tiles, 2 CTAs: K % 4 != 0
    ((9, 10, 72), 3, "k9st_a"),         # N % 4 != 0
    ((20, 132, 100), 10, "k9st"),       # 2 tiles of 13 K tiles over 6 CTAs: three parts a tile
]


def test_simulator_cases_are_what_they_say():
    plans = [MOD.stream_plan(*shape, slots) for shape, slots, _ in SIM_CASES]
    assert [(p.tiles, p.whole, p.ctas) for p in plans] == [(9, 4, 4), (4, 0, 3), (1, 0, 2), (1, 0, 2), (2, 0, 6)]
    assert [hi - lo + 1 for lo, hi in _parts(plans[4]).values()] == [3, 3]
    for (M, N, K), _, kernel in SIM_CASES:
        A, B, C = (np.zeros(s, np.float32) for s in ((M, K), (K, N), (M, N)))
        assert MOD.SPECIALISATIONS[MOD.vector_operands(A, B, C)][0] == kernel


@pytest.mark.parametrize("case", range(len(SIM_CASES)))
def test_exact(case):
    shape, slots, _ = SIM_CASES[case]
    alpha, beta = [(1.0, 0.0), (-0.75, 2.5)][case % 2]
    _assert_exact(shape, slots, alpha, beta, seed=case)


def test_deterministic():
    """Two runs from differently poisoned C and workspace give the same bits."""
    from numba import cuda

    (M, N, K), slots, _ = SIM_CASES[2]
    A, B, C, _ = sgemm_case(M, N, K, 1.0, seed=11)
    p = MOD.stream_plan(M, N, K, slots)
    outs = []
    for fill in (np.nan, 7.0):
        dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.to_device(C)
        P, _ = MOD.buffers(dC, p)
        P.copy_to_device(np.full(P.size, fill, np.float32))
        MOD.run(dA, dB, dC, 1.25, -0.5, slots=slots)
        outs.append(dC.copy_to_host())
    assert outs[0].tobytes() == outs[1].tobytes()
    assert check.verify(outs[0], A, B, C, 1.25, -0.5).ok


def test_gemm_takes_the_forced_slots(monkeypatch):
    """The module override SLOTS reaches gemm() (NumPy in, NumPy out)."""
    (M, N, K), slots, _ = SIM_CASES[3]
    monkeypatch.setattr(MOD, "SLOTS", slots)
    assert MOD.stream_plan(M, N, K).streams
    A, B, C, C_in = sgemm_case(M, N, K, -1.0, seed=2)
    out = numba_gemm.gemm(A, B, C, alpha=2.0, beta=-1.0, level=LEVEL)
    assert check.verify(out, A, B, C_in, 2.0, -1.0).ok


# ---- the plan: pure functions ----------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(M=st.integers(1, 2**17), N=st.integers(1, 2**17), K=st.integers(1, 2**20),
       slots=st.none() | st.integers(1, 2000))
def test_plan_shares_every_k_tile_once(M, N, K, slots):
    """Whole tiles first, in whole waves; the rest shared by at most `slots` CTAs whose shares
    are consecutive, cover every K tile once and hold at least MIN_ITERS each; the parts of a
    tile in consecutive workspace slots, no slot shared by two (tile, CTA) pairs."""
    if MOD.unsupported(M, N, K):
        return
    p = MOD.stream_plan(M, N, K, slots)
    R = slots or MOD.SMS * MOD.CTAS_PER_SM
    gx, gy = MOD.grid(M, N)
    assert p.tiles == gx * gy and p.iters == -(-K // MOD.TILE_K)
    assert p.tiles * p.iters < MOD.MAX_ITERATIONS                       # the kernel's 32-bit counts
    if not p.streams:
        assert p.whole == p.tiles
        return
    assert p.tiles % R != 0 and p.whole % R == 0 and p.whole < p.tiles
    assert p.tiles - p.whole < 2 * R and 1 <= p.ctas <= R
    n = (p.tiles - p.whole) * p.iters
    q, r = divmod(n, p.ctas)
    starts = [int(MOD.share_start(c, q, r, p.ctas)) for c in range(p.ctas + 1)]
    assert starts[0] == 0 and starts[-1] == n
    assert all(b - a in (q, q + 1) and b - a >= MOD.MIN_ITERS for a, b in zip(starts, starts[1:]))
    used = set()
    for s, (lo, hi) in _parts(p).items():
        assert starts[lo] <= s * p.iters < starts[lo + 1] and starts[hi] < (s + 1) * p.iters <= starts[hi + 1]
        if hi > lo:                                       # shared: parts in slots s + lo .. s + hi
            slots_used = {s + c for c in range(lo, hi + 1)}
            assert not slots_used & used and max(slots_used) < p.slots
            used |= slots_used


# the numbers the module docstring and docs/LADDER.md quote
PLANNED = {
    (4096, 4096, 4096): (1024, 1024, 0),                # 3.88 waves, 0.97 full: k9's launch
    (8192, 8192, 8192): (4096, 4096, 0),                # 15.5 waves, 0.97 full: the same
    (128, 28672, 8192): (224, 0, 264),
    (777, 5000, 3001): (280, 0, 264),
    (4097, 4097, 4097): (1089, 792, 264),
    (128, 4096, 4096): (32, 0, 264),
    (4096, 8448, 4096): (2112, 2112, 0),                # 8 whole waves: k9's launch
}


def test_documented_plans():
    for shape, (tiles, whole, ctas) in PLANNED.items():
        p = MOD.stream_plan(*shape)
        assert (p.tiles, p.whole, p.ctas) == (tiles, whole, ctas), shape


def test_short_k_is_not_shared_out():
    """Where 264 shares would hold under MIN_ITERS K tiles each the plan keeps whole tiles
    (k9's launch)."""
    assert not MOD.stream_plan(4097, 4097, 24).streams          # 297 stream tiles of 3 K tiles: 222 shares
    assert MOD.stream_plan(4097, 4097, 32).streams              # of 4: 264 shares of 4-5


def test_a_nearly_full_last_wave_is_left_whole():
    """Tiles at least FULL_WAVE of whole waves run as k9 (the measured 0.97 lost to it)."""
    assert MOD.FULL_WAVE == 0.95
    assert not MOD.stream_plan(128, 19 * 128, 1024, slots=20).streams     # 19 of 20: 0.95
    assert MOD.stream_plan(128, 18 * 128, 1024, slots=20).streams         # 18 of 20: 0.90
    assert not MOD.stream_plan(128, 39 * 128, 1024, slots=20).streams     # 39 of 40: 0.975
    assert MOD.stream_plan(128, 37 * 128, 1024, slots=20).streams         # 37 of 40: 0.925


def test_bad_forced_slots_are_refused():
    for bad in (-1, 2.5, True, "264", MOD.MAX_SLOTS + 1):
        with pytest.raises(ValueError, match="slots"):
            MOD.stream_plan(777, 5000, 3001, bad)


def test_refuses_what_32_bits_cannot_count():
    why = MOD.unsupported(2**16, 2**16, 2**16)        # 512·512 tiles of 8192 K tiles: 2**31
    assert why and "32 bits" in why
    assert get(LEVEL).unsupported(4096, 4096, 4096) is None


def test_auto_prices_the_stream_part_and_the_parents_kernel():
    """Streaming, auto sees no partly empty wave; with whole waves (or nearly: 4096³) k9st runs
    k9's kernel and is priced with k9's constants (and ranked after k9, with which it ties)."""
    lv = registry()[LEVEL]
    assert choose.geometry(lv, 4097, 4097, 4097).streamed
    for M, N, K in [(4096, 8448, 4096), (4096, 4096, 4096)]:
        g = choose.geometry(lv, M, N, K)
        assert not g.streamed and choose._one_slice_parent(lv, g, M, N, K, 132) == "k9"
        if choose.params("k9", np.float32) is not None:
            names = [q.level for q in choose.rank(np.float32, M, N, K, native=False)]
            assert names.index("k9") < names.index(LEVEL)


# ---- SASS census ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def census():
    from numba_gemm.explain import sass

    try:
        got = sass.kernel_censuses("k9", LEVEL)
    except sass.CensusUnavailable as e:
        pytest.skip(str(e))
    return got


def test_census(census):
    """k9's loop inside the loop over segments: two phases a trip (4 LDS.128 and 64 FFMA per k)
    in at most 3 % more instructions than k9's, within the 128-register cap of k9's launch
    bounds, no local memory; the parts read back through L2 (LDG.E.STRONG.GPU) outside it."""
    tk = MOD.TILE_K
    for name in ("k9st", "k9st_edge", "k9st_bc", "k9st_a"):
        c = census[name]
        assert c.spill_stores == 0 and c.spill_loads == 0, name
        assert not any(op.startswith(("LDL", "STL", "DFMA", "DMUL", "DADD")) for op in c.opcodes), name
        assert c.launch_bounds == [256, 2] and 0 < c.registers <= 128, (name, c.registers)
        assert "CALL" not in " ".join(c.opcodes), f"{name}: a subroutine call (64-bit division?)"
        loop = main_loop(c.sass)
        assert sum(op == "FFMA" for op in loop) == 2 * 64 * tk and loop.count("LDS.128") == 2 * 4 * tk, name
        parent = main_loop(census[name.replace("k9st", "k9")].sass)
        assert len(loop) <= 1.03 * len(parent), f"{name}: main loop {len(loop)}, k9's {len(parent)}"
        assert not any("STRONG" in op for op in loop), name
    assert any("STRONG" in op for op in census["k9st"].opcodes), "no L2 load of the parts"


# ---- on a GPU --------------------------------------------------------------------------------

@gpu_only
def test_gpu_shapes_it_exists_for():
    """Planned: the last waves shared by 264 CTAs, against float64."""
    for M, N, K in [(777, 5000, 3001), (128, 28672, 1024), (1031, 997, 1009), (2049, 2048, 512),
                    (1, 4097, 3001), (33, 1031, 20000)]:
        assert MOD.stream_plan(M, N, K).streams, (M, N, K)
        for beta in (0.0, -0.5):
            A, B, C, C_in = sgemm_case(M, N, K, beta, seed=K)
            out = numba_gemm.gemm(A, B, C, alpha=0.5, beta=beta, level=LEVEL)
            v = check.verify(out, A, B, C_in, 0.5, beta)
            assert v.ok, f"k9st {(M, N, K)} {MOD.stream_plan(M, N, K)}: {v}"


@gpu_only
@pytest.mark.parametrize("slots", [1, 2, 3, 7, 64, 264, 1000])
def test_gpu_forced_slots_ragged(slots):
    for M, N, K in [(130, 129, 1001), (200, 260, 777), (7, 4096, 513), (1031, 997, 1009)]:
        _assert_exact((M, N, K), slots, 1.5, -2.0, seed=slots)
        _assert_exact((M, N, K), slots, 1.0, 0.0, seed=slots)


@gpu_only
def test_gpu_deterministic_at_size():
    from numba import cuda

    M, N, K = 777, 5000, 3001
    A, B, C, _ = sgemm_case(M, N, K, 1.0, seed=1)
    dA, dB = cuda.to_device(A), cuda.to_device(B)
    outs = []
    for _ in range(3):
        dC = cuda.to_device(C)
        MOD.run(dA, dB, dC, 1.0, 1.0)
        outs.append(dC.copy_to_host().tobytes())
    assert outs[0] == outs[1] == outs[2]


@gpu_only
def test_gpu_parts_add_in_cta_order():
    """One tile shared by CTAs 0 .. S-1 (slots forced): its bits are k9's products over each
    CTA's K range, added in float32 in order of the CTA, then times alpha, whichever CTA ran
    last."""
    from numba import cuda

    M, N, K, slots = 128, 128, 8 * 40, 5             # one tile, 40 K tiles, 5 shares of 8
    p = MOD.stream_plan(M, N, K, slots)
    assert (p.tiles, p.whole, p.ctas) == (1, 0, 5)
    n = p.iters
    q, r = divmod(n, p.ctas)
    cuts = [int(MOD.share_start(c, q, r, p.ctas)) * MOD.TILE_K for c in range(p.ctas + 1)]
    rng = np.random.default_rng(3)
    A = (rng.standard_normal((M, K)) * 10.0 ** rng.integers(-4, 4, (M, K))).astype(np.float32)
    B = rng.standard_normal((K, N)).astype(np.float32)
    want = None
    for lo, hi in zip(cuts, cuts[1:]):
        part = numba_gemm.gemm(np.ascontiguousarray(A[:, lo:hi]), np.ascontiguousarray(B[lo:hi]), level="k9")
        want = part if want is None else (want + part).astype(np.float32)
    want = (np.float32(0.5) * want).astype(np.float32)
    for _ in range(3):
        dC = cuda.to_device(np.full((M, N), np.nan, np.float32))
        MOD.run(cuda.to_device(A), cuda.to_device(B), dC, 0.5, 0.0, slots=slots)
        assert np.array_equal(dC.copy_to_host(), want)


@gpu_only
def test_gpu_past_2_to_31():
    """M·N > 2**31 with a stream part: C's offsets past 2**31 elements, in 64 bits."""
    from numba import cuda

    from tests.test_sgemm import BIG, MID, _fill, _free_bytes, _pattern

    M, N, K = BIG, MID, 8 * MOD.TILE_K
    # 513·257 tiles = 10 waves of 12925 slots and a last one a fifth full, so the last tiles (C's
    # offsets past 2**31 among them) are streamed; many more waves would leave too little of a
    # last wave to stream, fewer would need a workspace of several GiB
    slots = 12925
    p = MOD.stream_plan(M, N, K, slots=slots)
    assert p.streams, p
    free = _free_bytes()
    need = 4 * (M * K + K * N + M * N + p.slots * MOD.TILE_M * MOD.TILE_N)
    if need > 0.8 * free:
        pytest.skip(f"needs {need / 2**30:.1f} GiB of device memory")
    dA = cuda.device_array((M, K), np.float32)
    dB = cuda.device_array((K, N), np.float32)
    dC = cuda.device_array((M, N), np.float32)
    _fill(dA)
    _fill(dB)
    MOD.run(dA, dB, dC, 1.0, 0.0, slots=slots)
    cuda.synchronize()
    rows = [0, 1, M // 2, M - 2, M - 1]
    cols = [0, 1, N // 2, N - 2, N - 1]
    out = np.stack([dC[r].copy_to_host()[cols] for r in rows])
    v = check.verify(out, _pattern(rows, range(K)), _pattern(range(K), cols), None, 1.0, 0.0)
    assert v.ok, f"{p}: {v}"
    del dA, dB, dC


@gpu_only
def test_gpu_graph_capture_replays_the_stream():
    """A streamed call (one launch, a workspace and counters) captured in a graph: replays give
    the eager bytes, and new values of A in place give the new product (the counters reset)."""
    M, N, K = 777, 520, 1000
    assert MOD.stream_plan(M, N, K).streams
    replays_exactly(LEVEL, M, N, K, np.random.default_rng(7), dtype=np.float32)


@gpu_only
def test_gpu_recorded_launch_holds_the_workspace():
    from numba import cuda

    from numba_gemm.runtime import launch

    M, N, K = 9, 10, 300
    dA, dB, dC = (cuda.to_device(x) for x in check.random_inputs(M, N, K))
    p = MOD.stream_plan(M, N, K, slots=3)
    with launch.recording() as rec:
        MOD.run(dA, dB, dC, 1.0, 0.0, slots=3)
    (L,) = rec.launches
    P, counters = MOD.buffers(dC, p)
    assert L.keep[1][0] is P and L.keep[1][1] is counters
    assert workspace.counters(dC, p.tiles - p.whole).copy_to_host().tolist() == [0] * (p.tiles - p.whole)
