"""The data behind the tensor-core rungs' figures (v8/v8py's fragments, v10's TMA box, v12's
roles, v13's cluster and schedule, the epilogue overlap of v12/v13): pure functions of the
package's code — the fragment layouts and ldmatrix of numba_gemm.ptx.mma_sync, TMA's box of
numba_gemm.ptx.hopper, the tile record and boxes of numba_gemm.hgemm._wgmma, v13's launch and
tile order, and the constants the native kernels declare (read from their source). Tested
without matplotlib; numba_gemm.explain.figures.tensor_draw draws them.
"""
from __future__ import annotations

import math
import re

import numpy as np

from ...hgemm import _common as cm
from ...runtime.nvrtc import native_dir
from .. import ledgers

def native_constants(source: str) -> dict[str, int]:
    """NAME -> value of every `constexpr int NAME = <integer>` (one or several per line) of a
    native source, e.g. v12_warpspec.cu's PRODUCER_REGS and CONSUMER_REGS: the figures read
    the numbers the kernel compiles with instead of copying them."""
    text = (native_dir() / source).read_text()
    out = {}
    for decl in re.findall(r"constexpr\s+int\s+([^;]+);", text):
        for name, value in re.findall(r"(\w+)\s*=\s*(\d+)\s*(?:,|$)", decl):
            out[name] = int(value)
    return out


# ---------------------------------------------------------------------------------------
# mma.sync m16n8k16 and ldmatrix (v8, v9, v10 and v8py)

# The row each lane hands ldmatrix for one 16 x 16 fragment, as native/mma_stage.cuh's
# a_lane_offset / b_lane_offset compute it (row, 16-byte chunk), before the swizzle:
LDMATRIX_ROWS = {
    "A": lambda lane: (lane % 16, lane // 16),                         # x4: row m, chunk of k
    "B": lambda lane: (lane % 8 + 8 * ((lane // 8) % 2), lane // 16),  # x4.trans: row k, chunk of n
}


def mma_fragments() -> dict:
    """Who holds what in one mma.sync.m16n8k16 (numba_gemm.ptx.mma_sync's fragment layouts):
    "A": {(m, k): (lane, register, half)} of the 16 x 16 A, "B": {(k, n): ...} of the 16 x 8
    B, "C": {(m, n): (lane, register)} of the 16 x 8 fp32 accumulator; and ldmatrix:
    "rows": {"A" | "B": {lane: (row, chunk)}} the row address each lane gives ldmatrix.x4
    (.trans for B), "loaded": {"A" | "B": {(lane, register, half): (row, col)}} the element of
    the 16 x 16 shared tile (row-major, 32-byte rows) that ldmatrix_warp delivers there."""
    from ...ptx import mma_sync as ms

    out = {"A": {}, "B": {}, "C": {}, "rows": {}, "loaded": {}}
    for lane in range(32):
        for r in range(4):
            out["C"][ms.c_fragment_coords(lane, r)] = (lane, r)
            for h in (0, 1):
                out["A"][ms.a_fragment_coords(lane, r, h)] = (lane, r, h)
                if r < 2:
                    out["B"][ms.b_fragment_coords(lane, r, h)] = (lane, r, h)
    tile = np.arange(256, dtype=np.uint16).reshape(16, 16)       # element (i, j) holds 16 i + j
    for arr, trans in (("A", False), ("B", True)):
        rows = {lane: LDMATRIX_ROWS[arr](lane) for lane in range(32)}
        regs = ms.ldmatrix_warp(tile.ravel().view(np.uint8), [32 * r + 16 * c for r, c in rows.values()], trans)
        out["rows"][arr] = rows
        out["loaded"][arr] = {(lane, r, h): divmod((regs[lane][r] >> 16 * h) & 0xFFFF, 16)
                              for lane in range(32) for r in range(4) for h in (0, 1)}
    return out


# ---------------------------------------------------------------------------------------
# TMA boxes (v10-v13)

def tma_boxes(M: int = 200, K: int = 160, N: int = 180, tile_row: int = 1, kt: int = 2,
              tile_col: int = 0) -> dict:
    """One stage's TMA copies for a ragged example (M, N, K not multiples of the tile), from
    _wgmma.boxes (the A box and B panel of every TMA level) and ptx.hopper.tma_box (what the
    copy writes, zero outside the matrix): "box_a", "box_b" (rows, cols); "a": the A box at
    column kt·bk, row tile_row·bm, "b": B's panels at row kt·bk, columns n0 + 64 p, each as
    {"x", "y", "real": bool array (rows, cols), the elements inside the matrix}; "panels": how
    many B panels the producer issues (those not wholly right of N); "tx": the bytes full[s]
    expects (every box counted whole, zero fill included); "a_bytes", "panel_bytes"."""
    from ...hgemm import _wgmma as wg
    from ...ptx.hopper import tma_box
    from ...registry import get

    t = get("v12").module.CONFIG
    box_a, box_b = wg.boxes(t)
    ones_a, ones_b = np.ones((M, K), np.int8), np.ones((K, N), np.int8)
    n0 = tile_col * t.bn
    panels = min(t.bn // box_b[1], cm.cdiv(N - n0, box_b[1]))
    a = {"x": kt * t.bk, "y": tile_row * t.bm}
    a["real"] = tma_box(ones_a, a["x"], a["y"], *box_a).astype(bool)
    b = []
    for p in range(panels):
        x, y = n0 + box_b[1] * p, kt * t.bk
        b.append({"x": x, "y": y, "real": tma_box(ones_b, x, y, *box_b).astype(bool)})
    a_bytes, panel_bytes = box_a[0] * box_a[1] * 2, box_b[0] * box_b[1] * 2
    return {"M": M, "K": K, "N": N, "box_a": box_a, "box_b": box_b, "a": a, "b": b,
            "panels": panels, "tx": a_bytes + panels * panel_bytes, "a_bytes": a_bytes,
            "panel_bytes": panel_bytes, "tile": t}


# ---------------------------------------------------------------------------------------
# v12: roles and the register split

def v12_roles(level: str = "v12") -> dict:
    """v12's (or v13's) warpgroups and registers: "warpgroups": [(role, first thread, threads,
    registers per thread after setmaxnreg, rows of the tile or None)], from the level's CONFIG
    and the PRODUCER_REGS / CONSUMER_REGS its .cu compiles with; "entry": the cap every thread
    starts with under __launch_bounds__(threads, 1) (the register file / threads, down to a
    multiple of 8); "file": the SM's register file (the .cu's static_assert bound); "used"."""
    from ...registry import get

    mod = get(level).module
    t, src = mod.CONFIG, mod.SOURCE
    k = native_constants(src)
    text = (native_dir() / src).read_text()
    file_regs = int(re.search(r"<=\s*(\d+),\s*\"register file\"", text).group(1))
    wgs = [("producer", 0, 128, k["PRODUCER_REGS"], None)]
    wgs += [("consumer", 128 * (c + 1), 128, k["CONSUMER_REGS"], (64 * c, 64 * c + 63))
            for c in range(t.consumers)]
    assert sum(w[2] for w in wgs) == t.threads
    return {"warpgroups": wgs, "entry": file_regs // t.threads // 8 * 8, "file": file_regs,
            "used": sum(w[2] * w[3] for w in wgs), "threads": t.threads, "tile": t}


# ---------------------------------------------------------------------------------------
# v13: the cluster's multicast and the persistent schedule

def v13_multicast() -> dict:
    """Which CTA of a v13 cluster loads what per stage, as the producer's loop does: each rank
    its own A box and B panels rank, rank + CLUSTER, ... multicast to every CTA of the cluster.
    {rank: {"a_bytes", "panels": [...], "issued": bytes it reads from L2, "received": bytes
    its full[s] expects}}, plus "v12_issued" (a v12 CTA reads its whole stage)."""
    from ...registry import get

    mod = get("v13").module
    t, cluster = mod.CONFIG, mod.CLUSTER
    a_bytes, panel = t.bm * t.bk * 2, t.bk * 128
    panels = t.bn // 64
    out = {}
    for rank in range(cluster):
        mine = list(range(rank, panels, cluster))
        out[rank] = {"a_bytes": a_bytes, "panels": mine, "issued": a_bytes + len(mine) * panel,
                     "received": a_bytes + panels * panel}
    return {"ranks": out, "cluster": cluster, "panel": panel, "v12_issued": t.stage_bytes,
            "stage_bytes": t.stage_bytes}


def v13_schedule(M: int = 4096, N: int = 4096, K: int = 4096, clusters: int | None = None) -> dict:
    """v13's persistent walk over the output tiles: {"owner": {(tile row, tile col): (cluster,
    rank, round)}} — cluster c computes pair-tiles c, c + G, c + 2G, ... (round = which of
    them), each decoded by v9's super-tile order over the grid of pairs (super-rows counted in
    clusters, as v13.run passes them), rank r taking tile row CLUSTER·pm + r. G is v13's
    launch_config with `clusters` resident (default: the H200's SMs / CLUSTER, one CTA per SM);
    the super-tile from tile_order with the H200's L2."""
    from ...registry import get

    mod = get("v13").module
    t, cluster = mod.CONFIG, mod.CLUSTER
    card = ledgers.h200()
    if clusters is None:
        clusters = card.sms // cluster
    grid, _, _ = mod.launch_config(M, N, K, max_clusters=clusters)
    g = grid[0] // cluster
    super_m, super_n = mod.tile_order(M, N, K, l2_bytes=card.l2_bytes)
    grid_m, grid_n = cm.cdiv(M, t.bm), cm.cdiv(N, t.bn)
    pair_m = cm.cdiv(grid_m, cluster)
    owner = {}
    for p in range(pair_m * grid_n):
        pm, bn = cm.supertile_decode(p, pair_m, grid_n, super_m // cluster, super_n)
        for rank in range(cluster):
            if cluster * pm + rank < grid_m:
                owner[(cluster * pm + rank, bn)] = (p % g, rank, p // g)
    return {"owner": owner, "clusters": g, "rounds": math.ceil(pair_m * grid_n / g),
            "grid": (grid_m, grid_n), "super": (super_m, super_n), "cluster": cluster,
            "shape": (M, N, K)}


# ---------------------------------------------------------------------------------------
# The epilogue and the next tile's loads (v12 against v13)

def epilogue_timeline(level: str, tiles: int = 3, k_tiles: int = 6, load: float = 2.5,
                      epilogue: float = 3.0, setup: float = 1.5) -> dict:
    """A schematic of one SM running `tiles` output tiles of v12 or v13, in units of one K
    tile's wgmma (the durations are assumptions for the picture, not measurements).

    Both levels' producer issues K tile i once empty[i mod stages] has completed for its
    previous use (the consumers release a stage when the next stage's wgmma are issued and
    this one's have finished, i.e. at the end of its wgmma here); its copy lands `load` later;
    the consumers multiply K tile i once it landed and tile i - 1 is done; after a tile's last
    K tile they store C from registers (`epilogue`) — the tensor cores idle.
    v12: one CTA per tile; the SM's next CTA starts after this one exits, with `setup` (launch,
    barrier set-up) before its producer issues the first load. v13 (persistent): one set-up,
    then the ring runs on across tiles, so the next tile's loads are issued during this tile's
    last K tiles and epilogue. Returns {"stages", "tiles": [{"setup", "loads": [(issue, land)],
    "wgmma": [(start, end)], "epilogue": (start, end), "ring": [stage of each K tile]}], "end"}."""
    from ...registry import get

    stages = get(level).module.CONFIG.stages
    persistent = level == "v13"
    released: list[float] = []          # per K tile of the whole run, when its stage is freed
    issue_free = 0.0                    # the producer thread issues one copy at a time
    prev_end = 0.0                      # the consumers: end of the previous wgmma / epilogue
    out = []
    for tile in range(tiles):
        start = prev_end if not persistent else 0.0
        su = (start, start + setup) if (not persistent or tile == 0) else None
        if su:
            issue_free = max(issue_free, su[1])
            prev_end = su[1]
        if not persistent:
            released = []               # v12: each CTA starts a fresh ring
        loads, mma, ring = [], [], []
        for kt in range(k_tiles):
            i = len(released)
            ring.append(i % stages)
            issue = max(issue_free, released[i - stages] if i >= stages else 0.0)
            issue_free = issue
            land = issue + load
            s = max(land, prev_end)
            loads.append((issue, land))
            mma.append((s, s + 1.0))
            released.append(s + 1.0)
            prev_end = s + 1.0
        ep = (prev_end, prev_end + epilogue)
        prev_end = ep[1]
        out.append({"setup": su, "loads": loads, "wgmma": mma, "epilogue": ep, "ring": ring})
    return {"stages": stages, "tiles": out, "end": prev_end, "level": level}
