"""Multimodal rotary position embedding (MRoPE): RoPE whose rotary pairs each turn by one of three
coordinates, time, height or width (Wang et al. 2024, "Qwen2-VL: Enhancing Vision-Language Model's
Perception of the World at Any Resolution", arXiv 2409.12191, section 2.1 "Multimodal Rotary
Position Embedding"; Bai et al. 2025, "Qwen3-VL Technical Report", arXiv 2511.21631, "Interleaved
MRoPE").

Shape legend: ``*p`` leading position dims (``[s]`` or ``[b, s]``), ``n`` rotary pairs
(``len(inv_freq)``), ``r = 2n`` rotated width; coordinates are ``[*p, 3]`` in the order
``(t, h, w)``.

Pair ``i`` turns by ``positions[..., axis[i]] * inv_freq[i]``: every pair keeps its RoPE frequency,
only the coordinate it reads changes. :func:`mrope_axes` gives ``axis``:

* contiguous sections (Qwen2-VL, Qwen2.5-VL, GLM-4V, PaddleOCR-VL): the first ``sections[0]`` pairs
  read ``t``, the next ``sections[1]`` read ``h``, the last ``sections[2]`` read ``w`` (transformers
  ``Qwen2VLRotaryEmbedding.recomposition_frequencies``: ``freq.split(mrope_section)`` and block
  ``i`` from axis ``i % 3``; the same as the older ``apply_multimodal_rotary_pos_emb``, which split
  the doubled ``half`` table by ``mrope_section * 2``);
* interleaved (Qwen3-VL, Qwen3.5, ``mrope_interleaved``): pair ``i`` reads ``h`` when
  ``i % 3 == 1`` and ``i < 3 * sections[1]``, ``w`` when ``i % 3 == 2`` and ``i < 3 * sections[2]``,
  ``t`` otherwise (transformers ``Qwen3VLTextRotaryEmbedding.recomposition_frequencies``, formerly
  ``apply_interleaved_mrope``), so every axis gets high and low frequencies alike;
* ``"hw"`` (Ernie 4.5 VL): the first ``2 * sections[1]`` pairs alternate ``h, w, h, w, ...``
  (``sections[1] == sections[2]``), the last ``sections[0]`` read ``t`` (transformers
  ``Ernie4_5_VLMoeTextRotaryEmbedding``: its pre-rotated ``inv_freq`` and
  ``torch.stack([freq_h, freq_w], dim=-1).flatten(-2)`` give pair ``i`` its own frequency
  ``inv_freq[i]``; its ``mrope_section`` lists ``[h, w, t]``).

For text tokens ``t = h = w``, and MRoPE equals plain RoPE (:func:`~posenc.functional.rope_cos_sin`)
at that position. Angles are formed in float64 from exact positions and reduced modulo 2π before
the cast, as in :func:`~posenc.functional.rope_cos_sin` (transformers forms them in float32).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from ._checks import (
    as_positions,
    check_choice,
    check_device,
    check_float_dtype,
    check_int,
    check_meta_mix,
    check_number,
    check_scale_fits,
    check_table_fits,
    two_pi_mod,
)
from .rope import ROPE_LAYOUTS

__all__ = ["MROPE_AXES", "MROPE_ASSIGNMENTS", "mrope_sections", "mrope_axes", "mrope_coordinates", "mrope_cos_sin"]

#: The three coordinates of a position, in the order of the last dim of MRoPE positions.
MROPE_AXES = ("t", "h", "w")
#: The values of ``interleaved``: contiguous sections, Qwen3-VL's interleaving, Ernie 4.5 VL's h/w alternation.
MROPE_ASSIGNMENTS = (False, True, "hw")


def mrope_sections(sections: object, pairs: int | None = None) -> tuple[int, int, int]:
    """``sections`` checked: three non-negative whole numbers of rotary pairs for ``(t, h, w)``
    (HF ``mrope_section``), adding up to ``pairs`` when given. Raises ValueError naming the value."""
    if isinstance(sections, (str, bytes)) or not isinstance(sections, Sequence) or len(sections) != 3:
        raise ValueError(
            f"mrope sections must be three numbers of rotary pairs for the (t, h, w) axes, such as "
            f"[16, 24, 24] (Qwen2-VL's mrope_section), got {sections!r}"
        )
    out = []
    for value in sections:
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not whole or value < 0:
            raise ValueError(
                f"mrope sections must be non-negative whole numbers of rotary pairs, got {list(sections)!r}"
            )
        out.append(int(value))
    if pairs is not None and sum(out) != pairs:
        raise ValueError(
            f"mrope sections {out} add up to {sum(out)} rotary pairs, but the rotated width has {pairs} "
            f"pairs ({2 * pairs} features): the sections must add up to half the rotated width"
        )
    return out[0], out[1], out[2]


def mrope_axes(
    sections: Sequence[int], *, interleaved: bool | str = False, device: torch.device | None = None
) -> Tensor:
    """The coordinate (0 = t, 1 = h, 2 = w) that each rotary pair reads: LongTensor ``[n]``,
    ``n = sum(sections)``.

    ``interleaved=False``: contiguous blocks of ``sections[0]``, ``sections[1]``, ``sections[2]``
    pairs (transformers ``Qwen2VLRotaryEmbedding``); ``True``: the Qwen3-VL assignment ``t h w t h w
    ...`` (``Qwen3VLTextRotaryEmbedding.recomposition_frequencies``), ``h`` on pairs ``i % 3 == 1``
    below ``3 * sections[1]``, ``w`` on ``i % 3 == 2`` below ``3 * sections[2]``, ``t`` elsewhere;
    ``"hw"``: Ernie 4.5 VL's ``h w h w ... t t t`` (``sections[1] == sections[2]``).
    """
    sections = mrope_sections(sections)
    interleaved = check_interleaved(interleaved)
    device = check_device(device)
    if interleaved == "hw":
        if sections[1] != sections[2]:
            raise ValueError(
                f"the 'hw' assignment alternates h and w pairs: sections[1] (h) and sections[2] (w) must be "
                f"equal, got sections {list(sections)}"
            )
        axes = [1, 2] * sections[1] + [0] * sections[0]
    elif interleaved:
        axes = [i % 3 if i % 3 and i < 3 * sections[i % 3] else 0 for i in range(sum(sections))]
    else:
        axes = [axis for axis, count in enumerate(sections) for _ in range(count)]
    return torch.tensor(axes, dtype=torch.long, device=device)  # [n], from host values (meta and compile safe)


def check_interleaved(value: object) -> bool | str:
    """``value`` if it is an MRoPE assignment (:data:`MROPE_ASSIGNMENTS`), else a ValueError naming them."""
    if value is True or value is False or value == "hw":
        return value  # type: ignore[return-value]
    raise ValueError(
        f"interleaved must be False (contiguous sections, Qwen2-VL), True (t h w t h w ..., Qwen3-VL) or "
        f"'hw' (h w h w ... then t, Ernie 4.5 VL), got {value!r}"
    )


def mrope_coordinates(
    positions: int | Tensor, *, length: int | None = None, device: torch.device | None = None
) -> Tensor:
    """``positions`` as MRoPE coordinates ``[*p, 3]``.

    A tensor whose last dim is 3 (and, when ``length`` is given, whose dim before it is ``length``)
    is taken as ``(t, h, w)`` coordinates already; anything else (an int ``n``, positions ``[s]`` or
    ``[b, s]``) is text: ``t = h = w = position`` (what transformers' Qwen-VL models use for text,
    ``position_ids.expand(3, -1, -1)``). Where both readings fit, any ``[n, 3]`` without ``length``
    (coordinates of n tokens, or text positions of a batch of n rows of 3 tokens), the coordinate
    reading wins, as for posenc's other multi-axis schemes: give such text positions with ``length=3``
    or as coordinates ``[b, 3, 3]``.
    """
    if length is not None:
        length = check_int("length", length)
    positions = as_positions(positions, device=check_device(device))
    is_coords = positions.dim() >= 2 and positions.shape[-1] == 3
    if is_coords and length is not None:
        is_coords = positions.shape[-2] == length
    if is_coords:
        return positions
    if length is not None and (positions.dim() == 0 or positions.shape[-1] != length):
        raise ValueError(
            f"expected text positions [s] or [b, s], or MRoPE coordinates (t, h, w) [s, 3] or [b, s, 3], "
            f"with s = length = {length}; got shape {tuple(positions.shape)}"
        )
    return positions[..., None].expand(*positions.shape, 3)  # [*p, 3]: t = h = w


def mrope_cos_sin(
    positions: Tensor,
    inv_freq: Tensor,
    sections: Sequence[int],
    *,
    interleaved: bool | str = False,
    layout: str = "half",
    attention_scale: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """cos and sin tables ``[*p, 2n]`` for coordinates ``positions [*p, 3]`` (t, h, w).

    ``inv_freq [n]`` are the per-pair frequencies of any RoPE scaling
    (:func:`~posenc.functional.rope_inv_freq`; transformers' Qwen-VL rotary modules take theirs from
    ``ROPE_INIT_FUNCTIONS`` the same way), ``sections`` the pairs per axis (HF ``mrope_section``,
    adding up to ``n``), ``interleaved`` the axis assignment of :func:`mrope_axes`. ``layout`` repeats
    the angles as :func:`~posenc.functional.rope_cos_sin` does: ``half`` ``[a, a]`` (Qwen's
    ``torch.cat((freq, freq))``), ``interleaved`` ``[a_0, a_0, a_1, a_1, ...]`` (GLM-4V's
    ``repeat_interleave(2)``). Both tables are multiplied by ``attention_scale`` (YaRN's
    ``attention_factor``).
    """
    if not isinstance(inv_freq, Tensor) or inv_freq.dim() != 1:
        raise TypeError(
            f"inv_freq must be a 1-D tensor of per-pair frequencies, got {type(inv_freq).__name__}"
            + (f" of shape {tuple(inv_freq.shape)}" if isinstance(inv_freq, Tensor) else "")
        )
    sections = mrope_sections(sections)
    if sum(sections) != inv_freq.shape[0]:
        raise ValueError(
            f"mrope sections {list(sections)} add up to {sum(sections)} rotary pairs, but the rotated width has "
            f"{inv_freq.shape[0]} pairs (inv_freq holds {inv_freq.shape[0]} frequencies, one per pair): the "
            "sections must add up to len(inv_freq)"
        )
    check_meta_mix(positions=positions, inv_freq=inv_freq)
    axes = mrope_axes(sections, interleaved=interleaved, device=inv_freq.device)
    return cos_sin_of_axes(positions, inv_freq, axes, layout=layout, attention_scale=attention_scale, dtype=dtype)


def cos_sin_of_axes(
    positions: Tensor,
    inv_freq: Tensor,
    axes: Tensor,
    *,
    layout: str = "half",
    attention_scale: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """:func:`mrope_cos_sin` with the axis of each pair given (``axes [n]`` from :func:`mrope_axes`,
    which a module keeps as a buffer on its device)."""
    check_float_dtype(dtype)
    check_choice("layout", layout, ROPE_LAYOUTS)
    if not torch.compiler.is_compiling():  # under dynamic=True a float is symbolic (as in rope_cos_sin)
        check_scale_fits("attention_scale", check_number("attention_scale", attention_scale, positive=True), dtype)
    if not isinstance(positions, Tensor) or positions.dim() < 1 or positions.shape[-1] != 3:
        shape = tuple(positions.shape) if isinstance(positions, Tensor) else type(positions).__name__
        raise ValueError(
            f"MRoPE positions must be coordinates (t, h, w) [*p, 3] such as [s, 3] or [b, s, 3], got {shape}; "
            "text positions [s] / [b, s] become coordinates with posenc.functional.mrope_coordinates"
        )
    n = inv_freq.shape[0]
    check_table_fits("MRoPE tables", positions[..., 0], 2 * n, inv_freq.device)  # formed in float64
    positions = as_positions(positions, device=inv_freq.device)
    per_pair = positions.to(torch.float64).index_select(-1, axes)  # [*p, n]: the coordinate each pair reads
    angles = two_pi_mod(per_pair * inv_freq.to(torch.float64))  # [*p, n]
    if layout == "half":
        angles = torch.cat((angles, angles), dim=-1)  # [*p, r]
    else:
        angles = angles.repeat_interleave(2, dim=-1)  # [*p, r]
    cos, sin = angles.cos(), angles.sin()
    if attention_scale != 1.0:
        cos, sin = cos * attention_scale, sin * attention_scale
    return cos.to(dtype), sin.to(dtype)
