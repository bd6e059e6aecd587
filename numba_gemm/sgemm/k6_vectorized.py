"""k6 — 128-bit memory instructions: float4 global loads, LDS.128 in the inner loop, float4 stores.

Same block (32×4 threads), same 32×128 tile of C and the same 8×4 register outer product per
thread as k5; what changes is the WIDTH of every memory instruction. Per step k, a thread of
k5 issues 12 32-bit shared loads for its 32 FMAs; k6 issues three 128-bit ones (two for its
8 values of A, one for its 4 of B) — the same 48 bytes in a quarter of the instructions. That
is the requests/cycles ledger: fewer load instructions competing with the FFMAs for issue
slots, and the LSU handles one wide request instead of four narrow ones.

Three rearrangements make those wide loads possible (numba has no float4: they come from
numba_gemm.intrinsics, which bitcast the element pointer to <4 x float>*):

* The A tile is stored TRANSPOSED, As[k, m]: a thread's 8 rows of A at one k become 8
  consecutive floats, i.e. two 16-byte vectors (k5's Mds[m][k] had them 32 floats apart).
* A thread's 4 columns are consecutive (j0 = 4·tx; k5 had tx, tx+32, tx+64, tx+96), so its
  slice of B at one k is one vector, and so is each of its 8 row segments of C.
* Global loads are handed out by linear thread id, one float4 each: 2 per thread for the
  32×32 A tile, 8 for the 32×128 B tile. Who loads what no longer matches who computes what.

Exact for every shape, unlike the seed's K6 (which drops the last columns when N % 4 != 0
and faults with "misaligned address" when K or N is not a multiple of 4). A 128-bit global
access needs a 16-byte-aligned address, i.e. rows of A need K % 4 == 0, rows of B and C
need N % 4 == 0 (and aligned base pointers), so the host picks one of four specialisations
per call, vectorising each operand whose rows allow it (`vector_operands`):

* `k6`: all 128-bit; a float4 is wholly inside the matrix or wholly outside, so border
  tiles cost one predicate per float4.
* `k6_bc` (K % 4 != 0: A in 32-bit, B and C 128-bit), `k6_a` (N % 4 != 0), and `k6_edge`
  (nothing aligned, e.g. 4097×4097): a 32-bit access per float, each checked only where it
  can fall outside. A block-uniform branch per phase sends blocks whose 32×128 tile of C lies
  inside the matrix to unchecked loads (and stores of C) in every phase but the K tail; only
  the last block row and column and the last phase pay a compare per element. At 4097 that
  is 3.8% of the blocks and 1 phase in 129. Their 32-bit loads of B go 32 floats apart, so a
  warp's LDG reads one 128-byte line: four consecutive floats per thread would touch four
  lines per instruction, four times over (4× the L1 wavefronts of the float4 form).

All keep the hot part identical: the tiles in shared memory are always aligned, so the
32-step inner loop is LDS.128 + FFMA with no branches.
"""
import numpy as np
from numba import cuda

from ..intrinsics import SIMULATOR, load4_global, load4_shared, store4_global, store4_shared, unrolled
from ._common import SIGNATURE, SMEM_ALIGN, ceil_div, float32, grid_limit, launch, u32, u64

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


def grid(M: int, N: int) -> tuple[int, int]:
    return (ceil_div(N, TILE_N), ceil_div(M, TILE_M))


# ---- Global memory, 4 consecutive floats X[off : off+4] of one matrix row at a time. They
# are columns col..col+3 of a row with `ncols` columns; `row_ok` says the row exists.
# Checked forms (border tiles, K tail): outside the matrix loads give 0 and stores skip.
# Unchecked forms (tiles wholly inside): no predicate at all.

@cuda.jit(device=True, inline="always")
def _load4_vector(X, off, row_ok, col, ncols):
    # ncols % 4 == 0 here, so col < ncols means all four are inside
    if row_ok & (col < ncols):
        return load4_global(X, off)
    return float32(0.0), float32(0.0), float32(0.0), float32(0.0)


@cuda.jit(device=True, inline="always")
def _load4_scalar(X, off, row_ok, col, ncols):
    # u32(col + i): a plain `col + 1` is int64 in Numba, i.e. 64-bit compares; `&` (not
    # `and`) gives predicated loads rather than branches
    zero = float32(0.0)
    x0 = X[off] if row_ok & (col < ncols) else zero
    x1 = X[off + u64(1)] if row_ok & (u32(col + 1) < ncols) else zero
    x2 = X[off + u64(2)] if row_ok & (u32(col + 2) < ncols) else zero
    x3 = X[off + u64(3)] if row_ok & (u32(col + 3) < ncols) else zero
    return x0, x1, x2, x3


@cuda.jit(device=True, inline="always")
def _load4_vector_in(X, off):
    return load4_global(X, off)


@cuda.jit(device=True, inline="always")
def _load4_scalar_in(X, off):
    # four LDG.E off one address register (+0x4, +0x8, +0xc): no compare, no predicate
    return X[off], X[off + u64(1)], X[off + u64(2)], X[off + u64(3)]


# 32-bit B loads go 32 floats apart, not 4 consecutive: then each LDG.E of a warp reads one
# 128-byte line (32 lanes, consecutive columns) instead of touching four lines with a 16-byte
# stride, four times over. L1 wavefronts per warp per phase: 32 instead of 128.

@cuda.jit(device=True, inline="always")
def _load4_strided(X, off, row_ok, col, ncols):
    zero = float32(0.0)
    x0 = X[off] if row_ok & (col < ncols) else zero
    x1 = X[off + u64(32)] if row_ok & (u32(col + 32) < ncols) else zero
    x2 = X[off + u64(64)] if row_ok & (u32(col + 64) < ncols) else zero
    x3 = X[off + u64(96)] if row_ok & (u32(col + 96) < ncols) else zero
    return x0, x1, x2, x3


@cuda.jit(device=True, inline="always")
def _load4_strided_in(X, off):
    return X[off], X[off + u64(32)], X[off + u64(64)], X[off + u64(96)]


@cuda.jit(device=True, inline="always")
def _store4_vector(X, off, row_ok, col, ncols, v):
    if row_ok & (col < ncols):
        store4_global(X, off, v)


@cuda.jit(device=True, inline="always")
def _store4_scalar(X, off, row_ok, col, ncols, v):
    if row_ok & (col < ncols):
        X[off] = v[0]
    if row_ok & (u32(col + 1) < ncols):
        X[off + u64(1)] = v[1]
    if row_ok & (u32(col + 2) < ncols):
        X[off + u64(2)] = v[2]
    if row_ok & (u32(col + 3) < ncols):
        X[off + u64(3)] = v[3]


@cuda.jit(device=True, inline="always")
def _store4_vector_in(X, off, v):
    store4_global(X, off, v)


@cuda.jit(device=True, inline="always")
def _store4_scalar_in(X, off, v):
    X[off] = v[0]
    X[off + u64(1)] = v[1]
    X[off + u64(2)] = v[2]
    X[off + u64(3)] = v[3]


@cuda.jit(device=True, inline="always")
def _store4_bs_vector(Bs, r, c, v):
    store4_shared(Bs, (r, c), v)                 # one STS.128


@cuda.jit(device=True, inline="always")
def _store4_bs_strided(Bs, r, c, v):
    # four STS, each a warp's 32 consecutive floats: conflict-free
    Bs[r, c] = v[0]
    Bs[r, u32(c + 32)] = v[1]
    Bs[r, u32(c + 64)] = v[2]
    Bs[r, u32(c + 96)] = v[3]


@cuda.jit(device=True, inline="always")
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


def _make_kernel(a_vec: bool, bc_vec: bool, split: bool):
    """The k6 kernel with 128-bit global access to A (`a_vec`) and to B and C (`bc_vec`) or
    32-bit access where a row may start off a 16-byte boundary. With `split`, phases in which
    a block's tiles lie wholly inside A and B, and the C stores of such a block, take
    unchecked loads and stores (a block-uniform branch); the rest take checked ones."""
    load_a = _load4_vector if a_vec else _load4_scalar
    load_a_in = _load4_vector_in if a_vec else _load4_scalar_in
    load_b = _load4_vector if bc_vec else _load4_strided
    load_b_in = _load4_vector_in if bc_vec else _load4_strided_in
    load_c = _load4_vector if bc_vec else _load4_scalar
    load_c_in = _load4_vector_in if bc_vec else _load4_scalar_in
    store_c = _store4_vector if bc_vec else _store4_scalar
    store_c_in = _store4_vector_in if bc_vec else _store4_scalar_in
    _store_b = _store4_bs_vector if bc_vec else _store4_bs_strided

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
        inside = split & (u32(row0 + TILE_M) <= m) & (u32(col0 + TILE_N) <= n)
        k_in = u32(k - k % TILE_K)               # phases before k_in have all 32 k inside

        # Loader coordinates by linear thread id: A float4 number tid + s*128 sits at tile
        # row a_r + 16s, columns a_c..a_c+3; B float4 number tid + s*128 at row ty + 4s,
        # columns j0..j0+3 (so a warp reads 512 contiguous bytes of one B row).
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
        ph = u32(0)                              # first k of the phase
        while ph < k:
            if inside & (ph < k_in):
                # ---- interior phase: no bounds checks (every block but the border ones,
                # every phase but the K tail)
                for s in range(A_LOADS):
                    r = u32(a_r + s * A_ROW_STEP)
                    v = load_a_in(A, a_off + u64(s * A_ROW_STEP) * u64(k))
                    As[a_c + 0, r] = v[0]
                    As[a_c + 1, r] = v[1]
                    As[a_c + 2, r] = v[2]
                    As[a_c + 3, r] = v[3]
                for s in range(B_LOADS):
                    r = u32(ty + s * B_ROW_STEP)
                    v = load_b_in(B, b_off + u64(s * B_ROW_STEP) * u64(n))
                    _store_b(Bs, r, b_c, v)
            else:
                # ---- A: 2 float4s, stored transposed (4 scalar STS each).
                for s in range(A_LOADS):
                    r = u32(a_r + s * A_ROW_STEP)
                    row = u32(row0 + r)
                    col = u32(ph + a_c)
                    v = load_a(A, a_off + u64(s * A_ROW_STEP) * u64(k), row < m, col, k)
                    As[a_c + 0, r] = v[0]
                    As[a_c + 1, r] = v[1]
                    As[a_c + 2, r] = v[2]
                    As[a_c + 3, r] = v[3]
                # ---- B: 8 float4s (or 8 × 4 floats 32 apart), stored straight.
                for s in range(B_LOADS):
                    r = u32(ty + s * B_ROW_STEP)
                    brow = u32(ph + r)
                    col = u32(col0 + b_c)
                    v = load_b(B, b_off + u64(s * B_ROW_STEP) * u64(n), brow < k, col, n)
                    _store_b(Bs, r, b_c, v)
            cuda.syncthreads()

            # ---- 32 steps of an 8×4 outer product: 3 LDS.128 feed 32 FFMA.
            _all_steps(0, As, Bs, i0, j0, acc)          # kk = 0..31, unrolled
            cuda.syncthreads()
            ph = u32(ph + TILE_K)
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
# blocks per SM, as the vector kernel's 69 registers allow) keep ptxas at <= 72 registers
# (an earlier form reached 78-80: 6 blocks). The simulator takes no bounds.
_jit_split = cuda.jit if SIMULATOR else cuda.jit(launch_bounds=(THREADS, 7))

# (A 128-bit, B and C 128-bit) -> kernel. The all-vector kernel keeps one predicate per
# float4 and no interior/border split: the form measured at 4096.
SPECIALISATIONS = {
    (True, True): ("k6", cuda.jit(_make_kernel(True, True, split=False))),
    (False, False): ("k6_edge", _jit_split(_make_kernel(False, False, split=True))),
    (False, True): ("k6_bc", _jit_split(_make_kernel(False, True, split=True))),   # K % 4 != 0
    (True, False): ("k6_a", _jit_split(_make_kernel(True, False, split=True))),    # N % 4 != 0
}
kernel = SPECIALISATIONS[True, True][1]
kernel_edge = SPECIALISATIONS[False, False][1]

# Every specialisation, for the SASS census.
KERNELS = {name: (k.py_func, SIGNATURE) for name, k in SPECIALISATIONS.values()}


def _address(x) -> int:
    # the simulator's device arrays are NumPy arrays underneath
    iface = getattr(x, "__cuda_array_interface__", None) or x.__array_interface__
    return iface["data"][0]


def _aligned(x) -> bool:
    return _address(x) % 16 == 0


def vector_ok(A, B, C) -> bool:
    """True when every row of A, B and C starts on a 16-byte boundary: the vector kernel may run."""
    return all(vector_operands(A, B, C))


def vector_operands(A, B, C) -> tuple[bool, bool]:
    """(rows of A are 16-byte aligned, rows of B and of C are): which operands may move as float4."""
    K, N = A.shape[1], B.shape[1]
    return K % 4 == 0 and _aligned(A), N % 4 == 0 and _aligned(B) and _aligned(C)


def unsupported(M: int, N: int, K: int):
    return grid_limit(grid(M, N))


def run(A, B, C, alpha, beta, stream=None):
    k6 = SPECIALISATIONS[vector_operands(A, B, C)][1]
    launch(k6, grid(A.shape[0], B.shape[1]), BLOCK, A, B, C, alpha, beta, stream)
