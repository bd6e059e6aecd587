"""The figures of docs/: the data behind each picture (no matplotlib needed), then the drawing."""
import json

import pytest

from numba_gemm.explain import figures, ledgers
from numba_gemm.explain.figures.measured import _prov_line
from numba_gemm.runtime import nvrtc


def test_k1_k2_segments_match_the_request_ledger():
    k1, k2 = figures.segments_of("k1"), figures.segments_of("k2")
    assert len(set(k1["A"][1])) == 32 and len(set(k1["B"][1])) == 1
    assert len(set(k2["A"][1])) == 1 and len(set(k2["B"][1])) == 1
    assert len(set(k1["A"][0])) == 32 and len(set(k2["A"][0])) == 1     # k2's A is a broadcast
    for lv, segs in (("k1", k1), ("k2", k2)):
        per_load = ledgers.request_ledger(lv).by_array()
        for arr, (_, seg) in segs.items():
            assert len(set(seg)) == per_load[arr][0]


@pytest.mark.parametrize("level", ["k3", "k3c"])
def test_tile_reads_cover_the_blocks_panels_once_per_phase(level):
    n = 128
    g = ledgers.geometry(level)
    reads = figures.tile_reads(level, n, block_xy=(0, 1))
    a_rows = {e // n for e in reads["A"]}
    b_cols = {e % n for e in reads["B"]}
    assert a_rows == set(range(g.tile_m, 2 * g.tile_m))
    assert b_cols == set(range(g.tile_n))
    assert len(reads["A"]) == g.tile_m * n and len(reads["B"]) == n * g.tile_n
    for e, ph in reads["A"].items():             # column k is loaded in phase k // tile_k
        assert ph == (e % n) // g.tile_k


@pytest.mark.parametrize("level, loads", [("k3", 2), ("k4", 9), ("k5", 12), ("k6", 3)])
def test_thread_outer_product(level, loads):
    t = figures.thread_operands(level)
    g = t["geometry"]
    assert (len(t["a_rows"]), len(t["b_cols"])) == (g.thread_m, g.thread_n)
    assert t["fmas"] == g.thread_m * g.thread_n
    assert t["loads"] == loads


def test_k7_warp_tiling_follows_its_constants():
    from numba_gemm.sgemm import k7_warptile

    d = figures.warp_tiling()
    t, owner = d["tiling"], d["owner"]
    assert t is k7_warptile.TILING
    assert set(owner) == {(m, n) for m in range(t.tile_m) for n in range(t.tile_n)}
    assert all(len(v) == 1 for v in owner.values())              # one lane per output
    for warp in range(t.warps):                                    # a warp_m × warp_n rectangle
        cells = [mn for mn, [(w, _)] in owner.items() if w == warp]
        ms, ns = {m for m, _ in cells}, {n for _, n in cells}
        assert len(cells) == t.warp_m * t.warp_n
        assert ms == set(range(min(ms), min(ms) + t.warp_m)) and ns == set(range(min(ns), min(ns) + t.warp_n))
    for (warp, lane) in [(0, 0), (5, 9)]:                          # four 4×4 pieces, 32 rows and 16 columns apart
        cells = {mn for mn, [wl] in owner.items() if wl == (warp, lane)}
        m0 = warp // t.warps_n * t.warp_m + lane // t.lanes_n * 4
        n0 = warp % t.warps_n * t.warp_n + lane % t.lanes_n * 4
        rows = {m0 + i * 4 * t.lanes_m + r for i in range(t.sub_m) for r in range(4)}
        cols = {n0 + j * 4 * t.lanes_n + c for j in range(t.sub_n) for c in range(4)}
        assert cells == {(m, n) for m in rows for n in cols}
    assert sorted({m for (m, n), [wl] in owner.items() if wl == (0, 0)}) == [0, 1, 2, 3, 32, 33, 34, 35]
    for warp, loads in d["loads"].items():                        # per k: conflict-free LDS.128
        assert sorted(loads) == sorted([("As", t.lanes_m, 1)] * t.sub_m + [("Bs", t.lanes_n, 1)] * t.sub_n)


def test_bank_grid_depth_is_the_conflict_degree():
    seen = set()
    for title, addrs, width in figures.bank_examples():
        bg = figures.bank_grid(addrs, width)
        depth = max(d for d, _ in bg["cells"]) + 1
        assert depth == bg["profile"].ways, title
        seen.add(bg["kind"])
    assert {"lds_bcast", "lds_free", "lds_conflict32"} <= seen


def test_swizzle_map_is_conflict_free_and_matches_tma():
    m = figures.swizzle_map()
    for row in m:
        assert sorted(row) == list(range(8))
    for c in range(8):                         # 8 rows at one logical chunk: 8 bank groups
        assert sorted(m[r][c] for r in range(8)) == list(range(8))
    flat = figures.swizzle_map(swizzled=False)
    assert all(len({flat[r][c] for r in range(8)}) == 1 for c in range(8))


@pytest.mark.parametrize("grid, sup", [((64, 64), (14, 1)), ((7, 5), (3, 2)), ((9, 4), None)])
def test_launch_order_visits_each_tile_once(grid, sup):
    order = figures.launch_order(*grid, sup)
    assert sorted(b for line in order for b in line) == list(range(grid[0] * grid[1]))


def test_supertile_first_wave_reads_fewer_panels():
    wave = figures.first_wave("v9")            # 132 SMs × 2 blocks per SM
    assert wave == 264
    row_major = figures.wave_panels(figures.launch_order(64, 64, None), wave)
    super_tiled = figures.wave_panels(figures.launch_order(64, 64, (14, 1)), wave)
    assert row_major == (5, 64)
    assert super_tiled == (14, 19)


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipeline_schedule_respects_buffers(stages):
    s = figures.pipeline_schedule(stages, tiles=12, load=2.5)
    for i, e in enumerate(s):
        assert e["mma_start"] >= e["copy_end"]
        if i:
            assert e["mma_start"] >= s[i - 1]["mma_end"]
        if i >= stages:                         # a buffer is refilled only after it was read
            assert e["copy_start"] >= s[i - stages]["mma_end"]
    deeper = figures.pipeline_schedule(stages + 1, tiles=12, load=2.5)
    assert deeper[-1]["mma_end"] <= s[-1]["mma_end"]


def test_hgemm_stages_come_from_the_modules():
    from numba_gemm.hgemm import v10_tma

    assert figures.hgemm_stages("v10") == v10_tma.CONFIG.stages
    assert figures.hgemm_stages("v7") == 2


def test_results_refuse_simulator_runs(tmp_path):
    p = tmp_path / "sim.json"
    p.write_text(json.dumps([{"level": "k1", "M": 40, "N": 36, "K": 33, "dtype": "float32",
                              "mode": "simulator", "ms": None, "tflops": None}]))
    with pytest.raises(ValueError, match="simulator"):
        figures.load_results(p)


def _result(level, n, ms, dtype="float32", mode="gpu"):
    return {"level": level, "M": n, "N": n, "K": n, "dtype": dtype, "mode": mode, "ms": ms,
            "tflops": 2 * n ** 3 / ms / 1e9, "cublas_tflops": 50.0}


def test_results_from_a_manifest_of_raw_files(tmp_path):
    """A manifest names raw bench.py --json files beside it, each with the command that wrote it."""
    (tmp_path / "s.json").write_text(json.dumps([_result("k1", 4096, 270.0), _result("k2", 4096, 29.0)]))
    (tmp_path / "h.json").write_text(json.dumps([_result("v7", 4096, 0.6, "float16")]))
    runs = [{"command": "python bench.py --level k1,k2 --size 4096 --json s.json", "json": "s.json"},
            {"command": "python bench.py --level v7 --size 4096 --json h.json", "json": "h.json"}]
    m = tmp_path / "manifest.json"
    m.write_text(json.dumps({"card": "a GPU", "date": "2026-12-01", "commit": "abc1234", "runs": runs}))
    results, prov = figures.load_results(m)
    assert [r["level"] for r in results] == ["k1", "k2", "v7"]
    assert prov["commands"] == [r["command"] for r in runs] and prov["files"] == ["s.json", "h.json"]
    assert _prov_line(prov) == "a GPU, 2026-12-01, abc1234"
    raw, raw_prov = figures.load_results(tmp_path / "s.json")          # a raw file alone
    assert len(raw) == 2 and _prov_line(raw_prov) == "s.json"
    # results wrapped with their provenance, and a run that contributes only some levels
    (tmp_path / "h.json").write_text(json.dumps({"commit": "abc1234", "results": [
        _result("v7", 4096, 0.6, "float16"), _result("v8", 4096, 0.4, "float16")]}))
    m.write_text(json.dumps({"card": "a GPU", "date": "2026-12-01", "commit": "abc1234",
                             "runs": [runs[0], dict(runs[1], levels=["v8"])]}))
    assert [r["level"] for r in figures.load_results(m)[0]] == ["k1", "k2", "v8"]
    (tmp_path / "h.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match="not a raw bench.py --json"):
        figures.load_results(m)


def test_committed_input_has_provenance_and_every_level():
    results, prov = figures.load_results()
    assert {"card", "date", "commit", "commands"} <= set(prov)
    if "runs" not in json.loads(figures.RESULTS_JSON.read_text()):   # not raw files: says so
        assert prov.get("transcribed_from") and "transcribed" in _prov_line(prov)
    assert {r["level"] for r in results} >= {"k1", "k2", "k3", "k3c", "k4", "k5", "k6", "v7", "v8", "v9", "v10"}
    for p in figures.roofline_points(results):
        assert p["intensity"] > 0 and p["roof_tflops"] > 0


def test_every_figure_is_committed():
    for name, (fname, _) in figures.FIGURES.items():
        assert (figures.FIGURES_DIR / fname).is_file(), f"{fname}: run python -m numba_gemm.explain.figures"


def test_draw_every_figure(tmp_path):
    pytest.importorskip("matplotlib")
    written = figures.build(out=tmp_path)
    assert len(written) == len(figures.FIGURES)
    for path in written:
        data = path.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, path.name


def _slug(heading: str) -> str:
    import re

    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())   # GitHub's anchors
    return s.replace(" ", "-")


def test_docs_links_and_figures_resolve():
    """Every relative link in README and docs/*.md names a file that exists, and its #anchor a heading."""
    import re

    root = figures.ROOT
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if "://" in target:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), f"{page.name}: {target}"
            if anchor and dest.suffix == ".md":
                heads = {_slug(h) for h in re.findall(r"^#+ (.+)$", dest.read_text(), re.M)}
                assert anchor in heads, f"{page.name}: {target}"


def test_roofline_points_use_each_levels_own_roof():
    results, _ = figures.load_results()
    pts = {p["level"]: p for p in figures.roofline_points([r for r in results if r["M"] == 4096])}
    ceil = figures.tensor_ceilings()
    costs = json.loads(ledgers.H200_COSTS.read_text())["tensor_tflops"]
    assert ceil["wgmma"] == 1e12 * costs["wgmma"] and ceil["mma_sync"] == 1e12 * costs["mma_sync"]
    assert {lv: p["roof"] for lv, p in pts.items() if lv.startswith("v")} == {
        "v7": "mma_sync", "v8": "mma_sync", "v8py": "mma_sync", "v9": "mma_sync", "v10": "mma_sync",
        "v11": "wgmma", "v11py": "wgmma", "v12": "wgmma", "v13": "wgmma"}
    assert 0 < pts["v11py"]["attainment"] < pts["v11"]["attainment"]
    for lv in ("v11", "v12", "v13"):           # against wgmma's roof, not above 100 %
        assert 70 < pts[lv]["attainment"] < 100
    assert pts["k2"]["attainment"] > 100       # k2's bytes come from L1/L2
    # one per-tile model for all: the SGEMM bytes ledger's, and v7's 128×128 fp16 tile ≈ 62
    assert pts["k7"]["tile_intensity"] == pts["k7"]["intensity"]
    assert pts["v7"]["tile_intensity"] == pytest.approx(2 * 4096 ** 3 / (2 * 2 * 4096 ** 3 / 128 + 4 * 4096 ** 2))
    assert pts["v7"]["intensity"] == pytest.approx(1024.0)


def test_roofline_labels_do_not_overlap():
    results, _ = figures.load_results()
    pts = figures.roofline_points([r for r in results if r["M"] == 4096])
    boxes = figures.label_boxes(pts, figures.label_layout(pts))
    items = sorted(boxes.items())
    for i, (a, (ax0, ax1, ay0, ay1)) in enumerate(items):
        for b, (bx0, bx1, by0, by1) in items[i + 1:]:
            assert ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 + 1e-9 or by1 <= ay0 + 1e-9, (a, b)


def test_roofline_figure_uses_one_byte_model_and_each_instructions_peak():
    results, _ = figures.load_results()
    four = [r for r in results if r["M"] == 4096]
    pts = {p["level"]: p for p in figures.tile_model_points(four)}
    ceilings = figures.tensor_ceilings()
    for p in pts.values():                     # every level at the per-tile model, none at the L2's
        assert p["intensity"] == pytest.approx(figures.tile_intensity(p["level"]))
        assert p["peak"] == pytest.approx(100 * p["tflops"] * 1e12 / ceilings[p["roof"]])
    assert {pts[lv]["roof"] for lv in ("v11", "v12", "v13")} == {"wgmma"}
    assert ceilings["wgmma"] > ceilings["mma_sync"] > ceilings["fp32"]
    assert all(70 < pts[lv]["peak"] < 100 for lv in ("v11", "v12", "v13"))
    boxes = figures.label_boxes(list(pts.values()), figures.label_layout(list(pts.values())))
    items = sorted(boxes.items())
    for i, (a, (ax0, ax1, ay0, ay1)) in enumerate(items):
        for b, (bx0, bx1, by0, by1) in items[i + 1:]:
            assert ax1 <= bx0 or bx1 <= ax0 or ay1 <= by0 + 1e-9 or by1 <= ay0 + 1e-9, (a, b)


def test_wgmma_tile_layout_matches_the_descriptors():
    from numba_gemm.hgemm import _common as cm, _wgmma as wg

    d = figures.wgmma_tile_layout()
    t = d["tile"]
    for r in range(64):                        # each 128-byte row: its 8 chunks, permuted in place
        offs = sorted(d["a"][(r, c)] for c in range(8))
        assert offs == [r * 128 + 16 * c for c in range(8)]
    for c in range(8):                         # one logical chunk of an 8-row atom: 8 bank groups
        assert len({d["a"][(r, c)] % 128 for r in range(8)}) == 8
    assert d["atom"] == 1024 and d["core"] == 128 and d["panel"] == t.bk * 128
    assert set(d["a_desc"]) == set(range(t.bk // 16))
    base = 1024
    for kk, (start, lbo, sbo) in d["b_desc"].items():   # the kernels' k step: + (bytes >> 4)
        assert wg.smem_desc(base + start, lbo, sbo) == wg.smem_desc(base + d["b_desc"][0][0], lbo, sbo) + (kk * 2048 >> 4)
        assert (lbo, sbo) == (8192, 1024)
    for kk, (start, lbo, sbo) in d["a_desc"].items():
        assert wg.smem_desc(base + start, lbo, sbo) == wg.smem_desc(base, 16, 1024) + (kk * 32 >> 4)
    assert all(d["b"][(k, p, c)] - d["a_bytes"] - p * d["panel"] == cm.tma_swizzle_128b(k * 128 + c * 16)
               for (k, p, c) in d["b"])


@pytest.mark.parametrize("lag", [1, 2, None])
def test_mbarrier_ring_parities_and_order(lag):
    stages, tiles = 4, 13
    ring = figures.mbarrier_ring(stages, tiles, lag)
    for e in ring:
        assert e["stage"] == e["tile"] % stages and e["full_parity"] == (e["tile"] // stages) % 2
        assert e["issue_at"] < e["tile"]      # issued before the iteration that reads it
        if e["tile"] >= stages:                # a refill waits for the previous use's release:
            prev = ring[e["tile"] - stages]    # the consumers finish it at the end of its iteration
            assert e["empty_wait"] and e["empty_parity"] == prev["full_parity"]
            assert e["issue_at"] > prev["tile"]
        else:
            assert not e["empty_wait"]
    ahead = {e["tile"] - e["issue_at"] for e in ring if e["tile"] >= stages}
    assert ahead == ({stages - lag} if lag else {stages - 1})   # v10: 2 tiles ahead, v12: 3


def test_k6_loader_map_covers_each_tile_once_by_linear_thread_id():
    d = figures.k6_loader_map()
    g = ledgers.geometry("k6")
    for arr, rows, cols in (("A", g.tile_m, g.tile_k // 4), ("B", g.tile_k, g.tile_n // 4)):
        cells = d[arr]
        assert set(cells) == {(r, c) for r in range(rows) for c in range(cols)}
        per_thread = rows * cols // g.threads
        assert sorted(t for t, _ in cells.values()) == sorted(list(range(g.threads)) * per_thread)
        for (r, c), (t, i) in cells.items():    # float4 number r·cols + c is thread (that mod 128)
            assert (r * cols + c) % g.threads == t and (r * cols + c) // g.threads == i


def test_phase_timeline_double_buffering_overlaps_loads_with_the_multiply():
    single, double = figures.phase_timeline(False, 6), figures.phase_timeline(True, 6)
    for e in single:                            # k7: the multiply waits for its own loads
        assert e["ffma"][0] >= e["store"][1] and e["store"][0] >= e["load"][1]
    for p in range(1, 6):                       # k8: loads of p in flight during the multiply of p - 1
        prev, e = double[p - 1], double[p]
        assert e["load"][0] <= prev["ffma"][0] < e["load"][1]
        assert e["store"][0] >= prev["ffma"][1]        # its buffer was read two phases ago, the other one now
        assert e["ffma"][0] >= e["store"][1] and e["buffer"] == p % 2
    assert double[-1]["ffma"][1] < single[-1]["ffma"][1]
    assert all(len(e["barriers"]) == 1 for e in double) and all(len(e["barriers"]) == 2 for e in single)


# ---- the tensor-core rungs' figures: each against the code the kernels and their mirrors use

def test_mma_fragments_are_the_isa_layouts_and_ldmatrix_delivers_them():
    from numba_gemm.ptx import mma_sync as ms

    d = figures.mma_fragments()
    assert set(d["A"]) == {(m, k) for m in range(16) for k in range(16)}      # each element once
    assert set(d["B"]) == {(k, n) for k in range(16) for n in range(8)}
    assert set(d["C"]) == {(m, n) for m in range(16) for n in range(8)}
    for (m, k), (lane, r, h) in d["A"].items():
        assert ms.a_fragment_coords(lane, r, h) == (m, k)
    for (m, n), (lane, r) in d["C"].items():
        assert ms.c_fragment_coords(lane, r) == (m, n)
    # ldmatrix.x4 with the kernels' row addresses hands each lane exactly its mma A fragment,
    # and .trans exactly b0, b1 of two n8 tiles
    for (lane, r, h), (m, k) in d["loaded"]["A"].items():
        assert ms.a_fragment_coords(lane, r, h) == (m, k)
    for (lane, r, h), (k, n) in d["loaded"]["B"].items():
        assert ms.b_fragment_coords(lane, r % 2, h) == (k, n - 8 * (r // 2))
    for arr in ("A", "B"):          # lane l gives row l % 8 of matrix l // 8: 32 distinct rows
        assert len(set(d["rows"][arr].values())) == 32


def test_ldmatrix_rows_are_the_kernels():
    """The figure's ldmatrix row rule is the one native/mma_stage.cuh compiles (before the swizzle)."""
    src = (nvrtc.native_dir() / "mma_stage.cuh").read_text()
    assert "swz128(lane % 16, lane / 16)" in src
    assert "swz128(lane % 8 + 8 * ((lane / 8) % 2), (col0 % 64) / 8 + lane / 16)" in src
    rows = figures.tensor_data.LDMATRIX_ROWS
    assert [rows["A"](lane) for lane in range(32)] == [(lane % 16, lane // 16) for lane in range(32)]
    assert [rows["B"](lane) for lane in range(32)] == [(lane % 8 + 8 * ((lane // 8) % 2), lane // 16)
                                                      for lane in range(32)]


def test_tma_boxes_are_the_levels_boxes_and_zero_fill():
    from numba_gemm.hgemm import _wgmma as wg
    from numba_gemm.registry import get

    t = get("v12").module.CONFIG
    d = figures.tma_boxes()
    assert (d["box_a"], d["box_b"]) == wg.boxes(t)
    assert d["a"]["real"].shape == wg.boxes(t)[0]
    a = d["a"]                                     # real exactly where the box lies inside A
    assert d["a"]["real"].sum() == (min(d["M"], a["y"] + t.bm) - a["y"]) * (min(d["K"], a["x"] + t.bk) - a["x"])
    assert d["panels"] == -(-d["N"] // 64) < t.bn // 64                 # the example skips a panel
    assert d["tx"] == d["a_bytes"] + d["panels"] * d["panel_bytes"]
    assert figures.tma_boxes(N=4096)["tx"] == t.stage_bytes              # a whole stage otherwise
    for b in d["b"]:
        assert b["real"].sum() == (min(d["K"], b["y"] + 64) - b["y"]) * (min(d["N"], b["x"] + 64) - b["x"])


@pytest.mark.parametrize("level", ["v12", "v13"])
def test_v12_roles_read_the_kernels_register_split(level):
    import re

    from numba_gemm.registry import get

    mod = get(level).module
    src = (nvrtc.native_dir() / mod.SOURCE).read_text()
    d = figures.v12_roles(level)
    prod, *cons = d["warpgroups"]
    assert f"constexpr int PRODUCER_REGS = {prod[3]}, CONSUMER_REGS = {cons[0][3]};" in src
    assert "setmaxnreg_dec<PRODUCER_REGS>" in src and "setmaxnreg_inc<CONSUMER_REGS>" in src
    assert d["threads"] == mod.CONFIG.threads == 128 * len(d["warpgroups"])
    assert len(cons) == mod.CONFIG.consumers and [c[4] for c in cons] == [(64 * i, 64 * i + 63) for i in range(len(cons))]
    assert d["used"] <= d["file"] and re.search(rf"<=\s*{d['file']}", src)
    for regs in (prod[3], cons[0][3], d["entry"]):   # setmaxnreg takes multiples of 8 in 24..256
        assert regs % 8 == 0 and 24 <= regs <= 256
    assert prod[3] < d["entry"] < cons[0][3] and d["entry"] * d["threads"] <= d["file"]


def test_v13_multicast_splits_b_between_the_cluster():
    from numba_gemm.registry import get

    mod = get("v13").module
    d = figures.v13_multicast()
    assert d["cluster"] == mod.CLUSTER
    panels = sorted(p for v in d["ranks"].values() for p in v["panels"])
    assert panels == list(range(mod.CONFIG.bn // 64))                     # each panel loaded once
    for v in d["ranks"].values():
        assert v["received"] == mod.CONFIG.stage_bytes                    # full[s] expects the stage
        assert v["issued"] == v["a_bytes"] + (mod.CONFIG.stage_bytes - v["a_bytes"]) // mod.CLUSTER
    assert d["v12_issued"] == get("v12").module.CONFIG.stage_bytes
    src = (nvrtc.native_dir() / mod.SOURCE).read_text()
    # the rule the figure draws: along M (CM = CLUSTER CTAs, rank rm = rank % CM) panels rm, rm + CM, ...
    assert "for (int p = CM == 1 ? 0 : rm; p < b_panels; p += CM)" in src


@pytest.mark.parametrize("shape, clusters", [((4096, 4096, 4096), None), ((1000, 3000, 512), 7)])
def test_v13_schedule_walks_every_tile_once(shape, clusters):
    from numba_gemm.hgemm import _common as cm
    from numba_gemm.registry import get

    mod = get("v13").module
    M, N, K = shape
    d = figures.v13_schedule(M, N, K, clusters)
    gm, gn = cm.cdiv(M, mod.CONFIG.bm), cm.cdiv(N, mod.CONFIG.bn)
    assert set(d["owner"]) == {(r, c) for r in range(gm) for c in range(gn)}
    grid, _, _ = mod.launch_config(M, N, K, max_clusters=clusters or ledgers.h200().sms // mod.CLUSTER)
    assert d["clusters"] == grid[0] // mod.CLUSTER
    pairs = {}
    for (r, c), (cl, rank, rnd) in d["owner"].items():
        assert r % mod.CLUSTER == rank                      # rank r takes tile row CLUSTER·pm + r
        pairs.setdefault((cl, rnd), set()).add((r // mod.CLUSTER, c))
    assert all(len(v) == 1 for v in pairs.values())         # both CTAs of a pair: the same B tile
    per_cluster = {}
    for cl, rnd in pairs:
        per_cluster.setdefault(cl, []).append(rnd)
    assert all(sorted(v) == list(range(len(v))) for v in per_cluster.values())   # c, c + G, c + 2G ...
    assert max(len(v) for v in per_cluster.values()) == d["rounds"]


def test_epilogue_timeline_v13_overlaps_the_next_tiles_loads():
    from numba_gemm.registry import get

    v12, v13 = figures.epilogue_timeline("v12"), figures.epilogue_timeline("v13")
    assert v12["stages"] == get("v12").module.CONFIG.stages and v13["stages"] == get("v13").module.CONFIG.stages
    for d in (v12, v13):
        for t in d["tiles"]:                 # the tensor cores idle during every epilogue
            s, e = t["epilogue"]
            assert all(f <= s or b >= e for tt in d["tiles"] for b, f in tt["wgmma"])
            for i, (issue, land) in enumerate(t["loads"]):    # a stage is refilled after its release
                assert land <= t["wgmma"][i][0]
    for prev, t in zip(v12["tiles"], v12["tiles"][1:]):       # v12: a new CTA, nothing in flight early
        assert t["loads"][0][0] >= prev["epilogue"][1]
    for prev, t in zip(v13["tiles"], v13["tiles"][1:]):       # v13: the next tile's first stages
        first = t["loads"][:v13["stages"]]                    # are issued before this epilogue ends
        assert all(issue < prev["epilogue"][1] for issue, _ in first)
        assert t["wgmma"][0][0] == prev["epilogue"][1]        # ... and ready when it does
    assert v13["end"] < v12["end"]


# ---------------------------------------------------------------------------------------
# the side rungs: k3c's coarsening, split-K, v11r's staged loads (and v11py's tile)

def test_coarsening_is_k3cs_geometry_against_k3():
    from numba_gemm.sgemm import k3_tiled, k3c_coarsened

    g3, gc = k3_tiled.GEOMETRY, k3c_coarsened.GEOMETRY
    k3, k3c = figures.coarsening("k3", cover=gc.tile_n), figures.coarsening("k3c", cover=gc.tile_n)
    [blk] = k3c["blocks"]
    assert len(blk["b"]) == k3c_coarsened.COARSE == gc.thread_n
    # its B tiles: COL_STEP columns each, side by side across the block's tile_n columns
    assert [b[2:] for b in blk["b"]] == [(j * k3c_coarsened.COL_STEP, (j + 1) * k3c_coarsened.COL_STEP)
                                        for j in range(gc.thread_n)]
    assert all(b[:2] == (0, gc.tile_k) for b in blk["b"])
    assert blk["a"] == (0, gc.tile_m, 0, gc.tile_k)
    assert [c[:2] for c in blk["c"]] == [(0, gc.tile_m)] * gc.thread_n
    assert (k3c["a_loads"], k3c["b_loads"], k3c["as_reads"]) == (1, gc.thread_n, gc.tile_k * gc.thread_n)
    # k3 covers the same columns with tile_n / tile_n blocks, each loading the same A tile again
    assert len(k3["blocks"]) == gc.tile_n // g3.tile_n and {b["a"] for b in k3["blocks"]} == {blk["a"]}
    assert [b["b"][0][2:] for b in k3["blocks"]] == [b[2:] for b in blk["b"]]
    assert (k3["a_loads"], k3["b_loads"], k3["as_reads"]) == (1, 1, g3.tile_k)
    assert (k3["loads_per_output"], k3c["loads_per_output"]) == (2, 1.25)   # k3c's headline


def test_stream_schedule_is_k9sts_plan():
    """The figure's schedule: every tile's K tiles covered once, k9's waves against k9st's whole
    tiles and equal shares, the split tiles those whose K tiles two CTAs share; the caption's
    3 against 2.5 units."""
    d = figures.stream_schedule()
    p, R = d["plan"], d["slots"]
    assert (p.tiles, p.whole, p.ctas, R) == (10, 4, 4, 4) and d["time"] == {"k9": 3, "k9st": 2.5}
    done = {}
    for row in d["k9st"]:
        assert all(b1 == a2 for (_, _, b1, _), (_, a2, _, _) in zip(row, row[1:]))   # back to back
        for t, a, b, whole in row:
            done[t] = done.get(t, 0) + (b - a)
            assert whole == (b - a == 1)
    assert done == {t: 1 for t in range(p.tiles)}
    assert set(d["parts"]) == {t for row in d["k9st"] for t, _, _, whole in row if not whole} == {5, 8}
    assert sorted(t for row in d["k9"] for t, _, _ in row) == list(range(p.tiles))


def test_splitk_plans_are_the_levels_own():
    from numba_gemm import splitk
    from numba_gemm.registry import get

    from test_docs_data import SECTIONS, headline

    plans = figures.splitk_plans()
    assert set(plans) == {"k5sk", "k8sk", "v11sk"}
    for lv, p in plans.items():
        M, N, K = p["shape"]
        mod = get(lv).module
        S = mod.plan_splits(M, N, K)[1] if lv == "v11sk" else mod.plan_splits(M, N, K)
        assert p["S"] == S > 1
        bm, bn, bk = p["tile"]
        assert p["tiles"] == -(-M // bm) * -(-N // bn) and p["ctas"] == p["tiles"] * S <= p["resident"]
        lo = [a for a, _ in p["slices"]]
        assert lo[0] == 0 and [b for _, b in p["slices"]] == lo[1:] + [K]    # contiguous, all of K
        per = splitk.slice_k_tiles(-(-K // bk), S)
        assert p["k_tiles"][:-1] == [per] * (S - 1) and 0 < p["k_tiles"][-1] <= per
        assert p["partials"] == [z * M * N for z in range(S)] and p["workspace"] == 4 * S * M * N
        head = headline(SECTIONS[lv])
        assert f"{M}×{N}×{K}" in head and f"{p['tiles']} → {p['ctas']}" in head, lv


def test_reduction_order_is_the_kernels():
    """splitk.reduce_partials adds the partials in the figure's order and applies alpha and
    beta once (values chosen so that another order gives other bits); beta = 0 never reads C."""
    import numpy as np

    from numba_gemm import splitk

    S, MN = 4, 5
    P = np.array([[1e8, 1.0, -1e8, 3.0]] * MN, np.float32).T.copy().ravel()
    for beta in (0.0, 2.0):
        C = np.full(MN, np.nan if beta == 0 else 0.5, np.float32)
        want = np.float32(0)
        for z in figures.reduction_terms(S):
            want = np.float32(want + P[z * MN])
        want = np.float32(np.float32(0.5) * want) + (np.float32(beta) * np.float32(0.5) if beta else np.float32(0))
        splitk.reduce_partials[1, 32](P, np.int32(S), np.int64(MN), np.float32(0.5), np.float32(beta), C)
        assert np.array_equal(C, np.full(MN, want, np.float32)), (beta, C, want)
    assert figures.reduction_terms(S) == [0, 1, 2, 3]
    assert np.float32(np.float32(1e8 + 1.0) - 1e8) + 3 != np.float32(1e8 - 1e8 + 1.0) + 3  # order matters


def test_staged_loads_are_v11rs_model():
    from numba_gemm.hgemm import _common as cm
    from numba_gemm.registry import get

    from test_docs_data import SECTIONS, headline

    r = get("v11r").module
    d = figures.staged_loads()
    assert d["shape"] == figures.RAGGED_SHAPE
    M, N, K = d["shape"]
    assert (d["wa"], d["wb"]) == (r.load_width(1 << 20, 2 * K), r.load_width(1 << 20, 2 * N)) == (2, 8)
    assert d["per_thread"] == r.tile_instructions(d["wa"], d["wb"])
    warps = r.CONFIG.threads // 32
    for (wa, wb), c in [((d["wa"], d["wb"]), d["cta"]), *d["widths"].items()]:
        n = r.tile_instructions(wa, wb)
        assert c == {"loads": warps * (n["loads_a"] + n["loads_b"]), "stores": warps * (n["stores_a"] + n["stores_b"])}
    v11 = get("v11").module.CONFIG
    assert d["tma"] == 1 + v11.bn // d["boxes"][1][1] == 5
    for name in ("A", "B"):                          # every piece lands where TMA's swizzle puts it
        for pieces in d["pieces"][name].values():
            assert pieces and all(dst == tma for *_, dst, tma in pieces)
    assert cm.tma_swizzle_128b(1 * 128 + 10 * 2) == d["pieces"]["A"][37][0][2]
    c = d["corner"]
    assert c["same_as_tma"] and 0 < c["zero_bytes"] < c["bytes"] == r.CONFIG.stage_bytes
    assert (c["rows"], c["k"]) == (M % r.CONFIG.bm, K % r.CONFIG.bk)
    head = headline(SECTIONS["v11r"])                          # its ledger line
    w = d["widths"]
    assert f"{d['tma']} TMA instructions" in head
    assert f"{w[8, 8]['loads']} loads + {w[8, 8]['stores']} stores" in head
    assert f"{w[4, 4]['loads']} + {w[4, 4]['stores']} at 4 bytes, {w[2, 2]['loads']} + {w[2, 2]['stores']} at 2" in head


def test_v11py_builds_v11s_tile_and_descriptors():
    """v11's section figure (v11_wgmma_tile.png) serves v11py: the same tile record, the same
    stage layout and the same descriptors (its smem_desc is _wgmma.smem_desc in Python)."""
    import ast
    import inspect

    from numba_gemm.hgemm import _wgmma as wg, v11_wgmma, v11py_wgmma as py

    assert py.CONFIG == v11_wgmma.CONFIG
    d = figures.wgmma_tile_layout(py.CONFIG)
    assert (py.A_BYTES, py.B_PANEL) == (d["a_bytes"], d["panel"])
    for start, lbo, sbo in [*d["a_desc"].values(), *d["b_desc"].values()]:
        assert py.smem_desc.py_func(1024 + start, lbo, sbo) == wg.smem_desc(1024 + start, lbo, sbo)
    tree = ast.parse(inspect.getsource(py))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "smem_desc"]

    def value(node):                                 # u32(16), u32(B_PANEL) -> 16, py.B_PANEL
        arg = node.args[0]
        return arg.value if isinstance(arg, ast.Constant) else getattr(py, arg.id)

    assert [(value(c.args[1]), value(c.args[2])) for c in calls] == [d["a_desc"][0][1:], d["b_desc"][0][1:]]


def test_side_rung_captions_agree_with_the_figures_data():
    """The numbers the LADDER captions of splitk.png and v11r_staged_loads.png read off the
    figures, recomputed from the same data."""
    from test_docs_data import FIGURE_LINE, SECTIONS

    def caption(level, png):
        [c] = [m.group("caption") for m in FIGURE_LINE.finditer(SECTIONS[level]) if m.group("name") == png]
        return c

    for lv, p in figures.splitk_plans().items():
        c = caption(lv, "splitk.png")
        M, N, K = p["shape"]
        S, per = p["S"], p["k_tiles"][0]
        assert f"{M}×{N}×{K}" in c and f"{p['tiles']} tiles × {S} = {p['ctas']} CTAs" in c, lv
        assert f"{S} slices of {per} K tiles" in c and f"{p['workspace'] / 2**20:g} MiB" in c, lv
        assert p["k_tiles"][-1] == per or f"(the last {p['k_tiles'][-1]})" in c, lv
    d = figures.staged_loads()
    c = caption("v11r", "v11r_staged_loads.png")
    assert f"{d['cta']['loads']} loads + {d['cta']['stores']} stores" in c and f"TMA's {d['tma']} instructions" in c
    assert f"get {d['wa']}-byte loads" in c and f"{d['wb']}-byte loads" in c
    k3, k3c = figures.coarsening("k3", cover=ledgers.geometry("k3c").tile_n), figures.coarsening("k3c")
    g = k3c["geometry"]
    c = caption("k3c", "k3c_coarsening.png")
    assert f"{g.tile_m}×{g.tile_n} of C" in c and f"the {len(k3c['blocks'][0]['b'])} B tiles" in c
    assert f"k3 takes {len(k3['blocks'])} blocks" in c


def roofline_cublas_problems(lines: dict, ladder: str, n: int = 4096) -> list[str]:
    """The roofline's cuBLAS line of each half-precision dtype against the cuBLAS cell the HGEMM
    results table (v10–v13 beside cuBLAS, in RESULTS.md since it left LADDER's v13 section) gives
    at n³ (| 4096³ | fp16 | … | cuBLAS | v13 / cuBLAS |)."""
    import re

    names = {"fp16": "float16", "bf16": "bfloat16"}
    bad, seen = [], 0
    for dt, cells in re.findall(rf"(?m)^\| {n}³ \| (fp16|bf16) \|(.*)\|$", ladder):
        cublas = cells.split("|")[-2].strip()
        if names[dt] not in lines:
            continue
        seen += 1
        drawn = f"{lines[names[dt]]:.1f}"
        if drawn != cublas:
            bad.append(f"roofline cuBLAS {dt} {drawn}, the table {cublas}")
    return bad if seen else [f"no {n}³ table row for a dtype the roofline draws"]


def test_roofline_cublas_is_the_tables_run():
    results, _ = figures.load_results()
    lines = figures.cublas_lines(results, 4096)
    assert "float16" in lines
    assert roofline_cublas_problems(lines, (figures.ROOT / "docs" / "RESULTS.md").read_text()) == []
    v13 = next(r for r in results if (r["level"], r["M"], r["dtype"]) == ("v13", 4096, "float16"))
    assert lines["float16"] == v13["cublas_tflops"]      # the run the table's v13 / cuBLAS reads


def test_roofline_cublas_check_can_fail():
    results, _ = figures.load_results()
    ladder = (figures.ROOT / "docs" / "RESULTS.md").read_text()
    # the old rule, the last result's cuBLAS: v11py's own run, 734.2
    last = {r["dtype"]: r["cublas_tflops"] for r in results if r["M"] == 4096 and r.get("cublas_tflops")}
    assert roofline_cublas_problems(last, ladder) == ["roofline cuBLAS fp16 734.2, the table 727.2"]
    assert roofline_cublas_problems({"float16": 727.2}, "") == ["no 4096³ table row for a dtype the roofline draws"]


def pipeline_ring_problems(level: str, sched: list[dict]) -> list[str]:
    """The pipelines figure's issue times against the mbarrier ring's (same stages and lag): a
    tile the ring issues before the loop or at iteration 0 starts its copy at t = 0, one issued
    at iteration k > 0 when the MMAs of tile k - 1 end."""
    lag = figures.refill_lag(level)
    ring = figures.mbarrier_ring(figures.hgemm_stages(level), len(sched), lag)
    bad = []
    for e, r in zip(sched, ring):
        k = r["issue_at"]
        want = 0.0 if k <= 0 else sched[k - 1]["mma_end"]
        if e["copy_start"] != want:
            bad.append(f"{level} tile {e['tile']}: copy at {e['copy_start']}, the ring issues it at "
                       f"iteration {k} (t = {want})")
    return bad


def test_pipelines_figure_issues_at_the_levels_lag():
    from numba_gemm.hgemm import v10_tma

    assert figures.refill_lag("v10") == v10_tma.CONFIG.tma_lag == 2
    assert "-DHG_TMA_LAG=2" in v10_tma.DEFINES
    sched = figures.level_pipeline("v10")
    assert pipeline_ring_problems("v10", sched) == []
    ahead = v10_tma.CONFIG.stages - v10_tma.CONFIG.tma_lag       # 2 tiles in flight ahead
    assert [e["tile"] for e in sched if e["copy_start"] == 0] == list(range(ahead + 1))
    for e in sched[1:]:     # when tile k's MMAs start, tiles k+1 .. k+ahead are issued, no more
        issued = [x["tile"] for x in sched if x["copy_start"] <= e["mma_start"]]
        assert max(issued) == min(e["tile"] + ahead, len(sched) - 1)
    assert figures.refill_lag("v7") == 1 and pipeline_ring_problems("v7", figures.level_pipeline("v7")) == []


def test_pipeline_ring_check_can_fail():
    old = figures.pipeline_schedule(4)          # the old picture: all 4 stages issued at t = 0
    bad = pipeline_ring_problems("v10", old)
    assert bad[0] == "v10 tile 3: copy at 0.0, the ring issues it at iteration 1 (t = 3.5)"
    assert len(bad) == 7                        # tiles 3..9 each issued one iteration early
