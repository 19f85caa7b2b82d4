"""Three pictures from the founding articles, drawn from :mod:`posenc.analysis.articles`: two
cosine waves read at nearby and distant positions (Pim 2023), Shaw et al.'s clipped relative index
(“A Brief Summary on Positional Encoding Methods”) and a word embedding plus or concatenated with
its position code (Shibuya 2021).

Shape legend: ``w`` wave samples, ``p`` marked positions, ``d`` widths.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._mpl import as_array, new_figure

__all__ = ["two_waves_figure", "clipped_index_figure", "add_or_concatenate_figure"]


def two_waves_figure(data: Mapping[str, Any], *, title: str) -> Any:
    """Left: the slow and the fast wave, a vertical line at each marked position and a horizontal
    line at each reading. Right: the marked positions as 2-D codes (slow reading, fast reading)."""
    grid = as_array(data["grid"], "grid", ndim=1)  # [w]
    codes = as_array(data["codes"], "codes", ndim=2)  # [p, 2]
    positions = [int(p) for p in as_array(data["positions"], "positions", ndim=1)]
    figure = new_figure(11.5, 4.4)
    left, right = figure.subplots(1, 2, gridspec_kw={"width_ratios": [1.8, 1]})
    slow, fast = data["frequencies"]
    left.plot(grid, as_array(data["waves"]["slow"], "slow"), color="C0", lw=1.8, label=f"slow wave cos({slow:g}·p)")
    left.plot(grid, as_array(data["waves"]["fast"], "fast"), color="C1", lw=1.2, label=f"fast wave cos({fast:g}·p)")
    marks = ["C3", "C2", "C4", "C5", "C6"]
    for j, (p, (a, b)) in enumerate(zip(positions, codes)):
        colour = marks[j % len(marks)]
        left.axvline(p, color=colour, lw=1.2)
        for value, wave in ((a, "C0"), (b, "C1")):
            left.plot([0, p], [value, value], color=wave, lw=0.8, ls=":")
            left.plot([p], [value], marker="o", color=colour, ms=5)
        right.scatter([a], [b], color=colour, s=60, zorder=3)
        right.annotate(f"p = {p}", (a, b), textcoords="offset points", xytext=(6, 6), fontsize=10, color=colour)
    left.set_xlabel("position p")
    left.set_ylabel("value read off the wave")
    left.set_title("nearby positions: close on the slow wave, apart on the fast one", fontsize=10)
    left.legend(fontsize=9, loc="lower left")
    distances = as_array(data["distances"], "distances", ndim=2)
    words = "\n".join(
        f"p = {positions[i]} to {positions[j]}: {distances[i, j]:.2f}"
        for i in range(len(positions))
        for j in range(i + 1, len(positions))
    )
    right.text(0.03, 0.03, "distance between codes\n" + words, transform=right.transAxes, fontsize=9, va="bottom")
    right.set_title("the 2-D codes: nearby positions stay close", fontsize=10)
    right.set_xlabel("slow reading")
    right.set_ylabel("fast reading")
    right.set_xlim(-1.15, 1.15)
    right.set_ylim(-1.15, 1.15)
    right.set_aspect("equal")
    right.grid(alpha=0.3)
    figure.suptitle(title)
    return figure


def clipped_index_figure(index: Any, *, max_relative_position: int, title: str) -> Any:
    """The ``[m, n]`` matrix of ``clip(n - m, -K, K)`` with each cell's value written in it."""
    index = as_array(index, "index", ndim=2)  # [m, n]
    k = max_relative_position
    figure = new_figure(6.2, 5.6)
    ax = figure.add_subplot()
    image = ax.imshow(index, cmap="RdBu_r", vmin=-k - 0.5, vmax=k + 0.5, interpolation="nearest")
    for m in range(index.shape[0]):
        for n in range(index.shape[1]):
            edge = abs(index[m, n]) == k
            ax.text(
                n,
                m,
                f"{int(index[m, n])}",
                ha="center",
                va="center",
                fontsize=10,
                fontweight="bold" if edge else "normal",
                color="white" if edge else "black",
            )
    figure.colorbar(image, ax=ax, label="embedding index r = clip(n − m, −K, K)", ticks=range(-k, k + 1))
    ax.set_xlabel("key position n")
    ax.set_ylabel("query position m")
    ax.set_title(f"K = {k}: {2 * k + 1} embeddings; bold cells clipped", fontsize=10)
    figure.suptitle(title)
    return figure


def add_or_concatenate_figure(data: Mapping[str, Any], *, title: str) -> Any:
    """Rows of coloured cells with their values: the word embedding and the position code, their
    element-wise sum (same width, as Vaswani et al.) and their concatenation (twice the width)."""
    import numpy as np

    word, code = as_array(data["word"], "word", ndim=1), as_array(data["code"], "code", ndim=1)
    total, joined = as_array(data["sum"], "sum", ndim=1), as_array(data["concat"], "concat", ndim=1)
    d = word.shape[0]
    rows = [
        (word, "word embedding x"),
        (code, f"position code PE({data['position']})"),
        (total, "added: x + PE (width d)"),
        (joined, "concatenated: [x ; PE] (width 2d)"),
    ]
    figure = new_figure(11.0, 4.2)
    ax = figure.add_subplot()
    from matplotlib import colormaps
    from matplotlib.patches import Rectangle

    cmap = colormaps["RdBu_r"]
    top = float(np.abs(np.concatenate([word, code, total])).max())
    for r, (values, label) in enumerate(rows):
        y = len(rows) - 1 - r
        for i, value in enumerate(values):
            is_code = label.startswith("concatenated") and i >= d or label.startswith("position")
            ax.add_patch(
                Rectangle((i, y + 0.1), 0.95, 0.8, fc=cmap(0.5 + 0.5 * value / top), ec="0.3" if is_code else "0.7")
            )
            dark = abs(value) > 0.6 * top
            ax.text(
                i + 0.475,
                y + 0.5,
                f"{value:.2f}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if dark else "black",
            )
        ax.text(-0.3, y + 0.5, label, ha="right", va="center", fontsize=10)
    ax.set_xlim(-7.5, 2 * d + 0.2)
    ax.set_ylim(-0.1, len(rows) + 0.1)
    ax.axis("off")
    figure.suptitle(title)
    return figure
