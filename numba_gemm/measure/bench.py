"""Check and time levels against cuBLAS (the logic behind bench.py)."""
from __future__ import annotations

import functools
import os
import sys
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import registry as _levels
from ..api import SIM_WARN_FLOPS, transfer_dtype
from . import check

SIM_SHAPE = (40, 36, 33)   # ragged on purpose: every tile edge is exercised
CHECK_ROWS = 128           # rows of C verified against float64 at large sizes
CHECKED = ((0.5, -1.5), (1.0, 0.0))   # (alpha, beta) checked; the second is the timed one
# One rule with gemm()'s warning: above 2·M·N·K = SIM_WARN_FLOPS (128³) a level takes the
# simulator minutes (k1 at 96³: ~1.5 min for the two checks on one core).
SIM_MAX_FLOPS = SIM_WARN_FLOPS
DEVICE_HEADROOM = 512 << 20   # context, cuBLAS workspace, the L2-flush buffer (256 MiB)


def too_big_for_simulator(M: int, N: int, K: int) -> bool:
    return 2 * M * N * K > SIM_MAX_FLOPS


def memory_needed(M: int, N: int, K: int, in_bytes: int, simulator: bool) -> tuple[int, int]:
    """(host bytes, device bytes) a Runner needs at its peak for one shape.

    Host: A, B, C; the NaN-poisoned C and the result copied back; the float64 check of at most
    CHECK_ROWS rows, whose largest terms are B and |B| in float64 (check.scale). Device: A, B, C.
    The simulator's device arrays live in host memory."""
    rows = min(M, CHECK_ROWS)
    device = in_bytes * (M * K + K * N) + 4 * M * N
    host = device + 2 * 4 * M * N + 8 * (2 * K * N + 2 * rows * K + 4 * rows * N)
    return (host + device, 0) if simulator else (host, device)


def host_memory_available() -> int | None:
    """Bytes the host can give without swapping (MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def device_memory_free() -> int | None:
    try:
        from numba import cuda

        return int(cuda.current_context().get_memory_info()[0])
    except Exception:   # no usable device: the run itself will say so
        return None


def memory_refusal(shapes, levels, simulator: bool, dtype_name: str | None = None) -> str | None:
    """Why a shape cannot be allocated here (one line), before anything is; None when all fit."""
    host_free = host_memory_available()
    dev_free = None if simulator else device_memory_free()
    for M, N, K in shapes:
        for lv in levels:
            if simulator and lv.native:   # skipped there, nothing allocated
                continue
            try:
                in_bytes = _host_dtype(lv, dtype_name).itemsize
            except ValueError:
                continue
            host, dev = memory_needed(M, N, K, in_bytes, simulator)
            shape = f"{M}×{N}×{K}"
            if host_free is not None and host > host_free:
                return (f"{shape} ({lv.name}) needs {_gib(host)} of host memory (A, B, C and the "
                        f"float64 check), {_gib(host_free)} available: give a smaller --size or --shape")
            if dev_free is not None and dev + DEVICE_HEADROOM > dev_free:
                return (f"{shape} ({lv.name}) needs {_gib(dev + DEVICE_HEADROOM)} of GPU memory (A, B, C "
                        f"and {_gib(DEVICE_HEADROOM)} for the context, cuBLAS and the L2 flush), "
                        f"{_gib(dev_free)} free: give a smaller --size or --shape")
    return None


def _gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"


@dataclass
class Result:
    level: str
    M: int
    N: int
    K: int
    dtype: str
    mode: str                       # "gpu" or "simulator"
    ok: bool | None = None          # None: not checked
    rel_err: float | None = None    # max|err| / max|ref| over the checked rows
    ms: float | None = None
    tflops: float | None = None
    cublas_ms: float | None = None
    cublas_tflops: float | None = None
    pct_cublas: float | None = None
    speedup_prev: float | None = None
    prev_level: str | None = None
    twin_ms: float | None = None     # the level's CUDA C twin on the same buffers (SGEMM)
    reps: int | None = None
    l2_flushed: bool = False
    # NVML's readings right after the timed calls (median over rounds); None where unavailable
    sm_clock_mhz: float | None = None
    power_w: float | None = None
    cublas_sm_clock_mhz: float | None = None
    cublas_power_w: float | None = None
    rounds: int | None = None        # interleaved rounds timed over; None: timed alone, in turn
    note: str = ""
    extra: dict = field(default_factory=dict)

    def as_dict(self):
        return asdict(self)


def level_listing() -> str:
    """bench.py's help epilog: every registered level with its parent and title, and the groups."""
    lines = ["levels (PARENT -> level: title):"]
    for lv in _levels.registry().values():
        lines.append(f"  {lv.parent or '-':>5} -> {lv.name:<6} {lv.title}")
    groups = {f: ", ".join(d.name for d in sorted({d for lv in _levels.registry().values()
                                                   if lv.family == f for d in lv.dtypes}, key=str))
              for f in _levels.FAMILIES}
    lines.append("groups: all, " + ", ".join(f"{f} ({groups[f]} in)" for f in _levels.FAMILIES))
    return "\n".join(lines)


def parse_levels(spec: str) -> list:
    """'k4' | 'k1,k2' | 'all' | 'sgemm' | 'hgemm' -> Level records in ladder order. A level
    followed by run() keywords, 'k6gv:splits=16' or 'v11:bm=64:bn=128', is that level run with
    them (integers), under that name: timed beside the level as shipped."""
    reg = _levels.registry()
    picked = []
    for part in (p.strip().lower() for p in spec.split(",") if p.strip()):
        if part == "all":
            picked += list(reg.values())
        elif part in _levels.FAMILIES:
            picked += [lv for lv in reg.values() if lv.family == part]
        else:
            name, *changes = part.split(":")
            lv = _levels.get(name)
            picked.append(lv.variant(run_keywords(lv, changes)) if changes else lv)
    seen = set()
    return [lv for lv in picked if not (lv.name in seen or seen.add(lv.name))]


def run_keywords(lv, changes: list[str]) -> tuple:
    """(("splits", 16),) from ["splits=16"]: keywords that lv's run() takes, integer values."""
    import inspect

    params = inspect.signature(lv.module.run).parameters
    takes = [k for k, p in params.items() if p.kind == p.KEYWORD_ONLY or (
        p.default is not p.empty and k != "stream")]
    out = []
    for change in changes:
        key, _, value = change.partition("=")
        if key not in takes:
            have = f"its run() takes {', '.join(takes)}" if takes else "its run() takes none"
            raise ValueError(f"{lv.name}:{change}: {lv.name} has no run() keyword {key!r} ({have})")
        try:
            out.append((key, int(value)))
        except ValueError:
            raise ValueError(f"{lv.name}:{change}: give an integer, as in {lv.name}:{key}=16") from None
    return tuple(out)


def _host_dtype(level, dtype_name: str | None):
    if level.family == "sgemm":
        return np.dtype(np.float32)
    name = (dtype_name or "float16").lower()
    name = {"fp16": "float16", "half": "float16", "bf16": "bfloat16"}.get(name, name)
    for d in level.dtypes:
        if d.name == name:
            return d
    raise ValueError(f"level {level.name} takes {', '.join(d.name for d in level.dtypes)}, not {name}")


CUBLAS = "cuBLAS"
TWIN = " (CUDA C twin)"   # suffix of a twin's name among the competitors


class Runner:
    """Holds device buffers and the cuBLAS handle so levels of one shape share the same inputs.

    Interleaved (the default), the levels of one shape and input type are all checked first,
    then timed together with their CUDA C twins and cuBLAS in rounds of rotating order
    (timing.interleaved); otherwise each level is checked and timed in turn and cuBLAS once per
    shape after the first."""

    def __init__(self, simulator: bool, flush_l2: bool = False, reps: int | None = None,
                 verify: bool = True, seed: int | None = None, twins: bool = True,
                 interleave: bool = True):
        self.simulator = simulator
        self.twins = twins
        self.flush_l2 = flush_l2
        self.reps = reps
        self.verify = verify
        self.interleave = interleave
        self.rng = np.random.default_rng(seed)
        self._inputs = {}
        self._checked = {}
        self._cublas = None
        self._cublas_times = {}

    def inputs(self, M, N, K, dtype):
        key = (M, N, K, dtype.name)
        if key not in self._inputs:
            from numba import cuda

            self._inputs.clear()   # one shape at a time: 8192² buffers are large
            self._checked.clear()
            A, B, C = check.random_inputs(M, N, K, dtype=dtype, rng=self.rng)
            bits = transfer_dtype(dtype)
            dev = (cuda.to_device(A.view(bits)), cuda.to_device(B.view(bits)),
                   cuda.device_array((M, N), np.float32))
            self._inputs[key] = (A, B, C, dev)
        return self._inputs[key]

    def checked_rows(self, M, N, K, dtype):
        """(rows, check.Products of A[rows] and B): the rows of C every level of this shape is
        checked on (check.rows_to_check), with their float64 products computed once."""
        key = (M, N, K, dtype.name)
        if key not in self._checked:
            A, B, _, _ = self.inputs(M, N, K, dtype)
            rows = check.rows_to_check(M, CHECK_ROWS, self.rng)
            self._checked[key] = rows, check.Products(A[rows], B)
        return self._checked[key]

    def cublas(self):
        if self._cublas is None:
            from .cublas import Cublas

            self._cublas = Cublas()
        return self._cublas

    def cublas_timed(self, M, N, K, dtype, dA, dB, dC):
        """cuBLAS timed alone on these buffers, once per shape and input type (timing.Sampled)."""
        key = (M, N, K, dtype.name)
        if key not in self._cublas_times:
            from .timing import Sampled, bench, gpu_state

            blas = self.cublas()
            t = bench(lambda: blas.gemm(dA, dB, dC, 1.0, 0.0, in_dtype=dtype),
                      reps=self.reps, flush_l2=self.flush_l2)
            self._cublas_times[key] = Sampled(t, *gpu_state())
        return self._cublas_times[key]

    def run(self, level, M, N, K, dtype_name=None) -> Result:
        """Check one level, then time it against cuBLAS."""
        return self.run_shape([level], M, N, K, dtype_name)[0]

    def run_shape(self, levels, M, N, K, dtype_name=None, step=None) -> list[Result]:
        """Check and time `levels` on one shape, a Result each in their order. `step(name)` is
        called before each level's check (progress)."""
        groups = {}   # input type -> its levels: they share A, B, C and one cuBLAS baseline
        for lv in levels:
            groups.setdefault(_host_dtype(lv, dtype_name), []).append(lv)
        results = {}
        for dtype, group in groups.items():
            ready = []
            for lv in group:
                if step:
                    step(lv.name)
                res, checked = self._check(lv, M, N, K, dtype)
                results[lv.name] = res
                if checked and not self.simulator:
                    if self.interleave:
                        ready.append((lv, res))
                    else:
                        self._time_alone(lv, res, dtype)
            if ready:
                self._time_interleaved(ready, dtype)
        return [results[lv.name] for lv in levels]

    def _check(self, level, M, N, K, dtype) -> tuple[Result, bool]:
        """The level's row, and whether it ran here (False: skipped, the reason in its note)."""
        res = Result(level.name, M, N, K, dtype.name, "simulator" if self.simulator else "gpu")
        # the first reason that applies here: without a GPU a native level's shape rules are moot
        if self.simulator and level.native:
            res.note = "skipped: native CUDA levels need a GPU (see --sass for the static census)"
            return res, False
        reason = level.unsupported(M, N, K)
        if reason:
            res.note = f"skipped: {reason}"
            return res, False
        A, B, C, (dA, dB, dC) = self.inputs(M, N, K, dtype)

        # correctness first, in two configurations: alpha/beta != (1, 0) so the epilogue reads
        # C, and the timed one (1, 0) with C poisoned with NaN, which beta == 0 must never read
        if self.verify:
            from numba import cuda

            rows, products = self.checked_rows(M, N, K, dtype)
            errs, bad = [], []
            for alpha, beta in CHECKED:
                C_in = C if beta else np.full_like(C, np.nan)
                cuda.to_device(C_in, to=dC)
                level.run(dA, dB, dC, alpha, beta)
                out = dC.copy_to_host()
                v = check.verify(out[rows], A[rows], B, C[rows] if beta else None, alpha, beta,
                                 family=level.family, products=products)
                errs.append(v.rel_err)
                if not v.ok:
                    bad.append(f"alpha={alpha}, beta={beta}: {v}")
            res.ok, res.rel_err = not bad, max(errs)
            res.note = "; ".join(bad)
        return res, True

    def _time_alone(self, level, res, dtype):
        from .timing import Sampled, bench, gpu_state

        _, _, _, (dA, dB, dC) = self.inputs(res.M, res.N, res.K, dtype)
        t = bench(lambda: level.run(dA, dB, dC, 1.0, 0.0), reps=self.reps, flush_l2=self.flush_l2)
        _record(res, Sampled(t, *gpu_state()))
        try:
            _record_cublas(res, self.cublas_timed(res.M, res.N, res.K, dtype, dA, dB, dC))
        except Exception as exc:  # the level's figures still stand without the baseline
            _add_note(res, f"cuBLAS baseline unavailable: {exc}")
        if self.twins and level.family == "sgemm":
            from . import twins

            try:
                if not level.kwargs and twins.has_twin(level.name):
                    res.twin_ms = twins.time_twin(level.name, res.M, res.N, res.K, buffers=(dA, dB, dC),
                                                  reps=self.reps, flush_l2=self.flush_l2)
            except Exception as exc:
                _add_note(res, f"CUDA C twin unavailable: {exc}")

    def _time_interleaved(self, ready, dtype):
        """The checked levels of one shape and input type, their twins and cuBLAS, in rounds."""
        from .timing import interleaved

        M, N, K = ready[0][1].M, ready[0][1].N, ready[0][1].K
        _, _, _, (dA, dB, dC) = self.inputs(M, N, K, dtype)
        fns = {}
        for lv, res in ready:
            fns[lv.name] = functools.partial(lv.run, dA, dB, dC, 1.0, 0.0)
            if self.twins and lv.family == "sgemm":
                from . import twins

                try:
                    if not lv.kwargs and twins.has_twin(lv.name):
                        fns[lv.name + TWIN] = functools.partial(twins.twin(lv.name).run, dA, dB, dC, 1.0, 0.0)
                except Exception as exc:
                    _add_note(res, f"CUDA C twin unavailable: {exc}")
        no_cublas = None
        try:
            blas = self.cublas()
            fns[CUBLAS] = lambda: blas.gemm(dA, dB, dC, 1.0, 0.0, in_dtype=dtype)
        except Exception as exc:
            no_cublas = exc
        # a level's failure is an error, as when timed alone; a yardstick's is a note
        got = interleaved(fns, reps=self.reps, flush_l2=self.flush_l2,
                          optional=[n for n in fns if n == CUBLAS or n.endswith(TWIN)])
        base = got.get(CUBLAS)
        for lv, res in ready:
            _record(res, got[lv.name])
            res.rounds = got[lv.name].rounds
            if base is not None and base.timing is not None:
                _record_cublas(res, base)
            else:
                _add_note(res, f"cuBLAS baseline unavailable: {base.error if base else no_cublas}")
            twin = got.get(lv.name + TWIN)
            if twin is not None and twin.timing is not None:
                res.twin_ms = twin.timing.median_ms
            elif twin is not None:
                _add_note(res, f"CUDA C twin unavailable: {twin.error}")


def _record(res: Result, s) -> None:
    """A level's timing.Sampled into its row."""
    t = s.timing
    res.ms, res.tflops, res.reps, res.l2_flushed = t.median_ms, t.tflops(_flops(res)), t.reps, t.l2_flushed
    res.sm_clock_mhz, res.power_w = s.sm_clock_mhz, s.power_w


def _record_cublas(res: Result, s) -> None:
    res.cublas_ms = s.timing.median_ms
    res.cublas_tflops = s.timing.tflops(_flops(res))
    res.pct_cublas = 100.0 * res.cublas_ms / res.ms
    res.cublas_sm_clock_mhz, res.cublas_power_w = s.sm_clock_mhz, s.power_w


def _flops(res: Result) -> float:
    return 2.0 * res.M * res.N * res.K


def _add_note(res: Result, text: str) -> None:
    res.note = (res.note + " " + text).strip()


def link_speedups(results: list[Result]) -> None:
    """speedup_prev = time of the level's PARENT (a level run with keywords: the level as
    shipped) on the same shape and dtype / this level's time."""
    from ..registry import registry

    reg = registry()
    timed = {(r.level, r.M, r.N, r.K, r.dtype): r for r in results if r.ms}
    for r in results:
        base, _, changes = r.level.partition(":")       # a level run with keywords: against itself
        lv = reg.get(base)
        parent_name = base if changes else lv.parent if lv else None
        parent = timed.get((parent_name, r.M, r.N, r.K, r.dtype)) if parent_name else None
        if parent is not None and r.ms:
            r.speedup_prev, r.prev_level = parent.ms / r.ms, parent.level


def format_table(results: list[Result]) -> str:
    gpu = any(r.ms for r in results)
    head = ["level", "M×N×K", "dtype", "check", "max rel err"]
    if gpu:
        head += ["ms", "TFLOPS", "SM MHz", "W", "cuBLAS ms", "cuBLAS TFLOPS", "cuBLAS MHz", "cuBLAS W",
                 "% cuBLAS", "× prev"]
    twin = any(r.twin_ms for r in results)
    if twin:
        head += ["CUDA C twin ms", "Numba/C"]
    rows = [head]
    for r in results:
        row = [r.level, f"{r.M}×{r.N}×{r.K}", r.dtype,
               {True: "ok", False: "WRONG", None: "-"}[r.ok],
               f"{r.rel_err:.2e}" if r.rel_err is not None else "-"]
        if gpu:
            row += [_f(r.ms, 3), _f(r.tflops, 2), _f(r.sm_clock_mhz, 0), _f(r.power_w, 0),
                    _f(r.cublas_ms, 3), _f(r.cublas_tflops, 2), _f(r.cublas_sm_clock_mhz, 0),
                    _f(r.cublas_power_w, 0), _f(r.pct_cublas, 1),
                    f"{r.speedup_prev:.2f} ({r.prev_level})" if r.speedup_prev else "-"]
        if twin:
            row += [_f(r.twin_ms, 3), _f(r.ms / r.twin_ms if r.ms and r.twin_ms else None, 3)]
        rows.append(row)
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head))]
    lines = ["  ".join(str(c).rjust(w) for c, w in zip(row, widths)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if gpu:
        rounds = sorted({r.rounds for r in results if r.rounds})
        how = (f"in {'/'.join(map(str, rounds))} rounds of rotating order with cuBLAS"
               + (" and the CUDA C twins" if twin else "") if rounds else "one after another")
        lines.append(f"timed {how}; SM MHz, W: NVML's SM clock and board power right after each "
                     "one's timed calls" + (" (median over the rounds)" if rounds else ""))
    notes = [f"  {r.level} {r.M}×{r.N}×{r.K}: {r.note}" for r in results if r.note]
    return "\n".join(lines + (["notes:"] + notes if notes else []))


def _f(x, nd):
    return "-" if x is None else f"{x:.{nd}f}"


class Progress:
    """Progress of a sweep on stderr: a one-line bar on a terminal, else one line per step (a
    log of a long run on another machine then says how far it got)."""

    def __init__(self, total: int):
        self.total, self.done = total, 0
        self.live = total > 1 and sys.stderr.isatty()

    def step(self, label: str):
        self.done += 1
        if self.live:
            filled = int(30 * self.done / self.total)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {self.done}/{self.total} {label:<28}")
        elif self.total > 1:
            sys.stderr.write(f"[{self.done}/{self.total}] {label}\n")
        sys.stderr.flush()

    def close(self):
        if self.live:
            sys.stderr.write("\n")
