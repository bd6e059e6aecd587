"""The data behind the side rungs' figures — k3c's coarsening, the split-K levels (k5sk, k8sk,
v11sk), k9st's stream-K schedule and v11r's register-staged loads: pure functions of those
levels' own code (k3's and k3c's warp_step, the split plans of numba_gemm.splitk and each
level's plan_splits / split_plan, k9st's stream_plan, share_start and owner, v11r's
load_width, tile_instructions, StagedTile and stage_image). Tested without
matplotlib; numba_gemm.explain.figures.variant_draw draws them.
"""
from __future__ import annotations

from ...hgemm import _common as cm
from .. import ledgers

# ---------------------------------------------------------------------------------------
# k3c: one block, 4 column tiles, one A tile


def _rect(cells) -> tuple[int, int, int, int]:
    """(r0, r1, c0, c1), half-open, of a set of (row, col) that must fill that rectangle."""
    rows, cols = {r for r, _ in cells}, {c for _, c in cells}
    r0, r1, c0, c1 = min(rows), max(rows) + 1, min(cols), max(cols) + 1
    assert len(cells) == (r1 - r0) * (c1 - c0), "not a rectangle"
    return r0, r1, c0, c1


def coarsening(level: str, n: int = 256, ph: int = 0, cover: int | None = None) -> dict:
    """What the blocks of k3 or k3c that cover the first `cover` columns of C (default: the
    level's own tile) load and compute in phase `ph`, from the global loads of the level's
    warp_step, in the order a warp issues them. Per block bx: "a": the A tile (m0, m1, k0, k1),
    "b": [(k0, k1, n0, n1) of the j-th B tile it loads], "c": [(m0, m1, n0, n1) of the outputs
    that B tile feeds (the A tile's rows × its columns: acc[j])]. Per thread of a block:
    "a_loads", "b_loads" (global loads in the phase), "as_reads" (reads of the A tile, the
    inner loop's As[ty, kk]), "outputs"; "loads_per_output" = (a + b loads) / outputs."""
    g = ledgers.geometry(level)
    cover = cover or g.tile_n
    blocks = []
    for bx in range(cover // g.tile_n):
        a, b = set(), {}
        per = {"A": 0, "B": 0, "As": 0}
        for w, st in enumerate(ledgers.warp_steps(level, n, block_xy=(bx, 0), ph=ph)):
            j = -1
            for acc in st.accesses:
                if acc.space == "global":
                    j += acc.array == "B"
                    cells = {divmod(x // ledgers.F32, n) for x in acc.addrs}
                    (a.update(cells) if acc.array == "A" else b.setdefault(j, set()).update(cells))
                    per[acc.array] += w == 0
                elif acc.array == "As" and acc.op == "load" and w == 0:
                    per["As"] += 1
        a_rect = _rect(a)
        b_rects = [_rect(b[j]) for j in sorted(b)]
        blocks.append({"bx": bx, "a": a_rect, "b": b_rects,
                       "c": [(a_rect[0], a_rect[1], r[2], r[3]) for r in b_rects]})
    outputs = g.thread_m * g.thread_n
    return {"level": level, "geometry": g, "blocks": blocks, "cover": cover, "ph": ph,
            "a_loads": per["A"], "b_loads": per["B"], "as_reads": per["As"], "outputs": outputs,
            "loads_per_output": (per["A"] + per["B"]) / outputs}


# ---------------------------------------------------------------------------------------
# split-K: the slices, the CTAs, the partials and the reduction

# One skinny shape per level: the shapes their LADDER headlines measure
SPLITK_SHAPES = {"k5sk": (16, 8192, 8192), "k8sk": (128, 4096, 4096), "v11sk": (16, 8192, 8192)}


def splitk_plan(level: str, M: int, N: int, K: int, sms: int = 132) -> dict:
    """How `level` splits an M×N×K product on `sms` SMs, from its own plan: the tile
    (bm, bn, bk), "tiles" (output tiles: the CTAs without a split), "S" and "slices" [(k_lo,
    k_hi)] in elements of K (k5sk, k8sk: split_plan's kslice; v11sk: plan_splits and slices, in
    K tiles of 64), "k_tiles" per slice, "ctas" = tiles·S, "resident" (CTAs the SMs hold at
    once: sms × CTAS_PER_SM, v11sk one per SM), "partials": [element offset z·M·N of slice z's
    M×N fp32 matrix in the workspace], "workspace" bytes (S·M·N·4; 0 when S = 1)."""
    from ... import splitk
    from ...registry import get

    mod = get(level).module
    if level == "v11sk":
        tile, S = mod.plan_splits(M, N, K, sms=sms)
        bm, bn, bk = tile.bm, tile.bn, tile.bk
        tiles = cm.cdiv(M, bm) * cm.cdiv(N, bn)
        slices = [(lo * bk, min(hi * bk, K)) for lo, hi in mod.slices(K, tile, S)]
        resident = sms
    else:
        S, kslice = mod.split_plan(M, N, K)
        assert S == mod.plan_splits(M, N, K, sms)
        bm, bn, bk = mod.TILE_M, mod.TILE_N, mod.TILE_K
        gx, gy = mod.grid(M, N)
        tiles = gx * gy
        slices = [(z * kslice, min((z + 1) * kslice, K)) for z in range(S)]
        resident = sms * mod.CTAS_PER_SM
    return {"level": level, "shape": (M, N, K), "tile": (bm, bn, bk), "tiles": tiles, "S": S,
            "slices": slices, "k_tiles": [cm.cdiv(hi - lo, bk) for lo, hi in slices],
            "ctas": tiles * S, "resident": resident,
            "partials": [z * M * N for z in range(S)] if S > 1 else [],
            "workspace": 4 * S * M * N if S > 1 else 0, "max_splits": splitk.MAX_SPLITS}


def splitk_plans(shapes: dict | None = None, sms: int = 132) -> dict:
    """level -> splitk_plan at its headline shape (SPLITK_SHAPES)."""
    return {lv: splitk_plan(lv, *shape, sms=sms) for lv, shape in (shapes or SPLITK_SHAPES).items()}


def reduction_terms(S: int) -> list[int]:
    """The order in which splitk.reduce_partials adds the partials of one element: z = 0, 1, …,
    S − 1, one after the other, then alpha once and beta·C once (tests run the kernel in the
    simulator against exactly this order)."""
    return list(range(S))


# ---------------------------------------------------------------------------------------
# stream-K: k9's waves against k9st's shares of the last ones

STREAMK_SHAPE = (256, 640, 96)   # 10 tiles of 12 K tiles: the figure's small case
STREAMK_SLOTS = 4                # resident CTAs it is shared over


def stream_schedule(M: int = STREAMK_SHAPE[0], N: int = STREAMK_SHAPE[1], K: int = STREAMK_SHAPE[2],
                    slots: int = STREAMK_SLOTS) -> dict:
    """k9 and k9st at M×N×K on `slots` resident CTAs, in units of one tile's whole K loop.
    "plan": k9st.stream_plan; "k9": per slot, [(tile, start, end)] as whole tiles come in
    waves; "k9st": per slot, [(tile, start, end, whole)] — the whole tiles' waves, then stream
    CTA c's segments in that slot, from the kernel's own share_start; "parts": {tile: (lo, hi)}
    the stream CTAs sharing each split tile (k9st.owner); "time": each level's last end."""
    from ...registry import get

    st = get("k9st").module
    p = st.stream_plan(M, N, K, slots)
    I = p.iters
    k9 = [[(t, t // slots, t // slots + 1) for t in range(j, p.tiles, slots)] for j in range(slots)]
    sched = [[(t, t // slots, t // slots + 1, True) for t in range(j, p.whole, slots)] for j in range(slots)]
    parts = {}
    if p.streams:
        n = (p.tiles - p.whole) * I
        q, r = divmod(n, p.ctas)
        t0 = p.whole // slots                     # the waves of whole tiles before the stream part
        for c in range(p.ctas):
            x, end = int(st.share_start(c, q, r, p.ctas)), int(st.share_start(c + 1, q, r, p.ctas))
            while x < end:
                s = x // I
                stop = min(end, (s + 1) * I)
                lo, hi = int(st.owner(s * I, q, r, p.ctas)), int(st.owner((s + 1) * I - 1, q, r, p.ctas))
                if hi > lo:
                    parts[p.whole + s] = (lo, hi)
                base = t0 + (x - int(st.share_start(c, q, r, p.ctas))) / I
                sched[c].append((p.whole + s, base, base + (stop - x) / I, hi == lo))
                x = stop
    ends = {"k9": max(e for row in k9 for _, _, e in row),
            "k9st": max(e for row in sched for _, _, e, _ in row)}
    return {"shape": (M, N, K), "slots": slots, "plan": p, "k9": k9, "k9st": sched, "parts": parts,
            "time": ends}


# ---------------------------------------------------------------------------------------
# v11r: load widths, instructions per K tile and where the staged registers land

RAGGED_SHAPE = (777, 5000, 3001)      # the shape suite's ragged-rows shape (bf16): LADDER's headline
STAGED_THREADS = {"A": (0, 37), "B": (9, 70)}   # threads whose pieces the figure follows


def staged_loads(M: int = RAGGED_SHAPE[0], N: int = RAGGED_SHAPE[1], K: int = RAGGED_SHAPE[2],
                 base: int = 1 << 20, threads: dict | None = None) -> dict:
    """v11r at M×N×K (row-major A: rows of K halves; B: rows of N), operands at byte address
    `base`: "wa", "wb" (load_width of each operand); "per_thread" (tile_instructions);
    "cta": warp instructions per K tile and CTA ({"loads", "stores"}) for this shape and for
    each of (8, 8), (4, 4), (2, 2) under "widths"; "tma": the instructions v11 issues per K
    tile instead (one A box and bn / 64 B panels, from _wgmma.boxes); "pieces": {"A" | "B":
    {tid: [(row, col, dst, tma)]}} for the threads of `threads` ({"A": tids, "B": tids}): each
    piece's tile coordinates (row, first column), the
    shared byte its store writes (StagedTile.stores) and the byte TMA's SWIZZLE_128B puts that
    element at (_common.tma_swizzle_128b within its 64-column panel); "corner": the ragged
    last tile (m0, n0, k0), whether stage_image equals expected_stage (TMA's stage) byte for
    byte, and its zero-filled bytes."""
    from ...hgemm import _wgmma as wg
    from ...registry import get

    r = get("v11r").module
    t = r.CONFIG
    wa, wb = r.load_width(base, K * 2), r.load_width(base, N * 2)
    warps = t.threads // 32

    def cta(a, b):
        n = r.tile_instructions(a, b, t)
        return {"loads": warps * (n["loads_a"] + n["loads_b"]), "stores": warps * (n["stores_a"] + n["stores_b"])}

    v11 = get("v11").module.CONFIG
    box_a, box_b = wg.boxes(v11)
    tma = 1 + v11.bn // box_b[1]
    ta, tb = r.operand_tiles(t, wa, wb)
    pieces = {}
    for name, tile, LD in (("A", ta, K), ("B", tb, N)):
        pieces[name] = {}
        for tid in (threads or STAGED_THREADS)[name]:
            s = tile.init(LD, 0, 0, tid)
            out = []
            for i, dst in tile.stores(s):
                row, col = s["row0"] + i * tile.STEP, s["col"]
                out.append((row, col, dst, (col // 64) * tile.PANEL + cm.tma_swizzle_128b(row * 128 + (col % 64) * 2)))
            pieces[name][tid] = out
    m0, n0, k0 = (M - 1) // t.bm * t.bm, (N - 1) // t.bn * t.bn, (K - 1) // t.bk * t.bk
    image, _ = r.stage_image(M, N, K, m0, n0, k0, wa, wb, t, base, base)
    same = image == r.expected_stage(M, N, K, m0, n0, k0, t)
    return {"shape": (M, N, K), "wa": wa, "wb": wb, "per_thread": r.tile_instructions(wa, wb, t),
            "cta": cta(wa, wb), "widths": {w: cta(*w) for w in ((8, 8), (4, 4), (2, 2))},
            "tma": tma, "boxes": (box_a, box_b), "pieces": pieces, "tiles": (ta, tb),
            "corner": {"tile": (m0, n0, k0), "same_as_tma": same, "zero_bytes": image.count(0),
                       "bytes": len(image), "rows": M - m0, "cols": N - n0, "k": K - k0},
            "config": t}
