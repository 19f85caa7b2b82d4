"""posenc's functional core: pure tensor functions, torch only.

Tables (:func:`sinusoidal`), RoPE frequencies, tables and rotation (:func:`rope_inv_freq`,
:func:`rope_cos_sin`, :func:`apply_rope`), MRoPE tables (:func:`mrope_cos_sin`), T5 buckets, ALiBi slopes and Shaw's clipped index.
"""

from ._checks import as_positions
from .interpolate import GRID_INTERPOLATION_MODES, INTERPOLATION_MODES, interpolate_grid, interpolate_positions
from .layouts import permute_qk_weight, rope_layout_permutation
from .mrope import MROPE_ASSIGNMENTS, MROPE_AXES, mrope_axes, mrope_coordinates, mrope_cos_sin, mrope_sections
from .multidim import (
    AXIAL_FREQUENCIES,
    as_coordinates,
    axial_rope_cos_sin,
    axial_rope_inv_freq,
    grid_positions,
    sinusoidal_nd,
    sinusoidal_nd_axis_width,
)
from .packed import (
    apply_rotary_emb,
    check_cu_seqlens,
    document_ids_from_cu_seqlens,
    positions_from_cu_seqlens,
    positions_from_document_ids,
    segments_from_document_ids,
)
from .randomized import randomized_positions
from .relative import (
    alibi_bias,
    alibi_bias_range,
    alibi_slopes,
    clipped_relative_index,
    relative_clip,
    relative_positions,
    t5_bias_range,
    t5_relative_bucket,
)
from .rope import ROPE_LAYOUTS, TABLE_WIDTHS, apply_rope, resolve_layout, rope_cos_sin, rope_inv_freq, rotate_pairs
from .rope_scaling import ROPE_SCALINGS
from .sinusoidal import LAYOUTS, SINUSOID_FREQUENCIES, sinusoidal, sinusoidal_inv_freq
from .temperature import QueryScale, QueryTemperature, query_temperature
from .toeplitz import relative_range, toeplitz
from .vision_rope import (
    VISION_ROPES,
    apply_vision_rope,
    augment_patch_coordinates,
    llama4_vision_coordinates,
    pad_unrotated,
    patch_centre_coordinates,
    patch_grid_coordinates,
    vision_rope_cos_sin,
    vision_rope_inv_freq,
)

__all__ = [
    "sinusoidal",
    "sinusoidal_inv_freq",
    "rope_inv_freq",
    "rope_cos_sin",
    "apply_rope",
    "apply_rotary_emb",
    "check_cu_seqlens",
    "positions_from_cu_seqlens",
    "document_ids_from_cu_seqlens",
    "positions_from_document_ids",
    "segments_from_document_ids",
    "resolve_layout",
    "TABLE_WIDTHS",
    "alibi_bias_range",
    "t5_bias_range",
    "toeplitz",
    "relative_range",
    "rotate_pairs",
    "t5_relative_bucket",
    "alibi_slopes",
    "alibi_bias",
    "relative_positions",
    "clipped_relative_index",
    "relative_clip",
    "as_positions",
    "permute_qk_weight",
    "rope_layout_permutation",
    "randomized_positions",
    "grid_positions",
    "as_coordinates",
    "sinusoidal_nd",
    "sinusoidal_nd_axis_width",
    "axial_rope_inv_freq",
    "axial_rope_cos_sin",
    "AXIAL_FREQUENCIES",
    "mrope_axes",
    "mrope_coordinates",
    "mrope_cos_sin",
    "mrope_sections",
    "MROPE_AXES",
    "MROPE_ASSIGNMENTS",
    "LAYOUTS",
    "ROPE_LAYOUTS",
    "ROPE_SCALINGS",
    "SINUSOID_FREQUENCIES",
    "query_temperature",
    "QueryScale",
    "QueryTemperature",
    "interpolate_positions",
    "interpolate_grid",
    "INTERPOLATION_MODES",
    "GRID_INTERPOLATION_MODES",
    "vision_rope_inv_freq",
    "vision_rope_cos_sin",
    "apply_vision_rope",
    "patch_grid_coordinates",
    "llama4_vision_coordinates",
    "patch_centre_coordinates",
    "augment_patch_coordinates",
    "pad_unrotated",
    "VISION_ROPES",
]


def __getattr__(name: str):
    """``fast_apply_rope`` and ``fast_apply_rope_``, the fast rotations of earlier releases, now
    live in :mod:`posenc.kernels` (``rope`` and ``rope_``; these names remain there too): reached here lazily, so that the
    functional core imports no fast path."""
    if name in ("fast_apply_rope", "fast_apply_rope_"):
        from .. import kernels

        return getattr(kernels, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
