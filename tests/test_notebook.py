"""docs/ladder.ipynb runs top to bottom on this machine (simulator without a GPU) and checks every level."""
import os
import time
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parent.parent / "docs" / "ladder.ipynb"


def test_ladder_notebook_runs_and_every_level_checks():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    t0 = time.perf_counter()
    # the kernel inherits this process's environment: NUMBA_ENABLE_CUDASIM=1 when there is no GPU
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute(env=dict(os.environ))
    elapsed = time.perf_counter() - t0
    text = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    from numba_gemm import registry

    for name, lv in registry.registry().items():
        if lv.family == "sgemm":
            assert f"{name:5s} " in text and "WRONG" not in text, name
    assert text.count(": ok, max |err|") == sum(lv.family == "sgemm" for lv in registry.registry().values())
    # the NumPy model, k8's double buffer and v11's descriptor exercise, all on a CPU
    for line in ("model k8: exact", "model v11: exact", "model k8 with 1 stage and with 2: same",
                 "slices 8 deep: 8 floats per thread in flight per phase", "k8 at 37×29×27 (4 K slices): checks",
                 "A: start 107616, descriptor 0x4000004000011a46", "B: start 121856, descriptor 0x4000004002001dc0",
                 "'lbo': 8192, 'sbo': 1024"):
        assert line in text, line
    assert elapsed < 120, f"the notebook took {elapsed:.0f} s: keep its cells small"
    print(f"notebook executed in {elapsed:.1f} s")


def _runner():
    import importlib.util

    path = NOTEBOOK.parent.parent / "tools" / "run_notebook.py"
    spec = importlib.util.spec_from_file_location("run_notebook", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_run_notebook_writes_what_jupyter_would(tmp_path):
    """tools/run_notebook.py (the GPU machine's executor, no Jupyter there): streams, the last
    expression, display() of a PNG, an error that stops the run, a valid nbformat-4 file."""
    import base64

    png = b"\x89PNG\r\n\x1a\nnot really"

    class Pic:
        def _repr_png_(self):
            return png

    cells = ["import sys\nx = 6 * 7\nprint('x is', x)\nprint('warn', file=sys.stderr)\nx + 1",
             "x;", "display(PIC)", "1 / 0", "print('never')"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t")]
                                  + [nbformat.v4.new_code_cell(c) for c in cells])
    src = tmp_path / "t.ipynb"
    nbformat.write(nb, src)
    mod = _runner()
    import builtins

    builtins.PIC = Pic()          # the cells' namespace starts from the builtins: pass it in there
    try:
        rc = mod.main([str(src), "--out", str(tmp_path / "out.ipynb")])
    finally:
        del builtins.PIC
    assert rc == 1                                          # the 1 / 0 cell
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    nbformat.validate(out)
    c = [cell for cell in out.cells if cell.cell_type == "code"]
    assert [o.output_type for o in c[0].outputs] == ["stream", "stream", "execute_result"]
    assert c[0].outputs[0].text == "x is 42\n" and c[0].outputs[1].name == "stderr"
    assert c[0].outputs[2].data["text/plain"] == "43" and c[0].outputs[2].execution_count == 1
    assert c[1].outputs == []                               # ';' hides the value, as IPython
    assert base64.b64decode(c[2].outputs[0].data["image/png"]) == png
    assert c[3].outputs[0].output_type == "error" and c[3].outputs[0].ename == "ZeroDivisionError"
    assert c[4].outputs == [] and c[4].execution_count is None


def section_numbers(nb) -> list[str]:
    """The numbers of the notebook's '## N. title' headings, in cell order."""
    import re

    return [m.group(1) for c in nb.cells if c.cell_type == "markdown"
            for m in re.finditer(r"(?m)^## (\S+?)\. ", c.source)]


def test_notebook_sections_are_numbered_in_run_order():
    """1, 2, 3, … in the order the cells run, and every 'ladder.ipynb) section N' of LADDER names one
    with the topic its sentence is about."""
    import re

    nb = nbformat.read(NOTEBOOK, as_version=4)
    numbers = section_numbers(nb)
    assert numbers == [str(i) for i in range(1, len(numbers) + 1)]
    titles = {m.group(1): m.group(2) for c in nb.cells if c.cell_type == "markdown"
              for m in re.finditer(r"(?m)^## (\d+)\. (.+)$", c.source)}
    ladder = " ".join((NOTEBOOK.parent / "LADDER.md").read_text().split())
    refs = re.findall(r"\(ladder\.ipynb\) section (\d+)", ladder)
    assert refs and all(n in titles for n in refs)
    assert titles[re.search(r"32×32 tile; \[ladder\.ipynb\]\(ladder\.ipynb\) section (\d+)", ladder).group(1)] \
        == "Tile constants drive the ledgers"
    assert titles[re.search(r"\[ladder\.ipynb\]\(ladder\.ipynb\) section (\d+) computes it", ladder).group(1)] \
        == "Lanes and banks"


def test_section_numbering_check_can_fail():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(s) for s in
                                         ("## 1. a", "## 1b. b", "## 2. c", "## 8. d", "## 7. e")])
    numbers = section_numbers(nb)
    assert numbers == ["1", "1b", "2", "8", "7"] and numbers != [str(i) for i in range(1, 6)]
