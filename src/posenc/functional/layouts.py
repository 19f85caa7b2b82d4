"""Converting q/k projection weights between the RoPE pair layouts.

Shape legend: ``h`` heads, ``hd`` head width, ``r`` rotated width (``<= hd``), ``d_in`` input width.

``interleaved`` rotates feature pairs ``(2i, 2i+1)`` of each head (the paper, Meta's Llama, GPT-J);
``half`` rotates ``(i, i + r/2)`` (GPT-NeoX, Hugging Face's Llama). Scores ``q · k`` are unchanged
when the features of *both* q and k are permuted the same way, so a checkpoint made for one layout
works with the other once the output rows of its q and k projections are reordered per head:
``half[j] = interleaved[perm[j]]`` with ``perm = [0, 2, 4, ..., r-2, 1, 3, ..., r-1]``. This is the
``permute`` of Hugging Face's ``convert_llama_weights_to_hf.py`` (Meta → HF,
``w.view(h, hd // 2, 2, d_in).transpose(1, 2).reshape(h * hd, d_in)``) and its inverse.
Features past ``r`` (partial rotary) keep their place. Values (v) and the output projection are
not affected.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_choice, check_even_dim, check_positive_int
from .rope import ROPE_LAYOUTS

__all__ = ["rope_layout_permutation", "permute_qk_weight"]


def rope_layout_permutation(head_dim: int, *, source: str, target: str, rotary_dim: int | None = None) -> Tensor:
    """Index ``perm [hd]`` with ``x_target = x_source[..., perm]`` for one head's features."""
    check_choice("source", source, ROPE_LAYOUTS)
    check_choice("target", target, ROPE_LAYOUTS)
    head_dim = check_even_dim("head_dim", head_dim)
    rotary_dim = head_dim if rotary_dim is None else check_even_dim("rotary_dim", rotary_dim)
    if rotary_dim > head_dim:
        raise ValueError(f"rotary_dim must be at most head_dim={head_dim}, got {rotary_dim}")
    perm = torch.arange(head_dim)  # [hd]
    if source == target:
        return perm
    pairs = torch.arange(rotary_dim).view(rotary_dim // 2, 2)  # [r/2, 2]: interleaved pair (2i, 2i+1)
    if source == "interleaved":  # half position j reads interleaved feature: evens, then odds
        perm[:rotary_dim] = pairs.t().reshape(rotary_dim)  # [2, r/2] -> [r]
    else:  # interleaved position (2i, 2i+1) reads half features (i, i + r/2)
        perm[:rotary_dim] = pairs.t().reshape(rotary_dim).argsort()
    return perm


def permute_qk_weight(
    weight: Tensor, num_heads: int, *, source: str, target: str, rotary_dim: int | None = None
) -> Tensor:
    """Reorder a q or k projection's output rows from the ``source`` to the ``target`` pair layout.

    ``weight`` is ``[h * hd, d_in]`` (an ``nn.Linear`` weight) or ``[h * hd]`` (its bias); heads are
    contiguous blocks of ``hd`` rows, as in Hugging Face and Meta checkpoints. Pass the number of
    key/value heads for k under grouped-query attention. ``interleaved`` → ``half`` equals HF's
    ``convert_llama_weights_to_hf.permute``; ``half`` → ``interleaved`` undoes it exactly.
    """
    if not isinstance(weight, Tensor) or weight.dim() not in (1, 2):
        raise TypeError(
            f"weight must be a 1-D (bias) or 2-D (weight) tensor, got "
            f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}"
        )
    num_heads = check_positive_int("num_heads", num_heads)
    rows = weight.shape[0]
    if rows % num_heads:
        raise ValueError(f"weight has {rows} output rows, not a multiple of num_heads={num_heads}")
    head_dim = rows // num_heads
    perm = rope_layout_permutation(head_dim, source=source, target=target, rotary_dim=rotary_dim)
    perm = perm.to(weight.device)
    per_head = weight.reshape(num_heads, head_dim, *weight.shape[1:])  # [h, hd(, d_in)]
    return per_head[:, perm].reshape(weight.shape)  # [h * hd(, d_in)]
