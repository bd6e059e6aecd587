"""bench.py --plot: the ladder as a bar chart, TFLOPS per level, with cuBLAS as a line and each
level's roofline (its bytes ledger on the H200: min(peak, intensity × bandwidth)) as a tick."""
from __future__ import annotations


def roofline_tflops(level: str, shape: tuple[int, int, int], card: str = "h200") -> float:
    from .ledgers import bytes_ledger

    b = bytes_ledger(level, card, shape)
    return b.flops / b.roofline_s / 1e12


def plot_ladder(results, path: str, card: str = "h200") -> None:
    """One panel per shape and dtype."""
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
    width = max(map(len, groups.values()))
    fig, axes = plt.subplots(1, len(groups), figsize=(len(groups) * (1.5 + 0.65 * width), 4.6),
                             squeeze=False)
    try:
        _draw(fig, axes, groups, card)
        fig.savefig(path, dpi=120)
    finally:   # pyplot keeps every open figure: a notebook would show it again, a loop leak it
        plt.close(fig)


def _draw(fig, axes, groups, card: str) -> None:
    for ax, ((M, N, K, dtype), rs) in zip(axes[0], groups.items()):
        ax.bar([r.level for r in rs], [r.tflops for r in rs], color="#4c72b0")
        for i, r in enumerate(rs):
            ax.annotate(f"{r.tflops:.1f}", (i, r.tflops), ha="center", va="bottom", fontsize=8)
        cub = [r.cublas_tflops for r in rs if r.cublas_tflops]
        if cub:
            ax.axhline(cub[0], color="#c44e52", ls="--", label=f"cuBLAS {cub[0]:.1f}")
        roof = [roofline_tflops(r.level, (M, N, K), card) for r in rs]
        ax.scatter(range(len(rs)), roof, marker="_", s=400, color="black", zorder=3,
                   label=f"roofline ({card.upper()} bytes ledger)")
        ax.set_yscale("log")
        ax.set_title(f"{M}×{N}×{K} {dtype}", fontsize=10)
        ax.set_ylabel("TFLOPS")
        ax.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
