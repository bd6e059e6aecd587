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
    print(f"notebook executed in {elapsed:.1f} s")
