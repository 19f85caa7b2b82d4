"""Rotary position embedding (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position
Embedding", section 3.4).

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``r`` rotated width
(``2 * len(inv_freq)``, at most ``hd``), ``*p`` the shape of ``positions``.

Feature pairs ``(x_a, x_b)`` are rotated by the angle ``position * inv_freq[i]``:

    x_a' = x_a cos - x_b sin,    x_b' = x_b cos + x_a sin

``layout="half"`` pairs features ``(i, i + r/2)`` (GPT-NeoX, Hugging Face Llama's
``rotate_half``); ``layout="interleaved"`` pairs ``(2i, 2i+1)`` (the paper, Meta's Llama, GPT-J's
``rotate_every_two``). Both give the same attention scores up to a fixed permutation of features.

Other kernels' conventions are accepted as they stand: ``interleaved=True/False`` (flash-attention,
torchtune) and ``is_neox_style=True/False`` (vLLM) name the pair layout (:func:`resolve_layout`);
``tables="half"`` takes half-width tables ``[*p, r/2]``, one value per pair (flash-attention's
``apply_rotary_emb``, vLLM, the proposed ``torch.nn.functional.rotary_embedding``); ``seq_dim``
says which axis of ``x`` is the sequence, so ``[b, s, h, hd]`` and packed ``[total, h, hd]`` inputs
(``seq_dim=-3``) rotate as they lie, without a transpose. ``inverse=True`` rotates by the negative
angles (``R(a)^T = R(-a)``: DeepSeek-V4 de-rotates attention outputs with it) and
``rotary_start`` moves the rotated slice to features ``[start, start + r)`` (DeepSeek-V4 rotates
the trailing ``r`` features of each head).

Precision policy: frequencies are float64; angles are formed from exact positions in float64 and
reduced modulo 2π before cos/sin are cast (float32 products are ~0.05 rad off at position 4e6).
The rotation itself runs in the promoted dtype of ``x`` and the tables (float32 tables and a bf16
input rotate in float32) and the result is cast back to ``x.dtype``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from ._checks import (
    as_positions,
    check_base,
    check_bool,
    check_choice,
    check_float_dtype,
    check_number,
    check_positive_int,
    check_scale_fits,
    check_seq_dim,
    check_table_fits,
    two_pi_mod,
)
from .rope_scaling import ODD_WIDTH_SCALINGS, ROPE_SCALINGS, parse_scaling

__all__ = [
    "rope_inv_freq",
    "rope_cos_sin",
    "apply_rope",
    "rotate_pairs",
    "resolve_layout",
    "full_width_tables",
    "ROPE_LAYOUTS",
    "TABLE_WIDTHS",
]

ROPE_LAYOUTS = ("half", "interleaved")
#: ``"full"``: tables ``[*p, r]`` as :func:`rope_cos_sin` makes them; ``"half"``: ``[*p, r/2]``, one
#: value per pair (flash-attention, vLLM, the proposed ``torch.nn.functional.rotary_embedding``).
TABLE_WIDTHS = ("full", "half")


def rope_inv_freq(
    dim: int,
    *,
    base: float = 10000.0,
    scaling: Mapping[str, Any] | str | None = None,
    seq_len: int | None = None,
) -> tuple[Tensor, float]:
    """Per-pair frequencies ``[dim // 2]`` (float64; odd ``dim``: see below) and the attention scale
    of a RoPE scaling.

    ``scaling`` is a Hugging Face ``rope_scaling`` dict as it stands in ``config.json``
    (``{"rope_type": "linear", "factor": 4.0}``), a bare type name, or None; see
    :mod:`posenc.functional.rope_scaling` for the types. ``seq_len`` matters to the types that change
    with the sequence length (``dynamic``, ``longrope``). The attention scale multiplies cos and sin
    (HF's ``attention_factor`` / ``mscale``); it is 1.0 for unscaled RoPE.

    An odd ``dim`` is what transformers makes of GPT-NeoX's ``int(head_dim * rotary_pct)`` when the
    product is odd: ``(dim + 1) / 2`` frequencies ``base^(-2i/dim)``, which rotate ``dim + 1``
    features. Only the scalings whose HF code runs at an odd width take one (:data:`ODD_WIDTH_SCALINGS`).
    """
    dim = check_positive_int("dim", dim)
    base = check_base(base)
    if seq_len is not None:
        seq_len = check_positive_int("seq_len", seq_len)
    kind, params = parse_scaling(scaling)
    theta = scaling.get("rope_theta") if isinstance(scaling, Mapping) else None
    if theta is not None and theta != base:  # transformers 5 keeps the base inside rope_parameters
        raise ValueError(
            f"scaling holds rope_theta={theta!r}, but base={base!r}: the base is base= here "
            f"(HF's rope_theta); pass base={theta!r}, or leave rope_theta out of scaling"
        )
    if dim % 2 and kind not in ODD_WIDTH_SCALINGS:
        raise ValueError(
            f"rope scaling {kind!r} needs an even rotated width, got {dim} (transformers' {kind} code "
            f"fails at an odd one too); an odd width works with: {', '.join(ODD_WIDTH_SCALINGS)}"
        )
    inv_freq, attention_scale = ROPE_SCALINGS[kind](dim, float(base), params, seq_len)
    return inv_freq.to(torch.float64), float(attention_scale)


def rope_cos_sin(
    positions: int | Tensor,
    inv_freq: Tensor,
    *,
    layout: str = "half",
    attention_scale: float = 1.0,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, Tensor]:
    """cos and sin tables ``[*p, 2 * len(inv_freq)]`` for ``positions``, in ``dtype``.

    ``half`` repeats the angles as ``[a_0..a_{n-1}, a_0..a_{n-1}]`` (HF ``LlamaRotaryEmbedding``);
    ``interleaved`` as ``[a_0, a_0, a_1, a_1, ...]`` (GPT-J ``duplicate_interleave``). Both tables are
    multiplied by ``attention_scale``.
    """
    check_float_dtype(dtype)
    check_choice("layout", layout, ROPE_LAYOUTS)
    if not torch.compiler.is_compiling():  # under dynamic=True a float is symbolic (see check_base)
        check_scale_fits("attention_scale", check_number("attention_scale", attention_scale, positive=True), dtype)
    if not isinstance(inv_freq, Tensor) or inv_freq.dim() != 1:
        raise TypeError(
            f"inv_freq must be a 1-D tensor of per-pair frequencies, got {type(inv_freq).__name__}"
            + (f" of shape {tuple(inv_freq.shape)}" if isinstance(inv_freq, Tensor) else "")
        )
    check_table_fits("RoPE tables", positions, 2 * inv_freq.shape[-1], inv_freq.device)  # formed in float64
    positions = as_positions(positions, device=inv_freq.device)
    angles = two_pi_mod(positions.to(torch.float64)[..., None] * inv_freq.to(torch.float64))  # [*p, r/2]
    if layout == "half":
        angles = torch.cat((angles, angles), dim=-1)  # [*p, r]
    else:
        angles = angles.repeat_interleave(2, dim=-1)  # [*p, r]
    cos, sin = angles.cos(), angles.sin()
    if attention_scale != 1.0:
        cos, sin = cos * attention_scale, sin * attention_scale
    return cos.to(dtype), sin.to(dtype)


def rotate_pairs(x: Tensor, layout: str) -> Tensor:
    """The 90-degree turn of every pair: ``(x_a, x_b) -> (-x_b, x_a)``.

    ``half``: HF ``rotate_half``; ``interleaved``: GPT-J ``rotate_every_two``.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    if not isinstance(x, Tensor):
        raise TypeError(f"x must be a tensor [..., r], got {type(x).__name__}")
    if layout == "half":
        x1, x2 = x.chunk(2, dim=-1)  # [..., r/2] each
        return torch.cat((-x2, x1), dim=-1)  # [..., r]
    x1, x2 = x[..., 0::2], x[..., 1::2]  # [..., r/2] each
    return torch.stack((-x2, x1), dim=-1).flatten(-2)  # [..., r/2, 2] -> [..., r]


def resolve_layout(
    layout: str | None = None, interleaved: bool | None = None, is_neox_style: bool | None = None
) -> str:
    """posenc's pair layout from its own name or the names other stacks use: ``interleaved=True``
    (flash-attention ``apply_rotary_emb``, torchtune) or ``is_neox_style=False`` (vLLM) mean
    ``"interleaved"``; ``interleaved=False`` or ``is_neox_style=True`` mean ``"half"``. Nothing
    given: ``"half"``. Names that agree may be given together; names that contradict raise."""
    said = {}
    if layout is not None:
        said["layout"] = check_choice("layout", layout, ROPE_LAYOUTS)
    for name, value, when_true in (
        ("interleaved", interleaved, "interleaved"),
        ("is_neox_style", is_neox_style, "half"),
    ):
        if value is None:
            continue
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True, False or None, got {value!r}")
        said[name] = when_true if value else ("half" if when_true == "interleaved" else "interleaved")
    if len(set(said.values())) > 1:
        given = ", ".join(
            f"{k}={v!r}"
            for k, v in (("layout", layout), ("interleaved", interleaved), ("is_neox_style", is_neox_style))
            if v is not None
        )
        means = ", ".join(f"{k} means {v!r}" for k, v in said.items())
        raise ValueError(f"contradictory pair layouts: {given} ({means}); give one of them")
    return next(iter(said.values()), "half")


def full_width_tables(cos: Tensor, sin: Tensor, layout: str) -> tuple[Tensor, Tensor]:
    """Half-width tables ``[*p, r/2]`` (one value per pair, flash-attention's and vLLM's) as the
    full-width ``[*p, r]`` that :func:`apply_rope` rotates with: ``[c, c]`` for ``half`` pairs,
    ``[c_0, c_0, c_1, c_1, ...]`` for ``interleaved`` ones (what :func:`rope_cos_sin` builds)."""
    if not isinstance(cos, Tensor) or not isinstance(sin, Tensor) or cos.dim() == 0:
        raise TypeError(
            f"cos and sin must be tensors [*p, r/2] (half-width tables), got {type(cos).__name__} and {type(sin).__name__}"
        )
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if layout == "half":
        return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)  # [*p, r]
    return cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)  # [*p, r]


def _align_tables(x: Tensor, cos: Tensor, sin: Tensor, seq_dim: int = -2) -> tuple[Tensor, Tensor]:
    """Check table shapes and give them the axes ``x`` has after its sequence axis: ``[b, s, r]``
    tables a head axis for ``[b, h, s, hd]`` inputs, ``[s, r]`` / ``[b, s, r]`` tables one before the
    features for ``[b, s, h, hd]`` ones (``seq_dim=-3``)."""
    if not isinstance(cos, Tensor) or not isinstance(sin, Tensor):
        raise TypeError(
            f"cos and sin must be tensors [*p, r] (from rope_cos_sin), got {type(cos).__name__} and "
            f"{type(sin).__name__}"
        )
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if cos.device != x.device or sin.device != x.device:
        raise ValueError(f"cos and sin (on {cos.device}, {sin.device}) must be on x's device, {x.device}")
    if cos.dim() == 0:
        raise ValueError("cos and sin must be tables [*p, r], got 0-d tensors")
    r = cos.shape[-1]
    if r % 2 or r == 0:
        raise ValueError(f"the rotated width cos.shape[-1] must be a positive even number, got {r}")
    if r > x.shape[-1]:
        raise ValueError(
            f"cos/sin rotate {r} features but x has only {x.shape[-1]} (x shape {tuple(x.shape)}); "
            "half-width tables (one value per pair, flash-attention's and vLLM's) need tables='half'"
        )
    given = tuple(cos.shape)
    axis = check_seq_dim(x, seq_dim) if seq_dim != -2 else -2
    if cos.dim() < x.dim() and axis < -2:
        for _ in range(-axis - 2):  # the axes of x between its sequence and its features
            cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)  # [..., s, r] -> [..., s, 1, r]
        lead = (None,) * (x.dim() - cos.dim())  # x's rank: aligning aligned tables changes nothing
        cos, sin = cos[lead], sin[lead]  # e.g. [s, 1, r] -> [1, s, 1, r]
    elif x.dim() == 4 and cos.dim() == 3:
        cos, sin = cos[:, None], sin[:, None]  # [b, s, r] -> [b, 1, s, r]
    # a plain loop: torch.broadcast_shapes costs ~40 us a call, as much as a small rotation
    if cos.dim() > x.dim() or any(
        a != b and a != 1 and b != 1 for a, b in zip(reversed(x.shape[:-1]), reversed(cos.shape[:-1]))
    ):
        raise ValueError(
            f"cos/sin of shape {given} do not broadcast against x of shape {tuple(x.shape)} with seq_dim={seq_dim}; "
            "expected tables [s, r], [b, s, r] (read as [b, 1, s, r]) or [b, h, s, r] for x [b, h, s, hd], and "
            "4-D tables [1, s, 1, r] or [b, s, 1, r] for x [b, s, h, hd] (or [s, r] / [b, s, r] with "
            "seq_dim=-3), [total, r] for packed x [total, h, hd] with seq_dim=-3"
        )
    grown = [i for i, (a, b) in enumerate(zip(reversed(x.shape[:-1]), reversed(cos.shape[:-1]))) if b not in (a, 1)]
    if grown:  # an axis of size 1 in x against a longer one in the tables: the result would not be x's shape
        axis = -2 - grown[0]
        raise ValueError(
            f"cos/sin of shape {given} have {cos.shape[axis]} entries on axis {axis} of x (seq_dim={seq_dim}), "
            f"where x of shape {tuple(x.shape)} has 1: the rotation would broadcast x to a larger result; "
            "pass the rows of x's own positions (for one query at position p: cos[p : p + 1], sin[p : p + 1])"
        )
    return cos, sin


def check_rotary_start(x: Tensor, r: int, rotary_start: int) -> int:
    """``rotary_start`` checked: a non-negative int with ``rotary_start + r`` at most ``x``'s width."""
    if isinstance(rotary_start, bool) or not isinstance(rotary_start, int) or rotary_start < 0:
        raise ValueError(f"rotary_start must be a non-negative int (the first rotated feature), got {rotary_start!r}")
    if rotary_start + r > x.shape[-1]:
        raise ValueError(
            f"rotary_start={rotary_start} with {r} rotated features needs {rotary_start + r} features, but x "
            f"has {x.shape[-1]} (x shape {tuple(x.shape)}); the trailing slice starts at {x.shape[-1] - r}"
        )
    return rotary_start


def prepare_tables(
    x: Tensor, cos: Tensor, sin: Tensor, layout: str, tables: str, rotary_start: int
) -> tuple[Tensor, Tensor]:
    """Full-width tables from ``tables="half"`` ones; the width and ``rotary_start`` checked. The
    part of :func:`apply_rope`'s argument handling that the fast paths share."""
    check_choice("tables", tables, TABLE_WIDTHS)
    if not isinstance(x, Tensor) or not x.is_floating_point():  # the rotated values would be truncated to integers
        what = f"dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"x must be a floating-point tensor, got {what}")
    if tables == "half":
        if isinstance(cos, Tensor) and cos.dim() and 2 * cos.shape[-1] > x.shape[-1] - rotary_start:
            raise ValueError(
                f"half-width tables of width {cos.shape[-1]} rotate {2 * cos.shape[-1]} features, but x has "
                f"{x.shape[-1]}"
                + (f" from rotary_start={rotary_start}" if rotary_start else "")
                + f" (x shape {tuple(x.shape)}); full-width tables [*p, r] (rope_cos_sin's) need tables='full'"
            )
        cos, sin = full_width_tables(cos, sin, layout)
    if rotary_start and isinstance(cos, Tensor) and cos.dim():
        check_rotary_start(x, cos.shape[-1], rotary_start)
    elif rotary_start:
        check_rotary_start(x, 0, rotary_start)
    return cos, sin


def apply_rope(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    *,
    layout: str | None = None,
    interleaved: bool | None = None,
    is_neox_style: bool | None = None,
    inverse: bool = False,
    rotary_start: int = 0,
    seq_dim: int = -2,
    tables: str = "full",
) -> Tensor:
    """Rotate ``r`` features of ``x``'s last dim, from ``rotary_start`` (the first ``r`` by
    default); the rest pass unchanged.

    ``x`` is ``[b, h, s, hd]`` with tables ``[s, r]``, ``[b, s, r]`` (a 3-D table for a 4-D ``x``
    is always read as ``[b, s, r]`` and given a head axis) or ``[b, h, s, r]``. ``seq_dim`` names
    the sequence axis of other layouts: ``seq_dim=-3`` for ``[b, s, h, hd]`` (tables ``[s, r]`` or
    ``[b, s, r]``) and for packed ``[total, h, hd]`` (tables ``[total, r]``, e.g. gathered at
    :func:`~posenc.functional.positions_from_cu_seqlens`); tables of ``x``'s own rank broadcast
    as they stand. ``cos``/``sin`` come from :func:`rope_cos_sin` (``tables="full"``, width
    ``r``), or hold one value per pair (``tables="half"``, width ``r/2``: flash-attention's and
    vLLM's ``(s, r/2)`` tables). Partial rotary (GPT-NeoX ``rotary_pct``, GPT-J ``rotary_dim``) is
    simply a table narrower than ``hd``.

    ``layout`` (``"half"`` by default) may be given as another stack names it: ``interleaved=``
    (flash-attention) or ``is_neox_style=`` (vLLM); see :func:`resolve_layout`. ``inverse=True``
    rotates by the negative angles (the transpose, Su et al. 2021, eq. 13), undoing the rotation.
    """
    layout = resolve_layout(layout, interleaved, is_neox_style)
    check_bool("inverse", inverse)
    cos, sin = prepare_tables(x, cos, sin, layout, tables, rotary_start)
    cos, sin = _align_tables(x, cos, sin, seq_dim)
    if inverse:
        sin = -sin  # R(a)^T = R(-a)
    r = cos.shape[-1]
    start = rotary_start
    x_rot = x[..., start : start + r]
    out = x_rot * cos + rotate_pairs(x_rot, layout) * sin  # promoted dtype
    out = out.to(x.dtype)
    if r == x.shape[-1]:
        return out
    return torch.cat((x[..., :start], out, x[..., start + r :]), dim=-1)
