"""numba_gemm.ptx: the intrinsics emit the PTX they document, and the simulator twins compute
what one warp's instruction computes.

The fragment layouts are checked, for every lane, against the PTX ISA's statements, written
here in the ISA's own terms ("Matrix Fragments for mma.m16n8k16", .f16/.bf16; ldmatrix):
  A: a_i (i = 0..7, two per register) at row groupID for i < 2 or 4 <= i < 6, else groupID + 8;
     col threadID_in_group * 2 + (i & 1), plus 8 for i >= 4.
  B: b_i (i = 0..3) at row threadID_in_group * 2 + (i & 1), plus 8 for i >= 2; col groupID.
  C: c_i (i = 0..3) at row groupID, plus 8 for i >= 2; col threadID_in_group * 2 + (i & 1).
  ldmatrix .x4: thread t's register r holds row t / 4 of matrix r, elements 2 (t % 4) and
     2 (t % 4) + 1 (the lower-index element in the low half); .trans delivers the matrix
     transposed. The 8 row addresses of matrix r come from threads 8 r .. 8 r + 7.
A small kernel then runs ldmatrix + mma.sync in the simulator (and, with a GPU, on the
hardware, which checks these layouts against the tensor cores themselves).
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda, float32, uint16, uint32

from numba_gemm import ptx
from numba_gemm.hgemm import _common as cm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
lanes = st.integers(0, 31)


def isa_a(lane, i):
    g, t = lane // 4, lane % 4
    row = g if (i < 2 or 4 <= i < 6) else g + 8
    col = t * 2 + (i & 1) + (8 if i >= 4 else 0)
    return row, col


def isa_b(lane, i):
    g, t = lane // 4, lane % 4
    return t * 2 + (i & 1) + (8 if i >= 2 else 0), g


def isa_c(lane, i):
    g, t = lane // 4, lane % 4
    return g + (8 if i >= 2 else 0), t * 2 + (i & 1)


@given(lanes, st.integers(0, 3), st.integers(0, 1))
def test_fragment_layouts_are_the_isa_layouts(lane, r, h):
    assert ptx.a_fragment_coords(lane, r, h) == isa_a(lane, 2 * r + h)
    if r < 2:
        assert ptx.b_fragment_coords(lane, r, h) == isa_b(lane, 2 * r + h)
    assert ptx.c_fragment_coords(lane, r) == isa_c(lane, r)


def test_fragments_cover_each_tile_once():
    a = {ptx.a_fragment_coords(l, r, h) for l in range(32) for r in range(4) for h in (0, 1)}
    b = {ptx.b_fragment_coords(l, r, h) for l in range(32) for r in range(2) for h in (0, 1)}
    c = {ptx.c_fragment_coords(l, r) for l in range(32) for r in range(4)}
    assert a == {(i, j) for i in range(16) for j in range(16)}
    assert b == {(i, j) for i in range(16) for j in range(8)}
    assert c == {(i, j) for i in range(16) for j in range(8)}


@settings(max_examples=25, deadline=None)
@given(st.booleans(), st.permutations(range(32)), st.integers(0, 2**32 - 1))
def test_ldmatrix_twin_follows_the_isa(trans, order, seed):
    """Random 8x8 matrices at scattered 16-byte-aligned rows: every lane's registers hold
    exactly the elements the ISA says, whatever row addresses the lanes supply."""
    rng = np.random.default_rng(seed)
    smem = rng.integers(0, 2**16, 32 * 8, dtype=np.uint16)       # 32 rows of 16 bytes
    addrs = [16 * o for o in order]                              # lane l supplies a row
    out = ptx.ldmatrix_warp(smem.view(np.uint8), addrs, trans)
    mats = [np.stack([smem[addrs[8 * m + i] // 2: addrs[8 * m + i] // 2 + 8] for i in range(8)])
            for m in range(4)]                                    # matrix m: rows from lanes 8m..
    for lane in range(32):
        for r in range(4):
            row, col = lane // 4, 2 * (lane % 4)
            mat = mats[r].T if trans else mats[r]
            assert out[lane][r] == int(mat[row, col]) | (int(mat[row, col + 1]) << 16)


def test_ldmatrix_twin_refuses_misaligned_rows():
    smem = np.zeros(512, np.uint8)
    with pytest.raises(ValueError, match="aligned"):
        ptx.ldmatrix_warp(smem, [8] + [0] * 31, False)


def _bits(x, bf16):
    return x.astype(cm.BF16).view(np.uint16) if bf16 else x.astype(np.float16).view(np.uint16)


@settings(max_examples=10, deadline=None)
@given(st.booleans(), st.integers(0, 2**32 - 1))
def test_mma_twin_is_a_times_b_plus_c(bf16, seed):
    """Fragments built by the ISA's layouts: D = A B + C in the C layout, for every lane."""
    if bf16 and cm.BF16 is None:
        pytest.skip("no bfloat16")
    rng = np.random.default_rng(seed)
    A = _bits(rng.uniform(-1, 1, (16, 16)), bf16)
    B = _bits(rng.uniform(-1, 1, (16, 8)), bf16)
    C = rng.uniform(-1, 1, (16, 8)).astype(np.float32)
    a = [[int(A[isa_a(l, 2 * r)]) | int(A[isa_a(l, 2 * r + 1)]) << 16 for r in range(4)] for l in range(32)]
    b = [[int(B[isa_b(l, 2 * r)]) | int(B[isa_b(l, 2 * r + 1)]) << 16 for r in range(2)] for l in range(32)]
    c = [[C[isa_c(l, r)] for r in range(4)] for l in range(32)]
    d = ptx.mma_warp(c, a, b, bf16)
    f = (lambda x: (x.astype(np.uint32) << 16).view(np.float32)) if bf16 else (lambda x: x.view(np.float16))
    ref = f(A).astype(np.float64) @ f(B).astype(np.float64) + C
    for lane in range(32):
        for r in range(4):
            assert d[lane][r] == pytest.approx(ref[isa_c(lane, r)], rel=1e-6, abs=1e-6)


# ---- one warp in a kernel: cp.async -> ldmatrix (the v8 address pattern) -> mma.sync ------

def _warp_kernel(bf16):
    mma = ptx.mma_bf16 if bf16 else ptx.mma_f16
    wait_all = ptx.cp_async_wait(0)

    @cuda.jit
    def warp_mma(A, B, D):
        """A 16 x 16 (row-major), B 16 x 16 (k x n) -> D = A B, 16 x 16, one warp."""
        S = cuda.shared.array(0, uint32)
        lane = uint32(cuda.threadIdx.x)
        base = ptx.smem_u32(S)
        base = uint32((base + 1023) & ~uint32(1023))
        # A, then B at +512: 16 rows of 32 bytes each, 32 chunks of 16 bytes, one per lane
        ptx.cp_async16(uint32(base + lane * 16), A, lane * 8, 16)
        ptx.cp_async16(uint32(base + 512 + lane * 16), B, lane * 8, 16)
        ptx.cp_async_commit()
        wait_all()
        cuda.syncthreads()
        a = ptx.ldmatrix_x4(uint32(base + (lane % 16) * 32 + (lane // 16) * 16))
        b = ptx.ldmatrix_x4_trans(uint32(base + 512 + (lane % 8 + 8 * ((lane // 8) % 2)) * 32
                                         + (lane // 16) * 16))
        zero = float32(0.0)
        g, q = lane // 4, lane % 4
        for j in range(2):
            d = mma((zero, zero, zero, zero), a, (b[2 * j], b[2 * j + 1]))
            D[g, 8 * j + 2 * q] = d[0]
            D[g, 8 * j + 2 * q + 1] = d[1]
            D[g + 8, 8 * j + 2 * q] = d[2]
            D[g + 8, 8 * j + 2 * q + 1] = d[3]

    return warp_mma


@pytest.mark.parametrize("bf16", [False, True], ids=["f16", "bf16"])
def test_one_warp_kernel_computes_a_times_b(bf16):
    if bf16 and cm.BF16 is None:
        pytest.skip("no bfloat16")
    rng = np.random.default_rng()
    A = _bits(rng.uniform(-1, 1, (16, 16)), bf16)
    B = _bits(rng.uniform(-1, 1, (16, 16)), bf16)
    dA, dB = cuda.to_device(A.reshape(-1)), cuda.to_device(B.reshape(-1))
    dD = cuda.to_device(np.full((16, 16), np.nan, np.float32))
    _warp_kernel(bf16)[1, 32, 0, 2048](dA, dB, dD)
    f = (lambda x: (x.astype(np.uint32) << 16).view(np.float32)) if bf16 else (lambda x: x.view(np.float16))
    ref = f(A).astype(np.float64) @ f(B).astype(np.float64)
    np.testing.assert_allclose(dD.copy_to_host(), ref, rtol=1e-5, atol=1e-5)


# ---- the cp.async twin: copies land at wait_group, zero-fill, refusals -------------------

@pytest.mark.skipif(not ptx.SIMULATOR, reason="what a read before wait_group sees is undefined on a GPU")
def test_cp_async_twin_completes_groups_only_at_wait():
    wait1, wait0 = ptx.cp_async_wait(1), ptx.cp_async_wait(0)

    @cuda.jit
    def k(X, out):
        S = cuda.shared.array(0, uint16)
        base = ptx.smem_u32(S)
        for i in range(16):
            S[i] = 7
        ptx.cp_async16(base, X, 0, 16)          # group 0: X[0:8] -> S[0:8]
        ptx.cp_async_commit()
        ptx.cp_async16(base + 16, X, 8, 0)      # group 1: zero-fill S[8:16]
        ptx.cp_async_commit()
        for i in range(16):
            out[0, i] = S[i]                    # nothing landed yet
        wait1()
        for i in range(16):
            out[1, i] = S[i]                    # group 0 only
        wait0()
        for i in range(16):
            out[2, i] = S[i]

    X = np.arange(1, 17, dtype=np.uint16)
    out = cuda.to_device(np.zeros((3, 16), np.uint16))
    k[1, 1, 0, 64](cuda.to_device(X), out)
    got = out.copy_to_host()
    assert (got[0] == 7).all()
    assert (got[1, :8] == X[:8]).all() and (got[1, 8:] == 7).all()
    assert (got[2, :8] == X[:8]).all() and (got[2, 8:] == 0).all()


@pytest.mark.skipif(not ptx.SIMULATOR, reason="the twin's refusals (the GPU faults instead)")
def test_cp_async_twin_refuses_what_the_gpu_faults_on():
    @cuda.jit
    def k(X, dst, i):
        S = cuda.shared.array(0, uint16)
        ptx.cp_async16(ptx.smem_u32(S) + dst, X, i, 16)

    X = cuda.to_device(np.zeros(16, np.uint16))
    with pytest.raises(ValueError, match="aligned"):
        k[1, 1, 0, 64](X, 8, 0)                 # destination not 16-byte aligned
    with pytest.raises(ValueError, match="aligned"):
        k[1, 1, 0, 64](X, 0, 1)                 # source not 16-byte aligned
    with pytest.raises(IndexError):
        k[1, 1, 0, 64](X, 0, 16)                # past the end of X


# ---- the PTX each intrinsic emits ---------------------------------------------------------

PTX = r'''
import json
from numba import cuda, float32, uint16, uint32
from numba_gemm import ptx

wait = ptx.cp_async_wait(1)

def k(X, D):
    S = cuda.shared.array(0, uint32)
    base = ptx.smem_u32(S)
    ptx.cp_async16(base, X, 8 * cuda.threadIdx.x, 16)
    ptx.cp_async_commit()
    wait()
    a = ptx.ldmatrix_x4(base)
    b = ptx.ldmatrix_x4_trans(base + 512)
    z = float32(0.0)
    d = ptx.mma_f16((z, z, z, z), a, (b[0], b[1]))
    e = ptx.mma_bf16(d, a, (b[2], b[3]))
    D[cuda.threadIdx.x] = e[0] + e[1] + e[2] + e[3]

ptx_text, _ = cuda.compile_ptx(k, (uint16[::1], float32[::1]), cc=(9, 0))
print(json.dumps(ptx_text))
'''


def test_intrinsics_emit_their_ptx():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", PTX], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    text = json.loads(out.stdout.strip().splitlines()[-1])
    for line in ("cp.async.cg.shared.global [", "cp.async.commit_group;", "cp.async.wait_group 1;",
                 "ldmatrix.sync.aligned.m8n8.x4.shared.b16", "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                 "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                 "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"):
        assert line in text, line
    assert ".local" not in text


# ---- Hopper: wgmma's accumulator layout, descriptors, the twins of wgmma, TMA, mbarrier ----

from numba_gemm.hgemm import _wgmma  # noqa: E402
from numba_gemm.ptx.hopper import _MBarrier  # noqa: E402
from numba_gemm.ptx.mma_sync import _SIM_SMEM_BASE  # noqa: E402


def isa_wgmma_d(t, i):
    """PTX ISA, "Matrix Fragments for wgmma.mma_async.m64nNk16", accumulator D (fp32): thread
    t of the warpgroup, element d_i: row = 16 * (t / 32) + groupID (+ 8 when i % 4 >= 2), col =
    threadID_in_group * 2 + (i & 1) + 8 * (i / 4), groupID = (t % 32) >> 2, threadID_in_group = t % 4."""
    group, tig = (t % 32) >> 2, t % 4
    return 16 * (t // 32) + group + (8 if i % 4 >= 2 else 0), tig * 2 + (i & 1) + 8 * (i // 4)


@given(st.integers(0, 127), st.integers(0, 127))
def test_wgmma_acc_layout_is_the_isa_layout(t, i):
    assert ptx.wgmma_acc_coords(t, i) == isa_wgmma_d(t, i)


def test_wgmma_acc_layout_covers_the_tile_once():
    cells = {ptx.wgmma_acc_coords(t, i) for t in range(128) for i in range(128)}
    assert cells == {(r, c) for r in range(64) for c in range(256)}


@given(st.integers(0, 2**14 - 1), st.integers(0, 2**14 - 1), st.integers(0, 2**14 - 1),
       st.sampled_from(["none", "128B", "64B", "32B"]))
def test_descriptor_decode_inverts_the_host_encoding(a, l, s, swizzle):
    f = ptx.decode_smem_desc(_wgmma.smem_desc(16 * a, 16 * l, 16 * s, swizzle))
    assert f == {"start": 16 * a, "lbo": 16 * l, "sbo": 16 * s, "base_offset": 0, "swizzle": swizzle}


def _tma_stage(rng, bf16, stage_addr):
    """A stage as v11 lays it out, written with TMA's documented swizzle (_common.tma_swizzle_128b):
    A 128 x 64 at stage_addr, then B 64 x 256 as 4 panels of 64 x 64, 8 KB apart. Returns the
    shared window (bytes from address _SIM_SMEM_BASE) and A, B as bits."""
    A = _bits(rng.uniform(-1, 1, (128, 64)), bf16)
    B = _bits(rng.uniform(-1, 1, (64, 256)), bf16)
    smem = np.zeros(stage_addr + 49152 + 1024, np.uint8)

    def place(box, at):
        raw = box.reshape(-1).view(np.uint8)
        for o in range(0, raw.size, 16):
            dst = at + cm.tma_swizzle_128b(o) - _SIM_SMEM_BASE
            smem[dst:dst + 16] = raw[o:o + 16]

    place(A, stage_addr)
    for p in range(4):
        place(np.ascontiguousarray(B[:, 64 * p:64 * p + 64]), stage_addr + 16384 + 8192 * p)
    return smem, A, B


@settings(max_examples=6, deadline=None)
@given(st.booleans(), st.integers(0, 3), st.integers(0, 2**32 - 1))
def test_wgmma_twin_on_tma_tiles_is_a_times_b_plus_c(bf16, stage, seed):
    """The descriptors v11 uses (A K-major SBO 1024, k step +32 B; B N-major LBO 8192, SBO 1024,
    k step +2048 B) on a TMA-swizzled stage: 4 chained wgmma per warpgroup give that
    warpgroup's 64 rows of A @ B + C, in the accumulator layout."""
    if bf16 and cm.BF16 is None:
        pytest.skip("no bfloat16")
    rng = np.random.default_rng(seed)
    stage_addr = 1024 + 49152 * stage
    smem, A, B = _tma_stage(rng, bf16, stage_addr)
    f = (lambda x: (x.astype(np.uint32) << 16).view(np.float32)) if bf16 else (lambda x: x.view(np.float16))
    for wg in (0, 1):
        C = rng.uniform(-1, 1, (64, 256)).astype(np.float32)
        accs = [np.array([C[isa_wgmma_d(t, i)] for i in range(128)], np.float32) for t in range(128)]
        for kk in range(4):
            da = _wgmma.smem_desc(stage_addr + wg * 64 * 128 + 32 * kk, 16, 1024)
            db = _wgmma.smem_desc(stage_addr + 16384 + 2048 * kk, 8192, 1024)
            ptx.wgmma_warpgroup(smem, accs, da, db, bf16)
        ref = f(A[64 * wg:64 * wg + 64]).astype(np.float64) @ f(B).astype(np.float64) + C
        got = np.zeros((64, 256))
        for t in range(128):
            for i in range(128):
                got[isa_wgmma_d(t, i)] = accs[t][i]
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_wgmma_twin_refuses_other_swizzles():
    smem = np.zeros(8192, np.uint8)
    with pytest.raises(NotImplementedError, match="SWIZZLE_128B"):
        ptx.wgmma_warpgroup(smem, [np.zeros(128, np.float32)] * 128, _wgmma.smem_desc(1024, 16, 1024, "64B"),
                            _wgmma.smem_desc(1024, 16, 1024), False)


@settings(max_examples=50, deadline=None)
@given(st.integers(-70, 70), st.integers(-70, 70), st.integers(1, 60), st.integers(1, 60))
def test_tma_box_zero_fills_outside_the_matrix(x, y, rows, cols):
    X = np.arange(1, rows * cols + 1, dtype=np.uint16).reshape(rows, cols)
    box = ptx.tma_box(X, x, y, 16, 64)
    padded = np.zeros((rows + 300, cols + 300), np.uint16)    # X at (100, 100), zeros around
    padded[100:100 + rows, 100:100 + cols] = X
    np.testing.assert_array_equal(box, padded[100 + y:116 + y, 100 + x:164 + x])


def test_mbarrier_twin_counts_arrivals_and_bytes():
    b = _MBarrier(2)
    b.arrive(tx=100)                  # arrive.expect_tx: one arrival, 100 bytes expected
    assert b.phase == 0
    b.complete_tx(60)
    b.arrive()
    assert b.phase == 0               # both arrivals in, 40 bytes still in flight
    b.complete_tx(40)
    assert (b.phase, b.pending, b.tx) == (1, 2, 0)   # phase 0 complete; the count re-arms
    b.complete_tx(8)                  # bytes may land before the expect_tx of this phase
    b.arrive(tx=8)
    b.arrive()
    assert b.phase == 2
    with pytest.raises(RuntimeError, match="out of range"):
        b.complete_tx(2**20)


@pytest.mark.skipif(not ptx.SIMULATOR, reason="the twins run only in the simulator")
def test_tma_and_mbarrier_twins_in_a_kernel():
    """Thread 0 inits a barrier, expects a box's bytes and loads it; every thread waits on
    parity 0 and reads the box back through the swizzle; parity 1 (the phase before) is
    complete from the start, as on the GPU."""
    @cuda.jit
    def k(tmap, out, early):
        S = cuda.shared.array(0, uint16)
        tid = cuda.threadIdx.x
        base = ptx.smem_u32(S)
        tile = uint32((base + 1023) & ~uint32(1023))
        bar = uint32(tile + 8192)
        if tid == 0:
            ptx.mbar_init(bar, uint32(1))
            ptx.fence_mbarrier_init()
        cuda.syncthreads()
        ptx.mbar_wait(bar, uint32(1))               # returns at once
        cuda.syncthreads()                          # (once phase 0 completes, parity 1 would block)
        if tid == 0:
            early[0] = 1
            ptx.mbar_arrive_expect_tx(bar, uint32(64 * 128))
            ptx.tma_load_2d(tile, tmap, -8, 3, bar)
        ptx.mbar_wait(bar, uint32(0))
        first = (tile - base) // 2
        for e in range(tid, 64 * 64, 32):
            o = e * 2
            out[e // 64, e % 64] = S[first + cm.tma_swizzle_128b(o) // 2]

    X = np.random.default_rng(0).integers(1, 2**15, (40, 72)).astype(np.uint16)
    tmap = ptx.sim_tensor_map(X, 64, 64)
    out = cuda.to_device(np.zeros((64, 64), np.uint16))
    early = cuda.to_device(np.zeros(1, np.int32))
    k[1, 32, 0, 8192 + 2048](np.uint64(tmap), out, early)
    np.testing.assert_array_equal(out.copy_to_host(), ptx.tma_box(X, -8, 3, 64, 64))
    assert early.copy_to_host()[0] == 1


HOPPER_PTX = r'''
import json
from numba import cuda, float32, uint32, uint64
from numba_gemm import ptx

wait1 = ptx.wgmma_wait(1)

def k(tmap, D):
    S = cuda.shared.array(0, uint32)
    base = ptx.smem_u32(S)
    ptx.fence_tensormap_acquire(tmap)
    ptx.prefetch_tensormap(tmap)
    ptx.mbar_init(base, uint32(1))
    ptx.fence_mbarrier_init()
    ptx.fence_proxy_async()
    ptx.mbar_arrive_expect_tx(base, uint32(16384))
    ptx.tma_load_2d(base + 1024, tmap, 0, 0, base)
    ptx.mbar_wait(base, uint32(0))
    ptx.mbar_arrive(base)
    ptx.warp_sync()
    acc = cuda.local.array(128, float32)
    for i in range(128):
        acc[i] = float32(0.0)
    ptx.wgmma_fence()
    ptx.wgmma_f16(acc, uint64(64), uint64(1024))
    ptx.wgmma_bf16(acc, uint64(64), uint64(1024))
    ptx.wgmma_commit()
    wait1()
    ptx.fence_operands(acc)
    for i in range(128):
        D[cuda.threadIdx.x * 128 + i] = acc[i]

ptx_text, _ = cuda.compile_ptx(k, (uint64, float32[::1]), cc=(9, 0, "a"))
print(json.dumps(ptx_text))
'''


def test_hopper_intrinsics_emit_their_ptx():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", HOPPER_PTX], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    text = json.loads(out.stdout.strip().splitlines()[-1])
    for line in ("fence.proxy.tensormap::generic.acquire.sys [", "prefetch.tensormap [",
                 "mbarrier.init.shared::cta.b64 [", "fence.mbarrier_init.release.cluster;",
                 "fence.proxy.async.shared::cta;", "mbarrier.arrive.expect_tx.shared::cta.b64 _, [",
                 "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [",
                 "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.shared::cta.b64 _, [",
                 "bar.warp.sync -1;", "wgmma.fence.sync.aligned;",
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {",
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {",
                 "wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 1;"):
        assert line in text, line
    assert ".target sm_90a" in text and ".local" not in text
