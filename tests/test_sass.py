"""The static SASS census: every level compiles to the instructions it exists for, with no
local-memory spills; and the parser itself, on a tiny kernel whose instruction mix is known."""
import dataclasses
import json
import os
import subprocess
import sys

import pytest

from numba_gemm.explain import sass
from numba_gemm.registry import registry

LEVELS = list(registry().values())
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def censuses():
    # one child process for all Numba levels when this one runs the simulator
    return sass.census_levels(LEVELS)


def _level_census(censuses, level):
    result = censuses[level.name]
    if isinstance(result, sass.CensusUnavailable):
        pytest.skip(str(result))
    return result


@pytest.mark.parametrize("level", LEVELS, ids=[lv.name for lv in LEVELS])
def test_level_has_its_instructions(censuses, level):
    kernels = _level_census(censuses, level)
    assert kernels, f"{level.name}: no kernel found in the cubin"
    assert level.sass_must_have, f"{level.name}: SASS_MUST_HAVE names no instruction"
    absent = sass.missing(level, kernels)
    assert not absent, f"{level.name}: no {', '.join(absent)} in the SASS\n" + sass.format_table(kernels)


@pytest.mark.parametrize("level", LEVELS, ids=[lv.name for lv in LEVELS])
def test_level_has_no_spills(censuses, level):
    for c in _level_census(censuses, level):
        assert c.local_memory_ops == 0, f"{c.kernel}: {c.count('LDL')} LDL, {c.count('STL')} STL"
        if c.spill_stores is not None:
            assert c.spill_stores == 0 and c.spill_loads == 0, f"{c.kernel} spills"
        assert c.registers > 0


def test_k6_both_specialisations(censuses):
    """The vector kernel is 128-bit end to end; both keep the LDS.128 inner loop, unrolled,
    with single-precision arithmetic only (alpha/beta never promoted to float64)."""
    if "k6" not in censuses:
        pytest.skip("no k6 level registered")
    by_name = {c.kernel: c for c in censuses["k6"]}
    vec, edge = by_name["k6"], by_name["k6_edge"]
    for prefix in ("LDG.E.128", "LDS.128", "STG.E.128"):
        assert vec.has(prefix), prefix
    assert vec.count("LDG.E") == vec.count("LDG.E.128")        # no 32-bit global loads
    assert vec.count("STG.E") == vec.count("STG.E.128")
    for c in (vec, edge):
        assert c.count("LDS.128") == 96                         # 3 per k × 32 k: fully unrolled
        assert c.count("LDS") == 96                             # and nothing narrower
        assert c.count("FFMA") >= 1024
        assert not c.has("DFMA") and not c.has("DMUL") and not c.has("DADD")


# ---- the parser ------------------------------------------------------------------------

TINY = r'''
import json, sys
from numba import cuda, float32
from numba_gemm.explain import sass
from numba_gemm.ptx.intrinsics import load4_global, load4_shared, store4_global, store4_shared

def tiny(X, Y, a):
    S = cuda.shared.array(64, float32, alignment=16)
    x, y, z, w = load4_global(X, 0)                 # one LDG.E.128
    store4_shared(S, 4 * cuda.threadIdx.x, (x, y, z, w))  # one STS.128
    cuda.syncthreads()                              # one BAR
    p, q, r, s = load4_shared(S, 0)                 # one LDS.128
    store4_global(Y, 4, (p * a + q, q, r, s))      # one FFMA, one STG.E.128

sig = (float32[::1], float32[::1], float32)
c = sass.census_numba(tiny, sig, "tiny", "tiny")
print(json.dumps({"opcodes": c.opcodes, "classes": c.classes, "registers": c.registers,
                  "shared": c.shared_bytes, "spills": [c.spill_stores, c.spill_loads]}))
'''


def _without_simulator(code):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


BOUNDS = r'''
import json, types
from numba import cuda, float32
from numba_gemm.explain import sass

n = 80   # 80 values live at once: more registers than a 1024-thread block may give a thread
src = "def hungry(X, Y):\n    i = cuda.grid(1)\n"
src += "".join(f"    v{j} = X[i + {j}]\n" for j in range(n))
src += "".join(f"    v{j} = v{j} * v{(j + 1) % n} + v{(j + 7) % n}\n" for j in range(n))
src += "    Y[i] = " + " + ".join(f"v{j}" for j in range(n)) + "\n"
exec(src)
sig = (float32[::1], float32[::1])
level = types.SimpleNamespace(LEVEL="h", KERNELS={"h": (cuda.jit(launch_bounds=(1024, 1))(hungry), sig)})
(f, s, bounds), = sass.numba_kernels(level).values()
capped = sass.census_numba(f, s, "h", "h", bounds)
free = sass.census_numba(hungry, sig, "h", "h")
print(json.dumps({"bounds": bounds, "capped": capped.registers, "free": free.registers}))
'''


def test_census_compiles_with_the_kernels_launch_bounds():
    got = _without_simulator(BOUNDS)
    assert got["bounds"] == [1024, 1]
    assert got["capped"] <= 64 < got["free"]   # 65536 registers / 1024 threads


def test_parser_on_a_known_kernel():
    got = _without_simulator(TINY)
    cls = got["classes"]
    assert cls.get("LDG.E.128") == 1
    assert cls.get("STS.128") == 1
    assert cls.get("LDS.128") == 1
    assert cls.get("FFMA") == 1
    assert cls.get("STG.E.128") == 1
    assert cls.get("BAR") == 1
    assert not {"LDG.E", "LDS", "LDS.64", "STG.E", "STS"} & set(cls)   # nothing narrower
    assert any(op.startswith("EXIT") for op in got["opcodes"])
    assert got["registers"] > 0
    assert 256 <= got["shared"] <= 256 + 1024   # 64 floats (+ the sm_90 per-block reserve)
    assert got["spills"] == [0, 0]


@pytest.mark.parametrize("opcode, cls", [
    ("LDG.E.128.CONSTANT", "LDG.E.128"),
    ("LDG.E.LTC128B.128", "LDG.E.128"),
    ("LDG.E", "LDG.E"),
    ("LDG.E.64.CONSTANT", "LDG.E.64"),
    ("LDS.U.128", "LDS.128"),
    ("LDS", "LDS"),
    ("STG.E.STRONG.GPU", "STG.E"),
    ("BAR.SYNC.DEFER_BLOCKING", "BAR"),
    ("HMMA.16816.F32", "HMMA"),
    ("LDSM.16.M88.4", "LDSM"),
    ("SYNCS.ARRIVE.TRANS64.RED.A1T0", "SYNCS"),
    ("UTMALDG.2D", "UTMALDG"),
])
def test_normalise(opcode, cls):
    assert sass.normalise(opcode) == cls


def test_count_prefix_respects_opcode_boundaries():
    c = sass.Census(level="x", kernel="x", opcodes={"LDSM.16.M88.4": 2, "LDS.128": 3, "LDG.E.128.CONSTANT": 1})
    assert c.count("LDS") == 3          # LDSM is not LDS
    assert c.count("LDSM") == 2
    assert c.count("LDG.E.128") == 1
    assert c.count("LDG.E") == 1
    assert c.local_memory_ops == 0


def test_count_opcodes_reads_predicated_lines():
    text = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*05b0*/              @!P3 LDG.E.128 R12, desc[UR6][R36.64] ;
        /*0640*/              @!P5 IMAD.WIDE.U32 R36, R28, UR5, R26 ;
        /*1100*/               @P0 BRA `(.L_x_1) ;
                                                              /* 0x000fe20000000f00 */
    """
    assert sass.count_opcodes(text) == {"LDC": 1, "LDG.E.128": 1, "IMAD.WIDE.U32": 1, "BRA": 1}


def test_missing_names_what_no_kernel_has():
    lv = dataclasses.replace(LEVELS[0], sass_must_have=("LDG.E.128", "LDS", "FFMA"))
    a = sass.Census(level=lv.name, kernel="a", opcodes={"LDG.E": 4, "LDSM.16.M88.4": 1, "FFMA": 8})
    assert sass.missing(lv, [a]) == ["LDG.E.128", "LDS"]     # LDG.E is not .128, LDSM is not LDS
    b = sass.Census(level=lv.name, kernel="b", opcodes={"LDG.E.128.CONSTANT": 1, "LDS.128": 2})
    assert sass.missing(lv, [a, b]) == []


def test_format_table_has_a_row_per_kernel():
    rows = [sass.Census(level="k", kernel=n, opcodes={"FFMA": 4, "LDS.128": 1}, registers=32) for n in ("a", "b")]
    table = sass.format_table(rows).splitlines()
    assert len(table) == 3 and "FFMA" in table[0] and "LDS.128" in table[0]
    assert table[1].startswith("k:a ") and table[2].startswith("k:b ")   # not named after level k
    own = sass.Census(level="k2", kernel="k2_tuned", opcodes={"FFMA": 1})
    assert sass.format_table([own]).splitlines()[1].startswith("k2_tuned ")


# ---- spills per function, and where they come from when the log is not at hand

LOG = """ptxas info    : Compiling entry function 'a' for 'sm_90a'
ptxas info    : Function properties for a
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers
ptxas info    : Compiling entry function 'b' for 'sm_90a'
ptxas info    : Function properties for b
ptxas         .     96 bytes stack frame, 24 bytes spill stores, 16 bytes spill loads
"""


def test_spills_by_function():
    assert sass.spills_by_function(LOG) == {"a": (0, 0, 0), "b": (96, 24, 16)}
    assert sass.spills_by_function("") == {}
    assert sass.spill_info(LOG) == (96, 24, 16)      # the sum, for one-kernel logs


FRAME = r'''
extern "C" __global__ void flat(float* x) { x[threadIdx.x] *= 2.0f; }
extern "C" __global__ void framed(float* x, int i) {     // a local array indexed at run time
    float a[256];
    for (int j = 0; j < 256; ++j) a[j] = x[j * blockDim.x + threadIdx.x];
    a[i & 255] += 1.0f;
    x[threadIdx.x] = a[(i >> 8) & 255];
}
'''


@pytest.fixture
def two_kernels(tmp_path, monkeypatch):
    from numba_gemm.runtime import nvrtc

    (tmp_path / "two.cu").write_text(FRAME)
    monkeypatch.setattr(nvrtc, "native_dir", lambda: tmp_path)
    monkeypatch.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(nvrtc, "_cubins", {})
    monkeypatch.setattr(nvrtc, "_logs", {})
    return nvrtc.compile_cubin("two.cu"), nvrtc.compile_log("two.cu")


def test_native_spills_from_the_log_and_from_the_frame(two_kernels):
    cubin, log = two_kernels
    with_log = {c.kernel: c for c in sass.census_cubin(cubin, "t", log)}
    assert (with_log["flat"].spill_stores, with_log["flat"].spill_loads) == (0, 0)
    assert (with_log["framed"].spill_stores, with_log["framed"].spill_loads) == (0, 0)
    assert with_log["framed"].stack_bytes >= 1024 and with_log["flat"].stack_bytes == 0
    # no log: a 0-byte stack frame cannot hold spills; a local array's frame says nothing
    no_log = {c.kernel: c for c in sass.census_cubin(cubin, "t", "")}
    assert no_log["flat"].spill_stores == 0 and no_log["flat"].spill_loads == 0
    assert no_log["framed"].spill_stores is None and no_log["framed"].stack_bytes >= 1024
    table = sass.format_table(no_log.values())
    spill_column = {line.split()[0]: line.split()[-1] for line in table.splitlines()[1:]}
    assert spill_column == {"t:flat": "0", "t:framed": "?"}


def test_native_census_rows_and_spills_from_the_cached_log():
    """A native level's rows are level_variant, one per entry point (no bare level name next
    to a symbol name), with spills known: the NVRTC log travels with the cached cubin."""
    from numba_gemm.registry import get

    lv = get("v8")
    rows = sass.census_levels_uncached([lv])["v8"]
    if isinstance(rows, Exception):
        pytest.skip(str(rows))
    assert [c.kernel for c in rows] == [f"v8_{v}" for v in lv.module.KERNEL_NAMES]
    for c in rows:
        assert c.spill_stores == 0 and c.spill_loads == 0 and c.stack_bytes == 0, c.kernel
        # one entry holds both block-tile instances (FAST and general): twice one stage's mma
        assert c.count("HMMA") == 2 * 128 and c.count("LDSM") == 2 * 32, c.kernel
    assert sass.format_table(rows).splitlines()[1].split()[0] == "v8_f16"
