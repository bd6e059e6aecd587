"""tools/hopper_top.py without a GPU: what a competitor spec means (a level, or a level run with
keyword arguments, compared with the level as shipped)."""
import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "hopper_top", Path(__file__).resolve().parent.parent / "tools" / "hopper_top.py")
top = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(top)


def test_a_level_is_compared_with_its_parent():
    c = top.Competitor("v12")
    assert (c.label, c.parent, c.kwargs, c.family) == ("v12", "v11", {}, "hgemm")


def test_a_variant_is_compared_with_its_level_and_passes_its_arguments(monkeypatch):
    c = top.Competitor("v13:cluster=1:tma_store=0")
    assert (c.label, c.parent, c.kwargs) == ("v13:cluster=1:tma_store=0", "v13", {"cluster": 1, "tma_store": 0})
    seen = []
    monkeypatch.setattr(c.level.module, "run", lambda *a, **k: seen.append((a, k)))
    c.run("A", "B", "C", 1.0, 0.0)
    assert seen == [(("A", "B", "C", 1.0, 0.0), {"cluster": 1, "tma_store": 0})]


def test_bad_specs_are_refused():
    with pytest.raises(ValueError, match="unknown level"):
        top.Competitor("v99")
    with pytest.raises(ValueError):
        top.Competitor("v13:cluster=two")


class _Fake:
    """A level stand-in computing on the host what a kernel would; `leak` reads C even when beta == 0."""
    label, family = "fake", "sgemm"

    def __init__(self, leak=False):
        self.leak = leak

    def run(self, dA, dB, dC, alpha, beta):
        import numpy as np

        A, B, C = dA.copy_to_host(), dB.copy_to_host(), dC.copy_to_host()
        out = alpha * (A.astype(np.float64) @ B)
        if beta or self.leak:
            out = out + beta * C
        dC.copy_to_device(out.astype(np.float32))


def test_verdicts_catch_a_result_that_reads_c_when_beta_is_zero():
    import numpy as np
    from numba import cuda

    from numba_gemm.measure import check

    A, B, C = check.random_inputs(24, 20, 16, dtype=np.float32)
    dA, dB, dC = cuda.to_device(A), cuda.to_device(B), cuda.device_array((24, 20), np.float32)
    rows = np.arange(24)
    products = check.Products(A, B)
    assert all(v.ok for v in top.verdicts(_Fake(), A, B, C, dA, dB, dC, rows, products))
    vs = top.verdicts(_Fake(leak=True), A, B, C, dA, dB, dC, rows, products)
    assert vs[0].ok and not vs[1].ok          # 0 * NaN is NaN: the poisoned C shows


def test_a_16bit_c_row_is_compared_with_the_same_level_writing_float32():
    """--out both: v13 twice, the 16-bit C one labelled /c16 with the float32 one as its parent;
    a level that writes only float32 C is refused for a 16-bit C before anything runs."""
    c32, c16 = top.Competitor("v13", False, True), top.Competitor("v13", True, True)
    assert (c32.label, c32.parent, c32.c16) == ("v13", "v12", False)
    assert (c16.label, c16.parent, c16.c16) == ("v13/c16", "v13", True)
    assert top.Competitor("v13", True, False).label == "v13"          # --out same: no suffix
    with pytest.raises(SystemExit, match="v12 writes C as float32 only"):
        top.Competitor("v12", True, True)


def test_an_sgemm_variant_reaches_k8sks_run():
    """k8sk with a forced split count (tools/hopper_top.py --dtypes float32 --levels
    k7,k8,k8sk:splits=4): compared with k8sk, its argument taken by k8sk's run()."""
    import inspect

    c = top.Competitor("k8sk:splits=4")
    assert (c.parent, c.kwargs, c.family) == ("k8sk", {"splits": 4}, "sgemm")
    assert "splits" in set(inspect.signature(c.level.module.run).parameters)
