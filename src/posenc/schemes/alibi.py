"""ALiBi: a fixed, per-head linear penalty on distance (Press et al. 2022, "Train Short, Test Long:
Attention with Linear Biases Enables Input Length Extrapolation", section 3).

Shape legend: ``h`` heads, ``sq``/``sk`` query/key positions, ``b`` batch, ``w`` distances.

The causal form adds ``-m_h · (i - j)`` for keys ``j <= i`` and relies on the causal mask for the
rest; the symmetric form (``bidirectional=True``) adds ``-m_h · |i - j|`` for encoders.

Options:

* ``num_biased_heads=n``: the slopes of ``n`` heads on the first ``n`` heads, the others unbiased
  (slope 0), as x-transformers' ``AlibiPositionalBias(heads=n, total_heads=H)`` (its
  ``alibi_num_heads``), which pads the bias of the last ``H - n`` heads with zeros;
* ``slopes=[...]``: the slopes given (one per biased head) instead of the geometric sequence, as
  x-transformers' ``slopes=`` argument;
* ``train_length=T``: the position interpolation of Al-Khateeb, Dey, Soboleva and Hestness 2023
  ("Position Interpolation Improves ALiBi Extrapolation", section 3): for ``L > T`` keys the slopes
  are scaled by ``T / L``, so that the largest penalty stays what it was in training. ``L`` is the
  number of keys the bias is built for: the bias then depends on the length, not on the distance
  alone, so it is computed directly (no cache), ``score_mod`` answers None (attention materialises
  the bias), and decoding with a KV cache past ``T`` gives each step the slopes of its own length
  (a full forward uses those of the whole sequence for every query).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_bool, check_number, check_positive_int
from ..kernels.bias import build_bias, cached_bias
from ..kernels.flex import ScoreMod
from .base import PositionalEncoding, bias_into, check_bias_fits, register

__all__ = ["ALiBi", "ALiBiConfig", "alibi_score_mod", "config_slopes"]


@dataclass(frozen=True)
class ALiBiConfig:
    num_heads: int
    bidirectional: bool = False  # False: causal form (decoder); True: symmetric -m|i - j| (encoder)
    max_bias: float = 8.0  # the paper's 8 in 2^(-8h/H); MPT's alibi_bias_max
    num_biased_heads: int | None = None  # None: every head; n: the first n heads (x-transformers' alibi_num_heads)
    slopes: tuple[float, ...] | None = None  # None: 2^(-8h/n); else one slope per biased head
    train_length: int | None = None  # Al-Khateeb et al. 2023: slopes * T / L for L > T keys

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_heads", check_positive_int("num_heads", self.num_heads))  # 8.0 -> 8
        check_bool("bidirectional", self.bidirectional)
        object.__setattr__(self, "max_bias", check_number("max_bias", self.max_bias, positive=True))
        if self.num_biased_heads is not None:
            biased = check_positive_int("num_biased_heads", self.num_biased_heads)
            if biased > self.num_heads:
                raise ValueError(
                    f"num_biased_heads must be at most num_heads={self.num_heads} (or None: every head), got {biased}"
                )
            object.__setattr__(self, "num_biased_heads", biased)
        if self.train_length is not None:
            object.__setattr__(self, "train_length", check_positive_int("train_length", self.train_length))
        if self.slopes is not None:
            object.__setattr__(self, "slopes", _check_slopes(self.slopes, self.biased_heads))

    @property
    def biased_heads(self) -> int:
        """How many heads (the first ones) have a slope."""
        return self.num_heads if self.num_biased_heads is None else self.num_biased_heads


def _check_slopes(slopes: object, count: int) -> tuple[float, ...]:
    """``slopes`` as a tuple of ``count`` finite non-negative floats, else raise naming what is accepted."""
    if isinstance(slopes, Tensor) and slopes.dim() != 1:
        raise ValueError(
            f"slopes must be 1-D: one slope per biased head ({count}), got a tensor of shape {tuple(slopes.shape)}"
        )
    if isinstance(slopes, (str, bytes)) or not hasattr(slopes, "__iter__"):
        raise TypeError(
            f"slopes must be a sequence of {count} non-negative numbers (one per biased head), got {slopes!r}"
        )
    values = tuple(check_number("each slope", float(v) if isinstance(v, Tensor) else v, low=0.0) for v in slopes)
    if len(values) != count:
        raise ValueError(
            f"slopes must hold one slope per biased head ({count}: num_biased_heads, else num_heads), "
            f"got {len(values)}: {list(values)}"
        )
    return values


def config_slopes(config: ALiBiConfig) -> Tensor:
    """``[num_heads]`` float64: the slopes of ``config``, zeros on the unbiased heads."""
    n = config.biased_heads
    if config.slopes is not None:
        slopes = torch.tensor(config.slopes, dtype=torch.float64)  # [n]
    else:
        slopes = F.alibi_slopes(n, max_bias=config.max_bias).double()  # [n]
    return torch.cat([slopes, slopes.new_zeros(config.num_heads - n)])  # [h]


def alibi_score_mod(slopes: Tensor, *, q_offset: int | Tensor = 0, bidirectional: bool = False) -> ScoreMod:
    """ALiBi as a FlexAttention score mod: ``score - slope[h] * (q - k)`` (or ``|q - k|``), as
    :func:`posenc.functional.alibi_bias`; ``q_offset`` = query position minus key position at
    index 0. ``slopes``: one per head, a 1-D tensor or a sequence of numbers."""
    if isinstance(slopes, Tensor):
        slopes = slopes.float()
    else:
        try:
            slopes = torch.tensor(slopes, dtype=torch.float32)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(
                f"slopes must be a 1-D tensor or a sequence of numbers, got {type(slopes).__name__}"
            ) from None
    if slopes.dim() != 1 or slopes.numel() == 0:
        raise ValueError(f"slopes must be 1-D, one per head, got shape {tuple(slopes.shape)}")
    offset = torch.as_tensor(q_offset, device=slopes.device)  # a tensor: a new offset does not recompile

    if bidirectional:

        def alibi(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score - slopes[h] * (q_idx + offset - kv_idx).abs()
    else:

        def alibi(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
            return score - slopes[h] * (q_idx + offset - kv_idx)

    return alibi


@register
class ALiBi(PositionalEncoding):
    name = "alibi"
    family = "bias"
    formula = "logit(i, j) += −m_h · (i − j),  m_h = 2^(−8h/H), h = 1 … H (H a power of two; 8 = max_bias)"
    citation = "Press et al. 2022, Train Short, Test Long (ALiBi), section 3"
    Config = ALiBiConfig

    def __init__(self, config: ALiBiConfig) -> None:
        super().__init__(config)
        # float64 so that module-wide casts keep it exact (see PositionalEncoding._apply); the bias is float32
        self.register_buffer("slopes", config_slopes(config), persistent=False)  # [h]

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"num_heads": num_heads, "bidirectional": not causal}

    def bias(self, q_positions: Tensor, k_positions: Tensor, *, out: Tensor | None = None) -> Tensor:
        """``[h, sq, sk]`` for positions ``[s]``; ``[b, h, sq, sk]`` for positions ``[b, s]``;
        written into ``out`` where given (see :meth:`PositionalEncoding.bias`: inference, no
        gradient; a tensor of another shape, dtype or device is a ValueError)."""
        q_positions = F.as_positions(q_positions, device=self.slopes.device)
        k_positions = F.as_positions(k_positions, device=self.slopes.device)
        check_bias_fits(q_positions, k_positions, self.config.num_heads, torch.float32, self.slopes.device)
        scaled = self.interpolated_slopes(k_positions.shape[-1] if k_positions.dim() else 1)
        if scaled is None:  # a function of the distance alone: the Toeplitz build for contiguous ranges
            fast = (
                cached_bias(self, q_positions, k_positions)
                if out is None
                else build_bias(self, q_positions, k_positions, out=out)
            )
            if fast is not None:
                return fast
        # the slopes scaled for this length (Al-Khateeb et al. 2023) or other positions: computed directly
        bias = F.alibi_bias(
            (self.slopes if scaled is None else scaled).float(),
            q_positions,
            k_positions,
            bidirectional=self.config.bidirectional,
        )
        return bias if out is None else bias_into(out, bias)

    def interpolated_slopes(self, length: int) -> Tensor | None:
        """``[h]`` float64: the slopes scaled by ``train_length / length`` when ``length`` exceeds
        ``train_length`` (Al-Khateeb et al. 2023, section 3); None when they apply unscaled."""
        train = self.config.train_length
        if train is None or length <= train:
            return None
        return self.slopes * (train / length)

    def relative_bias_values(self, rel: Tensor) -> Tensor:
        """``[h, w]``: the reference bias of a query at 0 against keys at ``rel`` (the slopes as
        configured: ``train_length``'s scaling depends on the number of keys, see :meth:`bias`)."""
        return F.alibi_bias(self.slopes.float(), rel.new_zeros(1), rel, bidirectional=self.config.bidirectional)[:, 0]

    def score_mod(self, q_offset: int | Tensor) -> ScoreMod | None:
        if self.config.train_length is not None:
            return None  # the slopes depend on the number of keys, which a score mod is not told
        return alibi_score_mod(self.slopes, q_offset=q_offset, bidirectional=self.config.bidirectional)

    def check_attention(self, *, dim: int, num_heads: int, head_dim: int, causal: bool) -> None:
        super().check_attention(dim=dim, num_heads=num_heads, head_dim=head_dim, causal=causal)
        if not causal and not self.config.bidirectional:
            raise ValueError(
                "causal ALiBi (bidirectional=False) penalises only past keys and needs causal=True; "
                "use bidirectional=True for an encoder"
            )
