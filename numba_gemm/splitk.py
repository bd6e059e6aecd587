"""Split-K, shared by the split-K levels of both families: how many K slices, and the
deterministic reduction of their partial products.

A shape with few output tiles (M·N small against 132 SMs, e.g. 16×8192 with 128×256 tiles: 32
tiles) leaves most SMs idle, and nothing else splits the work: K is the only long axis left.
A split-K level gives each of S CTAs per tile one contiguous slice of K (a whole number of
its K tiles), writes each slice's fp32 product to a workspace (numba_gemm.runtime.workspace: S × M × N
floats), then one more kernel reduces the S partials **in a fixed order** (z = 0, 1, …, S-1)
and applies the epilogue once: C = alpha·Σ + beta·C, with C never read when beta == 0. No
float atomics: the result has the same bits on every run, and a captured call replays
exactly.

The extra traffic is the workspace: S·M·N·4 bytes written and read back (plus C). It pays
when M·N is small and K long; `choose_splits` never splits a shape whose tiles already fill
the GPU, and caps the workspace.
"""
from __future__ import annotations

import numpy as np
from numba import cuda, float32, uint64

from .util import ceil_div

MAX_SPLITS = 16
MIN_K_TILES_PER_SPLIT = 4          # each slice long enough to fill its pipeline and amortise the fill
WORKSPACE_LIMIT = 256 * 2**20      # bytes of partials a call may use


def choose_splits(tiles: int, k_tiles: int, M: int, N: int, sms: int = 132,
                  max_splits: int = MAX_SPLITS, min_k_tiles: int = MIN_K_TILES_PER_SPLIT) -> int:
    """The number of K slices for a grid of `tiles` output tiles and `k_tiles` K tiles each:
    enough CTAs to cover `sms` once (S = sms // tiles, so tiles·S ≤ sms: one wave), each
    slice at least min_k_tiles K tiles, the partials within WORKSPACE_LIMIT.
    1 means no split (the shape already fills the GPU, or K is short)."""
    if tiles >= sms // 2 or k_tiles < 2 * min_k_tiles:
        return 1
    s = min(sms // tiles, k_tiles // min_k_tiles, max_splits,
            WORKSPACE_LIMIT // max(1, 4 * M * N))
    return max(1, s)


def checked_splits(level: str, splits, k_tiles: int, K: int, M: int, N: int) -> int:
    """A split count a caller forced (a benchmark's run(..., splits=S)), refused with a
    ValueError unless it is an int in 1..k_tiles whose partials fit WORKSPACE_LIMIT."""
    if isinstance(splits, bool) or not isinstance(splits, int) or not 1 <= splits <= k_tiles:
        raise ValueError(f"level {level}: splits must be an int in 1..{k_tiles} (the K tiles of "
                         f"K={K}), got {splits!r}")
    if splits > 1 and 4 * splits * M * N > WORKSPACE_LIMIT:
        raise ValueError(f"level {level}: {splits} splits of {M}x{N} need {4 * splits * M * N} "
                         f"bytes of workspace, more than splitk.WORKSPACE_LIMIT = {WORKSPACE_LIMIT}")
    return splits


def slice_k_tiles(k_tiles: int, splits: int) -> int:
    """K tiles per slice: slices are equal except the last, which may be shorter (never
    empty: choose a split count for which it holds, see `effective_splits`)."""
    return ceil_div(k_tiles, splits)


def effective_splits(k_tiles: int, splits: int) -> int:
    """The slice count after rounding: ceil(k_tiles / per_slice) (so no slice is empty)."""
    return ceil_div(k_tiles, slice_k_tiles(k_tiles, splits))


def cluster_splits(level: str, tiles: int, k_tiles: int, M: int, N: int, K: int, sms: int,
                   splits: int | None, max_splits: int, min_k_tiles: int) -> int:
    """S for a level whose S slices of a tile run as one cluster (v11sl, v11t): choose_splits,
    or the `splits` a caller forced, checked and at most max_splits (the portable cluster
    size); rounded so that no slice is empty (effective_splits)."""
    if splits is None:
        s = choose_splits(tiles, k_tiles, M, N, sms=sms, max_splits=max_splits, min_k_tiles=min_k_tiles)
    else:
        s = checked_splits(level, splits, k_tiles, K, M, N)
        if s > max_splits:
            raise ValueError(f"level {level}: splits must be at most {max_splits} (one cluster per "
                             f"tile, at most the portable cluster size), got {s}")
    return effective_splits(k_tiles, s)


def resident_splits(tiles: int, k_tiles: int, splits: int, clusters) -> int:
    """The most slices, at most `splits`, whose `tiles` clusters (one per tile, a CTA per slice)
    are all resident at once: clusters(c) says how many clusters of c CTAs of the kernel fit.
    A cluster's CTAs share one GPC, and the GPCs need not hold a whole number of clusters: on
    an H100, clusters of 4 or 8 of a one-CTA-per-SM kernel fill 120 of its 132 SMs, so a plan of
    128 CTAs sized by the SMs ran its last clusters in a second wave (docs/RESULTS.md,
    thirty-sixth run). Rounded so that no slice is empty."""
    while splits > 1 and tiles > clusters(splits):
        splits -= 1
    return effective_splits(k_tiles, splits)


# ---------------------------------------------------------------------------- the reduction

REDUCE_THREADS = 256
REDUCE_BATCH = 4           # partials a thread loads before it adds them (in order)


def reduce_grid(MN: int) -> int:
    """Blocks of reduce_partials for M·N elements: one element per thread. Its sums are
    chains of S dependent loads and adds; spread thin, as many chains run at once as there
    are elements, and the launch takes about S / REDUCE_BATCH memory latencies."""
    return max(1, min(ceil_div(MN, REDUCE_THREADS), 2**31 - 1))


@cuda.jit
def reduce_partials(P, splits, MN, alpha, beta, C):
    """C[i] = alpha · (P[i] + P[MN + i] + … + P[(splits-1)·MN + i]) + beta · C[i], summed in
    that order (bit-identical on every run); beta == 0 never reads C. P, C: flat float32.
    The partials come REDUCE_BATCH at a time: their loads are independent, so they are in
    flight together, and only the adds wait on each other (a load per add took S latencies)."""
    n = uint64(MN)
    s = uint64(splits)
    step = uint64(cuda.gridDim.x) * uint64(cuda.blockDim.x)
    i = uint64(cuda.blockIdx.x) * uint64(cuda.blockDim.x) + uint64(cuda.threadIdx.x)
    while i < n:
        acc = P[i]
        z = uint64(1)
        p = cuda.local.array(REDUCE_BATCH, float32)
        while z + uint64(REDUCE_BATCH - 1) < s:
            for b in range(REDUCE_BATCH):
                p[b] = P[(z + uint64(b)) * n + i]
            for b in range(REDUCE_BATCH):
                acc += p[b]
            z += uint64(REDUCE_BATCH)
        while z < s:
            acc += P[z * n + i]
            z += uint64(1)
        if beta == 0:
            C[i] = alpha * acc
        else:
            C[i] = alpha * acc + beta * C[i]
        i += step


def reduce(P, C, splits: int, M: int, N: int, alpha: float, beta: float, stream=None) -> None:
    """Launch reduce_partials for partials P (workspace) into C (M×N, a device array or an
    operand record)."""
    from .runtime.launch import launch_numba

    MN = M * N
    args = (P, np.int32(splits), np.int64(MN), np.float32(alpha), np.float32(beta), C.reshape(MN))
    launch_numba(reduce_partials, (reduce_grid(MN),), (REDUCE_THREADS,), args, stream)
