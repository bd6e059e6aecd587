"""The blocked algorithm every level from k3 to v13 implements, in NumPy (no GPU, no Numba).

    C = alpha·A@B + beta·C, cut five ways, named as the levels name them:

    block tile   tile_m × tile_n at (row0, col0)   one CTA (blockIdx); v11: BM × BN at (m0, n0)
    K slice      tile_k deep, slice ph / K tile kt  staged in shared memory, `stages` in flight
    warp tile    warp_m × warp_n, warp              one warp (k7, k8); v11: 64 × 256, warpgroup wg
    thread tile  thread_m × thread_n at (am, bn)    one thread's accumulators (k4: a column of 8)
    k step       k_step deep, kk                    1: an outer product of FFMAs; 16: one mma/wgmma

`gemm(A, B, C, alpha, beta, tiling)` runs the loops in that order and is exact in float64
(tests/test_model.py: against A @ B for ragged shapes, with integer inputs so every order of
the sums gives the same bits). `K7`, `K8` and `V11` are the shipped tilings; `owner(tiling,
row, col)` says which block, warp and thread compute an element of C. docs/LADDER.md ("The
blocked algorithm in NumPy") shows the loop nest and which level implements which loop.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

WARP = 32


@dataclass(frozen=True)
class Tiling:
    """The tile sizes. layout "warptile": k7/k8's lanes_m × lanes_n lanes of 4×4 pieces per warp
    (numba_gemm.sgemm._warptile.WarpTiling has the same fields); "wgmma": v11's warpgroups of
    128 threads, each thread holding the m64nNk16 accumulator fragment (ptx.wgmma_acc_coords)."""
    tile_m: int = 128
    tile_n: int = 128
    tile_k: int = 8
    warp_m: int = 64
    warp_n: int = 32
    lanes_n: int = 4
    k_step: int = 1
    stages: int = 2
    layout: str = "warptile"

    @property
    def warps_n(self) -> int:
        return self.tile_n // self.warp_n

    @property
    def warps(self) -> int:             # warps (warptile) or warpgroups (wgmma) per block
        return self.tile_m // self.warp_m * self.warps_n

    @property
    def threads_per_warp(self) -> int:
        return WARP if self.layout == "warptile" else 4 * WARP

    @property
    def lanes_m(self) -> int:
        return WARP // self.lanes_n

    @property
    def thread_m(self) -> int:
        return self.warp_m // self.lanes_m if self.layout == "warptile" else 2

    @property
    def thread_n(self) -> int:
        return self.warp_n // self.lanes_n if self.layout == "warptile" else self.warp_n // 4


K7 = Tiling(tile_k=16)                       # numba_gemm.sgemm.k7_warptile.TILING
K8 = Tiling(tile_k=8)                        # k8_double_buffer.TILING, two K slices in flight
V11 = Tiling(tile_m=128, tile_n=256, tile_k=64, warp_m=64, warp_n=256, k_step=16, stages=4,
             layout="wgmma")                 # hgemm._wgmma.WgmmaTile(): BM, BN, BK, STAGES


# [excerpt:model-thread-tile]
def thread_tile(t: Tiling, warp: int, lane: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and columns of the block tile that thread `lane` of warp `warp` accumulates."""
    wr, wc = warp // t.warps_n * t.warp_m, warp % t.warps_n * t.warp_n    # the warp tile
    if t.layout == "warptile":                       # k7/k8: 4×4 pieces, lanes_m × lanes_n apart
        am, bn = wr + lane // t.lanes_n * 4, wc + lane % t.lanes_n * 4
        i, j = np.arange(t.thread_m), np.arange(t.thread_n)
        return am + i // 4 * (4 * t.lanes_m) + i % 4, bn + j // 4 * (4 * t.lanes_n) + j % 4
    w, g, q = lane // 32, lane % 32 // 4, lane % 4   # v11: a warpgroup's 128 threads
    rows = wr + 16 * w + g + 8 * np.arange(2)        # d[4j + 2h + e]: row 16w + g + 8h,
    j, e = np.divmod(np.arange(t.thread_n), 2)       #   column 8j + 2q + e
    return rows, wc + 8 * j + 2 * q + e
# [/excerpt]


def gemm(A, B, C=None, alpha=1.0, beta=0.0, t: Tiling = K8) -> np.ndarray:
    """alpha·A@B + beta·C in float64, block by block, slice by slice, thread by thread."""
    A, B = np.asarray(A, np.float64), np.asarray(B, np.float64)
    (M, K), N = A.shape, B.shape[1]
    out = np.empty((M, N)) if C is None else np.array(C, np.float64)
    # [excerpt:model-loops]
    for row0 in range(0, M, t.tile_m):                   # block tile: blockIdx.y (k8), m0 (v11)
        for col0 in range(0, N, t.tile_n):               #             blockIdx.x (k8), n0 (v11)
            acc = np.zeros((t.tile_m, t.tile_n))         # the block's accumulators (registers)

            def load(ph):                                # one K slice, zero past M, N and K
                As, Bs = np.zeros((t.tile_m, t.tile_k)), np.zeros((t.tile_k, t.tile_n))
                a = A[row0:row0 + t.tile_m, ph:ph + t.tile_k]
                b = B[ph:ph + t.tile_k, col0:col0 + t.tile_n]
                As[:a.shape[0], :a.shape[1]], Bs[:b.shape[0], :b.shape[1]] = a, b
                return As, Bs

            slices = range(0, K, t.tile_k)               # K slices: ph (k8), kt * BK (v11)
            ring = {f: load(ph) for f, ph in enumerate(slices[:t.stages - 1])}
            for kt, ph in enumerate(slices):
                nxt = kt + t.stages - 1                  # in flight while slice kt is multiplied
                if nxt < len(slices):
                    ring[nxt] = load(slices[nxt])
                As, Bs = ring.pop(kt)
                for warp in range(t.warps):              # warp tile (k7+), warpgroup wg (v11)
                    for lane in range(t.threads_per_warp):
                        rows, cols = thread_tile(t, warp, lane)
                        for kk in range(0, t.tile_k, t.k_step):   # k step: FFMA, mma or wgmma
                            a = As[rows, kk:kk + t.k_step]        # thread_m × k_step
                            b = Bs[kk:kk + t.k_step, cols]        # k_step × thread_n
                            acc[np.ix_(rows, cols)] += a @ b
            m, n = min(t.tile_m, M - row0), min(t.tile_n, N - col0)   # masked store
            c = out[row0:row0 + m, col0:col0 + n]
            c[...] = alpha * acc[:m, :n] + (beta * c if beta != 0 else 0)   # beta 0: C not read
    # [/excerpt]
    return out


def owner(t: Tiling, row: int, col: int) -> dict:
    """Which block (row0, col0), warp and lane compute C[row, col], and which of the thread's
    accumulators (i, j) holds it."""
    row0, col0 = row // t.tile_m * t.tile_m, col // t.tile_n * t.tile_n
    r, c = row - row0, col - col0
    for warp in range(t.warps):
        for lane in range(t.threads_per_warp):
            rows, cols = thread_tile(t, warp, lane)
            if r in rows and c in cols:
                return {"row0": row0, "col0": col0, "warp": warp, "lane": lane,
                        "i": int(np.flatnonzero(rows == r)[0]), "j": int(np.flatnonzero(cols == c)[0])}
    raise ValueError(f"no thread of {t} owns ({row}, {col})")
