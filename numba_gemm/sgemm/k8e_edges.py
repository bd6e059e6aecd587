"""read: diff native/twins/k8p.cu native/twins/k8e.cu · run: python bench.py --level k8e

k8e — k8p without its last wave: a thin border row and column as matrix-vector products.

At 4097³ k8p tiles the padded 4097 × 4100 output with k8's 128 × 128 tiles: 33 × 33 = 1089 of
them, 4.1 waves of the 264 CTAs an H200 holds (2 per SM), where 4096³ is 1024 tiles, 3.9 waves.
The fifth wave computes one row and four columns of C at the price of a whole one: k8 takes
3.760 ms at 4097³ against 3.080 ms at 4096 × 4096 × 4097 (docs/data/h200_k8_interior.json), and
k8p, its loads aligned, still 3.468 ms, 0.90× cuBLAS's 3.123. A row of C is a row of A times B,
a column of C is A times a column of B: matrix-vector products that read B and A once, about
67 MB each at 4097³, some 16 µs each at 4.1 TB/s. So k8e does k8p's copies, then:

    interior   k9's all-float4 kernel (k8's tile and loop, its two buffers written out) over
               the padded buffers on the grid of whole tiles only (rows [0, M'), columns
               [0, N')): the border tiles are never launched
    bottom     rows [M', M), every padded column, in one pass on views of the copies:
               k6gv for 1 to 8 rows, k6gv16 for 9 to 16 (B′ read once either way)
    right      rows [0, M'), columns [N', pn): `edge_columns`, a CTA per ROWS rows of A′
               whose 8 warps split K in float4s, B′'s one or two float4s of each k row
               beside them, the sums added in a fixed order through shared memory (no
               atomics); K split over warps so that the strip fills the GPU (777 rows:
               384 CTAs, where a warp per 2 rows made 48)
    C          = the first N columns of C′, as k8p

Where B's and C's rows are whole float4s already (N % 4 == 0: only K is ragged, as at
777 × 5000 × 3001), their copies buy nothing but B's pad rows, and cost a read and write of B
and of C (43 and 12 µs there under ncu, docs/data/h200_profile_k8e_rows_copy4.txt). So `direct`
shapes copy only A, into rows of K4 = K − K mod 4 (its last 1 to 3 columns left out); the
interior and strips run on A′, B's first K4 rows and C in place; and `k_tail` adds
alpha·A[:, K4:]·B[K4:, :], the k's left, into C, one read and write of C. Base addresses of B
or C that are not 16-byte aligned take the copies.

with M' = M − M mod 128 where 1 ≤ M mod 128 ≤ EDGE (16 rows), and N' = N − N mod 128 where the
padded columns past it, pn − N', are 1 or 2 float4s (EDGE_COLS = 8 columns). The pad columns of
B′ are zeros, so computing C′'s pad is harmless: it is never copied out. k9's kernel takes its tile
from blockIdx (row0 = blockIdx.y·128, col0 = blockIdx.x·128), so the smaller grid is the
interior. Every full tile keeps the float4 loads; only the border is computed another way. The
interior was k8p's kernel (k8's) until k9 was measured faster on whole tiles: k8e launches only
whole tiles, so k9's unchecked loads serve every one of them.
The bottom strip is one pass, which reads B′ once (about 16 µs at 4097³), where the row of
tiles it replaces may cost a whole wave (777 × 5000: 7 × 39 = 273 tiles, two waves of 264;
6 × 39 = 234, one). Its 9 to 16 rows took two k6gv passes, B′ read twice, until k6gv16 (the
profile at 777 × 5000 × 3001, 9 rows: 20.2 and 18.9 µs, docs/RESULTS.md).

Which ledger moved: waves. The bytes ledger is k8p's, and honestly so at the per-tile model's
grain: the interior reads A′ and B′ once per column and row of tiles it launches (32 each at
4097³), and the strips read B′ (bottom) and A′ (right) once more: the 33 of k8p's 33 × 33 tiles.
What the model does not see, for k8e as for every level, is the strips' L2 traffic (the bottom
strip's rows of A′ per column block, the right strip's columns of B′ per CTA).

Shapes with no thin border (k8p's 33rd tile row or column is not nearly empty) are k8p's, and
shapes whose rows are whole float4s k8's: k8e refuses both, naming the level to use.

Measured: docs/LADDER.md.
"""
import functools

import numpy as np
from numba import cuda

from ..ptx.intrinsics import load4_global
from ..runtime import workspace
from . import k6gv16_rows as k6gv16
from . import k6gv_skinny as k6gv
from . import k8_double_buffer as k8
from . import k8p_pitched as k8p
from . import k9_unrolled as k9
from ._common import SIGNATURE, SMEM_ALIGN, float32, grid_limit, int32, launch, u32, u64
from ._loaders import vector_operands
# k8p's buffers and copy grid, re-exported for the twin (k8e's own `copies` plan is below)
from .k8p_pitched import PITCH, buffers, copy_config, pitch  # noqa: F401

LEVEL = "k8e"
PARENT = "k8p"
TITLE = "k8p with its thin border row and column as matrix-vector products"
DELTA = ("k8e = k8p + no tiles for a border of 1 to 16 rows or 1 to 8 columns: k9's kernel on the whole "
         "tiles only, the bottom rows by k6gv or k6gv16 and the right columns by a kernel whose warps split K")
DTYPES = (np.float32,)
SASS_MUST_HAVE = k9.SASS_MUST_HAVE             # k9's aligned kernel, and float4 loads of A′ at the edge

TILING, GEOMETRY, BLOCK = k8.TILING, k8.GEOMETRY, k8.BLOCK
TILE_M, TILE_N, TILE_K = k8.TILE_M, k8.TILE_N, k8.TILE_K
THREAD_M, THREAD_N = k8.THREAD_M, k8.THREAD_N
THREADS = k8.THREADS
PHASES_PER_TRIP = k9.PHASES_PER_TRIP           # the interior is k9's loop: two phases a trip
EDGE = k6gv16.MAX_M                            # the thickest bottom border, one pass of k6gv16: 16
ROWS = 2                                       # rows of A′ per CTA in edge_columns (its warps split K)
EDGE_WARPS = 8
EDGE_BLOCK = (32, EDGE_WARPS)
EDGE_COLS = 8                                  # the right strip: at most two float4s of B′
EDGE_OUT = ROWS * EDGE_COLS                    # outputs per CTA: one lane of warp 0 adds each
TAIL = PITCH - 1                               # k's past K4 = K - K mod 4 that k_tail adds, at most
kernel = k9.kernel                             # k9's kernel with every operand as float4


def plan(M: int, N: int, K: int) -> tuple[int, int]:
    """(M', N'): the rows and padded columns the interior's whole tiles cover. M' < M leaves a
    bottom strip of 1 to EDGE rows, N' < pitch(N) a right strip of 1 or 2 float4s."""
    rm, pn = M % TILE_M, pitch(N)
    m = M - rm if M > TILE_M and 1 <= rm <= EDGE else M
    n = N - N % TILE_N
    return m, (n if N > TILE_N and 0 < pn - n <= EDGE_COLS else pn)


def grid(M: int, N: int) -> tuple[int, int]:
    """The grid over the interior: the whole tiles of the padded output, none of the border."""
    m, n = plan(M, N, 0)
    return k8.grid(m, n)


def edge_config(M: int, N: int) -> tuple[tuple[int], tuple[int, int]]:
    """(grid, block) of edge_columns over the right strip's M' rows: ROWS rows per CTA."""
    m, _ = plan(M, N, 0)
    return (max(1, -(-m // ROWS)),), EDGE_BLOCK


def unsupported(M: int, N: int, K: int):
    reason = k8p.unsupported(M, N, K)
    if reason:
        return reason
    m, n = plan(M, N, K)
    if m == M and n == pitch(N):
        return (f"no thin border: M mod {TILE_M} = {M % TILE_M} and N mod {TILE_N} = {N % TILE_N} "
                f"leave no strip of 1 to {EDGE} rows or {EDGE_COLS} columns past whole tiles; use k8p")
    return grid_limit(k8p.grid(M, N))


ZERO4 = (float32(0.0), float32(0.0), float32(0.0), float32(0.0))


@cuda.jit
def edge_columns(M, K, ldb, n0, alpha, A, B, beta, C):
    """C[:M, n0:ldb] = alpha·A @ B[:, n0:ldb] + beta·C[:M, n0:ldb] (rows of ldb floats) for
    1 or 2 float4s of columns. A CTA takes ROWS rows and its warps split K: lane l of warp w
    reads k = 128w + 4l, then 128·EDGE_WARPS further on, one float4 per row, and the float4s of
    B's four k rows beside it. The sums meet in shared memory and lane j of warp 0 adds output j
    over warps 0 .. EDGE_WARPS-1 and their lanes 0 .. 31 in that order."""
    Red = cuda.shared.array((EDGE_WARPS, 32, EDGE_OUT), float32, alignment=SMEM_ALIGN)
    lane = u32(cuda.threadIdx.x)
    warp = u32(cuda.threadIdx.y)
    row0 = u64(cuda.blockIdx.x) * u64(ROWS)
    wide = ldb - n0 > 4                       # two float4s of B per k row, else one
    acc = cuda.local.array((ROWS, EDGE_COLS), float32)
    for r in range(ROWS):
        for c in range(EDGE_COLS):
            acc[r, c] = float32(0.0)
    rb = cuda.local.array((4, EDGE_COLS), float32)
    kk = u64(warp * 128 + lane * 4)
    while kk < u64(K):
        for i in range(4):                    # B's k rows kk .. kk+3, zero past the strip
            b_off = (kk + u64(i)) * u64(ldb) + u64(n0)
            lo = load4_global(B, b_off)
            hi = load4_global(B, b_off + u64(4)) if wide else ZERO4
            for c in range(4):
                rb[i, c] = lo[c]
                rb[i, c + 4] = hi[c]
        for r in range(ROWS):                 # the CTA's rows past M add zeros
            a = load4_global(A, (row0 + u64(r)) * u64(K) + kk) if row0 + u64(r) < u64(M) else ZERO4
            for i in range(4):
                for c in range(EDGE_COLS):
                    acc[r, c] += a[i] * rb[i, c]
        kk += u64(128 * EDGE_WARPS)
    for r in range(ROWS):
        for c in range(EDGE_COLS):
            Red[warp, lane, r * EDGE_COLS + c] = acc[r, c]
    cuda.syncthreads()                        # every warp reaches it: none returned early
    if warp == u32(0) and lane < u32(EDGE_OUT):
        s = float32(0.0)
        for w in range(EDGE_WARPS):           # warp, then lane order: the same bits every run
            for j in range(32):
                s += Red[w, j, lane]
        row = row0 + u64(lane // EDGE_COLS)
        col = u64(n0) + u64(lane % EDGE_COLS)
        if row < u64(M) and col < u64(ldb):
            off = row * u64(ldb) + col
            if beta == float32(0.0):          # beta == 0 never reads C (BLAS: NaN must not leak)
                C[off] = alpha * s
            else:
                C[off] = alpha * s + beta * C[off]


@cuda.jit
def k_tail(M, N, K, k0, alpha, A, B, C):
    """C += alpha·A[:, k0:K] @ B[k0:K, :] for the 1 to 3 k's past the product's K4 = k0 (rows of
    K and N floats): a thread per column, k8p.COPY_ROWS rows each, as repitch's grid. It runs
    after the product has written C, so a NaN in C with beta == 0 is gone before it is read."""
    c = u64(cuda.blockIdx.x) * u64(cuda.blockDim.x) + u64(cuda.threadIdx.x)
    if c >= u64(N):
        return
    b = cuda.local.array(TAIL, float32)
    for i in range(TAIL):                     # B's tail rows in this column, zero past K
        k = u64(k0) + u64(i)
        b[i] = B[k * u64(N) + c] if k < u64(K) else float32(0.0)
    r0 = u64(cuda.blockIdx.y) * u64(k8p.COPY_ROWS)
    while r0 < u64(M):
        r = r0
        while r < r0 + u64(k8p.COPY_ROWS) and r < u64(M):
            s = float32(0.0)
            for i in range(TAIL):
                k = u64(k0) + u64(i)
                if k < u64(K):
                    s += A[r * u64(K) + k] * b[i]
            C[r * u64(N) + c] += alpha * s
            r += u64(1)
        r0 += u64(cuda.gridDim.y) * u64(k8p.COPY_ROWS)


def interior(A2, B2, C2, M, N, K, alpha, beta, stream):
    """k9's kernel on the grid of whole tiles (`grid`) of the flat operands product() gets."""
    pk, pn = pitch(K), pitch(N)
    launch(kernel, grid(M, N), BLOCK, A2.reshape(M, pk), B2.reshape(pk, pn), C2.reshape(M, pn),
           alpha, beta, stream)


def product(A2, B2, C2, M, N, K, alpha, beta, stream, inner=interior):
    """The interior (`inner`: k8e's, or k8es's shared out by stream-K), then the strips, on the
    copies. The launches hold A2, B2, C2 (k8p.pitched) and so the strips' views of them; k6gv's
    split keeps its own partials."""
    from ..runtime.launch import launch_numba

    pk, pn = pitch(K), pitch(N)
    m, n = plan(M, N, K)
    inner(A2, B2, C2, M, N, K, alpha, beta, stream)
    for gv, *strip in bottom(A2, B2, C2, M, N, K):
        gv.run(*strip, alpha, beta, stream)
    if n < pn:
        launch_numba(edge_columns, *edge_config(M, N),
                     (np.int32(m), np.int32(pk), np.int32(pn), np.int32(n), np.float32(alpha),
                      A2, B2, np.float32(beta), C2), stream)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY):
    """k8's accesses on the operands the interior reads (row_lengths): k8p's copies, or A′ in
    rows of K4 beside B in place."""
    a_cols, b_cols = row_lengths(M, N, K)
    return k8.warp_step(M, b_cols, a_cols, bx, by, warp, ph, g)


EDGE_SIGNATURE = (int32, int32, int32, int32, float32, float32[::1], float32[::1], float32, float32[::1])
TAIL_SIGNATURE = (int32, int32, int32, int32, float32, float32[::1], float32[::1], float32[::1])
KERNELS = {LEVEL: (kernel, SIGNATURE), "k8e_edge_columns": (edge_columns, EDGE_SIGNATURE),
           "k8e_tail": (k_tail, TAIL_SIGNATURE)}
# launched besides KERNELS, censused with their own levels: compiled ahead with them
HELPER_KERNELS = {**k8p.HELPER_KERNELS, "k6gv": k6gv.KERNELS["k6gv"], "k6gv16": k6gv16.KERNELS["k6gv16"]}


def bottom(A2, B2, C2, M: int, N: int, K: int) -> list[tuple]:
    """[(level module, A′, B′, C′)] of the pass over the bottom strip, none without one: views
    of rows [M', M) of what the interior reads (the copies, or A′ beside B and C in place), run
    by k6gv up to its 8 rows (the faster of the two there) and by k6gv16 past them."""
    m, _ = plan(M, N, K)
    if m == M:
        return []
    pk, pn = pitch(K), pitch(N)
    gv = k6gv if M - m <= k6gv.MAX_M else k6gv16
    return [(gv, A2[m * pk:M * pk].reshape(M - m, pk), B2.reshape(pk, pn), C2[m * pn:M * pn].reshape(M - m, pn))]


def direct(N: int, K: int) -> bool:
    """Whether B and C serve in place and only A is copied: B's and C's rows are whole float4s
    (N % 4 == 0; run() also needs their bases 16-byte aligned, else it copies all three)."""
    return N % PITCH == 0 and K >= PITCH


def copies(M: int, N: int, K: int, beta: float) -> list[tuple[str, int, int, int, int]]:
    """The copies of one call, as k8p's `copies`: A alone, cut to its K4 = K - K mod 4 first
    columns, where B and C serve in place (`direct`); else k8p's."""
    return [("A", M, K, M, K - K % PITCH)] if direct(N, K) else k8p.copies(M, N, K, beta)


def copies_bytes(M: int, N: int, K: int, beta: float = 0.0) -> int:
    """Bytes the copies move (k8p.bytes_moved of k8e's copies), and where B and C serve in
    place the K tail's read and write of C."""
    return k8p.bytes_moved(copies(M, N, K, beta)) + (8 * M * N if direct(N, K) else 0)


def row_lengths(M: int, N: int, K: int) -> tuple[int, int]:
    """The row lengths of the A and B that the interior reads: (K4, N) in place, else k8p's."""
    return (K - K % PITCH, N) if direct(N, K) else k8p.row_lengths(M, N, K)


def in_place_for(A, B, C) -> bool:
    """Whether this call takes `in_place`: `direct` at its shape, B and C 16-byte aligned."""
    return direct(B.shape[1], A.shape[1]) and vector_operands(A, B, C)[1]


def run(A, B, C, alpha, beta, stream=None):
    compute(LEVEL, A, B, C, alpha, beta, stream)


def compute(level, A, B, C, alpha, beta, stream, inner=interior):
    """k8e's launches with the interior `inner` (k8es: its own), refused as `level`."""
    M, K = A.shape
    N = B.shape[1]
    reason = unsupported(M, N, K)
    if reason:
        raise ValueError(f"level {level} cannot run M={M}, N={N}, K={K}: {reason}")
    if in_place_for(A, B, C):
        in_place(A, B, C, alpha, beta, stream, inner)
    else:
        k8p.pitched(level, unsupported, functools.partial(product, inner=inner), A, B, C, alpha, beta, stream)


def in_place(A, B, C, alpha, beta, stream, inner=interior):
    """B and C where they are: A's first K4 columns copied into rows of K4 floats, the product
    over those K4 (product() on B's first K4 rows), then C += alpha·A[:, K4:]·B[K4:, :], the 1 to
    3 k's left, by `k_tail`."""
    from ..runtime import launch as launches
    from ..runtime.launch import launch_numba

    M, K = A.shape
    N = B.shape[1]
    k4, _ = row_lengths(M, N, K)
    A2 = workspace.scratch(C, f"{LEVEL} A", M * k4 * 4).view(np.float32)
    flat_a, flat_c = A.reshape(M * K), C.reshape(M * N)
    with launches.keeping((A2,), stream):
        launch_numba(k8p.repitch, *copy_config(M, k4),
                     (flat_a, np.int32(M), np.int32(K), A2, np.int32(M), np.int32(k4)), stream)
        product(A2, B.reshape(K * N)[:k4 * N], flat_c, M, N, k4, alpha, beta, stream, inner)
        launch_numba(k_tail, *copy_config(M, N),
                     (np.int32(M), np.int32(N), np.int32(K), np.int32(k4), np.float32(alpha),
                      flat_a, B.reshape(K * N), flat_c), stream)
