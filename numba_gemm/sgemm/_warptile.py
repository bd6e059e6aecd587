"""The warp tiling k7, k8, k9 and k8sk are built from (native/twins/warptile.cuh in CUDA C).

`WarpTiling` (the tile sizes), `make(tiling, a_vec, bc_vec)` (the device functions of one
build: loaders, tile stores, the unrolled multiply, the epilogue, k8's double-buffered
pipeline and k9's with both buffers written out), `specialisations` (one jitted kernel per `vector_operands` answer) and `warp_step`
(the ledgers' view of one phase).

A block of `warps` warps computes a tile_m × tile_n tile of C. Each warp owns a warp_m ×
warp_n sub-tile of it, and each lane of the warp an (sub_m·4) × (sub_n·4) thread tile made
of sub_m × sub_n 4×4 pieces, `lanes_m × lanes_n` lanes apart:

    block tile 128×128  =  2 × 4 warp tiles of 64×32  (8 warps, 256 threads)
    warp tile   64×32   =  2 × 2 sub-tiles of 32×16, each 8 × 4 lanes of 4×4
    thread tile  8×8    =  rows am + {0..3, 32..35}, columns bn + {0..3, 16..19}

Why the 4×4 pieces: at one k a lane reads its 4 rows of the A tile and its 4 columns of the
B tile as ONE 128-bit shared load each, and the 32 lanes of a warp read 8 (A) and 4 (B)
distinct, consecutive float4s — 128 and 64 contiguous bytes, all other lanes broadcasts:
conflict-free LDS.128. Per k a lane issues sub_m + sub_n = 4 of them for 64 FFMA (k6:
3 for 32).

The global side is k6's, from the same loaders (numba_gemm.sgemm._loaders): float4 loads
handed out by linear thread id, the A tile stored transposed (As[k, m], its rows padded by 4
floats so the transposing stores meet at most 2 lanes per bank instead of 4), the B tile
straight; 32-bit forms where rows are not 16-byte aligned, with B's four floats tile_n/4
apart so a warp's loads stay on one line per instruction. The tile sizes are compile-time
constants of each build.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from numba import cuda

from ..ptx.intrinsics import (SIMULATOR, load4_global, load4_readonly, load4_shared, load_readonly, store4_shared,
                          unrolled)
from ._access import F32, WARP, Geometry, Step, global_load, shared_access
from ._common import ceil_div, float32, u32, u64
from ._loaders import inline as _inline
from ._loaders import (plain, scalar_load, store_scalar, store_vector, vector_load,
                       vector_load_in)
from ._splitk_parts import sum_slices4

A_PAD = 4          # floats: keeps As rows 16-byte aligned (LDS.128) while spreading the banks
MIN_BLOCKS = 2     # blocks of 256 threads per SM: ptxas may use up to 128 registers per thread
SM_THREADS = 256 * MIN_BLOCKS   # the threads the launch bounds keep on an SM, whatever the block


@dataclass(frozen=True)
class WarpTiling:
    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 16
    warp_m: int = 64
    warp_n: int = 32
    lanes_n: int = 4          # lanes across a sub-tile's columns; WARP // lanes_n down its rows
    sm_threads: int = SM_THREADS   # threads the launch bounds keep on an SM: 65536 / this registers each

    @property
    def warps_n(self) -> int:
        return self.tile_n // self.warp_n

    @property
    def warps(self) -> int:
        return (self.tile_m // self.warp_m) * self.warps_n

    @property
    def threads(self) -> int:
        return WARP * self.warps

    @property
    def block(self) -> tuple[int, int]:
        return (WARP, self.warps)                 # threadIdx.x = lane, threadIdx.y = warp

    @property
    def lanes_m(self) -> int:
        return WARP // self.lanes_n

    @property
    def sub_m(self) -> int:                       # 4×4 pieces per thread, down and across
        return self.warp_m // (4 * self.lanes_m)

    @property
    def sub_n(self) -> int:
        return self.warp_n // (4 * self.lanes_n)

    @property
    def thread_m(self) -> int:
        return 4 * self.sub_m

    @property
    def thread_n(self) -> int:
        return 4 * self.sub_n

    @property
    def a_stride(self) -> int:                    # floats per row of As[k, m]
        return self.tile_m + A_PAD

    @property
    def a_loads(self) -> int:                     # float4s of A per thread per phase
        return self.tile_m * self.tile_k // 4 // self.threads

    @property
    def b_loads(self) -> int:
        return self.tile_k * self.tile_n // 4 // self.threads

    def problems(self) -> list[str]:
        out = []
        if self.tile_m % self.warp_m or self.tile_n % self.warp_n:
            out.append("warp tiles must divide the block tile")
        if self.sub_m < 1 or self.sub_n < 1 or self.warp_m % (4 * self.lanes_m) or self.warp_n % (4 * self.lanes_n):
            out.append("a warp tile must be whole 4×4 pieces for lanes_m × lanes_n lanes")
        if self.tile_k % 4 or self.tile_n % 4:
            out.append("tile_k and tile_n must be multiples of 4")
        if self.tile_m * self.tile_k % (4 * self.threads) or self.tile_k * self.tile_n % (4 * self.threads):
            out.append("every thread must load whole float4s of each tile")
        if self.threads % (self.tile_k // 4) or self.threads % (self.tile_n // 4):
            out.append("the loaders' rows must not straddle threads")
        if self.sm_threads % self.threads:
            out.append("sm_threads must be whole blocks")
        return out


def grid(M: int, N: int, t: WarpTiling) -> tuple[int, int]:
    return (ceil_div(N, t.tile_n), ceil_div(M, t.tile_m))


def blocks_per_sm(t: WarpTiling) -> int:
    """The launch bounds' blocks per SM (the twins' WT_MIN_BLOCKS too): as many as make
    t.sm_threads threads."""
    return t.sm_threads // t.threads


def jit(make_kernel, t: WarpTiling, a_vec: bool, bc_vec: bool):
    """make_kernel(t, a_vec, bc_vec) compiled with the launch bounds (blocks_per_sm; the
    simulator takes none)."""
    f = make_kernel(t, a_vec, bc_vec)
    return cuda.jit(f) if SIMULATOR else cuda.jit(launch_bounds=(t.threads, blocks_per_sm(t)))(f)


def specialisations(level: str, make_kernel, t: WarpTiling) -> dict:
    """(A 128-bit, B and C 128-bit) -> (name, kernel), the key vector_operands gives. Every load
    and store is checked: one predicate per float4 (or per float in the 32-bit forms). k6's
    interior/border split is left out: here it would cost registers (the split edge kernels
    spilled under the 128-register cap) to save ~2% of the loop's instructions."""
    return {
        (True, True): (level, jit(make_kernel, t, True, True)),
        (False, False): (f"{level}_edge", jit(make_kernel, t, False, False)),
        (False, True): (f"{level}_bc", jit(make_kernel, t, False, True)),     # K % 4 != 0
        (True, False): (f"{level}_a", jit(make_kernel, t, True, False)),      # N % 4 != 0
    }


def make(t: WarpTiling, a_vec: bool, bc_vec: bool) -> SimpleNamespace:
    """Device functions for tiling `t`, A moved as float4 (`a_vec`) and B, C as float4 (`bc_vec`)."""
    bad = t.problems()
    if bad:
        raise ValueError(f"{t}: " + "; ".join(bad))
    TM, TK, TN = t.tile_m, t.tile_k, t.tile_n
    THREADS = t.threads
    A_LOADS, B_LOADS = t.a_loads, t.b_loads
    A_ROW_STEP = THREADS // (TK // 4)         # tile rows between a thread's A float4s
    B_ROW_STEP = THREADS // (TN // 4)         # tile rows (of k) between its B float4s
    SPREAD = TN // 4                          # 32-bit B: a thread's four floats, this far apart
    LANES_M, LANES_N = t.lanes_m, t.lanes_n
    SUB_M, SUB_N = t.sub_m, t.sub_n
    THREAD_M, THREAD_N = t.thread_m, t.thread_n
    M_STEP, N_STEP = 4 * LANES_M, 4 * LANES_N  # between a thread's 4×4 pieces
    WARPS_N, WARP_M, WARP_N = t.warps_n, t.warp_m, t.warp_n

    # ---- global memory (numba_gemm.sgemm._loaders). A and B are read through the read-only
    # path (ld.global.nc, as nvcc does for the twins' `const float* __restrict__`): no thread
    # writes them while the kernel runs (the API refuses a C that overlaps A or B). C is read
    # with plain loads. 32-bit B: a thread's four floats SPREAD apart, one line per warp LDG.
    @_inline
    def bs_vector(Bs, r, c, v0, v1, v2, v3):
        store4_shared(Bs, (r, c), (v0, v1, v2, v3))       # one STS.128

    @_inline
    def bs_spread(Bs, r, c, v0, v1, v2, v3):
        Bs[r, c] = v0                                     # a warp's 32 consecutive floats
        Bs[r, c + u64(SPREAD)] = v1
        Bs[r, c + u64(2 * SPREAD)] = v2
        Bs[r, c + u64(3 * SPREAD)] = v3

    load_a = vector_load(load4_readonly) if a_vec else scalar_load(load_readonly, 1)
    load_b = vector_load(load4_readonly) if bc_vec else scalar_load(load_readonly, SPREAD)
    load_c = vector_load(load4_global) if bc_vec else scalar_load(plain, 1)
    store_c = store_vector if bc_vec else store_scalar
    store_bs = bs_vector if bc_vec else bs_spread

    @_inline
    def loaders(tid, row0, col0, k, n):
        """This thread's first float4 of the A tile (tile row a_r, column a_c) and of the B tile
        (row b_r, column b_c), and their running 64-bit offsets at phase 0."""
        a_r = u32(tid // (TK // 4))
        a_c = u32(tid % (TK // 4) * 4)
        b_r = u32(tid // (TN // 4))
        b_c = u32(tid % (TN // 4) * 4) if bc_vec else u32(tid % (TN // 4))
        a_off = u64(row0 + a_r) * u64(k) + u64(a_c)
        b_off = u64(b_r) * u64(n) + u64(col0 + b_c)
        return a_r, a_c, b_r, b_c, a_off, b_off

    @_inline
    def load_tiles(A, B, ra, rb, a_off, b_off, a_row, a_col, b_row, b_col, m, n, k):
        """Global -> registers ra[A_LOADS, 4], rb[B_LOADS, 4]: one phase's share of this thread.
        (a_row, a_col): the matrix element of its first A float4; (b_row, b_col) of B's."""
        for s in range(A_LOADS):
            v = load_a(A, a_off + u64(s * A_ROW_STEP) * u64(k), u32(a_row + s * A_ROW_STEP) < m, a_col, k)
            for q in range(4):
                ra[s, q] = v[q]
        for s in range(B_LOADS):
            v = load_b(B, b_off + u64(s * B_ROW_STEP) * u64(n), u32(b_row + s * B_ROW_STEP) < k, b_col, n)
            for q in range(4):
                rb[s, q] = v[q]

    # ---- shared memory. Tile indices are summed as uint64: a uint32 sum such as
    # u32(a_c + 1) may wrap before Numba widens it to 64 bits, so the compiler cannot split
    # the constant off into the instruction's immediate offset and computes every address
    # apart (4 address registers per transposed A float4 instead of one, in k7's loop).
    @_inline
    def store_tiles(As, Bs, kb, ra, rb, a_r, a_c, b_r, b_c):
        """Registers -> the tiles whose k rows start at kb: A transposed (4 STS per float4),
        B straight."""
        for s in range(A_LOADS):
            r = u64(a_r) + u64(s * A_ROW_STEP)
            for q in range(4):
                As[u64(kb) + u64(a_c) + u64(q), r] = ra[s, q]
        for s in range(B_LOADS):
            store_bs(Bs, u64(kb) + u64(b_r) + u64(s * B_ROW_STEP), u64(b_c),
                     rb[s, 0], rb[s, 1], rb[s, 2], rb[s, 3])

    @_inline
    def step(kk, As, Bs, am, bn, af, bf, acc):
        """One k of the thread's outer product: SUB_M + SUB_N LDS.128 feed THREAD_M·THREAD_N FFMA."""
        for i in range(SUB_M):
            a = load4_shared(As, (kk, u64(am) + u64(i * M_STEP)))
            for q in range(4):
                af[4 * i + q] = a[q]
        for j in range(SUB_N):
            b = load4_shared(Bs, (kk, u64(bn) + u64(j * N_STEP)))
            for q in range(4):
                bf[4 * j + q] = b[q]
        for i in range(THREAD_M):
            for j in range(THREAD_N):
                acc[i, j] += af[i] * bf[j]

    compute = unrolled(step, TK)       # compute(kb, ...): k rows kb .. kb + TK - 1, unrolled

    @_inline
    def thread_tile(lane, warp):
        """Tile row am and column bn of this thread's first 4×4 piece."""
        am = u32(warp // WARPS_N * WARP_M + lane // LANES_N * 4)
        bn = u32(warp % WARPS_N * WARP_N + lane % LANES_N * 4)
        return am, bn

    @_inline
    def epilogue_row_at(i, C, base, acc, alpha, beta, row0, col0, am, bn, m, n):
        """Row i of the thread tile: C = alpha·acc + beta·C, four columns at a time, into the
        m × n matrix that starts at element `base` of C (a split-K slice's partials: base
        z·m·n, alpha 1, beta 0); beta == 0 never reads C (BLAS: NaN in C must not leak)."""
        row = u32(row0 + am + i // 4 * M_STEP + i % 4)
        for j4 in range(SUB_N):
            col = u32(col0 + bn + j4 * N_STEP)
            off = base + u64(row) * u64(n) + u64(col)
            j = 4 * j4
            if beta == float32(0.0):
                out = (alpha * acc[i, j], alpha * acc[i, j + 1],
                       alpha * acc[i, j + 2], alpha * acc[i, j + 3])
            else:
                c = load_c(C, off, row < m, col, n)
                out = (alpha * acc[i, j] + beta * c[0], alpha * acc[i, j + 1] + beta * c[1],
                       alpha * acc[i, j + 2] + beta * c[2], alpha * acc[i, j + 3] + beta * c[3])
            store_c(C, off, row < m, col, n, out)

    @_inline
    def epilogue_row(i, C, acc, alpha, beta, row0, col0, am, bn, m, n):
        epilogue_row_at(i, C, u64(0), acc, alpha, beta, row0, col0, am, bn, m, n)

    @_inline
    def sum_to_c(P, p_off, stride, S, C, off, row, col, alpha, beta, m, n):
        """One float4 of C at `off` (element row, col): the S partials at P[p_off], `stride`
        elements apart, added in order (_splitk_parts.sum_slices4), then C = alpha·sum + beta·C
        (beta == 0 never reads C)."""
        v = sum_slices4(P, p_off, stride, S, row < m, col, n)
        if beta == float32(0.0):
            out = (alpha * v[0], alpha * v[1], alpha * v[2], alpha * v[3])
        else:
            c = load_c(C, off, row < m, col, n)
            out = (alpha * v[0] + beta * c[0], alpha * v[1] + beta * c[1],
                   alpha * v[2] + beta * c[2], alpha * v[3] + beta * c[3])
        store_c(C, off, row < m, col, n, out)

    # The two sums of partials below are loops, not unrolled: acc is not read, and 16 inlined
    # sums more than tripled the kernel's code.
    @_inline
    def rows_to_c(P, mn, S, part, parts, C, alpha, beta, row0, col0, am, bn, m, n):
        """What a tile split inside the kernel writes for one part of its rows: for each of the
        thread's float4s of C in rows i ≡ part (mod parts) of its thread tile, the tile's S
        partials in P (M × N slices, mn elements apart) added in slice order, then alpha and
        beta (sum_to_c)."""
        i = u32(part)
        while i < THREAD_M:
            row = u32(row0 + am + u32(i >> u32(2)) * M_STEP + u32(i & u32(3)))
            for j4 in range(SUB_N):
                col = u32(col0 + bn + j4 * N_STEP)
                off = u64(row) * u64(n) + u64(col)
                sum_to_c(P, off, mn, S, C, off, row, col, alpha, beta, m, n)
            i = u32(i + parts)

    @_inline
    def parts_to_c(P, base, S, C, alpha, beta, row0, col0, am, bn, m, n):
        """rows_to_c for all rows, on partials stored as whole tiles (k9st): S tile_m × tile_n
        blocks of P from element `base` on, one after another (the layout `epilogue_at` writes
        with row0 = col0 = 0, m = tile_m and n = tile_n), added in order into C's tile at
        (row0, col0)."""
        for g in range(THREAD_M * SUB_N):
            i = g // SUB_N
            r = u32(am + i // 4 * M_STEP + i % 4)
            c = u32(bn + g % SUB_N * N_STEP)
            row = u32(row0 + r)
            col = u32(col0 + c)
            sum_to_c(P, base + u64(r) * u64(TN) + u64(c), u64(TM * TN), S, C,
                     u64(row) * u64(n) + u64(col), row, col, alpha, beta, m, n)

    @_inline
    def rows_of(part, parts):
        """The rows i ≡ part (mod parts) of the thread tile, as a bit mask (no division: a
        run-time divisor costs a call)."""
        mask = u32(0)
        i = u32(part)
        while i < THREAD_M:
            mask = u32(mask | u32(u32(1) << i))
            i = u32(i + parts)
        return mask

    @_inline
    def park_row(i, P, base, acc, rows, row0, col0, am, bn, m, n):
        """Row i of the thread tile's raw sum into the slice at `base` of P, if bit i of the
        mask `rows` is set; i is a constant, so acc stays in registers."""
        if u32(rows >> u32(i)) & u32(1):
            epilogue_row_at(i, P, base, acc, float32(1.0), float32(0.0), row0, col0, am, bn, m, n)

    # Unrolled here, not left to NVVM: with the checked 32-bit stores the row loop stays a
    # loop, acc[i, j] gets a run-time index and the 64 accumulators move to local memory.
    epilogue = unrolled(epilogue_row, THREAD_M)         # epilogue(0, C, acc, ...)
    epilogue_at = unrolled(epilogue_row_at, THREAD_M)   # epilogue_at(0, C, base, acc, ...)
    park = unrolled(park_row, THREAD_M)                 # park(0, P, base, acc, rows_of(...), ...)

    @_inline
    def double_buffered(A, B, As, Bs, ra, rb, af, bf, acc, a_r, a_c, b_r, b_c, a_off, b_off,
                        am, bn, row0, col0, m, n, k, k_lo, k_hi):
        """k8's pipeline over the K range [k_lo, k_hi) (multiples of TK, or k_hi == k) into
        acc: the next phase's loads in flight during this one's multiply, two buffers of
        As[2·TK, ...] and Bs[2·TK, ...], one barrier per phase. a_off, b_off: the loaders'
        offsets moved to k_lo. The loads are checked against k, not k_hi (a second bound
        spilled k8sk_a past the 128-register cap): the last phase's prefetch reads the next
        range's first tile, inside the matrix, into the buffer that is not read again (past
        k it loads zeros and touches no memory)."""
        load_tiles(A, B, ra, rb, a_off, b_off,
                   u32(row0 + a_r), u32(k_lo + a_c), u32(k_lo + b_r), u32(col0 + b_c), m, n, k)
        store_tiles(As, Bs, u32(0), ra, rb, a_r, a_c, b_r, b_c)
        cuda.syncthreads()
        kb = u32(0)                                  # first k row of the buffer to multiply
        ph = k_lo
        while ph < k_hi:
            nxt = u32(ph + TK)
            a_off += u64(TK)
            b_off += u64(TK) * u64(n)
            load_tiles(A, B, ra, rb, a_off, b_off,
                       u32(row0 + a_r), u32(nxt + a_c), u32(nxt + b_r), u32(col0 + b_c), m, n, k)
            compute(kb, As, Bs, am, bn, af, bf, acc)            # meanwhile: TK steps, unrolled
            kb = u32(TK - kb)
            store_tiles(As, Bs, kb, ra, rb, a_r, a_c, b_r, b_c)
            cuda.syncthreads()
            ph = nxt

    # ---- k9's pipeline: k8's, with the two buffers written out and, in the all-float4 kernel,
    # the loads unchecked inside K. The 32-bit forms keep their checks: a second, unchecked
    # copy of their loads made their loops longer, not shorter.
    UNCHECKED = a_vec and bc_vec
    load_a_in = vector_load_in(load4_readonly)
    load_b_in = vector_load_in(load4_readonly)           # columns clamped: always inside

    @_inline
    def phase(A, B, As, Bs, ra, rb, af, bf, acc, a_off, b_off, a_r, a_c, b_r, b_c,
              am, bn, col0, n, k, ph, kb_read, kb_write):
        """One phase of k9: the loads of phase ph + TK (in the all-float4 kernel unchecked
        when all of it lies inside K; otherwise checked against K alone), the multiply of
        buffer kb_read, the stores into buffer kb_write, one barrier. Returns the next phase
        and the moved offsets."""
        nxt = u32(ph + TK)
        a_off += u64(TK)
        b_off += u64(TK) * u64(n)
        if UNCHECKED and u32(nxt + TK) <= k:
            for s in range(A_LOADS):
                v = load_a_in(A, a_off + u64(s * A_ROW_STEP) * u64(k))
                for q in range(4):
                    ra[s, q] = v[q]
            for s in range(B_LOADS):
                v = load_b_in(B, b_off + u64(s * B_ROW_STEP) * u64(n))
                for q in range(4):
                    rb[s, q] = v[q]
        else:
            load_tiles(A, B, ra, rb, a_off, b_off, u32(0), u32(nxt + a_c), u32(nxt + b_r),
                       u32(col0 + b_c), u32(1), n, k)
        compute(kb_read, As, Bs, am, bn, af, bf, acc)
        store_tiles(As, Bs, kb_write, ra, rb, a_r, a_c, b_r, b_c)
        cuda.syncthreads()
        return nxt, a_off, b_off

    @_inline
    def unrolled_buffers(A, B, As, Bs, ra, rb, af, bf, acc, a_r, a_c, b_r, b_c, am, bn,
                         row0, col0, m, n, k, k_lo, k_hi):
        """k9's pipeline over the K range [k_lo, k_hi) (k9: all of K; k9sk: a slice, whose
        bounds are multiples of TK or k_hi == k) into acc. As k8's, with two phases per trip of
        the loop, so that each reads and writes a fixed buffer (every shared address is a base
        register plus a constant), and rows of A past M (columns of float4 B past N) clamped
        to the last one: their products land in accumulators the epilogue never stores, and
        every load but those of the last phase or two of K needs no check and no zeroing. As
        in double_buffered, loads are checked against k, not k_hi: a slice's last prefetch
        reads the next slice's first tile into the buffer that is not read again."""
        a_row = min(u32(row0 + a_r), u32(m - 1))
        b_col = u32(col0 + b_c)
        if bc_vec:
            b_col = min(b_col, u32(n - 4))
        a_off = u64(a_row) * u64(k) + u64(k_lo + a_c)
        b_off = u64(k_lo + b_r) * u64(n) + u64(b_col)
        # rows are clamped, so the row check is passed as row 0 of a 1-row matrix
        load_tiles(A, B, ra, rb, a_off, b_off, u32(0), u32(k_lo + a_c), u32(k_lo + b_r), u32(col0 + b_c),
                   u32(1), n, k)
        store_tiles(As, Bs, u32(0), ra, rb, a_r, a_c, b_r, b_c)
        cuda.syncthreads()
        ph = k_lo
        while ph < k_hi:
            ph, a_off, b_off = phase(A, B, As, Bs, ra, rb, af, bf, acc, a_off, b_off, a_r, a_c,
                                     b_r, b_c, am, bn, col0, n, k, ph, u32(0), u32(TK))
            if ph >= k_hi:
                break
            ph, a_off, b_off = phase(A, B, As, Bs, ra, rb, af, bf, acc, a_off, b_off, a_r, a_c,
                                     b_r, b_c, am, bn, col0, n, k, ph, u32(TK), u32(0))

    return SimpleNamespace(loaders=loaders, load_tiles=load_tiles,
                           store_tiles=store_tiles, compute=compute, thread_tile=thread_tile,
                           epilogue=epilogue, epilogue_at=epilogue_at, park=park, rows_of=rows_of,
                           rows_to_c=rows_to_c,
                           parts_to_c=parts_to_c,
                           double_buffered=double_buffered,
                           # one clamped A row per thread: more would each need their own offset
                           unrolled_buffers=unrolled_buffers if A_LOADS == 1 else None)


# ---- the ledgers ---------------------------------------------------------------------------

def warp_step(t: WarpTiling, g: Geometry, M, N, K, bx, by, warp, ph, buffers=1, load_kb=0, store_kb=0):
    """What warp `warp` of block (bx, by) touches in phase `ph` of the all-float4 kernel: its
    float4 loads of A and B by linear thread id, the shared stores that put them in the tiles
    (A transposed, at k rows store_kb..), and per k the LDS.128 of its thread tiles (k rows
    load_kb..). `buffers`: copies of each tile (Bs starts after all of As). Geometry `g` has
    no warp tile: the lane -> 4×4-piece mapping comes from `t`."""
    tids = [warp * WARP + lane for lane in range(WARP)]
    T, AS = g.tile_k, t.a_stride
    b_bs = buffers * T * AS * F32                             # bytes: Bs follows As
    acc = []
    for s in range(t.a_loads):
        idx = [tid + s * g.threads for tid in tids]
        r = [i // (T // 4) for i in idx]
        c = [i % (T // 4) * 4 for i in idx]
        acc.append(global_load("A", [(by * g.tile_m + rr) * K + ph * T + cc for rr, cc in zip(r, c)], 16))
        for q in range(4):                                    # transposed: 4 scalar stores
            acc.append(shared_access("As", [(store_kb + cc + q) * AS + rr for rr, cc in zip(r, c)],
                                     inner=False, op="store"))
    for s in range(t.b_loads):
        idx = [tid + s * g.threads for tid in tids]
        r = [i // (g.tile_n // 4) for i in idx]
        c = [i % (g.tile_n // 4) * 4 for i in idx]
        acc.append(global_load("B", [(ph * T + rr) * N + bx * g.tile_n + cc for rr, cc in zip(r, c)], 16))
        acc.append(shared_access("Bs", [(store_kb + rr) * g.tile_n + cc for rr, cc in zip(r, c)], 16,
                                 inner=False, op="store", base=b_bs))
    am = [warp // t.warps_n * t.warp_m + lane // t.lanes_n * 4 for lane in range(WARP)]
    bn = [warp % t.warps_n * t.warp_n + lane % t.lanes_n * 4 for lane in range(WARP)]
    for kk in range(load_kb, load_kb + T):
        for i in range(t.sub_m):                              # 8 distinct float4s, broadcast
            acc.append(shared_access("As", [kk * AS + a + i * 4 * t.lanes_m for a in am], 16))
        for j in range(t.sub_n):                              # 4 distinct float4s, broadcast
            acc.append(shared_access("Bs", [kk * g.tile_n + b + j * 4 * t.lanes_n for b in bn], 16,
                                     base=b_bs))
    return Step(T * g.thread_m * g.thread_n, tuple(acc), "one phase")
