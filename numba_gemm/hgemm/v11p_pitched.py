"""read: diff native/v11_wgmma.cu native/v11p_pitched.cu · run: python bench.py --level v11p --dtype fp16

v11p: v11 on copies of A and B with 16-byte-aligned rows — TMA at the shapes it refuses.

v11p = v11 + one copy of each operand. TMA describes only rows whose stride is a multiple of 16
bytes (fp16/bf16: K and N multiples of 8); v11r serves the other shapes by loading through
registers, one tile of loads in flight and many more instructions. Here a small kernel
(`v11p_repitch` in native/v11p_pitched.cu) first copies A into rows of pitch_a = K rounded up to
8 elements and B into rows of pitch_b = N rounded up to 8, the pad zero; the tensor maps keep
the true extents (K, N) with the padded row strides, so TMA zero-fills past K and N exactly as
for v11, and the GEMM kernel is v11's: 128×256×64 tiles, 4 stages, wgmma from the swizzled
TMA tiles, the super-tile order. C, of any width, is written by v11's register epilogue
(masked; scalar stores where its rows are not 8-byte aligned).

Which ledger moved: bytes. The copies read A and B once and write them once (2·(M·K + K·N)
elements of 2 bytes, plus the pads), three launches instead of one; in exchange the K loop runs
at v11's rate. At 4097³ that is 134 MB of copies beside a product that takes v11r over a
millisecond. The copies are kept per output (numba_gemm.runtime.workspace, allocated on the first call,
outside any timed loop or captured graph) and held by the recorded launches.

An aligned shape gains nothing from the copies: v11p refuses it, naming v11.
"""
from __future__ import annotations

from ..runtime import workspace
from ..util import ceil_div
from . import _common as cm
from . import _wgmma as wg

LEVEL = "v11p"
PARENT = "v11"
TITLE = "v11 on 16-byte-aligned copies of A and B"
DELTA = ("v11p = v11 + a copy of A and B into rows padded to 8 elements, so TMA (and v11's "
         "kernel, unchanged) serves K and N that are not multiples of 8")
DTYPES = cm.DTYPES
SOURCE = "v11p_pitched.cu"
KERNEL_NAMES = {"f16": "v11p_wgmma_f16", "bf16": "v11p_wgmma_bf16"}
REPITCH = "v11p_repitch"
SASS_MUST_HAVE = ("HGMMA", "UTMALDG", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR")   # v11's, in v11's kernel
SASS_MUST_NOT_HAVE = ("HMMA", "LDSM")
RASTER = "super"

CONFIG = wg.WgmmaTile()           # v11's shipped tile
DEFINES = CONFIG.defines()
PITCH = 8                         # elements: 16 bytes of a 2-byte type
COPY_THREADS = 256


def pitch(cols: int) -> int:
    """Elements between the rows of a copy: cols rounded up to 16 bytes."""
    return ceil_div(cols, PITCH) * PITCH


def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None, config=CONFIG):
    """(super_m, super_n): v9's L2 rule for v11's tile."""
    return wg.tile_order(M, N, K, l2_bytes, config)


def launch_config(M: int, N: int, K: int, config=CONFIG):
    return wg.launch_config(M, N, K, config)


def unsupported(M: int, N: int, K: int) -> str | None:
    reason = cm.check_dims(M, N, K)
    if reason:
        return reason
    if K % PITCH == 0 and N % PITCH == 0:
        return "K and N are multiples of 8: the rows are aligned already, and v11 runs without the copies"
    if ceil_div(M, CONFIG.bm) * ceil_div(N, CONFIG.bn) > cm.INT32_MAX:
        return "more than 2^31 - 1 output tiles"
    return None


def copy_config(rows: int, cols: int) -> tuple[tuple[int], tuple[int]]:
    """(grid, block) of v11p_repitch: a thread per 16 bytes of the copy, grid-strided past 2^31."""
    chunks = rows * (pitch(cols) // PITCH)
    return (max(1, min(ceil_div(chunks, COPY_THREADS), 2**31 - 1)),), (COPY_THREADS,)


def run(A, B, C, alpha, beta, stream=None):
    from ..runtime import launch, nvrtc
    from ..runtime.launch import launch_native

    M, K = A.shape
    N = B.shape[1]
    reason = unsupported(M, N, K)
    if reason:
        raise ValueError(f"level {LEVEL} cannot run M={M}, N={N}, K={K}: {reason}")
    pa, pb = pitch(K), pitch(N)
    A2 = workspace.scratch(C, "v11p A", M * pa * 2)
    B2 = workspace.scratch(C, "v11p B", K * pb * 2)
    a2, b2 = cm.device_ptr(A2), cm.device_ptr(B2)
    args = wg.maps_and_args(LEVEL, A, B, C, alpha, beta, CONFIG, pitched=((a2, pa), (b2, pb)))
    copy = nvrtc.function(SOURCE, REPITCH, defines=DEFINES)
    kernel = nvrtc.function(SOURCE, KERNEL_NAMES[cm.element_type(A)], defines=DEFINES)
    grid, block, smem = launch_config(M, N, K)
    with launch.keeping((A2, B2), stream):      # the arguments hold only their addresses
        for src, rows, cols, dst, p in ((A, M, K, a2, pa), (B, K, N, b2, pb)):
            launch_native(copy, *copy_config(rows, cols), 0, stream,
                          cm.pack_args(("p", cm.device_ptr(src)), ("i", rows), ("i", cols), ("p", dst), ("i", p)))
        launch_native(kernel, grid, block, smem, stream, args, pdl=True)


def copies_bytes(M: int, N: int, K: int) -> int:
    """Bytes the two copies move: each operand read once (2 bytes an element) and written once
    at its padded pitch."""
    return 2 * (M * K + K * N) + 2 * (M * pitch(K) + K * pitch(N))

