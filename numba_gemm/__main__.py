"""python -m numba_gemm warm [--level k7,v11] [--jobs N] [--census]

warm: compile every level's kernels into the on-disk caches, so that a level's first call in a
new process loads them instead of compiling (Numba levels: numba_gemm.runtime.numba_cache, for the
local GPU, or for sm_90a on a machine without one; native levels: the NVRTC cache, sm_90a).
Kernels compile in parallel worker processes; a line per kernel as it finishes, then the
time per level. --census also takes each level's SASS census into its cache (what bench.py
--sass and the census tests read). NUMBA_GEMM_CACHE_DIR chooses the cache, as for
every other use of it.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context

from .warm import kernels_of, warm_one


def _levels(spec: str | None):
    from .registry import get, registry

    if not spec:
        return list(registry().values())
    return [get(n) for n in filter(None, (s.strip() for s in spec.split(",")))]


def warm(argv) -> int:
    p = argparse.ArgumentParser(prog="python -m numba_gemm warm", formatter_class=argparse.RawDescriptionHelpFormatter,
                                description=__doc__.split("\n\n", 1)[1].strip())   # the docstring's paragraph
    p.add_argument("--level", help="comma-separated levels (default: all)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="worker processes (default: one per CPU)")
    p.add_argument("--census", action="store_true",
                   help="also take every level's SASS census into the census cache")
    args = p.parse_args(argv)

    from .runtime import gpu, nvrtc

    if gpu.simulator_requested():
        sys.exit("warm compiles for the real GPU target: unset NUMBA_ENABLE_CUDASIM")
    from .registry import registry
    from .runtime import numba_cache

    levels = _levels(args.level)
    cc = numba_cache.local_cc()
    where = "this GPU" if gpu.has_gpu() else "no GPU here"
    work = [(lv.name, k) for lv in levels for k in kernels_of(lv)]
    print(f"warm: {len(levels)} levels, {len(work)} kernels; Numba for {numba_cache.cc_label(cc)} ({where}), "
          f"native for {nvrtc.DEFAULT_ARCH}; cache {nvrtc.cache_dir()}; {args.jobs} jobs", flush=True)

    start = time.perf_counter()
    per_level = {lv.name: [0, 0, 0.0] for lv in levels}      # compiled, cached, seconds
    failed = []
    # spawn: a worker must not inherit a CUDA context
    # (each reads the registry first, so that no kernel's time includes importing the levels)
    with ProcessPoolExecutor(max(1, args.jobs), mp_context=get_context("spawn"), initializer=registry) as pool:
        futures = {pool.submit(warm_one, lv, k, cc): (lv, k) for lv, k in work}
        for i, fut in enumerate(as_completed(futures), 1):
            lv, k = futures[fut]
            try:
                compiled, seconds = fut.result()
            except Exception as e:  # noqa: BLE001 - one failing kernel must not hide the others
                failed.append(f"{lv}: {k}: {type(e).__name__}: {e}")
                print(f"[{i:3d}/{len(work)}] {lv:6s} {k:24s} FAILED ({type(e).__name__})", flush=True)
                continue
            row = per_level[lv]
            row[0 if compiled else 1] += 1
            row[2] += seconds
            print(f"[{i:3d}/{len(work)}] {lv:6s} {k:24s} {'compiled' if compiled else 'cached  '} "
                  f"{seconds:7.1f} s", flush=True)

    print(f"\n{'level':8s}{'kernels':>8s}{'compiled':>10s}{'cached':>8s}{'seconds':>10s}")
    for name, (c, h, s) in per_level.items():
        print(f"{name:8s}{c + h:8d}{c:10d}{h:8d}{s:10.1f}")
    total = sum(r[2] for r in per_level.values())
    print(f"{'total':8s}{sum(r[0] + r[1] for r in per_level.values()):8d}"
          f"{sum(r[0] for r in per_level.values()):10d}{sum(r[1] for r in per_level.values()):8d}"
          f"{total:10.1f}   ({time.perf_counter() - start:.1f} s wall)")
    if args.census:
        failed += _census(levels)
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    return 1 if failed else 0


def _census(levels) -> list[str]:
    """Take the levels' SASS censuses into the census cache (Numba levels in child processes,
    one per CPU); the problems, one line per level."""
    from .explain import sass

    start = time.perf_counter()
    got = sass.census_levels(levels)
    bad = [f"{name}: census: {c}" for name, c in got.items() if isinstance(c, Exception)]
    print(f"census: {len(got) - len(bad)} of {len(got)} levels ({time.perf_counter() - start:.1f} s wall)",
          flush=True)
    return bad


COMMANDS = {"warm": warm}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        return 2
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
