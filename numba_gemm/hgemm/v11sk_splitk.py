"""read: diff native/v11_wgmma.cu native/v11sk_splitk.cu · run: python bench.py --level v11sk --dtype fp16

v11sk: v11 + split-K — S CTAs per output tile, each on one slice of K, reduced in a fixed order.

v11sk = v11 with the grid made two-dimensional. A shape with few output tiles leaves most of the
132 SMs idle under v11 (16×8192 with 128×256 tiles is 32 CTAs; 128×4096 is 16): nothing there
splits K, the only long axis. Here blockIdx.y = z picks K tiles [z·per, min((z+1)·per,
k_tiles)) of a tile (numba_gemm.splitk: S = choose_splits, so S·tiles ≤ SMs, every slice at
least MIN_SLICE_K_TILES = 8 K tiles, never an empty one); the K loop is v11's own (native/wgmma_tma_loop.cuh, the
header both levels include); slice z writes its raw fp32 64×256 accumulators per warpgroup,
masked to M and N, to the workspace at P + z·M·N (numba_gemm.runtime.workspace.partials: S·M·N
floats per output, allocated on the first call, outside any timed loop or captured graph),
and numba_gemm.splitk.reduce adds the S slices in the order z = 0, 1, …, S-1 and applies
alpha and beta once (beta == 0: C is not read). No atomics: the same bits on every run. With
S == 1 the one launch writes C with alpha and beta — v11 itself, no workspace.

The row tile follows M: BM = 64 (one consumer warpgroup, 128 threads, 40 KB stages) when
M ≤ 64, else v11's 128 (two warpgroups): a 16-row product multiplies 48 zero-filled rows
instead of 112. Each is its own cubin of native/v11sk_splitk.cu (-DHG_BM).

Which ledger moved: CTAs per SM / waves — tiles·S CTAs instead of tiles, one per SM (the
shared memory of one CTA): 16×8192×8192 runs 32·4 = 128 CTAs (v11: 32), 128×4096×4096
16·8 = 128 (v11: 16), 512×4096×4096 64·2 = 128 (v11: 64); the bytes of A and B in flight
grow with the CTAs, which is what a bandwidth-bound shape needs. It costs the workspace:
S·M·N·4 bytes written by the slices and read back by the reduction, plus the reduction's
launch (2 MiB each way at 16×8192, S = 4, beside B's 128 MiB; 16 MiB each way at 128×4096,
S = 8, and at 512×4096, S = 2, beside B's 32 MiB). The K loop's instructions and registers
(154) are v11's; at M ≤ 64 the tensor work per CTA is half v11's (64-row tile). Census (sm_90a, CI-asserted for both row
tiles): 4264 instructions per kernel (v11: 4240), 4 HGMMA.64x256x16.F32, 16 UTMALDG.2D,
WARPGROUP.ARRIVE, WARPGROUP.DEPBAR.LE; no HMMA, no LDSM, no local memory. Measured on the H200
in the shape suite: docs/RESULTS.md, "2026-12-02, sixth run: the shape suite with auto refitted;
v11py's 8-byte stores" (and the fifth run).

Limits (TMA's, as v11): 16-byte aligned bases and K % 8 == 0, N % 8 == 0 for 2-byte types;
other shapes are refused before launch, naming v9. `SPLITS` (module) or run(..., splits=S)
forces a split count for a benchmark; `plan_splits` is the pure rule.
"""
from __future__ import annotations

import ctypes

from .. import splitk
from ..runtime import workspace
from ..util import ceil_div
from . import _common as cm
from . import _wgmma as wg

LEVEL = "v11sk"
PARENT = "v11"
TITLE = "split-K over blockIdx.y, fixed-order reduction"
DELTA = ("v11sk = v11 + split-K: blockIdx.y picks a slice of K, raw fp32 partials to a "
         "workspace, one fixed-order reduction applying alpha/beta once; BM = 64 when M <= 64")
DTYPES = cm.DTYPES
SOURCE = "v11sk_splitk.cu"
KERNEL_NAMES = {"f16": "v11sk_splitk_f16", "bf16": "v11sk_splitk_bf16"}
SASS_MUST_HAVE = ("HGMMA", "UTMALDG", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR")
SASS_MUST_NOT_HAVE = ("HMMA", "LDSM")
RASTER = "super"

TILES = {64: wg.WgmmaTile(bm=64), 128: wg.WgmmaTile(bm=128)}   # by BM
CONFIG = TILES[128]               # the census's and the ledgers' tile (M > 64)
DEFINES = CONFIG.defines()
SMALL_M = 64                      # M <= SMALL_M takes the 64-row tile
SPLITS: int | None = None         # force a split count (benchmarks); None: splitk.choose_splits
# Slices of 4 K tiles (256 of K) lost to v11 on the H200 at 512^3 (S = 2: 12.8 against 11.8 µs)
# and 1024^3 (S = 4: 18.3 against 16.6 µs), docs/data/h200_shapes_bf16.json: the pipeline fill
# and the partials' round trip outweigh the SMs gained. Every split that paid had slices of 8+.
MIN_SLICE_K_TILES = 8


def tile_for(M: int) -> wg.WgmmaTile:
    return TILES[64 if M <= SMALL_M else 128]


def plan_splits(M: int, N: int, K: int, sms: int = 132, splits: int | None = None):
    """(tile, S) for an M×N×K product on `sms` SMs: the row tile for M, and S K slices —
    splitk.choose_splits, or `splits` (else the module's SPLITS) when given — rounded so that
    no slice is empty (splitk.effective_splits). Pure: no device is touched."""
    tile = tile_for(M)
    tiles = ceil_div(M, tile.bm) * ceil_div(N, tile.bn)
    k_tiles = ceil_div(K, tile.bk)
    forced = SPLITS if splits is None else splits
    if forced is None:
        s = splitk.choose_splits(tiles, k_tiles, M, N, sms=sms, min_k_tiles=MIN_SLICE_K_TILES)
    else:
        s = splitk.checked_splits(LEVEL, forced, k_tiles, K, M, N)
    return tile, splitk.effective_splits(k_tiles, s)


def slices(K: int, tile: wg.WgmmaTile, S: int) -> list[tuple[int, int]]:
    """The K-tile range [first, end) of each slice z = 0..S-1, as the kernel computes it."""
    k_tiles = ceil_div(K, tile.bk)
    per = splitk.slice_k_tiles(k_tiles, S)
    return [(z * per, min((z + 1) * per, k_tiles)) for z in range(S)]


def tile_order(M: int, N: int, K: int, l2_bytes: int | None = None, config=None):
    """(super_m, super_n): v9's L2 rule for the tile M takes."""
    return wg.tile_order(M, N, K, l2_bytes, config or tile_for(M))


def launch_config(M: int, N: int, K: int, config=None, splits: int = 1):
    """(grid, block, smem): (tiles, S, 1) CTAs of the tile's threads."""
    config = config or tile_for(M)
    grid, block, smem = wg.launch_config(M, N, K, config)
    return (grid[0], splits, 1), block, smem


def unsupported(M: int, N: int, K: int) -> str | None:
    return wg.tma_rule(M, N, K) or (
        "more than 2^31 - 1 output tiles" if ceil_div(M, 64) * ceil_div(N, 256) > cm.INT32_MAX else None)


def run(A, B, C, alpha, beta, stream=None, splits: int | None = None):
    from ..runtime import launch, nvrtc
    from ..runtime.launch import launch_native

    M, K = A.shape
    N = B.shape[1]
    reason = unsupported(M, N, K)
    if reason:
        raise ValueError(f"level {LEVEL} cannot run M={M}, N={N}, K={K}: {reason}")
    tile, S = plan_splits(M, N, K, sms=cm.sm_count(), splits=splits)
    wg.check_operands(LEVEL, cm.device_ptr(A), cm.device_ptr(B), M, N, K, tile)   # before any allocation
    per = splitk.slice_k_tiles(ceil_div(K, tile.bk), S)
    kernel = nvrtc.function(SOURCE, KERNEL_NAMES[cm.element_type(A)], defines=tile.defines())
    grid, block, smem = launch_config(M, N, K, tile, S)
    if S == 1:              # v11 itself: C with alpha and beta, one launch
        args = wg.maps_and_args(LEVEL, A, B, C, alpha, beta, tile) + [ctypes.c_int32(per)]
        launch_native(kernel, grid, block, smem, stream, args, pdl=True)
        return
    P = workspace.partials(C, S, M, N)          # S x M x N fp32, slice z at P + z*M*N
    args = wg.maps_and_args(LEVEL, A, B, P, 1.0, 0.0, tile) + [ctypes.c_int32(per)]
    # both launches hold the workspace: their arguments hold only its address
    with launch.keeping(P, stream):
        launch_native(kernel, grid, block, smem, stream, args, pdl=True)
        splitk.reduce(P, C, S, M, N, alpha, beta, stream)
