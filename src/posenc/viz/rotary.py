"""Figures of rotary schemes as people study them: q and k turned in one feature plane, the per-pair
wavelength of each context-extension scaling, the same-content logit of each scaling, xPos beside
RoPE, and the same-content logit over a 2-D grid of positions.

Shape legend: ``m`` positions, ``p`` feature pairs, ``D`` distances, ``side`` grid side.

Each function draws data from :mod:`posenc.analysis.rotary` (the formulas and their sources are
cited there).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._mpl import as_array, new_figure, show_matrix

__all__ = ["rotation_figure", "wavelength_figure", "scaling_logits_figure", "decay_beside_figure", "grid_logits"]

#: One colour per scaling, the same in every figure (tab10 order).
_RULE_COLOURS = {
    "default": "black",
    "linear": "C0",
    "ntk": "C1",
    "dynamic": "C2",
    "yarn": "C3",
    "llama3": "C4",
    "longrope": "C5",
    "proportional": "C7",
}


def rotation_figure(data: Mapping[str, Any], *, title: str) -> Any:
    """Left: q and k in the plane of one feature pair at a few positions (q at m, k at n, both turned
    by their position times θ). Right: the score ``q_m · k_n`` of all position pairs, constant along
    each diagonal because it depends on ``m - n`` alone."""
    import numpy as np

    q, k = as_array(data["q_plane"], "q_plane", ndim=2), as_array(data["k_plane"], "k_plane", ndim=2)  # [m, 2]
    scores = as_array(data["scores"], "scores", ndim=2)  # [m, m]
    figure = new_figure(11.0, 4.6)
    left, right = figure.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.15]})
    m, n, shift = 6, 2, 9  # q at m, k at n; then both moved on by shift
    for qm, kn, alpha, tag in ((m, n, 1.0, ""), (m + shift, n + shift, 0.45, "'")):
        for vec, colour, name, pos in ((q[qm], "C3", "q", qm), (k[kn], "C0", "k", kn)):
            left.annotate(
                "", xy=vec, xytext=(0, 0), arrowprops={"arrowstyle": "-|>", "color": colour, "alpha": alpha, "lw": 2}
            )
            left.text(*(vec * 1.08), f"{name} at {pos}{tag}", color=colour, alpha=alpha, fontsize=10, ha="center")
    from matplotlib.patches import Circle

    for vec, colour in ((q, "C3"), (k, "C0")):  # a rotation keeps the length: each stays on its circle
        left.add_patch(Circle((0, 0), float(np.hypot(*vec[0])), fill=False, color=colour, alpha=0.25, ls="--"))
    lim = 1.3 * float(max(np.abs(q).max(), np.abs(k).max()))
    left.set_xlim(-lim, lim)
    left.set_ylim(-lim, lim)
    left.set_aspect("equal")
    left.axhline(0, color="0.8", lw=0.8)
    left.axvline(0, color="0.8", lw=0.8)
    angle = data["angle"]
    left.set_title(
        f"pair {data['pair']} (θ = {angle:.3g} rad per position): the angle between q and k\n"
        f"is (m − n)·θ, the same for positions ({m}, {n}) and ({m + shift}, {n + shift})",
        fontsize=10,
    )
    left.set_xlabel(f"feature {data['pair']}")
    left.set_ylabel("its partner feature")
    _centred(figure, right, scores, "score q_m · k_n")
    right.set_xlabel("key position n")
    right.set_ylabel("query position m")
    right.set_title("q_m · k_n over all features: constant along diagonals", fontsize=10)
    figure.suptitle(title)
    return figure


def _centred(figure: Any, ax: Any, values: Any, label: str) -> None:
    """A matrix on a diverging scale centred on 0, with its colour bar."""
    import numpy as np

    top = float(np.abs(values).max()) or 1.0
    image = show_matrix(ax, values, cmap="RdBu_r", vmin=-top, vmax=top)
    figure.colorbar(image, ax=ax, label=label)


def _rule_label(rule: str, scale: float) -> str:
    return rule if abs(scale - 1) < 1e-12 else f"{rule} (a = {scale:.3f})"


def wavelength_figure(data: Mapping[str, Any], *, title: str) -> Any:
    """Per-pair wavelength (log scale) for each scaling, with the original and extended lengths: a
    pair whose wavelength exceeds the trained length never turned a full circle in training."""
    import numpy as np

    pairs = as_array(data["pairs"], "pairs", ndim=1)  # [p]
    figure = new_figure(11.5, 5.0)
    ax = figure.add_subplot()
    still = []
    for rule, values in data["wavelengths"].items():
        values = as_array(values, f"wavelengths of {rule!r}", ndim=1)  # [p]
        finite = np.isfinite(values)
        if not finite.all():
            still.append(f"{rule}: {int((~finite).sum())} pairs do not rotate")
        ax.plot(
            pairs[finite],
            values[finite],
            color=_RULE_COLOURS.get(rule),
            lw=2.2 if rule == "default" else 1.6,
            ls="--" if rule == "proportional" else "-",
            label=_rule_label(rule, data["attention_scale"][rule]),
        )
    for length, words in ((data["original"], "trained length"), (data["extended"], "extended length")):
        ax.axhline(length, color="0.35", lw=1.0, ls=":")
        ax.text(pairs[-1], length * 1.12, f"{words} {length}", color="0.3", fontsize=9, ha="right")
    ax.set_yscale("log")
    ax.set_xlabel("feature pair i (fast → slow)")
    ax.set_ylabel("wavelength 2π / θ_i (positions per turn)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=9, loc="upper left", title="scaling (a: factor on cos, sin)", title_fontsize=9, framealpha=0.95)
    if still:
        ax.text(0.99, 0.02, "; ".join(still), transform=ax.transAxes, ha="right", fontsize=9, color="0.3")
    figure.suptitle(title)
    return figure


def scaling_logits_figure(data: Mapping[str, Any], *, title: str) -> Any:
    """The same-content logit against distance (log scale) for each scaling, up to the extended length."""
    distances = as_array(data["distances"], "distances", ndim=1)  # [D]
    figure = new_figure(11.5, 5.0)
    ax = figure.add_subplot()
    for rule, values in data["logits"].items():
        ax.plot(
            distances,
            as_array(values, f"logits of {rule!r}", ndim=1),
            color=_RULE_COLOURS.get(rule),
            lw=2.2 if rule == "default" else 1.4,
            ls="--" if rule == "proportional" else "-",
            label=_rule_label(rule, data["attention_scale"][rule]),
        )
    ax.axvline(data["original"], color="0.35", lw=1.0, ls=":")
    ax.text(
        data["original"] * 1.05,
        0.95,
        f"trained length {data['original']}",
        color="0.3",
        fontsize=9,
        va="top",
        transform=ax.get_xaxis_transform(),
    )
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("distance t (query at t, key at 0)")
    ax.set_ylabel("logit of the same content  a² · mean_i cos(t θ_i)\n(mean over log-spaced bins of t)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=9, loc="lower left", title="scaling (a: factor on cos, sin)", title_fontsize=9)
    figure.suptitle(title)
    return figure


def decay_beside_figure(
    distances: Any, curves: Mapping[str, Any], *, title: str, mark: float | None = None, mark_label: str = ""
) -> Any:
    """Same-content logits ``[D]`` of several schemes against distance, on one axis (xPos beside RoPE):
    the first of ``curves`` in colour on top, the others thin and grey behind it."""
    distances = as_array(distances, "distances", ndim=1)  # [D]
    figure = new_figure(11.0, 4.6)
    ax = figure.add_subplot()
    for j, (label, values) in reversed(list(enumerate(curves.items()))):  # the first curve on top
        later = j > 0  # the references behind, thin and grey
        ax.plot(
            distances,
            as_array(values, f"curve {label!r}", ndim=1),
            color="0.6" if later else "C3",
            lw=0.8 if later else 1.8,
            label=label,
        )
    if mark is not None:
        ax.axvline(mark, color="0.4", lw=1.0, ls=":")
        ax.text(mark, 0.97, f" {mark_label}", color="0.3", fontsize=9, va="top", transform=ax.get_xaxis_transform())
    ax.axhline(0, color="0.7", lw=0.8)
    ax.set_xlabel("distance t (query at t, key at 0)")
    ax.set_ylabel("logit of the same content  E[R_t v · R_0 v] / d")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    figure.suptitle(title)
    return figure


def grid_logits(maps: Any, cells: list[tuple[int, int]], *, title: str) -> Any:
    """``[len(cells), side, side]`` maps of the same-content logit between the query at each of
    ``cells`` and a key at every cell of the grid (a multi-axis rotary scheme's 2-D picture)."""
    maps = as_array(maps, "maps", ndim=3)  # [c, side, side]
    figure = new_figure(5.0 * len(cells) + 1.0, 4.6)
    axes = figure.subplots(1, len(cells), squeeze=False)[0]
    low, high = float(maps.min()), float(maps.max())  # one scale over both maps, from their own range
    for ax, values, (row, col) in zip(axes, maps, cells):
        image = show_matrix(ax, values, cmap="viridis", vmin=low, vmax=high)
        figure.colorbar(image, ax=ax, label="same-content logit")
        ax.plot([col], [row], marker="x", color="white", ms=9, mew=2)
        ax.set_title(f"query at (row {row}, column {col})", fontsize=10)
        ax.set_xlabel("key column")
        ax.set_ylabel("key row")
    figure.suptitle(title)
    return figure


def mrope_axes_figure(data: Mapping[str, Any], *, title: str) -> Any:
    """One strip per assignment, a cell per rotary pair coloured by the coordinate it reads (t, h,
    w), over the pairs' wavelengths: which frequencies each axis receives."""
    import numpy as np
    from matplotlib.colors import ListedColormap

    wavelengths = as_array(data["wavelengths"], "wavelengths", ndim=1)  # [p]
    assignments = list(data["axes"].items())
    colours = ListedColormap(["#4c72b0", "#dd8452", "#55a868"])  # t, h, w
    figure = new_figure(11.0, 1.0 + 0.9 * (len(assignments) + 1))
    axes = figure.subplots(
        len(assignments) + 1, 1, sharex=True, gridspec_kw={"height_ratios": [1.6] + [1] * len(assignments)}
    )
    pairs = np.arange(wavelengths.shape[0])
    axes[0].semilogy(pairs, wavelengths, color="0.3", lw=1.5)
    axes[0].set_ylabel("wavelength\n2π/θ_i")
    axes[0].grid(alpha=0.3, which="both")
    for ax, (name, assignment) in zip(axes[1:], assignments):
        values = as_array(assignment, name, ndim=1)[None, :]  # [1, p]
        ax.imshow(
            values,
            cmap=colours,
            vmin=-0.5,
            vmax=2.5,
            aspect="auto",
            interpolation="nearest",
            extent=(-0.5, values.shape[1] - 0.5, 0, 1),
        )
        counts = [int((values == a).sum()) for a in range(3)]
        ax.set_yticks([])
        ax.set_ylabel(name, rotation=0, ha="right", va="center", fontsize=9)
        ax.set_title(f"t: {counts[0]}, h: {counts[1]}, w: {counts[2]} pairs", fontsize=9, loc="right", pad=2)
    axes[-1].set_xlabel("rotary pair i (fast → slow)")
    from matplotlib.patches import Patch

    axes[0].legend(
        handles=[Patch(color=colours(i), label=label) for i, label in enumerate(("t (time)", "h (row)", "w (column)"))],
        loc="upper left",
        fontsize=9,
        ncol=3,
    )
    figure.suptitle(title)
    return figure
