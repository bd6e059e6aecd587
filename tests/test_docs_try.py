"""Every HGEMM section of docs/LADDER.md (v7 ... v13, v8py, v11py, the side rungs) has one "Try it"
box, which opens with the command to run without a GPU:

    **Try it.** Without a GPU: `COMMAND` prints "TEXT" and "MORE TEXT": what it shows.

(the rest of the box, after that paragraph, lists the other commands and says which need a GPU),
and that command runs here, on a CPU (the GPU hidden from it, so a machine with one runs it as a
learner without one would), within seconds, and prints every "quoted" text of the line's sentence
(compared with runs of white space collapsed, as a table's aligned columns print them)."""
import os
import re
import shlex
import subprocess
import sys

import pytest

from numba_gemm.explain import figures
from numba_gemm.registry import registry

ROOT = figures.ROOT
LADDER = (ROOT / "docs" / "LADDER.md").read_text()
TRY = re.compile(r"\*\*Try it\.\*\* Without a GPU: `(?P<cmd>[^`]+)`(?P<rest>.*?)(?=\n\n|\Z)", re.S)
BOX = re.compile(r"\*\*Try it\b")                      # the label of a "Try it" box, however it goes on
OLD_LABEL = re.compile(r"\*\*Without a GPU\b")         # a separate CPU box beside the "Try it" one
TIMEOUT_S = 120


def level_sections(text: str) -> dict[str, str]:
    """level -> its section of LADDER (from its '## level — ' heading to the next '## ')."""
    out = {}
    for m in re.finditer(r"(?m)^## (\S+) — .*$", text):
        end = text.find("\n## ", m.end())
        out[m.group(1)] = text[m.end():end if end >= 0 else len(text)]
    return out


def hgemm_levels(text: str) -> list[str]:
    """The HGEMM levels (fp16/bf16: v7 ... v13, v8py, v11py, v11sk, v11r) that have a section."""
    secs = level_sections(text)
    return [lv for lv, info in registry().items()
            if lv in secs and "float32" not in {getattr(d, "name", str(d)) for d in info.dtypes}]


def try_lines(section: str) -> list[tuple[str, list[str]]]:
    """(command, promised texts) of every 'Try it. Without a GPU:' line of a section."""
    return [(m.group("cmd"), re.findall(r'"([^"]+)"', " ".join(m.group("rest").split())))
            for m in TRY.finditer(section)]


def run_cpu(cmd: str) -> tuple[int, str]:
    """Run a LADDER command as a learner without a GPU would: python is this interpreter, the
    working directory the checkout, no GPU visible; (exit status, stdout + stderr)."""
    argv = shlex.split(cmd)
    if argv[0] == "python":
        argv[0] = sys.executable
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", NUMBA_GEMM_CENSUS_PROGRESS="0")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    return p.returncode, p.stdout + p.stderr


def promise_problems(cmd: str, promises: list[str], rc: int, output: str) -> list[str]:
    """What the command did not do that its sentence says: exit 0 and print every promised text."""
    if not promises:
        return [f"{cmd}: the sentence promises nothing in quotes"]
    bad = [] if rc == 0 else [f"{cmd}: exit status {rc}"]
    flat = " ".join(output.split())
    return bad + [f"{cmd}: does not print [{p}]" for p in promises if " ".join(p.split()) not in flat]


def section_problems(text: str) -> list[str]:
    """Each HGEMM section: one "Try it" box, opening with its one CPU command; no second box."""
    secs = level_sections(text)
    bad = []
    for lv in hgemm_levels(text):
        n_try, n_box, n_old = len(try_lines(secs[lv])), len(BOX.findall(secs[lv])), len(OLD_LABEL.findall(secs[lv]))
        if n_try != 1:
            bad.append(f"{lv}: {n_try} 'Try it. Without a GPU:' lines, not 1")
        if n_box != 1 or n_old:
            bad.append(f"{lv}: {n_box} 'Try it' boxes and {n_old} separate 'Without a GPU' ones, not one box")
    return bad


def test_every_hgemm_section_has_one_cpu_command():
    assert {"v7", "v8", "v8py", "v9", "v10", "v11", "v11py", "v11sk", "v11r", "v12", "v13"} <= set(
        hgemm_levels(LADDER))
    assert section_problems(LADDER) == []


@pytest.mark.parametrize("level", hgemm_levels(LADDER))
def test_cpu_command_prints_what_its_sentence_says(level):
    (cmd, promises), = try_lines(level_sections(LADDER)[level])
    rc, out = run_cpu(cmd)
    assert promise_problems(cmd, promises, rc, out) == [], out[-3000:]


def test_try_check_can_fail():
    v8 = level_sections(LADDER)["v8"]
    (cmd, promises), = try_lines(v8)
    rc, out = run_cpu(cmd)
    assert promise_problems(cmd, promises, rc, out) == []
    wrong = try_lines(v8.replace('"[0, 1, 2, 3, 4, 5, 6, 7]"', '"[0, 1, 2, 3, 4, 5, 7, 6]"'))[0][1]
    assert promise_problems(cmd, wrong, rc, out) == [f"{cmd}: does not print [[0, 1, 2, 3, 4, 5, 7, 6]]"]
    assert promise_problems(cmd, [], rc, out) == [f"{cmd}: the sentence promises nothing in quotes"]
    rc2, out2 = run_cpu('python -c "import sys; sys.exit(3)"')
    assert promise_problems("x", ["y"], rc2, out2) == ["x: exit status 3", "x: does not print [y]"]
    gone = LADDER.replace(v8, re.sub(r"\*\*Try it\.\*\* Without a GPU:", "**Try it.** On a CPU:", v8))
    assert section_problems(gone) == ["v8: 0 'Try it. Without a GPU:' lines, not 1"]
    two = LADDER.replace(v8, v8 + "\n**Try it** (GPU): `python bench.py --level v8`.\n")
    assert section_problems(two) == ["v8: 2 'Try it' boxes and 0 separate 'Without a GPU' ones, not one box"]
    old = LADDER.replace(v8, v8 + "\n**Without a GPU, run this:** `python -c 1` prints \"x\".\n")
    assert section_problems(old) == ["v8: 1 'Try it' boxes and 1 separate 'Without a GPU' ones, not one box"]
