"""The concept figures of docs/, drawn from numba_gemm.explain.figures.data with matplotlib (the `plot`
extra: `pip install -e ".[plot]"`), imported only when a figure is drawn."""
from __future__ import annotations

import math
from pathlib import Path

from ...hgemm import _common as cm
from .. import ledgers
from .data import (WGMMA_K_STEP, bank_examples, bank_grid, first_wave, hgemm_stages, k6_loader_map,
                   launch_order, level_pipeline, mbarrier_ring, phase_timeline, pipeline_schedule, refill_lag, segments_of,
                   swizzle_map, thread_operands, tile_reads, warp_tiling, wave_panels,
                   wgmma_tile_layout)

BLUE, RED, GREEN, GREY, ORANGE = "#4c72b0", "#c44e52", "#55a868", "#8c8c8c", "#dd8452"


def _plt():
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("the figures need matplotlib: pip install -e '.[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "figure.dpi": 110,
                         "savefig.bbox": "tight", "savefig.pad_inches": 0.1})
    return plt


def _save(fig, path, title: str | None = None, fontsize: int = 10):
    """Write the figure; with `title`, its suptitle first and a tight layout under it."""
    if title is not None:
        fig.suptitle(title, fontsize=fontsize)
        fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})   # no version stamp: regenerating is a no-op
    import matplotlib.pyplot as plt

    plt.close(fig)


def draw_segments(path):
    """k1 vs k2: the 32 lanes of one warp and the 128-byte segments their loads touch."""
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=(12, 5.6))
    for col, level in enumerate(("k1", "k2")):
        segs = segments_of(level)
        for row, arr in enumerate(("A", "B")):
            ax = axes[row][col]
            addrs, seg = segs[arr]
            distinct = sorted(set(seg))
            w = 0.85 * 32 / len(distinct) if len(distinct) > 1 else 24.0
            left = {s: (i + 0.5) * 32 / len(distinct) - 0.5 - w / 2 for i, s in enumerate(distinct)}
            for lane, (x, s) in enumerate(zip(addrs, seg)):   # to the lane's word in its segment
                end = left[s] + (x % ledgers.SEGMENT + 2) / ledgers.SEGMENT * w
                ax.plot([lane, end], [1, 0], color=BLUE, lw=0.7, alpha=0.6)
            ax.scatter(range(32), [1] * 32, s=22, color=BLUE, zorder=3)
            for s in distinct:
                ax.add_patch(plt.Rectangle((left[s], -0.25), w, 0.25,
                                           color=RED if len(distinct) > 1 else GREEN, alpha=0.8))
            if len(distinct) == 1:
                ax.text(left[distinct[0]] + w / 2, -0.125, "one 128-byte segment (32 floats)",
                        ha="center", va="center", fontsize=8, color="white")
            stride = addrs[1] - addrs[0]
            how = ("all lanes, one address (broadcast)" if stride == 0 else
                   f"lanes {stride} bytes apart")
            ax.set_title(f"{level}: {arr} load — {how}\n→ {len(distinct)} "
                         f"request{'s' if len(distinct) > 1 else ''} (128-byte segment"
                         f"{'s' if len(distinct) > 1 else ''})")
            ax.set_xlim(-1, 32)
            ax.set_ylim(-0.45, 1.25)
            ax.set_yticks([0, 1], ["segments", "lanes"])
            ax.set_xticks([0, 8, 16, 24, 31])
            ax.set_xlabel("lane" if row else "")
            for side in ("top", "right"):
                ax.spines[side].set_visible(False)
    rl = {lv: ledgers.request_ledger(lv).requests_per_fma for lv in ("k1", "k2")}
    _save(fig, path, f"One warp, one k, M=N=K=4096 (numba_gemm.explain.ledgers): k1 {rl['k1']:.0f} requests "
                 f"per FMA, k2 {rl['k2']:.0f}", fontsize=12)


def draw_tiles(path, n: int = 128, block_xy=(0, 1)):
    """k3 and k3c: which elements of A and B one block loads, coloured by phase (its tile
    sliding along K)."""
    plt = _plt()
    import numpy as np

    fig, axes = plt.subplots(2, 3, figsize=(12.5, 8.4), layout="constrained")
    cmap = plt.get_cmap("viridis").with_extremes(bad="#eeeeee")
    for row, level in enumerate(("k3", "k3c")):
        g = ledgers.geometry(level)
        reads = tile_reads(level, n, block_xy)
        phases = math.ceil(n / g.tile_k)
        for ax, arr in zip(axes[row][:2], ("A", "B")):
            img = np.full((n, n), np.nan)
            for e, ph in reads[arr].items():
                img[e // n, e % n] = ph
            im = ax.imshow(img, cmap=cmap, vmin=0, vmax=phases - 1, interpolation="nearest")
            ax.set_title(f"{level}: {arr} — the block's loads")
            ax.set_xlabel("k" if arr == "A" else "n")
            ax.set_ylabel("m" if arr == "A" else "k")
        cb = fig.colorbar(im, ax=axes[row][1], shrink=0.75, ticks=range(phases))
        cb.set_label("phase (K step)")
        ax = axes[row][2]
        cimg = np.full((n, n), np.nan)
        bx, by = block_xy
        cimg[by * g.tile_m:(by + 1) * g.tile_m, bx * g.tile_n:(bx + 1) * g.tile_n] = 1
        ax.imshow(cimg, cmap=plt.get_cmap("Reds").with_extremes(bad="#eeeeee"), vmin=0, vmax=1.3,
                  interpolation="nearest")
        bl = ledgers.bytes_ledger(level)
        ax.set_title(f"{level}: C — {g.tile_m}×{g.tile_n} output tile\n"
                     f"intensity at 4096: {bl.intensity:.3f} FLOP/byte")
        ax.set_xlabel("n")
        ax.set_ylabel("m")
    fig.suptitle(f"Shared-memory tiles sliding along K (M=N=K={n}, block {block_xy}; from the "
                 "levels' warp_step addresses)", fontsize=12)
    _save(fig, path)


def draw_outer(path, levels=("k3", "k4", "k5", "k6")):
    """One thread at one k: the shared values it reads (a column of As, a row of Bs) and the
    outputs their outer product feeds; the rest of its warp in a lighter shade."""
    plt = _plt()
    from matplotlib.patches import Rectangle

    fig, axes = plt.subplots(2, 2, figsize=(13, 6.6), layout="constrained",
                             gridspec_kw={"width_ratios": [1, 2.6]})
    for ax, level in zip(axes.T.flat, levels):
        t = thread_operands(level)
        g = t["geometry"]
        warp = [thread_operands(level, lane) for lane in range(ledgers.WARP)]

        def cells(x0, y0, w, h, fill, **kw):
            ax.add_patch(Rectangle((x0, y0), w, h, facecolor=fill, edgecolor="none", **kw))

        cells(0, 0, g.tile_n, g.tile_m, "#f0f0f0")                     # C tile
        cells(-2.5, 0, 1, g.tile_m, "#f0f0f0")                         # column k of As
        cells(0, -2.5, g.tile_n, 1, "#f0f0f0")                         # row k of Bs
        for w in warp:
            for r in w["a_rows"]:
                cells(-2.5, r, 1, 1, "#c6dbef")
                for c in w["b_cols"]:
                    cells(c, r, 1, 1, "#fcbba1")
            for c in w["b_cols"]:
                cells(c, -2.5, 1, 1, "#c7e9c0")
        for r in t["a_rows"]:
            cells(-2.5, r, 1, 1, BLUE)
            for c in t["b_cols"]:
                cells(c, r, 1, 1, RED)
        for c in t["b_cols"]:
            cells(c, -2.5, 1, 1, GREEN)
        ax.set_xlim(-3.5, g.tile_n + 0.5)
        ax.set_ylim(g.tile_m + 0.5, -3.5)
        ax.set_aspect("equal")
        ax.set_xticks([0, g.tile_n // 2, g.tile_n], [0, g.tile_n // 2, g.tile_n], fontsize=8)
        ax.set_yticks([0, g.tile_m // 2, g.tile_m], [0, g.tile_m // 2, g.tile_m], fontsize=8)
        ax.set_title(f"{level} (block tile {g.tile_m}×{g.tile_n}):\n{len(t['a_rows'])} of As × "
                     f"{len(t['b_cols'])} of Bs = {t['fmas']} FMA from {t['loads']} shared "
                     f"load{'s' if t['loads'] > 1 else ''}", fontsize=10)
    fig.suptitle("Thread 0 at one k (dark) and the rest of its warp (light): left column = As[:, k], "
                 "top row = Bs[k, :], grid = the C tile.\nFrom the shared addresses of the levels' "
                 "warp_step; k6 reads the same values with 128-bit loads.", fontsize=11)
    _save(fig, path)


def _pieces(cells) -> list[tuple[int, int, int, int]]:
    """(m0, n0, height, width) of the runs of consecutive rows × consecutive columns in `cells`."""
    def runs(xs):
        xs, out = sorted(xs), []
        for x in xs:
            if out and x == out[-1][0] + out[-1][1]:
                out[-1][1] += 1
            else:
                out.append([x, 1])
        return out
    return [(m0, n0, h, w) for m0, h in runs({m for m, _ in cells}) for n0, w in runs({n for _, n in cells})]


PIECES = {4: "four", 8: "eight"}   # a thread tile's 4×4 pieces, in words


def draw_warp_tiling(path, level: str = "k7"):
    """k7 (or another warp-tiled level): the block tile split into warp tiles, warp 0's tile
    split into its lanes' 4×4 pieces, and what warp 0 reads from As and Bs at one k."""
    plt = _plt()
    import numpy as np
    from matplotlib.patches import Rectangle

    from ...registry import get

    d = warp_tiling(level=level)
    t, owner = d["tiling"], d["owner"]
    colors = plt.get_cmap("tab10").colors
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 7.2), layout="constrained",
                                      gridspec_kw={"width_ratios": [1.25, 1]})

    img = np.zeros((t.tile_m, t.tile_n), dtype=int)
    for (m, n), [(warp, _)] in owner.items():
        img[m, n] = warp
    left.imshow(img, cmap=plt.matplotlib.colors.ListedColormap(colors[:t.warps]),
                interpolation="nearest", alpha=0.55, extent=(0, t.tile_n, t.tile_m, 0))
    for warp in range(t.warps):
        cells = [mn for mn, [(w, _)] in owner.items() if w == warp]
        (m0, n0, h, w), = _pieces(cells)                  # a warp's tile is one rectangle
        left.add_patch(Rectangle((n0, m0), w, h, fill=False, lw=1.5, color="black"))
        left.text(n0 + w / 2, m0 + 10, f"warp {warp}\n{h}×{w}", ha="center", va="center", fontsize=9)
        for m, n, ph, pw in _pieces([mn for mn, [(w_, ln)] in owner.items() if (w_, ln) == (warp, 0)]):
            left.add_patch(Rectangle((n, m), pw, ph, color=RED))
    left.set_xlim(0, t.tile_n)
    left.set_ylim(t.tile_m, 0)
    left.set_xticks(range(0, t.tile_n + 1, t.warp_n))
    left.set_yticks(range(0, t.tile_m + 1, t.warp_m))
    left.set_xlabel("n (column of the block's C tile)")
    left.set_ylabel("m (row)")
    left.set_title(f"block tile {t.tile_m}×{t.tile_n}: {t.tile_m // t.warp_m} × {t.warps_n} warps of "
                   f"{t.warp_m}×{t.warp_n} ({t.threads} threads)\nred: lane 0 of each warp, an "
                   f"{t.thread_m}×{t.thread_n} thread tile in {PIECES[t.sub_m * t.sub_n]} 4×4 pieces", fontsize=10)

    strip = 3.0                                           # As[k, :] left of the tile, Bs[k, :] above
    for lane in range(ledgers.WARP):
        cells = [mn for mn, [(w, ln)] in owner.items() if (w, ln) == (0, lane)]
        for m, n, h, w in _pieces(cells):
            right.add_patch(Rectangle((n, m), w, h, facecolor=RED if lane == 0 else colors[0],
                                      alpha=1.0 if lane == 0 else 0.12 + 0.5 * (lane % 2),
                                      edgecolor="white", lw=0.8))
            right.text(n + w / 2, m + h / 2, str(lane), ha="center", va="center", fontsize=7,
                       color="white" if lane == 0 else "black")
    for m in range(0, t.warp_m + 1, 4 * t.lanes_m):     # sub-tiles: the lanes' 8 × 4 grid repeats
        right.plot([0, t.warp_n], [m, m], color="black", lw=1.5)
    for n in range(0, t.warp_n + 1, 4 * t.lanes_n):
        right.plot([n, n], [0, t.warp_m], color="black", lw=1.5)
    rows0 = [m for (m, n), [(w, ln)] in owner.items() if (w, ln) == (0, 0) and n == 0]
    cols0 = [n for (m, n), [(w, ln)] in owner.items() if (w, ln) == (0, 0) and m == 0]
    for m in range(t.warp_m):
        right.add_patch(Rectangle((-strip - 1, m), strip, 1, facecolor=BLUE if m in rows0 else "#c6dbef",
                                  edgecolor="white", lw=0.3))
    for n in range(t.warp_n):
        right.add_patch(Rectangle((n, -strip - 1), 1, strip, facecolor=GREEN if n in cols0 else "#c7e9c0",
                                  edgecolor="white", lw=0.3))
    right.text(-strip - 1.8, t.warp_m / 2, f"As[k, m]: the warp's {t.warp_m} rows (dark: lane 0's)", rotation=90,
               ha="right", va="center", fontsize=8)
    right.text(t.warp_n / 2, -strip - 1.8, f"Bs[k, n]: the warp's {t.warp_n} columns (dark: lane 0's)",
               ha="center", va="bottom", fontsize=8)
    loads = d["loads"][0]
    a = [x for x in loads if x[0] == "As"]
    b = [x for x in loads if x[0] == "Bs"]
    right.set_xlim(-strip - 4, t.warp_n + 0.5)
    right.set_ylim(t.warp_m + 0.5, -strip - 4)
    right.set_aspect("equal")
    right.set_xticks(range(0, t.warp_n + 1, 4 * t.lanes_n))
    right.set_yticks(range(0, t.warp_m + 1, 4 * t.lanes_m))
    right.set_title(f"warp 0: {t.warp_m}×{t.warp_n} = {t.sub_m} × {t.sub_n} sub-tiles of "
                    f"{4 * t.lanes_m}×{4 * t.lanes_n}, lanes {t.lanes_m} × {t.lanes_n} in 4×4 pieces\n"
                    f"at one k the warp issues {len(a)} LDS.128 of As ({a[0][1]} distinct float4s each) "
                    f"and {len(b)} of Bs ({b[0][1]} each)", fontsize=10)
    bl = ledgers.bytes_ledger(level)
    source = get(level).module.__name__.replace(".", "/") + ".py"
    fig.suptitle(f"{level}'s tiling ({source} TILING, decoded from warp_step): per k a "
                 f"lane turns {len(loads)} conflict-free LDS.128 into {t.thread_m * t.thread_n} FFMA;\n"
                 f"the block stages {t.tile_m} + {t.tile_n} floats per k for {t.tile_m * t.tile_n} FMA "
                 f"(bytes ledger at 4096: {bl.intensity:.1f} FLOP/byte)", fontsize=11)
    _save(fig, path)


def draw_banks(path):
    """Bank grids of shared accesses: broadcast, conflict-free, conflicted, padded."""
    plt = _plt()
    import numpy as np

    ex = bank_examples()
    heights = [min(max(d for d, _ in bank_grid(a, w)["cells"]) + 1, 8) + 0.8 for _, a, w in ex]
    fig, axes = plt.subplots(len(ex), 1, figsize=(12, 0.36 * sum(heights) + 2.6),
                             gridspec_kw={"height_ratios": heights})
    for ax, (title, addrs, width) in zip(axes, ex):
        bg = bank_grid(addrs, width)
        depth = max(d for d, _ in bg["cells"]) + 1
        shown = min(depth, 8)
        img = np.zeros((shown, 32))
        for (d, bank), lanes in bg["cells"].items():
            if d < shown:
                img[d, bank] = 1
                label = "all" if len(lanes) == 32 else ",".join(map(str, lanes)) if len(lanes) < 3 else f"{len(lanes)}"
                ax.text(bank, d, label, ha="center", va="center", fontsize=6.5)
        ax.imshow(img, cmap="Oranges", vmin=0, vmax=1.6, aspect="auto", interpolation="nearest")
        p = bg["profile"]
        more = f"; {depth - shown} more rows not shown" if depth > shown else ""
        ax.set_title(f"{title} → {ledgers.kind_name(bg['kind'])}: {p.wavefronts} "
                     f"wavefront{'s' if p.wavefronts > 1 else ''}{more}", fontsize=10, loc="left")
        ax.set_yticks(range(shown), [f"pass {i + 1}" for i in range(shown)], fontsize=7)
        ax.set_xticks(range(0, 32, 4))
        ax.set_xticks(np.arange(-0.5, 32, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, shown, 1), minor=True)
        ax.grid(which="minor", color="white", lw=0.8)
        ax.tick_params(which="minor", length=0)
    axes[-1].set_xlabel("bank (4-byte word address mod 32)")
    _save(fig, path, "Shared-memory banks: one cell per distinct 4-byte word the warp touches, in its bank's "
                 "column (label: the lanes that read it).\nA second word in the same bank needs another "
                 "pass. Profiles from numba_gemm.explain.ledgers.bank_profile.", fontsize=11)


def draw_swizzle(path):
    """v8's 128-byte XOR swizzle: where each logical 16-byte chunk of a row is stored."""
    plt = _plt()
    import numpy as np

    assert all(cm.tma_swizzle_128b(r * 128 + c * 16) == cm.swizzle128(r, c)
               for r in range(8) for c in range(8)), "v8's swizzle and TMA's SWIZZLE_128B differ"
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax, sw in zip(axes, (False, True)):
        m = np.array(swizzle_map(sw))
        ax.imshow(m, cmap="tab10", vmin=0, vmax=9, interpolation="nearest")
        for r in range(8):
            for c in range(8):
                ax.text(c, r, f"{m[r, c]}", ha="center", va="center", color="white", fontsize=11,
                        fontweight="bold")
        ax.add_patch(plt.Rectangle((-0.5, -0.5), 1, 8, fill=False, lw=2.5, color="black"))
        groups = len(set(m[:, 0]))
        ax.set_title(("no swizzle (physical = logical)" if not sw else
                      "v8: physical = logical XOR (row mod 8)")
                     + f"\nlogical chunk 0 of rows 0–7 → {groups} bank group"
                     + ("s (conflict-free)" if groups == 8 else " (8-way conflict)"))
        ax.set_xticks(range(8))
        ax.set_yticks(range(8))
        ax.set_xlabel("logical 16-byte chunk (8 halves)")
        ax.set_ylabel("row of the tile (128 bytes = 64 halves)")
    _save(fig, path, "Each cell: the physical 16-byte chunk (a group of 4 banks) that holds the logical chunk "
                 "(swizzle128; TMA's SWIZZLE_128B is the same map)", fontsize=11)


def draw_launch_order(path, n: int = 8192):
    """v8's row-major launch order vs v9's super-tiles, and the panels the first wave reads."""
    plt = _plt()
    import numpy as np

    from ...registry import get

    v9 = get("v9").module
    bm, bn = v9.CONFIG.bm, v9.CONFIG.bn
    gm, gn = cm.cdiv(n, bm), cm.cdiv(n, bn)
    l2 = ledgers.h200().l2_bytes
    sup = v9.tile_order(n, n, n, l2)
    wave = first_wave("v9")
    fig, axes = plt.subplots(1, 2, figsize=(12, 6.6), layout="constrained")
    for ax, (name, smn) in zip(axes, (("v8: row-major, n fastest", None),
                                      (f"v9: super-tiles {sup[0]}×{sup[1]} (tile_order)", sup))):
        order = launch_order(gm, gn, smn)
        m = np.array(order, dtype=float)
        ax.imshow(m, cmap="viridis", interpolation="nearest")
        ax.imshow(np.ma.masked_where(m >= wave, np.ones_like(m)), cmap="autumn", alpha=0.55,
                  interpolation="nearest")
        ra, rb = wave_panels(order, wave)
        mb = (ra * bm + rb * bn) * n * 2 / 2**20
        ax.set_title(f"{name}\nfirst wave ({wave} CTAs, red): {ra} A + {rb} B panels = {mb:.0f} MiB",
                     fontsize=10)
        ax.set_xlabel(f"tile column (BN = {bn})")
        ax.set_ylabel(f"tile row (BM = {bm})")
    lg8, lg9 = ledgers.l2_ledger("v8", n), ledgers.l2_ledger("v9", n)
    fig.suptitle(f"Launch order at {n}³ ({gm}×{gn} tiles; colour = blockIdx, dark first).\nL2 model: "
                 f"v8 reads B {lg8.b_reads}×, v9 {lg9.b_reads}× → DRAM {lg8.dram_bytes / 1e9:.2f} vs "
                 f"{lg9.dram_bytes / 1e9:.2f} GB (L2 {l2 / 2**20:.0f} MiB)", fontsize=11)
    _save(fig, path)


def draw_pipelines(path, levels=("v7", "v10"), load: float = 2.5):
    """v7 (cp.async, 2 buffers) and v10 (TMA + mbarriers) as schematic pipeline timelines."""
    plt = _plt()
    fig, axes = plt.subplots(len(levels), 1, figsize=(12, 2.0 + 1.2 * sum(hgemm_stages(lv) for lv in levels)),
                             sharex=True, gridspec_kw={"height_ratios": [hgemm_stages(lv) + 1 for lv in levels]})
    for ax, level in zip(axes, levels):
        s, lag = hgemm_stages(level), refill_lag(level)
        sched = level_pipeline(level, load=load)
        copy = "cp.async, every thread" if level in ("v7", "v8", "v9") else "TMA, one thread; full/empty mbarriers"
        for e in sched:
            y = s - e["slot"]
            ax.broken_barh([(e["copy_start"], load)], (y - 0.35, 0.7), color=BLUE, alpha=0.45)
            ax.broken_barh([(e["mma_start"], 1.0)], (y - 0.35, 0.7), color=ORANGE)
            ax.text(e["copy_start"] + load / 2, y, f"copy {e['tile']}", ha="center", va="center", fontsize=8)
            ax.text(e["mma_start"] + 0.5, y, f"{e['tile']}", ha="center", va="center", fontsize=8)
            ax.broken_barh([(e["mma_start"], 1.0)], (-0.35, 0.7), color=ORANGE)
        end = sched[-1]["mma_end"]
        busy = len(sched) / end
        ax.set_yticks(range(s + 1), ["tensor cores"] + [f"buffer {i}" for i in range(s - 1, -1, -1)])
        ax.set_title(f"{level}: {s} stages ({copy}), refilling the one read {lag} iteration{'s' * (lag != 1)} "
                     f"ago: {s - lag} tile{'s' * (s - lag != 1)} in flight ahead — tensor cores busy "
                     f"{100 * busy:.0f} % over {len(sched)} k tiles",
                     fontsize=10, loc="left")
    axes[-1].set_xlabel("time (one tile's MMAs = 1)")
    _save(fig, path, f"Schematic: a tile's copy takes {load}× its MMAs (an assumption, not a measurement); "
                 "blue = copy in flight, orange = MMAs reading the buffer;\nstages and refill lag from the "
                 "level modules (figures.level_pipeline). More tiles in flight hide more latency.", fontsize=10)


def draw_k6_loaders(path):
    """k6: which thread loads each float4 of the block's A and B tiles (linear thread id)."""
    plt = _plt()
    import numpy as np

    d = k6_loader_map()
    g = ledgers.geometry("k6")
    colors = plt.get_cmap("tab10").colors
    fig, axes = plt.subplots(1, 2, figsize=(15, 7.2), layout="constrained",
                             gridspec_kw={"width_ratios": [g.tile_k // 4 + 2, g.tile_n // 4]})
    for ax, arr, (rows, cols) in zip(axes, ("A", "B"), ((g.tile_m, g.tile_k // 4), (g.tile_k, g.tile_n // 4))):
        img = np.zeros((rows, cols))
        for (r, c), (t, i) in d[arr].items():
            img[r, c] = t // ledgers.WARP
            if arr == "A" or r < 8:                    # B's rows repeat the pattern every 4
                ax.text(c, r, str(t), ha="center", va="center", fontsize=5.5 if arr == "B" else 7)
        ax.imshow(img, cmap=plt.matplotlib.colors.ListedColormap(colors[:g.threads // ledgers.WARP]),
                  alpha=0.45, aspect="auto", interpolation="nearest")
        loads = 1 + max(i for _, i in d[arr].values())
        ax.set_xticks(range(cols), [str(4 * c) for c in range(cols)], fontsize=6 if arr == "B" else 8)
        ax.set_xlabel("first column of the float4 (k for A, n for B)")
        ax.set_ylabel("row of the tile (m for A, k for B)")
        ax.set_title(f"{arr} tile {rows} × {4 * cols} floats: {rows * cols} float4s, {loads} per thread "
                     f"(LDG.E.128)\nnumber = thread id (threadIdx.y · 32 + threadIdx.x), colour = warp"
                     + ("; rows 0–7 numbered, the pattern repeats every 4" if arr == "B" else ""),
                     fontsize=10)
    fig.suptitle("k6's global loads by linear thread id (numba_gemm.explain.figures.k6_loader_map, from its "
                 f"warp_step): {g.threads} threads, one warp reads 32 consecutive float4s — whole 128-byte rows of A "
                 "(4 rows per warp load) and B (one 512-byte row)", fontsize=10)
    _save(fig, path)


def draw_k8_timeline(path, phases: int = 5):
    """k7 against k8: what overlaps what in one block's K loop (schematic)."""
    plt = _plt()
    from ...registry import get

    rows = {"global loads": 2, "STS to shared": 1, "FFMA": 0}
    fig, axes = plt.subplots(2, 1, figsize=(13, 5.6), layout="constrained", sharex=True)
    for ax, (level, double) in zip(axes, (("k7", False), ("k8", True))):
        tl = phase_timeline(double, phases)
        for e in tl:
            for what, y, color in (("load", 2, BLUE), ("store", 1, GREEN), ("ffma", 0, ORANGE)):
                if e[what]:
                    a, b = e[what]
                    ax.broken_barh([(a, b - a)], (y - 0.32, 0.64), color=color, alpha=0.8 if what == "ffma" else 0.5)
                    label = f"{e['phase']}" + (f"→buf {e['buffer']}" if double and what != "ffma" else "")
                    ax.text((a + b) / 2, y, label, ha="center", va="center", fontsize=7)
            for bar in e["barriers"]:
                ax.axvline(bar, color=GREY, lw=0.8, ls=":")
        end = max(e["ffma"][1] for e in tl if e["ffma"])
        busy = sum(e["ffma"][1] - e["ffma"][0] for e in tl if e["ffma"]) / end
        tk = get(level).module.TILING.tile_k
        ax.set_yticks(list(rows.values()), list(rows))
        ax.set_title(f"{level}: {'two' if double else 'one'} shared buffer{'s' if double else ''}, "
                     f"{tk}-deep phases, {'one barrier' if double else 'two barriers'} per phase (dotted) — "
                     f"FFMA busy {100 * busy:.0f} % of the time over {phases} phases", fontsize=10, loc="left")
    axes[-1].set_xlabel("time (one phase's FFMA = 1 in both, whatever its depth; a global load's latency "
                        "0.8: assumptions for the picture, not measurements)")
    fig.suptitle("What overlaps what (numba_gemm.explain.figures.phase_timeline): k8 issues the loads of phase p + 1 "
                 "into registers before multiplying phase p,\nand stores them into the other buffer "
                 "after it; in k7 each phase's loads and its multiply wait for each other", fontsize=10)
    _save(fig, path)


def draw_wgmma_tile(path):
    """One stage of v11–v13 in shared memory: A (K-major) and B (MN-major) with the 128-byte
    swizzle, core matrices, 8-row atoms (SBO), B's panels (LBO) and what each k step reads."""
    plt = _plt()
    import numpy as np
    from matplotlib.patches import Rectangle

    from ...hgemm import _wgmma as wg

    d = wgmma_tile_layout()
    t = d["tile"]
    steps = t.bk // WGMMA_K_STEP
    cmap = plt.get_cmap("Set2")
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 7.4), layout="constrained",
                                      gridspec_kw={"width_ratios": [1, 2.6]})
    # A: 64 rows × 8 logical chunks; colour = the k step that reads the chunk, text = physical chunk
    img = np.zeros((64, 8))
    for (r, c), off in d["a"].items():
        img[r, c] = c // 2
        if r < 16:                                     # the pattern repeats every 8 rows
            left.text(c, r, str(off % 128 // 16), ha="center", va="center", fontsize=5.5)
    left.imshow(img, cmap=cmap, vmin=0, vmax=7, aspect="auto", interpolation="nearest")
    for r in range(0, 65, 8):
        left.axhline(r - 0.5, color="black", lw=1.4 if r % 64 else 2)
    left.add_patch(Rectangle((-0.5, -0.5), 1, 8, fill=False, lw=2.5, color=RED))
    left.annotate("a core matrix:\n8 rows × 16 B", (0.5, 3.5), xytext=(2.0, 5.0), fontsize=8, color=RED,
                  bbox=dict(facecolor="white", alpha=0.9, lw=0), arrowprops=dict(arrowstyle="->", color=RED))
    left.annotate("", (8.1, 7.5), xytext=(8.1, 15.5), annotation_clip=False,
                  arrowprops=dict(arrowstyle="<->", color="black"))
    left.text(8.3, 11.5, f"SBO = {d['a_desc'][0][2]} B\n(one 8-row atom)", fontsize=8, va="center")
    left.set_xticks(range(8), [f"{c}\nk {8 * c}–{8 * c + 7}" for c in range(8)], fontsize=6.5)
    left.set_yticks(range(0, 64, 8))
    left.set_xlabel("logical 16-byte chunk of a 128-byte row (colour: the k step that reads it)")
    left.set_ylabel("row m of the consumer's 64-row A tile")
    left.set_title(f"A, K-major: {t.bm} × {t.bk} halves per stage, 64 rows per consumer\n"
                   f"number = physical chunk (TMA SWIZZLE_128B; rows 0–15 shown, it repeats every 8); k step: "
                   f"start +{d['a_desc'][1][0]} B",
                   fontsize=10)
    # B: bk k rows × (bn / 64 panels × 8 chunks)
    panels = t.bn // 64
    img = np.zeros((t.bk, 8 * panels))
    for (k, p_, c), off in d["b"].items():
        img[k, 8 * p_ + c] = k // WGMMA_K_STEP
    right.imshow(img, cmap=cmap, vmin=0, vmax=7, aspect="auto", interpolation="nearest")
    for p_ in range(panels + 1):
        right.axvline(8 * p_ - 0.5, color="black", lw=2)
    for k in range(0, t.bk + 1, 8):
        right.axhline(k - 0.5, color="black", lw=0.6)
    for k in range(0, 8):                              # the swizzle of panel 0's first atom
        for c in range(8):
            right.text(c, k, str(d["b"][(k, 0, c)] % 128 // 16), ha="center", va="center", fontsize=5.5)
    right.annotate("", (3.5, 11.5), xytext=(11.5, 11.5), arrowprops=dict(arrowstyle="<->", color="black"))
    right.text(7.5, 10.2, f"LBO = {d['panel']} B (next 64-column panel)", ha="center", fontsize=8,
               bbox=dict(facecolor="white", alpha=0.85, lw=0))
    right.text(8 * panels - 0.3, 4, f"SBO = {d['b_desc'][0][2]} B\nper 8 k rows", fontsize=8, ha="right",
               va="center", bbox=dict(facecolor="white", alpha=0.8, lw=0))
    right.set_xticks([8 * p_ + 3.5 for p_ in range(panels)],
                     [f"panel {p_}: columns {64 * p_}–{64 * p_ + 63}" for p_ in range(panels)], fontsize=8)
    right.set_yticks(range(0, t.bk, WGMMA_K_STEP), [f"k {k}" for k in range(0, t.bk, WGMMA_K_STEP)])
    right.set_ylabel("k row of the B tile (colour: the k step that reads it)")
    right.set_title(f"B, MN-major (imm-trans-b = 1): {t.bk} × {t.bn} halves in {panels} TMA boxes of "
                    f"{t.bk} × 64\nk step: start +{d['b_desc'][1][0] - d['b_desc'][0][0]} B (16 k rows); "
                    "numbers: physical chunk of panel 0's first atom", fontsize=10)
    base = 1024
    da = wg.smem_desc(base + d["a_desc"][0][0], *d["a_desc"][0][1:])
    db = wg.smem_desc(base + d["b_desc"][0][0], *d["b_desc"][0][1:])
    fig.suptitle(f"One stage of v11–v13 ({t.stage_bytes} bytes, 1024-aligned): {steps} wgmma "
                 f"m64n{t.bn}k16 per stage and consumer, each reading one colour. Descriptors at stage "
                 f"base {base}: A {da:#018x}, B {db:#018x}\n(smem_desc: start >> 4 in bits 0–13, LBO >> 4 in "
                 "16–29, SBO >> 4 in 32–45, swizzle 128B = 1 in bits 62–63)", fontsize=10)
    _save(fig, path)


def draw_mbarrier_ring(path, tiles: int = 12):
    """The full/empty mbarrier ring: which stage each K tile uses, when it is issued, which
    parity the consumers wait on full[s] and the producer on empty[s]."""
    plt = _plt()
    from ...registry import get

    cases = [("v10, v11: the computing thread 0 refills the stage read "
              f"{get('v10').module.CONFIG.tma_lag} iterations ago", get("v10").module.CONFIG.stages,
              get("v10").module.CONFIG.tma_lag),
             ("v12, v13: a producer warpgroup refills each stage as soon as empty[s] completes",
              get("v12").module.CONFIG.stages, None)]
    fig, axes = plt.subplots(2, 1, figsize=(13, 7.6), layout="constrained", sharex=True)
    for ax, (title, stages, lag) in zip(axes, cases):
        ring = mbarrier_ring(stages, tiles, lag)
        for e in ring:
            y = e["stage"]
            start = max(e["issue_at"], -0.6)
            ax.broken_barh([(start, e["tile"] - start)], (y - 0.32, 0.64), color=BLUE, alpha=0.35)
            ax.broken_barh([(e["tile"], 1)], (y - 0.32, 0.64), color=ORANGE)
            ax.text(e["tile"] + 0.5, y, f"tile {e['tile']}\nfull p{e['full_parity']}", ha="center",
                    va="center", fontsize=7)
            note = f"empty p{e['empty_parity']}" if e["empty_wait"] else "no wait"
            ax.text(start + 0.05, y + 0.22, note, ha="left", va="center", fontsize=6.5, color="#1f3b73")
        ax.set_yticks(range(stages), [f"stage {s}" for s in range(stages)])
        ax.set_ylim(stages - 0.5, -0.5)
        ax.set_title(f"{title} ({stages} stages)", fontsize=10, loc="left")
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1].set_xlabel("consumer iteration kt (one K tile multiplied per iteration)")
    axes[-1].set_xticks(range(-1, tiles + 1), ["before\nthe loop"] + [str(i) for i in range(tiles + 1)])
    fig.suptitle("The mbarrier ring (numba_gemm.explain.figures.mbarrier_ring): blue = the TMA copy in flight "
                 "(issued after the producer's wait on empty[s], \"empty p\" = the parity it waits for), "
                 "orange = the consumers\nreading the stage after waiting on full[s] with parity "
                 "(use of the stage) mod 2. Each completed phase flips a barrier's parity; one bit "
                 "per wait is all a thread tracks.", fontsize=10)
    _save(fig, path)


class PNG:
    """A drawn figure for display() in a notebook (Jupyter, or tools/run_notebook.py)."""

    def __init__(self, path):
        self.path = Path(path)

    def _repr_png_(self) -> bytes:
        return self.path.read_bytes()

    def __repr__(self):
        return f"<{self.path.name}>"
