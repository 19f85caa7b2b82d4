"""posenc's fast paths, on public torch APIs only; :mod:`posenc.functional` is the oracle of each.

Which code runs for an input (first match wins):

| operation | input | backend (module) |
|---|---|---|
| RoPE: :func:`rope`, ``out=``, :func:`rope_` | inside ``torch.compile`` or a ``torch.func`` transform; tables that need gradients | ``reference``: the formula (:mod:`.reference`) |
| | CUDA (or ``TRITON_INTERPRET=1``) with Triton; fp32/bf16/fp16 ``x``, fp32 tables | ``triton``: one kernel (:mod:`.triton`) |
| | at least :data:`COMPILE_MIN_NUMEL` (2^20) elements: interleaved pairs, fp32/fp64 ``x`` and tables of its dtype | ``complex``: one complex multiply (:mod:`.eager`) |
| | at least :data:`COMPILE_MIN_NUMEL` elements, a working compiler | ``compiled``: one fused pass (:mod:`.compiled`) |
| | the rest | ``eager``: four whole-width ATen ops (``x`` and tables of one dtype), else the formula (:mod:`.eager`) |
| RoPE, flash-attention style: :func:`apply_rotary_emb` | ``[b, s, h, hd]`` / ``[total, h, hd]`` + ``cu_seqlens`` | rows gathered per token, then :func:`rope` with ``seq_dim=-3`` |
| relative bias ``[h, sq, sk]`` | contiguous ranges of positions, the scheme's ``relative_bias_values`` hook | Toeplitz build, cached per module (:mod:`.bias`) |
| attention with a bias | large inference, a scheme with a ``score_mod`` hook | FlexAttention, block masks from block counts (:mod:`.flex`) |

:func:`backend_for` is that table in code. Without ``out`` the rotation is differentiable: its
backward and forward-mode tangent are the same dispatch by the negative (or same) angles.
Relative-position biases (:mod:`.bias`: a Toeplitz build from the scheme's per-distance values,
cached per module) and FlexAttention (:mod:`.flex`: the scheme's ``score_mod`` with block masks
built from block counts) are the bias schemes' fast paths.
"""

from .rotary import (
    BACKENDS,
    COMPILE_MIN_NUMEL,
    RopeFunction,
    RopePairFunction,
    apply_rotary_emb,
    backend_for,
    fast_apply_rope,
    fast_apply_rope_,
    rope,
    rope_,
    rope_pair,
    warmup,
)

__all__ = [
    "rope",
    "rope_",
    "rope_pair",
    "apply_rotary_emb",
    "backend_for",
    "warmup",
    "fast_apply_rope",
    "fast_apply_rope_",
    "RopeFunction",
    "RopePairFunction",
    "BACKENDS",
    "COMPILE_MIN_NUMEL",
]
