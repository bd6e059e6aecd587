"""The figures of docs/: every picture drawn from the package's own code.

    python -m numba_gemm.explain.figures                 # all figures into docs/figures/
    python -m numba_gemm.explain.figures banks swizzle   # some of them
    python -m numba_gemm.explain.figures --out DIR --results FILE.json

    data        the concept figures' data: pure functions of the level modules, the ledgers and
                numba_gemm.hgemm._common (tested without matplotlib)
    draw        the concept figures, drawn from data (matplotlib: the `plot` extra,
                `pip install -e ".[plot]"`, imported only when a figure is drawn)
    tensor_data the tensor-core rungs' figures' data (mma.sync fragments and ldmatrix, TMA boxes,
                v12's roles and registers, v13's multicast and schedule, the epilogue overlap),
                from numba_gemm.ptx, numba_gemm.hgemm and the constants of the native sources
    tensor_draw their drawing
    variant_data the side rungs' figures' data (k3c's coarsening, the split-K levels' slices and
                reduction, k9st's stream-K schedule, v11r's register-staged loads), from those
                levels' own plans and models
    variant_draw their drawing
    measured    the roofline, the ladder and the size curve, from bench.py --json output (the
                committed input is the manifest docs/data/h200_ladder.json; its forms are in
                that module's docstring)

Every name a caller uses is importable from here (`figures.load_results`, `figures.build`).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .data import (bank_examples, bank_grid, first_wave, hgemm_stages, k6_loader_map, launch_order,
                   mbarrier_ring, phase_timeline, pipeline_schedule, level_pipeline, refill_lag, segments_of, swizzle_map,
                   thread_operands, tile_reads, warp_accesses, warp_tiling, wave_panels,
                   wgmma_tile_layout)
from .draw import (PNG, draw_banks, draw_k6_loaders, draw_k8_timeline, draw_launch_order,
                   draw_mbarrier_ring, draw_outer, draw_pipelines, draw_segments, draw_swizzle,
                   draw_tiles, draw_warp_tiling, draw_wgmma_tile)
from .tensor_data import (epilogue_timeline, mma_fragments, native_constants, tma_boxes, v12_roles,
                          v13_multicast, v13_schedule)
from .tensor_draw import (draw_epilogue_overlap, draw_mma_fragments, draw_tma_box, draw_v12_roles,
                          draw_v13_cluster)
from .variant_data import (RAGGED_SHAPE, SPLITK_SHAPES, STREAMK_SHAPE, STREAMK_SLOTS, coarsening, reduction_terms,
                           splitk_plan, splitk_plans, staged_loads, stream_schedule)
from .variant_draw import draw_coarsening, draw_splitk, draw_staged_loads, draw_streamk
from .measured import (CURVE_JSON, DATA_DIR, RESULTS_JSON, ROOT, compute_roof, cublas_lines, draw_curve,
                       draw_ladder, draw_roofline, label_boxes, label_layout, ladder_chart,
                       load_results, roof_label, roofline_points, tensor_ceilings, tile_intensity,
                       tile_model_points)

FIGURES_DIR = ROOT / "docs" / "figures"

FIGURES = {
    "segments": ("k1_k2_segments.png", draw_segments),
    "tiles": ("k3_tiles.png", draw_tiles),
    "outer": ("k3_k6_outer_product.png", draw_outer),
    "warptile": ("k7_warp_tiling.png", draw_warp_tiling),
    "banks": ("banks.png", draw_banks),
    "swizzle": ("v8_swizzle.png", draw_swizzle),
    "launch": ("v9_launch_order.png", draw_launch_order),
    "pipelines": ("v7_v10_pipelines.png", draw_pipelines),
    "roofline": ("roofline.png", draw_roofline),
    "ladder": ("ladder.png", draw_ladder),
    "curve": ("size_curve.png", draw_curve),
    "loaders": ("k6_loaders.png", draw_k6_loaders),
    "k8timeline": ("k8_timeline.png", draw_k8_timeline),
    "wgmma": ("v11_wgmma_tile.png", draw_wgmma_tile),
    "mbarrier": ("v10_v13_mbarrier_ring.png", draw_mbarrier_ring),
    "fragments": ("v8_mma_fragments.png", draw_mma_fragments),
    "tmabox": ("v10_tma_box.png", draw_tma_box),
    "roles": ("v12_roles.png", draw_v12_roles),
    "cluster": ("v13_cluster.png", draw_v13_cluster),
    "epilogue": ("v12_v13_epilogue.png", draw_epilogue_overlap),
    "coarsen": ("k3c_coarsening.png", draw_coarsening),
    "splitk": ("splitk.png", draw_splitk),
    "streamk": ("k9st_streamk.png", draw_streamk),
    "staged": ("v11r_staged_loads.png", draw_staged_loads),
}
MEASURED = ("roofline", "ladder")   # drawn from --results; the curve from CURVE_JSON


def build(names=None, out: Path = FIGURES_DIR, results: Path = RESULTS_JSON) -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names or FIGURES:
        if name not in FIGURES:
            raise SystemExit(f"unknown figure {name!r}: one of {', '.join(FIGURES)}")
        fname, draw_figure = FIGURES[name]
        path = out / fname
        draw_figure(path, results) if name in MEASURED else draw_figure(path)
        written.append(path)
    return written


def main(argv=None):
    p = argparse.ArgumentParser(description="Draw the figures of docs/ from the package's code.")
    p.add_argument("names", nargs="*", help=f"figures to draw (default: all): {', '.join(FIGURES)}")
    p.add_argument("--out", default=str(FIGURES_DIR), help="output folder (default: %(default)s)")
    p.add_argument("--results", default=str(RESULTS_JSON),
                   help="bench.py --json file for the measured figures (default: %(default)s)")
    args = p.parse_args(argv)
    for path in build(args.names, Path(args.out), Path(args.results)):
        print(path)


__all__ = [
    "warp_accesses", "segments_of", "tile_reads", "thread_operands", "warp_tiling", "bank_grid",
    "bank_examples", "swizzle_map", "launch_order", "first_wave", "wave_panels", "hgemm_stages",
    "pipeline_schedule", "level_pipeline", "refill_lag", "k6_loader_map", "wgmma_tile_layout", "mbarrier_ring", "phase_timeline",
    "draw_segments", "draw_tiles", "draw_outer", "draw_warp_tiling", "draw_banks", "draw_swizzle",
    "draw_launch_order", "draw_pipelines", "draw_k6_loaders", "draw_k8_timeline",
    "draw_wgmma_tile", "draw_mbarrier_ring", "native_constants", "mma_fragments", "tma_boxes",
    "v12_roles", "v13_multicast", "v13_schedule", "epilogue_timeline", "draw_mma_fragments",
    "draw_tma_box", "draw_v12_roles", "draw_v13_cluster", "draw_epilogue_overlap",
    "coarsening", "splitk_plan", "splitk_plans", "reduction_terms", "staged_loads", "SPLITK_SHAPES",
    "RAGGED_SHAPE", "STREAMK_SHAPE", "STREAMK_SLOTS", "stream_schedule", "draw_coarsening", "draw_splitk",
    "draw_streamk", "draw_staged_loads", "PNG", "ROOT", "DATA_DIR", "RESULTS_JSON",
    "CURVE_JSON", "load_results", "tensor_ceilings", "compute_roof", "tile_intensity",
    "roofline_points", "cublas_lines", "tile_model_points", "roof_label", "label_layout", "label_boxes", "draw_roofline", "draw_ladder",
    "ladder_chart", "draw_curve", "FIGURES_DIR", "FIGURES", "MEASURED", "build", "main",
]
