"""MRoPE from a config: sections, axis assignment, pair layout and rotated width per family."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from .fields import _field
from .generated import MROPE_SECTIONS

#: MRoPE model types (transformers 5.24 rotary modules that read ``mrope_section``): whether their
#: ``recomposition_frequencies`` interleaves the axes (Qwen3-VL's ``t h w t h w ...``) or takes
#: contiguous sections (Qwen2-VL's ``freq.split(mrope_section)``), the pair layout of their
#: ``apply_rotary_pos_emb`` (GLM-4V and GLM-OCR: ``rotate_half_llm`` on ``repeat_interleave(2)``
#: tables), and the ``partial_rotary_factor`` their rotary module falls back to, None where it
#: rotates the whole head whatever the config says (Qwen2-VL's ``compute_default_rope_parameters``).
_MROPE_TYPES: dict[str, tuple[bool | str, str, float | None]] = {
    **dict.fromkeys(
        ("qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text", "paddleocr_vl", "paddleocr_vl_text"),
        (False, "half", None),
    ),
    **dict.fromkeys(
        ("qwen3_vl", "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "cosmos3_edge", "cosmos3_edge_text"),
        (True, "half", None),
    ),
    **dict.fromkeys(("qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"), (True, "half", 0.25)),
    **dict.fromkeys(("qwen4_exp", "qwen4_exp_text"), (True, "half", 1.0)),
    **dict.fromkeys(("glm4v", "glm4v_text", "glm_ocr", "glm_ocr_text"), (False, "interleaved", 1.0)),
    **dict.fromkeys(("glm_image", "glm_image_text"), (False, "half", 1.0)),
    **dict.fromkeys(("glm4v_moe", "glm4v_moe_text"), (False, "half", 0.5)),
    **dict.fromkeys(("ernie4_5_vl_moe", "ernie4_5_vl_moe_text"), ("hw", "interleaved", None)),
}
#: MRoPE model types whose ``mrope_section`` lists ``[h, w, t]`` (Ernie 4.5 VL), not ``[t, h, w]``.
_MROPE_HWT_ORDER = ("ernie4_5_vl_moe", "ernie4_5_vl_moe_text")
#: MRoPE model types whose frequencies posenc's sections cannot express, with what they do instead
#: (transformers 5.24: each family's text rotary module and ``get_rope_index``).
_MROPE_REFUSED = {
    **dict.fromkeys(
        ("hunyuan_vl", "hunyuan_vl_text"),
        "HunYuan-VL reads a variable number of MRoPE axes (len(mrope_section), HunYuanVLRotaryEmbedding)",
    ),
    **dict.fromkeys(
        ("hy_v4_vl", "hy_v4_vl_text"), "HY-V4-VL rotates a multi-head-latent slice with its own table layout"
    ),
    **dict.fromkeys(("cohere_compass", "cohere_compass_text"), "Cohere Compass keeps one MRoPE per layer type"),
    "neomme": "NeoMME has two axes with per-layer-type spectra",
    **dict.fromkeys(
        ("qwen2_5_omni", "qwen2_5_omni_thinker", "qwen2_5_omni_text", "qwen2_5_omni_talker"),
        "Qwen2.5-Omni's thinker and talker position audio, image and video tokens by time "
        "(Qwen2_5OmniThinkerForConditionalGeneration.get_rope_index)",
    ),
    **dict.fromkeys(
        (
            "qwen3_omni_moe",
            "qwen3_omni_moe_thinker",
            "qwen3_omni_moe_text",
            "qwen3_omni_moe_talker_text",
            "qwen3_omni_moe_talker_code_predictor",
        ),
        "Qwen3-Omni's thinker and talker position audio, image and video tokens by time "
        "(Qwen3OmniMoeThinkerForConditionalGeneration.get_rope_index)",
    ),
}


def _refuse_mrope_family(model_type: object) -> None:
    """A ValueError naming an MRoPE family posenc does not express, and why (``_MROPE_REFUSED``)."""
    if model_type in _MROPE_REFUSED:
        raise ValueError(
            f"model_type {model_type!r}: {_MROPE_REFUSED[model_type]}, which posenc's MRoPE (three sections, "
            f"contiguous or interleaved) does not express; supported MRoPE model types: {', '.join(sorted(_MROPE_TYPES))}"
        )


_MROPE_KEYS = ("mrope_section", "mrope_interleaved", "interleaved")


def _interleaved(model_type: object, flag: object) -> bool | str:
    """The axis assignment: the model code's for known types (a differing config flag warned
    about), else the config's ``mrope_interleaved``."""
    if model_type in _MROPE_TYPES:
        interleaved = _MROPE_TYPES[model_type][0]
        if flag is not None and bool(flag) != bool(interleaved):
            warnings.warn(
                f"config rope parameters say mrope_interleaved={flag!r}, but transformers' {model_type!r} rotary "
                f"module is {'interleaved' if interleaved else 'contiguous'} whatever the config says; "
                f"posenc follows the model code (interleaved={interleaved})",
                stacklevel=4,
            )
        return interleaved
    if flag is not None and not isinstance(flag, bool):
        raise ValueError(f"config field 'mrope_interleaved' must be true or false, got {flag!r}")
    return bool(flag)


def _default_sections(config: Mapping[str, Any], params: Mapping[str, Any], head_dim: int) -> list[int] | None:
    """The sections the type's rotary module falls back to without ``mrope_section`` (Qwen3.5:
    [11, 11, 10]; :data:`~posenc.config.generated.MROPE_SECTIONS`). Where they do not span the
    rotated width, an interleaved module (``apply_interleaved_mrope``) reads ``h`` on pairs
    ``i % 3 == 1`` below ``3 * sections[1]`` and within the width, ``w`` likewise, ``t`` on the rest:
    the same sets as posenc's interleaved sections counted over the width. Contiguous ones (Qwen2-VL,
    GLM-4V, Ernie 4.5 VL: ``freq.split(self.mrope_section, dim=-1)``) raise a RuntimeError there at
    every position, so such a config is refused, naming the sections it lacks."""
    model_type = config.get("model_type")
    sections = MROPE_SECTIONS.get(model_type)
    if sections is None:
        return None
    width = _mrope_rotary_dim(config, params, head_dim)
    pairs = width // 2
    if sum(sections) == pairs:
        return sections
    if _MROPE_TYPES[model_type][0] is not True:
        raise ValueError(
            f"model_type {model_type!r}: the config has no 'mrope_section', and the sections its transformers "
            f"rotary module falls back to, {sections}, span {sum(sections)} rotary pairs, not the {pairs} of its "
            f"rotated width {width} (transformers' freq.split fails on this config); give 'mrope_section' in the rope "
            f"parameters ('rope_parameters', or the legacy 'rope_scaling'), three numbers of pairs summing to {pairs}"
        )
    h = len(range(1, min(3 * sections[1], pairs), 3))
    w = len(range(2, min(3 * sections[2], pairs), 3))
    return [pairs - h - w, h, w]


def _mrope(
    config: Mapping[str, Any], params: dict[str, Any], head_dim: int
) -> tuple[tuple[int, ...], bool | str] | None:
    """``(sections, interleaved)`` of a config whose RoPE reads ``mrope_section``, else None. The
    MRoPE keys are taken out of ``params`` (they are not scaling keys); a legacy ``"type": "mrope"``
    is the default RoPE (HF ``Qwen2VLTextConfig.convert_rope_params_to_dict``)."""
    if params.get("rope_type", params.get("type")) == "mrope":
        params.pop("type", None)
        params["rope_type"] = "default"
    model_type = config.get("model_type")
    found = {k: params.pop(k) for k in _MROPE_KEYS if k in params}
    sections = found.get("mrope_section")
    if sections is None and model_type in _MROPE_TYPES:
        sections = _default_sections(config, params, head_dim)
    if sections is None:
        return None
    _refuse_mrope_family(model_type)
    interleaved = _interleaved(model_type, found.get("mrope_interleaved", found.get("interleaved")))
    if isinstance(sections, (str, bytes)) or not isinstance(sections, (list, tuple)):
        raise ValueError(
            f"config field 'mrope_section' must be a list of three numbers of rotary pairs (t, h, w), "
            f"such as [16, 24, 24], got {sections!r}"
        )
    if model_type in _MROPE_HWT_ORDER and len(sections) == 3:
        sections = (sections[2], sections[0], sections[1])  # [h, w, t] -> (t, h, w)
    return tuple(sections), interleaved


def _mrope_rotary_dim(config: Mapping[str, Any], params: Mapping[str, Any], head_dim: int) -> int:
    """The rotated width of an MRoPE model: ``int(head_dim * partial_rotary_factor)`` where its rotary
    module reads the factor (Qwen3.5: 0.25 by default, GLM-4V-MoE 0.5), the whole head elsewhere."""
    model_type = config.get("model_type")
    fallback = _MROPE_TYPES[model_type][2] if model_type in _MROPE_TYPES else 1.0
    if fallback is None:
        return head_dim
    factor = _field(params, "partial_rotary_factor")
    if factor is None:
        factor = _field(config, "partial_rotary_factor")
    factor = fallback if factor is None else factor
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 0 < factor <= 1:
        raise ValueError(f"partial_rotary_factor must be a number in (0, 1], got {factor!r}")
    return int(head_dim * factor)
