"""The measured numbers in the docs come from the committed runs: every level section of
docs/LADDER.md has a headline line

    > **H200:** 4096³ fp16: 0.199 ms = 689.6 TFLOPS, 0.948× cuBLAS, 1.50× v10; 8192³ … (2026-12-01, fcfef86).

whose every number is checked here against docs/data through the manifest h200_ladder.json (a
later run of a level and shape replaces an earlier one, as in the figures): ms, TFLOPS,
% of cuBLAS and × cuBLAS of that result, "× level" = that level's time over this one's at the
same shape, and the date and commit(s) of the runs the results come from. A clause may name a
shape of the shape suite instead of a square (`16×8192×8192 bf16: 44.4 µs, 0.78× cuBLAS, 1.85× v11`:
kernel time, cuBLAS's time over this one's, the other level's time over this one's), checked
against the suite runs the manifest lists under "suites". A headline may say "not yet measured"
instead. README's ladder paragraph and CONCEPTS' measured figures are checked
phrase by phrase. A number in prose that disagrees with the data fails here."""
import json
import re

import pytest

from numba_gemm.explain import figures, ledgers
from numba_gemm.registry import registry

ROOT = figures.ROOT
LADDER = (ROOT / "docs" / "LADDER.md").read_text()
# the deep dives: what a LADDER section links to; its numbers, excerpts and commands are checked as LADDER's
DETAILS = (ROOT / "docs" / "DETAILS.md").read_text()
DTYPES = {None: "float32", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
HEAD = re.compile(r"\*\*H200:\*\* (?P<body>.*?) \((?P<date>\d{4}-\d{2}-\d{2}), "
                  r"(?P<commits>[0-9a-f]{7}(?:, [0-9a-f]{7})*)\)\.")
CLAUSE = re.compile(r"^(?P<n>\d+)³(?: (?P<dtype>fp16|bf16|fp32))?: (?P<rest>.+)$")
SHAPE_CLAUSE = re.compile(r"^(?P<M>\d+)×(?P<N>\d+)×(?P<K>\d+) (?P<dtype>fp16|bf16|fp32): (?P<rest>.+)$")
TOKENS = [   # (pattern, what it is); every number of a clause must be one of these
    (re.compile(r"(?P<v>\d+\.?\d*) ms"), "ms"),
    (re.compile(r"(?P<v>\d+\.?\d*) TFLOPS"), "tflops"),
    (re.compile(r"(?P<v>\d+\.?\d*) % of cuBLAS"), "pct_cublas"),
    (re.compile(r"(?P<v>\d+\.?\d*)× cuBLAS"), "x_cublas"),
    (re.compile(r"(?P<v>\d+\.?\d*)× (?P<of>(?:k|v)\w+)"), "x_level"),
]


def _data():
    results, prov = figures.load_results(figures.RESULTS_JSON)
    return {(r["level"], r["M"], r["dtype"]): r for r in results if r["M"] == r["N"] == r["K"]}, prov


DATA, PROV = _data()


def _suites():
    """{(level, M, N, K, dtype): (that level's timing, the shape's result, the run's manifest entry)}."""
    manifest = json.loads(figures.RESULTS_JSON.read_text())
    out = {}
    for run in manifest.get("suites", []):
        data = json.loads((figures.RESULTS_JSON.parent / run["json"]).read_text())
        for r in data["results"]:
            for t in r["levels"]:
                if t["ok"]:
                    out[t["level"], r["M"], r["N"], r["K"], r["dtype"]] = (t, r, run)
    return out


SUITES = _suites()
SHAPE_TOKENS = [
    (re.compile(r"(?P<v>\d+\.?\d*) µs"), "us"),
    (re.compile(r"(?P<v>\d+\.?\d*)× cuBLAS"), "x_cublas"),
    (re.compile(r"(?P<v>\d+\.?\d*)× (?P<of>(?:k|v)\w+)"), "x_level"),
]


def _check_shape_clause(level: str, c, suites) -> tuple[list[str], dict | None]:
    """(disagreements, the run's manifest entry) for one suite-shape clause."""
    M, N, K, dtype = int(c.group("M")), int(c.group("N")), int(c.group("K")), DTYPES[c.group("dtype")]
    got = suites.get((level, M, N, K, dtype))
    if got is None:
        return [f"{level}: no {M}×{N}×{K} {dtype} timing in the manifest's suite runs"], None
    t, shape, run = got
    bad, rest = [], c.group("rest")
    for pattern, what in SHAPE_TOKENS:
        for tok in pattern.finditer(rest):
            if what == "us":
                want = t["kernel_ms"] * 1e3
            elif what == "x_cublas":
                want = shape["cublas_ms"] and shape["cublas_ms"] / t["kernel_ms"]
            else:
                other = suites.get((tok.group("of"), M, N, K, dtype))
                want = other and other[0]["kernel_ms"] / t["kernel_ms"]
            if want is None or not agrees(tok.group("v"), want):
                bad.append(f"{level} {M}×{N}×{K} {dtype}: {tok.group(0)!r} but the data say "
                           f"{want if want is None else round(want, 4)}")
        rest = pattern.sub("", rest)
    if re.search(r"\d", rest):
        bad.append(f"{level}: {c.group(0)!r} has numbers the headline grammar does not check")
    return bad, run


def agrees(written: str, value: float) -> bool:
    """The written number is the value rounded to the digits written."""
    digits = len(written.partition(".")[2])
    return f"{value:.{digits}f}" == written


def sections(text: str) -> dict[str, str]:
    """level -> its section of LADDER.md (from its '## level — ' heading to the next '## ')."""
    out = {}
    for m in re.finditer(r"(?m)^## (\S+) — .*$", text):
        end = text.find("\n## ", m.end())
        out[m.group(1)] = text[m.end():end if end >= 0 else len(text)]
    return out


def headline(section: str) -> str:
    """The first blockquote of a section, its lines joined."""
    lines = []
    for line in section.strip("\n").splitlines():
        if not line.startswith(">"):
            break
        lines.append(line[1:].strip())
    return " ".join(lines)


def check_headline(level: str, text: str, data=DATA, prov=PROV, suites=SUITES) -> list[str]:
    """Every disagreement between one headline and the data, as messages (empty: it agrees)."""
    if "**H200:** not yet measured" in text:
        return []
    m = HEAD.search(text)
    if not m:
        return [f"{level}: no '**H200:** … (date, commit).' headline"]
    bad, runs = [], []
    for clause in m.group("body").split("; "):
        c = CLAUSE.match(clause)
        shaped = None if c else SHAPE_CLAUSE.match(clause)
        if shaped:
            more, run = _check_shape_clause(level, shaped, suites)
            bad += more
            runs += [run] if run else []
            continue
        if not c:
            bad.append(f"{level}: clause {clause!r} does not start with 'N³[ dtype]: ' or 'M×N×K dtype: '")
            continue
        n, dtype = int(c.group("n")), DTYPES[c.group("dtype")]
        r = data.get((level, n, dtype))
        if r is None:
            bad.append(f"{level}: no {n}³ {dtype} result in the manifest's runs")
            continue
        runs.append(r["run"])
        rest = c.group("rest")
        for pattern, what in TOKENS:
            for t in pattern.finditer(rest):
                v = t.group("v")
                if what == "x_level":
                    other = data.get((t.group("of"), n, dtype))
                    want = other and other["ms"] / r["ms"]
                elif what == "x_cublas":
                    want = r["tflops"] / r["cublas_tflops"]
                else:
                    want = r[what]
                if want is None or not agrees(v, want):
                    bad.append(f"{level} {n}³ {dtype}: {t.group(0)!r} but the data say "
                               f"{want if want is None else round(want, 4)}")
            rest = pattern.sub("", rest)
        if re.search(r"\d", rest):
            bad.append(f"{level}: {clause!r} has numbers the headline grammar does not check")
    # a run in the manifest may carry its own date; the headline names the date of its runs
    dates = {run.get("date", prov["date"]) for run in runs} or {prov["date"]}
    if {m.group("date")} != dates:
        bad.append(f"{level}: date {m.group('date')} but its results are of {sorted(dates)}")
    commits = {run["commit"] for run in runs}
    written = set(m.group("commits").split(", "))
    if written != commits:
        bad.append(f"{level}: commits {sorted(written)} but its results come from {sorted(commits)}")
    return bad


SECTIONS = sections(LADDER)
LEVELS = [lv for lv in registry() if lv in SECTIONS]
# a level's words: its LADDER section, then its deep dive (the same heading in DETAILS.md)
DEEP = sections(DETAILS)
PROSE = {lv: SECTIONS.get(lv, "") + "\n\n" + DEEP.get(lv, "") for lv in {*SECTIONS, *DEEP}}


def before_hgemm(text: str) -> str:
    """The page up to its "From k8 to v7" section (or v7's, where it has none): the SGEMM part."""
    ends = [i for i in (text.find("\n## From k8 to v7"), text.find("\n## v7 — ")) if i >= 0]
    return text[:min(ends)] if ends else text


SGEMM_TEXT = before_hgemm(LADDER) + "\n\n" + before_hgemm(DETAILS)   # LADDER's k1 … k8sk, then their deep dives


def test_every_level_section_has_a_headline():
    assert set(LEVELS) >= {"k1", "k2", "k3", "k3c", "k4", "k5", "k6", "k7", "k8", "v7", "v8", "v8py",
                           "v9", "v10", "v11", "v12", "v13"}
    for lv in LEVELS:
        assert "**H200:**" in headline(SECTIONS[lv]), f"{lv}: its first blockquote has no **H200:** line"


def section_order_problems(text: str) -> list[str]:
    """Every level section comes after its PARENT's, and a level's Python twin (v8py, v11py)
    right after its parent's section, so v8py is read beside v8, not after v13."""
    order = [m.group(1) for m in re.finditer(r"(?m)^## (\S+) — ", text) if m.group(1) in registry()]
    bad = []
    for i, lv in enumerate(order):
        parent = registry()[lv].parent
        if parent in order and order.index(parent) > i:
            bad.append(f"{lv} comes before its parent {parent}")
        if lv.endswith("py") and (i == 0 or order[i - 1] != parent):
            bad.append(f"{lv} does not follow {parent} (after {order[i - 1] if i else 'nothing'})")
    return bad


def test_sections_follow_their_parents():
    assert section_order_problems(LADDER) == []


def test_section_order_check_can_fail():
    v8py = LADDER[LADDER.index("\n## v8py — "):LADDER.index("\n## v9 — ")]
    late = LADDER.replace(v8py, "").replace("\n## Tables", v8py + "\n## Tables")
    assert section_order_problems(late) == ["v8py does not follow v8 (after v13)"]
    early = LADDER.replace(v8py, "").replace("\n## v7 — ", v8py + "\n## v7 — ")
    first, second = section_order_problems(early)
    assert first == "v8py comes before its parent v8" and second.startswith("v8py does not follow v8 (after ")


@pytest.mark.parametrize("level", LEVELS)
def test_ladder_headline_agrees_with_the_data(level):
    assert check_headline(level, headline(SECTIONS[level])) == []


def test_the_check_fails_on_a_wrong_number():
    """Each kind of number, edited by one digit, is caught (the test can fail)."""
    text = headline(SECTIONS["k8"])
    assert check_headline("k8", text) == []
    for good, bad in (("2.93 ms", "2.94 ms"), ("46.9 TFLOPS", "46.8 TFLOPS"),
                      ("91.7 % of cuBLAS", "92.7 % of cuBLAS"), ("1.11× k7", "1.12× k7"),
                      ("2026-12-01", "2026-11-29"), ("f86eb6f)", "33d50a5)")):
        assert good in text
        assert check_headline("k8", text.replace(good, bad, 1)), bad
    v13 = headline(SECTIONS["v13"])
    assert check_headline("v13", v13.replace("0.954× cuBLAS", "0.95× cuBLAS")) == []   # fewer digits: fine
    assert check_headline("v13", v13.replace("0.954× cuBLAS", "0.964× cuBLAS"))
    assert check_headline("v13", v13.replace("8192³ fp16", "8192³ bf16"))              # not in the manifest
    assert check_headline("k1", "**H200:** 4096³: 275.8 ms at 3 GHz (2026-12-01, 33d50a5).")  # unchecked number


# ------------------------------------------------------------------- README and CONCEPTS

def _r(level, n, dtype="float32"):
    return DATA[(level, n, dtype)]


README = (ROOT / "README.md").read_text()
CONCEPTS = (ROOT / "docs" / "CONCEPTS.md").read_text()


def skip_unless_the_quoted_compilers():
    """The SASS counts the docs quote are one CUDA release's (CONCEPTS says which); another
    release's ptxas may count differently, so a check of quoted counts skips there."""
    quoted = re.search(r"The counts these docs quote come from CUDA (\d+)\.(\d+)'s compilers", CONCEPTS)
    assert quoted, "CONCEPTS no longer says which CUDA release the quoted SASS counts are from"
    try:
        from numba_gemm.runtime import nvrtc

        here = nvrtc.nvrtc_version()
    except Exception as e:       # no NVRTC here: the census itself skips
        pytest.skip(f"no NVRTC here: {e}")
    want = tuple(int(x) for x in quoted.groups())
    if here != want:
        pytest.skip(f"the docs quote SASS counts from CUDA {want[0]}.{want[1]}; this NVRTC is "
                    f"{here[0]}.{here[1]}, whose ptxas may count differently")
COSTS = json.loads(ledgers.H200_COSTS.read_text())
TWIN = [r["ms"] / r["twin_ms"] for r in DATA.values() if r.get("twin_ms")]
V8PY = [_r("v8py", n, "float16")["ms"] / _r("v8", n, "float16")["ms"] for n in (4096, 8192)]
# phrase with {} for the number -> the value it must round to
def _suite_geomean(run):
    """auto's kernel time against cuBLAS's over a suite run's shapes, geometric mean."""
    import math

    xs = [r["auto_vs_cublas"] for r in json.loads((figures.RESULTS_JSON.parent / run["json"]).read_text())["results"]
          if r.get("auto_vs_cublas")]
    return math.exp(sum(map(math.log, xs)) / len(xs))


_SUITE_GEOMEAN = {json.loads((figures.RESULTS_JSON.parent / run["json"]).read_text())["dtype"]: _suite_geomean(run)
                  for run in json.loads(figures.RESULTS_JSON.read_text())["suites"]
                  if "--only" not in run["command"]}      # a geomean is over the whole suite
_V11PY_RUN = {(r["level"], r["M"]): r["ms"] for r in json.loads(      # v11 and v11py in one process
    (figures.RESULTS_JSON.parent / "h200_v11py_fp16.json").read_text())["results"]}
_V11PY_SPEED = [_V11PY_RUN["v11", n] / _V11PY_RUN["v11py", n] for n in (4096, 8192)]
_TILES_SUITE = {r["name"]: r for r in json.loads(
    (ROOT / "docs" / "data" / "h200_shapes_fp16_tiles.json").read_text())["results"]}
_SUITE_BEFORE = {r["name"]: r for r in json.loads(
    (ROOT / "docs" / "data" / "h200_shapes_fp16_refit.json").read_text())["results"]}


def _auto_x_cublas(r):
    return r["cublas_ms"] / next(t["kernel_ms"] for t in r["levels"] if t["level"] == r["auto"])


_FP32_SUITE = json.loads((ROOT / "docs" / "data" / "h200_shapes_fp32_refit8.json").read_text())["results"]
_16_SUITES = [json.loads((ROOT / "docs" / "data" / f"h200_shapes_{dt}_streamk.json").read_text())["results"]
              for dt in ("fp16", "bf16")]
_FP32_STREAMK = {r["name"]: r for r in json.loads(
    (ROOT / "docs" / "data" / "h200_shapes_fp32_streamk.json").read_text())["results"]}


def _suite_x_cublas(shape: str, level: str) -> float:
    """cuBLAS's kernel time over the level's at one shape of the stream-K run's fp32 suite."""
    r = _FP32_STREAMK[shape]
    return r["cublas_ms"] / next(t["kernel_ms"] for t in r["levels"] if t["level"] == level)


def _score_geomean(dtype: str) -> float:
    """cuBLAS over auto's pick, geometric mean over a dtype's shapes in the --score table."""
    import math

    xs = [float(line.split()[-1]) for line in (ROOT / "docs" / "data" / "h200_auto_score.txt").read_text().splitlines()
          if line.startswith(" ") and line.split()[-5] == dtype]
    return math.exp(sum(map(math.log, xs)) / len(xs))

_K8E = {(r["level"], r["M"]): r for r in json.loads(     # k8e with B and C in place, d70bd12
    (ROOT / "docs" / "data" / "h200_k8e_in_place.json").read_text())}
_FP32_IN_PLACE = json.loads((ROOT / "docs" / "data" / "h200_shapes_fp32_in_place.json").read_text())["results"]
_GV = {(r["M"], r["N"]): r for r in json.loads(     # k6gv in one launch, 73177cc
    (ROOT / "docs" / "data" / "h200_k6gv_in_kernel.json").read_text())}
README_FIGURES = {
    "(512³ fp16: {}× cuBLAS, was": _auto_x_cublas(_TILES_SUITE["square 512"]),
    "cuBLAS, was {}×; docs/RESULTS.md": _auto_x_cublas(_SUITE_BEFORE["square 512"]),
    "SGEMM k1 {} →": _r("k1", 4096)["tflops"],
    "→ k6 {} →": _r("k6", 4096)["tflops"],
    "→ k8 {} TFLOPS at 4096³": _r("k8", 4096)["tflops"],
    "and {} at 8192³ (": _r("k8", 8192)["tflops"],
    "({}× and": _r("k8", 4096)["tflops"] / _r("k8", 4096)["cublas_tflops"],
    "and {}× cuBLAS SGEMM": _r("k8", 8192)["tflops"] / _r("k8", 8192)["cublas_tflops"],
    "and k9 (2026-12-04)\n{} TFLOPS at 4096³": _r("k9", 4096)["tflops"],
    "TFLOPS at 4096³ and {} at 8192³, ": _r("k9", 8192)["tflops"],
    "at 8192³, {}× and": _r("k9", 4096)["tflops"] / _r("k9", 4096)["cublas_tflops"],
    "{}× cuBLAS; HGEMM": _r("k9", 8192)["tflops"] / _r("k9", 8192)["cublas_tflops"],
    "carry no check ({}× cuBLAS at 4096³": _r("k9", 4096)["tflops"] / _r("k9", 4096)["cublas_tflops"],
    "at 4096³, {}× at 8192³, ": _r("k9", 8192)["tflops"] / _r("k9", 8192)["cublas_tflops"],
    "at 8192³, {}× k8)": _r("k8", 4096)["ms"] / _r("k9", 4096)["ms"],
    "within {}–": min(TWIN),
    "–{}× of its CUDA C twin": max(TWIN),
    "v7 {} →": _r("v7", 8192, "float16")["tflops"],
    "→ v10 {} (": _r("v10", 8192, "float16")["tflops"],
    "ceiling measured {})": COSTS["tensor_tflops"]["mma_sync"],
    "→ v11 {},": _r("v11", 8192, "float16")["tflops"],
    "v13 {} TFLOPS": _r("v13", 8192, "float16")["tflops"],
    "TFLOPS, {}× and": _r("v11", 8192, "float16")["tflops"] / _r("v11", 8192, "float16")["cublas_tflops"],
    "and {}× cuBLAS (": _r("v13", 8192, "float16")["tflops"] / _r("v13", 8192, "float16")["cublas_tflops"],
    "cuBLAS ({});": _r("v13", 8192, "float16")["cublas_tflops"],
    "v13 reaches {}× cuBLAS": _r("v13", 4096, "float16")["tflops"] / _r("v13", 4096, "float16")["cublas_tflops"],
    "narrow N 128 ({}× in fp16": next(r for r in _16_SUITES[0] if r["name"] == "narrow N 128")["auto_vs_cublas"],
    "in fp16, {}× in bf16) and": next(r for r in _16_SUITES[1] if r["name"] == "narrow N 128")["auto_vs_cublas"],
    "M = 512 ({}–": min(next(r for r in rs if r["name"] == "M=512")["auto_vs_cublas"] for rs in _16_SUITES),
    "–{}×); in fp32": max(next(r for r in rs if r["name"] == "M=512")["auto_vs_cublas"] for rs in _16_SUITES),
    "takes decode M = 1 at {}× cuBLAS": _GV[1, 4096]["cublas_ms"] / _GV[1, 4096]["ms"],
    "ragged rows from {}× to": next(r for r in _FP32_SUITE if r["name"] == "ragged rows")["auto_vs_cublas"],
    "to {}× (its interior": next(r for r in _FP32_IN_PLACE if r["name"] == "ragged rows")["auto_vs_cublas"],
    "({}× cuBLAS at 4097³, 1.14": _K8E["k8e", 4097]["cublas_ms"] / _K8E["k8e", 4097]["ms"],
    "at 4097³, {}× k8p; twenty-first": _K8E["k8p", 4097]["ms"] / _K8E["k8e", 4097]["ms"],
    "geomean auto/cuBLAS {} in bf16": _SUITE_GEOMEAN["bfloat16"],
    "in bf16, {} in fp16": _SUITE_GEOMEAN["float16"],
    "in fp16, {} in fp32": _SUITE_GEOMEAN["float32"],
    "decode M = 16 at {}× cuBLAS": _suite_x_cublas("decode M=16", "k6gv16"),
    "auto's pick then, {}×)": _suite_x_cublas("decode M=16", "k5sk"),
    "M = 128 product at {}× (k9": _suite_x_cublas("M=128, wide", "k9st"),
    "(k9 {}×), k8es": _suite_x_cublas("M=128, wide", "k9"),
    "ragged rows at {}×. Auto": _suite_x_cublas("ragged rows", "k8es"),
    "picks come to {}× cuBLAS in geomean": _score_geomean("float32"),
    "v11py is measured too, at {}–": min(_V11PY_SPEED),
    "–{}× v11's speed": max(_V11PY_SPEED),
}
K2 = ledgers.bytes_ledger("k2", "h200", 4096)
_V7_L2 = ledgers.l2_ledger("v7", 4096, ledgers.h200())


def _resident_gains() -> list[float]:
    """Old plan / plan that fits, per shape, of the H100 runs with `splits` forced to the old S."""
    out = []
    for part in ("t8", "t4", "sl8", "sl4"):
        by = {}
        for r in json.loads((ROOT / "docs" / "data" / f"h100_resident_plans_{part}.json").read_text()):
            by.setdefault((r["M"], r["N"], r["K"]), {})["old" if "splits=" in r["level"] else "new"] = r["ms"]
        out += [t["old"] / t["new"] for t in by.values()]
    return out


_RESIDENT_H100 = json.loads((ROOT / "docs" / "data" / "h100_residency_resident.json").read_text())["rows"][0]["resident_ctas"]


CONCEPTS_FIGURES = {
    "clusters of 4 or 8 of a kernel with one CTA to an SM fit on {} of": _RESIDENT_H100["4"],
    "of 6 on {}, and a grid": _RESIDENT_H100["6"],
    "lower their K split until all their clusters fit, {}–": min(_resident_gains()),
    "–{}× faster at the shapes this changed": max(_resident_gains()),
    "issues {} FLOPs per SM per clock": COSTS["tensor"]["wgmma"]["flops_per_sm_cycle"],
    "clock, {}× what `mma.sync` reaches per clock": COSTS["tensor"]["wgmma"]["flops_per_sm_cycle"]
                                                   / COSTS["tensor"]["mma_sync"]["flops_per_sm_cycle"],
    "here ({}× in TFLOPS": COSTS["tensor_tflops"]["wgmma"] / COSTS["tensor_tflops"]["mma_sync"],
    "that is {} FLOP/byte. The **L2 model**": 2 * 4096 ** 3 / _V7_L2.per_tile_bytes,
    "A and B read once, {} FLOP/byte for the same tiles": 2 * 4096 ** 3 / _V7_L2.ideal_bytes,
    "`mma.sync` **{} TFLOPS**": COSTS["tensor_tflops"]["mma_sync"],
    "`wgmma` **{} TFLOPS**": COSTS["tensor_tflops"]["wgmma"],
    "{} GHz measured under our microbenchmarks": COSTS["clock_ghz"],
    "| **{} TB/s** device to device": COSTS["copy_bandwidth_Bps"] / 1e12,
    "**{}×** its DRAM roofline": K2.roofline_s * 1e3 / _r("k2", 4096)["ms"],
    "the bytes ledger's {} ms at": K2.roofline_s * 1e3,
    "over k2's measured {} ms": _r("k2", 4096)["ms"],
    "= {} TFLOPS | arithmetic": ledgers.h200().fp32_flops / 1e12,
}
WGMMA_ATTAIN = [100 * _r(lv, 4096, "float16")["tflops"] / COSTS["tensor_tflops"]["wgmma"] for lv in ("v11", "v12", "v13")]
_C16 = {(r["dtype"], r["M"], r["level"]): r["kernel_ms"] for r in json.loads(
    (ROOT / "docs" / "data" / "h200_v13_c16.json").read_text())["rows"]}
_TILES = {(r["M"], r["level"]): r["kernel_ms"] for r in json.loads(
    (ROOT / "docs" / "data" / "h200_v11_tiles.json").read_text())["rows"] if r["N"] == r["M"] == r["K"]}
_SHARE = {r["level"]: r["ms"] for r in json.loads(     # v11t's A shared by 2 tiles, 64x4096x4096, H100
    (ROOT / "docs" / "data" / "h100_v11t_share.json").read_text()) if (r["M"], r["N"], r["K"]) == (64, 4096, 4096)}


LADDER_FIGURES = {
    "the plans that fit ran **{}–": min(_resident_gains()),
    "–{}×** faster than those the SMs alone": max(_resident_gains()),
    "with 2 tiles it ran at **{}×** v11t's speed": _SHARE["v11t"] / _SHARE["v11t:share=2"],
    "the shipped tile runs at **{}×** cuBLAS": _TILES[512, "cublas"] / _TILES[512, "v11"],
    "tile at **{}×**; at 2048³": _TILES[512, "cublas"] / _TILES[512, "v11:bm=64:bn=64"],
    "v13 gets **{}×** faster at 4096³ fp16": _C16["float16", 4096, "v13"] / _C16["float16", 4096, "v13/c16"],
    "v13 stays at **{}×**": _C16["float16", 4096, "cublas/c16"] / _C16["float16", 4096, "v13/c16"],
}
RESULTS_FIGURES = {   # the ledger tables' paragraph, in RESULTS since it left LADDER's "Tables"
    "v11, v12 and v13 reach **{} %,": WGMMA_ATTAIN[0],
    "%, {} % and": WGMMA_ATTAIN[1],
    "% and {} %** at 4096³": WGMMA_ATTAIN[2],
    "against `wgmma`'s {} TFLOPS": COSTS["tensor_tflops"]["wgmma"],
}



# ------------------------------------------------------------------- LADDER k1 … k8sk prose

def _file_rows(name):
    """{(level, M): result} of one docs/data run file that LADDER names beside the manifest's."""
    data = json.loads((ROOT / "docs" / "data" / name).read_text())
    return {(r["level"], r["M"]): r for r in (data["results"] if isinstance(data, dict) else data)}


def _x_cublas(r):
    return r["tflops"] / r["cublas_tflops"]


H200 = ledgers.h200()
_CY = {lv: ledgers.cycle_ledger(lv, H200, 4096) for lv in ("k1", "k2", "k3", "k3c", "k4", "k5", "k6")}
_PRED_MS = {lv: cl.predicted_s(4096, 4096, 4096) * 1e3 for lv, cl in _CY.items()}
_MS = {lv: _r(lv, 4096)["ms"] for lv in ("k1", "k2", "k3", "k3c", "k4", "k5", "k6", "k7", "k8")}
_F33 = {**_file_rows("h200_sgemm_4096.json"), **_file_rows("h200_sgemm_4097_8192.json")}   # 33d50a5
_K7K8 = _file_rows("h200_sgemm_k7_k8.json")                                                  # f86eb6f
_CURVE = _file_rows("h200_sgemm_curve.json")
_BIG = _file_rows("h200_sgemm_16384.json")
_TILES = {(r["level"], tuple(r["tiling"])): r for r in json.loads(
    (ROOT / "docs" / "data" / "h200_k7_tiles.json").read_text())["rows"] if r.get("ok")}
_K7_TWIN = [_K7K8["k7", n]["ms"] / _K7K8["k7", n]["twin_ms"] for n in (4096, 4097, 8192)]
_K8_16384 = [_x_cublas(_CURVE["k8", 16384]), _x_cublas(_BIG["k8", 16384])]
# k5 priced as compiled: the census's 128 LDS (conflict-free) + 64 LDS.128 (broadcast) per 1024
# FFMA, as the k5 section counts them, plus the source's global loads
_K5_SASS_CYCLES = ((128 * H200.costs["lds_free"] + 64 * H200.costs["lds128_bcast"]) / 1024
                   + _CY["k5"].global_cycles)
SGEMM_FIGURES = {   # the numbers of LADDER's intro and k1 … k8sk details: phrase -> the data's value
    # Why three ledgers
    "k2 runs at **{} %** of its roofline": 100 * K2.roofline_s * 1e3 / _MS["k2"],
    "such a kernel {}× (k3)": ledgers.bytes_ledger("k3", "h200", 4096).intensity / K2.intensity,
    "(k3) buys {}×,": _MS["k2"] / _MS["k3"],
    "with k3's intensity, is {}× faster than k3": _MS["k3"] / _MS["k4"],
    # k1
    "prices k1 at {} cycles per FMA": _CY["k1"].cycles_per_fma,
    "i.e. {} ms at 4096 — within": _PRED_MS["k1"],
    "— within {} % of the": 100 * abs(_PRED_MS["k1"] / _MS["k1"] - 1),
    "% of the {} ms measured": _MS["k1"],
    # k2
    "k2 runs at {}× its DRAM roofline": K2.roofline_s * 1e3 / _MS["k2"],
    "roofline ({} ms against the bytes ledger's": _MS["k2"],
    "against the bytes ledger's {} ms at 4.13 TB/s": K2.roofline_s * 1e3,
    "ledger predicts {} ms and k1 → k2": _PRED_MS["k2"],
    "k1 → k2 = **{}×**": ledgers.predicted_speedup(_CY["k1"], _CY["k2"]),
    "k2 takes {} ms, ": _MS["k2"],
    "ms, {} % more (its loads": 100 * (_MS["k2"] / _PRED_MS["k2"] - 1),
    "(its loads cost {} cycles per FMA on average": _CY["k2"].cycles_per_fma * _MS["k2"] / _PRED_MS["k2"],
    "on average, {} per load": _CY["k2"].cycles_per_fma * _MS["k2"] / _PRED_MS["k2"] / 2,
    "and the measured step is **{}×**": _MS["k1"] / _MS["k2"],
    # k3, k3c
    "Measured k2 → k3: **{}×**": _MS["k2"] / _MS["k3"],
    "the source ledger predicts **{}×**, no gain": ledgers.predicted_speedup(_CY["k2"], _CY["k3"]),
    "the measured step is **{}×**. A 1.6×": _MS["k3"] / _MS["k3c"],
    # k4
    "Measured k3 → k4 **{}×**": _MS["k3"] / _MS["k4"],
    "(against the side branch k3c, {}×)": _MS["k3c"] / _MS["k4"],
    "The source ledger predicts **{}×** and misses": ledgers.predicted_speedup(_CY["k3"], _CY["k4"]),
    "and misses by {} %": 100 * (_MS["k3"] / _MS["k4"] / ledgers.predicted_speedup(_CY["k3"], _CY["k4"]) - 1),
    "({} vs 13.46 ms": _MS["k3"],
    "({} vs 6.10 ms": _MS["k4"],
    # k5
    "k4 → k5 **{}×**. Both": _MS["k4"] / _MS["k5"],
    "**{}×** from the source": ledgers.predicted_speedup(_CY["k4"], _CY["k5"]),
    "its time ({} ms) is a floor": _PRED_MS["k5"] / _CY["k5"].cycles_per_fma * _K5_SASS_CYCLES,
    "does not reach ({} ms)": _MS["k5"],
    # k6
    "Measured k5 → k6 **{}×**": _MS["k5"] / _MS["k6"],
    "The source ledger predicts {}×, the SASS": ledgers.predicted_speedup(_CY["k5"], _CY["k6"]),
    "4097 runs in {} ms": _F33["k6", 4097]["ms"],
    "ms ({} TFLOPS, ": _F33["k6", 4097]["tflops"],
    "TFLOPS, {} % of cuBLAS; commit 33d50a5": 100 * _x_cublas(_F33["k6", 4097]),
    "k1 → k6 is {}× on the H200": _MS["k1"] / _MS["k6"],
    "At {} TFLOPS k6 runs at": _r("k6", 4096)["tflops"],
    "k6 runs at {} % of the FP32 peak": 100 * _r("k6", 4096)["tflops"] * 1e12 / H200.fp32_flops,
    "at the ledger's clock ({} TFLOPS)": H200.fp32_flops / 1e12,
    # k7
    "{} / 35.6 / 42.6 TFLOPS at 4096³": _r("k7", 4096)["tflops"],
    "42.5 / {} / 42.6 TFLOPS": _K7K8["k7", 4097]["tflops"],
    "35.6 / {} TFLOPS at 4096³": _r("k7", 8192)["tflops"],
    "each ({} / 35.0 / 36.3": _F33["k6", 4096]["tflops"],
    "36.5 / {} / 36.3: k6": _F33["k6", 4097]["tflops"],
    "35.0 / {}: k6 in": _F33["k6", 8192]["tflops"],
    "Numba / CUDA C twin {}–": min(_K7_TWIN),
    "–{} — the Python version": max(_K7_TWIN),
    "found the 32-deep tile {}× faster": _TILES["k7", (128, 128, 16, 64, 32, 4)]["ms"]
                                           / _TILES["k7", (128, 128, 32, 64, 32, 4)]["ms"],
    "for k7 ({} TFLOPS)": _TILES["k7", (128, 128, 32, 64, 32, 4)]["tflops"],
    "and the 8-deep one {}×;": _TILES["k7", (128, 128, 16, 64, 32, 4)]["ms"]
                                / _TILES["k7", (128, 128, 8, 64, 32, 4)]["ms"],
    # k8
    "the 8-deep k8 at {}× the 16-deep one": _TILES["k8", (128, 128, 16, 64, 32, 4)]["ms"]
                                            / _TILES["k8", (128, 128, 8, 64, 32, 4)]["ms"],
    "one ({} against 45.3 TFLOPS": _TILES["k8", (128, 128, 8, 64, 32, 4)]["tflops"],
    "against {} TFLOPS at 4096³, in one process": _TILES["k8", (128, 128, 16, 64, 32, 4)]["tflops"],
    "the third run). {} / 36.5 / 47.8": _r("k8", 4096)["tflops"],
    "46.9 / {} / 47.8 TFLOPS": _K7K8["k8", 4097]["tflops"],
    "36.5 / {} TFLOPS at 4096³ / 4097³ / 8192³ =": _r("k8", 8192)["tflops"],
    "8192³ = {} / 0.827": _x_cublas(_r("k8", 4096)),
    "0.917 / {} / 0.936× cuBLAS": _x_cublas(_K7K8["k8", 4097]),
    "0.827 / {}× cuBLAS": _x_cublas(_r("k8", 8192)),
    "the 8-deep tile is {} % slower": 100 * (1 - _K7K8["k8", 4097]["tflops"] / _F33["k8", 4097]["tflops"]),
    "16-deep one was ({})": _F33["k8", 4097]["tflops"],
    "Numba / C: {} at 4096³": _K7K8["k8", 4096]["ms"] / _K7K8["k8", 4096]["twin_ms"],
    "the 16-deep k8 was {} / ": _F33["k8", 4096]["ms"] / _F33["k8", 4096]["twin_ms"],
    "k8 was 1.043 / {} / ": _F33["k8", 4097]["ms"] / _F33["k8", 4097]["twin_ms"],
    "/ 1.018 / {}.": _F33["k8", 8192]["ms"] / _F33["k8", 8192]["twin_ms"],
    "k8 is {} / 0.92 / 0.94× cuBLAS": _x_cublas(_CURVE["k8", 2048]),
    "0.91 / {} / 0.94× cuBLAS": _x_cublas(_CURVE["k8", 4096]),
    "0.92 / {}× cuBLAS at 2048³": _x_cublas(_CURVE["k8", 8192]),
    "but {}× and 0.57× at 512³": _x_cublas(_CURVE["k8", 512]),
    "and {}× at 512³ and 1024³": _x_cublas(_CURVE["k8", 1024]),
    "1×4096×4096 takes {} µs": _GV[1, 4096]["ms"] * 1e3,
    "µs, {}× cuBLAS, and 1×8192×8192": _GV[1, 4096]["cublas_ms"] / _GV[1, 4096]["ms"],
    "and 1×8192×8192 {} µs": _GV[1, 8192]["ms"] * 1e3,
    "µs, {}× ([RESULTS](RESULTS.md#k6gvs-slices": _GV[1, 8192]["cublas_ms"] / _GV[1, 8192]["ms"],
    "At 16384³ it is {}–": min(_K8_16384),
    "–{}× in the benchmark's loop": max(_K8_16384),
}


def test_ladder_sgemm_prose_agrees_with_the_data():
    """Every measured or derived number of LADDER's intro and k1 … k8sk details is the manifest's
    (or a docs/data file the prose names): a number edited in prose, or a new run, fails here."""
    text = SGEMM_TEXT
    bad = []
    for phrase, value in SGEMM_FIGURES.items():
        written = find_figure(text, phrase)
        if not agrees(written, value):
            bad.append(f"{phrase.format(written)!r} but the data say {value:.4f}")
    assert bad == []


def test_ladder_sgemm_k8_twin_both_sizes():
    assert all(agrees("0.90", _K7K8["k8", n]["ms"] / _K7K8["k8", n]["twin_ms"]) for n in (4096, 8192))


def test_ladder_sgemm_prose_check_can_fail():
    text = SGEMM_TEXT
    phrase = "Measured k2 → k3: **{}×**"
    assert not agrees(find_figure(text.replace("k3: **1.74×**", "k3: **1.445×**"), phrase), SGEMM_FIGURES[phrase])


def test_ladder_sgemm_sections_quote_no_older_run():
    """Older runs are history in RESULTS.md: k1 … k8sk quote no 2026-11-29 figure."""
    text = SGEMM_TEXT
    assert "2026-11-29" not in text and "bb1e37b" not in text
    for old in ("1.445×", "23.6 ms", "35.3 TFLOPS", "276.288", "11.73×", "3.31×"):
        assert old not in text, old


def test_appendix_holds_the_seeds_and_their_card():
    """The seeds' titles, the sources and the 4090 comparison are an appendix at the end of
    DETAILS.md, after the last level's deep dive; LADDER ends with its heading and a link to it."""
    i = DETAILS.index("## Appendix: sources and the seeds")
    assert i > DETAILS.index("\n## v13 — ")
    app = DETAILS[i:]
    j = LADDER.index("## Appendix: sources and the seeds")
    assert j > LADDER.index("## Tables") and "(DETAILS.md#appendix-sources-and-the-seeds)" in LADDER[j:]
    for title in ("SGEMM in six levels: how the core code evolves",
                  "GEMM optimisation (3): large matrices and the last mile", "Programming Massively Parallel",
                  "Roofline: an insightful visual performance model"):
        assert title in " ".join(app.split()), title
    top = LADDER[:LADDER.index("## Why three ledgers")]
    assert "RTX 4090**" not in top and "2112.7" not in LADDER and "2112.7" not in DETAILS[:i]
    rtx = ledgers.card("rtx4090")
    k2, k3 = (ledgers.cycle_ledger(lv, rtx, 4096) for lv in ("k2", "k3"))
    assert rtx.costs == {"lds_free": 2.686, "lds_bcast": 0.534, "ldg": 1.94}
    flat = " ".join(app.split())
    assert f"× {k2.cycles_per_fma:.2f} / (128 × 2.52 GHz) = {k2.predicted_s(4096, 4096, 4096) * 1e3:.1f} ms" in flat
    assert f"k2 → k3 as {ledgers.predicted_speedup(k2, k3):.3f}×" in flat
    # an address cited anywhere in the docs must be one this repository already holds
    for url in re.findall(r"<(https?://[^>]+)>", app):
        assert url in CONCEPTS, url

def find_figure(text: str, phrase: str) -> str:
    """The number written where {} is in `phrase` (line breaks count as spaces)."""
    text, phrase = " ".join(text.split()), " ".join(phrase.split())
    before, after = (re.escape(x) for x in phrase.split("{}"))
    m = re.search(before + r"(\d+\.?\d*)" + after, text)
    assert m, f"phrase {phrase!r} not found: the prose changed (update the phrase with the data)"
    return m.group(1)


@pytest.mark.parametrize("page, figs", [("README", README_FIGURES), ("CONCEPTS", CONCEPTS_FIGURES),
                                         ("LADDER", LADDER_FIGURES), ("RESULTS", RESULTS_FIGURES)])
def test_prose_figures_agree_with_the_data(page, figs):
    text = {"README": README, "CONCEPTS": CONCEPTS, "LADDER": LADDER + "\n\n" + DETAILS,
            "RESULTS": (ROOT / "docs" / "RESULTS.md").read_text()}[page]
    for phrase, value in figs.items():
        written = find_figure(text, phrase)
        assert agrees(written, value), f"{page}: {phrase.format(written)!r} but the data say {value:.4f}"


def test_readme_v8py_within():
    m = re.search(r"v8py runs within (\d+) % of v8", " ".join(README.split()))
    assert m and all(abs(x - 1) * 100 <= int(m.group(1)) for x in V8PY)


def test_prose_check_can_fail():
    assert not agrees(find_figure("k2 runs at **7×** its DRAM roofline", "**{}×** its DRAM roofline"),
                      CONCEPTS_FIGURES["**{}×** its DRAM roofline"])


def test_cycle_ledger_table_measured_column():
    """LADDER's 'source vs SASS' table: its measured steps are the manifest's time ratios."""
    rows = re.findall(r"(?m)^\| (k\w+) → (k\w+) \| [\d.]+× \| [\d.]+× \| ([\d.]+)× \|$", LADDER + DETAILS)
    assert len(rows) == 6
    for parent, level, written in rows:
        want = _r(parent, 4096)["ms"] / _r(level, 4096)["ms"]
        assert agrees(written, want), f"{parent} → {level}: {written}× but the data say {want:.3f}"


def test_k1_stride_exercise_answer_is_what_its_hint_computes():
    """k1 exercise 2: word positions per line and bank ways of the A load at each size."""
    want = {4095: (32, 1), 4096: (1, 32), 4097: (32, 1), 4104: (4, 8)}
    for n, (positions, ways) in want.items():
        a = next(x for x in ledgers.warp_steps("k1", n)[0].accesses if x.array == "A")
        assert len({x % 128 // 4 for x in a.addrs}) == positions
        assert ledgers.bank_profile(a.addrs, 4).ways == ways
    section = SECTIONS["k1"]
    assert "32, 1, 32 and 4 distinct word positions" in " ".join(section.split())
    assert "gives 1, 32, 1 and 8 ways" in " ".join(section.split())


# ------------------------------------------------------------------- code excerpts, exercises

EXCERPT_DOC = re.compile(r"<!-- excerpt: (?P<path>[^#\s]+)#(?P<name>[\w-]+(?:\(\))?) -->\n```\w*\n(?P<body>.*?)\n```",
                         re.S)


def definition_excerpt(path: str, name: str) -> str:
    """The definition of function (or struct, class) `name` in a source file, with the comment
    lines right above it, dedented: a Python def or class through ast; in C/C++ the line at
    column 0 that declares `name(` (or `struct name`), a `template <...>` line before it, and
    everything to its matching closing brace. No markers needed: `path#name()` in LADDER."""
    import ast
    import textwrap

    src = (ROOT / path).read_text()
    lines = src.splitlines()
    if path.endswith(".py"):
        found = [n for n in ast.walk(ast.parse(src))
                 if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name]
        assert len(found) == 1, f"{path}: {len(found)} definitions named {name!r}"
        node = found[0]
        start, end = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1, node.end_lineno
        comment = "#"
    else:
        sig = re.compile(r"^(?:\S.*[\s*&])?" + re.escape(name) + r"\s*\(|^struct\s+" + re.escape(name) + r"\b")
        starts = [i for i, line in enumerate(lines) if sig.match(line) and not line.startswith(("//", "#"))
                  and not line.rstrip().endswith(";")]
        assert len(starts) == 1, f"{path}: {len(starts)} definitions named {name!r}"
        depth, end, opened = 0, None, False
        for i in range(starts[0], len(lines)):
            code = re.sub(r'"(?:\\.|[^"\\])*"', '""', lines[i]).split("//")[0]
            depth += code.count("{") - code.count("}")
            opened = opened or "{" in code
            if opened and depth == 0:
                end = i + 1
                break
        assert end, f"{path}: no closing brace for {name!r}"
        start = starts[0] - (starts[0] > 0 and lines[starts[0] - 1].startswith("template"))
        comment = "//"
    while start > 0 and lines[start - 1].lstrip().startswith(comment) and "[excerpt" not in lines[start - 1]:
        start -= 1
    return textwrap.dedent("\n".join(lines[start:end])).rstrip("\n")


def source_excerpt(path: str, name: str) -> str:
    """The lines between `// [excerpt:name]` (or `# [excerpt:name]`) and the next `[/excerpt]`
    marker of a source file, dedented; `name()`: the definition named so (definition_excerpt)."""
    import textwrap

    if name.endswith("()"):
        return definition_excerpt(path, name[:-2])
    src = (ROOT / path).read_text()
    m = re.search(r"(?m)^[ \t]*(?://|#) \[excerpt:" + re.escape(name) + r"\]\n(.*?)^[ \t]*(?://|#) \[/excerpt\]",
                  src, re.S)
    assert m, f"{path}: no excerpt markers named {name!r}"
    return textwrap.dedent(m.group(1)).rstrip("\n")


DOC_EXCERPTS = [(m.group("path"), m.group("name"), m.group("body"))
                for page in (LADDER, DETAILS) for m in EXCERPT_DOC.finditer(page)]


def test_ladder_has_code_excerpts():
    assert {(p, n) for p, n, _ in DOC_EXCERPTS} >= {
        ("native/v10_tma.cu", "v10-pipeline"), ("native/ptx.cuh", "mbarrier-tma"),
        ("numba_gemm/hgemm/v8py_mma.py", "v8py-loop"), ("numba_gemm/hgemm/v8py_mma.py", "v8py-mma-stage")}


@pytest.mark.parametrize("path, name, body", DOC_EXCERPTS, ids=[f"{p}#{n}" for p, n, _ in DOC_EXCERPTS])
def test_excerpt_is_the_source(path, name, body):
    assert body == source_excerpt(path, name), f"the docs' excerpt {path}#{name} differs from the source"


def test_every_marked_excerpt_is_shown():
    used = {(p, n) for p, n, _ in DOC_EXCERPTS}
    for path in ("native/v10_tma.cu", "native/ptx.cuh", "numba_gemm/hgemm/v8py_mma.py",
                 "numba_gemm/ptx/mma_sync.py", "numba_gemm/ptx/hopper.py", "numba_gemm/explain/model.py",
                 "numba_gemm/hgemm/_wgmma.py"):
        for name in re.findall(r"\[excerpt:([\w-]+)\]", (ROOT / path).read_text()):
            assert (path, name) in used, f"{path}#{name} is marked but not in LADDER.md or DETAILS.md"


def test_excerpt_check_can_fail():
    path, name, body = DOC_EXCERPTS[0]
    assert body.replace("(", "[", 1) != source_excerpt(path, name)


def test_hopper_exercise_answers():
    """The answers of the v10-v13 and v8py exercises, recomputed with the package's code."""
    from numba_gemm.hgemm import _common as cm, _wgmma as wg
    from numba_gemm.registry import get

    e = figures.mbarrier_ring(4, 12, lag=2)[9]                                 # v10, exercise 3
    assert (e["stage"], e["full_parity"], e["empty_parity"], e["issue_at"]) == (1, 0, 1, 7)
    t = wg.WgmmaTile()                                                         # v11
    a = 1024 + 2 * t.stage_bytes + 64 * 128 + 3 * 32
    b = 1024 + 2 * t.stage_bytes + t.bm * t.bk * 2 + 3 * 2048
    assert (a, b) == (107616, 121856)
    assert wg.smem_desc(a, 16, 1024) == 0x4000004000011a46 and wg.smem_desc(b, 8192, 1024) == 0x4000004002001dc0
    v11 = " ".join(SECTIONS["v11"].split())
    assert "`0x4000004000011a46`" in v11 and "`0x4000004002001dc0`" in v11
    assert (65536 - 128 * 24) // 256 // 8 * 8 == 240 and 128 * 40 + 256 * 232 == 64512   # v12
    v13 = get("v13").module.CONFIG                                             # v13
    per_cta = {c: v13.bm * v13.bk * 2 + v13.bn * v13.bk * 2 // c for c in (1, 2, 4)}
    assert per_cta == {1: 49152, 2: 32768, 4: 24576}
    assert all(cm.swizzle128(r, c) ^ (kk * 32) == cm.swizzle128(r, c + 2 * kk)   # v8py
               for r in range(8) for c in range(2) for kk in range(4))
    assert cm.swizzle128(2, 0) + 32 == 320 and cm.swizzle128(2, 2) == 256


# An image line of a section: `![caption](figures/NAME.png)` alone on its line
FIGURE_LINE = re.compile(r"(?m)^!\[(?P<caption>.+)\]\(figures/(?P<name>[^)\s/]+\.png)\)[ \t]*$")


def drawn_figures() -> set[str]:
    """The PNGs of docs/figures/ that an entry of numba_gemm.explain.figures.FIGURES draws."""
    return {name for name, _ in figures.FIGURES.values() if (figures.FIGURES_DIR / name).is_file()}


def section_problems(level: str, body: str | None, drawn: set[str] | None = None) -> list[str]:
    """What a registry level's LADDER section lacks: the section itself, a code excerpt cut from
    the source (`<!-- excerpt: path#name -->`, checked by test_excerpt_is_the_source), a figure
    drawn from the package (an image line naming a PNG of docs/figures/ that an entry of
    figures.FIGURES draws: `drawn`, default drawn_figures()), an exercise and its answer."""
    if body is None:
        return [f"{level}: no '## {level} — ' section in LADDER.md"]
    drawn = drawn_figures() if drawn is None else drawn
    out = []
    if not EXCERPT_DOC.search(body):
        out.append(f"{level}: no code excerpt (<!-- excerpt: path#name --> and a fenced block)")
    names = [m.group("name") for m in FIGURE_LINE.finditer(body)]
    out += [f"{level}: figures/{n} is not a figure of numba_gemm.explain.figures.FIGURES in docs/figures/"
            for n in names if n not in drawn]
    if not any(n in drawn for n in names):
        out.append(f"{level}: no figure (a line ![caption](figures/NAME.png), drawn by numba_gemm.explain.figures)")
    if not ("**Exercise" in body and re.search(r"<summary>Answers?</summary>", body)):
        out.append(f"{level}: no exercise with an answer")
    return out


def test_every_level_section_has_an_excerpt_and_an_exercise_with_its_answer():
    """Every registry level's LADDER section shows its code and a figure drawn from the package,
    and asks at least one exercise with its answer: a new level without them fails here."""
    bad = [p for lv in registry() for p in section_problems(lv, SECTIONS.get(lv))]
    assert bad == []


def test_section_check_can_fail():
    body = SECTIONS["v11"]
    assert section_problems("v11", body) == []
    assert section_problems("v99", None)
    no_code = EXCERPT_DOC.sub("", body)
    assert section_problems("v99", no_code) == ["v99: no code excerpt (<!-- excerpt: path#name --> and a fenced block)"]
    assert section_problems("v99", body.replace("<summary>Answers</summary>", "")
                            .replace("<summary>Answer</summary>", "")) == ["v99: no exercise with an answer"]
    no_figure = ["v99: no figure (a line ![caption](figures/NAME.png), drawn by numba_gemm.explain.figures)"]
    assert FIGURE_LINE.search(body)
    assert section_problems("v99", FIGURE_LINE.sub("", body)) == no_figure
    # a figure inline in a sentence is not an image line; one not drawn by FIGURES does not count
    inline = FIGURE_LINE.sub(lambda m: f"See {m.group(0)} here.", body)
    assert section_problems("v99", inline) == no_figure
    drawn = drawn_figures()
    names = {m.group("name") for m in FIGURE_LINE.finditer(body)}
    assert names <= drawn and section_problems("v99", body, drawn - names) == [
        *(f"v99: figures/{n} is not a figure of numba_gemm.explain.figures.FIGURES in docs/figures/"
          for m in FIGURE_LINE.finditer(body) for n in [m.group("name")]), *no_figure]
    stray = FIGURE_LINE.sub("![a drawing](figures/no_such_figure.png)", body)
    assert section_problems("v99", stray)[-1] == no_figure[0]


def test_definition_excerpt_cuts_whole_definitions():
    """`path#name()` excerpts: a C function to its closing brace with the comments above it, a
    Python def through ast with its decorators; a name defined twice or not at all is refused."""
    c = definition_excerpt("native/wgmma.cuh", "wgmma_k64")
    assert c.splitlines()[0].startswith("// ---- one 64-deep stage") and c.endswith("wgmma_commit();\n}")
    assert "template <typename T, int BN = 256>" in c
    py = definition_excerpt("numba_gemm/hgemm/v11py_wgmma.py", "smem_desc")
    assert py.startswith("@cuda.jit(device=True") and py.rstrip().endswith("(u64(1) << u64(62)))")
    for path, name in (("native/wgmma.cuh", "no_such_function"), ("native/wgmma.cuh", "wgmma_m64n256k16")):
        with pytest.raises(AssertionError):
            definition_excerpt(path, name)


def test_descriptor_model_and_cluster_exercise_answers():
    """The answers of the NumPy model's exercise and v11's second (LBO/SBO from the layout),
    recomputed with the package's code, and the words written in LADDER."""
    from numba_gemm.explain import model
    from numba_gemm.hgemm import _wgmma as wg
    from numba_gemm.ptx import decode_smem_desc

    assert model.owner(model.K8, 40, 17) == {"row0": 0, "col0": 0, "warp": 0, "lane": 8, "i": 4, "j": 5}
    o = model.owner(model.V11, 70, 9)
    assert (o["warp"], o["lane"], o["i"], o["j"]) == (1, 24, 0, 3)
    assert model.thread_tile(model.V11, 1, 24)[1][3] == 9                      # d[5]: j = 1, e = 1
    t = wg.WgmmaTile()
    a_bytes = t.bm * t.bk * 2
    panel = t.bk * wg.INNER_BYTES                                              # 64 k-rows × 128 B
    atom = 8 * wg.INNER_BYTES
    assert (a_bytes, panel, atom) == (16384, 8192, 1024)
    assert wg.boxes(t)[1] == (t.bk, panel // t.bk // 2)                        # a B panel is 64 × 64
    word = wg.smem_desc(1024 + a_bytes, panel, atom)
    assert word == 0x4000004002000440
    assert decode_smem_desc(word) == {"start": 17408, "lbo": 8192, "sbo": 1024, "base_offset": 0,
                                      "swizzle": "128B"}
    small = wg.WgmmaTile(bm=64)
    assert wg.smem_desc(1024 + small.bm * small.bk * 2, panel, atom) == 0x4000004002000240
    v11 = " ".join(SECTIONS["v11"].split())
    assert "`0x4000004002000440`" in v11 and "`0x4000004002000240`" in v11
    numpy_section = " ".join(LADDER.split("## The blocked algorithm in NumPy", 1)[1].split("\n## ", 1)[0].split())
    assert "lane 8, accumulator (i, j) = (4, 5)" in numpy_section
    assert "thread 24, accumulator row 0, column 3" in numpy_section


def test_new_rung_exercise_answers():
    """The answers of the k7, k8, split-K, v11r and v11py exercises, recomputed with the
    package's code and the committed runs."""
    from numba_gemm.registry import get

    k5, k7, k8 = (get(n).module.GEOMETRY for n in ("k5", "k7", "k8"))
    assert (k7.thread_m * k7.thread_n, k7.thread_m + k7.thread_n) == (64, 16)          # k7
    assert (k5.thread_m * k5.thread_n, k5.thread_m + k5.thread_n) == (32, 12)
    assert get("k7").module.TILING.warp_m + get("k7").module.TILING.warp_n == 96
    m8 = get("k8").module                                                              # k8
    assert (k8.tile_m * k8.tile_k + k8.tile_k * k8.tile_n) // m8.THREADS == 8 and k8.tile_k == 8
    k5sk = get("k5sk").module                                                          # k5sk
    assert k5sk.CTAS_PER_SM == 5 and k5sk.plan_splits(16, 8192, 8192) == 10
    k8sk = get("k8sk").module                                                          # k8sk
    assert k8sk.CTAS_PER_SM == 2 and k8sk.plan_splits(1024, 1024, 1024) == 4
    fp32 = {t["level"]: t["kernel_ms"] for r in json.loads(
        (ROOT / "docs" / "data" / "h200_shapes_fp32.json").read_text())["results"]
        if r["name"] == "square 1024" for t in r["levels"]}
    assert (round(fp32["k8sk"] * 1e3, 1), round(fp32["k8"] * 1e3, 1)) == (58.2, 102.1)
    sk = get("v11sk").module                                                           # v11sk
    got = {s: (t.bm, S) for s in ((512, 512, 512), (1024, 1024, 1024), (1, 4096, 4096))
           for t, S in [sk.plan_splits(*s)]}
    assert got == {(512, 512, 512): (128, 1), (1024, 1024, 1024): (128, 2), (1, 4096, 4096): (64, 8)}
    assert sk.MIN_SLICE_K_TILES == 8
    r = get("v11r").module                                                             # v11r
    base = 1 << 40
    wa, wb = r.load_width(base, 3001 * 2), r.load_width(base, 5000 * 2)
    n = r.tile_instructions(wa, wb)
    assert (wa, wb, n["loads_a"], n["loads_b"]) == (2, 8, 32, 16)
    assert r.tile_instructions(2, 2)["loads_b"] == 64
    for name, want in (("h200_v11py_fp16_store4.json", (8.9, 9.4)), ("h200_v11py_fp16.json", (0.5, 1.9))):
        rows = {(x["level"], x["M"]): x["ms"] * 1e3 for x in json.loads(              # v11py
            (ROOT / "docs" / "data" / name).read_text())["results"]}
        per_wave = {n: (rows["v11py", n] - rows["v11", n]) / ((n // 128) * (n // 256) / 132) for n in (4096, 8192)}
        assert (round(per_wave[4096], 1), round(per_wave[8192], 1)) == want


def test_ladder_tables_are_what_their_snippet_prints():
    """The generated ledger tables (RESULTS.md, linked from LADDER's "Tables"): their snippet (which
    reads the manifest's runs) is run here and must print exactly what the page shows, so a table
    cannot keep a number from another run."""
    import contextlib
    import io

    results = (ROOT / "docs" / "RESULTS.md").read_text()
    assert "(RESULTS.md#ledger-tables-at-4096-the-manifests-runs)" in LADDER[LADDER.index("\n## Tables"):]
    tables = results[results.index("\n## Ledger tables at 4096 (the manifest's runs)"):]
    snippet = tables[tables.index("```python\n") + 10:]
    snippet = snippet[:snippet.index("```")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(snippet, {})
    shown = tables[tables.index("### H200\n\n") + 10:]
    shown = shown[:shown.index("\n## ")]
    assert shown.rstrip("\n") == out.getvalue().rstrip("\n")


# ------------------------------------------------------------------- the pages render

PAGES = {name: ROOT / name for name in ("README.md", "docs/LADDER.md", "docs/DETAILS.md", "docs/CONCEPTS.md",
                                        "docs/RESULTS.md")}
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
# CommonMark's HTML blocks (spec 0.31, 4.6): start condition -> end condition (None: a blank line)
_BLOCK_TAGS = ("address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details|"
               "dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head|"
               "header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p|"
               "param|search|section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul")
_HTML_BLOCKS = [
    (re.compile(r"^ {0,3}<(?:pre|script|style|textarea)(?:\s|>|$)", re.I),
     re.compile(r"</(?:pre|script|style|textarea)>", re.I)),
    (re.compile(r"^ {0,3}<!--"), re.compile(r"-->")),
    (re.compile(r"^ {0,3}<\?"), re.compile(r"\?>")),
    (re.compile(r"^ {0,3}<![A-Za-z]"), re.compile(r">")),
    (re.compile(r"^ {0,3}<!\[CDATA\["), re.compile(r"\]\]>")),
    (re.compile(rf"^ {{0,3}}</?(?:{_BLOCK_TAGS})(?:\s|/?>|$)", re.I), None),
]
# type 7: any other open or closing tag alone on its line; it cannot interrupt a paragraph
_HTML_TAG_LINE = re.compile(r"^ {0,3}(?:<[A-Za-z][\w-]*(?:\s+[A-Za-z_:][\w.:-]*(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|"
                            r"[^\s\"'=<>`]+))?)*\s*/?>|</[A-Za-z][\w-]*\s*>)\s*$")


def unrendered_headings(text: str) -> list[str]:
    """Every line that starts with '#' and a space but that CommonMark does not make a heading
    (it sits in an HTML block, such as the one a `</details>` line opens until the next blank
    line), and every heading inside an open <details> (hidden in a collapsed answer): 'line N: …'.
    Lines in fenced code are code, not headings."""
    bad, fence, html_end, paragraph, details = [], None, False, False, 0
    for n, line in enumerate(text.splitlines(), 1):
        blank = not line.strip()
        if fence:
            m = _FENCE.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line[m.end():].strip():
                fence = None
            continue
        if html_end is not False:            # inside an HTML block: nothing here is Markdown
            if html_end is None and blank:
                html_end, paragraph = False, False
                continue
            if re.match(r"#{1,6}(?:[ \t]|$)", line):
                bad.append(f"line {n}: {line!r} is inside an HTML block (no blank line before it)")
            details += len(re.findall(r"<details\b", line, re.I)) - len(re.findall(r"</details>", line, re.I))
            if html_end is not None and html_end.search(line):
                html_end = False
            continue
        if blank:
            paragraph = False
            continue
        m = _FENCE.match(line)
        if m and not (m.group(1)[0] == "`" and "`" in line[m.end():]):
            fence, paragraph = m.group(1), False
            continue
        if _ATX.match(line):
            if details > 0:
                bad.append(f"line {n}: {line!r} is inside an open <details>")
            paragraph = False
            continue
        start = next((end for begin, end in _HTML_BLOCKS if begin.match(line)), False)
        if start is False and not paragraph and _HTML_TAG_LINE.match(line):
            start = None
        if start is not False:
            details += len(re.findall(r"<details\b", line, re.I)) - len(re.findall(r"</details>", line, re.I))
            html_end = False if start is not None and start.search(line) else start
            paragraph = False
            continue
        paragraph = not line.startswith("    ") or paragraph
    return bad


def missing_images(page, text: str) -> list[str]:
    """Every local image a page shows (`![…](path)`) that is not a file beside it."""
    return [target for target in re.findall(r"!\[[^\]]*\]\(([^)\s]+)[^)]*\)", text)
            if "://" not in target and not (page.parent / target).is_file()]


@pytest.mark.parametrize("name", PAGES)
def test_every_heading_renders_and_every_image_exists(name):
    text = PAGES[name].read_text()
    assert unrendered_headings(text) == []
    assert missing_images(PAGES[name], text) == []


def test_render_check_can_fail():
    ok = "text\n## a\n<details><summary>Answer</summary>\n\nx\n\n</details>\n\n## b\n"
    assert unrendered_headings(ok) == []
    glued = ok.replace("</details>\n\n## b", "</details>\n## b")
    assert unrendered_headings(glued) == ["line 8: '## b' is inside an HTML block (no blank line before it)"]
    hidden = ok.replace("x\n\n</details>\n\n## b", "## b\n\n</details>\n")
    assert unrendered_headings(hidden) == ["line 5: '## b' is inside an open <details>"]
    assert unrendered_headings("<div>\n## c\n") and unrendered_headings("<!-- a\n## c\n-->\n")
    assert unrendered_headings("<!-- a -->\n## c\n") == []
    assert unrendered_headings("```\n</details>\n## c\n```\n") == []          # code, not a heading
    assert unrendered_headings("a paragraph\n<span>\n## c\n") == []           # type 7 cannot interrupt it
    assert missing_images(PAGES["docs/LADDER.md"], "![x](figures/no_such_figure.png)") == [
        "figures/no_such_figure.png"]


# ------------------------------------------------------------------- exercise answers, recomputed

def _section_figures():
    """level -> {phrase with {} for the number: the value it must round to}, read in that level's
    LADDER section and its deep dive only: answers and details recomputed from the package's code and docs/data."""
    import inspect
    from dataclasses import replace

    from numba_gemm import splitk
    from numba_gemm.registry import get

    g16 = replace(ledgers.geometry("k3"), block=(16, 16), tile_m=16, tile_n=16, tile_k=16)
    k3_16 = ledgers.cycle_ledger("k3", H200, 4096, geom=g16)
    req16, req32 = ledgers.request_ledger("k3", 4096, geom=g16), ledgers.request_ledger("k3", 4096)
    from numba_gemm import choose

    k5sk, k8sk, v11sk, v11sl, v11p = (get(lv).module for lv in ("k5sk", "k8sk", "v11sk", "v11sl", "v11p"))
    NARROW_N = (4096, 128, 4096)
    v11sl_plan = v11sl.plan_splits(*NARROW_N)

    def tiles_of(tile):
        return -(-NARROW_N[0] // tile.bm) * -(-NARROW_N[1] // tile.bn)
    s5 = k5sk.plan_splits(16, 8192, 8192)
    gv16 = get("k6gv16").module
    k9sk = get("k9sk").module
    k9_tiles = k9sk.grid(128, 4096)[0] * k9sk.grid(128, 4096)[1]     # 128×4096's 128×128 tiles
    k9st = get("k9st").module
    st4097, st_rows = k9st.stream_plan(4097, 4097, 4097), k9st.stream_plan(777, 5000, 3001)
    st_q, st_r = divmod((st4097.tiles - st4097.whole) * st4097.iters, st4097.ctas)
    es = get("k8es").module.interior_plan(777, 5000, 3000)[2]
    es_q, es_r = divmod(es.tiles * es.iters, es.ctas)
    es_share = es.tiles * es.iters / es.ctas / es.iters
    fp32_4096 = {t["level"]: t["kernel_ms"] for r in json.loads(
        (ROOT / "docs" / "data" / "h200_shapes_fp32_in_place.json").read_text())["results"]
        if r["name"] == "square 4096" for t in r["levels"]}
    partials16 = gv16.plan_splits(16, 8192, 8192) * 16 * 8192 * 4
    decode16 = next(r for r in json.loads((ROOT / "docs" / "data" / "h200_shapes_fp32_in_place.json")
                                          .read_text())["results"] if r["name"] == "decode M=16")
    k5sk_16 = next(t["kernel_ms"] for t in decode16["levels"] if t["level"] == "k5sk")
    partials5, b5 = s5 * 16 * 8192 * 4, 8192 * 8192 * 4
    sched = figures.pipeline_schedule
    default_tiles = inspect.signature(sched).parameters["tiles"].default

    def busy(stages, tiles=default_tiles):
        return 100 * tiles / sched(stages, tiles=tiles, load=2.5)[-1]["mma_end"]

    bf16 = {t["level"]: t["kernel_ms"] * 1e3 for r in json.loads(
        (ROOT / "docs" / "data" / "h200_shapes_bf16.json").read_text())["results"]
        if r["name"] == "square 512" for t in r["levels"]}

    def x_cublas(level, M, N, K, dtype):
        t, shape, _ = SUITES[level, M, N, K, dtype]
        return shape["cublas_ms"] / t["kernel_ms"]

    k8p = get("k8p").module
    k8e = get("k8e").module
    waves = 132 * 2                                       # k8's CTAs resident on the H200's SMs
    interior = {(r["M"], r["N"], r["K"]): r["ms"] for r in json.loads(
        (ROOT / "docs" / "data" / "h200_k8_interior.json").read_text()) if r["level"] == "k8"}
    DECODE16 = (16, 8192, 8192)                           # v11t against v11sl's 64-row tile
    v11t = get("v11t").module
    sl16, sl16_s = v11sl.plan_splits(*DECODE16)
    t16, t16_s = v11t.plan_splits(*DECODE16)
    sl16_ctas, t16_ctas = -(-DECODE16[1] // sl16.bn) * sl16_s, -(-DECODE16[1] // t16.bn) * t16_s
    sl16_b, t16_b = sl16.bn * 128 / 1024, t16.nt * 128 / 1024      # KiB of B a stage
    gv = get("v11gv").module                              # v11gv at decode 1×4096×4096, fp16
    DECODE = (1, 4096, 4096)
    gv_tiles, gv_steps, gv_s = -(-DECODE[1] // gv.CONFIG.bn), -(-DECODE[2] // gv.CONFIG.bk), gv.plan_splits(*DECODE)
    gv_slots = 132 * gv.CTAS_PER_SM[gv.rows_for(1)]
    gv_loads = gv.CONFIG.bk // (gv.CONFIG.threads // 32)  # k rows (16-byte loads of B) per warp and step
    gv_load_bytes = gv.CONFIG.bn // 32 * 2                # a lane's columns, 2 bytes each
    gv_lane = gv_loads * gv_load_bytes                   # one step; at M = 1 two are in flight (the prefetch)
    gv_b = DECODE[1] * DECODE[2] * 2

    return {
        "k3": {
            "Intensity halves ({} FLOP/byte": ledgers.bytes_ledger("k3", "h200", 4096, geom=g16).intensity,
            "(`ldg_x2`, {} requests per FMA": req16.requests_per_fma,
            "requests per FMA, {}× k3's)": req16.requests_per_fma / req32.requests_per_fma,
            "between `ldg` and `ldg_x32` ({} cycles;": H200.price("ldg_x2")[0],
            "The 16×16 tiles then cost {} cycles per FMA": k3_16.cycles_per_fma,
            "against {} for k3's 32×32": _CY["k3"].cycles_per_fma,
        },
        "k5sk": {
            "(there {} MB each way, beside": partials5 / 1e6,
            "each way, beside B's {} MB); FFMA": b5 / 1e6,
            "bytes ({} MB) each way": partials5 / 1e6,
            "each way, beside B's {} MB. Written": b5 / 1e6,
            "that is {} % more bytes than B's": 100 * 2 * partials5 / b5,
            "S = 660 // 64 = {} (K": s5,
        },
        "k6gv16": {
            "in shared memory, at {} of": decode16["roofline_ms"] / k5sk_16,
            "8192 / 128 = {} tiles of 16 rows": gv16.grid(16, 8192)[0],
            "264 // 64 = {} slices of": gv16.plan_splits(16, 8192, 8192),
            "slices of {} k, 256": gv16.split_plan(16, 8192, 8192)[1],
            "2048 k, {} CTAs": gv16.grid(16, 8192)[0] * gv16.plan_splits(16, 8192, 8192),
            "16 × 8192 × 4 = {} MB each way": partials16 / 1e6,
            "beside B's {} MB: 1.6": 8192 * 8192 * 4 / 1e6,
            "MB: {} % more bytes for": 100 * 2 * partials16 / (8192 * 8192 * 4),
        },
        "k9sk": {
            "faster than k8 ({} % at 4096³)": 100 * (fp32_4096["k8"] / fp32_4096["k9"] - 1),
            "(128×4096×4096, S = 8: {} MB)": k9sk.plan_splits(128, 4096, 4096) * 128 * 4096 * 4 / 1e6,
            "8 × 128 × 4096 × 4 bytes = {} MB": k9sk.plan_splits(128, 4096, 4096) * 128 * 4096 * 4 / 1e6,
            "8 slices × 8 floats = {} partials": k9sk.plan_splits(128, 4096, 4096) * k9sk.THREAD_N,
            "all {} CTAs add one part each": k9_tiles * k9sk.plan_splits(128, 4096, 4096),
            "all 8 ({} partials a thread": k9sk.plan_splits(128, 4096, 4096) * k9sk.THREAD_M * k9sk.THREAD_N,
            "and only {} CTAs add": k9_tiles,
        },
        "k9st": {
            "at 4097³, {} tiles are 4.125 waves": st4097.tiles,
            "tiles are {} waves of work done in 5": st4097.tiles / 264,
            "280 tiles are {} waves of work": st_rows.tiles / 264,
            "(4097³: {} tiles over 264 CTAs": st4097.tiles - st4097.whole,
            "264 CTAs, {} tiles each": (st4097.tiles - st4097.whole) / st4097.ctas,
            "so the first 3 waves stay whole: {} tiles": st4097.whole,
            "The other 297 tiles hold 297 × 513 = {} K tiles": (st4097.tiles - st4097.whole) * st4097.iters,
            "that is 577 or 578 each (q = {}, r = 33)": st_q,
            "(q = 577, r = {})": st_r,
            "ends at 3 + 1.125 = {} units": st4097.whole / 264 + (st4097.tiles - st4097.whole) / st4097.ctas,
            "against k9's 5 waves: {} % less": 100 * (1 - (st4097.whole / 264 + (st4097.tiles - st4097.whole)
                                                          / st4097.ctas) / 5),
        },
        "k8es": {
            "they are 6 × 39 = {}, 0.89 of a wave": es.tiles,
            "= 234, {} of a wave": es.tiles / 264,
            "so {} slots idle while": 264 - es.tiles,
            "takes 332 or 333 of the interior's {} K tiles": es.tiles * es.iters,
            "of the interior's 87750 K tiles, {} of a tile": es_share,
            "234 tiles × 375 K tiles (K4 = 3000, 8 deep) = {};": es.tiles * es.iters,
            "87750 = {} × 264 + 102": es_q,
            "= 332 × 264 + {}, so": es_r,
            "and the rest 332: {} of a tile each": es_share,
            "524 µs × 234 / 264 = {} µs": 524 * es.tiles / 264,
        },
        "k8sk": {
            "(512×4096, S = 2: {} MB each way)": k8sk.plan_splits(512, 4096, 4096) * 512 * 4096 * 4 / 1e6,
        },
        "v7": {
            "Over the picture's {} tiles (the default)": default_tiles,
            "two stages keep the tensor cores busy {} % of the time": busy(2),
            "of the time, three {} %, four": busy(3),
            "%, four {} % and five": busy(4),
            "with `tiles=40`, {}, 82 and 94 %": busy(2, 40),
            "with `tiles=40`, 56, {} and 94 %": busy(3, 40),
            "with `tiles=40`, 56, 82 and {} %": busy(4, 40),
            "v10 refills the stage read {} iterations ago": figures.refill_lag("v10"),
            "so {} tiles are in flight ahead": figures.hgemm_stages("v10") - figures.refill_lag("v10"),
            "multiplied and its {} stages keep": figures.hgemm_stages("v10"),
            "the tensor cores busy {} %, what": 100 * default_tiles / figures.level_pipeline("v10")[-1]["mma_end"],
            "%, what {} stages give at lag 1": next(
                n for n in range(2, 9) if busy(n) == 100 * default_tiles / figures.level_pipeline("v10")[-1]["mma_end"]),
        },
        "v11p": {
            "Pitch ⌈4097 / 8⌉ · 8 = {} elements": v11p.pitch(4097),
            "writes 4097 × 4104 × 2: {} MB for the two": v11p.copies_bytes(4097, 4097, 4097) / 1e6,
            "about {} µs at 4.133 TB/s": v11p.copies_bytes(4097, 4097, 4097) / choose.DEFAULT_BANDWIDTH * 1e6,
        },
        "v11sl": {
            "v11sk: S = {} over": v11sk.plan_splits(*NARROW_N)[1],
            "over {} tiles of 128×256": tiles_of(v11sk.plan_splits(*NARROW_N)[0]),
            "v11sl: S = {} over": v11sl_plan[1],
            "over {} tiles of 128×64": tiles_of(v11sl_plan[0]),
            "v11sk writes {} MiB of partials": 4 * v11sk.plan_splits(*NARROW_N)[1] * 4096 * 128 / 2**20,
            "parks {} KiB per CTA": v11sl_plan[0].bm * (v11sl_plan[0].bn + 8) * 4 / 1024,
        },
        "v11t": {
            "v11sl: {}×64 tiles": sl16.bm,
            "v11sl: 64×64 tiles, {} stages": sl16.stages,
            "stages of {} KiB, S = 1": sl16.stage_bytes / 1024,
            "KiB, S = {}: 128 CTAs. Of a stage": sl16_s,
            "S = 1: {} CTAs. Of a stage": sl16_ctas,
            "A's box is {} KiB for 2 KiB": sl16.bm * 128 / 1024,
            "KiB for {} KiB of A's rows": DECODE16[0] * 128 / 1024,
            "and B is {} KiB; 6 stages": sl16_b,
            "KiB; {} stages in flight hold 48": sl16.stages - sl16.tma_lag,
            "hold {} KiB of B a CTA, 6 MiB": (sl16.stages - sl16.tma_lag) * sl16_b,
            "a CTA, {} MiB over the grid. v11t": (sl16.stages - sl16.tma_lag) * sl16_b * sl16_ctas / 1024,
            "v11t: 16×{} tiles": t16.nt,
            "v11t: 16×128 tiles, {} stages": t16.stages,
            "stages of {} KiB, S = 2": t16.stage_bytes / 1024,
            "KiB, S = {}: 128 CTAs. A is": t16_s,
            "S = 2: {} CTAs. A is": t16_ctas,
            "A is {} KiB of a stage": t16.mt * 128 / 1024,
            "B {} KiB; 10 stages": t16_b,
            "KiB; {} stages in flight hold 160": t16.stages - t16.tma_lag,
            "hold {} KiB of B a CTA, 20 MiB": (t16.stages - t16.tma_lag) * t16_b,
            "a CTA, {} MiB over the grid. </details>": (t16.stages - t16.tma_lag) * t16_b * t16_ctas / 1024,
        },
        "v11gv": {
            "(1×4096×4096 fp16: {} MiB,": gv_b / 2**20,
            "MiB, {} µs at 4.13 TB/s)": gv_b / choose.DEFAULT_BANDWIDTH * 1e6,
            "4096 / {} = 16 column tiles": gv.CONFIG.bn,
            "4096 / 256 = {} column tiles": gv_tiles,
            "One wave holds 132 × {} // 16": gv.CTAS_PER_SM[gv.rows_for(1)],
            "// 16 = {} slices per tile": gv_slots // gv_tiles,
            "`plan_splits` takes S = {}, the cluster size": gv_s,
            "(K's {} steps of 64 would allow": gv_steps,
            "would allow {} slices of 4)": gv_steps // gv.MIN_SLICE_STEPS,
            "slices of {}): 16 × 8": gv.MIN_SLICE_STEPS,
            "16 × 8 = {} CTAs, each slice": gv_tiles * gv_s,
            "each slice {} steps": splitk.slice_k_tiles(gv_steps, gv_s),
            "steps ({} k), in 128": splitk.slice_k_tiles(gv_steps, gv_s) * gv.CONFIG.bk,
            "in 128 of the {} slots": gv_slots,
            "A step is {} loads × 16 bytes": gv_loads,
            "loads × {} bytes = 128": gv_load_bytes,
            "= {} bytes of B per lane": gv_lane,
            "two steps are in flight, {} bytes a lane": 2 * gv_lane,
            "a CTA {} KiB, the grid": 2 * gv_lane * gv.CONFIG.threads / 1024,
            "the grid {} MiB.": 2 * gv_lane * gv.CONFIG.threads * gv_tiles * gv_s / 2**20,
            "k row: {} FFMA at R = 1": gv.CONFIG.bn // 32 * gv.rows_for(1),
            "FFMA at R = 1, {} at R = 2.": gv.CONFIG.bn // 32 * gv.rows_for(2),
            "`smem_bytes(1)` = {} KiB": gv.smem_bytes(1) / 1024,
            "`smem_bytes(2)` = {} KiB": gv.smem_bytes(2) / 1024,
        },
        "k8p": {
            "k8 took {} ms at 4096³": _r("k8", 4096)["ms"],
            "ms at 4096³ and {} ms at 4097³": _r("k8", 4097)["ms"],
            "pitch(4097) = {}. A:": k8p.pitch(4097),
            "C′ and written: {} MB,": k8p.copies_bytes(4097, 4097, 4097, 0.0) / 1e6,
            "MB, {} µs at 4.133 TB/s": k8p.copies_bytes(4097, 4097, 4097, 0.0) / choose.DEFAULT_BANDWIDTH * 1e6,
            "The gap is {} ms": _r("k8", 4097)["ms"] - _r("k8", 4096)["ms"],
            "the copies cost about {} % of it": 100 * k8p.copies_bytes(4097, 4097, 4097, 0.0) / choose.DEFAULT_BANDWIDTH
            / ((_r("k8", 4097)["ms"] - _r("k8", 4096)["ms"]) * 1e-3),
        },
        "k8e": {
            "k8p: 33 × 33 = {} tiles,": k8p.grid(4097, 4097)[0] * k8p.grid(4097, 4097)[1],
            "tiles, {} waves; k8e:": k8p.grid(4097, 4097)[0] * k8p.grid(4097, 4097)[1] / waves,
            "k8e: 32 × 32 = {} tiles,": k8e.grid(4097, 4097)[0] * k8e.grid(4097, 4097)[1],
            "tiles, {} waves, so the fifth": k8e.grid(4097, 4097)[0] * k8e.grid(4097, 4097)[1] / waves,
            "The strips read {} MB of B′": k8p.pitch(4097) ** 2 * 4 / 1e6,
            "MB of B′ and {} MB of A′": k8e.plan(4097, 4097, 4097)[0] * k8p.pitch(4097) * 4 / 1e6,
            "A′: {} µs at 4.133 TB/s": (k8p.pitch(4097) + k8e.plan(4097, 4097, 4097)[0]) * k8p.pitch(4097) * 4
            / choose.DEFAULT_BANDWIDTH * 1e6,
            "against the {} ms by which": interior[4097, 4097, 4097] - interior[4096, 4096, 4097],
        },
        "v11sk": {
            "S = min(SMs // tiles, k_tiles // {}, 16,": v11sk.MIN_SLICE_K_TILES,
            "k_tiles // 8, {}, 256 MiB of workspace)": splitk.MAX_SPLITS,
            "k_tiles // 8, 16, {} MiB of workspace)": splitk.WORKSPACE_LIMIT / 2**20,
            "with {} = `MIN_SLICE_K_TILES`": v11sk.MIN_SLICE_K_TILES,
            "K has fewer than 2 × {} tiles": v11sk.MIN_SLICE_K_TILES,
            "512³: {} K tiles, fewer than 2 × 8": 512 // v11sk.CONFIG.bk,
            "fills and drains its {}-stage pipeline": v11sk.plan_splits(512, 512, 512)[0].stages,
            "the reduction launch follows: {} µs against": bf16["v11sk"],
            "µs against v11's {}.": bf16["v11"],
        },
        "v11r": {
            "This is why 4097³ runs at {}× cuBLAS": x_cublas("v11r", 4097, 4097, 4097, "bfloat16"),
            "and 777×5000×3001 at {}×.": x_cublas("v11r", 777, 5000, 3001, "bfloat16"),
        },
    }


SECTION_FIGURES = _section_figures()


def section_figure_problems(level: str, body: str, figs: dict) -> list[str]:
    """Every phrase of `figs` whose number in `body` (blockquote marks dropped) disagrees."""
    body, bad = re.sub(r"(?m)^> ?", "", body), []
    for phrase, value in figs.items():
        written = find_figure(body, phrase)
        if not agrees(written, value):
            bad.append(f"{level}: {phrase.format(written)!r} but the code or data say {value:.4f}")
    return bad


@pytest.mark.parametrize("level", SECTION_FIGURES)
def test_section_answers_agree_with_the_code_and_data(level):
    assert section_figure_problems(level, PROSE[level], SECTION_FIGURES[level]) == []


def test_section_answer_check_can_fail():
    body = PROSE["v11r"].replace("at 1.60×.", "at 1.61×.")
    assert section_figure_problems("v11r", body, SECTION_FIGURES["v11r"]) == [
        "v11r: 'and 777×5000×3001 at 1.61×.' but the code or data say 1.6041"]
    with pytest.raises(AssertionError):                  # a phrase the prose lost is an error too
        section_figure_problems("k3", SECTIONS["v11r"], SECTION_FIGURES["k3"])


def v11sk_plan_problems(text: str) -> list[str]:
    """v11sk's answer writes each shape's plan as '(row tile, S)' after 'shape:': each must be
    what plan_splits gives."""
    from numba_gemm.registry import get

    sk, bad = get("v11sk").module, []
    text = " ".join(text.split())
    answer = text[text.index("<summary>Answer</summary>"):]
    labels = [("512³", (512, 512, 512)), ("1024³", (1024, 1024, 1024)), ("1×4096×4096", (1, 4096, 4096))]
    for i, (label, shape) in enumerate(labels):
        seg = answer[answer.index(label + ":"):]
        if i + 1 < len(labels):
            seg = seg[:seg.index(labels[i + 1][0] + ":")]
        tile, S = sk.plan_splits(*shape)
        if f"({tile.bm}, {S})" not in seg:
            bad.append(f"{label}: plan_splits gives ({tile.bm}, {S})")
    return bad


def test_answer_words_the_code_backs():
    """The words beside those numbers: how ldg_x2 is priced, that a fifth stage buys nothing,
    and v11sk's plans as its answer writes them."""
    assert H200.price("ldg_x2")[1] == "ldg..ldg_x32" and "ldg_x2" not in H200.costs
    assert figures.pipeline_schedule(5, load=2.5)[-1]["mma_end"] == figures.pipeline_schedule(4, load=2.5)[-1]["mma_end"]
    assert v11sk_plan_problems(SECTIONS["v11sk"]) == []
    assert v11sk_plan_problems(SECTIONS["v11sk"].replace("(128, 2)", "(128, 4)")) == [
        "1024³: plan_splits gives (128, 2)"]


WAVE = re.compile(r"(\d+)×(\d+)×(\d+): (\d+) → (\d+)")


def split_wave_problems(level: str, text: str) -> list[str]:
    """A split-K headline's 'CTAs per wave ×S (M×N×K: tiles → tiles·S; …)': each pair is the
    level's own tiles at that shape and tiles × plan_splits' S."""
    from numba_gemm.registry import get
    from numba_gemm.util import ceil_div

    mod = get(level).module
    clause = text[text.index("CTAs per wave ×S ("):]
    clause = clause[:clause.index(")")]
    bad = []
    for m in WAVE.finditer(clause):
        M, N, K, tiles, ctas = map(int, m.groups())
        if level == "v11sk":
            tile, S = mod.plan_splits(M, N, K)
            want = ceil_div(M, tile.bm) * ceil_div(N, tile.bn)
        else:
            gx, gy = mod.grid(M, N)
            want, S = gx * gy, mod.plan_splits(M, N, K)
        if (tiles, ctas) != (want, want * S):
            bad.append(f"{level} {M}×{N}×{K}: {tiles} → {ctas} but the plan gives {want} → {want * S}")
    return bad if WAVE.search(clause) else [f"{level}: no 'M×N×K: tiles → CTAs' in its wave clause"]


@pytest.mark.parametrize("level", ["k5sk", "k8sk", "v11sk"])
def test_split_headline_waves_are_the_plans(level):
    assert split_wave_problems(level, " ".join(headline(SECTIONS[level]).split())) == []


def test_split_wave_check_can_fail():
    text = " ".join(headline(SECTIONS["k8sk"]).split())
    assert split_wave_problems("k8sk", text.replace("32 → 256", "32 → 264")) == [
        "k8sk 128×4096×4096: 32 → 264 but the plan gives 32 → 256"]
    assert split_wave_problems("k8sk", "CTAs per wave ×S (64 → 256 at those shapes)") == [
        "k8sk: no 'M×N×K: tiles → CTAs' in its wave clause"]


def test_k2_request_answers():
    """k2's exercises: the request ledger's requests and sectors per FMA, plain and 16 × 64."""
    from dataclasses import replace

    plain = ledgers.request_ledger("k2")
    wide = ledgers.request_ledger("k2", geom=replace(ledgers.geometry("k2"), block=(16, 64)))
    figs = {"gives k2 {} sectors per FMA but 2 requests": plain.sectors_per_fma,
            "gives k2 5 sectors per FMA but {} requests": plain.requests_per_fma,
            "{} requests and 4 sectors per FMA: the ledger agrees": wide.requests_per_fma,
            "3 requests and {} sectors per FMA: the ledger agrees": wide.sectors_per_fma}
    assert section_figure_problems("k2", SECTIONS["k2"], figs) == []
    assert "`r.requests_per_fma` and `r.sectors_per_fma`" in " ".join(SECTIONS["k2"].split())


# ------------------------------------------------------------------- "try it": --sass prints it

SASS_CMD = re.compile(r"`python bench\.py (?:--level (?P<a>[\w,]+) --sass|--sass --level (?P<b>[\w,]+))`")
SASS_LINE = re.compile(r"(?m)^python bench\.py (?:--level (?P<a>[\w,]+) --sass|--sass --level (?P<b>[\w,]+))"
                       r"\s+# (?P<promise>.*)$")
OPCODE = re.compile(r"(?:\b(?P<n>\d+) )?\b(?P<op>[A-Z][A-Z0-9_]{2,}(?:\.[A-Z0-9_]+)*)\b")
CENSUS_ROOTS = {"FFMA", "HMMA", "HGMMA", "WARPGROUP", "USETMAXREG", "LDG", "LDS", "LDSM", "STS", "STG", "LDGSTS",
                "UTMALDG", "UTMASTG", "SYNCS", "BAR"}


def sass_promises(text: str) -> list[tuple[str, str]]:
    """(levels, promise) of every `bench.py --sass` command: the comment after it in a code
    block, or the parenthesis right after it in prose, up to the next command it names."""
    out = [(m.group("a") or m.group("b"), m.group("promise")) for m in SASS_LINE.finditer(text)]
    flat = " ".join(text.split())
    for m in SASS_CMD.finditer(flat):
        rest = flat[m.end():]
        if not rest.startswith(" ("):
            out.append((m.group("a") or m.group("b"), ""))
            continue
        depth, end = 0, len(rest)
        for i, ch in enumerate(rest):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if depth == 0 and ch == ")":
                end = i
                break
        out.append((m.group("a") or m.group("b"), re.split(r"`(?:python|pytest|ncu)\b", rest[2:end])[0]))
    return out


def parse_table(table: str) -> tuple[list[str], list[dict]]:
    """(columns, rows) of a census table as bench.py --sass prints it (columns split on 2+ spaces)."""
    lines = table.splitlines()
    cols = re.split(r"\s{2,}", lines[0].strip())
    return cols, [dict(zip(cols, re.split(r"\s{2,}", line.strip()))) for line in lines[1:]]


def sass_promise_problems(levels: str, promise: str, table: str) -> list[str]:
    """What a promise names that the census table of `levels` does not print: an opcode class
    with no column, or 'N OPCODE' / 'N registers' that no row of it shows."""
    cols, rows = parse_table(table)
    bad = []
    for m in OPCODE.finditer(promise):
        op = m.group("op")
        if op.split(".")[0] not in CENSUS_ROOTS:
            continue
        if op not in cols:
            bad.append(f"--level {levels} --sass: no column {op}")
        elif m.group("n") and not any(r.get(op) == m.group("n") for r in rows):
            bad.append(f"--level {levels} --sass: no row with {m.group('n')} {op}")
    for n in re.findall(r"\b(\d+) registers", promise):
        if not any(r.get("regs") == n for r in rows):
            bad.append(f"--level {levels} --sass: no row with {n} registers")
    return bad


@pytest.fixture(scope="module")
def ladder_sass_tables():
    """{levels: the table `bench.py --level levels --sass` prints}, for every such command in
    LADDER, taken in a process without the CUDA simulator (as bench.py does; no GPU needed)."""
    import os
    import subprocess
    import sys

    skip_unless_the_quoted_compilers()
    groups = sorted({lv for lv, _ in sass_promises(LADDER + "\n\n" + DETAILS)})
    code = ("import json, sys\nfrom numba_gemm.explain import sass\nfrom numba_gemm.registry import get\n"
            f"print(json.dumps({{g: sass.census_table([get(x) for x in g.split(',')]) for g in {groups!r}}}))")
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0 or "skipped:" in out.stderr:
        pytest.skip(f"no SASS census here: {out.stderr.strip()[-300:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_ladder_sass_commands_print_what_they_promise(ladder_sass_tables):
    promises = sass_promises(LADDER + "\n\n" + DETAILS)
    assert len(promises) >= 15 and any("USETMAXREG.DEALLOC" in p for _, p in promises)
    bad = [b for levels, promise in promises for b in sass_promise_problems(levels, promise,
                                                                            ladder_sass_tables[levels])]
    assert bad == []


def test_sass_promise_check_can_fail():
    table = ("kernel  FFMA  LDS  LDS.128  regs\n"
             "k3        33   32        8    30")
    assert sass_promise_problems("k3", "32 LDS + 8 LDS.128; 30 registers; WMMA is not an opcode", table) == []
    assert sass_promise_problems("k3", "16 LDS, HGMMA, UTMALDG.2D.MULTICAST, 31 registers", table) == [
        "--level k3 --sass: no row with 16 LDS", "--level k3 --sass: no column HGMMA",
        "--level k3 --sass: no column UTMALDG.2D.MULTICAST", "--level k3 --sass: no row with 31 registers"]
    old = "**Try it.** `python bench.py --level v12 --sass` (USETMAXREG.DEALLOC / TRY_ALLOC).\n"
    assert sass_promises(old) == [("v12", "USETMAXREG.DEALLOC / TRY_ALLOC")]
    assert sass_promises("```\npython bench.py --level k3 --sass    # 32 LDS\n```\n") == [("k3", "32 LDS")]
    assert sass_promises("`python bench.py --level k7 --sass` (the kernel; `python tools/twin_census.py k7`: "
                         "1024 FFMA)") == [("k7", "the kernel; ")]


def k2_loop_problems(section: str, printed: str) -> list[str]:
    """k2's 'N SASS instructions per FFMA in its K loop (L for F FFMA) against the plain loop's
    N' (L for F)' against what its snippet printed: 'name loop FFMA per-FFMA' per kernel."""
    got = {name: (loop, ffma, per) for name, loop, ffma, per in
           (line.split() for line in printed.strip().splitlines())}
    text = " ".join(section.split())
    m = re.search(r"issues ([\d.]+) SASS instructions per FFMA in its K loop \((\d+) for (\d+) FFMA\) against "
                  r"the plain loop's ([\d.]+) \((\d+) for (\d+)\)", text)
    if not m:
        return ["k2: the K-loop sentence is gone"]
    want = {"k2_tuned": (m.group(2), m.group(3), m.group(1)), "k2": (m.group(5), m.group(6), m.group(4))}
    return [f"{k}: written {w}, printed {got.get(k)}" for k, w in want.items() if got.get(k) != w]


def test_k2_loop_snippet_prints_what_the_text_says():
    import os
    import subprocess
    import sys

    snippet = re.search(r"```python\n(from numba import cuda\nfrom numba_gemm.explain import sass\n"
                        r"from numba_gemm.measure import twins\n.*?)```", PROSE["k2"], re.S).group(1)
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, env=env, cwd=ROOT)
    if out.returncode != 0 and ("nvdisasm" in out.stderr or "CensusUnavailable" in out.stderr):
        pytest.skip("no nvdisasm here")
    assert out.returncode == 0, out.stderr[-2000:]
    assert k2_loop_problems(PROSE["k2"], out.stdout) == []
    assert k2_loop_problems(PROSE["k2"], out.stdout.replace(" 71 ", " 70 ")) == [
        "k2_tuned: written ('71', '16', '4.44'), printed ('70', '16', '4.44')"]


# ------------------------------------------------------------------- terms defined once, linked

DEFINED_TERMS = {   # term as LADDER writes it -> the CONCEPTS section that defines it in bold
    "GPC": "cta-cluster-and-launch-order",
    "uniform-datapath": "sass-what-the-census-prints",
    "C7508": "glossary-the-hopper-terms",
}


def _concepts_sections(text: str) -> dict[str, str]:
    """GitHub anchor of each '## ' heading of CONCEPTS -> its text."""
    out = {}
    for m in re.finditer(r"(?m)^## (.+)$", text):
        anchor = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        end = text.find("\n## ", m.end())
        out[anchor] = text[m.end():end if end >= 0 else len(text)]
    return out


def term_problems(term: str, anchor: str, concepts: str, ladder: str) -> list[str]:
    """A term LADDER uses must be defined in bold in its CONCEPTS section, and every use of it in
    LADDER must be a link to that section or sit in a sentence that has one."""
    bad = []
    section = " ".join(_concepts_sections(concepts).get(anchor, "").split())
    if f"**{term.replace('-', ' ')}" not in section and f"**{term}**" not in section:
        bad.append(f"{term}: not defined in bold in CONCEPTS#{anchor}")
    for para in re.split(r"\n\s*\n", ladder):
        flat = " ".join(para.split())
        if re.search(rf"\b{re.escape(term)}\b", flat) and f"(CONCEPTS.md#{anchor})" not in flat:
            bad.append(f"{term}: used in LADDER without a link to CONCEPTS#{anchor}: {flat[:60]!r}")
    return bad


@pytest.mark.parametrize("term", DEFINED_TERMS)
def test_terms_are_defined_and_linked(term):
    assert term_problems(term, DEFINED_TERMS[term], CONCEPTS, LADDER + "\n\n" + DETAILS) == []


def test_term_check_can_fail():
    assert term_problems("GPC", "cta-cluster-and-launch-order", CONCEPTS, "All SMs of one GPC.") == [
        "GPC: used in LADDER without a link to CONCEPTS#cta-cluster-and-launch-order: 'All SMs of one GPC.'"]
    assert term_problems("C7508", "glossary-the-hopper-terms", CONCEPTS.replace("**C7508**", "C7508"), "") == [
        "C7508: not defined in bold in CONCEPTS#glossary-the-hopper-terms"]


def k8_wave_problems(section: str) -> list[str]:
    """k8's Waves paragraph: the CTAs an SM holds (launch bounds), the resident CTAs and waves at
    4096³, auto's "N CTAs in W waves of S" as --explain prints it, its fitted blocks_per_sm, and
    the slots both price at 4096³ and at 1024³, each from the package."""
    from numba_gemm import choose
    from numba_gemm.explain.ledgers import Waves

    text = " ".join(section[section.index("**Waves.**"):].split("\n\n")[0].split())
    bad = []

    def want(phrase):
        if phrase not in text:
            bad.append(f"k8 Waves: expected [{phrase}]")

    w = ledgers.waves("k8", 4096)
    r, a = Waves.rounds(w.ctas, w.resident), Waves.rounds(w.ctas, w.auto_slots)
    why = next(q.why for q in choose.rank("float32", 4096, 4096, 4096, native=True) if q.level == "k8")
    auto = re.search(r"\d+ CTAs in \d+ waves? of \d+", why).group(0)
    printed = ledgers.explain("k8", "h200", n=4096)
    if f"= {w.resident} resident" not in printed or f"{a} waves of {w.auto_slots}" not in printed:
        bad.append("k8 --explain: its waves line does not give the resident CTAs and auto's waves")
    want(f"An SM holds {w.ctas_per_sm} of k8's CTAs")
    want(f"holds {w.sms} × {w.ctas_per_sm} = {w.resident} at once")
    want(f"4096³'s {w.ctas} tiles run in {w.ctas / w.resident:.2f} waves of {w.resident}")
    want(f'says "{auto}"')
    want(f"{w.sms} SMs × a `blocks_per_sm` fitted to measured times ({w.auto_blocks_per_sm} for k8,")
    want(f"{'the same' if r * w.resident == a * w.auto_slots else 'not the same'} "
         f"{r * w.resident} slots ({r} × {w.resident} = {a} × {w.auto_slots})")
    s = ledgers.waves("k8", 1024)
    r1, a1 = Waves.rounds(s.ctas, s.resident), Waves.rounds(s.ctas, s.auto_slots)
    want(f"at 1024³ ({s.ctas} tiles) it is {'' if r1 * s.resident == a1 * s.auto_slots else 'not '}"
         f"({r1 * s.resident} against {a1 * s.auto_slots})")
    return bad


def test_k8_waves_agree_with_explain():
    assert k8_wave_problems(PROSE["k8"]) == []


def test_k8_wave_check_can_fail():
    body = PROSE["k8"]
    assert k8_wave_problems(body.replace("3.88 waves", "3.87 waves")) == [
        "k8 Waves: expected [4096³'s 1024 tiles run in 3.88 waves of 264]"]
    assert k8_wave_problems(body.replace("8 waves of 132", "4 waves of 264")) == [
        'k8 Waves: expected [says "1024 CTAs in 8 waves of 132"]']
    assert len(k8_wave_problems(body.replace("(264 against 132)", "(264 against 264)"))) == 1


def _hgemm_run(name: str) -> dict:
    rows = json.loads((ROOT / "docs" / "data" / name).read_text())
    rows = rows["results"] if isinstance(rows, dict) else rows
    return {(r["level"], r["M"]): r for r in rows if r.get("mode") == "gpu"}


def v7_bf16_figures(f16: dict, bf16: dict, tot16: int, totbf: int) -> dict:
    """The v7 bf16 paragraph's numbers: census counts (full opcodes of v7_f16 and v7_bf16) and
    the bf16 / fp16 speeds of v7 and v8 in the committed HGEMM runs."""
    ldsm = sum(n for op, n in f16.items() if op.startswith("LDSM"))
    mt = f16.get("LDSM.16.MT88.4", 0)
    ld, movm = bf16.get("LD.E", 0), bf16.get("MOVM.16.MT88", 0)
    h16, hbf = _hgemm_run("h200_hgemm_fp16.json"), _hgemm_run("h200_hgemm_bf16.json")

    def x(level, n):
        return hbf[level, n]["tflops"] / h16[level, n]["tflops"]

    return {
        "`v7_f16` has {} (one `ldmatrix`": ldsm,
        "column: {} `LD.E` (generic": ld,
        "at run time, {} per fragment)": ld / ldsm,
        "and {} `MOVM.16.MT88`": movm,
        "(register transposes, {} per B fragment": movm / mt,
        "the load): {} instructions where": ld + movm,
        "where fp16 has {}, and": ldsm,
        "and {} in the kernel against": totbf,
        "in the kernel against {}. Measured": tot16,
        "v7 runs bf16 at {}× its fp16 speed": x("v7", 4096),
        "4096³ and {}× at 8192³, while v8": x("v7", 8192),
        "runs bf16 at {}× and": x("v8", 4096),
        "× and {}×. The census": x("v8", 8192),
    }


def v7_bf16_problems(section: str, f16: dict, bf16: dict, tot16: int, totbf: int) -> list[str]:
    bad = section_figure_problems("v7", section, v7_bf16_figures(f16, bf16, tot16, totbf))
    if any(op.startswith("LDSM") for op in bf16):
        bad.append("v7: the text says v7_bf16 has no LDSM, the census has some")
    return bad


@pytest.fixture(scope="module")
def v7_census():
    from numba_gemm.explain import sass

    skip_unless_the_quoted_compilers()
    try:
        k = {c.kernel: c for c in sass.census_level("v7")}
    except Exception as e:       # no NVRTC / nvdisasm here
        pytest.skip(f"no SASS census here: {e}")
    return k["v7_f16"], k["v7_bf16"]


def test_v7_bf16_paragraph_is_the_census(v7_census):
    f16, bf16 = v7_census
    assert v7_bf16_problems(PROSE["v7"], f16.opcodes, bf16.opcodes, f16.total, bf16.total) == []


def test_v7_bf16_check_can_fail(v7_census):
    f16, bf16 = v7_census
    worse = dict(bf16.opcodes, **{"LD.E": 64, "LDSM.16.M88.4": 1})
    bad = v7_bf16_problems(PROSE["v7"], f16.opcodes, worse, f16.total, bf16.total)
    assert len(bad) == 4 and bad[-1] == "v7: the text says v7_bf16 has no LDSM, the census has some"


def test_v7_wmma_loads_in_the_ptx():
    """The paragraph's PTX: fp16's WMMA loads name the shared state space, bf16's none."""
    nv = pytest.importorskip("cuda.bindings.nvrtc")
    from numba_gemm.runtime import nvrtc

    src = nvrtc.native_dir() / "v7_wmma.cu"
    opts = [o for o in nvrtc.options_for("compute_90a") if "ptxas" not in o]
    err, prog = nv.nvrtcCreateProgram(src.read_bytes(), str(src).encode(), 0, [], [])
    try:
        (err,) = nv.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        if err != nv.nvrtcResult.NVRTC_SUCCESS:
            pytest.skip("NVRTC could not compile v7 here")
        _, n = nv.nvrtcGetPTXSize(prog)
        ptx = b" " * n
        nv.nvrtcGetPTX(prog, ptx)
    finally:
        nv.nvrtcDestroyProgram(prog)
    forms = set(re.findall(r"wmma\.load\.[a-z0-9.]+", ptx.decode(errors="replace")))
    text = " ".join(PROSE["v7"].split())
    for form in ("wmma.load.a.sync.aligned.row.m16n16k16.shared.f16", "wmma.load.a.sync.aligned.row.m16n16k16.bf16"):
        assert form in forms and f"`{form}`" in text
    assert not any(f.endswith(".bf16") and ".shared" in f for f in forms)


# ------------------------------------------------------------------- RESULTS: the 16-bit C run

RESULTS = (ROOT / "docs" / "RESULTS.md").read_text()


def _c16_table(text):
    """The rows of RESULTS' 16-bit C table: (dtype, size) -> the written numbers."""
    sec = text[text.index("### C in the inputs' 16-bit type"):]
    sec = sec[:sec.index("\n### ")]
    return {(m[0], int(m[1])): list(m[2:]) for m in re.findall(
        r"(?m)^\| (b?float16) \| (\d+)³ \| " + r" \| ".join([r"([\d.]+)"] * 9) + r" \|", sec)}


def _c16_want():
    rows = {(r["dtype"], r["M"], r["level"]): r for r in json.loads(
        (ROOT / "docs" / "data" / "h200_v13_c16.json").read_text())["rows"]}
    out = {}
    for (dt, n, lv) in [k for k in rows if k[2] == "v13"]:
        v, vc, b, bc = (rows[(dt, n, x)] for x in ("v13", "v13/c16", "cublas", "cublas/c16"))
        out[(dt, n)] = [v["kernel_tflops"], b["kernel_tflops"], b["kernel_ms"] / v["kernel_ms"],
                        vc["kernel_tflops"], bc["kernel_tflops"], bc["kernel_ms"] / vc["kernel_ms"],
                        bc["loop_ms"] / vc["loop_ms"], v["kernel_ms"] / vc["kernel_ms"], vc["sm_clock_mhz"]]
    return out


def test_results_c16_table_is_its_run():
    got, want = _c16_table(RESULTS), _c16_want()
    assert set(got) == set(want) and len(got) == 6
    for key, values in want.items():
        for written, value in zip(got[key], values):
            assert agrees(written, value), f"{key}: {written} but the run says {value:.4f}"


def test_results_c16_check_can_fail():
    wrong = RESULTS.replace("| float16 | 4096³ | 718 |", "| float16 | 4096³ | 719 |")
    got, want = _c16_table(wrong), _c16_want()
    assert not all(agrees(w, v) for w, v in zip(got[("float16", 4096)], want[("float16", 4096)]))
