#!/usr/bin/env python3
"""Check and time numba_gemm levels against cuBLAS.

    python bench.py --level k4                     # one level at 4096³ (the seed's size)
    python bench.py --level all --size 4096,4097   # the whole ladder at two sizes
    python bench.py --level k1,k2 --size 4096,4097 # the power-of-two stride experiment
    python bench.py --level hgemm --size 4096,8192 # the HGEMM levels, fp16 in, fp32 out
    python bench.py --level k6 --sass              # static SASS census (no GPU needed)
    python bench.py --suite shapes --dtype bf16    # ~20 user shapes vs roofline and cuBLAS (GPU)
    python bench.py --suite shapes --explain       # their rooflines and auto's choice, nothing run
    python bench.py --help                         # every level (the registry's list) and its parent

Each level is first checked against a float64 reference twice (alpha=0.5, beta=-1.5 on a
random C, and the timed alpha=1, beta=0 with C poisoned with NaN; past 128 rows, on 128 rows of
C drawn once per shape for every level, the last among them), then timed with CUDA events
(warm-up, median of repeats), and cuBLAS runs on the same buffers in the same process. The
levels of a shape (of one input type), their CUDA C twins and cuBLAS are timed interleaved, after
all of them are checked: in rounds of rotating order (A B C, B C A, C A B, ...), a few calls each
per round, the median over the rounds per competitor. A power-bound GPU runs warmer and slower
the longer it works, so timed one after another the later ones would lose; --no-interleave
times each level in turn (cuBLAS once per shape). Each row records the SM clock and board power
NVML reads right after its timed calls (median over the rounds; "-" without NVML). With no
GPU, the Numba levels run in the Numba CUDA simulator at a small ragged shape and are checked
only: timings need a GPU. What cannot be delivered here is refused before anything runs, in one
line (a shape the simulator would take minutes over, one that does not fit in memory, --plot or
--no-check without a GPU); --explain without a GPU explains such a shape from the ledgers alone.
The exit status is 1 if any checked level gives a wrong result, or if the run is refused.
"""
import argparse
import importlib.util
import json
import os
import sys

from numba_gemm.runtime.gpu import use_simulator_if_no_gpu

def epilog():
    """The level listing, from the registry (importing the levels imports Numba: the simulator
    choice comes first)."""
    use_simulator_if_no_gpu()
    from numba_gemm.measure.bench import level_listing

    return level_listing() + "\nFigures and how they were measured: docs/RESULTS.md."


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n} must be >= 1")
    return n


def _non_negative(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"{n} must be >= 0")
    return n


def _sizes(text: str) -> list[int]:
    parts = [p.strip() for p in text.split(",")]
    if not all(parts):
        raise argparse.ArgumentTypeError(f"{text!r}: sizes are comma-separated positive integers")
    return [_positive(p) for p in parts]


def _shape(text: str) -> tuple[int, int, int]:
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 3:
        raise argparse.ArgumentTypeError(f"{text!r}: a shape is three positive integers M,N,K")
    return tuple(_positive(p) for p in parts)


def _level_spec(text: str) -> str:
    if not any(p.strip() for p in text.split(",")):
        raise argparse.ArgumentTypeError("no level named: give a level (k4), a list (k1,k2) or all/sgemm/hgemm")
    return text


def _writable(path: str) -> str | None:
    """Why `path` cannot be written, or None."""
    d = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        return "is a directory"
    if not os.path.isdir(d):
        return f"directory {d} does not exist"
    if os.path.exists(path) and not os.access(path, os.W_OK):
        return "is not writable"
    if not os.path.exists(path) and not os.access(d, os.W_OK):
        return f"directory {d} is not writable"
    return None


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="Check and time GEMM levels against cuBLAS (and explain them).",
        epilog=epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--level", default=None, type=_level_spec,
                   help="level(s): a name (k4), a comma list (k1,k2), or all / sgemm / hgemm "
                        "(default: k4; all with --overhead); LEVEL:name=value runs a level with a "
                        "run() keyword, timed beside it (k6gv:splits=16, v11:bm=64:bn=128)")
    p.add_argument("--size", default=None, type=_sizes,
                   help="square sizes n (M=N=K=n), comma separated (default: 4096 on a GPU, "
                        "a small ragged shape in the simulator)")
    p.add_argument("--shape", action="append", default=[], metavar="M,N,K", type=_shape,
                   help="a rectangular shape; repeat for several")
    p.add_argument("--dtype", default=None, choices=["fp16", "bf16", "fp32"],
                   help="input type of the HGEMM levels (SGEMM levels are float32; default: fp16); "
                        "with --suite, the suite's input type (fp32, fp16 or bf16; default: bf16)")
    p.add_argument("--suite", choices=["shapes"], default=None,
                   help="shapes: the shape suite (~20 shapes users call: squares, decode and prefill "
                        "projections, short K, narrow N, ragged rows), each with its roofline, auto's "
                        "level, the best level timed and cuBLAS, in kernel time and back-to-back loops "
                        "(GPU); with --explain, each shape's roofline and auto's choice with nothing run")
    p.add_argument("--only", metavar="NAME[,NAME]", default=None,
                   help="with --suite shapes: only the suite shapes with these names, comma separated, "
                        "as --suite shapes --explain prints them (e.g. 'square 512,M=128, wide')")
    p.add_argument("--reps", type=_positive, default=None,
                   help="timed repeats per level (default: as many as fit ~0.4 s, 3..50); "
                        "interleaved, spread over the rounds, at least one per round")
    p.add_argument("--no-interleave", action="store_true",
                   help="time each level in turn, then cuBLAS once per shape (default: the levels "
                        "of a shape, their CUDA C twins and cuBLAS in rounds of rotating order, "
                        "A B C, B C A, C A B, ..., the median over the rounds each, so that none is "
                        "timed only on a GPU warmed and slowed by the others). Either way the table's "
                        "SM MHz and W columns (JSON: sm_clock_mhz, power_w, cublas_sm_clock_mhz, "
                        "cublas_power_w) are NVML's SM clock and board power read right after each "
                        "one's timed calls, median over the rounds; '-' (null) where NVML cannot "
                        "read them; JSON rounds is the number of rounds (null: timed in turn)")
    p.add_argument("--flush-l2", action="store_true",
                   help="clear the L2 cache before every timed call (default: warm L2, as cuBLAS "
                        "sees it in a loop)")
    p.add_argument("--no-check", action="store_true",
                   help="skip the float64 correctness check (needs a GPU: without one the check is "
                        "all a run does)")
    p.add_argument("--no-twins", action="store_true",
                   help="do not time the SGEMM levels' CUDA C twins (default: each SGEMM level's "
                        "twin is timed beside it, the 'Numba / C' column)")
    p.add_argument("--seed", type=_non_negative, default=None, help="random seed for the inputs")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON")
    p.add_argument("--csv", metavar="FILE", help="write the results as CSV")
    p.add_argument("--explain", action="store_true",
                   help="print each level's three ledgers (bytes, requests, cycles) and what moved "
                        "from its PARENT; without a GPU, from the ledgers alone with nothing run "
                        "(at 4096³ unless --size/--shape) where a size is beyond the simulator, "
                        "else checked in the simulator and explained")
    p.add_argument("--sass", action="store_true",
                   help="print the static SASS census of the levels (no GPU needed), then exit")
    p.add_argument("--plot", metavar="FILE.png",
                   help="draw the ladder: TFLOPS per level beside cuBLAS, a panel per input type (the "
                        "chart of docs/figures/ladder.png; needs matplotlib and a GPU)")
    p.add_argument("--overhead", action="store_true",
                   help="host cost per call at 64³ by stage (operand read, validate, launch) for "
                        "gemm() and plan() next to torch.mm (needs a GPU), then exit")
    args = p.parse_args(argv)
    for flag in ("json", "csv", "plot"):
        path = getattr(args, flag)
        if path and _writable(path):
            p.error(f"--{flag} {path}: {_writable(path)}")
    if args.only is not None:
        from numba_gemm.measure.shapes import SUITE, names_in

        names, unknown = names_in(args.only)
        if not args.suite:
            p.error("--only picks shapes of --suite shapes")
        if unknown or not names:
            p.error(f"--only: no suite shape named {', '.join(map(repr, unknown)) or 'at all'}; the shapes: "
                    + ", ".join(s[0] for s in SUITE))
        args.only = names
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        p.error("--plot needs matplotlib: pip install matplotlib (or the plot extra: pip install 'numba_gemm[plot]')")
    return args


def shapes_from(args, simulator):
    shapes = list(args.shape)
    if args.size:
        shapes += [(n, n, n) for n in args.size]
    if not shapes:
        from numba_gemm.measure.bench import SIM_SHAPE
        shapes = [SIM_SHAPE] if simulator else [(4096, 4096, 4096)]
    return shapes


def _fmt(shape):
    return "×".join(map(str, shape))


def ledgers_only(args, simulator, shapes) -> bool:
    """--explain without a GPU where running is not worth it: no size given (explain the real
    one, 4096³; the simulator's times mean nothing), or a size beyond the simulator."""
    from numba_gemm.measure.bench import too_big_for_simulator

    return (args.explain and simulator
            and (not (args.size or args.shape) or any(too_big_for_simulator(*s) for s in shapes)))


def refusal(args, levels, shapes, simulator) -> str | None:
    """Why this command cannot deliver what it asks, in one line, before anything runs."""
    from numba_gemm.measure import bench

    if simulator and args.plot:
        return ("--plot draws measured TFLOPS and timings need a GPU (none here); without --plot "
                "the levels are checked in the CUDA simulator")
    if args.overhead:
        return "--overhead measures host time per launch: it needs a GPU" if simulator else None
    if ledgers_only(args, simulator, shapes):
        return None
    if simulator and args.no_check:
        return ("--no-check leaves nothing to do without a GPU: the simulator only checks (timings "
                "need a GPU); drop --no-check")
    why = bench.memory_refusal(shapes, levels, simulator, args.dtype)
    if why:
        return why
    big = [s for s in shapes if bench.too_big_for_simulator(*s)] if simulator else []
    if big:
        return (f"{', '.join(map(_fmt, big))} {'is' if len(big) == 1 else 'are'} too large for the "
                f"CUDA simulator (no GPU here; it runs one Python thread per GPU thread, and above "
                f"2·M·N·K = {bench.SIM_MAX_FLOPS / 1e6:.1f} MFLOP, 128³, a level takes minutes): "
                f"check a smaller size (--size 64), add --explain for the ledgers at {_fmt(big[0])} "
                "with nothing run, or time it on a GPU")
    return None


def notes(args, levels) -> list[str]:
    """Flags that do not apply to these levels: said, not an error."""
    out = []
    if args.dtype and not any(lv.family == "hgemm" for lv in levels):
        out.append(f"note: --dtype {args.dtype} is the HGEMM levels' input type; "
                   f"{', '.join(lv.name for lv in levels)} {'takes' if len(levels) == 1 else 'take'} "
                   "float32 only, so it is ignored")
    return out


def explain_from_ledgers(levels, shapes, given: bool) -> None:
    from numba_gemm.explain import ledgers
    from numba_gemm.measure.bench import too_big_for_simulator

    if given:
        big = [s for s in shapes if too_big_for_simulator(*s)]
        print(f"No CUDA GPU found, and {', '.join(map(_fmt, big))} {'is' if len(big) == 1 else 'are'} "
              f"beyond what the CUDA simulator runs in reasonable time: the ledgers of each level at "
              f"{', '.join(map(_fmt, shapes))}, computed from the level's code, nothing run.\n")
    else:
        shapes = [(4096, 4096, 4096)]
        print("No CUDA GPU found: the ledgers of each level at 4096×4096×4096, computed from the "
              "level's code, nothing run (give --size or --shape to check the levels in the "
              "simulator and explain that size).\n")
    for shape in shapes:
        for lv in levels:
            print(ledgers.explain(lv.name, "h200", n=shape))
            print()


def command_line(argv) -> str:
    """The command as a record states it: output files by their names, not the machine's paths."""
    args = list(argv if argv is not None else sys.argv[1:])
    for i, a in enumerate(args[1:], 1):
        if args[i - 1] in ("--json", "--csv", "--plot"):
            args[i] = os.path.basename(a)
    return " ".join(["python", os.path.basename(sys.argv[0]), *args])


def explain_auto(levels, shapes, dtype_name, simulator) -> None:
    """What auto would run at each shape, for the input types these levels take, and why."""
    from numba_gemm import choose

    dtypes = (["float32"] if any(lv.family == "sgemm" for lv in levels) else []) + \
        ([{"bf16": "bfloat16"}.get(dtype_name, "float16")] if any(lv.family == "hgemm" for lv in levels) else [])
    for shape in shapes:
        for dt in dtypes:
            if simulator:      # what auto would do where it matters: on the GPU the levels are for
                print("on an sm_90a GPU (none here), ", end="")
            print(choose.explain(dt, *shape, native=True))
            print()


def main(argv=None):
    args = parse_args(argv)
    simulator = use_simulator_if_no_gpu()    # before numba is imported

    if args.suite:
        from numba_gemm.measure import shapes as suite

        return suite.cli(args.dtype or "bf16", explain_only=args.explain, simulator=simulator,
                         json_path=args.json, reps=args.reps, seed=args.seed,
                         command=command_line(argv), only=args.only)
    if args.dtype == "fp32":
        sys.exit("bench.py: --dtype fp32 is for --suite (the SGEMM levels are float32 already; "
                 "--dtype picks the HGEMM levels' input type: fp16 or bf16)")

    from numba_gemm.measure import bench

    try:
        levels = bench.parse_levels(args.level or ("all" if args.overhead else "k4"))
    except ValueError as e:
        sys.exit(f"bench.py: {e}")
    variants = [lv.name for lv in levels if lv.kwargs]
    modes = [flag for flag, on in (("--sass", args.sass), ("--overhead", args.overhead),
                                   ("--explain", args.explain), ("--plot", args.plot)) if on]
    if variants and modes:
        sys.exit(f"bench.py: {', '.join(variants)}: a level run with keywords is checked and timed "
                 f"only; {', '.join(modes)} takes levels as shipped")
    for line in notes(args, levels):
        print(line, file=sys.stderr)

    if args.sass:
        from numba_gemm.explain import sass
        try:
            sass.find_nvdisasm()
        except sass.CensusUnavailable as e:
            sys.exit(f"bench.py --sass: {e} (or: pip install 'numba_gemm[test]')")
        print(sass.census_table(levels))
        return 0

    shapes = shapes_from(args, simulator)
    why = refusal(args, levels, shapes, simulator)
    if why:
        sys.exit(f"bench.py: {why}")

    if args.overhead:
        from numba_gemm.measure import overhead
        print(overhead.report(levels, command=command_line(argv)))
        return 0

    if ledgers_only(args, simulator, shapes):
        explain_from_ledgers(levels, shapes, given=bool(args.size or args.shape))
        explain_auto(levels, shapes if (args.size or args.shape) else [(4096, 4096, 4096)],
                     args.dtype, simulator)
        return 0

    if simulator:
        print("No CUDA GPU found: running the Numba levels in the Numba CUDA simulator at "
              f"{' '.join(map(_fmt, shapes))} to check them. Timings need a GPU.\n")

    runner = bench.Runner(simulator, flush_l2=args.flush_l2, reps=args.reps, verify=not args.no_check,
                          seed=args.seed, twins=not args.no_twins, interleave=not args.no_interleave)
    results = []
    progress = bench.Progress(len(levels) * len(shapes))
    for shape in shapes:
        results += runner.run_shape(levels, *shape, dtype_name=args.dtype,
                                    step=lambda name: progress.step(f"{name} {_fmt(shape)}"))
    progress.close()
    bench.link_speedups(results)

    if args.explain:
        from numba_gemm.explain import ledgers
        for r in results:
            timed = {q.level: q.ms for q in results if (q.M, q.N, q.K) == (r.M, r.N, r.K) and q.ms}
            print(ledgers.explain(r.level, "h200", measured_ms=timed or None, n=(r.M, r.N, r.K)))
            print()
        explain_auto(levels, shapes, args.dtype, simulator)

    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.as_dict() for r in results], f, indent=2)
    if args.csv:
        import csv
        with open(args.csv, "w", newline="") as f:
            rows = [r.as_dict() for r in results]
            w = csv.DictWriter(f, fieldnames=[k for k in rows[0] if k != "extra"], extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)
    if args.plot:   # the docs' ladder chart, of this run
        from datetime import date

        from numba_gemm.explain.figures import ladder_chart
        from numba_gemm.util import commit
        timed = [r.as_dict() for r in results if r.tflops]
        if not timed:
            sys.exit("bench.py --plot: nothing was timed (see the notes)")
        ladder_chart(args.plot, timed, {"date": date.today().isoformat(), "commit": commit()})

    print(bench.format_table(results))
    times = {(r.level, r.M): r.ms for r in results if r.ms and r.M == r.N == r.K}
    pair = [times.get(key) for key in (("k1", 4096), ("k2", 4096), ("k1", 4097), ("k2", 4097))]
    if all(pair):   # the seed's power-of-two experiment: split k1/k2 into its two causes
        from numba_gemm.explain import ledgers
        print()
        print(ledgers.stride_experiment(*pair, "this GPU"))
    if all(r.ok is None and r.ms is None for r in results):
        print("\nNOTHING RAN: every level was skipped (see the notes)", file=sys.stderr)
        return 1
    wrong = [r for r in results if r.ok is False]
    if wrong:
        print(f"\nWRONG RESULTS: {', '.join(r.level for r in wrong)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
