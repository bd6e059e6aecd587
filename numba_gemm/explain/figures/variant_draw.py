"""The side rungs' figures, drawn from numba_gemm.explain.figures.variant_data with matplotlib (imported
only when a figure is drawn): k3c's four column tiles per block, the split-K levels' slices,
partials and reduction, k9st's stream-K schedule, v11r's register-staged loads."""
from __future__ import annotations

from .draw import BLUE, GREEN, GREY, ORANGE, RED, _plt, _save
from .variant_data import coarsening, reduction_terms, splitk_plans, staged_loads, stream_schedule


def draw_coarsening(path, levels=("k3", "k3c"), n: int = 256):
    """k3 against k3c in one phase: the column tiles one block computes, the B tile it loads
    for each, and the A tile it loads once and reads for all of them."""
    plt = _plt()
    from matplotlib.patches import Rectangle

    cover = max(coarsening(lv, n)["geometry"].tile_n for lv in levels)
    data = [coarsening(lv, n, cover=cover) for lv in levels]
    fig, axes = plt.subplots(1, len(levels), figsize=(14, 5.6), layout="constrained")
    colours = plt.get_cmap("tab10")
    for ax, d in zip(axes, data):
        g, blocks = d["geometry"], d["blocks"]
        kw = g.tile_k                                    # the phase's A and B tiles are tile_k deep
        gap = 8
        rows = blocks[0]["a"][1] - blocks[0]["a"][0]
        ax.set_xlim(-kw - gap - 2, cover + 2)
        ax.set_ylim(rows + 14, -kw - gap - 2)
        ax.set_aspect("equal")
        ax.axis("off")
        for i, b in enumerate(blocks):
            m0, m1, k0, k1 = b["a"]
            hatch = None if i == 0 else "///"
            ax.add_patch(Rectangle((-kw - gap + k0 - b["a"][2], m0), k1 - k0, m1 - m0, color=BLUE,
                                   alpha=0.55 if i == 0 else 0.0, lw=0))
            if i:                                        # the same A tile, loaded again by block bx
                ax.add_patch(Rectangle((-kw - gap, m0), k1 - k0, m1 - m0, fill=False, hatch=hatch,
                                       color=BLUE, lw=0.5, alpha=0.6))
            for j, ((bk0, bk1, n0, n1), (c0, c1, cn0, cn1)) in enumerate(zip(b["b"], b["c"])):
                col = colours(j if len(blocks) == 1 else i)
                ax.add_patch(Rectangle((n0, -kw - gap + bk0 - b["b"][0][0]), n1 - n0, bk1 - bk0, color=col, alpha=0.6, lw=0))
                ax.add_patch(Rectangle((cn0, c0), cn1 - cn0, c1 - c0, color=col, alpha=0.6, lw=0))
                ax.add_patch(Rectangle((cn0, c0), cn1 - cn0, c1 - c0, fill=False, lw=1.5,
                                       color="black" if i == 0 else GREY, ls="-" if i == 0 else "--"))
                what = f"acc[{j}]" if len(blocks) == 1 else f"block {b['bx']}"
                ax.text((cn0 + cn1) / 2, (c0 + c1) / 2, what, ha="center", va="center", fontsize=9)
                step = f"B tile {j}" if len(blocks) == 1 else f"B (block {b['bx']})"
                ax.text((n0 + n1) / 2, -kw - gap + (bk1 - bk0) / 2, step, ha="center", va="center", fontsize=8.5)
        a_what = (f"A tile\nloaded {len(blocks)}×,\nonce per\nblock" if len(blocks) > 1 else
                  f"A tile\nloaded once,\nused by\n{len(blocks[0]['b'])} B tiles")
        ax.text(-kw - gap + kw / 2, rows / 2, a_what, ha="center", va="center", fontsize=8.5,
                color="black", weight="bold")
        ax.add_patch(Rectangle((0, 0), cover, rows, fill=False, lw=0.8, color=GREY))
        ax.text(-kw / 2 - gap, -kw / 2 - gap, f"phase {d['ph']}\n(k {g.tile_k * d['ph']}–"
                f"{g.tile_k * (d['ph'] + 1) - 1})", ha="center", va="center", fontsize=8, color=GREY)
        ax.text(-kw - gap, rows + 4,
                f"{len(blocks)} block{'s' if len(blocks) > 1 else ''} of {g.block[0]}×{g.block[1]} threads for "
                f"these {cover} columns; per thread and phase:\n{d['a_loads']} load of A + {d['b_loads']} of B "
                f"for {d['outputs']} output{'s' if d['outputs'] > 1 else ''} = {d['loads_per_output']:g} loads "
                f"per output; the A tile read {d['as_reads']}× (As[ty, kk])",
                ha="left", va="top", fontsize=9)
        ax.set_title(f"{d['level']}: a {g.tile_m}×{g.tile_n} tile of C per block"
                     + (", one B tile" if len(blocks) > 1 else f", {len(blocks[0]['b'])} B tiles in turn"),
                     fontsize=11)
    few, many = data[-1], data[0]
    gf = few["geometry"]
    fig.suptitle(f"One phase of {many['level']} and {few['level']} over the same {gf.tile_m}×{cover} of C "
                 f"(from their warp_step loads): {many['level']} needs {len(many['blocks'])} blocks, each "
                 f"loading the same A tile;\n{few['level']}'s one block loads it once and walks "
                 f"{gf.thread_n} B tiles to its right (GEOMETRY: thread_n = {gf.thread_n} columns, "
                 f"{gf.block[0]} apart)", fontsize=11)
    _save(fig, path)


def draw_splitk(path):
    """k5sk, k8sk and v11sk at their headline shapes: K cut into the S slices each plans, the
    S CTAs per output tile, their fp32 partials in the workspace, and the fixed-order reduction."""
    plt = _plt()
    from matplotlib.patches import FancyArrowPatch, Rectangle

    plans = splitk_plans()
    fig = plt.figure(figsize=(15, 3.1 * len(plans) + 0.6), layout="constrained")
    gs = fig.add_gridspec(len(plans), 2, width_ratios=[1.6, 1])
    cmap = plt.get_cmap("tab20")
    for row, (lv, p) in enumerate(plans.items()):
        M, N, K = p["shape"]
        S = p["S"]
        ax = fig.add_subplot(gs[row, 0])
        for z, ((lo, hi), kt) in enumerate(zip(p["slices"], p["k_tiles"])):
            ax.add_patch(Rectangle((lo, 0), hi - lo, 1, color=cmap(z % 20), alpha=0.8, ec="white", lw=1))
            ax.text((lo + hi) / 2, 0.5, f"z={z}\n{kt} tiles", ha="center", va="center", fontsize=7.5)
        ax.set_xlim(0, K)
        ax.set_ylim(-0.15, 1.15)
        ax.set_yticks([])
        ax.set_xticks([lo for lo, _ in p["slices"]] + [K])
        ax.tick_params(axis="x", labelsize=7.5, rotation=45 if S > 6 else 0)
        ax.set_xlabel(f"k (the K range, in slices of whole {p['tile'][2]}-deep K tiles)", fontsize=9)
        bm, bn, bk = p["tile"]
        ax.set_title(f"{lv} at {M}×{N}×{K}: {p['tiles']} tiles of {bm}×{bn} → S = {S} slices → "
                     f"{p['ctas']} CTAs (the SMs hold {p['resident']} at once)", fontsize=10)
        # the S CTAs of tile 0, their partials, and the reduction
        ax = fig.add_subplot(gs[row, 1])
        ax.set_xlim(0, 10)
        ax.set_ylim(S + 0.2, -1.4)
        ax.axis("off")
        ax.text(1.1, -0.85, f"tile 0's {S} CTAs", ha="center", fontsize=8.5)
        ax.text(4.6, -0.85, f"workspace: {S}×{M}×{N} fp32 ({p['workspace'] / 2**20:g} MiB),\nP_z from element z·M·N",
                ha="center", fontsize=8.5)
        for z in range(S):
            ax.add_patch(Rectangle((0.2, z + 0.1), 1.8, 0.8, color=cmap(z % 20), alpha=0.8))
            ax.text(1.1, z + 0.5, f"CTA (0, z={z})", ha="center", va="center", fontsize=6.5)
            ax.add_patch(Rectangle((3.4, z + 0.1), 2.4, 0.8, fill=False, color=cmap(z % 20), lw=1.5))
            ax.text(4.6, z + 0.5, f"P{z} at {p['partials'][z]:,}", ha="center", va="center", fontsize=6.5)
            ax.add_artist(FancyArrowPatch((2.05, z + 0.5), (3.35, z + 0.5), arrowstyle="->", mutation_scale=8,
                                          color=GREY, lw=0.8))
            ax.add_artist(FancyArrowPatch((5.85, z + 0.5), (7.0, S / 2), arrowstyle="->", mutation_scale=8,
                                          color=GREY, lw=0.6, alpha=0.8))
        terms = reduction_terms(S)
        order = " + ".join(f"P{z}" for z in terms[:2]) + (" + … + " if S > 3 else " + ") + f"P{terms[-1]}"
        h = max(2.4, S * 0.55)
        ax.add_patch(Rectangle((7.05, S / 2 - h / 2), 2.9, h, color=GREEN, alpha=0.25))
        ax.text(8.5, S / 2, f"splitk.reduce:\nC = α·({order})\n+ β·C, summed left to\nright (z = 0…{S - 1});\n"
                "α and β once;\nβ = 0: C is not read", ha="center", va="center", fontsize=7.5)
    fig.suptitle("Split-K at the skinny shapes of the headlines (each level's own split plan): every "
          "output tile gets S CTAs, one per slice of K, which store raw fp32 partials (α = 1, β = 0);\n"
          "one more kernel adds them in a fixed order and applies α and β once: no atomics, the same "
          "bits every run", fontsize=11)
    _save(fig, path)


def draw_streamk(path):
    """k9 against k9st on the figure's small case: the resident CTA slots over time (a tile's
    whole K loop = 1), whole tiles in waves, then the stream CTAs' equal shares of the rest;
    a tile split between two CTAs hatched, with the CTAs whose parts its last one adds."""
    plt = _plt()
    from matplotlib.patches import Rectangle

    d = stream_schedule()
    p, R = d["plan"], d["slots"]
    M, N, K = d["shape"]
    cmap = plt.get_cmap("tab10")
    fig, axes = plt.subplots(1, 2, figsize=(14, 3.6), layout="constrained", sharex=True)
    rows = {"k9": [[(t, a, b, True) for t, a, b in row] for row in d["k9"]], "k9st": d["k9st"]}
    for ax, (lv, sched) in zip(axes, rows.items()):
        for j, row in enumerate(sched):
            for t, a, b, whole in row:
                ax.add_patch(Rectangle((a, j + 0.1), b - a, 0.8, color=cmap(t % 10), alpha=0.75,
                                       hatch=None if whole else "///", ec="white", lw=1))
                ax.text((a + b) / 2, j + 0.5, f"tile {t}" if whole else f"{t}: part", ha="center",
                        va="center", fontsize=8)
        ax.axvline(d["time"][lv], color=RED, lw=1.2)
        ax.set_ylim(R, 0)
        ax.set_yticks([j + 0.5 for j in range(R)], [f"slot {j}" for j in range(R)], fontsize=8)
        ax.set_xlim(0, d["time"]["k9"] + 0.2)
        ax.set_xlabel("time, in one tile's whole K loop", fontsize=9)
    axes[0].set_title(f"k9: {p.tiles} tiles in waves of {R}: {d['time']['k9']:g} units, the last wave "
                      f"{100 * (p.tiles % R) / R:.0f} % full", fontsize=10)
    split = ", ".join(f"tile {t} = CTA {lo} + CTA {hi}" if hi == lo + 1 else f"tile {t} = CTAs {lo}…{hi}"
                      for t, (lo, hi) in d["parts"].items())
    axes[1].set_title(f"k9st: {p.whole} whole tiles, then {p.tiles - p.whole} tiles' K tiles shared by "
                      f"{p.ctas} CTAs: {d['time']['k9st']:g} units\n(split: {split}, added in CTA order "
                      "by the tile's last CTA)", fontsize=10)
    fig.suptitle(f"Stream-K at {M}×{N}×{K} ({p.tiles} tiles of {p.iters} K tiles) on {R} resident CTAs, "
                 "from k9st's own stream_plan and share_start", fontsize=11)
    _save(fig, path)


def draw_staged_loads(path):
    """v11r at the ragged headline shape: the load width each operand gets, the instructions
    per K tile against TMA's, and where one thread's staged registers land in the stage."""
    plt = _plt()
    import numpy as np
    from matplotlib.patches import Rectangle

    d = staged_loads()
    M, N, K = d["shape"]
    t = d["config"]
    fig = plt.figure(figsize=(16, 7), layout="constrained")
    gs = fig.add_gridspec(1, 3, width_ratios=[1, 1, 1])
    ax = fig.add_subplot(gs[0, 0])
    bars = [("v11: TMA", {"loads": d["tma"], "stores": 0})]
    bars.append((f"v11r here\n(A {d['wa']} B, B {d['wb']} B)", d["cta"]))
    bars += [(f"v11r ({a}, {b})", c) for (a, b), c in d["widths"].items()]
    xs = np.arange(len(bars))
    loads = [c["loads"] for _, c in bars]
    stores = [c["stores"] for _, c in bars]
    ax.bar(xs, loads, color=[GREEN] + [ORANGE] * (len(bars) - 1), label="global loads (v11: TMA copies)")
    ax.bar(xs, stores, bottom=loads, color=BLUE, alpha=0.7, label="shared stores")
    for x, lo, st in zip(xs, loads, stores):
        ax.text(x, lo + st, f"{lo}" + (f" + {st}" if st else ""), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs, [b for b, _ in bars], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(1, 4000)
    ax.set_ylabel("warp instructions per K tile and CTA (log)")
    ax.legend(fontsize=8, loc="upper left")
    pt = d["per_thread"]
    ax.set_title(f"{M}×{N}×{K} bf16: A rows {K * 2} bytes → {d['wa']}-byte loads,\nB rows {N * 2} bytes → "
                 f"{d['wb']}-byte loads (load_width); per thread {pt['loads_a']} + {pt['loads_b']} loads,\n"
                 f"{pt['stores_a']} + {pt['stores_b']} stores (tile_instructions); TMA: 1 A box + "
                 f"{d['tma'] - 1} B panels", fontsize=9)
    # where the pieces land: the first 16 rows of the A tile and of B's first panels, 16-byte chunks
    for j, (name, tile) in enumerate(zip(("A", "B"), d["tiles"])):
        ax = fig.add_subplot(gs[0, 1 + j])
        rows = 16
        for r in range(rows):
            for c in range(8):
                logical = c ^ (r % 8)
                ax.add_patch(Rectangle((c, r), 1, 1, color=plt.get_cmap("Pastel2")(logical), lw=0))
                ax.text(c + 0.5, r + 0.78, f"{logical}", ha="center", va="center", fontsize=6, color=GREY)
        for tid, colour in zip(d["pieces"][name], (RED, BLUE)):
            for (row, col, dst, tma) in d["pieces"][name][tid]:
                off = dst % tile.PANEL if name == "B" else dst
                pr, pc, byte = off // 128, (off % 128) // 16, off % 16
                if pr >= rows or dst // tile.PANEL:
                    continue
                w = tile.PIECE_ELEMS * 2 / 16
                ax.add_patch(Rectangle((pc + byte / 16, pr + 0.08), w, 0.52, color=colour, alpha=0.85,
                                       lw=0))
                ax.text(pc + byte / 16 + w + 0.03, pr + 0.33, f"{row},{col}", ha="left", va="center",
                        fontsize=6.5, color=colour, weight="bold")
        for c in range(9):
            ax.axvline(c, color="white", lw=1)
        ax.set_xlim(0, 8)
        ax.set_ylim(rows, 0)
        ax.set_xticks([c + 0.5 for c in range(8)], range(8), fontsize=7)
        ax.set_yticks([r + 0.5 for r in range(rows)], range(rows), fontsize=7)
        ax.set_xlabel("physical 16-byte chunk of the 128-byte row\n(grey: the logical chunk kept there, "
                      "chunk ^ row % 8)", fontsize=8)
        what = "m" if name == "A" else "k"
        ax.set_ylabel(f"row ({what}) of the {'A tile' if name == 'A' else 'first B panel'}", fontsize=8.5)
        tids = list(d["pieces"][name])
        ax.set_title(f"{name}: StagedTile W = {tile.W}: per thread {tile.PIECES} pieces\nof "
                     f"{tile.PIECE_ELEMS * 2} bytes, {tile.STEP} rows apart; thread {tids[0]} (red),\n"
                     f"{tids[1]} (blue): each piece's (row, column) where its st.shared puts it", fontsize=9)
    c = d["corner"]
    fig.suptitle(f"v11r's register-staged loads: threads load with the widest width the rows allow and "
          f"store into TMA's SWIZZLE_128B layout (tma_swizzle_128b). At the ragged corner tile "
          f"(m0, n0, k0) = {c['tile']} ({c['rows']} rows, {c['cols']} columns, {c['k']} of K)\nthe "
          f"loader's stage equals TMA's byte for byte: {'yes' if c['same_as_tma'] else 'NO'} "
          f"({c['zero_bytes']:,} of {c['bytes']:,} bytes zero-filled); tile {t.bm}×{t.bn}×{t.bk}, "
          f"{t.threads} threads", fontsize=11)
    _save(fig, path)
