"""The figure catalogue: each kind of figure by name, which schemes it applies to, and how it gets
its data from :mod:`posenc.analysis` before drawing it.

``posenc plot SCHEME --kind KIND`` and the report both go through :func:`plot`. Defaults follow
the articles posenc was founded on (docs/design.md): the classic heatmap is 128 dims × 50 positions;
the cosine distances from position 1 use d = 1024 and positions up to 250 (Pim 2023); the projection
shows 1000 positions.

Shape legend: ``n`` positions, ``d`` code width, ``k`` clock hands, ``side`` grid side.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from .options import PlotOptions, code_matrix, family_of, scheme_config, scheme_names

__all__ = ["PlotOptions", "Kind", "KINDS", "plot", "kinds_for", "scheme_names", "family_of"]


@dataclass(frozen=True)
class Kind:
    name: str
    description: str
    applies: Callable[[str, str], bool]  # (scheme name, family) -> bool
    draw: Callable[[str, PlotOptions], Any]
    needs: str  # words for the error message: which schemes it applies to


_ROWS = {  # what a row of the encoding matrix is, per family (see posenc.analysis.encodings)
    "absolute": "position code",
    "reference": "naive reference code",
    "rotary": "rotated unit query",
    "bias": "bias to the key at 0",
    "relative": "a^K to the key at 0",
    "none": "no code (zeros)",
}


def _label(scheme: str, options: PlotOptions) -> str:
    """The scheme's name in a title, with its RoPE scaling when one is given (``rope, yarn ×4``)."""
    return options.label(scheme)


def _heatmap(scheme: str, options: PlotOptions) -> Any:
    from .encoding import encoding_heatmap

    code = code_matrix(scheme, options.positions or 50, options)  # [n, d] ([n, h] for biases)
    family = family_of(scheme)
    return encoding_heatmap(
        code,
        title=f"{_label(scheme, options)}: {_ROWS.get(family, 'code')}",
        columns="heads" if family == "bias" else "dims",
    )


def _clock(scheme: str, options: PlotOptions) -> Any:
    from .encoding import clock_view

    last = (options.positions or 31) - 1
    shown = sorted(p for p in {0, 1, 2, max(last // 6, 3), max(last // 3, 4), last} if p <= last)  # ≤ 6 faces
    from ..analysis import build_scheme

    code = code_matrix(scheme, torch.tensor(shown), options)  # [len(shown), d]
    module = build_scheme(scheme, seed=options.seed, **scheme_config(scheme, options))
    c = module.config
    n_pairs = code.shape[1] // 2
    pairs = sorted({round((n_pairs - 1) * (j / 4) ** 2) for j in range(5)})  # fast to slow, spread
    if scheme == "sinusoidal":
        from .. import functional as F

        inv_freq = F.sinusoidal_inv_freq(c.dim, base=c.base, frequencies=c.frequencies)  # [d/2]
        sin_cols, cos_cols = _pair_columns(c.layout, n_pairs)  # the code is (sin, cos) per pair
    else:  # rotary: the rotated unit query is (cos, sin) per pair
        inv_freq = module.inv_freq
        cos_cols, sin_cols = _pair_columns(c.layout, n_pairs)
    sin = code[:, [sin_cols[i] for i in pairs]]  # [len(shown), k]
    cos = code[:, [cos_cols[i] for i in pairs]]  # [len(shown), k]
    wavelengths = [2 * math.pi / float(inv_freq[i]) for i in pairs]
    return clock_view(
        sin,
        cos,
        shown,
        pairs,
        wavelengths=wavelengths,
        title=f"{_label(scheme, options)} (d = {code.shape[1]}): each pair is a clock hand",
    )


def _pair_columns(layout: str, n_pairs: int) -> tuple[list[int], list[int]]:
    """Columns of the first and second member of each pair: (2i, 2i+1) interleaved, (i, i + d/2) half."""
    if layout == "interleaved":
        first, second = [2 * i for i in range(n_pairs)], [2 * i + 1 for i in range(n_pairs)]
    else:
        first, second = list(range(n_pairs)), [n_pairs + i for i in range(n_pairs)]
    return first, second


def _dot(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import dot_matrix
    from .similarity import position_matrix

    n = options.positions or 100
    return position_matrix(
        dot_matrix(code_matrix(scheme, n, options)),
        title=f"{scheme}: PE(i) · PE(j)",
        colorbar_label="dot product",
        cmap="magma",
    )


#: The largest side of the grid figure (its positions are side x side coordinates).
_GRID_SIDE = 512


def _grid(scheme: str, options: PlotOptions) -> Any:
    if family_of(scheme) == "rotary":
        return _grid_rotary(scheme, options)
    from ..analysis import build_scheme, distance_from
    from .similarity import grid_distance

    side = options.positions or 16
    if side > _GRID_SIDE:  # side² coordinates, each a code and a distance: 512² is already 262144
        raise ValueError(
            f"the grid figure takes --positions as the side of its grid (side² positions); "
            f"it must be at most {_GRID_SIDE}, got {side}"
        )
    module = build_scheme(scheme, seed=options.seed, **scheme_config(scheme, options))
    rows, cols = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")  # [side, side] each
    coords = torch.zeros(side * side, module.n_axes, dtype=torch.long)  # [side², n_axes]; later axes at 0
    coords[:, 0], coords[:, 1] = rows.reshape(-1), cols.reshape(-1)
    with torch.no_grad():
        code = module.encode(coords).to(torch.float64)  # [side², d]
    cells = [(side // 2, side // 2), (0, 0)]
    maps = torch.stack([distance_from(code, r * side + c).reshape(side, side) for r, c in cells])  # [2, side, side]
    return grid_distance(maps, cells, title=f"{scheme}: cosine distance between 2-D positions ({side} × {side} grid)")


def _multi_axis(name: str, family: str) -> bool:
    from ..schemes import scheme_class

    return family in ("absolute", "rotary") and getattr(scheme_class(name), "n_axes", 1) > 1


def _pim_2023_dim(scheme: str) -> int | None:
    """Pim 2023 measures distances at d = 1024; binary digits keep their own width (more are zeros)."""
    return None if scheme == "binary" else 1024


def _cosine(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import distance_from
    from .similarity import distance_from_position

    n = options.positions or 251
    code = code_matrix(scheme, n, options, dim=_pim_2023_dim(scheme))  # [n, d]
    return distance_from_position(
        torch.arange(n),
        distance_from(code, 1),
        reference=1,
        title=f"{scheme} (d = {code.shape[1]}): cosine distance from position 1",
    )


def _distance(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import cosine_distance_matrix
    from .similarity import position_matrix

    code = code_matrix(scheme, options.positions or 250, options, dim=_pim_2023_dim(scheme))  # [n, d]
    return position_matrix(
        cosine_distance_matrix(code),
        colorbar_label="cosine distance",
        vmin=0.0,
        title=f"{scheme} (d = {code.shape[1]}): cosine distance between positions",
    )


def _projection(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import project_2d
    from .similarity import projection_2d

    n = options.positions or 1000
    points = project_2d(code_matrix(scheme, n, options), options.method, seed=options.seed)  # [n, 2]
    return projection_2d(points, torch.arange(n), method=options.method.upper(), title=f"{scheme} codes in 2D")


def _bits(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import binary_bits
    from .encoding import bits_vs_bands

    n = options.positions or 64
    n_bits = max(1, (n - 1).bit_length())
    code = code_matrix("sinusoidal", n, options, dim=64)  # [n, d]
    return bits_vs_bands(binary_bits(n, n_bits), code, title="Binary digits of p beside the sinusoid's bands")


def _word(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import word_plus_position
    from .encoding import word_plus_position as draw

    data = word_plus_position(options.positions or 8, base=options.base or 10000.0)
    positions = [int(p) for p in data["positions"]]
    return draw(
        data["words"],
        data["points"],
        positions,
        title="Two words plus a 2-wide sinusoid: copies on a circle",
    )


def _slopes(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import build_scheme
    from .relative import alibi_slopes

    module = build_scheme(scheme, **scheme_config(scheme, options))
    return alibi_slopes(module.slopes)


def _logits(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import logits_vs_distance
    from .relative import logits_vs_distance as draw_lines
    from .relative import rotary_decay

    config = scheme_config(scheme, options)
    data = logits_vs_distance(scheme, max_distance=options.positions or 256, seed=options.seed, **config)
    distances = data["distances"]
    if data["family"] == "rotary":
        return rotary_decay(
            distances,
            data["mean"],
            data.get("std"),
            data.get("bound"),
            title=f"{_label(scheme, options)}: the same content's logit falls with distance",
        )
    labels = list(data["labels"])
    if "slopes" in data:  # ALiBi: name each line by its slope
        labels = [f"{label} (m = {float(m):.3g})" for label, m in zip(labels, data["slopes"])]
    curves = dict(zip(labels, data["logits"]))
    if scheme == "t5":
        return draw_lines(
            distances,
            curves,
            steps=True,
            ylabel="bias added to the logit",
            title="t5: a learned value per bucket and head (random init)",
        )
    if data["family"] == "bias":
        return draw_lines(
            distances,
            curves,
            ylabel="bias added to the logit",
            title=f"{scheme}: bias against distance, one line per head",
        )
    from ..analysis import build_scheme

    clip = getattr(build_scheme(scheme, seed=options.seed, **config).config, "max_relative_position", None)
    if isinstance(clip, tuple):  # (left, right): the figure's keys are before the query, clipped at left
        clip, label = clip[0], f"clipping distance left = {clip[0]} (right = {clip[1]})"
    else:
        label = f"clipping distance K = {clip}" if clip is not None else ""
    return draw_lines(
        distances,
        curves,
        ylabel="logit term  q · a^K",
        mark=clip,
        mark_label=label,
        title=f"{scheme}: query term against distance, flat past K",
    )


def _bias(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import build_scheme
    from ..analysis.bias import bias_against_distance
    from .bias import bias_figure

    module = build_scheme(scheme, seed=options.seed, **scheme_config(scheme, options))
    data = bias_against_distance(module, length=options.positions or 256, seed=options.seed)
    learned = any(p.requires_grad for p in module.parameters())
    when = " at initialisation" if learned else " (no learned parameters)"
    what = ", random inputs" if data["data_dependent"] else ""
    return bias_figure([data], title=f"{_label(scheme, options)}: bias per head{when}{what}")


def _buckets(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import build_scheme, t5_bucket_map
    from .relative import t5_bucket_map as draw

    c = build_scheme(scheme, seed=options.seed, **scheme_config(scheme, options)).config
    data = t5_bucket_map(num_buckets=c.num_buckets, max_distance=c.max_distance, bidirectional=c.bidirectional)
    return draw(
        data["relative_positions"],
        data["buckets"],
        num_buckets=data["num_buckets"],
        max_exact=data["max_exact"],
        max_distance=data["max_distance"],
        grid=options.positions or 64,
        title=f"t5 buckets ({'bidirectional' if c.bidirectional else 'causal'})",
    )


def _no_scaling(kind: str, options: PlotOptions) -> None:
    if options.scaling:
        raise ValueError(
            f"figure kind {kind!r} draws every RoPE scaling side by side; leave --scaling out "
            "(other kinds, such as logits or clock, draw one scaling)"
        )


def _rotation(scheme: str, options: PlotOptions) -> Any:
    from ..analysis.rotary import rotation_in_a_plane
    from .rotary import rotation_figure

    _no_scaling("rotation", options)
    data = rotation_in_a_plane(
        dim=options.dim or 64, base=options.base or 10000.0, positions=options.positions or 32, seed=options.seed
    )
    return rotation_figure(data, title="RoPE turns q by m·θ and k by n·θ: their score depends on m − n alone")


def _scaling_gallery(kind: str, options: PlotOptions) -> Any:
    """Every RoPE scaling side by side (``wavelengths``: per pair; ``scalings``: the same-content
    logit), stretching a model trained on ``--positions`` (default 4096) by 4."""
    from ..analysis import rotary as data_of
    from . import rotary as draw

    _no_scaling(kind, options)
    dim, base, original = options.dim or 128, options.base or 10000.0, options.positions or 4096
    compute, figure, what = {
        "wavelengths": (data_of.scaling_wavelengths, draw.wavelength_figure, "each scaling's wavelength per pair"),
        "scalings": (data_of.scaling_logits, draw.scaling_logits_figure, "the logit of the same content per scaling"),
    }[kind]
    data = compute(dim=dim, base=base, original=original, factor=4.0)
    return figure(data, title=f"Context extension ×4 (d = {dim}, base {base:g}): {what}")


def _decay(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import build_scheme
    from ..analysis.rotary import same_content_logits
    from .rotary import decay_beside_figure

    n = options.positions or 4096
    module = build_scheme(scheme, seed=options.seed, **scheme_config(scheme, options))
    distances = torch.arange(n)  # [D]
    last = torch.tensor([n - 1])  # the query at the end, keys t behind it (xPos decays in that direction)

    def along_axis_0(positions: torch.Tensor, axes: int) -> torch.Tensor:  # [D] -> [D] or [D, axes]
        return positions if axes == 1 else torch.stack([positions, *[torch.zeros_like(positions)] * (axes - 1)], -1)

    curves = {
        _label(scheme, options): same_content_logits(
            module, along_axis_0(last, module.n_axes), along_axis_0(n - 1 - distances, module.n_axes)
        )
    }
    if scheme != "rope" or options.scaling:
        plain = build_scheme("rope", dim=module.config.dim, base=getattr(module.config, "base", 10000.0))
        curves["rope (no scaling)"] = same_content_logits(plain, last, n - 1 - distances)
    mark = getattr(module.config, "scale_base", None)
    return decay_beside_figure(
        distances,
        curves,
        mark=mark,
        mark_label=f"B = {mark:g}" if mark else "",
        title=f"{_label(scheme, options)} beside RoPE: the logit of the same content against distance",
    )


def _grid_rotary(scheme: str, options: PlotOptions) -> Any:
    from ..analysis import build_scheme
    from ..analysis.rotary import same_content_logits
    from .rotary import grid_logits

    side = options.positions or 24
    if side > 64:  # the rotation of hd basis vectors at side² keys: 64² keeps it under a second
        raise ValueError(f"the rotary grid figure takes --positions as its side (side² keys); at most 64, got {side}")
    module = build_scheme(scheme, seed=options.seed, **scheme_config(scheme, options))
    rows, cols = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")  # [side, side] each
    keys = torch.zeros(side * side, module.n_axes, dtype=torch.long)  # [side², n_axes]; other axes at 0
    row_axis = 1 if module.n_axes == 3 else 0  # MRoPE's (t, h, w): an image's rows and columns are h and w
    keys[:, row_axis], keys[:, row_axis + 1] = rows.reshape(-1), cols.reshape(-1)
    cells = [(side // 2, side // 2), (0, 0)]
    maps = torch.stack(
        [same_content_logits(module, keys[r * side + c][None], keys).reshape(side, side) for r, c in cells]
    )  # [2, side, side]
    return grid_logits(
        maps, cells, title=f"{scheme}: logit of the same content between 2-D positions ({side} × {side})"
    )


def _waves(scheme: str, options: PlotOptions) -> Any:
    from ..analysis.articles import two_waves
    from .articles import two_waves_figure

    return two_waves_figure(
        two_waves(length=options.positions or 64),
        title="Reading two cosine waves at nearby and distant positions (Pim 2023)",
    )


def _clipped(scheme: str, options: PlotOptions) -> Any:
    from ..analysis.articles import clipped_relative_index
    from .articles import clipped_index_figure

    k = 3
    return clipped_index_figure(
        clipped_relative_index(options.positions or 9, k),
        max_relative_position=k,
        title="Shaw et al.: the relative index n − m, clipped at ±K",
    )


def _concat(scheme: str, options: PlotOptions) -> Any:
    from ..analysis.articles import add_or_concatenate
    from .articles import add_or_concatenate_figure

    data = add_or_concatenate(width=options.dim or 8, position=3, seed=options.seed)
    return add_or_concatenate_figure(data, title="A position code added to a word embedding, or concatenated with it")


def _mrope_axes(scheme: str, options: PlotOptions) -> Any:
    from ..analysis.rotary import mrope_assignments
    from .rotary import mrope_axes_figure

    _no_scaling("axes", options)
    dim = options.dim or 128
    data = mrope_assignments(dim=dim, base=options.base or 1000000.0)
    t, h, w = data["sections"]
    return mrope_axes_figure(
        data, title=f"MRoPE (d = {dim}, sections t, h, w = {t}, {h}, {w}): the frequencies each coordinate receives"
    )


def _drawable(name: str) -> bool:
    """False for data-dependent schemes (CoPE, forgetting attention): no code from positions alone."""
    from ..analysis import is_data_dependent

    return not is_data_dependent(name)


def _bias_or_data_dependent(name: str, family: str) -> bool:
    """Bias schemes, and data-dependent ones (their term drawn for random inputs)."""
    return family != "reference" and (family == "bias" or not _drawable(name))


def _any(*families: str) -> Callable[[str, str], bool]:
    return lambda name, family: family in families and _drawable(name)


def _named(*names: str) -> Callable[[str, str], bool]:
    return lambda name, family: name in names


_ALL_CODES = ("absolute", "reference", "rotary", "bias", "relative")
_CODES = ("absolute", "reference", "rotary")  # rotary: the rotated unit query at each position

KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "heatmap",
            "encoding matrix, positions × features",
            _any(*_ALL_CODES),
            _heatmap,
            "any scheme with a code (not 'none')",
        ),
        Kind(
            "clock",
            "each sin/cos pair as a clock hand",
            _named("sinusoidal", "rope", "xpos"),
            _clock,
            "sinusoidal, rope, xpos",
        ),
        Kind(
            "dot",
            "dot product between the codes of two positions",
            _any(*_CODES),
            _dot,
            "absolute and rotary schemes and the references",
        ),
        Kind(
            "cosine",
            "cosine distance from position 1 (d = 1024, positions up to 250)",
            _any(*_CODES),
            _cosine,
            "absolute and rotary schemes and the references",
        ),
        Kind(
            "distance",
            "cosine-distance matrix between positions",
            _any(*_CODES),
            _distance,
            "absolute and rotary schemes and the references",
        ),
        Kind(
            "projection",
            "2D projection of 1000 positions, coloured by position",
            _any(*_CODES),
            _projection,
            "absolute and rotary schemes and the references",
        ),
        Kind(
            "bits",
            "binary digits beside the sinusoid's bands",
            _named("sinusoidal", "binary"),
            _bits,
            "sinusoidal, binary",
        ),
        Kind("word", "a word embedding plus its 2D position code", _named("sinusoidal"), _word, "sinusoidal"),
        Kind(
            "waves", "two cosine waves read at nearby and distant positions", _named("sinusoidal"), _waves, "sinusoidal"
        ),
        Kind(
            "concat", "a code added to a word embedding, or concatenated", _named("sinusoidal"), _concat, "sinusoidal"
        ),
        Kind("clipped", "Shaw's clipped relative index between query and key", _named("shaw"), _clipped, "shaw"),
        Kind(
            "logits",
            "attention logit against distance (decay, lines per head, buckets)",
            _any("rotary", "bias", "relative"),
            _logits,
            "rotary, bias and relative schemes",
        ),
        Kind("buckets", "T5's bucket map", _named("t5"), _buckets, "t5"),
        Kind(
            "axes", "which frequencies each MRoPE coordinate (t, h, w) receives", _named("mrope"), _mrope_axes, "mrope"
        ),
        Kind(
            "rotation",
            "q and k turned by their positions; the score depends on m − n",
            _named("rope"),
            _rotation,
            "rope",
        ),
        Kind(
            "wavelengths",
            "per-pair wavelength of every RoPE scaling",
            _named("rope"),
            lambda scheme, options: _scaling_gallery("wavelengths", options),
            "rope",
        ),
        Kind(
            "scalings",
            "logit of the same content for every RoPE scaling",
            _named("rope"),
            lambda scheme, options: _scaling_gallery("scalings", options),
            "rope",
        ),
        Kind(
            "decay",
            "logit of the same content against distance, beside plain RoPE",
            _any("rotary"),
            _decay,
            "rotary schemes",
        ),
        Kind("slopes", "ALiBi's slope per head", _named("alibi"), _slopes, "alibi"),
        Kind(
            "grid",
            "cosine distance between 2-D positions on a grid",
            _multi_axis,
            _grid,
            "schemes over several axes (sinusoidal_nd, rope_axial)",
        ),
        Kind(
            "bias",
            "bias against distance i − j, one line per head (random inputs for data-dependent schemes)",
            _bias_or_data_dependent,
            _bias,
            "bias schemes and data-dependent ones (cope, forgetting)",
        ),
    )
}


def kinds_for(scheme: str) -> list[str]:
    """The kinds of figure that apply to ``scheme``."""
    family = family_of(scheme)
    return [name for name, kind in KINDS.items() if kind.applies(scheme, family)]


def plot(scheme: str, kind: str, options: PlotOptions | None = None) -> Any:
    """The figure ``kind`` of ``scheme`` (a ``matplotlib.figure.Figure``).

    Unknown schemes or kinds, and kinds that do not apply to the scheme, raise a ValueError that
    lists the choices.
    """
    options = options or PlotOptions()
    names = scheme_names()
    if scheme not in names:
        raise ValueError(f"unknown scheme {scheme!r}; choose one of: {', '.join(names)}")
    if kind not in KINDS:
        raise ValueError(f"unknown kind of figure {kind!r}; choose one of: {', '.join(KINDS)}")
    entry = KINDS[kind]
    if not entry.applies(scheme, family_of(scheme)):
        raise ValueError(
            f"figure kind {kind!r} applies to {entry.needs}, not to {scheme!r}; "
            f"kinds for {scheme!r}: {', '.join(kinds_for(scheme)) or '(none)'}"
        )
    if options.method != "pca" and kind != "projection":  # options the figure would silently ignore
        raise ValueError(
            f"method={options.method!r} chooses the 2D projection of --kind projection; figure kind {kind!r} draws none"
        )
    if options.seed != 0 and not _randomly_initialised(scheme, options):
        raise ValueError(
            f"seed={options.seed} sets the random initialisation of learned tables (learned, t5, "
            f"shaw); {scheme!r} has none, so every seed draws the same figure"
        )
    return entry.draw(scheme, options)


def _randomly_initialised(scheme: str, options: PlotOptions) -> bool:
    from ..analysis import build_scheme, is_reference

    return not is_reference(scheme) and any(
        p.requires_grad for p in build_scheme(scheme, **scheme_config(scheme, options)).parameters()
    )
