"""Sinusoidal position tables (Vaswani et al. 2017, "Attention Is All You Need", section 3.5).

Shape legend: ``*p`` the shape of ``positions``, ``d`` the encoding width.

    PE(p, 2i)   = sin(p * base^(-2i/d))
    PE(p, 2i+1) = cos(p * base^(-2i/d))

Two layouts and two frequency spacings are in use and silently differ between libraries:

* ``layout="interleaved"`` puts sin and cos of one frequency side by side (features 2i, 2i+1), as
  the paper and ``positional-encodings``' ``PositionalEncoding1D`` do; ``layout="half"`` puts all
  sines first and all cosines after (features i and i + d/2), as tensor2tensor's
  ``get_timing_signal_1d`` and fairseq's ``SinusoidalPositionalEmbedding`` do.
* ``frequencies="paper"`` spaces the frequencies as ``base^(-2i/d)``; ``frequencies="tensor2tensor"``
  as ``base^(-i/(d/2-1))`` (tensor2tensor ``get_timing_signal_1d``, fairseq
  ``SinusoidalPositionalEmbedding.get_embedding``), so the last pair reaches exactly ``1/base``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import (
    as_positions,
    check_base,
    check_choice,
    check_even_dim,
    check_float_dtype,
    check_positive_int,
    check_table_fits,
    two_pi_mod,
)

__all__ = ["sinusoidal", "sinusoidal_inv_freq", "sinusoidal_table", "LAYOUTS", "SINUSOID_FREQUENCIES"]

LAYOUTS = ("interleaved", "half")
SINUSOID_FREQUENCIES = ("paper", "tensor2tensor")


def sinusoidal_inv_freq(dim: int, *, base: float = 10000.0, frequencies: str = "paper") -> Tensor:
    """The ``dim // 2`` angular frequencies of a sinusoidal table, in float64.

    ``paper``: ``base^(-2i/d)`` (Vaswani et al. 2017, eq. in section 3.5).
    ``tensor2tensor``: ``base^(-i/max(d/2-1, 1))`` (tensor2tensor ``common_attention.get_timing_signal_1d``
    with ``min_timescale=1``; fairseq ``SinusoidalPositionalEmbedding.get_embedding``).
    """
    dim = check_even_dim("dim", dim)
    check_choice("frequencies", frequencies, SINUSOID_FREQUENCIES)
    base = check_base(base)
    half = dim // 2
    i = torch.arange(half, dtype=torch.float64)
    if frequencies == "paper":
        exponent = 2 * i / dim
    else:
        exponent = i / max(half - 1, 1)
    return torch.pow(torch.tensor(float(base), dtype=torch.float64), -exponent)


def sinusoidal(
    positions: int | Tensor,
    dim: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    frequencies: str = "paper",
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """The sinusoidal encoding of ``positions``: ``[*p, dim]``.

    Positions may be integer or float (the formula is continuous) and of any shape. Angles are
    formed in float64 and reduced modulo 2π before sin/cos, so the table stays accurate to ~1e-7
    at positions in the millions. In the ``half`` layout the sines come first (tensor2tensor order).
    The table is on the device of ``positions`` (the CPU for an int).
    """
    dim = check_positive_int("dim", dim)
    check_even_dim("dim", dim)
    inv_freq = sinusoidal_inv_freq(dim, base=base, frequencies=frequencies)
    if isinstance(positions, Tensor):
        inv_freq = inv_freq.to(positions.device)
    return sinusoidal_table(positions, inv_freq, layout=layout, dtype=dtype)


def sinusoidal_table(
    positions: int | Tensor, inv_freq: Tensor, *, layout: str = "interleaved", dtype: torch.dtype = torch.float32
) -> Tensor:
    """The sinusoidal table ``[*p, 2 * len(inv_freq)]`` from precomputed frequencies (float64).

    What :func:`sinusoidal` computes once its frequencies are known; modules keep ``inv_freq`` and
    call this, so that no Python-level validation of ``base`` runs inside a compiled forward.
    """
    check_float_dtype(dtype)
    check_choice("layout", layout, LAYOUTS)
    if not isinstance(inv_freq, Tensor) or inv_freq.dim() != 1:
        got = f"shape {tuple(inv_freq.shape)}" if isinstance(inv_freq, Tensor) else type(inv_freq).__name__
        raise TypeError(f"inv_freq must be a 1-D tensor of frequencies (sinusoidal_inv_freq), got {got}")
    check_table_fits("a sinusoidal table", positions, 2 * inv_freq.shape[-1], inv_freq.device)  # formed in float64
    positions = as_positions(positions, device=inv_freq.device)
    angles = two_pi_mod(positions.to(torch.float64)[..., None] * inv_freq.to(torch.float64))  # [*p, d/2]
    sin, cos = angles.sin(), angles.cos()
    if layout == "interleaved":
        table = torch.stack((sin, cos), dim=-1).flatten(-2)  # [*p, d/2, 2] -> [*p, d]
    else:
        table = torch.cat((sin, cos), dim=-1)  # [*p, d]
    return table.to(dtype)
