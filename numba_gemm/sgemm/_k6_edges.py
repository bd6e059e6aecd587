"""k6 for rows that are not 16-byte aligned: three specialisations and the host's choice.

k6's `kernel` moves A, B and C as float4s, which needs every row to start on a 16-byte
boundary (K % 4 == 0 for A, N % 4 == 0 for B and C, aligned base pointers). The host picks,
per call, which operands may move as float4 (`vector_operands`); the others move 32 bits at a
time, each float checked only where it can fall outside:

* `k6_bc` (K % 4 != 0: A in 32-bit, B and C 128-bit), `k6_a` (N % 4 != 0: A 128-bit), and
  `k6_edge` (nothing aligned, e.g. 4097×4097).
* A block-uniform branch per phase sends blocks whose 32×128 tile of C lies inside the matrix
  to unchecked loads (and stores of C) in every phase but the K tail; only the last block row
  and column and the last phase pay a compare per element. At 4097 that is 3.8% of the
  blocks and 1 phase in 129.
* Their 32-bit loads of B go 32 floats apart, so a warp's LDG reads one 128-byte line: four
  consecutive floats per thread would touch four lines per instruction, four times over (4×
  the L1 wavefronts of the float4 form).

The tiles in shared memory are always aligned, so all of them keep k6's inner loop (its
`_all_steps`, LDS.128 + FFMA) and its tile constants.
"""
from numba import cuda

from ..intrinsics import SIMULATOR, load4_global, store4_global, store4_shared
from ._common import SMEM_ALIGN, float32, u32, u64

# ---- Global memory, 4 floats of one matrix row at a time: columns col..col+3 (or col,
# col+32, col+64, col+96 for the strided form) of a row with `ncols` columns; `row_ok` says
# the row exists. Checked forms (border tiles, K tail): outside the matrix loads give 0 and
# stores skip. Unchecked forms (tiles wholly inside): no predicate at all.


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
def store4_scalar(X, off, row_ok, col, ncols, v):
    """The float4 v into X[off:off+4] one float at a time, each column checked (k6-k8's C edge)."""
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


def _make_kernel(k6, a_vec: bool, bc_vec: bool):
    """k6 (the level module `k6`: its tile constants, float4 helpers and inner loop) with
    128-bit global access to A (`a_vec`) and to B and C (`bc_vec`), 32-bit access to the
    others. Phases in which a block's tiles lie wholly inside A and B, and the C stores of
    such a block, take unchecked loads and stores (a block-uniform branch); the rest take
    checked ones."""
    TILE_M, TILE_N, TILE_K = k6.TILE_M, k6.TILE_N, k6.TILE_K
    THREAD_M, THREAD_N, BLOCK = k6.THREAD_M, k6.THREAD_N, k6.BLOCK
    A_LOADS, B_LOADS, A_ROW_STEP, B_ROW_STEP = k6.A_LOADS, k6.B_LOADS, k6.A_ROW_STEP, k6.B_ROW_STEP
    all_steps = k6._all_steps

    load_a = k6._load4 if a_vec else _load4_scalar
    load_a_in = _load4_vector_in if a_vec else _load4_scalar_in
    load_b = k6._load4 if bc_vec else _load4_strided
    load_b_in = _load4_vector_in if bc_vec else _load4_strided_in
    load_c = k6._load4 if bc_vec else _load4_scalar
    load_c_in = _load4_vector_in if bc_vec else _load4_scalar_in
    store_c = k6._store4 if bc_vec else store4_scalar
    store_c_in = _store4_vector_in if bc_vec else _store4_scalar_in
    store_b = _store4_bs_vector if bc_vec else _store4_bs_strided

    def k6_split(M, N, K, alpha, A, B, beta, C):
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
        inside = (u32(row0 + TILE_M) <= m) & (u32(col0 + TILE_N) <= n)
        k_in = u32(k - k % TILE_K)               # phases before k_in have all 32 k inside

        # Loader coordinates by linear thread id, as in k6's kernel.
        a_r = u32(tid // (TILE_K // 4))
        a_c = u32(tid % (TILE_K // 4) * 4)

        acc = cuda.local.array((THREAD_M, THREAD_N), float32)
        for r in range(THREAD_M):
            for j in range(THREAD_N):
                acc[r, j] = float32(0.0)

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
                    As[a_c + 0, r] = v[0]
                    As[a_c + 1, r] = v[1]
                    As[a_c + 2, r] = v[2]
                    As[a_c + 3, r] = v[3]
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
                    As[a_c + 0, r] = v[0]
                    As[a_c + 1, r] = v[1]
                    As[a_c + 2, r] = v[2]
                    As[a_c + 3, r] = v[3]
                # ---- B: 8 float4s (or 8 × 4 floats 32 apart), stored straight.
                for s in range(B_LOADS):
                    r = u32(ty + s * B_ROW_STEP)
                    brow = u32(k0 + r)
                    col = u32(col0 + b_c)
                    v = load_b(B, b_off + u64(s * B_ROW_STEP) * u64(n), brow < k, col, n)
                    store_b(Bs, r, b_c, v)
            cuda.syncthreads()

            all_steps(0, As, Bs, i0, j0, acc)   # k6's 32 steps, unrolled
            cuda.syncthreads()
            k0 = u32(k0 + TILE_K)
            a_off += u64(TILE_K)
            b_off += u64(TILE_K) * u64(n)

        # ---- C: beta == 0 never reads C (BLAS: NaN in C must not leak).
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

    return k6_split


def specialisations() -> dict:
    """(rows of A 16-byte aligned, rows of B and C aligned) -> (name, kernel), for the three
    cases that are not all aligned. Called by k6_vectorized at import, once the names
    _make_kernel reads from it are defined."""
    from . import k6_vectorized as k6

    # The split kernels hold more state across the phase loop; launch bounds (128 threads,
    # 7 blocks per SM, as the vector kernel's 69 registers allow) keep ptxas at <= 72
    # registers (an earlier form reached 78-80: 6 blocks). The simulator takes no bounds.
    jit = cuda.jit if SIMULATOR else cuda.jit(launch_bounds=(k6.THREADS, 7))
    return {
        (False, False): ("k6_edge", jit(_make_kernel(k6, False, False))),
        (False, True): ("k6_bc", jit(_make_kernel(k6, False, True))),    # K % 4 != 0
        (True, False): ("k6_a", jit(_make_kernel(k6, True, False))),     # N % 4 != 0
    }


def _address(x) -> int:
    # the simulator's device arrays are NumPy arrays underneath
    iface = getattr(x, "__cuda_array_interface__", None) or x.__array_interface__
    return iface["data"][0]


def _aligned(x) -> bool:
    return _address(x) % 16 == 0


def vector_operands(A, B, C) -> tuple[bool, bool]:
    """(rows of A are 16-byte aligned, rows of B and of C are): which operands may move as float4."""
    K, N = A.shape[1], B.shape[1]
    return K % 4 == 0 and _aligned(A), N % 4 == 0 and _aligned(B) and _aligned(C)
