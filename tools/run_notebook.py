"""Execute a notebook's code cells in order, in one namespace, and write it back with outputs.

    python tools/run_notebook.py docs/ladder.ipynb --out executed.ipynb [--timeout 240]

For machines without Jupyter (no kernel, no ZeroMQ): the notebook file is read and written as
plain nbformat-4 JSON with the standard library. Each code cell's source runs with exec in the
notebook's folder; what it prints becomes "stream" outputs, a last bare expression an
"execute_result" (as IPython shows it, unless the cell ends with ';'), display(obj) and open
matplotlib figures "display_data" (PNG where the object has _repr_png_), an exception an "error"
output that stops the run. No IPython magics and no rich reprs beyond text and PNG; the cells
of docs/ladder.ipynb need neither. Exit status 1 if a cell raised or the time ran out.
"""
from __future__ import annotations

import argparse
import ast
import base64
import builtins
import io
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path


class _Stream(io.TextIOBase):
    """sys.stdout / sys.stderr for one cell: text appended to its outputs, one entry per run."""

    def __init__(self, outputs: list, name: str):
        self.outputs, self.name = outputs, name

    def writable(self):
        return True

    def write(self, text):
        if text:
            last = self.outputs[-1] if self.outputs else None
            if last and last["output_type"] == "stream" and last["name"] == self.name:
                last["text"] += text
            else:
                self.outputs.append({"output_type": "stream", "name": self.name, "text": text})
        return len(text)


def _bundle(obj) -> dict:
    data = {"text/plain": repr(obj)}
    png = getattr(obj, "_repr_png_", None)
    if callable(png):
        raw = png()
        if raw:
            data["image/png"] = base64.b64encode(raw).decode("ascii")
    return data


def _figures(outputs: list) -> None:
    """Open matplotlib figures become display_data and are closed (IPython's inline backend)."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        buf = io.BytesIO()
        plt.figure(num).savefig(buf, format="png", bbox_inches="tight")
        outputs.append({"output_type": "display_data", "metadata": {},
                        "data": {"text/plain": f"<Figure {num}>",
                                 "image/png": base64.b64encode(buf.getvalue()).decode("ascii")}})
    plt.close("all")


def run_cell(source: str, ns: dict, outputs: list, count: int) -> bool:
    """Run one cell's source in `ns`, appending its outputs; False if it raised."""
    def display(*objs):
        for obj in objs:
            outputs.append({"output_type": "display_data", "metadata": {}, "data": _bundle(obj)})

    ns["display"] = display
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Stream(outputs, "stdout"), _Stream(outputs, "stderr")
    try:
        tree = ast.parse(source)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not source.rstrip().endswith(";"):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, f"<cell {count}>", "exec"), ns)
        if last is not None:
            value = eval(compile(last, f"<cell {count}>", "eval"), ns)
            if value is not None:
                outputs.append({"output_type": "execute_result", "execution_count": count,
                                "metadata": {}, "data": _bundle(value)})
        _figures(outputs)
        return True
    except BaseException as e:   # a cell's SystemExit or timeout ends the run, as an error output
        tb = traceback.format_exception(type(e), e, e.__traceback__.tb_next)   # from the cell's frame on
        outputs.append({"output_type": "error", "ename": type(e).__name__, "evalue": str(e),
                        "traceback": [line.rstrip("\n") for line in tb]})
        return False
    finally:
        sys.stdout.flush()
        sys.stdout, sys.stderr = old


def execute(nb: dict, cwd: Path) -> bool:
    """Run every code cell of the notebook dict `nb` in place; False if a cell raised."""
    ns = {"__name__": "__main__", "__builtins__": builtins}
    here = os.getcwd()
    os.chdir(cwd)
    sys.path.insert(0, str(cwd))
    count, ok = 0, True
    try:
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            count += 1
            cell["execution_count"] = count
            cell["outputs"] = []
            if not ok:
                cell["execution_count"] = None     # not run: a cell above raised
                continue
            source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            t0 = time.perf_counter()
            ok = run_cell(source, ns, cell["outputs"], count)
            print(f"cell {count}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    finally:
        os.chdir(here)
        sys.path.remove(str(cwd))
    info = nb.setdefault("metadata", {}).setdefault("language_info", {"name": "python"})
    info["version"] = ".".join(map(str, sys.version_info[:3]))
    return ok


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebook")
    ap.add_argument("--out", required=True, help="where to write the executed notebook")
    ap.add_argument("--timeout", type=int, default=0, help="seconds for the whole run (0: none)")
    a = ap.parse_args(argv)
    path = Path(a.notebook).resolve()
    nb = json.loads(path.read_text())
    if nb.get("nbformat") != 4:
        ap.error(f"{path}: nbformat {nb.get('nbformat')}, this runs version 4")

    def out_of_time(signum, frame):
        raise TimeoutError(f"the notebook ran past --timeout {a.timeout} s")

    if a.timeout:
        signal.signal(signal.SIGALRM, out_of_time)
        signal.alarm(a.timeout)
    ok = execute(nb, path.parent)
    signal.alarm(0)
    Path(a.out).write_text(json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n")  # as nbformat
    failed = [c for c in nb["cells"] for o in c.get("outputs", []) if o["output_type"] == "error"]
    for c in failed:
        err = next(o for o in c["outputs"] if o["output_type"] == "error")
        print(f"cell {c['execution_count']}: {err['ename']}: {err['evalue']}", file=sys.stderr)
    print(f"{a.out}: {sum(c['cell_type'] == 'code' for c in nb['cells'])} code cells, "
          + ("all ran" if ok else "stopped at an error"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
