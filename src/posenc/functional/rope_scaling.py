"""RoPE frequency rules: the default one and the context-extension scalings.

Every rule is a pure function ``(dim, base, params, seq_len) -> (inv_freq [dim//2] float64,
attention_scale)``, registered in :data:`ROPE_SCALINGS` under the ``rope_type`` name that Hugging
Face transformers uses in a model's ``config.json`` (``modeling_rope_utils.ROPE_INIT_FUNCTIONS``).
``params`` is the ``rope_scaling`` dictionary as it stands there, already validated against the
rule's accepted keys (:data:`SCALING_KEYS`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor

__all__ = ["ROPE_SCALINGS", "SCALING_KEYS", "default_inv_freq", "parse_scaling"]

ScalingRule = Callable[[int, float, Mapping[str, Any], "int | None"], "tuple[Tensor, float]"]


def default_inv_freq(dim: int, base: float) -> Tensor:
    """``base^(-2i/dim)`` for ``i < dim/2`` in float64 (Su et al. 2021, RoFormer, eq. 15)."""
    exponent = torch.arange(0, dim, 2, dtype=torch.float64) / dim
    return torch.pow(torch.tensor(float(base), dtype=torch.float64), -exponent)


def _default(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[Tensor, float]:
    """Unscaled RoPE (HF ``_compute_default_rope_parameters``)."""
    return default_inv_freq(dim, base), 1.0


def _linear(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[Tensor, float]:
    """Position interpolation: every frequency divided by ``factor``.

    Chen et al. 2023, "Extending Context Window of Large Language Models via Positional
    Interpolation"; HF ``_compute_linear_scaling_rope_parameters``.
    """
    return default_inv_freq(dim, base) / float(params["factor"]), 1.0


def _ntk(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[Tensor, float]:
    """Static NTK-aware scaling: the base grows to ``base * factor^(d / (d - 2))``.

    bloc97, "NTK-Aware Scaled RoPE" (r/LocalLLaMA, 2023), the rule that HF's ``dynamic`` type applies
    at one fixed length; HF has no static form.
    """
    factor = float(params["factor"])
    return default_inv_freq(dim, base * factor ** (dim / (dim - 2))), 1.0


# name -> (rule, required keys, optional keys)
ROPE_SCALINGS: dict[str, ScalingRule] = {
    "default": _default,
    "linear": _linear,
    "ntk": _ntk,
}

SCALING_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "default": (frozenset(), frozenset()),
    "linear": (frozenset({"factor"}), frozenset()),
    "ntk": (frozenset({"factor"}), frozenset()),
}

# Keys that may stand beside the scaling keys in a config's ``rope_parameters`` (transformers >= 5)
# and that describe the base RoPE rather than the scaling; they are accepted and ignored here.
_PASSTHROUGH_KEYS = frozenset({"rope_type", "type", "rope_theta", "partial_rotary_factor"})


def _check_factor(kind: str, params: Mapping[str, Any]) -> None:
    factor = params.get("factor")
    if factor is None:
        return
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not math.isfinite(factor) or factor <= 0:
        raise ValueError(f"rope scaling {kind!r}: 'factor' must be a positive number, got {factor!r}")


def parse_scaling(scaling: Mapping[str, Any] | str | None) -> tuple[str, dict[str, Any]]:
    """Validate a ``rope_scaling`` dictionary and return ``(rope_type, params)``.

    Accepts ``None`` (default RoPE), a bare type name, or the dict from ``config.json`` with
    ``rope_type`` (or the legacy ``type``). Unknown types and keys are rejected with the list of
    what that type accepts.
    """
    if scaling is None:
        return "default", {}
    if isinstance(scaling, str):
        scaling = {"rope_type": scaling}
    if not isinstance(scaling, Mapping):
        raise TypeError(f"scaling must be None, a rope_type name or a rope_scaling dict, got {type(scaling).__name__}")
    params = dict(scaling)
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in ROPE_SCALINGS:
        raise ValueError(f"unknown rope scaling type {kind!r}; choose one of: {', '.join(map(repr, ROPE_SCALINGS))}")
    required, optional = SCALING_KEYS[kind]
    accepted = required | optional
    unknown = sorted(set(params) - accepted - _PASSTHROUGH_KEYS)
    if unknown:
        listed = ", ".join(sorted(accepted)) or "no keys besides 'rope_type'"
        raise ValueError(f"rope scaling {kind!r} does not take {unknown}; it accepts: {listed}")
    missing = sorted(required - set(params))
    if missing:
        raise ValueError(f"rope scaling {kind!r} needs {missing}; it accepts: {', '.join(sorted(accepted))}")
    _check_factor(kind, params)
    return kind, {k: v for k, v in params.items() if k in accepted}
