"""read: diff native/twins/k5.cu native/twins/k6.cu · run: python bench.py --level k6

k6 — 128-bit memory instructions: float4 global loads, LDS.128 in the inner loop, float4 stores.

Same block (32×4 threads), same 32×128 tile of C and the same 8×4 register outer product per
thread as k5; what changes is the WIDTH of every memory instruction. Per step k, a thread of
k5 issues 12 32-bit shared loads for its 32 FMAs; k6 issues three 128-bit ones (two for its
8 values of A, one for its 4 of B) — the same 48 bytes in a quarter of the instructions. That
is the requests/cycles ledger: fewer load instructions competing with the FFMAs for issue
slots, and the LSU handles one wide request instead of four narrow ones.

    a_lo = load4_shared(As, (kk, i0))        # rows i0..i0+3 of A at k (a broadcast)
    a_hi = load4_shared(As, (kk, i0 + 4))    # rows i0+4..i0+7
    b = load4_shared(Bs, (kk, j0))           # columns j0..j0+3 of B

Three rearrangements make those wide loads possible (numba has no float4: they come from
numba_gemm.ptx.intrinsics, which bitcast the element pointer to <4 x float>*):

* The A tile is stored TRANSPOSED, As[k, m]: a thread's 8 rows of A at one k become 8
  consecutive floats, i.e. two 16-byte vectors (k5's As[m, k] had them 32 floats apart).
* A thread's 4 columns are consecutive (j0 = 4·tx; k5 had tx, tx+32, tx+64, tx+96), so its
  slice of B at one k is one vector, and so is each of its 8 row segments of C.
* Global loads are handed out by linear thread id, one float4 each: 2 per thread for the
  32×32 A tile, 8 for the 32×128 B tile. Who loads what no longer matches who computes what.

Edges (the seed's K6 drops the last columns when N % 4 != 0 and faults with "misaligned
address" when K or N is not a multiple of 4; ours is exact for every shape). A 128-bit global
access needs 16-byte-aligned rows (numba_gemm.sgemm._loaders.vector_operands), so one kernel
body (`make_kernel`, as the twin's one template) gives four specialisations:

* `k6`, everything aligned: a float4 is wholly inside the matrix or wholly outside, so border
  tiles cost one predicate per float4.
* `k6_bc` (K % 4 != 0: A in 32-bit, B and C 128-bit), `k6_a` (N % 4 != 0: A 128-bit), and
  `k6_edge` (nothing aligned, e.g. 4097×4097) move the unaligned operands 32 bits at a time,
  each float checked only where it can fall outside: a block-uniform branch per phase sends
  blocks whose 32×128 tile of C lies inside the matrix to unchecked loads (and stores of C)
  in every phase but the K tail; only the last block row and column and the last phase pay a
  compare per element (at 4097: 3.8% of the blocks and 1 phase in 129). Their 32-bit loads
  of B go 32 floats apart, so a warp's LDG reads one 128-byte line.

All of them keep the inner loop: the tiles in shared memory are always aligned, so the 32
steps are LDS.128 + FFMA with no branches.

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda

from ..ptx.intrinsics import SIMULATOR, load4_global, load4_shared, store4_shared, unrolled
from ._access import F32, Geometry, Step, global_load, lanes, shared_access
from ._common import SIGNATURE, SMEM_ALIGN, ceil_div, float32, grid_limit, launch, u32, u64
from ._loaders import (inline, plain, scalar_load, scalar_load_in, store_scalar, store_scalar_in, store_vector,
                       store_vector_in, vector_load, vector_load_in, vector_operands)

LEVEL = "k6"
PARENT = "k5"
TITLE = "float4: 128-bit loads and stores"
DELTA = (
    "k6 = k5 + 128-bit memory instructions: A tile stored transposed, float4 global loads by "
    "linear thread id, 3 LDS.128 instead of 12 LDS per 32 FMAs, float4 stores of C"
)
DTYPES = (np.float32,)
SASS_MUST_HAVE = ("LDG.E.128", "LDS.128", "STG.E.128", "FFMA")

TILE_M, TILE_N, TILE_K = 32, 128, 32
THREAD_M, THREAD_N = 8, 4
BLOCK = (TILE_N // THREAD_N, TILE_M // THREAD_M)      # (32, 4): 128 threads
THREADS = BLOCK[0] * BLOCK[1]
A_LOADS = TILE_M * TILE_K // 4 // THREADS             # float4s of A per thread per tile: 2
B_LOADS = TILE_K * TILE_N // 4 // THREADS             # float4s of B per thread per tile: 8
A_ROW_STEP = THREADS // (TILE_K // 4)                 # tile rows between a thread's A float4s: 16
B_ROW_STEP = THREADS // (TILE_N // 4)                 # ... and between its B float4s: 4
SPREAD = TILE_N // 4                                  # 32-bit B: a thread's four floats, 32 apart
GEOMETRY = Geometry(block=BLOCK, tile_m=TILE_M, tile_n=TILE_N, tile_k=TILE_K,
                    thread_m=THREAD_M, thread_n=THREAD_N)


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


# ---- Shared memory: A's four floats of one row go down a column of the transposed A tile
# (4 scalar STS: the multiply reads A along k, so As is stored k-major)

@inline
def _as_transposed(As, r, c, v):
    As[c + 0, r] = v[0]
    As[c + 1, r] = v[1]
    As[c + 2, r] = v[2]
    As[c + 3, r] = v[3]


# ---- Shared memory: the B tile's four floats of one row, as one STS.128 (float4 B) or as
# four STS SPREAD apart (32-bit B), each a warp's 32 consecutive floats: conflict-free.

@inline
def _bs_vector(Bs, r, c, v):
    store4_shared(Bs, (r, c), v)                 # one STS.128


@inline
def _bs_spread(Bs, r, c, v):
    Bs[r, c] = v[0]
    Bs[r, u32(c + SPREAD)] = v[1]
    Bs[r, u32(c + 2 * SPREAD)] = v[2]
    Bs[r, u32(c + 3 * SPREAD)] = v[3]


@inline
def _step(kk, As, Bs, i0, j0, acc):
    """One k of the 8×4 outer product: 3 LDS.128 feed 32 FFMA."""
    a_lo = load4_shared(As, (kk, i0))            # rows i0..i0+3 (a broadcast)
    a_hi = load4_shared(As, (kk, i0 + 4))        # rows i0+4..i0+7
    b = load4_shared(Bs, (kk, j0))               # columns j0..j0+3
    for j in range(THREAD_N):
        for r in range(4):
            acc[r, j] += a_lo[r] * b[j]
            acc[r + 4, j] += a_hi[r] * b[j]


# The seed's `#pragma unroll` over the 32 steps: NVVM alone unrolls this loop only ×2.
_all_steps = unrolled(_step, TILE_K)


def make_kernel(a_vec: bool, bc_vec: bool, split: bool):
    """The k6 kernel (a Python function, not yet jitted) with 128-bit global access to A
    (`a_vec`) and to B and C (`bc_vec`), 32-bit access to the others (B's four floats SPREAD
    apart). `split`: blocks whose C tile lies inside the matrix take unchecked loads in every
    phase but the K tail, and unchecked stores (a block-uniform branch); without it every
    access is checked (`inside` is the constant False, and the compiler drops the fast path)."""
    load_a = vector_load(load4_global) if a_vec else scalar_load(plain, 1)
    load_a_in = vector_load_in(load4_global) if a_vec else scalar_load_in(plain, 1)
    load_b = vector_load(load4_global) if bc_vec else scalar_load(plain, SPREAD)
    load_b_in = vector_load_in(load4_global) if bc_vec else scalar_load_in(plain, SPREAD)
    load_c = vector_load(load4_global) if bc_vec else scalar_load(plain, 1)
    load_c_in = vector_load_in(load4_global) if bc_vec else scalar_load_in(plain, 1)
    store_c = store_vector if bc_vec else store_scalar
    store_c_in = store_vector_in if bc_vec else store_scalar_in
    store_b = _bs_vector if bc_vec else _bs_spread
    SPLIT = bool(split)

    def k6(M, N, K, alpha, A, B, beta, C):
        As = cuda.shared.array((TILE_K, TILE_M), float32, alignment=SMEM_ALIGN)  # As[k, m]
        Bs = cuda.shared.array((TILE_K, TILE_N), float32, alignment=SMEM_ALIGN)  # Bs[k, n]

        tx = u32(cuda.threadIdx.x)
        ty = u32(cuda.threadIdx.y)
        tid = u32(ty * BLOCK[0] + tx)
        m, n, k = u32(M), u32(N), u32(K)
        row0 = u32(cuda.blockIdx.y * TILE_M)     # the block's first row of C
        col0 = u32(cuda.blockIdx.x * TILE_N)     # ... and first column
        i0 = u32(ty * THREAD_M)                  # my 8 rows in the tile: i0 .. i0+7
        j0 = u32(tx * THREAD_N)                  # my 4 columns: j0 .. j0+3, consecutive

        # Block-uniform: the block's C tile (so its rows of A, columns of B) lies inside.
        # (row0 < m < 2**31, so row0 + 32 cannot wrap in 32 bits.)
        inside = SPLIT & (u32(row0 + TILE_M) <= m) & (u32(col0 + TILE_N) <= n)
        k_in = u32(k - k % TILE_K)               # phases before k_in have all 32 k inside

        # Loader coordinates by linear thread id: A float4 number tid + s*128 sits at tile
        # row a_r + 16s, columns a_c..a_c+3; B float4 number tid + s*128 at row ty + 4s,
        # columns j0..j0+3 (so a warp reads 512 contiguous bytes of one B row), or, 32-bit,
        # columns tx + 32i.
        a_r = u32(tid // (TILE_K // 4))
        a_c = u32(tid % (TILE_K // 4) * 4)

        acc = cuda.local.array((THREAD_M, THREAD_N), float32)
        for r in range(THREAD_M):
            for j in range(THREAD_N):
                acc[r, j] = float32(0.0)

        # Running 64-bit offsets of this thread's first float4 of A and of B: a phase moves
        # them 32 columns right in A and 32 rows down in B (cheaper than recomputing
        # row * ncols + col for each of the 10 loads).
        a_off = u64(row0 + a_r) * u64(k) + u64(a_c)
        b_c = j0 if bc_vec else tx               # my first column of the B tile
        b_off = u64(ty) * u64(n) + u64(col0 + b_c)
        k0 = u32(0)                              # first k of the phase
        while k0 < k:
            if inside & (k0 < k_in):
                # ---- interior phase: no bounds checks (every block but the border ones,
                # every phase but the K tail)
                for s in range(A_LOADS):
                    r = u32(a_r + s * A_ROW_STEP)
                    v = load_a_in(A, a_off + u64(s * A_ROW_STEP) * u64(k))
                    _as_transposed(As, r, a_c, v)
                for s in range(B_LOADS):
                    r = u32(ty + s * B_ROW_STEP)
                    v = load_b_in(B, b_off + u64(s * B_ROW_STEP) * u64(n))
                    store_b(Bs, r, b_c, v)
            else:
                # ---- A: 2 float4s (or 2 × 4 floats), stored transposed (4 scalar STS each).
                for s in range(A_LOADS):
                    r = u32(a_r + s * A_ROW_STEP)
                    row = u32(row0 + r)
                    col = u32(k0 + a_c)
                    v = load_a(A, a_off + u64(s * A_ROW_STEP) * u64(k), row < m, col, k)
                    _as_transposed(As, r, a_c, v)
                # ---- B: 8 float4s (or 8 × 4 floats SPREAD apart), stored straight.
                for s in range(B_LOADS):
                    r = u32(ty + s * B_ROW_STEP)
                    brow = u32(k0 + r)
                    col = u32(col0 + b_c)
                    v = load_b(B, b_off + u64(s * B_ROW_STEP) * u64(n), brow < k, col, n)
                    store_b(Bs, r, b_c, v)
            cuda.syncthreads()

            # ---- 32 steps of an 8×4 outer product: 3 LDS.128 feed 32 FFMA.
            _all_steps(0, As, Bs, i0, j0, acc)      # kk = 0..31, unrolled
            cuda.syncthreads()
            k0 = u32(k0 + TILE_K)
            a_off += u64(TILE_K)
            b_off += u64(TILE_K) * u64(n)

        # ---- C: one float4 per row; beta == 0 never reads C (BLAS: NaN in C must not leak).
        col = u32(col0 + j0)
        for r in range(THREAD_M):
            row = u32(row0 + i0 + r)
            off = u64(row) * u64(n) + u64(col)
            if beta == float32(0.0):
                out = (alpha * acc[r, 0], alpha * acc[r, 1], alpha * acc[r, 2], alpha * acc[r, 3])
            elif inside:
                c = load_c_in(C, off)
                out = (
                    alpha * acc[r, 0] + beta * c[0],
                    alpha * acc[r, 1] + beta * c[1],
                    alpha * acc[r, 2] + beta * c[2],
                    alpha * acc[r, 3] + beta * c[3],
                )
            else:
                c = load_c(C, off, row < m, col, n)
                out = (
                    alpha * acc[r, 0] + beta * c[0],
                    alpha * acc[r, 1] + beta * c[1],
                    alpha * acc[r, 2] + beta * c[2],
                    alpha * acc[r, 3] + beta * c[3],
                )
            if inside:
                store_c_in(C, off, out)
            else:
                store_c(C, off, row < m, col, n, out)

    return k6


# The split kernels hold more state across the phase loop; launch bounds (128 threads, 7
# blocks per SM, what the all-float4 kernel's registers allow) keep ptxas from taking more
# registers than that (uncapped, an earlier form fitted one block less per SM; the census:
# python bench.py --level k6 --sass). The simulator takes no bounds.
_bounded = cuda.jit if SIMULATOR else cuda.jit(launch_bounds=(THREADS, 7))

# (rows of A 16-byte aligned, rows of B and C aligned) -> (name, kernel). All aligned: the
# level as measured at 4096, every float4 wholly inside the matrix or wholly outside, so a
# border tile costs one predicate per float4 and needs no interior split.
kernel = cuda.jit(make_kernel(True, True, split=False))
SPECIALISATIONS = {
    (True, True): ("k6", kernel),
    (False, False): ("k6_edge", _bounded(make_kernel(False, False, split=True))),
    (False, True): ("k6_bc", _bounded(make_kernel(False, True, split=True))),    # K % 4 != 0
    (True, False): ("k6_a", _bounded(make_kernel(True, False, split=True))),     # N % 4 != 0
}

# Every specialisation, for the SASS census.
KERNELS = {name: (k, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY) -> Step:
    """Phase `ph` of warp `warp` of block (bx, by), vector kernel: float4 tile loads by linear
    thread id (A stored transposed), then per k two 128-bit A broadcasts and one B load."""
    ls = lanes(g, warp)
    T = g.tile_k
    nt = g.threads
    tids = [ty * g.block[0] + tx for tx, ty in ls]
    a_bs = 0                                  # As[k, m]: the A tile stored transposed
    b_bs = g.tile_k * g.tile_m * F32          # Bs[k, n] follows it (bytes)
    acc = []
    for s in range(g.tile_m * g.tile_k // 4 // nt):          # float4s of A per thread
        idx4 = [t + s * nt for t in tids]
        r = [i // (T // 4) for i in idx4]
        c = [i % (T // 4) * 4 for i in idx4]
        acc.append(global_load("A", [(by * g.tile_m + rr) * K + ph * T + cc for rr, cc in zip(r, c)], 16))
        for q in range(4):                                    # transposed: 4 scalar stores
            acc.append(shared_access("As", [(cc + q) * g.tile_m + rr for rr, cc in zip(r, c)],
                                     inner=False, op="store", base=a_bs))
    for s in range(g.tile_k * g.tile_n // 4 // nt):          # float4s of B per thread
        idx4 = [t + s * nt for t in tids]
        r = [i // (g.tile_n // 4) for i in idx4]
        c = [i % (g.tile_n // 4) * 4 for i in idx4]
        acc.append(global_load("B", [(ph * T + rr) * N + bx * g.tile_n + cc for rr, cc in zip(r, c)], 16))
        acc.append(shared_access("Bs", [rr * g.tile_n + cc for rr, cc in zip(r, c)], 16,
                                 inner=False, op="store", base=b_bs))
    for kk in range(T):
        for h in range(g.thread_m // 4):                      # rows i0.., i0+4..: broadcast
            acc.append(shared_access("As", [kk * g.tile_m + ty * g.thread_m + 4 * h for tx, ty in ls], 16,
                                     base=a_bs))
        for h in range(g.thread_n // 4):                      # columns j0..j0+3
            acc.append(shared_access("Bs", [kk * g.tile_n + tx * g.thread_n + 4 * h for tx, ty in ls], 16,
                                     base=b_bs))
    return Step(T * g.thread_m * g.thread_n, tuple(acc), "one phase")


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    k6 = SPECIALISATIONS[vector_operands(A, B, C)][1]
    launch(k6, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
