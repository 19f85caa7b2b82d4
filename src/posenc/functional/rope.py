"""Rotary position embedding (Su et al. 2021, "RoFormer: Enhanced Transformer with Rotary Position
Embedding", section 3.4).

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``r`` rotated width
(``2 * len(inv_freq)``, at most ``hd``), ``*p`` the shape of ``positions``.

Feature pairs ``(x_a, x_b)`` are rotated by the angle ``position * inv_freq[i]``:

    x_a' = x_a cos - x_b sin,    x_b' = x_b cos + x_a sin

``layout="half"`` pairs features ``(i, i + r/2)`` (GPT-NeoX, Hugging Face Llama's
``rotate_half``); ``layout="interleaved"`` pairs ``(2i, 2i+1)`` (the paper, Meta's Llama, GPT-J's
``rotate_every_two``). Both give the same attention scores up to a fixed permutation of features.

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
    check_choice,
    check_float_dtype,
    check_number,
    check_positive_int,
    check_table_fits,
    two_pi_mod,
)
from .rope_scaling import ODD_WIDTH_SCALINGS, ROPE_SCALINGS, parse_scaling

__all__ = ["rope_inv_freq", "rope_cos_sin", "apply_rope", "rotate_pairs", "ROPE_LAYOUTS"]

ROPE_LAYOUTS = ("half", "interleaved")


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
        check_number("attention_scale", attention_scale, positive=True)
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
    if layout == "half":
        x1, x2 = x.chunk(2, dim=-1)  # [..., r/2] each
        return torch.cat((-x2, x1), dim=-1)  # [..., r]
    x1, x2 = x[..., 0::2], x[..., 1::2]  # [..., r/2] each
    return torch.stack((-x2, x1), dim=-1).flatten(-2)  # [..., r/2, 2] -> [..., r]


def _align_tables(x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    """Check table shapes and give ``[b, s, r]`` tables a head axis for ``[b, h, s, hd]`` inputs."""
    if not isinstance(cos, Tensor) or not isinstance(sin, Tensor):
        raise TypeError(
            f"cos and sin must be tensors [*p, r] (from rope_cos_sin), got {type(cos).__name__} and "
            f"{type(sin).__name__}"
        )
    if cos.shape != sin.shape:
        raise ValueError(f"cos and sin must have the same shape, got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if cos.device != x.device or sin.device != x.device:
        raise ValueError(f"cos and sin (on {cos.device}, {sin.device}) must be on x's device, {x.device}")
    r = cos.shape[-1]
    if r % 2 or r == 0:
        raise ValueError(f"the rotated width cos.shape[-1] must be a positive even number, got {r}")
    if r > x.shape[-1]:
        raise ValueError(f"cos/sin rotate {r} features but x has only {x.shape[-1]} (x shape {tuple(x.shape)})")
    given = tuple(cos.shape)
    if x.dim() == 4 and cos.dim() == 3:
        cos, sin = cos[:, None], sin[:, None]  # [b, s, r] -> [b, 1, s, r]
    # a plain loop: torch.broadcast_shapes costs ~40 us a call, as much as a small rotation
    if any(a != b and a != 1 and b != 1 for a, b in zip(reversed(x.shape[:-1]), reversed(cos.shape[:-1]))):
        raise ValueError(
            f"cos/sin of shape {given} do not broadcast against x of shape {tuple(x.shape)}; expected tables "
            "[s, r], [b, s, r] (read as [b, 1, s, r]) or [b, h, s, r] for x [b, h, s, hd], and 4-D tables "
            "[1, s, 1, r] or [b, s, 1, r] for x [b, s, h, hd]"
        )
    return cos, sin


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, *, layout: str = "half") -> Tensor:
    """Rotate the first ``cos.shape[-1]`` features of ``x``'s last dim; the rest pass unchanged.

    ``x`` is ``[b, h, s, hd]``, with tables ``[s, r]``, ``[b, s, r]`` (a 3-D table for a 4-D ``x``
    is always read as ``[b, s, r]`` and given a head axis) or ``[b, h, s, r]``; other ranks and
    layouts (``[b, s, h, hd]``) need tables whose leading dims broadcast against ``x``'s as they
    stand (``[1, s, 1, r]``). ``cos``/``sin`` come from :func:`rope_cos_sin`. Partial rotary (GPT-NeoX ``rotary_pct``, GPT-J
    ``rotary_dim``) is simply a table narrower than ``hd``.
    """
    check_choice("layout", layout, ROPE_LAYOUTS)
    if not isinstance(x, Tensor) or not x.is_floating_point():  # the rotated values would be truncated to integers
        what = f"dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"x must be a floating-point tensor, got {what}")
    cos, sin = _align_tables(x, cos, sin)
    r = cos.shape[-1]
    x_rot = x[..., :r]
    out = x_rot * cos + rotate_pairs(x_rot, layout) * sin  # promoted dtype
    out = out.to(x.dtype)
    if r == x.shape[-1]:
        return out
    return torch.cat((out, x[..., r:]), dim=-1)
