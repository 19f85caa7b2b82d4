"""Randomized positions (Ruoss et al. 2023, "Randomized Positional Encodings Boost Length
Generalization of Transformers", ACL 2023, arXiv 2305.16843).

Shape legend: ``b`` batch, ``s`` sequence.

A model trained on sequences of length ``s <= N`` only ever sees positions ``0..N-1`` and meets
unseen ones on longer inputs. The remedy: give each training sequence the positions of a random,
sorted subset of a larger range ``[0, max_position)``, so every position up to ``max_position - 1``
is seen in training while the order of the tokens is kept. Nothing about the encoding changes, so
this works with every scheme that takes positions (absolute tables, RoPE, xPos, T5, ALiBi, Shaw):
draw the positions once per batch and pass the same tensor to every layer, e.g.::

    positions = F.randomized_positions(b, s, max_position, generator=g) if model.training else None
    out = attention(x, positions)                       # posenc.Attention takes [b, s] positions

For ``learned`` tables, ``max_len`` must be at least ``max_position``. The reference code
(google-deepmind/randomized_positional_encodings, ``noisy_fixed_positional_encodings``: sample
without replacement from ``arange(noise_max_length)``, then sort) draws one subset shared by the
batch and draws at evaluation too, since its ``NOISY_*`` encodings have no train/eval switch; here
each row gets its own subset (draw with ``batch=1`` and expand for the shared variant), and whether to
evaluate at ``0..s-1`` or at random positions is the caller's choice (the experiment records it).
"""

from __future__ import annotations

import operator

import torch
from torch import Tensor

from ._checks import check_device, check_fits, check_positive_int

__all__ = ["randomized_positions"]


def _check_count(name: str, value: object) -> int:
    """``value`` as an int if it is a whole number >= 0 (numpy integers and 0-d integer tensors too)."""
    try:
        if isinstance(value, bool):
            raise TypeError
        number = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be a non-negative integer, got {value!r}") from None
    if number < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return number


def randomized_positions(
    batch: int,
    seq_len: int,
    max_position: int,
    *,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """Sorted, distinct positions drawn uniformly from ``[0, max_position)``: LongTensor ``[b, s]``.

    Every subset of ``seq_len`` positions is equally likely (sampling without replacement, then
    sorting, as Ruoss et al. 2023 describe and their ``noisy_fixed_positional_encodings`` do);
    each batch row is drawn independently. With a ``generator`` the draw is made on its device and
    repeats exactly for the same seed, then moves to ``device``; without one it is made on ``device``
    (CPU by default) from torch's global generator for that device.
    """
    batch, seq_len = _check_count("batch", batch), _check_count("seq_len", seq_len)
    max_position = check_positive_int("max_position", max_position)
    if seq_len > max_position:
        raise ValueError(
            f"cannot draw {seq_len} distinct positions from [0, {max_position}): "
            f"max_position must be at least seq_len={seq_len}"
        )
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator or None, got {type(generator).__name__}")
    device = check_device(device)
    if generator is not None:
        draw_device = generator.device
    else:
        draw_device = torch.device(device) if device is not None else torch.device("cpu")
    check_fits(
        "the random keys of randomized_positions",
        (batch, max_position),
        torch.float32,
        draw_device,
        hint="draw from a smaller max_position (one random key is made per candidate position)",
    )
    keys = torch.rand(batch, max_position, generator=generator, device=draw_device)  # [b, max_position]
    chosen = keys.topk(seq_len, dim=-1, sorted=False).indices  # [b, s], a uniform random subset per row
    positions = chosen.sort(dim=-1).values  # [b, s]
    return positions.to(device) if device is not None else positions
