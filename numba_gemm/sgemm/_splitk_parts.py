"""What the SGEMM split-K levels (k5sk, k8sk) share on the host: the slice plan and the launch
sequence. Their kernels take k8's / k5's arguments plus the slice length:

    (M, N, K, kslice, alpha, A, B, beta, C)    # CTA (x, y, z) multiplies k in [z·kslice, min(K, (z+1)·kslice))
                                               # and writes the M×N matrix at element z·M·N of C

With one slice, C is the output and alpha, beta are the call's; with S > 1, C is the
workspace (numba_gemm.runtime.workspace.partials), alpha = 1 and beta = 0 (so each slice stores its
raw sum: 1·x is x, and the workspace is never read), then numba_gemm.splitk.reduce adds the S
partials in order z = 0 .. S-1 and applies the call's alpha and beta once.
"""
from __future__ import annotations

import numpy as np
from numba import float32, int32, int64

from .. import splitk
from ..runtime import workspace
from ._common import ceil_div

SIGNATURE = (int32, int32, int32, int32, float32, float32[::1], float32[::1], float32, float32[::1])
# the reduction as launch_numba types splitk.reduce's arguments (P, splits, MN, alpha, beta, C)
REDUCE_SIGNATURE = (float32[::1], int32, int64, float32, float32, float32[::1])
# kernels a split-K level launches besides its KERNELS: compiled ahead with them
# (python -m numba_gemm warm), left out of the SASS census
HELPER_KERNELS = {"reduce_partials": (splitk.reduce_partials, REDUCE_SIGNATURE)}
MAX_GRID_Z = 65535


def plan(tiles: int, K: int, tile_k: int, M: int, N: int, sms: int, ctas_per_sm: int) -> int:
    """splitk.choose_splits for `tiles` output tiles of K / tile_k K tiles, the GPU counted in
    resident CTAs (sms × ctas_per_sm): a wave is what the SMs hold at once. Rounded so that
    no slice is empty."""
    k_tiles = ceil_div(K, tile_k)
    s = splitk.choose_splits(tiles, k_tiles, M, N, sms * ctas_per_sm)
    return splitk.effective_splits(k_tiles, s)


def slices(level: str, K: int, tile_k: int, splits, planned) -> tuple[int, int]:
    """(S, kslice) for a forced split count `splits` (None: `planned()`): S slices of kslice
    elements of K each (a multiple of tile_k; the last one may be shorter, never empty)."""
    k_tiles = ceil_div(K, tile_k)
    if splits is None:
        s = planned()
    else:
        if isinstance(splits, bool) or not isinstance(splits, (int, np.integer)) or splits < 1:
            raise ValueError(f"{level}: splits must be a positive int, got {splits!r}")
        s = splitk.effective_splits(k_tiles, min(int(splits), k_tiles))
    if s > MAX_GRID_Z:
        raise ValueError(f"{level}: {s} slices; gridDim.z allows at most {MAX_GRID_Z}")
    return s, splitk.slice_k_tiles(k_tiles, s) * tile_k


def grid(grid2: tuple[int, int], S: int) -> tuple:
    """The launch grid: (x, y) for one slice, (x, y, S) otherwise."""
    return grid2 if S == 1 else (*grid2, S)


def launch(kernel, grid, block, A, B, C, alpha, beta, stream=None, kslice=None):
    """`kernel` over `grid` ((x, y) or (x, y, S)), then, with S > 1 slices, the reduction of
    their partials into C (see the module docstring). A, B, C: device arrays or records."""
    from ..runtime import launch as launches
    from ..runtime.launch import launch_numba

    M, K = A.shape
    N = B.shape[1]
    S = grid[2] if len(grid) == 3 else 1
    if S == 1:
        out, a, b = C.reshape(M * N), alpha, beta
    else:
        out, a, b = workspace.partials(C, S, M, N), 1.0, 0.0
    args = (np.int32(M), np.int32(N), np.int32(K), np.int32(K if kslice is None else kslice),
            np.float32(a), A.reshape(M * K), B.reshape(K * N), np.float32(b), out)
    if S == 1:
        launch_numba(kernel, grid, block, args, stream)
        return
    # A recorded Numba launch keeps only its packed parameters: both launches hold the
    # workspace as well, so a cached call (gemm(), plan()) cannot outlive it
    with launches.keeping(out, stream):
        launch_numba(kernel, grid, block, args, stream)
        splitk.reduce(out, C, S, M, N, alpha, beta, stream)
