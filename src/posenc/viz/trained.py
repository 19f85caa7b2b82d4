"""Figures of trained tables beside their initialisation: a learned absolute table (rows are
positions) and Shaw's relative key embeddings (rows are clipped distances).

Shape legend: ``p`` rows (positions or relative distances), ``d`` features.

Drawn from the modules ``posenc experiment`` saved (:mod:`posenc.report.trained` loads them); the
cosine similarity of rows is ``posenc.analysis.cosine_distance_matrix`` subtracted from 1.
"""

from __future__ import annotations

from typing import Any

from ._mpl import as_array, new_figure, show_matrix

__all__ = ["table_beside_init"]


def table_beside_init(init: Any, trained: Any, *, rows: Any, row_label: str, title: str) -> Any:
    """Top: the table ``[p, d]`` at initialisation and after training, on one colour scale. Bottom:
    the cosine similarity of every pair of rows ``[p, p]`` for both (structure a trained table
    learned, such as nearby positions getting similar codes). ``rows [p]`` labels the rows."""
    import numpy as np

    init, trained = as_array(init, "init", ndim=2), as_array(trained, "trained", ndim=2)  # [p, d] each
    rows = as_array(rows, "rows", ndim=1)  # [p]
    if init.shape != trained.shape or rows.shape[0] != init.shape[0]:
        raise ValueError(f"init {init.shape}, trained {trained.shape} and rows {rows.shape} do not match")
    figure = new_figure(11.0, 8.6)
    axes = figure.subplots(2, 2)
    top = float(np.abs(np.concatenate([init.ravel(), trained.ravel()])).max()) or 1.0
    extent = (-0.5, init.shape[1] - 0.5, rows[-1] + 0.5, rows[0] - 0.5)
    square = (rows[0] - 0.5, rows[-1] + 0.5, rows[-1] + 0.5, rows[0] - 0.5)
    for column, (table, words) in enumerate(((init, "at initialisation"), (trained, "after training"))):
        ax = axes[0, column]
        image = show_matrix(ax, table, cmap="RdBu_r", vmin=-top, vmax=top, extent=extent)
        figure.colorbar(image, ax=ax, label="value")
        ax.set_title(f"table {words}", fontsize=10)
        ax.set_xlabel("feature")
        ax.set_ylabel(row_label)
        unit = table / np.maximum(np.linalg.norm(table, axis=1, keepdims=True), 1e-12)
        ax = axes[1, column]
        image = show_matrix(ax, unit @ unit.T, cmap="RdBu_r", vmin=-1, vmax=1, extent=square)
        figure.colorbar(image, ax=ax, label="cosine similarity of rows")
        ax.set_title(f"cosine similarity between rows, {words}", fontsize=10)
        ax.set_xlabel(row_label)
        ax.set_ylabel(row_label)
    figure.suptitle(title)
    return figure
