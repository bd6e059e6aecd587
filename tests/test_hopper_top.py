"""tools/hopper_top.py without a GPU: what a competitor spec means (a level, or a level run with
keyword arguments, compared with the level as shipped) and the NVML median."""
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


def test_median_skips_missing_readings():
    assert top._median([None, 1500.0, 1400.0, None, 1600.0]) == 1500.0
    assert top._median([None, None]) is None
