"""k9's stage ring: K tiles copied global -> shared by cp.async (numba_gemm/ptx), STAGES deep
(native/twins/async_stages.cuh in CUDA C).

The warp tiling, loaders' thread -> element map and epilogue are _warptile's; what is new:

* No registers between global and shared memory. Each thread's share of a K tile (one float4
  of A, one of B with the shipped tiling) is one `cp.async.cg ... 16` (SASS LDGSTS) that
  writes shared memory directly; a tile's copies are one commit group, and
  `cp.async.wait_group STAGES-2` + one barrier make the oldest tile visible.
* A is not transposed. cp.async copies bytes: it cannot scatter a float4 of an A row into
  four rows of As[k, m] as k8's STS do. So A stays k-contiguous, in chunks of 4 k:

      As (one stage): [TK/4 chunks][TM rows][4 floats]   chunk c of row r holds A[r, 4c .. 4c+3]
                      (chunks chunk_floats() apart: TM·4 + 128/TK floats)

  One LDS.128 of a chunk gives a lane one row's 4 k; per chunk a lane reads its 8 rows
  (8 LDS.128) and then multiplies 4 k, reading B per k as k8 does (2 LDS.128): 16 LDS.128
  per 4 k, as k8. For that read to be conflict-free the 8 lanes of a column must read 8
  consecutive rows (128 contiguous bytes), so a lane's rows are 8 apart (_warptile.make's
  `rows_apart`: am + {0, 8, 16, 24} + {0, 32}) instead of k8's 4 consecutive ones.
  (Row-major As[m, k] with rows TK floats apart would put those 8 rows 32 bytes apart: the
  same 4 banks, eight ways.) The copies' writes: 8 lanes (one 128-byte wavefront of 16-byte
  accesses) write TK/4 chunks of 32/TK rows; the 128/TK floats between chunks shift each
  chunk onto its own banks (without them the 2 chunks of an 8-deep tile are 2048 bytes
  apart: a 2-way conflict).
* Edges: every copy is checked like k8's loads. Out of the matrix it becomes a zero-fill
  (src-size 0), so ragged tiles hold zeros and no address outside A or B is read. Where rows
  are not 16-byte aligned (`vector_operands`: K % 4, N % 4 or an unaligned base) the float4
  is four 4-byte `cp.async.ca` (cp.async.cg takes only 16 bytes), each float checked, into
  the same places: one layout and one multiply for all four specialisations.

The pipeline (one barrier per K tile, as k8):

    prologue: issue tiles 0 .. STAGES-2, one commit group each
    for each tile t:
        wait until tile t's group has landed (at most STAGES-2 younger ones in flight); barrier
        issue tile t+STAGES-1 into the stage tile t-1 used (every thread passed the barrier,
        so none still reads it); commit (an empty group past K keeps the count in step)
        multiply tile t from its stage

Tiles past K are zero-fills that touch no memory. With 8-deep tiles a stage is 8.1 KB: 4 stages
are 32.5 KB per block, two blocks per SM.
"""
from __future__ import annotations

from types import SimpleNamespace

from numba import cuda

from ..intrinsics import load4_shared, unrolled
from ..ledgers.access import WARP, Geometry, Step, global_load, shared_access
from ..ptx import cp_async4, cp_async16, cp_async_commit, cp_async_wait, smem_u32
from . import _warptile
from ._common import u32, u64
from ._loaders import inline as _inline

F32 = 4


def chunk_floats(t: _warptile.WarpTiling) -> int:
    """Floats between the chunks of a stage's A tile: TM rows of 4 floats, then a pad that puts
    the chunks a wavefront of copies writes on different banks (a multiple of 4 floats: the
    chunks stay 16-byte aligned)."""
    return 4 * t.tile_m + 128 // t.tile_k


def a_floats(t: _warptile.WarpTiling) -> int:
    """Floats of one stage's A tile (TK/4 chunks); B's tile [TK][TN] follows it."""
    return t.tile_k // 4 * chunk_floats(t)


def stage_floats(t: _warptile.WarpTiling) -> int:
    return a_floats(t) + t.tile_k * t.tile_n


def smem_bytes(t: _warptile.WarpTiling, stages: int) -> int:
    return stages * stage_floats(t) * F32


def row_offsets(t: _warptile.WarpTiling) -> list[int]:
    """Tile rows of a lane's thread tile, from its first (am): 4×4 pieces M_STEP apart, their
    rows lanes_m apart (_warptile.make with rows_apart)."""
    return [i // 4 * 4 * t.lanes_m + i % 4 * t.lanes_m for i in range(t.thread_m)]


def make(t: _warptile.WarpTiling, a_vec: bool, bc_vec: bool, stages: int) -> SimpleNamespace:
    """Device functions of one k9 build: `pipelined` (the K loop into acc) and _warptile's
    loaders, thread_tile and epilogue for the rows-apart thread tile."""
    if stages < 2:
        raise ValueError("a cp.async ring needs at least 2 stages")
    p = _warptile.make(t, a_vec, bc_vec, rows_apart=True)
    TM, TN, TK = t.tile_m, t.tile_n, t.tile_k
    THREADS = t.threads
    A_LOADS, B_LOADS = t.a_loads, t.b_loads
    A_ROW_STEP = THREADS // (TK // 4)
    B_ROW_STEP = THREADS // (TN // 4)
    SPREAD = TN // 4                       # 32-bit B: a thread's four floats, as k8's
    A_FLOATS, STAGE, CHUNK = a_floats(t), stage_floats(t), chunk_floats(t)
    RING = stages * STAGE                  # floats
    THREAD_M, THREAD_N, SUB_N = t.thread_m, t.thread_n, t.sub_n
    N_STEP = 4 * t.lanes_n
    M_STEP, LANES_M = 4 * t.lanes_m, t.lanes_m      # row_offsets(t), as arithmetic Numba unrolls
    wait_oldest = cp_async_wait(stages - 2)
    wait_all = cp_async_wait(0)

    # ---- global -> shared: a thread's share of one K tile, every copy checked ----------------
    @_inline
    def copy_a16(dst, A, off, ok, col, k):
        cp_async16(dst, A, off, u32(16) if ok & (col < k) else u32(0))     # k % 4 == 0: all or none

    @_inline
    def copy_a4(dst, A, off, ok, col, k):
        for q in range(4):
            cp_async4(u32(dst + 4 * q), A, off + u64(q), u32(4) if ok & (u32(col + q) < k) else u32(0))

    @_inline
    def copy_b16(dst, B, off, ok, col, n):
        cp_async16(dst, B, off, u32(16) if ok & (col < n) else u32(0))

    @_inline
    def copy_b4(dst, B, off, ok, col, n):
        for q in range(4):
            cp_async4(u32(dst + 4 * SPREAD * q), B, off + u64(q * SPREAD),
                      u32(4) if ok & (u32(col + q * SPREAD) < n) else u32(0))

    copy_a = copy_a16 if a_vec else copy_a4
    copy_b = copy_b16 if bc_vec else copy_b4

    @_inline
    def issue(stage, A, B, a_off, b_off, a_dst, b_dst, a_row, a_col, b_row, b_col, m, n, k):
        """cp.async of this thread's share of one K tile into the stage at byte `stage` of the
        ring. a_dst, b_dst: byte offsets of its first A chunk and B float4 in a stage;
        (a_row, a_col), (b_row, b_col): their matrix elements."""
        for s in range(A_LOADS):
            copy_a(u32(stage + a_dst + s * A_ROW_STEP * 16), A, a_off + u64(s * A_ROW_STEP) * u64(k),
                   u32(a_row + s * A_ROW_STEP) < m, a_col, k)
        for s in range(B_LOADS):
            copy_b(u32(stage + b_dst + s * B_ROW_STEP * TN * 4), B, b_off + u64(s * B_ROW_STEP) * u64(n),
                   u32(b_row + s * B_ROW_STEP) < k, b_col, n)

    # ---- the multiply: chunk c of a stage is k rows 4c .. 4c+3 ----------------------------
    @_inline
    def chunk(c, smem, st, a_rd, b_rd, af, bf, acc):
        """st: the stage's first float; a_rd = 4·am, b_rd = bn (this lane's first row and column).
        THREAD_M LDS.128 (a row's 4 k each), then per k SUB_N LDS.128 of B and the outer product."""
        for i in range(THREAD_M):
            a = load4_shared(smem, st + a_rd + u64(c * CHUNK + 4 * (i // 4 * M_STEP + i % 4 * LANES_M)))
            for q in range(4):
                af[i, q] = a[q]
        for q in range(4):
            for j in range(SUB_N):
                b = load4_shared(smem, st + b_rd + u64(A_FLOATS + (4 * c + q) * TN + j * N_STEP))
                for x in range(4):
                    bf[4 * j + x] = b[x]
            for i in range(THREAD_M):
                for j in range(THREAD_N):
                    acc[i, j] += af[i, q] * bf[j]

    compute = unrolled(chunk, TK // 4)     # compute(0, ...): the whole stage, unrolled

    @_inline
    def pipelined(A, B, smem, af, bf, acc, a_r, a_c, b_r, b_c, a_off, b_off, am, bn, row0, col0, m, n, k):
        """The stage ring over all of K into acc (the module docstring's loop)."""
        base = smem_u32(smem)
        a_dst = u32((a_c // 4 * CHUNK + 4 * a_r) * 4)     # chunk a_c/4 of row a_r
        b_dst = u32((A_FLOATS + b_r * TN + b_c) * 4)
        a_rd = u64(am) * u64(4)
        b_rd = u64(bn)
        wr = u32(0)                                       # byte offset of the stage to fill
        nxt = u32(0)                                      # its tile's first k
        for _ in range(stages - 1):
            issue(u32(base + wr), A, B, a_off, b_off, a_dst, b_dst,
                  u32(row0 + a_r), u32(nxt + a_c), u32(nxt + b_r), u32(col0 + b_c), m, n, k)
            cp_async_commit()
            a_off += u64(TK)
            b_off += u64(TK) * u64(n)
            nxt = u32(nxt + TK)
            wr = u32(wr + STAGE * 4)
        rd = u64(0)                                       # first float of the stage to multiply
        ph = u32(0)
        while ph < k:
            wait_oldest()
            cuda.syncthreads()
            issue(u32(base + wr), A, B, a_off, b_off, a_dst, b_dst,
                  u32(row0 + a_r), u32(nxt + a_c), u32(nxt + b_r), u32(col0 + b_c), m, n, k)
            cp_async_commit()
            compute(0, smem, rd, a_rd, b_rd, af, bf, acc)
            a_off += u64(TK)
            b_off += u64(TK) * u64(n)
            nxt = u32(nxt + TK)
            wr = u32(wr + STAGE * 4) if wr < u32((stages - 1) * STAGE * 4) else u32(0)
            rd = rd + u64(STAGE) if rd < u64((stages - 1) * STAGE) else u64(0)
            ph = u32(ph + TK)
        wait_all()                                        # the zero-fills past K, before exit

    return SimpleNamespace(loaders=p.loaders, thread_tile=p.thread_tile, epilogue=p.epilogue,
                           pipelined=pipelined, ring_floats=RING)


# ---- the ledgers ---------------------------------------------------------------------------

def warp_step(t: _warptile.WarpTiling, g: Geometry, stages: int, M, N, K, bx, by, warp, ph) -> Step:
    """What warp `warp` of block (bx, by) touches for K tile `ph`, in stage ph % stages: the
    loaders' float4s of A and B (as k8's, _warptile.load_positions), each written to shared
    memory by its cp.async (A into its row's chunk, B straight), and per chunk the lanes'
    LDS.128 of their 8 rows, per k those of B."""
    T = g.tile_k
    st = ph % stages * stage_floats(t)
    b_base = (st + a_floats(t)) * F32                        # bytes: Bs of this stage
    acc = []
    for rows, cols in _warptile.load_positions(t, g, warp, "A"):
        acc.append(global_load("A", [(by * g.tile_m + r) * K + ph * T + c for r, c in zip(rows, cols)], 16))
        acc.append(shared_access("As", [st + c // 4 * chunk_floats(t) + 4 * r for r, c in zip(rows, cols)], 16,
                                 inner=False, op="store"))
    for rows, cols in _warptile.load_positions(t, g, warp, "B"):
        acc.append(global_load("B", [(ph * T + r) * N + bx * g.tile_n + c for r, c in zip(rows, cols)], 16))
        acc.append(shared_access("Bs", [r * g.tile_n + c for r, c in zip(rows, cols)], 16,
                                 inner=False, op="store", base=b_base))
    am = [warp // t.warps_n * t.warp_m + lane // t.lanes_n for lane in range(WARP)]
    bn = [warp % t.warps_n * t.warp_n + lane % t.lanes_n * 4 for lane in range(WARP)]
    for c in range(T // 4):
        for off in row_offsets(t):                           # 8 consecutive rows' chunks, broadcast
            acc.append(shared_access("As", [st + c * chunk_floats(t) + 4 * (a + off) for a in am], 16))
        for kk in range(4 * c, 4 * c + 4):
            for j in range(t.sub_n):                         # 4 distinct float4s, broadcast
                acc.append(shared_access("Bs", [kk * g.tile_n + b + j * 4 * t.lanes_n for b in bn], 16,
                                         base=b_base))
    return Step(T * g.thread_m * g.thread_n, tuple(acc), "one phase")
