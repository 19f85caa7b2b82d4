"""Figures of how positions relate to each other: position-by-position matrices (dot products,
cosine distances), distance from one position against position, and a 2D projection.

Shape legend: ``p`` positions, ``n`` projected points.

Each function draws data computed by :mod:`posenc.analysis` (Pim 2023's distance
scatter, distance matrix and projection; Kazemnejad 2019's dot-product matrix).
"""

from __future__ import annotations

from typing import Any

from ._mpl import as_array, integer_ticks, new_figure, show_matrix

__all__ = ["position_matrix", "distance_from_position", "projection_2d", "grid_distance"]


def position_matrix(
    matrix: Any,
    *,
    title: str,
    colorbar_label: str,
    first_position: int = 0,
    cmap: str = "viridis",
    vmin: float | None = None,
) -> Any:
    """Heatmap of a ``[p, p]`` matrix between positions (rows: position i, columns: position j);
    ``vmin`` pins the bottom of the colour scale (0 for distances, which a constant matrix would
    otherwise centre on a symmetric range with negative values)."""
    import numpy as np

    matrix = as_array(matrix, "matrix", ndim=2)  # [p, p]
    p, q = matrix.shape
    figure = new_figure(5.6, 4.6)
    ax = figure.add_subplot()
    vmax = None
    if vmin is not None:
        finite = matrix[np.isfinite(matrix)]
        top = float(finite.max()) if finite.size else vmin
        vmax = top if top > vmin else vmin + 1.0  # all at vmin: a scale above it
    image = show_matrix(
        ax,
        matrix,
        cmap=cmap,
        aspect="equal",
        vmin=vmin,
        vmax=vmax,
        extent=(first_position - 0.5, first_position + q - 0.5, first_position + p - 0.5, first_position - 0.5),
    )
    integer_ticks(ax)
    ax.set_xlabel("position j")
    ax.set_ylabel("position i")
    ax.set_title(title)
    figure.colorbar(image, ax=ax, label=colorbar_label)
    return figure


def distance_from_position(
    positions: Any, distances: Any, *, reference: int, title: str, ylabel: str = "cosine distance"
) -> Any:
    """Scatter of ``distances [p]`` from position ``reference`` against ``positions [p]``."""
    positions = as_array(positions, "positions", ndim=1)  # [p]
    distances = as_array(distances, "distances", ndim=1)  # [p]
    if positions.shape != distances.shape:
        raise ValueError(f"positions and distances differ in length: {positions.shape} vs {distances.shape}")
    figure = new_figure(6.4, 3.8)
    ax = figure.add_subplot()
    ax.plot(positions, distances, color="0.8", lw=1, zorder=1)
    ax.scatter(positions, distances, s=9, c=positions, cmap="viridis", zorder=2)
    ax.axvline(reference, color="crimson", lw=1, ls=":", label=f"position {reference}")
    import numpy as np

    finite = distances[np.isfinite(distances)]
    if finite.size and float(finite.max() - finite.min()) < 0.1:  # round-off must not look like signal
        middle = float(finite.mean())
        ax.set_ylim(middle - 0.05, middle + 0.05)
    ax.set_xlabel("position")
    ax.set_ylabel(f"{ylabel} from position {reference}")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    return figure


def projection_2d(points: Any, positions: Any, *, method: str = "PCA", title: str = "2D projection") -> Any:
    """Scatter of ``points [n, 2]`` (a projection of the codes) coloured by position ``[n]``."""
    points = as_array(points, "points", ndim=2)  # [n, 2]
    positions = as_array(positions, "positions", ndim=1)  # [n]
    if points.shape != (positions.shape[0], 2):
        raise ValueError(f"need points [n, 2] for n={positions.shape[0]} positions, got {points.shape}")
    figure = new_figure(5.8, 4.8)
    ax = figure.add_subplot()
    ax.plot(points[:, 0], points[:, 1], color="0.88", lw=0.6, zorder=1)
    scatter = ax.scatter(points[:, 0], points[:, 1], c=positions, cmap="viridis", s=7, zorder=2)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(5))  # long tick labels (-0.075) ran into each other
    ax.yaxis.set_major_locator(MaxNLocator(6))
    ax.set_xlabel(f"{method} component 1")
    flat = points.shape[0] > 1 and not points[:, 1].any()
    ax.set_ylabel(f"{method} component 2" + (" (0: the codes lie on a line)" if flat else ""))
    ax.set_title(f"{title} ({method}, {points.shape[0]} positions)")
    figure.colorbar(scatter, ax=ax, label="position")
    return figure


def grid_distance(
    maps: Any, cells: list[tuple[int, int]], *, title: str, colorbar_label: str = "cosine distance"
) -> Any:
    """One panel per reference cell: ``maps [m, rows, cols]`` holds the distance from ``cells[m]``
    (row, column) to every cell of a grid of 2-D positions (image patches)."""
    maps = as_array(maps, "maps", ndim=3)  # [m, rows, cols]
    if maps.shape[0] != len(cells):
        raise ValueError(f"need one map per reference cell, got {maps.shape[0]} maps for {len(cells)} cells")
    figure = new_figure(4.6 * len(cells) + 0.8, 4.2)
    axes = figure.subplots(1, len(cells), squeeze=False)[0]
    high = float(maps.max()) if maps.size else 1.0
    image = None
    for ax, distance, (row, col) in zip(axes, maps, cells):
        image = show_matrix(ax, distance, cmap="viridis", vmin=0.0, vmax=high, aspect="equal")
        ax.scatter([col], [row], marker="x", color="crimson", s=60)
        integer_ticks(ax)
        ax.set_xlabel("column (axis 1)")
        ax.set_ylabel("row (axis 0)")
        ax.set_title(f"from cell ({row}, {col})")
    if image is not None:
        figure.colorbar(image, ax=list(axes), label=colorbar_label, shrink=0.9)
    figure.suptitle(title)
    return figure
