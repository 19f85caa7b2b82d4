"""posenc.viz: the atlas's figures (matplotlib, imported when a figure is drawn).

Each drawing function takes data computed by :mod:`posenc.analysis` and returns a
``matplotlib.figure.Figure``; :func:`plot` picks the data for a scheme and a kind of figure by
name (the catalogue in :mod:`posenc.viz.kinds`), :func:`save_figure` writes PNG, SVG or PDF.
Install the extra with ``pip install 'posenc[viz]'``.
"""

from ._mpl import SUFFIXES, figure_bytes, save_figure
from .encoding import bits_vs_bands, clock_view, encoding_heatmap, word_plus_position
from .kinds import KINDS, PlotOptions, kinds_for, plot, scheme_names
from .relative import alibi_slopes, logits_vs_distance, rotary_decay, t5_bucket_map
from .similarity import distance_from_position, position_matrix, projection_2d

__all__ = [
    "KINDS",
    "PlotOptions",
    "SUFFIXES",
    "alibi_slopes",
    "bits_vs_bands",
    "clock_view",
    "distance_from_position",
    "encoding_heatmap",
    "figure_bytes",
    "kinds_for",
    "logits_vs_distance",
    "plot",
    "position_matrix",
    "projection_2d",
    "rotary_decay",
    "save_figure",
    "scheme_names",
    "t5_bucket_map",
    "word_plus_position",
]
