"""The bias against distance, one line per head, in one or more panels side by side (queries further
out, or encodings after training), with a band where the bias depends on the input.

Shape legend: ``h`` heads, ``D`` distances.

Draws the data of :func:`posenc.analysis.bias.bias_against_distance`; a head keeps its colour in
every panel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._mpl import as_array, new_figure

__all__ = ["BiasPanel", "bias_panels", "bias_figure"]


@dataclass
class BiasPanel:
    """One panel: ``lines`` holds ``[h, D]`` arrays (the first drawn bold, the others thin: more
    seeds of the same run); ``low``/``high`` ``[h, D]`` shade a band around each head's line."""

    title: str
    distances: Any
    lines: Sequence[Any]
    low: Any | None = None
    high: Any | None = None
    labels: Sequence[str] = field(default_factory=list)  # one per head; "head h" by default


def bias_panels(
    panels: Sequence[BiasPanel],
    *,
    title: str,
    ylabel: str = "bias added to the logit",
    xlabel: str = "distance i − j (key j behind query i)",
    band_label: str = "",
    thin_label: str = "",
) -> Any:
    """A figure with one panel per entry of ``panels``, each with its own y-axis (trained biases can
    be far larger than at initialisation), and the heads' legend once, beside the last panel."""
    if not panels:
        raise ValueError("bias_panels needs at least one panel")
    from matplotlib import colormaps
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    cmap = colormaps["viridis"]
    width = 4.2 * len(panels) + 1.6
    figure = new_figure(max(width, 6.6), 3.9)
    axes = figure.subplots(1, len(panels), squeeze=False)[0]
    heads = 0
    for ax, panel in zip(axes, panels):
        distances = as_array(panel.distances, "distances", ndim=1)  # [D]
        lines = [as_array(v, "lines", ndim=2) for v in panel.lines]  # each [h, D]
        if not lines or any(v.shape[1] != distances.shape[0] for v in lines):
            raise ValueError(f"panel {panel.title!r}: each line set must be [heads, {distances.shape[0]}]")
        h = lines[0].shape[0]
        heads = max(heads, h)
        colours = [cmap(0.9 * j / max(h - 1, 1)) if h > 1 else "C0" for j in range(h)]
        if panel.low is not None and panel.high is not None:
            low, high = as_array(panel.low, "low", ndim=2), as_array(panel.high, "high", ndim=2)  # [h, D]
            for j in range(h):
                ax.fill_between(distances, low[j], high[j], color=colours[j], alpha=0.15, lw=0)
        for extra in lines[1:]:
            for j in range(min(h, extra.shape[0])):
                ax.plot(distances, extra[j], color=colours[j], lw=0.7, alpha=0.6)
        for j in range(h):
            ax.plot(distances, lines[0][j], color=colours[j], lw=1.6)
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_title(panel.title, fontsize=10)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    labels = list(panels[-1].labels) or [f"head {j}" for j in range(heads)]
    every = -(-len(labels) // 12)  # at most ~12 legend entries
    h_last = len(labels)
    handles = [
        Line2D([], [], color=cmap(0.9 * j / max(h_last - 1, 1)) if h_last > 1 else "C0", lw=1.6, label=label)
        for j, label in enumerate(labels)
        if j % every == 0 or j == h_last - 1
    ]
    if thin_label:
        handles.append(Line2D([], [], color="0.4", lw=0.7, alpha=0.6, label=thin_label))
    if band_label:
        handles.append(Patch(color="0.4", alpha=0.15, label=band_label))
    axes[-1].legend(handles=handles, fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5), frameon=False)
    figure.suptitle(title, fontsize=11)
    return figure


def bias_figure(runs: Sequence[dict[str, Any]], *, title: str, label: str = "") -> Any:
    """The figure of :func:`~posenc.analysis.bias.bias_against_distance`'s data: ``runs`` holds one
    result per seed of the same configuration (the first bold, the others thin); ``label`` starts
    each panel's title (the task a trained encoding learnt). A bias that depends on the query
    position gets a panel per query drawn; a data-dependent one its mean with the quantile band."""
    if not runs:
        raise ValueError("bias_figure needs at least one result of bias_against_distance")
    first = runs[0]
    prefix = f"{label}: " if label else ""
    thin = f"other seeds ({len(runs) - 1})" if len(runs) > 1 else ""
    if first["data_dependent"]:
        heads = first["heads"]
        panel = BiasPanel(
            f"{prefix}mean over inputs and queries",
            first["distances"],
            [run["mean"] for run in runs],
            low=first["low"],
            high=first["high"],
            labels=["every head alike"] if heads == 1 else [],
        )
        from ..analysis.bias import QUANTILES

        low, high = (round(100 * q) for q in QUANTILES)
        return bias_panels([panel], title=title, band_label=f"{low}–{high} % quantiles", thin_label=thin)
    panels = []
    for k, query in enumerate(first["queries"]):
        lines = [run["values"][k] for run in runs if k < len(run["values"])]
        distances = list(range(query + 1))
        panels.append(BiasPanel(f"{prefix}query at i = {query}", distances, lines))
    return bias_panels(panels, title=title, thin_label=thin)
