"""Relative-position functions: T5 buckets, ALiBi slopes and biases, Shaw's clipped index.

Shape legend: ``h`` heads, ``sq`` query positions, ``sk`` key positions, ``*r`` any shape of
relative positions, ``w = sq + sk - 1`` distinct distances. A relative position is always *key
position minus query position*, as in T5.

:func:`alibi_bias_range` and :func:`t5_bias_range` give the biases for contiguous ranges of
positions from their ``w`` distances, expanded by :func:`~posenc.functional.toeplitz.toeplitz`.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ._checks import (
    as_positions,
    broadcast_shape,
    check_bool,
    check_fits,
    check_integer_positions,
    check_meta_mix,
    check_number,
    check_positive_int,
    has_values,
)
from .toeplitz import relative_range, toeplitz

__all__ = [
    "t5_relative_bucket",
    "alibi_slopes",
    "alibi_bias",
    "alibi_bias_range",
    "t5_bias_range",
    "relative_positions",
    "clipped_relative_index",
    "relative_clip",
]


def _lead(q_positions: Tensor, k_positions: Tensor) -> tuple[int, ...] | None:
    """The leading (batch) dims of a relative-position matrix; None for 0-d positions or leading
    dims that do not broadcast."""
    if q_positions.dim() == 0 or k_positions.dim() == 0:
        return None
    return broadcast_shape(tuple(q_positions.shape[:-1]), tuple(k_positions.shape[:-1]))


def relative_positions(q_positions: Tensor, k_positions: Tensor) -> Tensor:
    """``k - q`` for every (query, key) pair: ``[..., sq]`` and ``[..., sk]`` give ``[..., sq, sk]``.

    Integer positions are subtracted in int64: uint8 would wrap ``3 - 5`` to 254 and int16 overflow.
    Where either side is a float tensor both are subtracted in float64 (exact for int64 positions up
    to 2**53), so float32 never rounds a distance of 1 at 2**24 to 0.
    Positions are read as :func:`~posenc.functional.as_positions` reads them (an int ``n`` is
    ``0..n-1``, lists are taken as tensors; NaN, boolean and half-precision positions are refused).
    """
    q_positions, k_positions = as_positions(q_positions), as_positions(k_positions)
    if q_positions.device != k_positions.device:
        raise ValueError(
            f"query positions (on {q_positions.device}) and key positions (on {k_positions.device}) must be "
            "on one device"
        )
    for name, p in (("query", q_positions), ("key", k_positions)):
        if p.dim() == 0:
            raise ValueError(
                f"{name} positions must be [s] or [b, s], got a 0-d tensor ({p.item() if has_values(p) else p!r}); "
                "wrap a single position as [p]"
            )
    lead = _lead(q_positions, k_positions)
    if lead is None:
        raise ValueError(
            f"query positions {tuple(q_positions.shape)} and key positions {tuple(k_positions.shape)} "
            "must have matching leading (batch) dims"
        )
    if q_positions.is_floating_point() or k_positions.is_floating_point():
        # as alibi_bias does: int64 against float32 would subtract in float32, where 2**24 + 1 is 2**24
        q_positions, k_positions = q_positions.double(), k_positions.double()
    else:
        q_positions, k_positions = q_positions.long(), k_positions.long()
    dtype = q_positions.dtype
    check_fits("relative positions", (*lead, q_positions.shape[-1], k_positions.shape[-1]), dtype, q_positions.device)
    return k_positions[..., None, :] - q_positions[..., :, None]


def t5_relative_bucket(
    relative_position: Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Tensor:
    """Map relative positions (key minus query) to T5's buckets: ``[*r]`` -> LongTensor ``[*r]``.

    Half the buckets (all of them when causal) hold exact distances ``0..max_exact-1``; the rest
    are logarithmically spaced up to ``max_distance``, beyond which everything shares the last
    bucket. Bidirectional mode gives keys after the query the upper half of the buckets; causal mode
    sends every key after the query to bucket 0.

    Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
    Transformer", section 2.1; matches Mesh TensorFlow ``_relative_position_bucket`` and HF
    ``T5Attention._relative_position_bucket`` bucket for bucket (same float32 logarithm).
    """
    check_bool("bidirectional", bidirectional)
    num_buckets = check_positive_int("num_buckets", num_buckets)
    max_distance = check_positive_int("max_distance", max_distance)
    min_buckets = 4 if bidirectional else 2
    if num_buckets < min_buckets:
        raise ValueError(
            f"num_buckets must be at least {min_buckets} when bidirectional={bidirectional}, got {num_buckets}"
        )
    if not isinstance(relative_position, Tensor):
        try:
            relative_position = torch.as_tensor(relative_position)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"relative_position must be an integer tensor of distances, got {type(relative_position).__name__}"
            ) from err
    relative_position = check_integer_positions(relative_position, "t5_relative_bucket")
    buckets = torch.zeros_like(relative_position)
    given = num_buckets
    if bidirectional:
        num_buckets //= 2
        buckets = buckets + (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        distance = (-relative_position).clamp(min=0)
    max_exact = num_buckets // 2
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance must exceed the {max_exact} exact buckets (num_buckets={given}, bidirectional={bidirectional}), "
            f"got {max_distance}"
        )
    is_small = distance < max_exact
    # float32 logarithm exactly as the references compute it, so bucket edges agree
    log_ratio = torch.log(distance.clamp(min=1).float() / max_exact) / math.log(max_distance / max_exact)
    if_large = max_exact + (log_ratio * (num_buckets - max_exact)).long()
    if_large = if_large.clamp(max=num_buckets - 1)
    return buckets + torch.where(is_small, distance, if_large)


def _power_of_two_slopes(n: int, max_bias: float) -> list[float]:
    start = 2.0 ** (-max_bias / n)
    return [start ** (i + 1) for i in range(n)]


def alibi_slopes(num_heads: int, *, max_bias: float = 8.0) -> Tensor:
    """ALiBi's per-head slopes ``[num_heads]`` (float32).

    For ``n`` a power of two: the geometric sequence starting at ``2^(-8/n)`` with that ratio.
    Otherwise the slopes of the closest smaller power of two ``m``, followed by every other slope of
    ``2m`` heads until there are ``n``. Press et al. 2022, "Train Short, Test Long", section 3 and
    footnote; matches ``ofirpress/attention_with_linear_biases`` ``get_slopes`` and HF Bloom's
    ``build_alibi_tensor``. ``max_bias`` replaces the paper's 8 (the last head of a power-of-two
    count gets ``2^-max_bias``): MPT's ``alibi_bias_max`` (HF ``build_mpt_alibi_tensor``, which
    orders the slopes of other head counts the same way).
    """
    num_heads = check_positive_int("num_heads", num_heads)
    max_bias = check_number("max_bias", max_bias, positive=True)  # 8 in the paper
    closest = 2 ** int(math.floor(math.log2(num_heads)))
    slopes = _power_of_two_slopes(closest, max_bias)
    if closest < num_heads:
        slopes += _power_of_two_slopes(2 * closest, max_bias)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float64).float()


def alibi_bias(slopes: Tensor, q_positions: Tensor, k_positions: Tensor, *, bidirectional: bool = False) -> Tensor:
    """ALiBi bias ``[h, sq, sk]`` (or ``[b, h, sq, sk]`` for batched positions).

    Causal form (Press et al. 2022, eq. in section 3): ``-slope * (q - k)``, meant to be used with a
    causal mask (keys after the query get positive values that the mask removes). Symmetric form
    for encoders: ``-slope * |q - k|`` (as x-transformers' ``AlibiPositionalBias`` and the
    bidirectional ALiBi of e.g. MosaicBERT). Computed in float32 or wider (the promoted dtype of
    ``slopes`` and float32), never in half precision; the distances themselves are exact: int64
    for integer positions, float64 when either side is a float tensor. Positions with more
    leading dims ``[..., s]`` give ``[..., h, sq, sk]``, as T5's bias does. A bias larger than the
    memory available is refused before it is built (:class:`~posenc._memory.TooLargeError`,
    a ValueError).
    """
    if not isinstance(slopes, Tensor) or slopes.dim() != 1:
        raise ValueError(
            f"slopes must be a 1-D tensor [h], got {tuple(slopes.shape) if isinstance(slopes, Tensor) else type(slopes).__name__}"
        )
    check_bool("bidirectional", bidirectional)
    q_positions, k_positions = (p if isinstance(p, Tensor) else as_positions(p) for p in (q_positions, k_positions))
    if q_positions.device == k_positions.device:  # positions on two devices: relative_positions names them
        check_meta_mix(q_positions=q_positions, slopes=slopes)
    if q_positions.is_floating_point() or k_positions.is_floating_point():
        # int64 against float32 would subtract in float32, where 2**24 + 1 is 2**24: a distance of 1 read as 0
        q_positions, k_positions = q_positions.double(), k_positions.double()
    # at least float32: bf16 would round distances past 256 (and slopes) before the product
    dtype = torch.promote_types(slopes.dtype, torch.float32)
    lead = _lead(q_positions, k_positions)  # None: relative_positions says what is wrong
    if lead is not None:
        shape = (*lead, slopes.shape[0], q_positions.shape[-1], k_positions.shape[-1])  # [..., h, sq, sk]
        check_fits("an ALiBi bias", shape, dtype, slopes.device)
    rel = relative_positions(q_positions, k_positions).to(dtype)  # [..., sq, sk]
    distance = rel.abs() if bidirectional else -rel
    slopes = slopes.to(dtype).view(-1, 1, 1)  # [h, 1, 1]
    return -slopes * distance.unsqueeze(-3)  # [..., 1, sq, sk] -> [..., h, sq, sk]


def alibi_bias_range(
    slopes: Tensor,
    sq: int,
    sk: int,
    *,
    q_offset: int = 0,
    k_offset: int = 0,
    bidirectional: bool = False,
    out: Tensor | None = None,
) -> Tensor:
    """ALiBi's bias ``[h, sq, sk]`` for contiguous positions; equals :func:`alibi_bias`.

    ``-slope * (q - k)`` (causal) or ``-slope * |q - k|`` (Press et al. 2022, section 3), evaluated
    on the ``w`` distances and expanded by :func:`~posenc.functional.toeplitz.toeplitz`.
    """
    if not isinstance(slopes, Tensor) or slopes.dim() != 1:
        raise ValueError(
            f"slopes must be a 1-D tensor [h], got "
            f"{tuple(slopes.shape) if isinstance(slopes, Tensor) else type(slopes).__name__}"
        )
    check_bool("bidirectional", bidirectional)
    rel = relative_range(sq, sk, q_offset=q_offset, k_offset=k_offset, device=slopes.device).to(slopes.dtype)  # [w]
    distance = rel.abs() if bidirectional else -rel
    values = -slopes[:, None] * distance  # [h, w]
    return toeplitz(values, sq, sk, out=out)


def t5_bias_range(
    weight: Tensor,
    sq: int,
    sk: int,
    *,
    q_offset: int = 0,
    k_offset: int = 0,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
    out: Tensor | None = None,
) -> Tensor:
    """T5's bias ``[h, sq, sk]`` from its table ``weight [num_buckets, h]`` for contiguous positions.

    Raffel et al. 2020, section 2.1; the buckets are :func:`t5_relative_bucket` (HF
    ``T5Attention._relative_position_bucket``) of the ``w`` distinct distances.
    """
    num_buckets = check_positive_int("num_buckets", num_buckets)
    if not isinstance(weight, Tensor) or weight.dim() != 2 or weight.shape[0] < num_buckets:
        raise ValueError(
            f"weight must be the table [num_buckets, h] with num_buckets={num_buckets} rows, got "
            f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}"
        )
    check_bool("bidirectional", bidirectional)
    rel = relative_range(sq, sk, q_offset=q_offset, k_offset=k_offset, device=weight.device)  # [w]
    buckets = t5_relative_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    values = weight[buckets].t()  # [w, h] -> [h, w]
    return toeplitz(values, sq, sk, out=out)


def clipped_relative_index(
    q_positions: Tensor, k_positions: Tensor, max_relative_position: int | tuple[int, int]
) -> Tensor:
    """Shaw et al.'s embedding index ``clip(k - q, -K, K) + K`` in ``[0, 2K]``: ``[..., sq, sk]``.

    Shaw, Uszkoreit and Vaswani 2018, "Self-Attention with Relative Position Representations",
    section 3.2: distances beyond ``K`` share the edge embeddings, so ``2K + 1`` embeddings serve any
    length. Matches tensor2tensor ``_generate_relative_positions_matrix``. ``(left, right)``
    clips keys before the query at ``left`` and after it at ``right``: ``clip(k - q, -left, right) +
    left`` in ``[0, left + right]`` (HF Wav2Vec2-BERT's and SeamlessM4T's ``relative_key``:
    ``left_max_position_embeddings``, ``right_max_position_embeddings``).
    """
    left, right = relative_clip(max_relative_position)
    q_positions = check_integer_positions(as_positions(q_positions), "shaw relative positions")
    k_positions = check_integer_positions(as_positions(k_positions), "shaw relative positions")
    return relative_positions(q_positions, k_positions).clamp(-left, right) + left


def relative_clip(max_relative_position: int | tuple[int, int]) -> tuple[int, int]:
    """``(left, right)`` clipping distances from Shaw's ``K`` (both ``K``) or a pair ``(left, right)``."""
    if isinstance(max_relative_position, (tuple, list)):
        if len(max_relative_position) != 2:
            raise ValueError(
                "max_relative_position must be K or a pair (left, right) of clipping distances, got "
                f"{max_relative_position!r}"
            )
        return (
            check_positive_int("max_relative_position left", max_relative_position[0]),
            check_positive_int("max_relative_position right", max_relative_position[1]),
        )
    k_max = check_positive_int("max_relative_position", max_relative_position)
    return k_max, k_max
