"""The tensor-core rungs' figures, drawn from numba_gemm.explain.figures.tensor_data with matplotlib
(imported only when a figure is drawn): mma.sync's fragments and ldmatrix, a TMA box, v12's
roles and registers, v13's cluster multicast and persistent schedule, the epilogue overlap."""
from __future__ import annotations

from .draw import BLUE, GREEN, GREY, ORANGE, RED, _plt, _save
from .tensor_data import (epilogue_timeline, mma_fragments, tma_boxes, v12_roles, v13_multicast,
                          v13_schedule)

PURPLE = "#8172b2"


def _grid(ax, cells, shape, colour_of, text_of, title, xlabel, ylabel, fontsize=6.0):
    """A shape[0] × shape[1] grid of cells {(row, col): value}, coloured and labelled per cell."""
    import numpy as np

    rows, cols = shape
    img = np.zeros((rows, cols))
    for (r, c), v in cells.items():
        img[r, c] = colour_of(v)
    ax.imshow(img, cmap="tab20", vmin=0, vmax=19, aspect="auto", interpolation="nearest", alpha=0.55)
    for (r, c), v in cells.items():
        ax.text(c, r, text_of(v), ha="center", va="center", fontsize=fontsize)
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    ax.tick_params(labelsize=7)
    ax.set_xticks([x - 0.5 for x in range(cols + 1)], minor=True)
    ax.set_yticks([y - 0.5 for y in range(rows + 1)], minor=True)
    ax.grid(which="minor", color="white", lw=0.8)
    ax.tick_params(which="minor", length=0)
    ax.set_title(title, fontsize=9.5)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)


def draw_mma_fragments(path):
    """mma.sync.m16n8k16: the lane and register of every element of A, B and C, and the lanes
    that give ldmatrix.x4 (A) and ldmatrix.x4.trans (B) their row addresses."""
    plt = _plt()
    from matplotlib.patches import Rectangle

    d = mma_fragments()
    fig = plt.figure(figsize=(16, 11), layout="constrained")
    gs = fig.add_gridspec(2, 3, width_ratios=[2, 1, 1], height_ratios=[1, 1])
    ax_a, ax_b, ax_c = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1]), fig.add_subplot(gs[0, 2])
    group = lambda lane: lane // 4 % 8 * 2 + lane % 2            # noqa: E731 (a colour per lane pair)
    _grid(ax_a, d["A"], (16, 16), lambda v: group(v[0]), lambda v: f"T{v[0]}\na{v[1]}{'lh'[v[2]]}",
          "A (16 × 16, row-major): lane T, register a0..a3, low/high half",
          "k", "m", fontsize=5.5)
    _grid(ax_b, d["B"], (16, 8), lambda v: group(v[0]), lambda v: f"T{v[0]}\nb{v[1]}{'lh'[v[2]]}",
          "B (16 × 8, k × n, 'col'): lane T, register b0, b1", "n", "k", fontsize=5.5)
    _grid(ax_c, d["C"], (16, 8), lambda v: group(v[0]), lambda v: f"T{v[0]}\nc{v[1]}",
          "C / D (16 × 8, fp32): lane T, register c0..c3", "n", "m", fontsize=5.5)
    # ldmatrix: which lane gives the address of each 16-byte row (8 halves) of the shared tile
    for j, (arr, trans) in enumerate((("A", False), ("B", True))):
        ax = fig.add_subplot(gs[1, 0] if j == 0 else gs[1, 1:])
        rows = d["rows"][arr]
        loaded = d["loaded"][arr]
        ax.set_xlim(-0.5, 15.5)
        ax.set_ylim(15.5, -0.5)
        for lane, (r, c) in rows.items():
            m = lane // 8                                           # the matrix this lane's row starts
            ax.add_patch(Rectangle((8 * c - 0.5, r - 0.5), 8, 1, color=plt.get_cmap("Set2")(m), alpha=0.7))
            ax.text(8 * c - 0.35, r, f"T{lane}", ha="left", va="center", fontsize=7, weight="bold")
        for (lane, reg, h), (r, c) in loaded.items():              # where lane 0's registers come from
            if lane in (0, 5):
                ax.text(c + 0.1, r + 0.28, f"T{lane}.r{reg}{'lh'[h]}", ha="center", va="center",
                        fontsize=5.5, color=RED if lane else "#1f3b73")
        for x in (7.5,):
            ax.axvline(x, color="black", lw=1.5)
        ax.axhline(7.5, color="black", lw=1.5)
        ax.set_xticks(range(16))
        ax.set_yticks(range(16))
        ax.tick_params(labelsize=7)
        what = (("m", "k", "ldmatrix.x4 (A): matrices (m0–7, k0–7) (m8–15, k0–7) (m0–7, k8–15) (m8–15, k8–15)"
                 "\n→ registers r0..r3 = a0..a3 of every lane") if arr == "A" else
                ("k", "n", "ldmatrix.x4.trans (B): matrices (k0–7, n0–7) (k8–15, n0–7) (k0–7, n8–15) (k8–15, n8–15)"
                 "\n→ r0, r1 = b0, b1 of the n8 tile 0; r2, r3 = b0, b1 of n8 tile 1 (transposed on the way)"))
        ax.set_ylabel(f"{what[0]} (row of the shared tile)", fontsize=9)
        ax.set_xlabel(f"{what[1]} (16 halves = two 16-byte chunks per row)", fontsize=9)
        ax.set_title(what[2], fontsize=9)
    fig.suptitle("mma.sync.aligned.m16n8k16 (fp16/bf16 in, fp32 accumulate) as v8, v9, v10 and v8py issue it: "
                 "lane T = 4 g + q holds rows g, g + 8 and columns 2q, 2q + 1 (+ 8);\n"
                 "a0l = low half of register a0 (numba_gemm.ptx.mma_sync's a/b/c_fragment_coords). Below, "
                 "ldmatrix: bold = the lane whose address starts that 16-byte row (lane l → row l % 8 of "
                 "matrix l // 8,\nrows as native/mma_stage.cuh gives them, before the swizzle; colour = "
                 "matrix); small = where T0 (blue) and T5 (red) receive each half (ldmatrix_warp)", fontsize=11)
    _save(fig, path)


def draw_tma_box(path):
    """One stage's TMA copies for a ragged shape: the A box and B's panels in the global
    matrices, what TMA zero-fills, the panel it skips, and the bytes full[s] expects."""
    plt = _plt()
    from matplotlib.patches import Rectangle

    d = tma_boxes()
    t = d["tile"]
    fig, (ax_a, ax_b) = plt.subplots(1, 2, figsize=(14, 6.6), layout="constrained",
                                     gridspec_kw={"width_ratios": [1, 1.25]})

    def matrix(ax, rows, cols, box_rows, box_cols, boxes, name, skipped=()):
        ax.add_patch(Rectangle((0, 0), cols, rows, color=BLUE, alpha=0.12))
        for y in range(0, rows + box_rows, box_rows):
            ax.axhline(y, color=GREY, lw=0.5, ls=":")
        for x in range(0, cols + box_cols, box_cols):
            ax.axvline(x, color=GREY, lw=0.5, ls=":")
        ax.add_patch(Rectangle((0, 0), cols, rows, fill=False, lw=1.5, color=BLUE))
        for i, b in enumerate(boxes):
            real, (h, w) = b["real"], b["real"].shape
            ax.add_patch(Rectangle((b["x"], b["y"]), w, h, color=ORANGE, alpha=0.35, lw=0))
            fill_rows, fill_cols = h - real.any(axis=1).sum(), w - real.any(axis=0).sum()
            if fill_rows or fill_cols:                       # the part outside the matrix: zeros
                inside_w, inside_h = w - fill_cols, h - fill_rows
                for (x0, y0, ww, hh) in ((b["x"] + inside_w, b["y"], fill_cols, h),
                                         (b["x"], b["y"] + inside_h, inside_w, fill_rows)):
                    if ww and hh:
                        ax.add_patch(Rectangle((x0, y0), ww, hh, fill=False, hatch="///", color=RED, lw=0))
            ax.add_patch(Rectangle((b["x"], b["y"]), w, h, fill=False, lw=2, color=ORANGE))
            ax.text(b["x"] + w / 2, b["y"] + 10, f"{name} box {i}" if len(boxes) > 1 else f"{name} box",
                    ha="center", va="center", fontsize=8)
            ax.text(b["x"] + w / 2, b["y"] + h / 2, f"{int(real.sum())} of {h * w}\nfrom {name}",
                    ha="center", va="center", fontsize=7.5)
        for x, y, w, h in skipped:
            ax.add_patch(Rectangle((x, y), w, h, fill=False, lw=1.5, ls="--", color=GREY))
            ax.text(x + w / 2, y + h / 2, "not issued:\nwholly right\nof N", ha="center", va="center",
                    fontsize=7.5, color=GREY)
        ax.set_aspect("equal")
        ax.invert_yaxis()

    a, box_a, box_b = d["a"], d["box_a"], d["box_b"]
    matrix(ax_a, d["M"], d["K"], *box_a, [a], "A")
    ax_a.set_xlim(-8, max(d["K"], a["x"] + box_a[1]) + 8)
    ax_a.set_ylim(max(d["M"], a["y"] + box_a[0]) + 8, -8)
    ax_a.set_xlabel("k (column of A)")
    ax_a.set_ylabel("m (row of A)")
    ax_a.set_title(f"A: {d['M']} × {d['K']} (blue); box {box_a[0]} × {box_a[1]} at "
                   f"(x = k tile · {t.bk}, y = tile row · {t.bm}) = ({a['x']}, {a['y']})\n"
                   f"hatched: outside A, written as zeros ({d['a_bytes']} bytes land in any case)",
                   fontsize=9.5)
    n_panels = t.bn // box_b[1]
    skipped = [(b_x, d["b"][0]["y"], box_b[1], box_b[0]) for b_x in
               range(box_b[1] * d["panels"], box_b[1] * n_panels, box_b[1])]
    matrix(ax_b, d["K"], d["N"], *box_b, d["b"], "B", skipped)
    ax_b.set_xlim(-8, box_b[1] * n_panels + 8)
    ax_b.set_ylim(max(d["K"], d["b"][0]["y"] + box_b[0]) + 8, -8)
    ax_b.set_xlabel("n (column of B)")
    ax_b.set_ylabel("k (row of B)")
    ax_b.set_title(f"B: {d['K']} × {d['N']}; the {t.bn}-column tile as panels of {box_b[0]} × {box_b[1]} "
                   f"(a SWIZZLE_128B box is at most 128 bytes wide)\n{d['panels']} panels issued at "
                   f"y = k tile · {t.bk} = {d['b'][0]['y']}; each {d['panel_bytes']} bytes",
                   fontsize=9.5)
    fig.suptitle(f"One stage's TMA copies (v10–v13, boxes from numba_gemm.hgemm._wgmma.boxes; contents as "
                 f"ptx.hopper.tma_box): the producer arms full[s] with expect_tx = {d['a_bytes']} + "
                 f"{d['panels']} × {d['panel_bytes']} = {d['tx']} bytes,\nthen issues the copies; full[s] "
                 "completes its phase when all those bytes have landed — zero fill counts, a skipped panel "
                 "does not. The consumers wait on full[s] with parity (use of the stage) mod 2.",
                 fontsize=10.5)
    _save(fig, path)


def draw_v12_roles(path):
    """v12's three warpgroups: what each does, and its registers per thread before and after
    setmaxnreg (area = registers of the warpgroup)."""
    plt = _plt()
    from matplotlib.patches import Rectangle

    d = v12_roles()
    t = d["tile"]
    fig, (ax, ax_r) = plt.subplots(1, 2, figsize=(14, 5.6), layout="constrained",
                                   gridspec_kw={"width_ratios": [1.3, 1]})
    for role, first, n, regs, rows in d["warpgroups"]:
        colour = ORANGE if role == "producer" else GREEN
        ax.add_patch(Rectangle((first, 0), n, regs, color=colour, alpha=0.75, lw=1, ec="black"))
        what = ("setmaxnreg.dec" if role == "producer" else "setmaxnreg.inc")
        ax.text(first + n / 2, regs + 6, f"{what} {regs}\n{n} × {regs} = {n * regs:,}", ha="center",
                va="bottom", fontsize=8.5)
        label = "warpgroup 0\nproducer" if role == "producer" else \
            f"warpgroup {first // 128}\nconsumer, rows {rows[0]}–{rows[1]}"
        ax.text(first + n / 2, min(regs, d["entry"]) / 2, label, ha="center", va="center", fontsize=8.5)
    ax.plot([0, d["threads"]], [d["entry"]] * 2, color=RED, lw=2, ls="--")
    ax.text(4, d["entry"] + 4, f"at entry: {d['entry']} per thread (__launch_bounds__({d['threads']}, 1): "
            f"{d['file']:,} / {d['threads']}, down to a multiple of 8)", color=RED, fontsize=8.5)
    ax.set_xlim(0, d["threads"])
    ax.set_ylim(0, max(w[3] for w in d["warpgroups"]) + 45)
    ax.set_xticks(range(0, d["threads"] + 1, 128))
    ax.set_xlabel("thread of the CTA")
    ax.set_ylabel("registers per thread")
    ax.set_title(f"Register split: {d['used']:,} of the SM's {d['file']:,} registers after setmaxnreg "
                 f"(values from native/v12_warpspec.cu)", fontsize=10)
    ax_r.axis("off")
    lines = [
        (ORANGE, "producer warpgroup (thread 0 only)",
         ["for each K tile f: s = f mod stages",
          "  from the second use: wait empty[s], parity (f // stages − 1) mod 2",
          f"  arrive.expect_tx(full[s], A box + B panels: up to {t.stage_bytes:,} bytes)",
          f"  TMA: A box {t.bm}×{t.bk}, B panels {t.bk}×64 → stage s"]),
        (GREEN, f"{t.consumers} consumer warpgroups (rows 0–63, 64–127)",
         ["for each K tile kt: s = kt mod stages",
          "  wait full[s], parity (kt // stages) mod 2",
          f"  wgmma.fence; {t.bk // 16} × wgmma m64n{t.bn}k16; commit_group",
          "  wait_group 1: stage kt − 1's wgmma are done",
          "  lane 0 of each warp: arrive on empty[(kt − 1) mod stages]",
          f"then wait_group 0 and store the 64 × {t.bn} fp32 tile from registers"]),
    ]
    y = 0.97
    for colour, head, body in lines:
        ax_r.text(0.0, y, head, fontsize=10, weight="bold", color=colour, va="top", transform=ax_r.transAxes)
        y -= 0.08
        for line in body:
            ax_r.text(0.02, y, line, fontsize=9, family="monospace", va="top", transform=ax_r.transAxes)
            y -= 0.065
        y -= 0.05
    ax_r.text(0.0, y, f"empty[s] counts {4 * t.consumers} arrivals (one per consumer warp); full[s] one "
              "arrival + the bytes.\nEach role is one branch of one if/else, as setmaxnreg needs.",
              fontsize=8.5, va="top", transform=ax_r.transAxes, color=GREY)
    fig.suptitle(f"v12: {d['threads']} threads = {len(d['warpgroups'])} warpgroups of 128 — one that only "
                 f"loads (TMA), {t.consumers} that only multiply (wgmma); setmaxnreg moves registers to "
                 "the multipliers' 128 accumulators", fontsize=11)
    _save(fig, path)


def draw_v13_cluster(path):
    """v13: what each CTA of a 2-CTA cluster loads per stage (its A, half of B, multicast to
    both), and the persistent walk: which tiles each cluster computes, in which round."""
    plt = _plt()
    import numpy as np
    from matplotlib.patches import FancyArrowPatch, Rectangle

    mc, sc = v13_multicast(), v13_schedule()
    fig = plt.figure(figsize=(16, 8.6), layout="constrained")
    gs = fig.add_gridspec(1, 2, width_ratios=[1, 1.25])
    ax = fig.add_subplot(gs[0, 0])
    panels = len(mc["ranks"][0]["panels"]) * mc["cluster"]
    kb = lambda b: f"{b // 1024} KB"                                   # noqa: E731
    # L2: B's panels on top; the two CTAs' stages below
    for p in range(panels):
        rank = next(r for r, v in mc["ranks"].items() if p in v["panels"])
        ax.add_patch(Rectangle((1 + 1.5 * p, 8), 1.3, 1, color=(BLUE, PURPLE)[rank], alpha=0.6))
        ax.text(1.65 + 1.5 * p, 8.5, f"B panel {p}\nloaded by CTA {rank}", ha="center", va="center", fontsize=8)
    ax.text(0.1, 9.5, f"L2 / DRAM: the pair's shared B tile ({panels} panels of {kb(mc['panel'])})",
            fontsize=9)
    for rank, v in mc["ranks"].items():
        x0, y0 = 0.3 + 4.2 * rank, 1.0
        ax.add_patch(Rectangle((x0, y0), 3.9, 4.6, fill=False, lw=1.5))
        ax.text(x0 + 1.95, y0 + 4.3, f"CTA rank {rank}: tile row 2·pm + {rank}", ha="center", fontsize=9,
                weight="bold")
        ax.add_patch(Rectangle((x0 + 0.2, y0 + 2.6), 3.5, 1.2, color=ORANGE, alpha=0.6))
        ax.text(x0 + 1.95, y0 + 3.2, f"own A box ({kb(v['a_bytes'])}), own load", ha="center", fontsize=8)
        for p in range(panels):
            owner = next(r for r, w in mc["ranks"].items() if p in w["panels"])
            ax.add_patch(Rectangle((x0 + 0.2 + 0.88 * p, y0 + 0.9), 0.8, 1.3, color=(BLUE, PURPLE)[owner],
                                   alpha=0.6))
            ax.text(x0 + 0.6 + 0.88 * p, y0 + 1.55, f"B{p}", ha="center", va="center", fontsize=8)
            ax.add_patch(FancyArrowPatch((1.65 + 1.5 * p, 8), (x0 + 0.6 + 0.88 * p, y0 + 2.2),
                                         arrowstyle="->", mutation_scale=8, color=(BLUE, PURPLE)[owner],
                                         alpha=0.55, lw=1))
        ax.text(x0 + 1.95, y0 + 0.4, f"reads {kb(v['issued'])} from L2, receives {kb(v['received'])}",
                ha="center", fontsize=8)
    ax.text(0.1, 0.1, f"per stage and CTA: {kb(mc['ranks'][0]['issued'])} from L2 instead of v12's "
            f"{kb(mc['v12_issued'])};\nfull[s] expects the whole {kb(mc['stage_bytes'])}; empty[s] counts the "
            "consumer warps of both CTAs", fontsize=8.5, color=GREY)
    ax.set_xlim(0, 8.8)
    ax.set_ylim(0, 10)
    ax.axis("off")
    ax.set_title(f"Cluster of {mc['cluster']} along M: each CTA multicasts B panels rank, rank + "
                 f"{mc['cluster']} (.multicast::cluster)", fontsize=10)
    # the persistent schedule
    ax2 = fig.add_subplot(gs[0, 1])
    gm, gn = sc["grid"]
    img = np.zeros((gm, gn))
    for (r, c), (cl, rank, rnd) in sc["owner"].items():
        img[r, c] = rnd
    cmap = plt.get_cmap("Pastel1", sc["rounds"])
    ax2.imshow(img, cmap=cmap, vmin=-0.5, vmax=sc["rounds"] - 0.5, aspect="auto", interpolation="nearest")
    for (r, c), (cl, rank, rnd) in sc["owner"].items():
        ax2.text(c, r, str(cl), ha="center", va="center", fontsize=5.5,
                 color=RED if cl == 0 else "black", weight="bold" if cl == 0 else "normal")
    walk = sorted(((rnd, r, c) for (r, c), (cl, rank, rnd) in sc["owner"].items() if cl == 0 and rank == 0))
    ax2.plot([c for _, _, c in walk], [r + 0.5 for _, r, _ in walk], color=RED, lw=1.2, marker="o", ms=3)
    for r in range(0, gm + 1, sc["cluster"]):
        ax2.axhline(r - 0.5, color="white", lw=0.6)
    for r in range(0, gm + 1, sc["super"][0]):
        ax2.axhline(r - 0.5, color="black", lw=1.5)
    ax2.set_xticks(range(gn))
    ax2.set_yticks(range(0, gm, 2))
    ax2.tick_params(labelsize=7)
    ax2.set_xlabel("tile column bn (256 columns)")
    ax2.set_ylabel("tile row bm (128 rows); white lines: pairs of one cluster; black: super-rows")
    from matplotlib.patches import Patch

    ax2.legend(handles=[Patch(color=cmap(i), label=f"round {i}") for i in range(sc["rounds"])],
               loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    M, N, K = sc["shape"]
    ax2.set_title(f"Persistent walk at {M}×{N}×{K}: {sc['clusters']} clusters; cluster c computes "
                  f"pair-tiles c, c + {sc['clusters']}, ... (number = cluster)\nin super-tile order "
                  f"({sc['super'][0]} tile rows × {sc['super'][1]} column per super-tile); red: "
                  "cluster 0's walk", fontsize=9.5)
    fig.suptitle("v13 = v12 + persistent 2-CTA clusters (numba_gemm.hgemm.v13_persistent: CLUSTER, "
                 "launch_config, tile_order; the walk as native/v13_persistent.cu's tile_of)", fontsize=11)
    _save(fig, path)


def draw_epilogue_overlap(path):
    """v12 against v13 on one SM: the producer's copies, the consumers' wgmma and epilogue; in
    v13 the next tile's copies are issued while this tile's epilogue runs."""
    plt = _plt()

    fig, axes = plt.subplots(2, 1, figsize=(14, 7.4), layout="constrained", sharex=True)
    cases = (("v12", "one CTA per tile: the SM's next CTA starts after this one exits"),
             ("v13", "persistent: one set-up, the ring runs on across tiles"))
    end = max(epilogue_timeline(lv)["end"] for lv, _ in cases)
    for ax, (lv, what) in zip(axes, cases):
        d = epilogue_timeline(lv)
        shades = (BLUE, PURPLE, GREEN)
        for t, e in enumerate(d["tiles"]):
            c = shades[t % len(shades)]
            if e["setup"]:
                ax.broken_barh([(e["setup"][0], e["setup"][1] - e["setup"][0])], (-0.4, 2.5), color=GREY,
                               alpha=0.35)
                ax.text(sum(e["setup"]) / 2, 0, "set-up", ha="center", va="center", fontsize=7)
            for i, (s, f) in enumerate(e["loads"]):          # one lane per stage of the ring
                y = 1.9 - 0.28 * ((e["ring"][i]) % d["stages"])
                ax.broken_barh([(s, f - s)], (y - 0.12, 0.24), color=c, alpha=0.55)
                ax.text(s + 0.05, y, f"k{i}", fontsize=6, va="center")
            for s, f in e["wgmma"]:
                ax.broken_barh([(s, f - s)], (-0.35, 0.7), color=c, alpha=0.85, ec="white")
            ax.text(e["wgmma"][0][0] + 0.1, 0, f"tile {t} wgmma", fontsize=7, va="center", color="white")
            s, f = e["epilogue"]
            ax.broken_barh([(s, f - s)], (-0.35, 0.7), color=ORANGE)
            ax.text((s + f) / 2, 0, "epilogue\n(C from registers)", ha="center", va="center", fontsize=7)
            ax.axvspan(s, f, color=ORANGE, alpha=0.07)
        ax.set_yticks([0] + [1.9 - 0.28 * st for st in range(d["stages"])],
                      ["consumers"] + [f"copy → stage {st}" for st in range(d["stages"])], fontsize=8)
        ax.set_ylim(-0.6, 2.2)
        ax.set_title(f"{lv}: {what} — {len(d['tiles'])} tiles in {d['end']:.0f} units", fontsize=10,
                     loc="left")
        ax.grid(True, axis="x", alpha=0.3)
        ax.set_xlim(0, end + 0.5)
    axes[-1].set_xlabel(f"time, in units of one K tile's wgmma ({epilogue_timeline('v13')['stages']} "
                        "stages; copy latency, epilogue and set-up lengths are assumptions for the "
                        "picture, not measurements)")
    fig.suptitle("The epilogue and the next tile's loads (numba_gemm.explain.figures.epilogue_timeline, the "
                 "producer/consumer loops of native/v12_warpspec.cu and v13_persistent.cu): in v13 "
                 "the\nproducer fills the next tile's stages as soon as they are released, so its copies "
                 "land during this tile's epilogue; in both the tensor cores idle while C is stored",
                 fontsize=10.5)
    _save(fig, path)
