"""Figures of absolute position codes: the heatmap, the clock, binary bits beside the sinusoid's
bands, and a word embedding plus its position code.

Shape legend: ``p`` positions, ``d`` code width, ``k`` sin/cos pairs shown, ``b`` bits.

Each function draws data computed by :mod:`posenc.analysis` and returns a
``matplotlib.figure.Figure``; none computes an encoding itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._mpl import as_array, integer_ticks, new_figure, show_matrix

__all__ = ["encoding_heatmap", "clock_view", "bits_vs_bands", "word_plus_position"]


def _symmetric_limit(values: Any) -> float:
    import numpy as np

    limit = float(np.nanmax(np.abs(values))) if values.size else 1.0
    return limit if limit > 0 else 1.0


def encoding_heatmap(
    code: Any,
    *,
    title: str = "Position code",
    first_position: int = 0,
    columns: str = "dims",
) -> Any:
    """Heatmap of a code ``[p, d]``: one row per position, one column per feature.

    The classic picture of Vaswani et al. (2017, section 3.5) as Kazemnejad 2019 and Shibuya 2021 draw it: fast
    waves on the left, slow ones on the right. Zero is white: the colour scale is symmetric about
    it (red positive, blue negative), or one-sided for a code of one sign (ALiBi's biases are all
    at most 0: white to blue, not half a scale left unused). ``columns`` names what the columns are
    ("dims", or "heads" for a bias per head).
    """
    import numpy as np

    code = as_array(code, "code", ndim=2)  # [p, d]
    p, d = code.shape
    figure = new_figure(7.0, 3.2 + 1.6 * min(p / max(d, 1), 1.5))
    ax = figure.add_subplot()
    limit = _symmetric_limit(code)
    finite = code[np.isfinite(code)]
    low, high, cmap = -limit, limit, "RdBu_r"
    if finite.size and finite.min() >= 0 < finite.max():
        low, cmap = 0.0, "Reds"
    elif finite.size and finite.max() <= 0 > finite.min():
        high, cmap = 0.0, "Blues_r"
    image = show_matrix(  # 8192 positions in 400 pixels: mean colours, not moiré
        ax,
        code,
        cmap=cmap,
        vmin=low,
        vmax=high,
        extent=(-0.5, d - 0.5, first_position + p - 0.5, first_position - 0.5),
    )
    integer_ticks(ax)
    ax.set_xlabel(f"head (0 … {d - 1})" if columns == "heads" else f"feature (dimension 0 … {d - 1})")
    ax.set_ylabel("position")
    ax.set_title(f"{title}: {p} positions × {d} {columns}")
    figure.colorbar(image, ax=ax, label="value")
    return figure


def clock_view(
    sin: Any,
    cos: Any,
    positions: Sequence[int],
    pairs: Sequence[int],
    *,
    wavelengths: Sequence[float] | None = None,
    title: str = "Each sin/cos pair is a clock hand",
) -> Any:
    """One clock face per position; pair ``i`` is a hand pointing at ``(sin, cos)``.

    ``sin``/``cos`` are ``[p, k]``: the pair values at ``positions`` for the pairs ``pairs``. With
    x = sin and y = cos every hand starts at twelve o'clock at position 0 and turns clockwise as the
    position grows, fast hands first (Shibuya 2021's clock interpretation of section 3.5).
    """
    import numpy as np

    sin = as_array(sin, "sin", ndim=2)  # [p, k]
    cos = as_array(cos, "cos", ndim=2)  # [p, k]
    if sin.shape != cos.shape or sin.shape != (len(positions), len(pairs)):
        raise ValueError(
            f"sin and cos must both be [len(positions)={len(positions)}, len(pairs)={len(pairs)}], "
            f"got {tuple(sin.shape)} and {tuple(cos.shape)}"
        )
    figure = new_figure(2.1 * len(positions) + 1.8, 2.9)
    axes = figure.subplots(1, len(positions), squeeze=False)[0]
    colours = _pair_colours(len(pairs))
    circle = np.linspace(0, 2 * np.pi, 200)
    for ax, row, position in zip(axes, range(len(positions)), positions):
        ax.plot(np.sin(circle), np.cos(circle), color="0.75", lw=1)
        for j, pair in enumerate(pairs):
            label = f"pair {pair}" + (f" (λ={wavelengths[j]:.3g})" if wavelengths is not None else "")
            ax.annotate(
                "",
                xy=(sin[row, j], cos[row, j]),
                xytext=(0, 0),
                arrowprops={"arrowstyle": "-|>", "color": colours[j], "lw": 2.0},
            )
            ax.plot([], [], color=colours[j], lw=2, label=label)  # legend handle for the arrow
        ax.set_xlim(-1.15, 1.15)
        ax.set_ylim(-1.15, 1.15)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"position {position}")
    axes[-1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=8, frameon=False)
    figure.suptitle(f"{title}: x = sin, y = cos, 12 o'clock at position 0")
    return figure


def _pair_colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["plasma"]
    return [cmap(0.85 * j / max(n - 1, 1)) for j in range(n)]


def bits_vs_bands(bits: Any, code: Any, *, title: str = "Binary counter vs sinusoid") -> Any:
    """Binary digits of each position ``[p, b]`` beside a sinusoidal code ``[p, d]``.

    Kazemnejad 2019's intuition: the lowest bit flips every position, the next every two, …;
    the sinusoid's fast-to-slow bands are the continuous analogue. Both panels put the fastest
    column on the left.
    """
    bits = as_array(bits, "bits", ndim=2)  # [p, b]
    code = as_array(code, "code", ndim=2)  # [p, d]
    if bits.shape[0] != code.shape[0]:
        raise ValueError(f"bits and code need the same positions, got {bits.shape[0]} and {code.shape[0]}")
    p = bits.shape[0]
    figure = new_figure(10.0, 4.2)
    left, right = figure.subplots(1, 2, gridspec_kw={"width_ratios": [1, 2]})
    image = show_matrix(
        left,
        bits,
        cmap="Greys",
        vmin=0,
        vmax=1,  # bit 0 of 8192 positions: mid grey
        extent=(-0.5, bits.shape[1] - 0.5, p - 0.5, -0.5),
    )
    integer_ticks(left)
    left.set_xlabel("bit (0 = lowest, flips every position)")
    left.set_ylabel("position")
    left.set_title(f"binary digits of the position ({bits.shape[1]} bits)")
    figure.colorbar(image, ax=left, label="bit value", ticks=[0, 1])
    limit = _symmetric_limit(code)
    image = show_matrix(
        right, code, cmap="RdBu_r", vmin=-limit, vmax=limit, extent=(-0.5, code.shape[1] - 0.5, p - 0.5, -0.5)
    )
    integer_ticks(right)
    right.set_xlabel("feature (fast waves on the left)")
    right.set_ylabel("position")
    right.set_title(f"sinusoidal code, d = {code.shape[1]}")
    figure.colorbar(image, ax=right, label="value")
    figure.suptitle(title)
    return figure


#: Only the first this many positions of :func:`word_plus_position` get a label and a spoke (a
#: little over one turn of the circle: more labels overlap their neighbours a turn later).
_WORD_LABELS = 8


def word_plus_position(
    words: Any, points: Any, positions: Sequence[int], *, title: str = "The same word at different positions"
) -> Any:
    """Word vectors ``[w, 2]`` and each word plus its position code at ``positions``: ``points [w, p, 2]``.

    With a 2-wide sinusoid the code is a point on the unit circle, so each word's copies sit on a
    circle around it (Shibuya 2021's picture of adding the code to the embedding).
    """
    import numpy as np

    words = as_array(words, "words", ndim=2)  # [w, 2]
    points = as_array(points, "points", ndim=3)  # [w, p, 2]
    w = words.shape[0]
    if words.shape[1] != 2 or points.shape != (w, len(positions), 2):
        raise ValueError(f"need words [w, 2] and points [w, {len(positions)}, 2], got {words.shape} and {points.shape}")
    figure = new_figure(6.4, 4.6)
    ax = figure.add_subplot()
    circle = np.linspace(0, 2 * np.pi, 200)
    scatter = None
    labelled = len(positions) <= _WORD_LABELS
    for i in range(w):
        radius = float(np.linalg.norm(points[i] - words[i], axis=1).mean()) if len(positions) else 1.0
        ax.plot(
            words[i, 0] + radius * np.cos(circle), words[i, 1] + radius * np.sin(circle), color="0.8", ls="--", lw=1
        )
        for (x, y), position in list(zip(points[i], positions))[:_WORD_LABELS]:
            ax.plot([words[i, 0], x], [words[i, 1], y], color="0.85", lw=0.8, zorder=1)
            ax.annotate(f"{position}", (x, y), textcoords="offset points", xytext=(4, 3), fontsize=8)
        # the last position drawn first, so that the labelled first ones stay on top
        scatter = ax.scatter(
            points[i, ::-1, 0],
            points[i, ::-1, 1],
            c=list(positions)[::-1],
            cmap="viridis",
            s=40 if labelled else 18,
            zorder=3,
            vmin=min(positions),
            vmax=max(positions),
        )
        ax.scatter(
            [words[i, 0]],
            [words[i, 1]],
            marker="*",
            s=220,
            color="crimson",
            zorder=4,
            label="word embeddings" if i == 0 else None,
        )
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("feature 0")
    ax.set_ylabel("feature 1")
    ax.set_title(title)
    ax.legend(loc="best", fontsize=8)
    if scatter is not None:
        first = f"the first {_WORD_LABELS} labelled"
        figure.colorbar(
            scatter, ax=ax, label=f"position ({'labels beside the points' if labelled else first})", shrink=0.85
        )
    return figure
