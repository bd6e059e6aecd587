"""What the SGEMM split-K levels (k5sk, k8sk) share on the host: the slice plan and the launch
sequence. Their kernels take k8's / k5's arguments plus the slice length:

    (M, N, K, kslice, alpha, A, B, beta, C)    # CTA (x, y, z) multiplies k in [z·kslice, min(K, (z+1)·kslice))
                                               # and writes the M×N matrix at element z·M·N of C

With one slice, C is the output and alpha, beta are the call's; with S > 1, C is the
workspace (numba_gemm.runtime.workspace.partials), alpha = 1 and beta = 0 (so each slice stores its
raw sum: 1·x is x, and the workspace is never read), then numba_gemm.splitk.reduce adds the S
partials in order z = 0 .. S-1 and applies the call's alpha and beta once.

A level that reduces inside its kernel (k6gv: SPLIT_IN_KERNEL) takes two arguments more, the
partials P and a uint32 counter per output tile, and is launched once (`launch_in_kernel`):

    (M, N, K, kslice, alpha, A, B, beta, C, P, counters)

With S > 1 each CTA stores its raw sum into slice z of P, and `arrive` tells the CTA that is
the last of its tile's S to get there; that CTA adds the tile's S partials in order
z = 0 .. S-1 (`sum_slices4`: the bits of splitk.reduce_partials) and writes C with the call's
alpha and beta. The order of the sum never depends on which CTA arrives last.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float32, int32, int64, uint32

from .. import splitk
from ..ptx.intrinsics import load_l2
from ..runtime import workspace
from ._common import ceil_div, u32, u64
from ._loaders import inline

SIGNATURE = (int32, int32, int32, int32, float32, float32[::1], float32[::1], float32, float32[::1])
# the reduction as launch_numba types splitk.reduce's arguments (P, splits, MN, alpha, beta, C)
REDUCE_SIGNATURE = (float32[::1], int32, int64, float32, float32, float32[::1])
# kernels a split-K level launches besides its KERNELS: compiled ahead with them
# (python -m numba_gemm warm), left out of the SASS census
HELPER_KERNELS = {"reduce_partials": (splitk.reduce_partials, REDUCE_SIGNATURE)}
SIGNATURE_IN_KERNEL = SIGNATURE + (float32[::1], uint32[::1])   # + the partials P, the counters
MAX_GRID_Z = 65535
# The in-kernel sum's slices in flight at once: the last CTA at a tile (k9sk: at a part of one)
# adds them alone, each load a wait on L2, so it keeps twice reduce_partials' batch in flight
# (S = 8: slices 1-7 in one wait).
BATCH = 2 * splitk.REDUCE_BATCH


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


def launch_in_kernel(kernel, grid, block, A, B, C, alpha, beta, stream=None, kslice=None):
    """`kernel` (SIGNATURE_IN_KERNEL) over `grid`, once: with S > 1 slices its tiles' last CTAs
    reduce the partials (module docstring). The partials and counters are C's workspace."""
    from ..runtime import launch as launches
    from ..runtime.launch import launch_numba

    M, K = A.shape
    N = B.shape[1]
    out = C.reshape(M * N)
    P, counters = in_kernel_buffers(C, grid, M, N)
    args = (np.int32(M), np.int32(N), np.int32(K), np.int32(K if kslice is None else kslice),
            np.float32(alpha), A.reshape(M * K), B.reshape(K * N), np.float32(beta), out, P, counters)
    with launches.keeping((P, counters), stream):
        launch_numba(kernel, grid, block, args, stream)


def in_kernel_buffers(C, grid, M: int, N: int):
    """(partials P, counters) of an in-kernel split over `grid` writing C: C's workspace, S
    counters per output tile (k6gv counts on the first tiles' worth; k9sk counts each of up to
    S parts of a tile's rows on its own); with one slice, C's flat view (never touched) and one
    counter."""
    S = grid[2] if len(grid) == 3 else 1
    if S == 1:
        return C.reshape(M * N), workspace.counters(C, 1)
    return workspace.partials(C, S, M, N), workspace.counters(C, grid[0] * grid[1] * S)


@inline
def arrive(counters, flag, tid, S):
    """`arrive_at` on the counter of the CTA's own (x, y) tile of the grid."""
    return arrive_at(counters, u32(cuda.blockIdx.y * cuda.gridDim.x + cuda.blockIdx.x), flag, tid, S)


@inline
def arrive_at(counters, tile, flag, tid, S):
    """Call once every thread of the CTA has stored its partial: True, in every thread, for the
    last of the S CTAs counted on counters[tile] to arrive (k6gv, k9sk: a tile's slices; k9st:
    the CTAs sharing a stream tile). That CTA resets the counter for the next call (and for a
    graph's replay). `flag`: a 1-element uint32 shared array. The fences order this CTA's
    partial before its arrival, and the others' before the last CTA's loads (the pattern of
    the CUDA programming guide's threadfence example)."""
    cuda.threadfence()
    cuda.syncthreads()
    if tid == u32(0):
        last = cuda.atomic.add(counters, tile, u32(1)) == u32(S - 1)
        if last:
            counters[tile] = u32(0)
        flag[0] = u32(1) if last else u32(0)
    cuda.syncthreads()
    last = flag[0] != u32(0)
    if last:
        cuda.threadfence()
    return last


@inline
def sum_slices4(P, off, mn, S, row_ok, col, n):
    """The four consecutive elements at P[off] summed over the S slices mn elements apart, in
    order z = 0 .. S-1, as splitk.reduce_partials adds them: slice 0, then BATCH slices' loads
    in flight at once (through L2: load_l2), the last batch's slices past S neither loaded nor
    added. Columns col + q past n and rows not row_ok load nothing (their sums are never
    stored)."""
    ok0 = row_ok & (col < n)
    ok1 = row_ok & (u32(col + 1) < n)
    ok2 = row_ok & (u32(col + 2) < n)
    ok3 = row_ok & (u32(col + 3) < n)
    s0 = load_l2(P, off) if ok0 else float32(0.0)
    s1 = load_l2(P, off + u64(1)) if ok1 else float32(0.0)
    s2 = load_l2(P, off + u64(2)) if ok2 else float32(0.0)
    s3 = load_l2(P, off + u64(3)) if ok3 else float32(0.0)
    p = cuda.local.array((BATCH, 4), float32)
    z = u32(1)
    while z < S:
        for b in range(BATCH):
            at = u64(z + b) * mn + off
            live = u32(z + b) < S
            p[b, 0] = load_l2(P, at) if ok0 & live else float32(0.0)
            p[b, 1] = load_l2(P, at + u64(1)) if ok1 & live else float32(0.0)
            p[b, 2] = load_l2(P, at + u64(2)) if ok2 & live else float32(0.0)
            p[b, 3] = load_l2(P, at + u64(3)) if ok3 & live else float32(0.0)
        for b in range(BATCH):
            if u32(z + b) < S:
                s0 += p[b, 0]
                s1 += p[b, 1]
                s2 += p[b, 2]
                s3 += p[b, 3]
        z = u32(z + BATCH)
    return s0, s1, s2, s3
