"""read: diff native/v8_mma.cu numba_gemm/hgemm/v8py_mma.py (its native twin) · run: python bench.py --level v8py --dtype fp16

v8py: v8 written in numba.cuda — tensor cores from Python, through inline-PTX intrinsics.

The same kernel as v8 (native/v8_mma.cu and its headers), statement for statement: ldmatrix.x4 for A,
ldmatrix.x4.trans for B, mma.sync.m16n8k16 with fp32 accumulators, the 128-byte XOR swizzle,
a 3-stage cp.async pipeline with commit/wait groups, 99 KB of dynamic shared memory, and v8's
shipped tile (128×128×64, 4 warps of 64×64, two blocks per SM) and edges. What changes is
the language: the PTX instructions come from numba_gemm.ptx (an `@intrinsic` each, emitting
`llvmlite.ir.InlineAsm`), `#pragma unroll` becomes loops over compile-time constants that
NVVM unrolls fully (so the 128 accumulators stay in registers), and index arithmetic is cast
to uint32 / uint64 where Numba would otherwise compute in int64 (numba-cuda#801). The
comparison with v8 is therefore the cost of writing the kernel in Python, nothing else.

Specialisations (host picks one per call, as v8's entry picks a template instance): f16 or
bf16 mma, and "fast" (both operands' rows 16-byte aligned: every chunk by cp.async) or
"general" (per-operand: cp.async where rows are aligned, element-wise loads otherwise).

Edges as v8: cp.async with src-size 0 zero-fills chunks past M, N, K; masked stores of C;
beta == 0 never reads C; element offsets in 64 bits (row × leading dimension as uint64).
Stores of C are 32-bit (v8 uses float2 stores where C's rows allow).

In the CUDA simulator the intrinsics are replaced by plain-Python twins that compute what the
warp's instruction computes (numba_gemm.ptx), so the indexing, swizzle, pipeline and edges
here run in CI on small shapes.
"""
from __future__ import annotations


import numpy as np
from numba import cuda, float32, int32, uint16, uint32, uint64

from ..ptx.intrinsics import unrolled
from ..ptx import (SIMULATOR, cp_async16, cp_async_commit, cp_async_wait, ldmatrix_x4,
                   ldmatrix_x4_trans, mma_bf16, mma_f16, smem_u32)
from . import _common as cm
from . import _numba_launch
from ._numba_launch import array_args

LEVEL = "v8py"
PARENT = "v8"
TITLE = "v8 in numba.cuda: inline-PTX mma.sync"
DELTA = ("v8py = v8 written in numba.cuda: ldmatrix, mma.sync, cp.async as inline-PTX "
         "@intrinsics, same tile, swizzle, pipeline and edges")
DTYPES = cm.DTYPES
SASS_MUST_HAVE = ("HMMA", "LDSM", "LDGSTS")
RASTER = "n-fastest"
AUTO = False    # level="auto" never picks it: v8's twin for comparison, not a faster rung

CONFIG = cm.CP_ASYNC_TILE                     # v8's shipped tile
BM, BN, BK, STAGES = CONFIG.bm, CONFIG.bn, CONFIG.bk, CONFIG.stages
WARPS_M, WARPS_N = CONFIG.warps_m, CONFIG.warps_n
THREADS = CONFIG.threads                      # 128
WM, WN = CONFIG.warp_tile                     # 64 x 64 of C per warp
MT, NT = WM // 16, WN // 8                    # 4 x 8 mma tiles of 16 x 8 per warp
NB = NT // 2                                  # B fragments: one ldmatrix.x4.trans per 16 columns
A_BYTES = BM * BK * 2                         # A: one panel of BM 128-byte rows (16 KB)
B_PANEL = BK * 128                            # B: panels of 64 k-rows x 64 n (8 KB)
STAGE_BYTES = A_BYTES + (BN // 64) * B_PANEL  # 32 KB
SMEM = CONFIG.smem()                          # 3 stages + 1 KB to align the base: 99,328 B
A_ITERS, A_ROWSTEP = BM * 8 // THREADS, THREADS // 8             # 8 chunks, 16 rows apart
B_CPR = BN // 8
B_ITERS, B_ROWSTEP = BK * B_CPR // THREADS, THREADS // B_CPR     # 8 chunks, 8 rows apart
assert not CONFIG.problems() and STAGE_BYTES == CONFIG.stage_bytes

u32, u64 = uint32, uint64
S = np.uint32(STAGES)   # unsigned: `kt % S` is a 32-bit urem (Python's % on int64 adds sign fix-ups)

# (A, B, C, M, N, K, alpha, beta, vec_a, vec_b): A, B flat uint16 (fp16 or bf16 bits), C flat
SIGNATURE = (uint16[::1], uint16[::1], float32[::1], int32, int32, int32, float32, float32,
             int32, int32)


@cuda.jit(device=True, inline="always")
def swz128(row, chunk):
    """Byte offset of 16-byte chunk `chunk` of 128-byte row `row`: chunk c at c ^ (row % 8)."""
    return u32(row * 128 + ((chunk ^ (row & 7)) << 4))


@cuda.jit(device=True, inline="always")
def copy_chunk_elementwise(smem, word, X, src, row_ok, col, ncols):
    """16 bytes at shared word `word` from X[src : src + 8], element by element with bounds
    (rows not 16-byte aligned in global memory); zeros outside."""
    for e in range(0, 8, 2):
        lo = u32(X[src + u64(e)]) if row_ok and u32(col + e) < ncols else u32(0)
        hi = u32(X[src + u64(e + 1)]) if row_ok and u32(col + e + 1) < ncols else u32(0)
        smem[word + e // 2] = u32(lo | (hi << 16))


@cuda.jit(device=True, inline="always")
def store_row_of_tiles(i, acc, C, m, n, row0, col0, alpha, beta):
    """Accumulators (i, j) hold rows g, g+8 and columns 2q, 2q+1 of 16 x 8 tile (i, j); row0
    and col0 are the warp's first row and column plus g and 2q."""
    for h in range(2):
        row = u32(row0 + i * 16 + 8 * h)
        if row < m:
            crow = u64(row) * u64(n)
            for j in range(NT):
                col = u32(col0 + j * 8)
                c = crow + u64(col)
                v0 = alpha * acc[i, j, 2 * h]
                v1 = alpha * acc[i, j, 2 * h + 1]
                if col < n:
                    C[c] = v0 if beta == 0 else v0 + beta * C[c]
                if u32(col + 1) < n:
                    C[c + u64(1)] = v1 if beta == 0 else v1 + beta * C[c + u64(1)]


# all MT rows of tiles as straight-line code: the accumulators are indexed by constants only,
# so they stay in registers (a loop NVVM leaves rolled would put them in local memory)
store_tiles = unrolled(store_row_of_tiles, MT)


def _make_kernel(bf16: bool, fast: bool):
    """The kernel for one input type; `fast`: both operands by cp.async (v8's FAST instance)."""
    mma = mma_bf16 if bf16 else mma_f16
    wait_for_oldest = cp_async_wait(STAGES - 2)
    wait_all = cp_async_wait(0)

    @cuda.jit(device=True, inline="always")
    def load_stage(smem, base, word0, stage, kt, A, B, k, n, vec_a, vec_b,
                   a_dst, a_src, a_step, a_c, a_rows_ok, b_dst, b_src, b_step, b_r, b_col, b_col_ok):
        st = u32(base + stage * STAGE_BYTES)
        k0 = u32(kt * BK)                        # < K < 2^31
        a_col_ok = u32(k0 + a_c * 8) < k
        pa = a_src + u64(k0)
        for i in range(A_ITERS):
            row_ok = (a_rows_ok >> i) & 1 != 0
            off = u32(a_dst + i * A_ROWSTEP * 128)
            if fast or vec_a:
                ok = row_ok and a_col_ok
                cp_async16(u32(st + off), A, pa, 16 if ok else 0)
            else:
                copy_chunk_elementwise(smem, u32(word0 + (stage * STAGE_BYTES + off) // 4),
                                       A, pa, row_ok, u32(k0 + a_c * 8), k)
            pa += a_step
        b_krem = int32(int32(k - k0) - int32(b_r))   # k-rows b_r + B_ROWSTEP*i < b_krem exist
        pb = b_src + u64(k0) * u64(n)
        for i in range(B_ITERS):
            row_ok = int32(B_ROWSTEP * i) < b_krem
            off = u32((b_dst + i * B_ROWSTEP * 128) ^ (((i * B_ROWSTEP) & 7) << 4))
            if fast or vec_b:
                ok = row_ok and b_col_ok
                cp_async16(u32(st + off), B, pb, 16 if ok else 0)
            else:
                copy_chunk_elementwise(smem, u32(word0 + (stage * STAGE_BYTES + off) // 4),
                                       B, pb, row_ok, b_col, n)
            pb += b_step

    @cuda.jit(device=True, inline="always")
    def mma_stage(acc, af, bf, a_thr, b_thr):
        """One BK-deep stage: 4 k16 steps of MT + NT/2 ldmatrix and MT*NT mma (4 + 4 and 32)."""
        # [excerpt:v8py-mma-stage]
        for kk in range(BK // 16):
            for i in range(MT):
                r = ldmatrix_x4(u32((a_thr + i * 16 * 128) ^ (kk * 32)))
                af[i, 0], af[i, 1], af[i, 2], af[i, 3] = r
            for j in range(NB):
                r = ldmatrix_x4_trans(u32((b_thr + kk * 16 * 128 + (j // 4) * B_PANEL) ^ ((j % 4) * 32)))
                bf[j, 0], bf[j, 1], bf[j, 2], bf[j, 3] = r
            for i in range(MT):
                a = (af[i, 0], af[i, 1], af[i, 2], af[i, 3])
                for j in range(NT):
                    b = (bf[j // 2, 2 * (j % 2)], bf[j // 2, 2 * (j % 2) + 1])
                    d = mma((acc[i, j, 0], acc[i, j, 1], acc[i, j, 2], acc[i, j, 3]), a, b)
                    acc[i, j, 0], acc[i, j, 1], acc[i, j, 2], acc[i, j, 3] = d
        # [/excerpt]

    def v8py(A, B, C, M, N, K, alpha, beta, vec_a, vec_b):
        smem = cuda.shared.array(0, uint32)      # dynamic: the launch gives SMEM bytes
        tid = u32(cuda.threadIdx.x)
        warp, lane = u32(tid // 32), u32(tid % 32)
        warp_m, warp_n = u32(warp // WARPS_N), u32(warp % WARPS_N)
        m, n, k = u32(M), u32(N), u32(K)
        # tile_of: a 1-D grid in row-major tile order (n fastest)
        grid_n = u32((n + (BN - 1)) // BN)
        bid = u32(cuda.blockIdx.x)
        bm = u32(bid // grid_n)
        m0, n0 = u32(bm * BM), u32((bid - bm * grid_n) * BN)

        # 1024-aligned base: the XOR walks below flip address bits 4..6 only
        raw = smem_u32(smem)
        base = u32((raw + 1023) & ~u32(1023))
        word0 = u32((base - raw) // 4)           # base as an index into smem (uint32 words)

        # ---- producer-side precompute: A_ITERS chunks of A and B_ITERS of B per stage.
        # A chunk i: row a_r + A_ROWSTEP*i, chunk a_c; A_ROWSTEP is a multiple of 8, so the
        # swizzle stays the same: destinations A_ROWSTEP*128 bytes apart.
        a_r, a_c = u32(tid // 8), u32(tid % 8)
        a_dst = swz128(a_r, a_c)
        a_src = u64(m0 + a_r) * u64(k) + u64(a_c * 8)
        a_step = u64(A_ROWSTEP) * u64(k)
        # B chunk i: k-row b_r + B_ROWSTEP*i, 16-byte column b_nc (panel b_nc // 8); the row's
        # swizzle changes by (B_ROWSTEP*i) % 8, an XOR of the chunk.
        b_r, b_nc = u32(tid // B_CPR), u32(tid % B_CPR)
        b_dst = u32(A_BYTES + (b_nc // 8) * B_PANEL + swz128(b_r, b_nc % 8))
        b_col = u32(n0 + b_nc * 8)
        b_src = u64(b_r) * u64(n) + u64(b_col)
        b_step = u64(B_ROWSTEP) * u64(n)
        b_col_ok = b_col < n

        # row bounds that do not change along K, one bit per chunk (m0 + 127 < 2^32)
        a_rows_ok = u32(0)
        for i in range(A_ITERS):
            if u32(m0 + a_r + A_ROWSTEP * i) < m:
                a_rows_ok |= u32(1 << i)

        # this lane's ldmatrix addresses relative to a stage, swizzle included. A (x4):
        # row lane%16, chunk lane/16. B (x4.trans): k-row lane%8 + 8*((lane/8)%2), chunk
        # c0 + lane/16 of the panel holding the warp's first column. A k step is an XOR.
        a_lane = u32(warp_m * (WM * 128) + swz128(lane % 16, lane // 16))
        col0 = u32(warp_n * WN)
        b_lane = u32(A_BYTES + (col0 // 64) * B_PANEL
                     + swz128(lane % 8 + 8 * ((lane // 8) % 2), (col0 % 64) // 8 + lane // 16))

        acc = cuda.local.array((MT, NT, 4), float32)
        for i in range(MT):
            for j in range(NT):
                for e in range(4):
                    acc[i, j, e] = float32(0.0)
        af = cuda.local.array((MT, 4), uint32)
        bf = cuda.local.array((NB, 4), uint32)

        k_tiles = u32((k + (BK - 1)) // BK)
        for s in range(STAGES - 1):
            if s < k_tiles:
                load_stage(smem, base, word0, u32(s), u32(s), A, B, k, n, vec_a, vec_b,
                           a_dst, a_src, a_step, a_c, a_rows_ok, b_dst, b_src, b_step, b_r, b_col, b_col_ok)
            cp_async_commit()

        # [excerpt:v8py-loop]
        kt = u32(0)                      # a 32-bit counter: `range` would count in 64 bits
        while kt < k_tiles:
            wait_for_oldest()            # tile kt has landed (this thread's copies) ...
            cuda.syncthreads()           # ... and everyone's; stage (kt-1) % S is free again
            nk = u32(kt + (STAGES - 1))
            if nk < k_tiles:
                load_stage(smem, base, word0, u32(nk % S), nk, A, B, k, n, vec_a, vec_b,
                           a_dst, a_src, a_step, a_c, a_rows_ok, b_dst, b_src, b_step, b_r, b_col, b_col_ok)
            cp_async_commit()            # an empty group keeps the wait count in step
            st = u32(base + (kt % S) * STAGE_BYTES)
            mma_stage(acc, af, bf, u32(st + a_lane), u32(st + b_lane))
            kt = u32(kt + 1)
        # [/excerpt]
        wait_all()

        # ---- epilogue: masked stores, beta == 0 never reads C
        g, q = u32(lane // 4), u32(lane % 4)
        store_tiles(0, acc, C, m, n, u32(m0 + warp_m * WM + g), u32(n0 + warp_n * WN + 2 * q),
                    alpha, beta)

    v8py.__name__ = f"v8py_{'bf16' if bf16 else 'f16'}{'' if fast else '_general'}"
    return v8py


KERNELS = {}
for _bf16 in (False, True):
    for _fast in (True, False):
        _f = _make_kernel(_bf16, _fast)
        KERNELS[_f.__name__] = (cuda.jit(_f), SIGNATURE)
del _bf16, _fast, _f

kernel, _ = KERNELS["v8py_f16"]


def unsupported(M: int, N: int, K: int) -> str | None:
    return cm.unsupported_1d(M, N, K, CONFIG)


def _address(a) -> int:
    if SIMULATOR:
        from ..ptx.intrinsics import _numpy

        return _numpy(a).__array_interface__["data"][0]
    return cm.device_ptr(a)


def _function(name: str):
    return _numba_launch.function(KERNELS[name][0], SIGNATURE)


def specialisation(element_type: str, vec_a: bool, vec_b: bool) -> str:
    """The KERNELS entry for 'f16' / 'bf16' operands whose rows are (not) 16-byte aligned."""
    return f"v8py_{element_type}{'' if vec_a and vec_b else '_general'}"


def run(A, B, C, alpha, beta, stream=None):
    """Launch the specialisation for A's type and the operands' row alignment. On a GPU the
    compiled kernel is launched with cuLaunchKernel from its cached handle (a Numba
    dispatch costs tens of microseconds of host time per call, which at 4096^3 would be a
    tenth of the kernel); in the simulator, through Numba."""
    M, K = A.shape
    N = B.shape[1]
    pa, pb, pc = _address(A), _address(B), _address(C)
    vec_a, vec_b = cm.rows_16b_aligned(pa, K), cm.rows_16b_aligned(pb, N)
    name = specialisation(cm.element_type(A), vec_a, vec_b)
    grid, block, _ = cm.grid_1d(M, N, CONFIG)
    if SIMULATOR:
        KERNELS[name][0][grid, block, stream or 0, SMEM](
            A.reshape(M * K).view(np.uint16), B.reshape(K * N).view(np.uint16), C.reshape(M * N),
            np.int32(M), np.int32(N), np.int32(K), np.float32(alpha), np.float32(beta),
            np.int32(vec_a), np.int32(vec_b))
        return
    from ..runtime.launch import launch_native

    args = (array_args(pa, M * K, 2) + array_args(pb, K * N, 2) + array_args(pc, M * N, 4)
            + cm.pack_args(("i", M), ("i", N), ("i", K), ("f", alpha), ("f", beta),
                           ("i", int(vec_a)), ("i", int(vec_b))))
    launch_native(_function(name), grid, block, SMEM, stream, args)
