"""The data behind the concept figures of docs/: pure functions of the package's code (the
addresses a warp touches, the bank of every word, the order blocks are launched in, ...), with
their facts from the level modules, the ledgers and numba_gemm.hgemm._common. They need
nothing but the package and are tested without matplotlib; numba_gemm.explain.figures.draw draws them.
"""
from __future__ import annotations

import math

from ...hgemm import _common as cm
from .. import ledgers


def warp_accesses(level: str, n: int = 4096, warp: int = 0, block_xy=(1, 1), ph: int = 1):
    """The accesses of one warp in one step of an SGEMM level (the request/cycle ledgers' input)."""
    steps = ledgers.warp_steps(level, n, block_xy=block_xy, ph=ph)
    return steps[warp].accesses


def segments_of(level: str, n: int = 4096) -> dict:
    """array -> (lane byte addresses, the 128-byte segment each lane falls in) of the first
    global load of A and of B in one k step of k1 or k2."""
    out = {}
    for a in warp_accesses(level, n):
        if a.space == "global" and a.array not in out:
            out[a.array] = (list(a.addrs), [x // ledgers.SEGMENT for x in a.addrs])
    return out


def tile_reads(level: str, n: int = 128, block_xy=(1, 1)) -> dict:
    """For one block of k3/k3c: array -> {element index: phase in which it was loaded}, over all
    phases and all warps, from the global loads of the level's warp_step."""
    g = ledgers.geometry(level)
    out = {"A": {}, "B": {}}
    for ph in range(math.ceil(n / g.tile_k)):
        for st in ledgers.warp_steps(level, n, block_xy=block_xy, ph=ph):
            for a in st.accesses:
                if a.space == "global":
                    for x in a.addrs:
                        for e in range(x // ledgers.F32, (x + a.width) // ledgers.F32):
                            out[a.array].setdefault(e, ph)
    return out


def thread_operands(level: str, lane: int = 0, warp: int = 0, k: int = 0) -> dict:
    """What one thread reads from shared memory at one k of the inner loop, and the outputs
    those reads feed: {"a_rows", "b_cols", "fmas", "loads"} (the outer product of k3..k6).

    The tile layouts are decoded from the shared addresses of the level's warp_step: As is
    [tile_m][tile_k] (k6 stores it transposed, [tile_k][tile_m]: its module docstring says why),
    Bs is [tile_k][tile_n] after As."""
    g = ledgers.geometry(level)
    a_size = g.tile_m * g.tile_k * ledgers.F32
    rows, cols, loads = set(), set(), 0
    for a in warp_accesses(level, 4096, warp):
        if not (a.space == "shared" and a.op == "load" and a.inner):
            continue
        x = a.addrs[lane]
        words = range(x // ledgers.F32, (x + a.width) // ledgers.F32)
        if a.array == "As":
            kk_m = [(w // g.tile_m, w % g.tile_m) if level == "k6" else (w % g.tile_k, w // g.tile_k)
                    for w in words]
            hit = [m for kk, m in kk_m if kk == k]
            rows.update(hit)
        else:
            kk_n = [divmod(w - a_size // ledgers.F32, g.tile_n) for w in words]
            hit = [c for kk, c in kk_n if kk == k]
            cols.update(hit)
        loads += bool(hit)
    return {"a_rows": sorted(rows), "b_cols": sorted(cols), "fmas": len(rows) * len(cols),
            "loads": loads, "geometry": g}


def warp_tiling(k: int = 0, level: str = "k7") -> dict:
    """A warp-tiled level's block → warp → thread tiling (k7's by default), decoded from the
    LDS.128 addresses of its warp_step at one k: {"owner": {(m, n): [(warp, lane), ...]} over the
    block tile (one owner each), "loads": {warp: [(array, distinct float4s, wavefronts)]},
    "tiling": the level's TILING}.

    As is [tile_k][a_stride] (A transposed, rows padded), Bs is [tile_k][tile_n] after As; a
    lane accumulates the outer product of the rows it reads from As and the columns from Bs."""
    from ...registry import get

    mod = get(level).module
    t = mod.TILING
    b_base = getattr(mod, "BUFFERS", 1) * t.tile_k * t.a_stride * ledgers.F32   # Bs follows all of As
    owner, loads = {}, {}
    for warp, step in enumerate(ledgers.warp_steps(level, 4096, block_xy=(0, 0), ph=0)):
        rows, cols = [set() for _ in range(ledgers.WARP)], [set() for _ in range(ledgers.WARP)]
        loads[warp] = []
        for a in step.accesses:
            if not (a.space == "shared" and a.op == "load" and a.inner):
                continue
            stride, base, hit = ((t.a_stride, 0, rows) if a.array == "As" else (t.tile_n, b_base, cols))
            if (a.addrs[0] - base) // ledgers.F32 // stride != k:
                continue
            for lane, x in enumerate(a.addrs):
                w = (x - base) // ledgers.F32
                hit[lane].update(range(w % stride, w % stride + a.width // ledgers.F32))
            loads[warp].append((a.array, len(set(a.addrs)), ledgers.bank_profile(a.addrs, a.width).wavefronts))
        for lane in range(ledgers.WARP):
            for m in rows[lane]:
                for n in cols[lane]:
                    owner.setdefault((m, n), []).append((warp, lane))
    return {"owner": owner, "loads": loads, "tiling": t}


def bank_grid(addrs, width: int = 4) -> dict:
    """The banks of one warp-level shared access: {(depth, bank): lanes}, where depth is the
    rank of the word among the distinct words in its bank (depth > 0 = a conflict: that bank
    serves another pass); plus the ledger's profile and cost class of the access."""
    words: dict[int, list[int]] = {}
    for lane, x in enumerate(addrs):
        for w in range(x // ledgers.BANK_BYTES, (x + width) // ledgers.BANK_BYTES):
            words.setdefault(w, []).append(lane)
    cells, depth = {}, {}
    for w in sorted(words):
        bank = w % ledgers.BANKS
        d = depth[bank] = depth.get(bank, -1) + 1
        cells[(d, bank)] = words[w]
    return {"cells": cells, "profile": ledgers.bank_profile(addrs, width),
            "kind": ledgers.shared_kind(addrs, width)}


def bank_examples() -> list[tuple[str, tuple[int, ...], int]]:
    """(title, addresses, width) of three shared accesses taken from the levels' warp_steps, and
    the column read of a 32×32 float tile without and with one float of padding per row."""
    k3 = warp_accesses("k3")
    as_k0 = next(a for a in k3 if a.array == "As" and a.inner)
    bs_k0 = next(a for a in k3 if a.array == "Bs" and a.inner)
    k6_store = next(a for a in warp_accesses("k6") if a.array == "As" and a.op == "store")
    col = tuple(4 * 32 * lane for lane in range(32))           # As[lane][0], rows of 32 floats
    padded = tuple(4 * 33 * lane for lane in range(32))        # As[lane][0], rows of 33 floats
    return [
        ("k3 As[ty, k]: broadcast", as_k0.addrs, as_k0.width),
        ("k3 Bs[k, tx]: conflict-free", bs_k0.addrs, bs_k0.width),
        ("k6 transposed As store", k6_store.addrs, k6_store.width),
        ("column of a 32×32 tile", col, 4),
        ("same column, rows padded to 33", padded, 4),
    ]


def swizzle_map(swizzled: bool = True) -> list[list[int]]:
    """[row][logical 16-byte chunk] -> physical chunk of v8's 128-byte rows (8 rows shown)."""
    return [[(cm.swizzle128(r, c) - r * 128) // 16 if swizzled else c for c in range(8)]
            for r in range(8)]


def launch_order(grid_m: int, grid_n: int, super_mn: tuple[int, int] | None) -> list[list[int]]:
    """[tile row][tile column] -> the blockIdx that computes it: row-major (n fastest, v8) when
    super_mn is None, else v9's super-tile decode."""
    order = [[-1] * grid_n for _ in range(grid_m)]
    for bid in range(grid_m * grid_n):
        if super_mn is None:
            tm, tn = divmod(bid, grid_n)
        else:
            tm, tn = cm.supertile_decode(bid, grid_m, grid_n, *super_mn)
        order[tm][tn] = bid
    return order


def first_wave(level: str) -> int:
    """CTAs resident at once: the H200's SMs × the blocks per SM the level is built for."""
    from ...registry import get

    return ledgers.h200().sms * get(level).module.CONFIG.min_blocks


def wave_panels(order: list[list[int]], wave: int) -> tuple[int, int]:
    """(A row panels, B column panels) the first `wave` blocks read: what L2 must hold for them."""
    rows = {r for r, line in enumerate(order) for b in line if b < wave}
    cols = {c for line in order for c, b in enumerate(line) if b < wave}
    return len(rows), len(cols)


def hgemm_stages(level: str) -> int:
    """Pipeline depth of an HGEMM level: its CONFIG's stages (v7's double buffer is 2)."""
    from ...registry import get

    return get(level).module.CONFIG.stages


def pipeline_schedule(stages: int, tiles: int = 10, load: float = 2.5, lag: int = 1) -> list[dict]:
    """A schematic software pipeline: per k tile, when its copy runs and when the MMAs read it.

    One tile's MMAs take 1 time unit and its copy `load` units (an assumption for the picture,
    not a measurement). Iteration k issues the copy of tile k + stages - lag, refilling the
    buffer read `lag` iterations ago, then multiplies tile k; the tiles before that are issued
    before the loop. So the copy of tile i starts once the MMAs of tile i - stages + lag - 1
    are done (at once for the first stages - lag + 1 tiles), and stages - lag tiles are in
    flight ahead of the one being multiplied. lag 1 (v7's double buffer) refills the buffer
    read just before; v10 refills the one read CONFIG.tma_lag (2) iterations ago. The MMAs of
    tile i start when both its copy and tile i - 1 are done."""
    if not 1 <= lag < stages:
        raise ValueError(f"lag {lag}: a buffer read 1 .. {stages - 1} iterations ago")
    out = []
    for i in range(tiles):
        j = i - stages + lag - 1                       # its copy waits for this tile's MMAs
        free = out[j]["mma_end"] if j >= 0 else 0.0
        issue = max(free, out[i - 1]["copy_start"] if i else 0.0)
        start = max(issue + load, out[i - 1]["mma_end"] if i else 0.0)
        out.append({"tile": i, "slot": i % stages, "copy_start": issue, "copy_end": issue + load,
                    "mma_start": start, "mma_end": start + 1.0})
    return out


def refill_lag(level: str) -> int:
    """How many iterations ago the buffer a level refills was read: the -DHG_TMA_LAG its kernel
    is compiled with (v10: CONFIG.tma_lag), else 1 (v7–v9's cp.async buffers: iteration k
    refills the buffer the barrier ending iteration k - 1 released)."""
    from ...registry import get

    for d in getattr(get(level).module, "DEFINES", ()):
        if d.startswith("-DHG_TMA_LAG="):
            return int(d.partition("=")[2])
    return 1


def level_pipeline(level: str, tiles: int = 10, load: float = 2.5) -> list[dict]:
    """pipeline_schedule with the level's own stages and refill lag: what the pipelines figure draws."""
    return pipeline_schedule(hgemm_stages(level), tiles, load, refill_lag(level))


def k6_loader_map(n: int = 4096) -> dict:
    """k6's tile loads, from the global float4 loads of its warp_step (block (0, 0), phase 0):
    {"A": {(row, float4 column): (thread, i)}, "B": {...}} — which thread loads each float4 of the
    block's A tile (tile_m × tile_k) and B tile (tile_k × tile_n), in its i-th load of that array.
    The loads go by linear thread id, so consecutive lanes take consecutive float4s of a row."""
    out = {"A": {}, "B": {}}
    for warp, step in enumerate(ledgers.warp_steps("k6", n, block_xy=(0, 0), ph=0)):
        count = {"A": 0, "B": 0}
        for a in step.accesses:
            if a.space != "global" or a.op != "load":
                continue
            for lane, x in enumerate(a.addrs):
                row, col = divmod(x // ledgers.F32, n)
                out[a.array][(row, col // 4)] = (warp * ledgers.WARP + lane, count[a.array])
            count[a.array] += 1
    return out


WGMMA_K_STEP = 16            # halves per wgmma k step (m64nNk16)


def wgmma_tile_layout(config=None) -> dict:
    """How one stage of the wgmma levels sits in shared memory, from the tile record
    (numba_gemm.hgemm._wgmma.WgmmaTile) and TMA's 128-byte swizzle (_common.tma_swizzle_128b):

      "a": {(row, logical 16-byte chunk): physical byte offset} of one consumer's 64 × 64 A tile
           (K-major: 128-byte rows of 64 halves);
      "b": {(k row, panel, logical chunk): physical byte offset} of the bk × bn B tile
           (MN-major: bn / 64 panels of bk k-rows × 128 bytes, each one TMA box);
      "a_desc", "b_desc": {k step: (start byte offset, LBO, SBO)} as the kernels build them
           (A: +32 bytes per k step, LBO 16 (unused), SBO 1024; B: +16 k rows = 2048 bytes per
           k step, LBO = one panel, SBO 1024);
      "atom": 8 rows × 128 bytes, the span of the swizzle (and SBO); "core": 8 rows × 16 bytes."""
    from ...hgemm import _wgmma as wg

    t = config or wg.WgmmaTile()
    a_bytes = t.bm * t.bk * 2
    panel = t.bk * 128                                  # bytes of one 64-column B panel
    a = {(r, c): cm.tma_swizzle_128b(r * 128 + c * 16) for r in range(64) for c in range(8)}
    b = {(k, p, c): a_bytes + p * panel + cm.tma_swizzle_128b(k * 128 + c * 16)
         for k in range(t.bk) for p in range(t.bn // 64) for c in range(8)}
    steps = t.bk // WGMMA_K_STEP
    a_desc = {kk: (kk * WGMMA_K_STEP * 2, 16, 1024) for kk in range(steps)}
    b_desc = {kk: (a_bytes + kk * WGMMA_K_STEP * 128, panel, 1024) for kk in range(steps)}
    return {"a": a, "b": b, "a_desc": a_desc, "b_desc": b_desc, "atom": 8 * 128, "core": 8 * 16,
            "panel": panel, "a_bytes": a_bytes, "tile": t}


def mbarrier_ring(stages: int, tiles: int, lag: int | None = None) -> list[dict]:
    """The full/empty mbarrier ring of v10–v13 over `tiles` K tiles with `stages` stages: per
    K tile f, its stage s = f mod stages and use u = f div stages (the u-th time that stage is
    filled), the parity the consumers wait on full[s] for it (u mod 2), whether the producer
    first waits on empty[s] (from the second use on) and with which parity ((u - 1) mod 2: the
    phase the consumers completed when they released the previous use), and "issue_at", the
    consumer iteration at whose start the copy is issued (-1: before the loop): f - (stages - lag)
    for v10 and v11, whose computing thread 0 refills the stage read `lag` iterations ago; with
    lag None (v12, v13: a producer warpgroup) as soon as the consumers released the stage at the
    end of iteration f - stages, i.e. f - stages + 1."""
    out = []
    for f in range(tiles):
        s, u = f % stages, f // stages
        at = f - stages + 1 if lag is None else f - (stages - lag)
        out.append({"tile": f, "stage": s, "use": u, "full_parity": u & 1,
                    "empty_wait": u > 0, "empty_parity": (u - 1) & 1 if u else None,
                    "issue_at": at if u else -1 if lag is None else max(-1, at)})
    return out


def phase_timeline(double: bool, phases: int = 5, latency: float = 0.8, store: float = 0.15,
                   sync: float = 0.05) -> list[dict]:
    """A schematic of one block's K loop, per phase p: its global loads (issue to return), the
    stores of the loaded registers into a shared buffer, the barrier(s), and the FFMA of the
    phase. One phase's FFMA take 1 time unit, a load `latency` units (an assumption for the
    picture, not a measurement). Single-buffered (k7): load p, store it, barrier, multiply p,
    barrier — the load waits for the multiply and the multiply for the load. Double-buffered (k8):
    the loads of p + 1 are issued before multiplying p from buffer p mod 2, stored into the other
    buffer after it, one barrier per phase."""
    out, t = [], 0.0
    if not double:
        for p in range(phases):
            load = (t, t + latency)
            st = (load[1], load[1] + store)
            mult = (st[1] + sync, st[1] + sync + 1.0)
            out.append({"phase": p, "buffer": 0, "load": load, "store": st, "ffma": mult,
                        "barriers": [st[1] + sync, mult[1] + sync]})
            t = mult[1] + sync
        return out
    load = (0.0, latency)                               # the prologue: phase 0 into buffer 0
    st = (load[1], load[1] + store)
    t = st[1] + sync
    out.append({"phase": 0, "buffer": 0, "load": load, "store": st, "ffma": None, "barriers": [t]})
    for p in range(phases):
        mult = (t, t + 1.0)
        nxt = (t, t + latency) if p + 1 < phases else None        # the loads of p + 1, in flight
        st = (max(mult[1], nxt[1]), max(mult[1], nxt[1]) + store) if nxt else None
        end = (st[1] if st else mult[1]) + sync
        out[-1]["ffma"] = mult
        if nxt:
            out.append({"phase": p + 1, "buffer": (p + 1) % 2, "load": nxt, "store": st, "ffma": None,
                        "barriers": [end]})
        t = end
    return out
