"""The census table (bench.py --sass, python -m numba_gemm.explain.sass) shows the instructions each
level exists for: a column for every class its SASS_MUST_HAVE names, and Hopper's (HGMMA,
WARPGROUP.*, USETMAXREG.*, UTMALDG multicast) whenever a kernel has them. CPU only."""
import dataclasses

import pytest

from numba_gemm.explain import sass
from numba_gemm.registry import get

HOPPER = {"HGMMA.64x128x16.F32.BF16": 64, "WARPGROUP.ARRIVE": 16, "WARPGROUP.DEPBAR.LE": 8,
          "USETMAXREG.TRY_ALLOC.CTAPOOL": 1, "USETMAXREG.DEALLOC.CTAPOOL": 1,
          "UTMALDG.2D": 4, "UTMALDG.2D.MULTICAST": 2, "SYNCS.ARRIVE.TRANS64.A1T0": 3, "IMAD": 10}


def _table(rows, must_have=()):
    lines = [line.split() for line in sass.format_table(rows, must_have).splitlines()]
    return lines[0], {r[0]: dict(zip(lines[0], r)) for r in lines[1:]}


def test_parser_keeps_the_wgmma_shape():
    text = "        /*0a40*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24, gsb0 ;\n"
    assert sass.count_opcodes(text) == {"HGMMA.64x128x16.F32.BF16": 1}
    c = sass.Census(level="v12", kernel="v12_f16", opcodes=dict(sass.count_opcodes(text)))
    assert c.has("HGMMA.64x128x16") and not c.has("HGMMA.64x256x16")    # v12's SASS_MUST_HAVE can be told apart


@pytest.mark.parametrize("opcode, cls", [
    ("HGMMA.64x128x16.F32.BF16", "HGMMA"),
    ("WARPGROUP.ARRIVE", "WARPGROUP.ARRIVE"),
    ("WARPGROUP.DEPBAR.LE", "WARPGROUP.DEPBAR"),
    ("USETMAXREG.TRY_ALLOC.CTAPOOL", "USETMAXREG.TRY_ALLOC"),
    ("USETMAXREG.DEALLOC.CTAPOOL", "USETMAXREG.DEALLOC"),
    ("UTMALDG.2D", "UTMALDG"),
    ("UTMALDG.3D.MULTICAST", "UTMALDG.MULTICAST"),
])
def test_hopper_classes(opcode, cls):
    assert sass.normalise(opcode) == cls


def test_hopper_instructions_get_their_own_columns():
    head, rows = _table([sass.Census(level="v13", kernel="v13_f16", opcodes=HOPPER, registers=168)])
    row = rows["v13_f16"]
    for col, n in {"HGMMA": 64, "WARPGROUP.ARRIVE": 16, "WARPGROUP.DEPBAR": 8, "USETMAXREG.TRY_ALLOC": 1,
                   "USETMAXREG.DEALLOC": 1, "UTMALDG": 4, "UTMALDG.MULTICAST": 2, "SYNCS": 3}.items():
        assert row[col] == str(n), (col, head)
    assert row["other"] == "10" and row["TOTAL"] == str(sum(HOPPER.values()))   # IMAD only


def test_absent_classes_have_no_column():
    head, _ = _table([sass.Census(level="k6", kernel="k6", opcodes={"FFMA": 8, "LDS.128": 2})])
    assert head[:3] == ["kernel", "FFMA", "LDS.128"]
    assert not {"HGMMA", "UTMALDG.MULTICAST", "USETMAXREG.DEALLOC"} & set(head)


def test_a_must_have_class_outside_the_columns_is_shown():
    """A level that exists for an instruction the fixed columns do not name gets that column."""
    row = sass.Census(level="x", kernel="x", opcodes={"DFMA": 4, "FFMA": 1, "IMAD": 2})
    head, _ = _table([row])
    assert "DFMA" not in head
    head, rows = _table([row], must_have=("DFMA", "FFMA"))
    assert rows["x"]["DFMA"] == "4" and head.count("FFMA") == 1 and rows["x"]["other"] == "2"


def test_census_table_takes_the_columns_from_the_shown_levels(monkeypatch):
    lv = dataclasses.replace(get("k1"), name="kx", sass_must_have=("DFMA",))
    rows = [sass.Census(level="kx", kernel="kx", opcodes={"DFMA": 3, "FFMA": 1})]
    monkeypatch.setattr(sass, "census_levels", lambda levels: {lv.name: rows})
    assert "DFMA" in sass.census_table([lv]).splitlines()[0].split()


@pytest.mark.parametrize("names", [("v11", "v11sk", "v12", "v13")])
def test_every_instruction_a_hopper_level_exists_for_has_a_filled_column(names):
    """The native Hopper levels' real censuses (NVRTC, no GPU): each SASS_MUST_HAVE entry is a
    column of the table, and one of the level's rows counts it."""
    levels = [get(n) for n in names]
    try:
        sass.find_nvdisasm()
    except sass.CensusUnavailable as e:
        pytest.skip(str(e))
    lines = [line.split() for line in sass.census_table(levels).splitlines()]
    head = lines[0]
    for lv in levels:
        own = [r for r in lines[1:] if r[0].startswith(lv.name + "_")]
        assert own, (lv.name, lines)
        for prefix in lv.sass_must_have:
            col = sass.normalise(prefix)
            assert col in head, (lv.name, prefix, head)
            assert any(r[head.index(col)] != "-" for r in own), (lv.name, prefix)
    assert {"HGMMA", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR", "USETMAXREG.TRY_ALLOC", "USETMAXREG.DEALLOC"} <= set(head)
