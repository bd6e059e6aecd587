"""The shape suite: the shapes users call gemm() with, each against its roofline and cuBLAS.

    python bench.py --suite shapes --dtype bf16          # run it (GPU)
    python bench.py --suite shapes --dtype fp32 --explain  # roofline + auto's choice, nothing run

A shape's roofline time is the larger of its FLOPs over the compute ceiling (wgmma for
fp16/bf16, the FFMA peak for float32, both from numba_gemm/data/h200_costs.json, measured by
numba_gemm.measure.microbench) and its compulsory bytes over the measured DRAM bandwidth (A and B read
once, C written once). M ≤ ~128 against large N·K is bound by the bytes: each B element
feeds only M multiply-adds.

Per shape the suite checks auto's level and the other levels worth timing there (the cost
model's candidates within PRUNE of its best guess, numba_gemm.choose), then times those that
passed together with cuBLAS on the same buffers, in rounds of rotating order (the H200 is
power-bound: whatever ran last would run warmer), in two modes — isolated kernel time (a
sleeping kernel queued before each call hides the host) and back-to-back loops (the recorded
launches called LOOP_CALLS times between two events). The back-to-back loop is given against
two calls of cuBLAS: nvmath-python's (the "loop: auto/cuBLAS" column; its host cost per call is
larger than a small kernel) and torch.mm's ("loop: auto/torch.mm"), which is how most users
reach cuBLAS from Python.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import choose, registry as _levels, util

# (name, M, N, K): squares, transformer projections (decode to prefill against the (N, K) of
# 7B-70B models' layers), short K, narrow N, and rows TMA cannot describe.
SUITE = (
    ("square 512", 512, 512, 512),
    ("square 1024", 1024, 1024, 1024),
    ("square 2048", 2048, 2048, 2048),
    ("square 4096", 4096, 4096, 4096),
    ("square 8192", 8192, 8192, 8192),
    ("decode M=1", 1, 4096, 4096),
    ("decode M=16", 16, 8192, 8192),
    ("decode M=16, up-proj", 16, 14336, 4096),
    ("M=128", 128, 4096, 4096),
    ("M=128, wide", 128, 28672, 8192),
    ("M=512", 512, 4096, 4096),
    ("M=512, down-proj", 512, 4096, 14336),
    ("prefill up-proj", 4096, 14336, 4096),
    ("prefill down-proj", 4096, 4096, 14336),
    ("short K 512", 4096, 4096, 512),
    ("short K 256", 8192, 8192, 256),
    ("narrow N 128", 4096, 128, 4096),
    ("narrow N 64", 8192, 64, 8192),
    ("ragged cube 4097", 4097, 4097, 4097),
    ("ragged rows", 777, 5000, 3001),
)


def names_in(text: str) -> tuple[list[str], list[str]]:
    """(suite shape names, unknown pieces) in a comma-separated list; a name that has a comma of
    its own ("M=128, wide") is matched whole, the longest name first."""
    known = {name for name, *_ in SUITE}
    pieces = [p.strip() for p in text.split(",") if p.strip()]
    names, unknown, i = [], [], 0
    while i < len(pieces):
        j = next((j for j in range(len(pieces), i, -1) if ", ".join(pieces[i:j]) in known), None)
        if j is None:
            unknown.append(pieces[i])
            i += 1
        else:
            names.append(", ".join(pieces[i:j]))
            i = j
    return names, unknown


PRUNE = 3.0          # time the levels predicted within 3x of the best prediction
LOOP_CALLS = 20
LOOP_REPS = 5        # loops per competitor at least (more when more compete: whole rotations)
TORCH = "torch.mm"   # the back-to-back yardstick most users reach cuBLAS through


# ---------------------------------------------------------------------------- roofline

@dataclass(frozen=True)
class Roofline:
    flops: float
    bytes: float
    compute_s: float
    memory_s: float

    @property
    def seconds(self) -> float:
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"


def ceilings(dtype, costs: dict | None = None) -> tuple[float, float, str]:
    """(FLOP/s, bytes/s, what the compute ceiling is) measured on the H200 by the project."""
    from ..explain.ledgers.card import H200_COSTS, card

    c = card("h200")
    if choose.as_dtype(dtype) == np.float32:
        return c.fp32_flops, c.bandwidth, f"FFMA peak ({c.sms} SMs x 128 lanes x {c.clock_ghz} GHz)"
    if costs is None:
        import json

        with open(H200_COSTS) as f:
            costs = json.load(f)
    return (costs["tensor_tflops"]["wgmma"] * 1e12, c.bandwidth,
            "wgmma m64n256k16 register-free loop (numba_gemm.measure.microbench)")


def roofline(M: int, N: int, K: int, dtype, beta: float = 0.0) -> Roofline:
    flops, bw, _ = ceilings(dtype)
    es = choose.as_dtype(dtype).itemsize
    nbytes = (M * K + K * N) * es + 4 * M * N * (2 if beta else 1)
    work = 2.0 * M * N * K
    return Roofline(work, nbytes, work / flops, nbytes / bw)


# ---------------------------------------------------------------------------- explain (no GPU)

def explain(dtype, native: bool = True, only: list | None = None) -> str:
    """Each suite shape's roofline and the level auto would choose there, and why: nothing run.
    native: rank the native levels too (auto on an sm_90a GPU, wherever this runs); only: the
    names of the shapes to show (default: all)."""
    dtype = choose.as_dtype(dtype)
    flops, bw, what = ceilings(dtype)
    lines = [f"shape suite, {dtype.name} in, float32 out: roofline = max(FLOPs / {flops / 1e12:.1f} "
             f"TFLOPS [{what}], bytes / {bw / 1e12:.2f} TB/s [measured copy bandwidth])",
             f"auto ranks levels by predicted time (numba_gemm.choose, constants from "
             f"{choose.CALIBRATION.name}){' on an sm_90a GPU' if native else ''}; nothing is run.", ""]
    for name, M, N, K in SUITE:
        if only and name not in only:
            continue
        r = roofline(M, N, K, dtype)
        lines.append(f"{name}: {M}x{N}x{K}  roofline {r.seconds * 1e6:.1f} µs ({r.bound}-bound: "
                     f"{r.flops / 1e9:.2f} GFLOP, {r.bytes / 2**20:.1f} MiB)")
        lines += ["  " + ln for ln in choose.explain(dtype, M, N, K, native).splitlines()]
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- run (GPU)

@dataclass
class Timed:
    level: str
    ok: bool
    rel_err: float
    kernel_ms: float
    loop_ms: float
    predicted_ms: float | None
    splits: int = 1
    sm_clock_mhz: float | None = None   # NVML, right after its kernel-time calls (median of rounds)
    power_w: float | None = None


@dataclass
class ShapeResult:
    name: str
    M: int
    N: int
    K: int
    dtype: str
    roofline_ms: float
    bound: str
    auto: str
    levels: list = field(default_factory=list)       # Timed, as measured
    cublas_ms: float | None = None
    cublas_loop_ms: float | None = None
    torch_loop_ms: float | None = None                # torch.mm back-to-back (torch_mm)
    cublas_sm_clock_mhz: float | None = None
    cublas_power_w: float | None = None
    note: str = ""

    def _timed(self, level):
        return next((t for t in self.levels if t.level == level), None)

    @property
    def best(self) -> Timed | None:
        ok = [t for t in self.levels if t.ok]
        return min(ok, key=lambda t: t.kernel_ms) if ok else None

    def ratio(self, level: str | None = None, loop: bool = False, torch: bool = False) -> float | None:
        """cuBLAS time / the level's time (auto's by default): above 1 is faster than cuBLAS.
        loop: back-to-back against nvmath's cuBLAS call; torch: back-to-back against torch.mm."""
        t = self._timed(level or self.auto)
        base = self.torch_loop_ms if torch else self.cublas_loop_ms if loop else self.cublas_ms
        if t is None or not base:
            return None
        return base / (t.loop_ms if loop or torch else t.kernel_ms)

    def as_dict(self):
        d = asdict(self)
        d["best"] = self.best.level if self.best else None
        d["auto_vs_cublas"] = self.ratio()
        d["auto_vs_cublas_loop"] = self.ratio(loop=True)
        d["auto_vs_torch_loop"] = self.ratio(torch=True)
        return d


def torch_mm(dA, dB, dtype):
    """One call of torch.mm on the suite's device buffers with a float32 C (out_dtype for 16-bit
    inputs, as the levels write C): cuBLAS as torch users call it, host cost included. None
    where torch has no CUDA. fp32 is strict fp32 while torch's allow_tf32 is False (its default),
    and None where it is not."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available() or (dtype.itemsize == 4 and torch.backends.cuda.matmul.allow_tf32):
        return None
    tA, tB = torch.as_tensor(dA, device="cuda"), torch.as_tensor(dB, device="cuda")
    if dtype.itemsize == 4:
        return lambda: torch.mm(tA, tB)
    kind = torch.bfloat16 if dtype.name == "bfloat16" else torch.float16   # bf16 arrives as its bits
    tA, tB = tA.view(kind), tB.view(kind)
    return lambda: torch.mm(tA, tB, out_dtype=torch.float32)


def _record(level, dA, dB, dC):
    """The launches level.run makes on these buffers, recorded once (what gemm()/plan() do)."""
    from ..runtime import launch

    with launch.recording() as rec:
        level.run(dA, dB, dC, 1.0, 0.0)
    return rec.launches


def run_shape(runner, name: str, M: int, N: int, K: int, dtype, levels=None,
              progress=None) -> ShapeResult:
    """Check one suite shape's levels (auto's candidates, or `levels`), then time those that
    passed together with cuBLAS (time_together)."""
    from numba import cuda

    from . import check
    from .bench import CUBLAS

    dtype = choose.as_dtype(dtype)
    roof = roofline(M, N, K, dtype)
    ranked = choose.candidates(dtype, M, N, K, native=True)
    res = ShapeResult(name, M, N, K, dtype.name, roof.seconds * 1e3, roof.bound,
                      ranked[0].name if ranked else "-")
    if levels is None:
        best = next((q.ms for q in ranked if q.ms is not None), None)
        levels = [q for q in ranked if q.ms is None or best is None or q.ms <= PRUNE * best]
    else:
        levels = [q for q in ranked if q.name in levels]
    A, B, C, (dA, dB, dC) = runner.inputs(M, N, K, dtype)
    rows, products = runner.checked_rows(M, N, K, dtype)
    family = "sgemm" if dtype == np.float32 else "hgemm"
    poison = np.full((M, N), np.nan, np.float32)
    calls = {}
    for q in levels:
        if progress:
            progress(f"{name}: {q.name}")
        lv = _levels.get(q.level).variant(q.kwargs)
        cuda.to_device(poison, to=dC)                 # beta == 0: unwritten or read C shows as NaN
        launches = _record(lv, dA, dB, dC)
        for L in launches:
            L(0)
        v = check.verify(dC.copy_to_host()[rows], A[rows], B, None, 1.0, 0.0, family, products=products)
        res.levels.append(Timed(q.name, v.ok, v.rel_err, math.nan, math.nan, q.ms, q.geometry.splits))
        if v.ok:
            def call(launches=launches):
                for L in launches:
                    L(0)
            calls[q.name] = call
        else:
            res.note += f" {q.name} WRONG ({v.rel_err:.2e});"
    yardsticks = {}
    try:
        blas = runner.cublas()
        yardsticks[CUBLAS] = lambda: blas.gemm(dA, dB, dC, 1.0, 0.0, in_dtype=dtype)
    except Exception as exc:  # the levels' figures stand without the baseline
        res.note += f" cuBLAS unavailable: {exc}"
    try:
        mm = torch_mm(dA, dB, dtype)
        if mm is not None:
            yardsticks[TORCH] = mm
    except Exception as exc:  # noqa: BLE001 - as the cuBLAS baseline
        res.note += f" torch.mm unavailable: {exc}"
    kernel, loops = time_together(calls, yardsticks, reps=runner.reps)
    for t in res.levels:
        if t.ok:
            k = kernel[t.level]
            t.kernel_ms, t.loop_ms = k.timing.median_ms, loops[t.level].timing.median_ms
            t.sm_clock_mhz, t.power_w = k.sm_clock_mhz, k.power_w

    def yardstick(got, what):
        """got when it was timed; None when absent, or failed (its error goes in the note)."""
        if got is not None and got.timing is None:
            res.note += f" {what} failed while timed: {got.error};"
        return got if got is not None and got.timing is not None else None

    base = yardstick(kernel.get(CUBLAS), CUBLAS)
    base_loop, mm_loop = yardstick(loops.get(CUBLAS), f"{CUBLAS} (loop)"), yardstick(loops.get(TORCH), TORCH)
    if base:
        res.cublas_ms, res.cublas_sm_clock_mhz, res.cublas_power_w = \
            base.timing.median_ms, base.sm_clock_mhz, base.power_w
    res.cublas_loop_ms = base_loop and base_loop.timing.median_ms
    res.torch_loop_ms = mm_loop and mm_loop.timing.median_ms
    return res


def time_together(calls: dict, yardsticks: dict, reps: int | None = None) -> tuple[dict, dict]:
    """The checked levels' calls and the yardsticks ({name: fn}: cuBLAS, and torch.mm, which is
    timed in loops only) in rounds of rotating order (timing.interleaved), so that no competitor
    alone runs at the warmer end of the shape's time: once in kernel time (`reps` calls in all,
    by default as many as fit 0.4 s), once in back-to-back loops of LOOP_CALLS calls (one loop
    each per round, at least LOOP_REPS rounds). Returns (kernel, loops), each {name: Sampled}; a
    yardstick that fails is left out of later rounds with its error, a level's error propagates."""
    from . import timing

    def looped(fn, *, reps, warmup, flush_l2):
        return timing.loop(fn, calls=LOOP_CALLS, reps=reps, warmup=warmup)

    everyone = {**calls, **yardsticks}
    in_kernel = {n: f for n, f in everyone.items() if n != TORCH}
    kernel = timing.interleaved(in_kernel, reps=reps, optional=list(yardsticks)) if in_kernel else {}
    loops = timing.interleaved(everyone, reps=LOOP_REPS, optional=list(yardsticks),
                               time=looped) if everyone else {}
    return kernel, loops


def geomean(xs) -> float | None:
    xs = [x for x in xs if x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def ceilings_note(card: str) -> str:
    """What the roofline columns and auto stand on, when the card that ran is not the H200."""
    if not card or "H200" in card:
        return ""
    return (f"note: this ran on {card}; the roofline columns use the H200's measured ceilings "
            f"and auto's constants ({choose.CALIBRATION.name}) were fitted on the H200")


def format_table(results: list[ShapeResult], card: str = "") -> str:
    """The suite's table and summary lines; card (the device's name) adds ceilings_note's line."""
    head = ["shape", "M×N×K", "auto", "auto µs", "best", "best µs", "cuBLAS µs", "auto/cuBLAS",
            "loop: auto/cuBLAS", "loop: auto/torch.mm", "roofline µs", "bound", "% roofline"]
    rows = [head]
    for r in results:
        a, b = r._timed(r.auto), r.best
        us = lambda ms: "-" if ms is None or not math.isfinite(ms) else f"{ms * 1e3:.1f}"  # noqa: E731
        ratio, lratio, tratio = r.ratio(), r.ratio(loop=True), r.ratio(torch=True)
        rows.append([r.name, f"{r.M}×{r.N}×{r.K}", r.auto, us(a and a.kernel_ms),
                     b.level if b else "-", us(b and b.kernel_ms), us(r.cublas_ms),
                     *(f"{x:.3f}" if x else "-" for x in (ratio, lratio, tratio)),
                     us(r.roofline_ms), r.bound,
                     f"{100 * r.roofline_ms / a.kernel_ms:.0f}" if a and a.ok else "-"])
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head))]
    lines = ["  ".join(str(c).rjust(w) for c, w in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    ratios = [r.ratio() for r in results]
    loops = [r.ratio(loop=True) for r in results]
    torch_loops = [r.ratio(torch=True) for r in results]
    misses = [(r.name, r._timed(r.auto).kernel_ms / r.best.kernel_ms) for r in results
              if r.best and r._timed(r.auto) and r._timed(r.auto).ok]
    if any(ratios):
        worst = min((x, r.name) for x, r in zip(ratios, results) if x)
        lines.append(f"geomean auto/cuBLAS: {geomean(ratios):.3f} kernel time, "
                     f"{geomean(loops) or float('nan'):.3f} back-to-back; worst {worst[0]:.3f} ({worst[1]})")
    if any(torch_loops):
        lines.append(f"geomean auto/torch.mm back-to-back: {geomean(torch_loops):.3f} (cuBLAS through torch, "
                     "its host cost per call included)")
    if misses:
        name, x = max(misses, key=lambda m: m[1])
        lines.append(f"auto vs the best level timed: worst {x:.3f}x its time ({name})")
    clocks = [(t.sm_clock_mhz, t.power_w) for r in results for t in r.levels if t.ok] + \
        [(r.cublas_sm_clock_mhz, r.cublas_power_w) for r in results]
    mhz, watts = [c for c, _ in clocks if c], [w for _, w in clocks if w]
    if mhz:
        lines.append(f"SM clock after the kernel-time rounds (NVML): {min(mhz):.0f}–{max(mhz):.0f} MHz"
                     + (f", board power {min(watts):.0f}–{max(watts):.0f} W" if watts else ""))
    card_note = ceilings_note(card)
    if card_note:
        lines.append(card_note)
    notes = [f"  {r.name}: {r.note.strip()}" for r in results if r.note.strip()]
    return "\n".join(lines + (["notes:"] + notes if notes else []))


# ---------------------------------------------------------------------------- bench.py --suite shapes

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def provenance(command: str) -> dict:
    """Card, date, commit (util.commit) and command of a run."""
    import datetime

    commit = util.commit()
    card = ""
    try:
        from numba import cuda

        dev = cuda.get_current_device()
        card = f"{dev.name.decode() if isinstance(dev.name, bytes) else dev.name} (sm_{dev.compute_capability[0]}{dev.compute_capability[1]})"
    except Exception:  # noqa: BLE001 - provenance must not stop a finished run from being written
        pass
    return {"card": card, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%MZ"),
            "commit": commit or "unknown", "command": command}


def cli(dtype_name: str, *, explain_only: bool, simulator: bool, json_path: str | None,
        reps: int | None, seed: int | None, command: str, only: list | None = None) -> int:
    """bench.py --suite shapes: explain (any machine) or run (GPU) the suite for one dtype."""
    import json
    import sys

    from .bench import CHECK_ROWS, Progress, Runner

    dtype = choose.as_dtype(DTYPES.get(dtype_name, dtype_name))
    if explain_only:
        print(explain(dtype, native=True, only=only))
        return 0
    if simulator:
        print("bench.py --suite shapes times ~20 large shapes: it needs a GPU. Without one, "
              "`--suite shapes --explain` prints each shape's roofline and auto's choice.",
              file=sys.stderr)
        return 2
    runner = Runner(False, reps=reps, seed=seed)
    suite = [s for s in SUITE if not only or s[0] in only]
    bar = Progress(len(suite))
    results = []
    for name, M, N, K in suite:
        bar.step(name)
        results.append(run_shape(runner, name, M, N, K, dtype))
    bar.close()
    prov = provenance(command)
    print(format_table(results, prov["card"]))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(dict(prov, dtype=dtype.name, roofline="the H200's measured ceilings",
                           method=("checked first: each level on the same "
                                   f"{CHECK_ROWS} rows of C (the last among them) against float64, C "
                                   "poisoned (NaN); then the levels that passed, cuBLAS (nvmath-python) "
                                   "and, in loops, torch.mm (float32 C: out_dtype for 16-bit inputs) on "
                                   "the same buffers, in rounds of rotating order, median over the "
                                   "rounds. kernel_ms: isolated (a sleeping kernel before each call); "
                                   f"loop_ms: {LOOP_CALLS} back-to-back calls of the recorded launches "
                                   "between two events, one loop per round; sm_clock_mhz, power_w: "
                                   "NVML right after each kernel-time round"),
                           results=[r.as_dict() for r in results]), f, indent=1)
    return 1 if any(not t.ok for r in results for t in r.levels) else 0
