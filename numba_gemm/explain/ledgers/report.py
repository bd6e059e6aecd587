"""The ledgers as text: one level explained against its PARENT, every level as Markdown
tables (docs/LADDER.md), and the 4096 / 4097 stride experiment."""
from __future__ import annotations

from typing import Mapping, Sequence

from ...sgemm._access import BANK_BYTES, SEGMENT, WARP, Geometry, bank_profile, kind_name, requests, sectors
from .card import Card, card
from .ledger import (bytes_ledger, cycle_ledger, htile, l2_ledger, level_of, predicted_speedup,
                     request_ledger, warp_steps, waves)


def _f(x, fmt="{:.3f}", none="n/m"):
    return none if x is None else fmt.format(x)


def _time(seconds) -> str:
    """A time with its digits: ms from 1 ms up, µs below (a 48³ roofline is 0.01 µs, not 0.000 ms)."""
    if seconds is None:
        return "n/m"
    if seconds >= 1e-3:
        return f"{1e3 * seconds:.3f} ms"
    return f"{1e6 * seconds:.3g} µs"


def _ms_cell(seconds) -> str:
    """Milliseconds for a table column: three decimals, significant digits below 0.1 ms."""
    ms = 1e3 * seconds
    return f"{ms:.3f}" if ms >= 0.1 else f"{ms:.3g}"


def _moved(a, b, tol=0.05) -> str:
    if a is None or b is None:
        return "?"
    r = a / b if b else float("inf")
    return f"{r:.3f}×" + (" (moved)" if abs(r - 1) > tol else "")


def _shape(n):
    return (n, n, n) if isinstance(n, int) else tuple(n)


# ---------------------------------------------------------------------------- the stride experiment

def stride_view(level="k1", n: int = 4096, geom: Geometry | None = None) -> str:
    """What the request ledger sees of a level's least coalesced global load at size n (and
    what it cannot see: how the 32 addresses fall modulo 16 KiB)."""
    name = level if isinstance(level, str) else level.name
    st = warp_steps(level, n, geom)[0]
    loads = [a for a in st.accesses if a.space == "global" and a.op == "load"]
    worst = max(loads, key=lambda a: requests(a.addrs, SEGMENT, a.width))
    stride = worst.addrs[1] - worst.addrs[0]
    low14 = len({x % (16 * 1024) for x in worst.addrs})
    words = len({x % SEGMENT // BANK_BYTES for x in worst.addrs})
    ways = bank_profile(worst.addrs, BANK_BYTES).ways
    others = "".join(f"; {a.array} load {requests(a.addrs, SEGMENT, a.width)} request(s)"
                     for a in loads if a is not worst)
    return (f"{name} @ {n}: {worst.array} load lanes {stride} bytes apart -> "
            f"{requests(worst.addrs, SEGMENT, worst.width)} requests, {sectors(worst.addrs, worst.width)} "
            f"sectors{others}; addresses mod 16 KiB: {low14} distinct value(s) across the {WARP} lanes; "
            f"word positions in their 128-byte lines: {words} ({ways}-way if L1 serves hits from "
            f"32 banks)")


def stride_experiment(k1_4096: float, k2_4096: float, k1_4097: float, k2_4097: float,
                      label: str = "this card") -> str:
    """Split k1/k2 at 4096 into coalescing (the 4097 ratio) and the power-of-two stride penalty."""
    r96 = k1_4096 / k2_4096
    r97 = k1_4097 / k2_4097
    pen = r96 / r97
    lines = [
        f"4096 vs 4097 on {label} (ms):",
        "             N=4096      N=4097",
        f"  k1     {k1_4096:10.3f}  {k1_4097:10.3f}   k1 is {k1_4096 / k1_4097:.2f}× slower at 4096",
        f"  k2     {k2_4096:10.3f}  {k2_4097:10.3f}   k2 changes {100 * (k2_4097 / k2_4096 - 1):+.1f}%",
        f"  k1/k2  {r96:9.3f}×  {r97:9.3f}×",
        f"  coalescing alone (the 4097 ratio): {r97:.3f}×; power-of-two stride penalty: "
        f"{r96:.3f} / {r97:.3f} = {pen:.2f}×; check {r97:.3f} × {pen:.2f} = {r97 * pen:.3f}×",
        "  Request ledger: " + stride_view("k1", 4096),
        "                  " + stride_view("k1", 4097),
        "  The request ledger is the same at both sizes (33 per FMA): the penalty is not in it.",
        "  At 4096 every lane's address is the same modulo 16 KiB (rows are exactly 16 KiB",
        "  apart), so any cache set, L2 slice or DRAM channel chosen from address bits below 14",
        "  receives all 32 lines of the warp; at 4097 the rows drift by 4 bytes each and the",
        "  low bits spread. Which of these structures the hardware actually indexes that way",
        "  (and its hash) is not documented: the ledger stops here. ncu can look: L1 hit rate",
        "  (l1tex__t_sector_hit_rate), L2 hit rate (lts__t_sector_hit_rate) and DRAM bytes",
        "  (dram__bytes_read.sum) for k1 at 4096 and 4097, with --clock-control none.",
    ]
    return "\n".join(lines)


def supertile_comparison(n=8192, card_: Card | str | None = None, level="v9") -> str:
    """DRAM traffic of a super-tiled level's PARENT order vs its own at size n."""
    lv = level_of(level)
    c = card(card_)
    lines = [f"L2 model at {n}³ on {c.name} (L2 {c.l2_bytes / 2**20:.0f} MiB):"]
    for lg in (l2_ledger(lv.parent, n, c), l2_ledger(lv, n, c)):
        lines.append(f"  {lg.level}: A read {lg.a_reads}×, B read {lg.b_reads}×, "
                     f"DRAM {lg.dram_bytes / 1e9:.2f} GB (ideal {lg.ideal_bytes / 1e9:.2f} GB, "
                     f"no-reuse bound {lg.per_tile_bytes / 1e9:.2f} GB)")
        lines += [f"      {s}" for s in lg.notes]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- one level

def wave_line(level, n, card_: Card | str | None = None) -> str | None:
    """The launch in waves of resident CTAs (SMs × the level's CTAs per SM), and how auto's
    "N waves of S" (choose.explain, printed after the ledgers) relates to it: auto's S is SMs ×
    a fitted blocks_per_sm, not an occupancy. None where the level fixes no CTAs per SM."""
    w = waves(level, n, card_)
    if w.resident is None:
        return None
    r = w.rounds(w.ctas, w.resident)
    line = (f"  waves: {w.ctas} CTAs against {w.sms} SMs × {w.ctas_per_sm} CTAs per SM (launch bounds) "
            f"= {w.resident} resident: {w.ctas / w.resident:.2f} waves ({r} × {w.resident} = "
            f"{r * w.resident} slots)")
    if w.auto_slots:
        a = w.rounds(w.ctas, w.auto_slots)
        same = "the same" if a * w.auto_slots == r * w.resident else "not the same"
        line += (f"; auto below counts a wave as {w.sms} SMs × {w.auto_blocks_per_sm} (its fitted "
                 f"blocks_per_sm, not an occupancy): {a} wave{'s' * (a != 1)} of {w.auto_slots} = "
                 f"{a * w.auto_slots} slots, {same}")
    return line


def _loads_per_fma(rl, cl) -> float:
    return rl.loads_per_fma + sum(v for k, v in cl.per_fma.items() if k.startswith("lds"))


def explain(level, card_: Card | str | None = None, measured_ms=None, n=4096) -> str:
    """The three ledgers of one level as text, what moved from its PARENT, and the predicted
    speedup over the parent next to the measured one.

    measured_ms: None, a float (this level's time at size n), or a dict {level: ms} — with
    the parent's time in it, the measured speedup is printed too.
    """
    lv = level_of(level)
    name, prev = lv.name, lv.parent
    c = card(card_)
    M, N, K = _shape(n)
    ms = measured_ms.get(name) if isinstance(measured_ms, Mapping) else measured_ms
    prev_ms = measured_ms.get(prev) if isinstance(measured_ms, Mapping) and prev else None
    out = [f"== {name} on {c.name}, M=N=K={M}" if M == N == K else f"== {name} on {c.name}, {M}×{N}×{K}"]

    bl = bytes_ledger(lv, c, (M, N, K))
    out.append("bytes ledger")
    out.append(f"  FLOPs {bl.flops:.4g}; DRAM bytes {bl.dram_bytes:.4g} ({bl.model})")
    out.append(f"  intensity {bl.intensity:.3f} FLOP/byte; roofline {_time(bl.roofline_s)} "
               f"({bl.bound}-bound: bytes {_time(bl.t_bytes)} at {c.bandwidth / 1e12:.2f} TB/s, "
               f"FLOPs {_time(bl.t_flops)})")
    if ms:
        att = bl.attainment(ms / 1e3)
        out.append(f"  measured {_time(ms / 1e3)} = {bl.flops / ms / 1e9:.1f} TFLOPS; attainment "
                   f"{att:.1f}% of the roofline"
                   + (("  (>100% on a memory roof: its bytes come from L1/L2, not DRAM)"
                       if bl.bound == "memory" else
                       "  (>100% on a compute roof: faster than the ceiling this card record uses)")
                      if att > 100 else ""))

    if lv.family == "hgemm":
        t = htile(lv, (M, N, K), c.l2_bytes)
        out.append(f"  tile {t.bm}×{t.bn}×{t.bk}, launch order {t.raster}"
                   + (f" {t.super_m}×{t.super_n}" if t.raster == "super" else ""))
        lg = l2_ledger(lv, (M, N, K), c)
        out.append(f"  L2 model: DRAM {lg.dram_bytes / 1e9:.3f} GB (ideal {lg.ideal_bytes / 1e9:.3f}, "
                   f"no reuse {lg.per_tile_bytes / 1e9:.3f}); " + "; ".join(lg.notes))
        if lg.working_set:
            out.append(f"  super-tile working set (SM·BM + SN·BN)·K·2 = {lg.working_set / 1e6:.1f} MB "
                       f"vs L2 {c.l2_bytes / 1e6:.1f} MB")
        if "HGMMA" in getattr(lv.module, "SASS_MUST_NOT_HAVE", ()):      # v11gv: FFMA, no tensor cores
            out.append("requests ledger: n/a: B moves as 16-byte loads straight into registers, a warp's "
                       "load one run of 512 contiguous bytes")
            out.append("cycles ledger: n/a: the limit is DRAM bytes in flight (loads per lane, CTAs per SM), "
                       "not LDS prices; see the SASS census")
        else:
            out.append("requests ledger: n/a: tensor-core level (tiles move as 16-byte cp.async / TMA "
                       "boxes, every warp load is fully coalesced by construction)")
            out.append("cycles ledger: n/a: tensor-core level (the limit is the tensor-core pipe, mma.sync or wgmma, "
                       "and the pipeline depth, not LDS prices; see the SASS census)")
        if "LDSM" in lv.sass_must_have:     # its fragments come through ldmatrix
            lds128 = c.costs.get("lds128")
            out.append("  fragment loads: " + (
                f"ldmatrix.x4 {c.ldsm_cycles:.2f} SM cycles per warp instruction (measured)" if c.ldsm_cycles
                else f"ldmatrix.x4 not yet measured on {c.name} (python -m numba_gemm.measure.microbench --tensor)")
                + (f", LDS.128 {lds128:.2f}" if lds128 else ""))
        if prev:
            pb = bytes_ledger(prev, c, (M, N, K))
            pl = l2_ledger(prev, (M, N, K), c)
            out.append(f"moved from {prev}: intensity {_moved(bl.intensity, pb.intensity)}, "
                       f"modelled DRAM bytes {_moved(pl.dram_bytes, lg.dram_bytes)}")
        if ms and prev_ms:
            out.append(f"measured {prev}/{name} = {prev_ms / ms:.3f}×")
        return "\n".join(out)

    g = lv.module.GEOMETRY
    out.append(f"  geometry: block {g.block[0]}×{g.block[1]}, tile {g.tile_m}×{g.tile_n}×{g.tile_k}, "
               f"{g.thread_m}×{g.thread_n} outputs/thread")
    w = wave_line(lv, (M, N, K), c)
    if w:
        out.append(w)
    rl = request_ledger(lv, (M, N, K))
    out.append("requests ledger (one warp, 128-byte segments / 32-byte sectors)")
    for arr, (rpl, lpf) in rl.by_array().items():
        out.append(f"  {arr}: {rpl:.2f} requests per warp load, {lpf:.4f} loads per FMA")
    out.append(f"  total {rl.requests_per_fma:.4f} requests per FMA, {rl.sectors_per_fma:.4f} sectors per FMA")
    if any(r == WARP for _, _, r, _, _ in rl.loads):   # one line per lane: where do the lines fall?
        out.append("  " + stride_view(lv, N))

    cl = cycle_ledger(lv, c, (M, N, K))
    out.append(f"cycles ledger (SM cycles per warp instruction; prices: {c.costs_source or 'not measured on this card'})")
    for kind, v in sorted(cl.per_fma.items()):
        price, _ = cl.cost(kind)
        basis = c.price_basis(kind)
        p = "not measured on this card" if price is None else (
            f"× {price:.3f} = {v * price:.4f}" + (f" ({basis})" if basis else ""))
        out.append(f"  {kind:16s} {v:.4f} per FMA  {p}   [{kind_name(kind)}]")
    for kind, v in sorted(cl.stores_per_fma.items()):
        out.append(f"  {kind:16s} {v:.4f} per FMA  (shared store: counted, not priced)")
    if cl.cycles_per_fma is None:
        out.append(f"  total: not measured on this card (missing: {', '.join(cl.missing)})")
    else:
        out.append(f"  total {cl.cycles_per_fma:.3f} cycles per FMA (shared {cl.shared_cycles:.3f} + "
                   f"global {cl.global_cycles:.3f}); shared loads per 8 FMAs {8 * cl.shared_cycles:.2f}, "
                   f"per 32 FMAs {32 * cl.shared_cycles:.1f}; FFMA floor {cl.ffma_floor:.2f}")
        t = cl.predicted_s(M, N, K)
        out.append(f"  cycle-ledger time {_time(t)} at {c.clock_ghz:.2f} GHz × {c.sms} SMs"
                   + (f" (measured {_time(ms / 1e3)})" if ms else ""))

    if prev:
        pb = bytes_ledger(prev, c, (M, N, K))
        pr = request_ledger(prev, (M, N, K))
        pc = cycle_ledger(prev, c, (M, N, K))
        out.append(f"moved from {prev}: intensity {_moved(bl.intensity, pb.intensity)}; "
                   f"requests/FMA {_moved(pr.requests_per_fma, rl.requests_per_fma)}; "
                   f"load instructions/FMA {_moved(_loads_per_fma(pr, pc), _loads_per_fma(rl, cl))}; "
                   f"cycles/FMA {_moved(pc.cycles_per_fma, cl.cycles_per_fma)}")
        sp = predicted_speedup(pc, cl)
        line = f"predicted {prev}->{name} speedup (cycles ledger): {_f(sp, '{:.3f}×', 'not measured on this card')}"
        if ms and prev_ms:
            meas = prev_ms / ms
            line += f"; measured {meas:.3f}×"
            if sp:
                line += f" ({100 * (meas / sp - 1):+.0f}% vs prediction)"
        out.append(line)
    return "\n".join(out)


# ---------------------------------------------------------------------------- every level

def markdown_tables(card_: Card | str | None = None, n=4096, measured_ms: Mapping | None = None,
                    levels: Sequence | None = None) -> str:
    """The ledgers of the levels (default: every registered level) as Markdown tables
    (docs/LADDER.md is built from these). Speedups are over each level's PARENT."""
    from ...registry import registry

    c = card(card_)
    lvs = [level_of(x) for x in levels] if levels is not None else list(registry().values())
    meas = measured_ms or {}
    pending = f"{c.name}: to be measured" if c.name == "H200" else "—"
    out = [f"Ledgers at M=N=K={n} on {c.name} (bandwidth {c.bandwidth / 1e12:.2f} TB/s, "
           f"FP32 {c.fp32_flops / 1e12:.1f} TFLOPS"
           + (f", tensor {c.tensor_flops / 1e12:.0f} TFLOPS" if c.tensor_flops else "")
           + (f" (mma.sync; wgmma {c.wgmma_flops / 1e12:.1f}, the roof of the wgmma levels)"
              if c.wgmma_flops else "")
           + f"; prices: {c.costs_source or 'not measured on this card'}).", ""]
    out += ["| level | reuse tile | FLOPs | DRAM bytes | intensity (FLOP/B) | roofline ms | bound | measured ms | attainment |",
            "|---|---|---|---|---|---|---|---|---|"]
    for lv in lvs:
        bl = bytes_ledger(lv, c, n)
        m = meas.get(lv.name)
        out.append(f"| {lv.name} | {bl.reuse_tile[0]}×{bl.reuse_tile[1]} | {bl.flops:.3g} | {bl.dram_bytes:.3g} | "
                   f"{bl.intensity:.3f} | {_ms_cell(bl.roofline_s)} | {bl.bound} | "
                   f"{_f(m, '{:.3f}', pending)} | "
                   f"{_f(m and bl.attainment(m / 1e3), '{:.1f}%', '—')} |")
    out.append("")
    sg = [lv for lv in lvs if lv.family == "sgemm"]
    if sg:
        out += ["| level | A: requests/load | B: requests/load | loads/FMA | requests/FMA | sectors/FMA |",
                "|---|---|---|---|---|---|"]
        for lv in sg:
            rl = request_ledger(lv, n)
            ba = rl.by_array()
            out.append(f"| {lv.name} | {ba['A'][0]:.2f} | {ba['B'][0]:.2f} | {rl.loads_per_fma:.4f} | "
                       f"{rl.requests_per_fma:.4f} | {rl.sectors_per_fma:.4f} |")
        out.append("")
        cls = {lv.name: cycle_ledger(lv, c, n) for lv in sg}
        kinds = sorted({k for cl in cls.values() for k in cl.per_fma})
        out += [f"| level | {' | '.join(kinds)} | cycles/FMA | parent | predicted speedup | measured speedup |",
                "|---|" + "---|" * (len(kinds) + 4)]
        for lv in sg:
            cl, prev = cls[lv.name], lv.parent
            cells = ["—" if cl.per_fma.get(k) is None else f"{cl.per_fma[k]:.4f}" for k in kinds]
            sp = predicted_speedup(cycle_ledger(prev, c, n), cl) if prev else None
            ms_sp = meas[prev] / meas[lv.name] if prev and meas.get(prev) and meas.get(lv.name) else None
            out.append(f"| {lv.name} | " + " | ".join(cells) +
                       f" | {_f(cl.cycles_per_fma, '{:.3f}', 'not measured on this card')} | {prev or '—'} | "
                       f"{_f(sp, '{:.3f}×', '—')} | {_f(ms_sp, '{:.3f}×', '—' if not prev else pending)} |")
        out.append("")
        out.append("Prices (SM cycles per warp instruction): " + ", ".join(
            f"{k} {_f(c.price(k)[0], '{:.3f}', 'not measured on this card')}"
            + (f" ({c.price_basis(k)})" if c.price_basis(k) else "") for k in kinds))
        out.append("")
    hg = [lv for lv in lvs if lv.family == "hgemm"]
    if hg:
        out += ["| level | tile BM×BN×BK | launch order | A reads | B reads | DRAM GB (L2 model) | no-reuse GB | super-tile working set |",
                "|---|---|---|---|---|---|---|---|"]
        for size in sorted({n, 8192}):
            for lv in hg:
                lg = l2_ledger(lv, size, c)
                t = lg.tile
                out.append(f"| {lv.name} @{size} | {t.bm}×{t.bn}×{t.bk} | {t.raster}"
                           + (f" {t.super_m}×{t.super_n}" if t.raster == "super" else "")
                           + f" | {lg.a_reads}× | {lg.b_reads}× | {lg.dram_bytes / 1e9:.3f} | "
                           f"{lg.per_tile_bytes / 1e9:.3f} | "
                           + (f"{lg.working_set / 1e6:.1f} MB" if lg.working_set else "—") + " |")
        out.append("")
    return "\n".join(out)
