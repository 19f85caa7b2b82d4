"""The schemes that the tests over every registered scheme run on, and the small Attention they build.

``tests/schemes/test_registry.py`` checks that SCHEMES is the whole registry: a new scheme is added
here, and so to every test parametrized over SCHEMES.
"""

from __future__ import annotations

import torch

import posenc

SCHEMES = [
    "none",
    "sinusoidal",
    "learned",
    "shaw",
    "t5",
    "alibi",
    "rope",
    "xpos",
    "sinusoidal_nd",
    "rope_axial",
    "mrope",
    "fire",
    "dpb",
    "cope",
    "forgetting",
    "kerple",
    "sandwich",
]
ROTARY = ["rope", "xpos", "rope_axial", "mrope"]
DIM, HEADS = 12, 3  # head width 4: the smallest that every scheme (rope_axial: 2 axes) accepts


def attention(name: str, *, causal: bool = True, dim: int = DIM, heads: int = HEADS) -> posenc.Attention:
    return posenc.Attention(dim, heads, encoding=name, causal=causal)


LEARNED_PARAMETERS = {
    "none": set(),
    "sinusoidal": set(),
    "alibi": set(),
    "rope": set(),
    "xpos": set(),
    "sinusoidal_nd": set(),
    "rope_axial": set(),
    "mrope": set(),
    "learned": {"table.weight"},
    "t5": {"relative_attention_bias.weight"},
    "shaw": {"key_embeddings.weight", "value_embeddings.weight"},
    "fire": {"mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias", "c", "L_multiplier"},
    "dpb": {"mlp.0.0.weight", "mlp.0.0.bias", "mlp.1.0.weight", "mlp.1.0.bias", "mlp.2.weight", "mlp.2.bias"},
    "cope": {"pos_emb"},
    "forgetting": {"forget_gates.weight", "forget_gates.bias"},
    "kerple": {"bias_p", "bias_a"},
    "sandwich": set(),
}


def through_flex_and_sdpa(attn: posenc.Attention, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``attn(x)`` without gradients through FlexAttention (``set_mode("always")``) and through SDPA
    with the materialised bias (``"never"``); the mode is reset to ``"auto"`` after."""
    from posenc import flex

    with torch.no_grad():
        try:
            flex.set_mode("never")
            ref = attn(x)
            flex.set_mode("always")
            got = attn(x)
        finally:
            flex.set_mode("auto")
    return got, ref
