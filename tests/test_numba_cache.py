"""Numba kernels cached on disk (numba_gemm.runtime.numba_cache) and the warm-up command.

Without a GPU: the entry format and its damage (in this process), and in child processes with
the simulator off (Numba compiles without a GPU): keys from a copied level before and after an
edit, a corrupt entry compiled again with a warning, one compile among concurrent processes,
the cubin the same as Numba's own, keys for every level. With a GPU: a cached kernel loads
and computes in a fresh process without compiling."""
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from numba_gemm.runtime import numba_cache, nvrtc

ROOT = Path(__file__).resolve().parent.parent
K1 = ROOT / "numba_gemm" / "sgemm" / "k1_naive.py"


def _child(code: str, cache, extra_path=None, seed=None):
    """Run `code` with the simulator off and NUMBA_GEMM_CACHE_DIR=cache; its last stdout line is
    JSON."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", NUMBA_GEMM_CACHE_DIR=str(cache))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), extra_path and str(extra_path),
                                                      env.get("PYTHONPATH")]))
    if seed is not None:
        env["PYTHONHASHSEED"] = str(seed)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


# ---- entries on disk (no compile) ----------------------------------------------------------

@pytest.fixture(scope="module")
def a_cubin(tmp_path_factory):
    """A real cubin (NVRTC, no GPU needed) to store and damage."""
    src = tmp_path_factory.mktemp("src")
    (src / "tiny.cu").write_text('extern "C" __global__ void tiny(float* x) { x[threadIdx.x] *= 2.0f; }\n')
    mp = pytest.MonkeyPatch()
    mp.setattr(nvrtc, "native_dir", lambda: src)
    mp.setenv("NUMBA_GEMM_CACHE_DIR", str(tmp_path_factory.mktemp("nvrtc")))
    try:
        return nvrtc.compile_cubin("tiny.cu")
    finally:
        mp.undo()


KEY = "0123456789abcdef0123456789abcdef"


def test_entry_round_trip(tmp_path, a_cubin):
    path = tmp_path / "k.numba"
    numba_cache.write_entry(path, KEY, "tiny", a_cubin)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert numba_cache.read_entry(path, KEY) == ("tiny", a_cubin)
    assert numba_cache.read_entry(tmp_path / "absent.numba", KEY) is None     # no entry: no warning


def _damaged(good: bytes, how: str, cubin: bytes) -> bytes:
    if how == "truncated":
        return good[: len(good) - 100]
    if how == "header only":
        return good[: good.index(b"\n", len(numba_cache.FORMAT)) + 1]
    if how == "garbage":
        return os.urandom(len(good))
    if how == "empty":
        return b""
    if how == "one bit flipped in the cubin":   # still a whole ELF file: the digest catches it
        flipped = bytearray(good)
        flipped[-len(cubin) // 3] ^= 0x10
        return bytes(flipped)
    if how == "another key's":
        return numba_cache.pack("f" * 32, "tiny", cubin)
    if how == "an older format":
        return b"numba_gemm numba cubin 0\n" + good[len(numba_cache.FORMAT):]
    raise ValueError(how)


@pytest.mark.parametrize("how", ["truncated", "header only", "garbage", "empty", "one bit flipped in the cubin",
                                 "another key's", "an older format"])
def test_damaged_or_foreign_entry_warns_and_reads_as_missing(tmp_path, a_cubin, how):
    path = tmp_path / "k.numba"
    good = numba_cache.pack(KEY, "tiny", a_cubin)
    path.write_bytes(_damaged(good, how, a_cubin))
    with pytest.warns(RuntimeWarning, match="unusable.*compiling it again"):
        assert numba_cache.read_entry(path, KEY) is None


def test_a_failed_write_leaves_the_old_entry_and_no_temp_file(tmp_path, a_cubin, monkeypatch):
    """Written to a temp file and renamed: a write that dies before the rename (a killed
    process) leaves what was there, whole, and nothing else."""
    path = tmp_path / "k.numba"
    numba_cache.write_entry(path, KEY, "tiny", a_cubin)

    def killed(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        numba_cache.write_entry(path, KEY, "other", a_cubin + b"\0" * 64)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k.numba"]
    assert numba_cache.unpack(path.read_bytes(), KEY) == ("tiny", a_cubin)


def test_an_unwritable_cache_warns_once_and_goes_on(tmp_path, a_cubin, monkeypatch):
    monkeypatch.setattr(nvrtc, "_warned", set())
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.warns(RuntimeWarning, match="cannot write the kernel cache"):
        numba_cache.write_entry(blocker / "k.numba", KEY, "tiny", a_cubin)


def test_the_reduction_is_warmed_with_the_types_its_launch_gives():
    """splitk.reduce's arguments, typed as launch_numba types them, are the signature the
    warm-up compiles (another signature would be a second, cold compile at the first call)."""
    from numba_gemm.runtime import launch
    from numba_gemm.sgemm import _splitk_parts

    P, C = np.zeros(24, np.float32), np.zeros((4, 3), np.float32)
    args = (P, np.int32(2), np.int64(12), np.float32(1.0), np.float32(0.0), C.reshape(12))
    assert launch._numba_types(args) == tuple(_splitk_parts.REDUCE_SIGNATURE)


# ---- keys and compiles (child processes, the simulator off) ------------------------------------

COPY_KEY = """
import json, sys, importlib
from numba_gemm.runtime import numba_cache
m = importlib.import_module("k1copy")
key = numba_cache.kernel_key(m.kernel, m.SIGNATURE, (9, 0, "a"))
entry, cubin, compiled = numba_cache.cubin(m.kernel, m.SIGNATURE, (9, 0, "a"))
print(json.dumps({"key": key, "compiled": compiled, "cubin": len(cubin)}))
"""


def _copy_k1(where: Path, edit=None, helper_edit=None) -> Path:
    """k1 copied out of the package as module `k1copy` (its helper _common.py beside it as
    `k1helpers`), relative imports made absolute; `edit`/`helper_edit`: (old, new) in either."""
    where.mkdir()
    src = K1.read_text().replace("from ._access", "from numba_gemm.sgemm._access")
    src = src.replace("from ._common import", "from k1helpers import")
    helpers = (K1.parent / "_common.py").read_text().replace("from ..", "from numba_gemm.")
    for text, change in ((src, edit), (helpers, helper_edit)):
        if change:
            assert change[0] in text, change
    if edit:
        src = src.replace(*edit)
    if helper_edit:
        helpers = helpers.replace(*helper_edit)
    (where / "k1copy.py").write_text(src)
    (where / "k1helpers.py").write_text(helpers)
    return where


def test_an_edited_constant_in_a_copied_level_or_its_helper_changes_the_key(tmp_path):
    cache = tmp_path / "cache"
    first, _ = _child(COPY_KEY, cache, _copy_k1(tmp_path / "a"))
    same, _ = _child(COPY_KEY, cache, _copy_k1(tmp_path / "b"))
    tile, _ = _child(COPY_KEY, cache, _copy_k1(tmp_path / "c", edit=("TILE_M, TILE_N = 32, 32",
                                                                        "TILE_M, TILE_N = 32, 16")))
    helper, _ = _child(COPY_KEY, cache, _copy_k1(tmp_path / "d", helper_edit=(
        "        C[c] = alpha * value\n", "        C[c] = alpha * value + float32(0.0)\n")))
    assert first["compiled"] and first["cubin"] > 0
    assert same["key"] == first["key"] and not same["compiled"]   # same code elsewhere: a hit
    assert tile["key"] != first["key"] and tile["compiled"]       # a fresh compile
    assert helper["key"] not in (first["key"], tile["key"]) and helper["compiled"]
    assert len(list(cache.glob("k1copy.kernel.sm_90a.*.numba"))) == 3


CORRUPT = """
import json, warnings
from numba_gemm.runtime import numba_cache
from numba_gemm.sgemm import k1_naive as k1
cc = (9, 0, "a")
_, good, compiled_first = numba_cache.cubin(k1.kernel, k1.SIGNATURE, cc)
path, key = numba_cache.entry_path(k1.kernel, k1.SIGNATURE, cc)
path.write_bytes(path.read_bytes()[:-500])                 # torn
numba_cache._memory.clear()
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    _, again, compiled_again = numba_cache.cubin(k1.kernel, k1.SIGNATURE, cc)
repaired = numba_cache.unpack(path.read_bytes(), key)[1] == again
print(json.dumps({"first": compiled_first, "again": compiled_again, "repaired": repaired,
                  "same": again == good, "warnings": [str(x.message) for x in w]}))
"""


def test_a_corrupt_entry_is_compiled_again_with_a_warning(tmp_path):
    got, _ = _child(CORRUPT, tmp_path / "cache")
    assert got["first"] and got["again"] and got["repaired"]
    assert any("unusable" in m and "compiling it again" in m for m in got["warnings"]), got["warnings"]


RACE = """
import json, sys, time
from numba_gemm.runtime import numba_cache
from numba_gemm.sgemm import k1_naive as k1
start = float(sys.argv[1])
while time.time() < start:
    time.sleep(0.01)
_, cubin, compiled = numba_cache.cubin(k1.kernel, k1.SIGNATURE, (9, 0, "a"))
import hashlib
print(json.dumps({"compiled": compiled, "sha": hashlib.sha256(cubin).hexdigest()}))
"""


def test_processes_racing_for_one_kernel_compile_it_once(tmp_path):
    import time

    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", NUMBA_GEMM_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    start = str(time.time() + 8)          # after every child has imported Numba and the level
    procs = [subprocess.Popen([sys.executable, "-c", RACE, start], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert sum(r["compiled"] for r in results) == 1, results   # the lock: the others read its entry
    assert len({r["sha"] for r in results}) == 1


SAME_AS_NUMBA = """
import json, types
from unittest import mock
from numba.cuda import codegen, dispatcher
from numba_gemm import splitk
from numba_gemm.explain import sass
from numba_gemm.runtime import numba_cache
from numba_gemm.sgemm import k1_naive as k1, _splitk_parts
cc = (9, 0, "a")
out = {}
# Numba's own compile, as on an H200 (its device query answered): what the runtime loaded
with mock.patch.object(dispatcher, "get_current_device", lambda: types.SimpleNamespace(compute_capability=(9, 0))), \\
        mock.patch.object(codegen.CUDACodeLibrary, "_ensure_cc", lambda self, c: c or cc):
    for name, (k, sig) in {"k1": (k1.kernel, k1.SIGNATURE),
                           "reduce_partials": (splitk.reduce_partials, _splitk_parts.REDUCE_SIGNATURE)}.items():
        entry, ours, _ = numba_cache.cubin(k, sig, cc)
        theirs = dispatcher._Kernel(k.py_func, tuple(sig), **k.targetoptions)
        lib = theirs._codelibrary
        # the symbol carries a per-compile number (..B2v1B..): compare the code under one name
        a = sass.disassemble(ours).replace(entry, "KERNEL")
        b = sass.disassemble(bytes(lib.get_cubin().code)).replace(lib._entry_name, "KERNEL")
        out[name] = {"same": a == b, "instructions": a.count(";")}
print(json.dumps(out))
"""


def test_the_cached_cubin_is_the_code_numba_would_load(tmp_path):
    got, _ = _child(SAME_AS_NUMBA, tmp_path / "cache")
    for name, r in got.items():
        assert r["same"] and r["instructions"] > 20, (name, r)


EVERY_KEY = """
import json
from numba_gemm import warm
from numba_gemm.registry import registry
from numba_gemm.runtime import numba_cache
keys = {}
for lv in registry().values():
    if not lv.native:
        for name in warm.kernels_of(lv):
            k, sig = warm._numba_kernels(lv.module, lv.name)[name]
            keys[f"{lv.name}:{name}"] = numba_cache.kernel_key(k, sig, (9, 0, "a"))
print(json.dumps(keys))
"""


def test_every_numba_kernel_has_a_key_the_same_in_every_process(tmp_path):
    one, _ = _child(EVERY_KEY, tmp_path, seed=1)
    two, _ = _child(EVERY_KEY, tmp_path, seed=2)        # string hashing differs: keys must not
    assert one == two
    shared = {k for k in one if k.endswith(":reduce_partials")}
    # the split levels' reduction (k5sk, k8sk; k6gv reduces in its kernel): one kernel, one
    # key; k8p runs k8's aligned kernel itself and k8e k9's, k8e k8p's copies and k6gv's and
    # k6gv16's kernels, k8es k9st's kernel and k8e's others: the same keys, one cache entry each
    assert len(shared) >= 2 and len({one[k] for k in shared}) == 1
    same = [("k8p:k8p", "k8:k8"), ("k8e:k8e", "k9:k9"), ("k8e:repitch", "k8p:repitch"), ("k8e:k6gv", "k6gv:k6gv"),
            ("k8es:k8es", "k9st:k9st"), ("k8es:k8es_edge_columns", "k8e:k8e_edge_columns"),
            ("k8es:k8es_tail", "k8e:k8e_tail"), ("k8es:repitch", "k8p:repitch"), ("k8es:k6gv", "k6gv:k6gv"),
            ("k8e:k6gv16", "k6gv16:k6gv16"), ("k8es:k6gv16", "k6gv16:k6gv16")]
    assert all(one[a] == one[b] for a, b in same)
    assert len(set(one.values())) == len(one) - (len(shared) - 1) - len(same)
    names = {k.split(":")[0] for k in one}
    assert {"k1", "k7", "k8sk", "v8py", "v11py"} <= names


REFUSED = """
import json
from numba import cuda, float32
from numba_gemm.runtime import driver, numba_cache

@cuda.jit(debug=True, opt=False)
def with_debug_info(x):
    x[0] = 1.0

@cuda.jit
def reshaping(x):
    y = x.reshape((2, 2))                  # Numba links a helper of its own for this
    y[0, 0] = 1.0

sig = (float32[::1],)
driver.current_context = lambda: 0         # no GPU here; neither kernel gets as far as a load
compiles = []
real = numba_cache.compile_kernel
numba_cache.compile_kernel = lambda *a: compiles.append(a[0].__name__) or real(*a)
got = [numba_cache.function(k, sig) for k in (with_debug_info, reshaping, with_debug_info, reshaping)]
print(json.dumps({"got": got, "compiles": compiles, "why": sorted(numba_cache._refused.values())}))
"""


def test_kernels_numba_must_launch_itself_are_refused_once(tmp_path):
    """Debug info (known from the jit options) and a call into code Numba links in (known
    after compiling) leave the kernel to Numba's own launch (function() answers None); asked
    again, function() does not compile it again."""
    got, _ = _child(REFUSED, tmp_path / "cache")
    assert got["got"] == [None] * 4
    assert got["compiles"] == ["reshaping"]
    assert len(got["why"]) == 2 and any("debug" in w for w in got["why"]) and \
        any("nocopy" in w for w in got["why"]), got["why"]
    assert not list((tmp_path / "cache").glob("*.numba"))


def test_warm_command_fills_both_caches_then_finds_them(tmp_path):
    env = dict(os.environ, NUMBA_GEMM_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))

    def warm(*more):
        out = subprocess.run([sys.executable, "-m", "numba_gemm", "warm", "--level", "k1,v7", "--jobs", "1", *more],
                             capture_output=True, text=True, env=env, timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout, {m.group(1): (int(m.group(2)), int(m.group(3)), int(m.group(4)))
                            for m in re.finditer(r"^(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+", out.stdout, re.M)}

    text, rows = warm()
    assert rows == {"k1": (1, 1, 0), "v7": (1, 1, 0), "total": (2, 2, 0)}     # kernels, compiled, cached
    assert len(list((tmp_path / "cache").glob("k1_naive.kernel.sm_90a.*.numba"))) == 1
    assert len(list((tmp_path / "cache").glob("v7_wmma.sm_90a.*.cubin"))) == 1
    assert "census" not in text and not (tmp_path / "cache" / "census").exists()
    from numba_gemm.runtime import nvrtc

    if nvrtc.nvdisasm_path() is None:
        pytest.skip("no nvdisasm here: the census cannot be taken")
    text, rows = warm("--census")
    assert rows == {"k1": (1, 0, 1), "v7": (1, 0, 1), "total": (2, 0, 2)}
    assert re.search(r"^census: 2 of 2 levels", text, re.M), text
    assert [len(list((tmp_path / "cache" / "census").glob(f"{n}.*.json"))) for n in ("k1", "v7")] == [1, 1]


# ---- on a GPU -------------------------------------------------------------------------------

FIRST_CALL = """
import json, time
import numpy as np
from numba import cuda
import numba_gemm
from numba_gemm.runtime import numba_cache
compiles = []
real = numba_cache.compile_kernel
numba_cache.compile_kernel = lambda *a: compiles.append(1) or real(*a)
rng = np.random.default_rng(0)
out = {}
for level, dtype in (("k1", np.float32), ("k6", np.float32), ("v8py", np.float16)):
    A = rng.standard_normal((192, 136)).astype(dtype)
    B = rng.standard_normal((136, 200)).astype(dtype)
    cuda.current_context()
    t = time.perf_counter()
    C = numba_gemm.gemm(A, B, level=level)
    cuda.synchronize()
    ref = A.astype(np.float64) @ B.astype(np.float64)
    out[level] = {"s": time.perf_counter() - t, "err": float(abs(C - ref).max() / abs(ref).max())}
out["compiles"] = len(compiles)
print(json.dumps(out))
"""


@pytest.mark.gpu
def test_a_cached_kernel_loads_and_computes_in_a_fresh_process(tmp_path):
    cold, _ = _child(FIRST_CALL, tmp_path / "cache")
    warm, _ = _child(FIRST_CALL, tmp_path / "cache")
    assert cold["compiles"] > 0 and warm["compiles"] == 0
    for level in ("k1", "k6", "v8py"):
        assert cold[level]["err"] < 1e-3 and warm[level]["err"] < 1e-3, (level, cold, warm)
        assert warm[level]["s"] < 1.0, (level, warm)


def test_warm_compiles_the_native_variants_run_may_need(monkeypatch):
    """A native level's warm-up names its shipped source and each WARM_VARIANTS entry (v11's five
    other tiles, the 64-wide ones also as deep as they run on one wave; v13's 16-bit C, its
    128×128 tile six deep and its tiles with the pair along N, each with either C) and compiles
    each with that variant's defines."""
    from numba_gemm import warm
    from numba_gemm.hgemm import v11_wgmma, v13_persistent
    from numba_gemm.registry import get
    from numba_gemm.runtime import nvrtc

    names = warm.kernels_of(get("v11"))
    deeper = sum(t.bn == v11_wgmma.DEEP_BN for t in v11_wgmma.TILE_CHOICES)    # 64×64 and 128×64, 8 deep
    assert names[0] == "v11_wgmma.cu" and len(names) == 1 + len(v11_wgmma.TILE_CHOICES) - 1 + deeper == 8
    assert "v11_wgmma.cu:bm=64,bn=64" in names and "v11_wgmma.cu:bm=128,bn=64,stages=8" in names
    along_n = [f"v13_persistent.cu:bm={bm},bn={bn},along_n=1{c}"
               for bm, bn in ((64, 64), (128, 64), (128, 128)) for c in ("", ",c16")]
    assert warm.kernels_of(get("v13")) == ["v13_persistent.cu", "v13_persistent.cu:c16",
                                           "v13_persistent.cu:bm=128,bn=128",
                                           "v13_persistent.cu:bm=128,bn=128,c16", *along_n]
    seen = []
    monkeypatch.setattr(nvrtc, "compile_variant", lambda src, d, *a: seen.append((src, tuple(d))))
    warm.warm_one("v13", "v13_persistent.cu:c16", None)
    warm.warm_one("v13", "v13_persistent.cu:bm=128,bn=128", None)
    warm.warm_one("v13", "v13_persistent.cu:bm=64,bn=64,along_n=1", None)
    warm.warm_one("v11", "v11_wgmma.cu:bm=64,bn=64", None)
    warm.warm_one("v11", "v11_wgmma.cu", None)
    deep = v13_persistent.planned(v13_persistent.tile(128, 128))
    assert deep.stages == 6
    assert seen == [("v13_persistent.cu", v13_persistent.defines(c16=1)),
                    ("v13_persistent.cu", v13_persistent.defines(config=deep)),
                    ("v13_persistent.cu", v13_persistent.defines(
                        config=v13_persistent.planned(v13_persistent.tile(64, 64)), along_n=1)),
                    ("v11_wgmma.cu", v11_wgmma.tile(64, 64).defines()),
                    ("v11_wgmma.cu", tuple(v11_wgmma.DEFINES))]


def test_warm_help_says_the_whole_paragraph(capsys):
    """`warm --help` prints what the command does to its last sentence, not a cut first line."""
    from numba_gemm import __main__ as entry

    with pytest.raises(SystemExit):
        entry.warm(["--help"])
    out = capsys.readouterr().out
    assert "first call in a\nnew process loads them instead of compiling" in out
    assert out.rstrip().endswith("census cache") and "every other use of it." in out
