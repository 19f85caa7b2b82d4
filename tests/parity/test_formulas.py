"""Parity with the sinusoid formulas of fairseq and tensor2tensor, which are not installable here.

Each reference is a small independent restatement of the documented formula, in float64, with its
source named in the docstring; where an installed port exists (Hugging Face ``FSMT``, a port of
fairseq's ``SinusoidalPositionalEmbedding``), posenc is compared with it as well.

* fairseq ``fairseq/modules/sinusoidal_positional_embedding.py``,
  ``SinusoidalPositionalEmbedding.get_embedding(num_embeddings, embedding_dim, padding_idx)``:
  ``inv_freq_i = exp(-i · ln(10000) / (d/2 - 1))``, row ``p`` = ``[sin(p · inv_freq), cos(p · inv_freq)]``,
  a zero column appended for odd ``d``, row ``padding_idx`` zeroed; ``fairseq.utils.make_positions``
  numbers real tokens ``padding_idx + 1, padding_idx + 2, ...`` and gives pads ``padding_idx``.
* tensor2tensor ``tensor2tensor/layers/common_attention.py``,
  ``get_timing_signal_1d(length, channels, min_timescale=1.0, max_timescale=1.0e4, start_index=0)``:
  positions ``start_index + 0..length-1``; ``inv_timescale_i = min_timescale ·
  exp(-i · ln(max/min) / max(channels//2 - 1, 1))``; ``[sin, cos]`` concatenated, zero-padded to odd
  ``channels``.

posenc's ``F.sinusoidal(positions, d, layout="half", frequencies="tensor2tensor")`` is that table.
posenc does not shift positions by a padding index: positions start where the caller says, so a
fairseq model's embeddings are ``F.sinusoidal(padding_idx + 1 + t)``.
"""

from __future__ import annotations

import inspect
import math

import pytest
import torch

import posenc
from posenc import functional as F


def fairseq_get_embedding(num_embeddings: int, embedding_dim: int, padding_idx: int | None) -> torch.Tensor:
    """Restatement of fairseq ``SinusoidalPositionalEmbedding.get_embedding`` in float64: ``[n, d]``."""
    half = embedding_dim // 2
    step = math.log(10000) / (half - 1)  # ZeroDivisionError at d in (2, 3), as in fairseq
    inv_freq = torch.exp(torch.arange(half, dtype=torch.float64) * -step)  # [d/2]
    angles = torch.arange(num_embeddings, dtype=torch.float64)[:, None] * inv_freq[None, :]  # [n, d/2]
    table = torch.cat((angles.sin(), angles.cos()), dim=1)  # [n, 2 * (d/2)]
    if embedding_dim % 2:
        table = torch.cat((table, torch.zeros(num_embeddings, 1, dtype=torch.float64)), dim=1)  # [n, d]
    if padding_idx is not None:
        table[padding_idx] = 0
    return table


def fairseq_make_positions(tokens: torch.Tensor, padding_idx: int) -> torch.Tensor:
    """Restatement of ``fairseq.utils.make_positions``: real tokens count from ``padding_idx + 1``."""
    real = tokens.ne(padding_idx).long()  # [b, s]
    return torch.cumsum(real, dim=1) * real + padding_idx  # [b, s]


def t2t_timing_signal_1d(
    length: int, channels: int, min_timescale: float = 1.0, max_timescale: float = 1.0e4, start_index: int = 0
) -> torch.Tensor:
    """Restatement of tensor2tensor ``common_attention.get_timing_signal_1d`` in float64: ``[1, length, channels]``."""
    position = torch.arange(length, dtype=torch.float64) + start_index  # [s]
    num_timescales = channels // 2
    increment = math.log(max_timescale / min_timescale) / max(num_timescales - 1, 1)
    inv_timescales = min_timescale * torch.exp(torch.arange(num_timescales, dtype=torch.float64) * -increment)
    scaled_time = position[:, None] * inv_timescales[None, :]  # [s, c/2]
    signal = torch.cat((scaled_time.sin(), scaled_time.cos()), dim=1)  # [s, 2 * (c/2)]
    signal = torch.nn.functional.pad(signal, (0, channels % 2))  # [s, c]
    return signal.view(1, length, channels)  # [1, s, c]


# -- tensor2tensor ---------------------------------------------------------------------------------


@pytest.mark.parametrize("channels", [4, 8, 64, 512, 1024])
@pytest.mark.parametrize("start_index", [0, 7, 5000])
def test_sinusoidal_equals_t2t_get_timing_signal_1d(channels: int, start_index: int) -> None:
    """``get_timing_signal_1d(length, channels, start_index=...)`` equals
    ``F.sinusoidal(start_index + arange(length), channels, layout="half", frequencies="tensor2tensor")``;
    200 positions, atol 1e-6 (posenc's float32 output of float64 angles)."""
    length = 200
    ref = t2t_timing_signal_1d(length, channels, start_index=start_index)[0]  # [s, c]
    got = F.sinusoidal(
        torch.arange(start_index, start_index + length), channels, layout="half", frequencies="tensor2tensor"
    )
    torch.testing.assert_close(got.double(), ref, atol=1e-6, rtol=0)


def test_t2t_two_channels_single_timescale() -> None:
    """With ``channels=2`` tensor2tensor divides by ``max(1 - 1, 1) = 1``: one timescale of 1 (angle = p).
    posenc follows (``max(d/2 - 1, 1)``), where fairseq's formula divides by zero (pinned below)."""
    ref = t2t_timing_signal_1d(50, 2)[0]
    got = F.sinusoidal(50, 2, layout="half", frequencies="tensor2tensor")
    torch.testing.assert_close(got.double(), ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(got[:, 0].double(), torch.arange(50.0, dtype=torch.float64).sin(), atol=1e-6, rtol=0)
    with pytest.raises(ZeroDivisionError):
        fairseq_get_embedding(10, 2, None)


@pytest.mark.parametrize(("min_timescale", "max_timescale"), [(1.0, 1.0e4), (1.0, 500.0), (2.0, 1.0e4), (0.5, 64.0)])
def test_t2t_min_max_timescales_are_scaled_positions_and_base(min_timescale: float, max_timescale: float) -> None:
    """``inv_timescale_i = min · (max/min)^(-i/(n-1))``, so the angle ``p · inv_timescale_i`` is posenc's
    with ``base = max/min`` at the (float) position ``p · min``; 100 positions, 16 channels, atol 1e-6."""
    ref = t2t_timing_signal_1d(100, 16, min_timescale, max_timescale)[0]
    positions = torch.arange(100, dtype=torch.float64) * min_timescale
    got = F.sinusoidal(positions, 16, base=max_timescale / min_timescale, layout="half", frequencies="tensor2tensor")
    torch.testing.assert_close(got.double(), ref, atol=1e-6, rtol=0)


def test_odd_channels_refused_where_t2t_and_fairseq_zero_pad() -> None:
    """Both peers append a zero feature for odd widths; posenc refuses them with a ValueError naming the
    width (an always-zero feature carries no position). The peers' even part is posenc's table."""
    with pytest.raises(ValueError, match=r"dim must be a positive even number.*got 9"):
        F.sinusoidal(10, 9, layout="half", frequencies="tensor2tensor")
    with pytest.raises(ValueError, match=r"got 9"):
        posenc.create("sinusoidal", dim=9)
    ref = t2t_timing_signal_1d(10, 9)[0]
    assert torch.equal(ref[:, 8], torch.zeros(10, dtype=torch.float64))
    torch.testing.assert_close(ref[:, :8], fairseq_get_embedding(10, 9, None)[:, :8], atol=1e-12, rtol=0)
    torch.testing.assert_close(
        F.sinusoidal(10, 8, layout="half", frequencies="tensor2tensor").double(), ref[:, :8], atol=1e-6, rtol=0
    )


def test_t2t_frequencies_differ_from_the_paper() -> None:
    """tensor2tensor's spacing (its comment cites tensor2tensor PR #177) ends at exactly ``1/base``; the
    paper's ``base^(-2i/d)`` ends at ``base^(-(d-2)/d)``. Both start at 1; at d = 512 the last
    frequencies differ by 3.6 % (``10000^(2/512)`` = 1.0366)."""
    t2t = F.sinusoidal_inv_freq(512, frequencies="tensor2tensor")
    paper = F.sinusoidal_inv_freq(512, frequencies="paper")
    assert t2t[0] == paper[0] == 1.0
    torch.testing.assert_close(t2t[-1], torch.tensor(1e-4, dtype=torch.float64), atol=0, rtol=1e-12)
    torch.testing.assert_close(
        paper[-1] / t2t[-1], torch.tensor(10000 ** (2 / 512), dtype=torch.float64), atol=0, rtol=1e-12
    )


# -- fairseq ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [4, 16, 512, 1024])
def test_sinusoidal_equals_fairseq_get_embedding(dim: int) -> None:
    """fairseq ``get_embedding(n, d, padding_idx=None)`` row ``p`` is ``F.sinusoidal(p, d, layout="half",
    frequencies="tensor2tensor")`` for ``p`` in 0..1023; atol 1e-6."""
    ref = fairseq_get_embedding(1024, dim, None)
    got = F.sinusoidal(1024, dim, layout="half", frequencies="tensor2tensor")
    torch.testing.assert_close(got.double(), ref, atol=1e-6, rtol=0)


@pytest.mark.parametrize("padding_idx", [0, 1])
def test_fairseq_padding_idx_offset_is_explicit_positions(padding_idx: int) -> None:
    """fairseq embeds a right- or left-padded batch at ``make_positions(tokens, padding_idx)``: real
    tokens at ``padding_idx + 1 + t``, pads at ``padding_idx`` whose row is zero. posenc, given those
    positions, equals fairseq on every real token (atol 1e-6); the pads are for the caller to mask."""
    pad = padding_idx
    tokens = torch.tensor([[5, 6, 7, 8, 9, pad, pad], [pad, pad, pad, 4, 5, 6, 7]])  # right and left padded
    positions = fairseq_make_positions(tokens, pad)  # [b, s]
    assert positions[0].tolist() == [pad + 1, pad + 2, pad + 3, pad + 4, pad + 5, pad, pad]
    assert positions[1].tolist() == [pad, pad, pad, pad + 1, pad + 2, pad + 3, pad + 4]
    table = fairseq_get_embedding(64, 32, pad)
    ref = table[positions]  # [b, s, d]
    real = tokens.ne(pad)
    got = F.sinusoidal(positions, 32, layout="half", frequencies="tensor2tensor")  # [b, s, d]
    torch.testing.assert_close(got[real].double(), ref[real], atol=1e-6, rtol=0)
    assert torch.equal(ref[~real], torch.zeros(int((~real).sum()), 32, dtype=torch.float64))
    scheme = posenc.create("sinusoidal", dim=32, layout="half", frequencies="tensor2tensor")
    embedded = scheme.embed(torch.zeros(2, 7, 32), positions)
    torch.testing.assert_close(embedded[real].double(), ref[real], atol=1e-6, rtol=0)


def test_hf_fsmt_port_of_fairseq_equals_posenc_and_the_restatement() -> None:
    """Hugging Face ``transformers.models.fsmt.modeling_fsmt.SinusoidalPositionalEmbedding`` (a port of
    fairseq's module, float32) equals the float64 restatement to 1e-4 (its float32 angles up to
    1000 rad) and posenc at fairseq's positions, far into the table, and after ``past_key_values_length``
    (decoding) in the versions whose forward takes it (transformers 5.17's takes fairseq's unused
    ``incremental_state`` instead)."""
    fsmt = pytest.importorskip("transformers.models.fsmt.modeling_fsmt")
    pad, dim, n = 1, 64, 1000
    module = fsmt.SinusoidalPositionalEmbedding(n + pad + 1, dim, pad)
    module.make_weight(n + pad + 1, dim, pad)  # transformers 5 fills the table in _init_weights, not __init__
    torch.testing.assert_close(module.weight.double(), fairseq_get_embedding(n + pad + 1, dim, pad), atol=1e-4, rtol=0)
    tokens = torch.tensor([[7, 8, 9, 10, 11, pad]])
    ref = module(tokens)  # [b, s, d]
    got = F.sinusoidal(torch.arange(pad + 1, pad + 7), dim, layout="half", frequencies="tensor2tensor")
    torch.testing.assert_close(got[:5], ref[0, :5], atol=1e-5, rtol=0)
    far = F.sinusoidal(torch.tensor([pad + 901]), dim, layout="half", frequencies="tensor2tensor")  # [1, d]
    long = module(torch.full((1, 901), 12))  # [1, 901, d]: the last token at position pad + 901
    torch.testing.assert_close(far, long[0, -1:], atol=1e-4, rtol=0)
    if "past_key_values_length" in inspect.signature(module.forward).parameters:  # transformers >= 5.2x
        step = module(torch.tensor([[12]]), past_key_values_length=900)  # position pad + 1 + 900
        torch.testing.assert_close(far, step[0], atol=1e-4, rtol=0)


# -- ALiBi as Press et al. implemented it ----------------------------------------------------------


def press_alibi_future_mask(slopes: torch.Tensor, length: int) -> torch.Tensor:
    """Restatement of ofirpress/attention_with_linear_biases ``fairseq/models/transformer.py``
    (``TransformerDecoder.buffered_future_mask``): the bias is ``slope · j`` for key ``j`` (the same
    for every query row, ``[h, 1, L]``), added to the ``-inf`` upper-triangular future mask."""
    alibi = slopes.double()[:, None, None] * torch.arange(length, dtype=torch.float64)[None, None, :]  # [h, 1, L]
    future = torch.triu(torch.full((length, length), float("-inf"), dtype=torch.float64), 1)  # [L, L]
    return future[None] + alibi  # [h, L, L]


@pytest.mark.parametrize("heads", [4, 6, 12])
def test_causal_alibi_equals_press_implementation_up_to_a_row_constant(heads: int) -> None:
    """Press et al.'s code adds ``m·j``, the paper (section 3) ``-m·(i - j)``: they differ by ``m·i`` per
    query row, which softmax ignores. posenc's causal bias plus ``m·i`` equals the restatement on
    every visible key (atol 1e-9 in float64), and causal attention outputs agree to 1e-6."""
    length = 9
    slopes = F.alibi_slopes(heads).double()
    ref = press_alibi_future_mask(slopes, length)  # [h, L, L]
    got = F.alibi_bias(slopes, torch.arange(length), torch.arange(length))  # [h, L, L]
    visible = torch.tril(torch.ones(length, length, dtype=torch.bool))
    row_shift = slopes[:, None, None] * torch.arange(length, dtype=torch.float64)[None, :, None]  # m·i
    torch.testing.assert_close((got + row_shift)[:, visible], ref[:, visible], atol=1e-9, rtol=0)
    q, k, v = torch.randn(3, 1, heads, length, 8, dtype=torch.float64).unbind(0)
    mask = got.masked_fill(~visible, float("-inf"))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out_ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=ref)
    torch.testing.assert_close(out, out_ref, atol=1e-6, rtol=0)
