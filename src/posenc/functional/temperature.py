"""Position-dependent query temperature: a factor on each query that grows with its position.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence (query positions), ``hd`` head width.

Attention logits ``q . k / sqrt(hd)`` spread their softmax over more keys as the context grows; a
factor on the queries that grows like ``log`` of the position keeps the attention as sharp at long
range as in training (Nakanishi 2025, "Scalable-Softmax Is Superior for Attention",
arXiv:2501.19399, section 3: logits scaled by ``s * log n``). Two shipped variants, one formula:

    scale(p) = 1 + beta * log(1 + floor((p + offset) / floor_scale))

* Llama 4 (``attn_temperature_tuning``, on its NoPE layers only): ``offset = 1``,
  ``floor_scale = 8192``, ``beta = attn_scale = 0.1`` (Meta's llama-models ``llama4/model.py``
  ``Attention.forward``; transformers ``Llama4TextAttention.forward``:
  ``log1p(floor((pos + 1) / floor_scale)) * attn_scale + 1``);
* Mistral 3 / Ministral 3 / Mistral 4 (``rope_parameters["llama_4_scaling_beta"]``, every layer):
  ``offset = 0``, ``floor_scale = original_max_position_embeddings`` (16384 in Ministral 3's
  defaults), ``beta = llama_4_scaling_beta`` (transformers ``get_llama_4_attn_scale`` in
  ``modeling_ministral3.py`` and ``modeling_mistral4.py``).

The factor is 1 for every position below ``floor_scale - offset`` and steps up once per
``floor_scale`` positions after that. It is computed in float64 from the exact positions (whole
numbers give the exact floor; transformers' float32 gives the same one up to 2**24) and returned in
float32. Positions below ``-offset`` (left-padding slots, whose queries are masked) get factor 1,
where transformers' formula would take the log of 0 or less. The positions are those given to
attention (``Attention`` passes the absolute ones, after the cached tokens when decoding);
transformers' Llama 4 counts ``past_seen_tokens + 0..s-1`` whatever its ``position_ids``, which is
the same for unpadded sequences and differs for left-padded or packed rows.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from ._checks import as_positions, check_number

__all__ = ["query_temperature", "QueryScale", "QueryTemperature", "as_query_scale", "scale_queries"]


def query_temperature(positions: int | Tensor, *, beta: float, floor_scale: float, offset: float = 0.0) -> Tensor:
    """``1 + beta * log(1 + floor((positions + offset) / floor_scale))``, float32 ``[*positions.shape]``.

    ``positions``: an int ``n`` (``0..n-1``) or a tensor of absolute positions (``[s]`` or ``[b, s]``).
    Llama 4: ``beta=attn_scale`` (0.1), ``floor_scale`` (8192), ``offset=1``; Mistral's
    ``llama_4_scaling_beta``: ``beta`` that value, ``floor_scale=original_max_position_embeddings``,
    ``offset=0``. See the module docstring for the sources.

    >>> query_temperature(torch.tensor([0, 8191, 8192, 16384]), beta=0.1, floor_scale=8192, offset=1)
    tensor([1.0000, 1.0693, 1.0693, 1.1099])
    """
    beta = check_number("beta", beta)
    floor_scale = check_number("floor_scale", floor_scale, positive=True)
    offset = check_number("offset", offset)
    positions = as_positions(positions)
    steps = torch.floor((positions.double() + offset) / floor_scale).clamp_min(0)  # [*positions.shape]
    return (1.0 + beta * torch.log1p(steps)).float()


class QueryScale(abc.ABC):
    """A factor on the queries by absolute position, as :class:`posenc.Attention` applies it
    (``query_scale=``): :meth:`factor` gives ``[*positions.shape]``, :meth:`scale` multiplies
    ``q [b, h, s, hd]`` by it."""

    @abc.abstractmethod
    def factor(self, positions: Tensor) -> Tensor:
        """The factor of each position: ``[*positions.shape]``."""

    def scale(self, q: Tensor, positions: Tensor, n_axes: int = 1) -> Tensor:
        """``q [b, h, s, hd]`` times the factor of each query's position (``[s]`` or ``[b, s]``),
        multiplied in float32 (float64 for float64 queries) and returned in ``q``'s dtype, as
        Llama 4 does (``(query_states * attn_scales).to(query_states.dtype)``); Mistral rounds the
        factor to ``q``'s dtype first, which differs by at most one rounding in bf16."""
        return scale_queries(q, positions, self, n_axes=n_axes)


@dataclass(frozen=True)
class QueryTemperature(QueryScale):
    """The log-step temperature of :func:`query_temperature` as a config (frozen, checked when built)."""

    beta: float
    floor_scale: float
    offset: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "beta", check_number("beta", self.beta))
        object.__setattr__(self, "floor_scale", check_number("floor_scale", self.floor_scale, positive=True))
        object.__setattr__(self, "offset", check_number("offset", self.offset))

    @classmethod
    def llama4(cls, *, floor_scale: float = 8192, attn_scale: float = 0.1) -> QueryTemperature:
        """Llama 4's ``attn_temperature_tuning`` (its config's ``floor_scale`` and ``attn_scale``;
        transformers ``Llama4TextConfig`` defaults)."""
        return cls(beta=attn_scale, floor_scale=floor_scale, offset=1.0)

    @classmethod
    def llama_4_scaling(cls, *, beta: float, original_max_position_embeddings: float) -> QueryTemperature:
        """Mistral's ``llama_4_scaling_beta`` (Ministral 3, Mistral 4) with the original length of
        its ``rope_parameters``."""
        return cls(beta=beta, floor_scale=original_max_position_embeddings, offset=0.0)

    def factor(self, positions: Tensor) -> Tensor:
        return query_temperature(positions, beta=self.beta, floor_scale=self.floor_scale, offset=self.offset)


class _CallableScale(QueryScale):
    """A user's function ``positions -> factor`` as a :class:`QueryScale`."""

    def __init__(self, fn: Callable[[Tensor], Tensor]) -> None:
        self.fn = fn

    def factor(self, positions: Tensor) -> Tensor:
        return self.fn(positions)

    def __repr__(self) -> str:
        return f"QueryScale({self.fn!r})"


def as_query_scale(query_scale: Any) -> QueryScale | None:
    """``query_scale`` as a :class:`QueryScale`: None, a :class:`QueryScale` (such as
    :class:`QueryTemperature`), or a function of positions ``[s]`` / ``[b, s]`` returning a
    factor of the same shape."""
    if query_scale is None or isinstance(query_scale, QueryScale):
        return query_scale
    if callable(query_scale):
        return _CallableScale(query_scale)
    raise TypeError(
        "query_scale must be None, a posenc.functional.QueryTemperature (e.g. QueryTemperature.llama4()) "
        f"or a function of positions [s] / [b, s] returning a factor of that shape, got {type(query_scale).__name__}"
    )


def scale_queries(
    q: Tensor, positions: Tensor, query_scale: QueryScale | Callable[[Tensor], Tensor], n_axes: int = 1
) -> Tensor:
    """``q [b, h, s, hd]`` times ``query_scale``'s factor at ``positions`` (``[s]`` or ``[b, s]``:
    the absolute positions of the queries, those after the cached ones when decoding).

    The factor is formed from 1-D positions; schemes with coordinates (``n_axes > 1``) are refused.
    """
    if n_axes != 1:
        raise ValueError(f"a query scale is a function of 1-D positions; this encoding takes {n_axes}-D coordinates")
    scale = as_query_scale(query_scale)
    factor = scale.factor(positions)
    b, _, s, _ = q.shape
    if not isinstance(factor, Tensor) or tuple(factor.shape) not in ((s,), (1, s), (b, s)):
        got = tuple(factor.shape) if isinstance(factor, Tensor) else type(factor).__name__
        raise ValueError(
            f"query_scale must return one factor per query position, shape [s] or [b, s] "
            f"with b={b}, s={s} (the shape of its positions, {tuple(positions.shape)}), got {got}"
        )
    wide = torch.float64 if q.dtype == torch.float64 else torch.float32
    factor = factor.to(device=q.device, dtype=wide)
    factor = factor[None, None, :, None] if factor.dim() == 1 else factor[:, None, :, None]  # [b or 1, 1, s, 1]
    return (q.to(wide) * factor).to(q.dtype)
