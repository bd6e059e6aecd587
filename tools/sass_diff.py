"""Compare the SASS of the Numba levels' kernels between a git revision and the working tree.

    python tools/sass_diff.py 0cedcb7                       # every Numba level
    python tools/sass_diff.py 0cedcb7 k1 k6 --same k1_tuned=k1
    python tools/sass_diff.py --dump OUT_DIR k5             # only write this tree's SASS
    python tools/sass_diff.py OUT_DIR k5                    # compare with a dump instead of a revision

Each kernel (a level's `kernel`, or every entry of its `KERNELS`) is compiled to sm_90 SASS
(sm_90a for a level whose ARCH says so) as the census does (no GPU needed), normalised --
addresses, encodings and the function's symbol dropped, one instruction or label per line --
and compared kernel by kernel with the same-named kernel of the revision. `--same NEW=OLD`
compares a kernel with a differently named one of the revision (a kernel that was renamed or
moved). Exit status 1 if any pair differs.
"""
from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Run inside the tree being measured: {kernel name: normalised SASS}.
_DUMP = r'''
import json, os, re, sys
from numba import cuda
if os.path.isdir("numba_gemm/explain"):   # the tree measured is the working directory
    from numba_gemm.explain import sass
else:                                      # a revision from before the package had sub-packages
    from numba_gemm import sass
from numba_gemm.registry import registry

INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
LABEL = re.compile(r"^\s*(\.L_[A-Za-z0-9_]+:)")
wanted = set(sys.argv[1:])
out = {}
for lv in registry().values():
    if lv.native or (wanted and lv.name not in wanted):
        continue
    arch = getattr(lv.module, "ARCH", "sm_90")     # v11py: sm_90a, which wgmma needs
    for name, (fn, sig, bounds) in sass.numba_kernels(lv.module).items():
        ptx, _ = cuda.compile_ptx(fn, sig, cc=(9, 0, "a") if arch.endswith("a") else (9, 0),
                                  launch_bounds=bounds)
        cubin, _log = sass.link_ptx(ptx, arch)
        (code,) = sass.split_functions(sass.disassemble(cubin)).values()
        lines = []
        for line in code.splitlines():
            m = INSTR.match(line) or LABEL.match(line)
            if m:
                lines.append(m.group(1))
        out[name] = "\n".join(lines)
print(json.dumps(out))
'''


def dump(root: str, levels) -> dict[str, str]:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", PYTHONPATH=root)
    out = subprocess.run([sys.executable, "-c", _DUMP, *levels], cwd=root, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"SASS dump in {root} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def checkout(rev: str, into: str) -> str:
    """The tree of `rev` (files only, no git state) extracted under `into`."""
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", into], input=archive.stdout, check=True)
    return into


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rev", nargs="?", help="git revision (or a --dump directory) to compare with")
    p.add_argument("levels", nargs="*", help="level names (default: every Numba level)")
    p.add_argument("--same", action="append", default=[], metavar="NEW=OLD",
                   help="compare kernel NEW of the tree with kernel OLD of the revision")
    p.add_argument("--dump", metavar="DIR", help="write this tree's SASS, one file per kernel")
    args = p.parse_args(argv)

    if args.dump:
        levels = ([args.rev] if args.rev else []) + args.levels
        os.makedirs(args.dump, exist_ok=True)
        for name, text in dump(ROOT, levels).items():
            with open(os.path.join(args.dump, name + ".sass"), "w") as f:
                f.write(text + "\n")
        return 0
    if not args.rev:
        p.error("give a revision (or --dump DIR)")

    if os.path.isdir(args.rev):
        old = {f[:-5]: open(os.path.join(args.rev, f)).read().rstrip("\n")
               for f in os.listdir(args.rev) if f.endswith(".sass")}
    else:
        with tempfile.TemporaryDirectory() as tmp:
            old = dump(checkout(args.rev, tmp), args.levels)
    new = dump(ROOT, args.levels)
    pairs = dict(s.split("=", 1) for s in args.same)
    differ = False
    for name in sorted(new):
        ref = pairs.get(name, name)
        if ref not in old:
            print(f"{name:10s} new (no kernel {ref!r} at {args.rev}), {len(new[name].splitlines())} lines")
            continue
        a, b = old[ref].splitlines(), new[name].splitlines()
        label = name if ref == name else f"{name} vs {args.rev}:{ref}"
        if a == b:
            n = sum(1 for x in a if not x.endswith(":"))
            print(f"{label:10s} identical ({n} instructions)")
        else:
            differ = True
            d = list(difflib.unified_diff(a, b, f"{args.rev}:{ref}", name, lineterm="", n=1))
            changed = sum(1 for x in d if x[:1] in "+-" and x[:3] not in ("+++", "---"))
            print(f"{label:10s} DIFFERS ({len(a)} -> {len(b)} lines, {changed} changed)")
            print("\n".join(d[:60]))
    for ref in sorted(set(old) - {pairs.get(n, n) for n in new}):
        print(f"{ref:10s} only at {args.rev}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
