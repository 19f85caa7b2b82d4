"""Figures of relative schemes: the attention logit against distance, T5's bucket map, ALiBi's
slopes per head.

Shape legend: ``r`` relative distances, ``h`` heads, ``sq``/``sk`` query/key positions.

Each function draws data computed by :mod:`posenc.analysis`: RoPE's long-term decay (Su et al.
2021, section 3.4.3), ALiBi's linear penalties (Press et al. 2022, section 3), T5's buckets
(Raffel et al. 2020, section 2.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._mpl import as_array, integer_ticks, new_figure, show_matrix

__all__ = ["logits_vs_distance", "rotary_decay", "t5_bucket_map", "alibi_slopes"]


def logits_vs_distance(
    distances: Any,
    curves: Mapping[str, Any],
    *,
    title: str,
    ylabel: str = "attention logit",
    xlabel: str = "distance t (query at t, key at 0)",
    steps: bool = False,
    mark: float | None = None,
    mark_label: str = "",
) -> Any:
    """One line per entry of ``curves`` (label → values ``[r]``) against ``distances [r]``.

    ``steps=True`` draws step lines (T5's piecewise-constant buckets); ``mark`` draws a dotted
    vertical line there (e.g. Shaw's clipping distance), labelled ``mark_label``.
    """
    distances = as_array(distances, "distances", ndim=1)  # [r]
    if not curves:
        raise ValueError("logits_vs_distance needs at least one curve")
    figure = new_figure(6.6, 4.0)
    ax = figure.add_subplot()
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    n = len(curves)
    every = -(-n // 12)  # at most ~12 legend entries: 64 heads would squash the axes into a strip
    for j, (label, values) in enumerate(curves.items()):
        values = as_array(values, f"curve {label!r}", ndim=1)  # [r]
        if values.shape != distances.shape:
            raise ValueError(f"curve {label!r} has {values.shape[0]} values for {distances.shape[0]} distances")
        colour = cmap(0.9 * j / max(n - 1, 1)) if n > 1 else "C0"
        shown = j % every == 0 or j == n - 1
        ax.plot(
            distances,
            values,
            label=label if shown else "_nolegend_",
            color=colour,
            lw=1.6,
            drawstyle="steps-mid" if steps else "default",
        )
    ax.axhline(0, color="0.6", lw=0.8)
    if mark is not None:
        ax.axvline(mark, color="crimson", ls=":", lw=1.2, label=mark_label or None)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, ncol=2 if n > 6 else 1, loc="best")
    return figure


def rotary_decay(
    distances: Any,
    mean: Any,
    std: Any | None = None,
    bound: Any | None = None,
    *,
    title: str,
    xlabel: str = "distance t (query at t, key at 0)",
) -> Any:
    """RoPE's decay with distance: the mean logit ``[r]`` over random q = k (± one std as a band)
    and, in a second panel, RoFormer's relative upper bound ``[r]`` (Su et al. 2021, §3.4.3, fig. 2)."""
    distances = as_array(distances, "distances", ndim=1)  # [r]
    mean = as_array(mean, "mean", ndim=1)  # [r]
    figure = new_figure(10.0 if bound is not None else 6.4, 3.8)
    axes = figure.subplots(1, 2 if bound is not None else 1, squeeze=False)[0]
    ax = axes[0]
    if std is not None:
        std = as_array(std, "std", ndim=1)  # [r]
        ax.fill_between(distances, mean - std, mean + std, color="C0", alpha=0.18, lw=0, label="± one std over draws")
    ax.plot(distances, mean, color="C0", lw=1.6, label="mean logit, q = k ~ N(0, I)")
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("logit  R(t)q · k / d")
    ax.set_title("same content at distance t")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    if bound is not None:
        bound = as_array(bound, "bound", ndim=1)  # [r]
        right = axes[1]
        right.plot(distances, bound, color="C3", lw=1.6)
        right.set_xlabel(xlabel)
        right.set_ylabel("relative upper bound  mean_j |S_j|")
        right.set_title("RoFormer §3.4.3 bound (falls, not monotonically)")
        right.grid(alpha=0.3)
    figure.suptitle(title)
    return figure


def t5_bucket_map(
    relative_positions: Any,
    buckets: Any,
    *,
    num_buckets: int,
    max_exact: int,
    max_distance: int,
    grid: int = 64,
    title: str = "T5 relative-position buckets",
) -> Any:
    """T5's bucket against relative position ``[R]`` (steps), beside the ``[grid, grid]`` map of
    bucket(key − query) for the first ``grid`` positions (Raffel et al. 2020, §2.1)."""
    import numpy as np
    from matplotlib import colormaps

    relative = as_array(relative_positions, "relative_positions", ndim=1).astype(np.int64)  # [R]
    buckets = as_array(buckets, "buckets", ndim=1)  # [R]
    if relative.shape != buckets.shape:
        raise ValueError(f"relative_positions and buckets differ in length: {relative.shape} vs {buckets.shape}")
    lookup = dict(zip(relative.tolist(), buckets.tolist()))
    span = min(grid, int(relative.max()) + 1)
    offsets = np.arange(span)[None, :] - np.arange(span)[:, None]  # [q, k]: key − query
    matrix = np.vectorize(lambda r: lookup.get(int(r), np.nan))(offsets)  # [q, k]
    figure = new_figure(11.0, 4.2)
    left, right = figure.subplots(1, 2, gridspec_kw={"width_ratios": [1.3, 1]})
    left.plot(relative, buckets, drawstyle="steps-mid", color="C0", lw=1.4)
    for edge in (-max_distance, -max_exact, max_exact, max_distance):
        left.axvline(edge, color="0.6", ls=":", lw=1)
    left.axvspan(-max_exact, max_exact, color="C2", alpha=0.12, label=f"exact buckets (|t| < {max_exact})")
    left.set_xlabel("relative position t = key − query")
    left.set_ylabel("bucket index")
    left.set_title(f"{num_buckets} buckets, log-spaced up to ±{max_distance} (dotted)")
    left.grid(alpha=0.3)
    left.legend(fontsize=8, loc="upper left")
    cmap = colormaps["turbo"].resampled(num_buckets)
    image = show_matrix(right, matrix, cmap=cmap, vmin=-0.5, vmax=num_buckets - 0.5, aspect="equal")
    integer_ticks(right)
    right.set_xlabel("key position")
    right.set_ylabel("query position")
    right.set_title(f"bucket of every (query, key), first {span} positions")
    step = max(1, num_buckets // 8)
    figure.colorbar(image, ax=right, label="bucket index", ticks=list(range(0, num_buckets, step)))
    figure.suptitle(title)
    return figure


def alibi_slopes(slopes: Any, *, title: str = "ALiBi slope per head") -> Any:
    """Bar chart of the slopes ``[h]`` (log scale), each bar labelled with its value."""
    slopes = as_array(slopes, "slopes", ndim=1)  # [h]
    h = slopes.shape[0]
    figure = new_figure(min(max(4.5, 0.45 * h + 2.0), 9.0), 3.6)  # past ~16 heads the bars narrow, the figure stays
    ax = figure.add_subplot()
    bars = ax.bar(range(h), slopes, color="C0")
    ax.set_yscale("log")
    ax.set_xlabel("head")
    ax.set_ylabel("slope m (log scale)")
    if h <= 32:
        ax.set_xticks(range(h))  # else matplotlib's own sparse integer ticks
    ax.set_title(f"{title} ({h} heads)")
    if h <= 16:
        ax.bar_label(bars, labels=[f"{s:.3g}" for s in slopes], fontsize=8, padding=2)
        low, high = ax.get_ylim()
        ax.set_ylim(low, high * 1.8)  # room for the label of the tallest bar (log scale)
    ax.grid(axis="y", alpha=0.3)
    return figure
