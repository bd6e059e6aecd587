"""read: diff native/twins/k8.cu native/twins/k9.cu · run: python bench.py --level k9

k9 — B copied global -> shared by cp.async, STAGES - 1 tiles ahead; A through registers as k8.

k8 moves both tiles through registers: LDG into ra and rb during the multiply, then STS and a
barrier, one tile ahead. k9 keeps that path for A (its float4 of a row must be scattered into
four rows of As[k, m], which only a register can do: cp.async copies bytes, it cannot
transpose) and hands B to `cp.async` (SASS LDGSTS, numba_gemm.ptx.cp_async16): B's shared
layout Bs[k, n] is already B's own row order, so a float4 of a B row goes straight into the
same float4 of Bs, without registers, and

* B's staging registers (rb) and its STS.128 leave the K loop: per thread per tile 1 LDGSTS
  in place of 1 LDG.128 + 1 STS.128;
* B's copies run STAGES - 1 = 2 tiles ahead of the multiply (a ring of 3 B stages), tracked
  by commit groups: `cp.async.wait_group STAGES - 2` before the one barrier per tile. A stays
  one tile ahead, in registers, exactly as k8 (load_a_tile / store_a_tile of
  numba_gemm.sgemm._warptile, the same functions k8 runs).

An earlier k9 copied A by cp.async as well, so A had to stay k-contiguous: 32 A-fragment
registers at the 128 cap and bursts of shared loads after each barrier, 20 % slower than k8
(docs/RESULTS.md, "k9: k8 + a cp.async ring"). This one changes only B.

Per tile (one barrier, as k8):

    issue B tile t+STAGES-1 into the B stage tile t-1 used; commit   (every thread passed the
                                                                     barrier ending t-1)
    load A tile t+1 global -> registers                              (in flight ...)
    multiply tile t                                                  (... during these FFMA)
    store A tile t+1 into its buffer, transposed
    wait until B tile t+1 has landed (STAGES-2 younger groups may fly); barrier

As has STAGES buffers too, so one k row index names both tiles of a phase and k8's unrolled
multiply (`compute`) runs unchanged. Shared memory: 3 × (8 × 132 + 8 × 128) floats = 24.9 KB
per block, two blocks per SM as k8. Why 3 stages, not 2: with 2 the copy of B tile t+1 is
issued and waited for within phase t (one tile of cover, as k8's LDG); the third stage gives
it two, for 4 KB of shared memory and no register (the census: `python tools/twin_census.py
k9`). run(..., stages=2) (tools/hopper_top.py's k9:stages=2) is the 2-stage ring, to time.

Edges as k8: four specialisations by `vector_operands`. Every copy is checked like k8's load
and becomes a zero-fill outside the matrix (no address outside B is read); where B's rows are
not 16-byte aligned the float4 is four 4-byte `cp.async.ca` (`cp_async4`), SPREAD floats
apart as k8's 32-bit loads of B. Tiles past K are zero-fills, waited for before the epilogue.

Ledgers: the accesses are k8's (the same loads; a copy's 16-byte shared write lands where
k8's STS.128 of B did, B stages 4 KB apart: the same banks), so the requests, bytes and
conflicts ledgers are k8's; what moves is the stall none of them models, B's load latency,
now covered by two tiles of multiply. Not yet measured on the H200; auto ranks it after the
calibrated levels until it is (numba_gemm/data/h200_auto.json has no k9).
"""
import functools

import numpy as np
from numba import cuda

from ..ledgers.access import Geometry, Step
from ..ptx import cp_async4, cp_async16, cp_async_commit, cp_async_wait, smem_u32
from . import _warptile
from ._common import SIGNATURE, SMEM_ALIGN, float32, grid_limit, launch, u32, u64
from ._loaders import inline as _inline
from ._loaders import vector_operands     # which operands may move as float4 (k6's rule)

LEVEL = "k9"
PARENT = "k8"
TITLE = "cp.async for B: a 3-stage ring of B tiles, A through registers as k8"
DELTA = (
    "k9 = k8 + B copied global -> shared by cp.async (LDGSTS, no staging registers), 2 tiles "
    "ahead in a 3-stage ring; A still loaded into registers and stored transposed"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDGSTS", "LDG.E.128", "LDS.128", "STS", "STG.E.128", "FFMA")

TILING = _warptile.WarpTiling(tile_m=128, tile_n=128, tile_k=8, warp_m=64, warp_n=32, lanes_n=4)
STAGES = 3
TILE_M, TILE_N, TILE_K = TILING.tile_m, TILING.tile_n, TILING.tile_k
THREAD_M, THREAD_N = TILING.thread_m, TILING.thread_n
BLOCK = TILING.block
THREADS = TILING.threads
GEOMETRY = Geometry(BLOCK, TILE_M, TILE_N, TILE_K, THREAD_M, THREAD_N)
STATIC_SMEM = 48 * 1024      # bytes: the most a static shared array may hold


def smem_bytes(t: _warptile.WarpTiling = TILING, stages: int = STAGES) -> int:
    """Shared memory of one block: `stages` buffers of As[TK, a_stride] and of Bs[TK, TN]."""
    return stages * t.tile_k * (t.a_stride + t.tile_n) * 4


SMEM_BYTES = smem_bytes()


def grid(M: int, N: int, t: _warptile.WarpTiling = TILING) -> tuple[int, int]:
    return _warptile.grid(M, N, t)


def make_kernel(t: _warptile.WarpTiling, a_vec: bool, bc_vec: bool, stages: int = STAGES):
    """The k9 kernel (not yet jitted) for tiling `t` and a ring of `stages`; arguments as k8's."""
    if stages < 2:
        raise ValueError("a cp.async ring needs at least 2 stages")
    p = _warptile.make(t, a_vec, bc_vec)
    loaders, thread_tile, compute, epilogue = p.loaders, p.thread_tile, p.compute, p.epilogue
    load_a_tile, store_a_tile = p.load_a_tile, p.store_a_tile
    TM, TN, TK, AS = t.tile_m, t.tile_n, t.tile_k, t.a_stride
    NA, TMR, TNR = t.a_loads, t.thread_m, t.thread_n
    B_LOADS = t.b_loads
    B_ROW_STEP = t.threads // (TN // 4)       # tile rows (of k) between a thread's B float4s
    SPREAD = TN // 4                          # 32-bit B: a thread's four floats, this far apart
    ROWS = stages * TK                        # k rows of the ring (As and Bs alike)
    B_STAGE = TK * TN * 4                     # bytes of one B stage
    LAST = (stages - 1) * TK                  # first k row of the last stage
    wait_next = cp_async_wait(stages - 2)     # all but the stages-2 youngest groups have landed
    wait_all = cp_async_wait(0)

    # ---- B global -> shared: a thread's share of one K tile, every copy checked ------------
    @_inline
    def copy_b16(dst, B, off, ok, col, n):
        cp_async16(dst, B, off, u32(16) if ok & (col < n) else u32(0))     # n % 4 == 0: all or none

    @_inline
    def copy_b4(dst, B, off, ok, col, n):
        for q in range(4):
            cp_async4(u32(dst + 4 * SPREAD * q), B, off + u64(q * SPREAD),
                      u32(4) if ok & (u32(col + q * SPREAD) < n) else u32(0))

    copy_b = copy_b16 if bc_vec else copy_b4

    @_inline
    def issue_b(stage, B, b_off, b_dst, b_row, b_col, n, k):
        """cp.async of this thread's B float4s of one tile into the stage at shared address
        `stage`; b_dst: byte offset of its first float4 in a stage, (b_row, b_col) its element."""
        for s in range(B_LOADS):
            copy_b(u32(stage + b_dst + s * B_ROW_STEP * TN * 4), B, b_off + u64(s * B_ROW_STEP) * u64(n),
                   u32(b_row + s * B_ROW_STEP) < k, b_col, n)
        cp_async_commit()

    def k9(M, N, K, alpha, A, B, beta, C):
        As = cuda.shared.array((ROWS, AS), float32, alignment=SMEM_ALIGN)   # As[k, m], stages × TK rows
        Bs = cuda.shared.array((ROWS, TN), float32, alignment=SMEM_ALIGN)   # Bs[k, n], cp.async's target

        lane = u32(cuda.threadIdx.x)
        warp = u32(cuda.threadIdx.y)
        tid = u32(warp * 32 + lane)
        m, n, k = u32(M), u32(N), u32(K)
        row0 = u32(cuda.blockIdx.y * TM)
        col0 = u32(cuda.blockIdx.x * TN)

        a_r, a_c, b_r, b_c, a_off, b_off = loaders(tid, row0, col0, k, n)
        am, bn = thread_tile(lane, warp)
        base = smem_u32(Bs)
        b_dst = u32((b_r * TN + b_c) * 4)

        ra = cuda.local.array((NA, 4), float32)
        af = cuda.local.array(TMR, float32)
        bf = cuda.local.array(TNR, float32)
        acc = cuda.local.array((TMR, TNR), float32)
        for i in range(TMR):
            for j in range(TNR):
                acc[i, j] = float32(0.0)

        # prologue: B tiles 0 .. stages-2 in flight, A tile 0 through registers into buffer 0
        for s in range(stages - 1):
            issue_b(u32(base + s * B_STAGE), B, b_off, b_dst, u32(s * TK + b_r), u32(col0 + b_c), n, k)
            b_off += u64(TK) * u64(n)
        load_a_tile(A, ra, a_off, u32(row0 + a_r), a_c, m, k)
        store_a_tile(As, u32(0), ra, a_r, a_c)
        wait_next()                                  # B tile 0 has landed
        cuda.syncthreads()

        kb = u32(0)                                  # first k row of the stage to multiply
        prev = u32(LAST)                             # ... and of the stage the last tile used
        ph = u32(0)
        while ph < k:
            # B tile ph/TK + stages-1 into the stage tile ph/TK - 1 used: every thread has
            # passed the barrier that ended that tile
            issue_b(u32(base + prev * u32(TN * 4)), B, b_off, b_dst, u32(ph + LAST + b_r), u32(col0 + b_c), n, k)
            b_off += u64(TK) * u64(n)
            a_off += u64(TK)
            load_a_tile(A, ra, a_off, u32(row0 + a_r), u32(ph + TK + a_c), m, k)
            compute(kb, As, Bs, am, bn, af, bf, acc)            # meanwhile: TK steps, unrolled
            prev = kb
            kb = u32(kb + TK) if kb < u32(LAST) else u32(0)
            store_a_tile(As, kb, ra, a_r, a_c)
            wait_next()                              # B tile ph/TK + 1 has landed
            cuda.syncthreads()
            ph = u32(ph + TK)
        wait_all()                                   # the zero-fills past K, before exit

        epilogue(0, C, acc, alpha, beta, row0, col0, am, bn, m, n)

    return k9


SPECIALISATIONS = _warptile.specialisations(LEVEL, make_kernel, TILING)
kernel = SPECIALISATIONS[True, True][1]
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


@functools.lru_cache(maxsize=None)
def variant(stages: int = STAGES) -> dict:
    """The four specialisations of k9 with another ring depth, jitted on first use (the
    shipped ones are SPECIALISATIONS): run(..., stages=2) or tools/hopper_top.py's k9:stages=2."""
    if stages == STAGES:
        return SPECIALISATIONS
    if stages < 2 or smem_bytes(TILING, stages) > STATIC_SMEM:
        raise ValueError(f"k9 with {stages} stages: at least 2, and at most {STATIC_SMEM} bytes of static "
                         f"shared memory ({smem_bytes(TILING, max(stages, 0))} needed)")
    return _warptile.specialisations(f"{LEVEL}_s{stages}", functools.partial(make_kernel, stages=stages), TILING)


def run(A, B, C, alpha, beta, stream=None, stages: int = STAGES):
    k9 = variant(stages)[vector_operands(A, B, C)][1]
    launch(k9, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """k8's accesses for phase ph: the same float4 loads of A and B, A stored transposed, B's
    copy writing the 16 bytes k8's STS.128 wrote. Its tiles live in stage ph % STAGES; a stage
    of As is TILE_K·132·4 bytes and of Bs TILE_K·128·4, both multiples of 128: the banks of
    buffer 0, so the ledgers see k8's phase."""
    return _warptile.warp_step(TILING, g, M, N, K, bx, by, warp, ph, buffers=STAGES)
