"""read: diff native/twins/k8.cu native/twins/k8p.cu · run: python bench.py --level k8p

k8p — k8 on copies of A, B and C whose rows are whole float4s: k8's vector loads at any shape.

k8 moves A as float4 only where K is a multiple of 4, and B and C only where N is (k6's rule,
`vector_operands`): a row of 4097 floats starts on a different 4-byte offset each time, so at
4097³ every operand takes k8_edge's scalar loads, four instructions and four checks where one
would do, and k8 falls from 0.92× cuBLAS at 4096³ to 0.83× at 4097³. No edge path can keep the
vector loads there: it is the rows, not the border, that are misaligned. So k8p copies:

    A' = A in rows of pk = K rounded up to 4, zero past K          (M × pk)
    B' = B in pk rows of pn = N rounded up to 4, zero past K and N  (pk × pn)
    C' = C in rows of pn (only when beta != 0: beta == 0 never reads C)
    k8's aligned kernel on (M, pn, pk): the pad multiplies zeros
    C  = the first N columns of C'

One small kernel (`repitch`: a thread per column, down 32 rows) does all four copies.
Which ledger moved: bytes. The copies read and write A and B once, and C once or twice: at
4097³ about 400 MB beside a product that takes k8 3.8 ms, and the K loop runs at k8's aligned
rate. The copies live per output (numba_gemm.runtime.workspace) and the recorded launches hold them, as
v11p's do (v11p is the same move for TMA's 16-byte rule).

A shape whose rows are whole float4s already gains nothing: k8p refuses it, naming k8.

Measured: docs/RESULTS.md.
"""
import numpy as np
from numba import cuda, float32, int32

from ..runtime import workspace
from . import k8_double_buffer as k8
from ._common import SIGNATURE, grid_limit, launch, u64

LEVEL = "k8p"
PARENT = "k8"
TITLE = "k8 on copies of A, B and C in rows of whole float4s"
DELTA = ("k8p = k8 + copies of A, B (and C) into rows padded to 4 floats, so k8's aligned kernel "
         "(float4 loads and stores) serves K and N that are not multiples of 4")
DTYPES = (np.float32,)
SASS_MUST_HAVE = k8.SASS_MUST_HAVE             # k8's aligned kernel, unchanged

TILING, GEOMETRY, BLOCK = k8.TILING, k8.GEOMETRY, k8.BLOCK
TILE_M, TILE_N, TILE_K = k8.TILE_M, k8.TILE_N, k8.TILE_K
THREAD_M, THREAD_N = k8.THREAD_M, k8.THREAD_N
THREADS = k8.THREADS
PITCH = 4                                      # floats: one float4
COPY_THREADS = 256
COPY_ROWS = 4                                  # rows a copy thread walks (32 left A′ of 777 × 3004 to 300 CTAs: 1.2 TB/s)
MAX_GRID_Y = 65535
# the one kernel k8p runs: k8's with every operand as float4 (what k6's rule gives the copies)
kernel = k8.SPECIALISATIONS[True, True][1]
KERNELS = {LEVEL: (kernel, SIGNATURE)}


def pitch(cols: int) -> int:
    """Floats between the rows of a copy: cols rounded up to a float4."""
    return -(-cols // PITCH) * PITCH


@cuda.jit
def repitch(src, rows, cols, dst, dst_rows, dst_cols):
    """dst (dst_rows × dst_cols) = the top-left dst_rows × dst_cols of src (rows × cols), zero
    where src has no element. Both ways: into a padded copy, and back out of one."""
    c = u64(cuda.blockIdx.x) * u64(cuda.blockDim.x) + u64(cuda.threadIdx.x)
    if c >= u64(dst_cols):
        return
    r0 = u64(cuda.blockIdx.y) * u64(COPY_ROWS)           # this block's COPY_ROWS rows, then the
    while r0 < u64(dst_rows):                            # next grid's worth past 65535 blocks
        r = r0
        while r < r0 + u64(COPY_ROWS) and r < u64(dst_rows):
            v = float32(0.0)
            if r < u64(rows) and c < u64(cols):
                v = src[r * u64(cols) + c]
            dst[r * u64(dst_cols) + c] = v
            r += u64(1)
        r0 += u64(cuda.gridDim.y) * u64(COPY_ROWS)


REPITCH_SIGNATURE = (float32[::1], int32, int32, float32[::1], int32, int32)
# launched besides KERNELS: compiled ahead with them (python -m numba_gemm warm), not censused
HELPER_KERNELS = {"repitch": (repitch, REPITCH_SIGNATURE)}


def copy_config(rows: int, cols: int) -> tuple[tuple[int, int], tuple[int]]:
    """(grid, block) of repitch writing rows × cols: a thread per column, COPY_ROWS rows each."""
    return (max(1, -(-cols // COPY_THREADS)), min(-(-rows // COPY_ROWS), MAX_GRID_Y)), (COPY_THREADS,)


def grid(M: int, N: int) -> tuple[int, int]:
    """k8's grid over the padded output (M × pitch(N))."""
    return k8.grid(M, pitch(N))


def unsupported(M: int, N: int, K: int):
    if K % PITCH == 0 and N % PITCH == 0:
        return "K and N are multiples of 4: the rows are whole float4s already, and k8 runs without the copies"
    return grid_limit(grid(M, N))


def copies(M: int, N: int, K: int, beta: float) -> list[tuple[str, int, int, int, int]]:
    """The copies of one call, in order: (what, rows, cols of the source, rows, cols written)."""
    pk, pn = pitch(K), pitch(N)
    out = [("A", M, K, M, pk), ("B", K, N, pk, pn)]
    if beta != 0:
        out.append(("C in", M, N, M, pn))
    return out + [("C out", M, pn, M, N)]


def bytes_moved(plan) -> int:
    """Bytes a list of copies (as `copies` gives them) moves: each reads its source's part and
    writes its destination."""
    return sum(4 * (min(r, dr) * min(c, dc) + dr * dc) for _, r, c, dr, dc in plan)


def copies_bytes(M: int, N: int, K: int, beta: float = 0.0) -> int:
    """Bytes the copies move (C is copied in only when beta != 0)."""
    return bytes_moved(copies(M, N, K, beta))


def buffers(C, M: int, N: int, K: int):
    """(A′, B′, C′): the padded copies' float32 buffers, flat, kept per output C (workspace)."""
    pk, pn = pitch(K), pitch(N)
    return tuple(workspace.scratch(C, f"{LEVEL} {what}", n * 4).view(np.float32)
                 for what, n in (("A", M * pk), ("B", pk * pn), ("C", M * pn)))


def run(A, B, C, alpha, beta, stream=None):
    pitched(LEVEL, unsupported, product, A, B, C, alpha, beta, stream)


def product(A2, B2, C2, M, N, K, alpha, beta, stream):
    """k8's aligned kernel on the copies (M × pitch(K) times pitch(K) × pitch(N))."""
    pk, pn = pitch(K), pitch(N)
    launch(kernel, grid(M, N), BLOCK, A2.reshape(M, pk), B2.reshape(pk, pn), C2.reshape(M, pn),
           alpha, beta, stream)


def pitched(level, refusal, compute, A, B, C, alpha, beta, stream):
    """A level on padded copies (k8p, k8e): the copies in, `compute` on them, C written back;
    `refusal` is the level's `unsupported`."""
    from ..runtime import launch as launches
    from ..runtime.launch import launch_numba

    M, K = A.shape
    N = B.shape[1]
    reason = refusal(M, N, K)
    if reason:
        raise ValueError(f"level {level} cannot run M={M}, N={N}, K={K}: {reason}")
    A2, B2, C2 = buffers(C, M, N, K)
    flat = {"A": (A.reshape(M * K), A2), "B": (B.reshape(K * N), B2), "C in": (C.reshape(M * N), C2),
            "C out": (C2, C.reshape(M * N))}

    def copy(what, rows, cols, dst_rows, dst_cols):
        src, dst = flat[what]
        launch_numba(repitch, *copy_config(dst_rows, dst_cols),
                     (src, np.int32(rows), np.int32(cols), dst, np.int32(dst_rows), np.int32(dst_cols)), stream)

    # a recorded Numba launch keeps only its packed parameters: they hold the copies as well
    with launches.keeping((A2, B2, C2), stream):
        *into, out = copies(M, N, K, beta)
        for c in into:
            copy(*c)
        compute(A2, B2, C2, M, N, K, alpha, beta, stream)
        copy(*out)


def row_lengths(M: int, N: int, K: int) -> tuple[int, int]:
    """The row lengths of the A and B that the kernel reads: the copies', pitch(K) and pitch(N)
    (the addresses warp_step gives are in those)."""
    return pitch(K), pitch(N)


def warp_step(M, N, K, bx, by, warp, ph, g=GEOMETRY):
    """k8's accesses on the padded operands (M × pitch(K) times pitch(K) × pitch(N))."""
    return k8.warp_step(M, pitch(N), pitch(K), bx, by, warp, ph, g)
