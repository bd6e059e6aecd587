"""Adding a level is one file: throwaway copies of an SGEMM level (k2: its SASS census compiles in
seconds, k5's a minute) and of an HGEMM level (v9: NVRTC's disk cache shares its cubin with test_sass),
written outside the package under new names and registered through NUMBA_GEMM_EXTRA_LEVELS,
go through every path a user takes: the registry, bench.py in the simulator (the HGEMM copy
says it needs a GPU), --explain, --sass, the plot, and the registry-parametrised tests.

The level contract is checked by the registry when it discovers a module (registry.contract_problems):
every level meets it, and a copy that breaks it is refused, naming the module and what is wrong.
What needs a compile is tested where the levels are (test_sass, test_nvrtc, test_hopper)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from numba_gemm import registry as reg
from numba_gemm.explain import sass

from conftest import GPU

ROOT = Path(__file__).resolve().parent.parent
COPIES = {"k2": "k2copy", "v9": "v9copy"}   # original level -> the copy's LEVEL
SG, HG = COPIES.values()


def _copy_source(level) -> str:
    """The level's module as a user would copy it out of the package: a new LEVEL (and DELTA
    prefix), absolute imports."""
    new, family = COPIES[level.name], level.family
    text = Path(level.module.__file__).read_text()
    text, n = re.subn(rf'^LEVEL = "{level.name}"$', f'LEVEL = "{new}"', text, flags=re.M)
    assert n == 1
    text = text.replace(f'DELTA = "{level.name} = ', f'DELTA = "{new} = ')
    text = re.sub(r"^from \.\.(\w)", r"from numba_gemm.\1", text, flags=re.M)
    text = re.sub(r"^from \. import", f"from numba_gemm.{family} import", text, flags=re.M)
    return re.sub(r"^from \.(\w)", rf"from numba_gemm.{family}.\1", text, flags=re.M)


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """The copies in a package outside numba_gemm; yields the environment that registers them.
    In this process the registry sees them too, until the module's tests are done."""
    base = tmp_path_factory.mktemp("outside")
    pkg = base / "newlevels"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    spec = []
    for name in COPIES:
        lv = reg.get(name)
        module = f"{COPIES[name]}_{lv.module.__name__.rsplit('.', 1)[1].split('_', 1)[1]}"
        (pkg / f"{module}.py").write_text(_copy_source(lv))
        spec.append(f"{lv.family}:newlevels.{module}")
    env = dict(os.environ, NUMBA_GEMM_EXTRA_LEVELS=",".join(spec),
               PYTHONPATH=os.pathsep.join(filter(None, [str(base), str(ROOT), os.environ.get("PYTHONPATH")])))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(reg.EXTRA_LEVELS_ENV, env[reg.EXTRA_LEVELS_ENV])
        mp.setenv("PYTHONPATH", env["PYTHONPATH"])
        mp.syspath_prepend(str(base))
        reg.refresh()
        yield env
    reg.refresh()


@pytest.mark.parametrize("name", list(reg.registry()))
def test_every_level_meets_the_contract(name):
    lv = reg.get(name)
    assert reg.contract_problems(lv.module, lv.family) == []


# (id, level copied, [(text in the copy, its replacement), ...], what the refusal must say)
BROKEN = [
    ("no-title", "v9", [('TITLE = "super-tile rasterisation for L2"\n', "")], "no TITLE"),
    ("missing-source", "v9", [('SOURCE = "v9_supertile.cu"', 'SOURCE = "v9_nowhere.cu"')],
     "SOURCE = 'v9_nowhere.cu' is not the name of a .cu file in native/"),
    ("bad-raster", "v9", [('RASTER = "super"', 'RASTER = "diagonal"')], "RASTER = 'diagonal' is not one of"),
    ("bad-defines", "v9", [("DEFINES = CONFIG.defines()", 'DEFINES = ("HG_BM=128",)')],
     "DEFINES = ('HG_BM=128',) is not a tuple of -D options"),
    ("no-tile-order", "v9", [("def tile_order(", "def _tile_order(")], "no tile_order"),
    ("bad-delta", "v9", [('DELTA = "v9copy = v8 + ', 'DELTA = "v9copy is v8 + ')], "is not a str starting 'v9copy = v8 '"),
    ("no-float16", "v9", [("DTYPES = cm.DTYPES", 'DTYPES = ("float32",)')], "with float16"),
    ("no-run", "v9", [("def run(", "def _run(")], "no run"),
    ("parent-of-another-family", "v9", [('PARENT = "v8"', 'PARENT = "k2"'), ('DELTA = "v9copy = v8 ', 'DELTA = "v9copy = k2 ')],
     "PARENT 'k2' is not a hgemm level"),
    ("no-warp-step", "k2", [("def warp_step(", "def _warp_step(")], "no warp_step"),
    ("bad-level-name", "k2", [('LEVEL = "k2copy"', 'LEVEL = "K2 copy"')], "LEVEL = 'K2 copy' is not a lower-case name"),
]


@pytest.mark.parametrize("case", range(len(BROKEN)), ids=[b[0] for b in BROKEN])
def test_the_registry_refuses_a_copy_that_breaks_the_contract(case, tmp_path, monkeypatch):
    _, name, edits, said = BROKEN[case]
    text = _copy_source(reg.get(name))
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    module = f"broken{case}_{COPIES[name]}"
    (tmp_path / f"{module}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(reg.EXTRA_LEVELS_ENV, f"{reg.get(name).family}:{module}")
    reg.refresh()
    try:
        with pytest.raises(ValueError) as e:
            reg.registry()
    finally:
        monkeypatch.undo()
        reg.refresh()
    assert module in str(e.value) and said in str(e.value), str(e.value)


def _run(env, *args, timeout=300):
    out = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=timeout)
    return out.returncode, out.stdout + out.stderr


def test_the_registry_takes_the_copies(outside):
    names = list(reg.registry())
    for name, new in COPIES.items():
        orig, copy = reg.get(name), reg.get(new)
        assert (copy.parent, copy.family, copy.native, copy.sass_must_have) == \
               (orig.parent, orig.family, orig.native, orig.sass_must_have)
        assert names.index(new) == names.index(name) + 1       # ladder order: k2 < k2copy < k3
    with pytest.raises(ValueError, match="family:module"):
        os.environ[reg.EXTRA_LEVELS_ENV] = "newlevels.k2copy_coalesced"
        try:
            reg.refresh()
            reg.registry()
        finally:
            os.environ[reg.EXTRA_LEVELS_ENV] = outside[reg.EXTRA_LEVELS_ENV]
            reg.refresh()


def test_bench_checks_and_explains_the_copies(outside):
    rc, text = _run(outside, "bench.py", "--level", ",".join(COPIES.values()), "--shape", "9,7,5", "--explain")
    assert rc == 0, text
    assert re.search(rf"{SG}\s+9×7×5\s+float32\s+ok", text), text
    if GPU:
        assert re.search(rf"{HG}\s+9×7×5\s+float16\s+ok", text), text
    else:
        assert re.search(rf"{HG} 9×7×5: skipped: native CUDA levels need a GPU", text), text
    for name, new in COPIES.items():
        assert f"== {new} on H200" in text and f"moved from {reg.get(name).parent}:" in text, text


def test_bench_help_lists_the_copies(outside):
    rc, text = _run(outside, "bench.py", "--help")
    assert rc == 0, text
    for name, new in COPIES.items():
        assert f" {reg.get(name).parent} -> {new} " in text, text


def test_sass_census_of_the_copies(outside):
    rc, text = _run(outside, "bench.py", "--sass", "--level", ",".join(COPIES.values()), timeout=500)
    if rc != 0 and "nvdisasm not found" in text:
        pytest.skip("no nvdisasm here")
    assert rc == 0, text
    lines = [line.split() for line in text.strip().splitlines()]
    head = lines[0]
    for name, new in COPIES.items():
        rows = [r for r in lines[1:] if r[0] == new or r[0].startswith((new + ":", new + "_"))]
        assert rows, (new, text)
        for prefix in reg.get(name).sass_must_have:        # the copy compiles to what the original does
            assert any(r[head.index(sass.normalise(prefix))] != "-" for r in rows), (new, prefix, text)


def test_plot_with_the_copies(outside, tmp_path):
    pytest.importorskip("matplotlib")
    from numba_gemm.explain.figures import ladder_chart
    from numba_gemm.measure.bench import Result

    rs = [Result(SG, 4096, 4096, 4096, "float32", "gpu", ms=23.6, tflops=5.8, cublas_tflops=50.4),
          Result(HG, 4096, 4096, 4096, "float16", "gpu", ms=0.3, tflops=460.0, cublas_tflops=700.0)]
    ladder_chart(str(tmp_path / "p.png"), [r.as_dict() for r in rs], {})
    assert (tmp_path / "p.png").stat().st_size > 1000


def test_the_parametrised_tests_take_the_copies(outside):
    rc, text = _run(outside, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--collect-only",
                    "tests/test_ledgers.py", "tests/test_sass.py", "tests/test_sgemm.py", "tests/test_bench.py")
    assert rc == 0, text
    for test in (f"test_ledgers.py::test_sgemm_hooks[{SG}]", f"test_ledgers.py::test_hgemm_hooks[{HG}]",
                 f"test_sass.py::test_level_has_its_instructions[{HG}]", f"test_sgemm.py::test_device_path[{SG}]"):
        assert test in text, test
    rc, text = _run(outside, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_ledgers.py",
                    "tests/test_sgemm.py", "-k", f"({SG} or {HG}) and not numpy_path and not device_path")
    assert rc == 0 and re.search(r"\b([5-9]|\d\d) passed", text), text
