"""The package's layout holds: which part of numba_gemm may import which, read from every import
statement of every module with ast (those inside functions too), no import circle, at most 8
modules at the root, none over 600 lines, and pyproject.toml ships every package.

The parts (each sub-package's __init__ docstring says what lives there and what may import it):

    util, registry   pure helpers (any part may import util) and the level list: import nothing
    runtime          talking to the GPU: imports only itself and util
    ptx              device-side helpers for Numba kernels: util
    splitk           the split-K plan the levels share: runtime, util
    sgemm, hgemm     the levels: ptx, runtime, splitk, util, each its own family only
    call             api and choose (the public call and its decisions): registry, runtime,
                     util; never a level, measure or explain
    init             numba_gemm/__init__.py, light: gpu now, api and registry when called
    main             the warm command, numba_gemm/__main__.py and warm.py (what its workers
                     run): registry, runtime, util, and explain for --census
    explain          ledgers, census, figures, the NumPy model: everything below it, never measure
    measure          bench.py's machinery, timing, microbenchmarks, twins: everything below it
"""
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "numba_gemm"

BELOW_CALL = {"registry", "runtime", "util"}
LEVEL_DEPS = {"ptx", "runtime", "splitk", "util"}
ALLOWED = {
    "util": set(),
    "registry": set(),
    "runtime": {"util"},
    "ptx": {"util"},
    "splitk": {"runtime", "util"},
    "sgemm": LEVEL_DEPS,
    "hgemm": LEVEL_DEPS,
    "call": BELOW_CALL,
    "init": {"call"} | BELOW_CALL,
    "main": {"explain"} | BELOW_CALL,
    "explain": {"call", "sgemm", "hgemm", "splitk", "ptx"} | BELOW_CALL,
    "measure": {"explain", "call", "sgemm", "hgemm", "splitk", "ptx"} | BELOW_CALL,
}
CALL = {"api", "choose"}
MAX_ROOT_MODULES = 8
MAX_LINES = 600


def _name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in sorted(PKG.rglob("*.py"))}


def part(module: str) -> str:
    """The part of the package a module belongs to (the table above)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "init"
    head = parts[1]
    if head in ("__main__", "warm"):
        return "main"
    return "call" if head in CALL else head


def imports(module: str) -> set[str]:
    """The package's modules that `module` imports, wherever in it the import statement stands:
    `from X import y` is module X.y when there is one, else X (a package's __init__)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "numba_gemm"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "numba_gemm":
                continue
            for a in node.names:
                out.add(f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target)
    unknown = out - set(MODULES)
    assert not unknown, f"{module} imports {sorted(unknown)}, which are not modules of the package"
    return out - {module}


GRAPH = {m: imports(m) for m in MODULES}


def test_every_module_belongs_to_a_part_with_a_rule():
    assert {part(m) for m in MODULES} == set(ALLOWED)


def test_each_part_imports_only_what_its_rule_allows():
    bad = [f"{m} ({part(m)}) imports {t} ({part(t)})"
           for m, targets in GRAPH.items() for t in sorted(targets)
           if part(t) != part(m) and part(t) not in ALLOWED[part(m)]]
    assert bad == []


def test_no_import_circle():
    """Tarjan's strongly connected components of the import graph: each must be one module."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while not scc or scc[-1] != v:
                scc.append(stack.pop())
                on_stack.discard(scc[-1])
            if len(scc) > 1:
                circles.append(sorted(scc))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert circles == []


def test_the_root_holds_at_most_8_modules_and_none_is_over_600_lines():
    root = sorted(p.name for p in PKG.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_each_sub_package_says_what_lives_there_and_what_may_import_it():
    for init in PKG.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc.splitlines()) >= 2 and "import" in " ".join(doc.splitlines()[:5]), init


def test_importing_the_package_and_its_light_parts_imports_no_numba():
    code = ("import sys, numba_gemm, numba_gemm.runtime, numba_gemm.measure, numba_gemm.explain, "
            "numba_gemm.sgemm, numba_gemm.hgemm\n"
            "print(sorted(m for m in sys.modules if m == 'numba' or m.startswith('numba.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr[-2000:] or out.stdout


def test_dotted_names_in_strings_name_modules_that_exist():
    """A module named in a string (python -m ..., importlib, a child process) is found like an import."""
    named = {}
    for m, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"numba_gemm(\.\w+)+", node.value):
                named.setdefault(node.value, m)
    gone = {s: m for s, m in named.items() if s not in MODULES and s != "numba_gemm.native"}
    assert named and gone == {}


def test_pyproject_ships_every_package():
    text = (ROOT / "pyproject.toml").read_text()
    listed = set(re.findall(r'"(numba_gemm[\w.]*)"', re.search(r"^packages = \[(.*?)\]", text, re.S | re.M)[1]))
    packages = {_name(p) for p in PKG.rglob("__init__.py")}
    assert listed == packages | {"numba_gemm.native"}
