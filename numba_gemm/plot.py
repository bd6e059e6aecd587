"""bench.py --plot: the ladder as a bar chart, TFLOPS per level, with cuBLAS as a line."""
from __future__ import annotations


def plot_ladder(results, path: str, roofline_tflops: dict | None = None) -> None:
    """One panel per shape and dtype; roofline_tflops optionally maps a dtype to its ceiling."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install 'numba_gemm[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in results if r.tflops]
    if not timed:
        raise SystemExit("--plot needs timings, and timings need a GPU")
    groups = {}
    for r in timed:
        groups.setdefault((r.M, r.N, r.K, r.dtype), []).append(r)
    fig, axes = plt.subplots(1, len(groups), figsize=(5 + 0.6 * max(map(len, groups.values())), 4.2),
                             squeeze=False)
    for ax, ((M, N, K, dtype), rs) in zip(axes[0], groups.items()):
        ax.bar([r.level for r in rs], [r.tflops for r in rs], color="#4c72b0")
        for i, r in enumerate(rs):
            ax.annotate(f"{r.tflops:.1f}", (i, r.tflops), ha="center", va="bottom", fontsize=8)
        cub = [r.cublas_tflops for r in rs if r.cublas_tflops]
        if cub:
            ax.axhline(cub[0], color="#c44e52", ls="--", label=f"cuBLAS {cub[0]:.1f}")
        if roofline_tflops and dtype in roofline_tflops:
            ax.axhline(roofline_tflops[dtype], color="gray", ls=":", label="roofline")
        ax.set_title(f"{M}×{N}×{K} {dtype}")
        ax.set_ylabel("TFLOPS")
        ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
