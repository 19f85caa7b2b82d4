"""posenc.analysis: the measurements behind the atlas (torch only; no plotting, no I/O).

Encoding matrices for every scheme and the articles' naive references (:func:`encoding_matrix`),
similarity and distance matrices between positions, the criteria of the articles posenc was founded
on (listed in docs/design.md) as property checks returning :class:`CheckResult` (:func:`run_checks`, :func:`verdict_table`), the attention
logit against relative distance (:func:`logits_vs_distance`), and the data behind the atlas's
2-D pictures. Everything returns tensors, dicts or dataclasses; :mod:`posenc.viz` draws them.

Positions are rows: an int ``n`` means positions ``0..n-1`` and row ``p`` is position ``p``.
"""

from .bias import bias_against_distance
from .checks import (
    CheckResult,
    check_bounded,
    check_decays_with_distance,
    check_deterministic,
    check_distance_monotone,
    check_extrapolates,
    check_length_invariant,
    check_linear_offset_map,
    check_offset_similarity,
    check_unique,
    scheme_label,
)
from .encodings import (
    ATLAS_DEFAULTS,
    atlas_config,
    build_scheme,
    encoding_matrix,
    is_data_dependent,
    is_reference,
    scheme_family,
)
from .logits import logits_vs_distance, rope_decay_bound, shaw_embeddings, t5_bucket_map
from .matrices import cosine_distance_matrix, distance_from, distance_matrix, distance_vs_offset, dot_matrix
from .projection import project_2d, word_plus_position
from .references import REFERENCE_ENCODINGS, binary_bits, reference_encoding
from .verdict import CHECKS, CRITERIA, WHY, applicable_checks, default_schemes, run_checks, verdict_table

__all__ = [
    "ATLAS_DEFAULTS",
    "CHECKS",
    "CRITERIA",
    "CheckResult",
    "REFERENCE_ENCODINGS",
    "WHY",
    "applicable_checks",
    "atlas_config",
    "bias_against_distance",
    "binary_bits",
    "build_scheme",
    "check_bounded",
    "check_decays_with_distance",
    "check_deterministic",
    "check_distance_monotone",
    "check_extrapolates",
    "check_length_invariant",
    "check_linear_offset_map",
    "check_offset_similarity",
    "check_unique",
    "cosine_distance_matrix",
    "default_schemes",
    "distance_from",
    "distance_matrix",
    "distance_vs_offset",
    "dot_matrix",
    "encoding_matrix",
    "is_data_dependent",
    "is_reference",
    "logits_vs_distance",
    "project_2d",
    "reference_encoding",
    "rope_decay_bound",
    "run_checks",
    "scheme_family",
    "scheme_label",
    "shaw_embeddings",
    "t5_bucket_map",
    "verdict_table",
    "word_plus_position",
]
