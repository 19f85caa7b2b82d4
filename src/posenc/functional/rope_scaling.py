"""RoPE frequency rules: the default one and the context-extension scalings.

Every rule is a pure function ``(dim, base, params, seq_len) -> (inv_freq [ceil(dim/2)] float64,
attention_scale)``, registered in :data:`ROPE_SCALINGS` under the ``rope_type`` name that Hugging
Face transformers uses in a model's ``config.json`` (``modeling_rope_utils.ROPE_INIT_FUNCTIONS``).
``params`` is the ``rope_scaling`` dictionary as it stands there, already validated against the
rule's accepted keys (:data:`SCALING_KEYS`) and value ranges by :func:`parse_scaling`.

Two rules change with the sequence length (:data:`LENGTH_DEPENDENT`): ``dynamic`` and ``longrope``.
At ``seq_len=None`` (and at any length up to the original one) they give the frequencies in force
for short sequences; :func:`long_inv_freq` gives them for a longer ``seq_len``, which may be a 0-d
tensor so that a compiled module can pick them without a host sync.

Where posenc departs from Hugging Face (float64 frequencies where HF uses float32; ``dynamic`` takes
its original length as ``original_max_position_embeddings`` because HF reads it from the model's
``max_position_embeddings``), the rule's docstring says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

__all__ = [
    "ROPE_SCALINGS",
    "SCALING_KEYS",
    "LENGTH_DEPENDENT",
    "default_inv_freq",
    "dynamic_ntk_inv_freq",
    "long_inv_freq",
    "parse_scaling",
    "yarn_mscale",
    "ODD_WIDTH_SCALINGS",
]

ScalingRule = Callable[[int, float, Mapping[str, Any], "int | None"], "tuple[Tensor, float]"]


def default_inv_freq(dim: int, base: float | Tensor) -> Tensor:
    """``base^(-2i/dim)`` for ``i < dim/2`` in float64 (Su et al. 2021, RoFormer, eq. 15).

    ``base`` may be a 0-d tensor (the dynamic rule's length-dependent base). An odd ``dim`` gives
    ``(dim + 1) / 2`` frequencies over the denominator ``dim``, as HF's
    ``torch.arange(0, dim, 2) / dim`` does for GPT-NeoX's odd ``int(head_dim * rotary_pct)``.
    """
    device = base.device if isinstance(base, Tensor) else None
    exponent = torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim  # [dim/2]
    return torch.pow(torch.as_tensor(base, dtype=torch.float64, device=device), -exponent)


def _default(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[Tensor, float]:
    """Unscaled RoPE (HF ``_compute_default_rope_parameters``)."""
    return default_inv_freq(dim, base), 1.0


def _proportional(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[Tensor, float]:
    """Proportional RoPE (HF ``_compute_proportional_rope_parameters``; Gemma 4's full-attention
    layers): ``base^(-2i/dim)`` for the first ``int(partial_rotary_factor * dim // 2)`` pairs and
    0 for the others (they do not rotate), all divided by ``factor`` (default 1). Unlike partial
    rotary, the table spans the whole head, so the rotated pairs are ``(i, i + dim/2)`` of the
    whole head in the half layout.
    """
    angles = int(float(params.get("partial_rotary_factor", 1.0)) * dim // 2)
    inv_freq = default_inv_freq(dim, base)
    inv_freq[angles:] = 0.0
    return inv_freq / float(params.get("factor", 1.0)), 1.0


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
    _check_ntk_dim("ntk", dim)
    factor = float(params["factor"])
    return default_inv_freq(dim, base * factor ** (dim / (dim - 2))), 1.0


def _check_ntk_dim(kind: str, dim: int) -> None:
    if dim <= 2:
        raise ValueError(
            f"rope scaling {kind!r} raises the base to the power d / (d - 2) and needs a rotated "
            f"width of at least 4, got {dim}"
        )


def dynamic_ntk_inv_freq(dim: int, base: float, factor: float, original: int, seq_len: int | Tensor) -> Tensor:
    """Dynamic NTK frequencies at ``seq_len`` (an int or a 0-d tensor), never below the original length.

    The base becomes ``base * (factor * L / original - (factor - 1))^(d / (d - 2))`` with
    ``L = max(seq_len, original)``: at ``L = original`` it is the unscaled base, and it grows with the
    length. bloc97 / emozilla, "Dynamically Scaled RoPE" (r/LocalLLaMA, 2023); HF
    ``_compute_dynamic_ntk_parameters``.
    """
    _check_ntk_dim("dynamic", dim)
    if isinstance(seq_len, Tensor):
        length = seq_len.to(torch.float64).clamp(min=float(original))  # 0-d
    else:
        length = torch.tensor(float(max(int(seq_len), original)), dtype=torch.float64)
    scaled_base = base * (factor * length / original - (factor - 1)) ** (dim / (dim - 2))  # 0-d
    return default_inv_freq(dim, scaled_base)


def _dynamic(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[Tensor, float]:
    """Dynamic NTK scaling: unscaled up to the original length, then the base grows with ``seq_len``.

    See :func:`dynamic_ntk_inv_freq`. HF reads the original length from the model's
    ``max_position_embeddings``; posenc takes it as ``original_max_position_embeddings`` in the
    scaling dict (``posenc.rope_from_config`` fills it in). Without it only ``seq_len=None`` works.
    """
    _check_ntk_dim("dynamic", dim)
    if seq_len is None:
        return default_inv_freq(dim, base), 1.0
    original = params.get("original_max_position_embeddings")
    if original is None:
        raise ValueError(
            "rope scaling 'dynamic' at a given seq_len needs 'original_max_position_embeddings' "
            "(Hugging Face uses the model's max_position_embeddings for it)"
        )
    if seq_len <= int(original):  # exactly the unscaled frequencies, as HF keeps its original inv_freq
        return default_inv_freq(dim, base), 1.0
    return dynamic_ntk_inv_freq(dim, base, float(params["factor"]), int(original), seq_len), 1.0


def yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's attention temperature ``0.1 * mscale * ln(scale) + 1`` (1 for ``scale <= 1``).

    Peng et al. 2023, "YaRN: Efficient Context Window Extension of Large Language Models",
    eq. 22 (sqrt(1/t) = 0.1 ln(s) + 1); DeepSeek-V2/V3 ``yarn_get_mscale``; HF ``get_mscale``.
    """
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn_ramp(dim: int, base: float, original: int, beta_fast: float, beta_slow: float, truncate: bool) -> Tensor:
    """Weight of the interpolated frequency per pair: 0 below the fast band, 1 above the slow one.

    A pair ``i`` turns ``original * inv_freq_i / 2π`` times over the original context; pairs with
    more than ``beta_fast`` turns keep their frequency, fewer than ``beta_slow`` are interpolated,
    and a linear ramp in ``i`` joins the two (YaRN section 3.2, "NTK-by-parts").
    """

    def correction_dim(turns: float) -> float:  # the (fractional) pair index that makes `turns` turns
        return dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as HF: avoid a zero-width ramp
    ramp = (torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)  # [dim/2]
    return ramp.clamp(0, 1)


def _yarn(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[Tensor, float]:
    """YaRN: NTK-by-parts interpolation plus an attention temperature.

    Peng et al. 2023, "YaRN", sections 3.2-3.4: high-frequency pairs keep ``inv_freq``, low-frequency
    pairs get ``inv_freq / factor``, a linear ramp in between (:func:`_yarn_ramp`); cos and sin are
    scaled by ``attention_factor``, by default ``mscale(factor, mscale) / mscale(factor,
    mscale_all_dim)`` when both are given and non-zero (DeepSeek-V2/V3), else ``mscale(factor)``.
    HF ``_compute_yarn_parameters``, whose defaults (``beta_fast`` 32, ``beta_slow`` 1, ``truncate``
    True) posenc follows.
    """
    factor = float(params["factor"])
    original = int(params["original_max_position_embeddings"])
    attention_factor = params.get("attention_factor")
    if attention_factor is None:
        mscale, mscale_all_dim = params.get("mscale"), params.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = yarn_mscale(factor, float(mscale)) / yarn_mscale(factor, float(mscale_all_dim))
        else:
            attention_factor = yarn_mscale(factor)
    ramp = _yarn_ramp(
        dim,
        base,
        original,
        float(params.get("beta_fast", 32)),
        float(params.get("beta_slow", 1)),
        bool(params.get("truncate", True)),
    )
    inv_freq = default_inv_freq(dim, base)  # [dim/2]
    return inv_freq / factor * ramp + inv_freq * (1 - ramp), float(attention_factor)


def _llama3(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[Tensor, float]:
    """Llama 3.1's band-wise scaling.

    Wavelengths ``2π / inv_freq`` shorter than ``original / high_freq_factor`` are kept, longer than
    ``original / low_freq_factor`` divided by ``factor``, and in between interpolated by
    ``s = (original / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor)``:
    ``(1 - s) inv_freq / factor + s inv_freq`` (continuous at both edges). Meta llama-models
    ``apply_scaling`` (models/llama3/reference_impl/model.py); HF ``_compute_llama3_parameters``.

    ``low_freq_factor == high_freq_factor`` (Llama 4 Scout and Maverick: both 1.0) leaves no band in
    between: wavelengths longer than ``original / low_freq_factor`` are divided by ``factor``, the
    others kept. HF computes the same (it logs a warning and forms a 0/0 that it only uses at a
    wavelength exactly equal to the edge, where it gives NaN and posenc keeps the frequency; Meta's
    Llama 4 ``apply_scaling`` asserts there).
    """
    factor = float(params["factor"])
    low, high = float(params["low_freq_factor"]), float(params["high_freq_factor"])
    original = float(params["original_max_position_embeddings"])
    inv_freq = default_inv_freq(dim, base)  # [dim/2]
    wavelength = 2 * math.pi / inv_freq
    if high > low:
        smooth = ((original / wavelength - low) / (high - low)).clamp(0, 1)  # 0: long waves, 1: short waves
        scaled = (1 - smooth) * inv_freq / factor + smooth * inv_freq
        scaled = torch.where(wavelength < original / high, inv_freq, scaled)
    else:  # equal factors: no smooth band
        scaled = inv_freq
    return torch.where(wavelength > original / low, inv_freq / factor, scaled), 1.0


def _longrope_attention(params: Mapping[str, Any]) -> float:
    attention_factor = params.get("attention_factor")
    if attention_factor is not None:
        return float(attention_factor)
    factor = params.get("factor")
    if factor is None:
        raise ValueError(
            "rope scaling 'longrope' needs 'factor' or 'attention_factor' (Hugging Face derives factor as "
            "max_position_embeddings / original_max_position_embeddings; posenc.rope_from_config does the same)"
        )
    original = int(params["original_max_position_embeddings"])
    factor = float(factor)
    return 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))


def _longrope_inv_freq(dim: int, base: float, factors: Sequence[float], which: str) -> Tensor:
    if len(factors) != dim // 2:
        raise ValueError(
            f"rope scaling 'longrope': {which} must have dim // 2 = {dim // 2} entries, got {len(factors)}"
        )
    return default_inv_freq(dim, base) / torch.tensor([float(f) for f in factors], dtype=torch.float64)


def _longrope(dim: int, base: float, params: Mapping[str, Any], seq_len: int | None) -> tuple[Tensor, float]:
    """LongRoPE: per-pair rescale factors, ``short_factor`` up to the original length, ``long_factor`` past it.

    ``inv_freq_i = base^(-2i/d) / factor_i``; the long set is used when ``seq_len`` exceeds
    ``original_max_position_embeddings``. cos and sin are scaled by ``attention_factor``, by default
    ``sqrt(1 + ln(factor) / ln(original))`` (1 for ``factor <= 1``), the same on both sides of the
    switch. Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens";
    Phi-3 ``Phi3LongRoPEScaledRotaryEmbedding``; HF ``_compute_longrope_parameters``.
    """
    original = int(params["original_max_position_embeddings"])
    which = "long_factor" if seq_len is not None and seq_len > original else "short_factor"
    return _longrope_inv_freq(dim, base, params[which], which), _longrope_attention(params)


def long_inv_freq(kind: str, dim: int, base: float, params: Mapping[str, Any], seq_len: int | Tensor) -> Tensor:
    """Frequencies of a length-dependent rule for a sequence longer than the original length.

    ``seq_len`` may be a 0-d tensor (the dynamic rule's base depends on it), so a compiled module can
    compute them without reading the length back to the host. For ``longrope`` they do not depend
    on the length. Callers pick these or the short ones (``seq_len=None``) by comparing ``seq_len``
    with ``params["original_max_position_embeddings"]``.
    """
    if kind == "dynamic":
        return dynamic_ntk_inv_freq(
            dim, base, float(params["factor"]), int(params["original_max_position_embeddings"]), seq_len
        )
    if kind == "longrope":
        return _longrope_inv_freq(dim, base, params["long_factor"], "long_factor")
    raise ValueError(
        f"rope scaling {kind!r} does not depend on the sequence length; "
        f"only {', '.join(map(repr, LENGTH_DEPENDENT))} do"
    )


ROPE_SCALINGS: dict[str, ScalingRule] = {
    "default": _default,
    "linear": _linear,
    "ntk": _ntk,
    "dynamic": _dynamic,
    "yarn": _yarn,
    "llama3": _llama3,
    "longrope": _longrope,
    "proportional": _proportional,
}

#: Rules that take an odd width (HF's yarn, longrope and proportional code assumes an even one).
ODD_WIDTH_SCALINGS = ("default", "linear", "ntk", "dynamic", "llama3")

LENGTH_DEPENDENT = ("dynamic", "longrope")

# name -> (required keys, optional keys)
SCALING_KEYS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "default": (frozenset(), frozenset()),
    "linear": (frozenset({"factor"}), frozenset()),
    "ntk": (frozenset({"factor"}), frozenset()),
    "dynamic": (frozenset({"factor"}), frozenset({"original_max_position_embeddings"})),
    "yarn": (
        frozenset({"factor", "original_max_position_embeddings"}),
        frozenset({"attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"}),
    ),
    "llama3": (
        frozenset({"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}),
        frozenset(),
    ),
    "longrope": (
        frozenset({"short_factor", "long_factor", "original_max_position_embeddings"}),
        frozenset({"factor", "attention_factor"}),
    ),
    "proportional": (frozenset(), frozenset({"factor", "partial_rotary_factor"})),
}

# Legacy type names found in published config.json files.
_ALIASES = {"su": "longrope"}  # Phi-3 (April 2024) configs; HF's Phi3Config maps it the same way

# Keys that may stand beside the scaling keys in a config's ``rope_parameters`` (transformers >= 5)
# and that describe the base RoPE rather than the scaling; they are accepted and ignored here
# (``partial_rotary_factor`` is a parameter of ``proportional`` itself).
_PASSTHROUGH_KEYS = frozenset({"rope_type", "type", "rope_theta", "partial_rotary_factor"})

# What each value must be: key -> (test, description). Checked on values, not Python types.
_NUMBER = (int, float)


def _fraction(value: object) -> bool:
    return _is_number(value) and 0 < value <= 1


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, _NUMBER) and math.isfinite(value)


def _positive(value: object) -> bool:
    return _is_number(value) and value > 0


def _non_negative(value: object) -> bool:
    return _is_number(value) and value >= 0


def _positive_whole(value: object) -> bool:
    return _positive(value) and float(value).is_integer()


def _factor_list(value: object) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and len(value) > 0
        and all(_positive(v) for v in value)
    )


_VALUE_RULES: dict[str, tuple[Callable[[object], bool], str]] = {
    "factor": (_positive, "a positive number"),
    "original_max_position_embeddings": (_positive_whole, "a positive whole number"),
    "low_freq_factor": (_positive, "a positive number"),
    "high_freq_factor": (_positive, "a positive number, at least low_freq_factor"),
    "beta_fast": (_positive, "a positive number greater than beta_slow"),
    "beta_slow": (_positive, "a positive number"),
    "mscale": (_non_negative, "a number >= 0 (0 means unset, as in HF)"),
    "mscale_all_dim": (_non_negative, "a number >= 0 (0 means unset, as in HF)"),
    "attention_factor": (_positive, "a positive number"),
    "truncate": (lambda v: isinstance(v, bool), "true or false"),
    "short_factor": (_factor_list, "a non-empty list of positive numbers, one per rotated pair"),
    "long_factor": (_factor_list, "a non-empty list of positive numbers, one per rotated pair"),
    "partial_rotary_factor": (_fraction, "a number in (0, 1]"),
}


def _describe(kind: str) -> str:
    required, optional = SCALING_KEYS[kind]
    if not required and not optional:
        return "no keys besides 'rope_type'"
    parts = [f"{k} ({_VALUE_RULES[k][1]}, required)" for k in sorted(required)]
    parts += [f"{k} ({_VALUE_RULES[k][1]}, optional)" for k in sorted(optional)]
    return "; ".join(parts)


def _check_values(kind: str, params: Mapping[str, Any]) -> None:
    """Range checks per key, then the checks that relate two keys (``params`` holds no None)."""
    for key, value in params.items():
        test, description = _VALUE_RULES[key]
        if not test(value):
            raise ValueError(
                f"rope scaling {kind!r}: {key!r} must be {description}, got {value!r}; "
                f"{kind!r} accepts: {_describe(kind)}"
            )
    if kind == "llama3" and not params["high_freq_factor"] >= params["low_freq_factor"]:
        raise ValueError(
            f"rope scaling 'llama3': 'high_freq_factor' must be greater than 'low_freq_factor' or equal to it "
            f"(Llama 4: both 1.0, no smooth band), got high_freq_factor={params['high_freq_factor']!r}, "
            f"low_freq_factor={params['low_freq_factor']!r}; 'llama3' accepts: {_describe('llama3')}"
        )
    if kind == "yarn" and not params.get("beta_fast", 32) > params.get("beta_slow", 1):
        raise ValueError(
            f"rope scaling 'yarn': 'beta_fast' must be greater than 'beta_slow', "
            f"got beta_fast={params.get('beta_fast', 32)!r}, beta_slow={params.get('beta_slow', 1)!r}"
        )
    if kind == "longrope" and len(params["short_factor"]) != len(params["long_factor"]):
        raise ValueError(
            f"rope scaling 'longrope': 'short_factor' and 'long_factor' must have the same length, "
            f"got {len(params['short_factor'])} and {len(params['long_factor'])}"
        )


def _check_passthrough(params: Mapping[str, Any]) -> None:
    """The base RoPE's keys that may stand beside the scaling keys (``_PASSTHROUGH_KEYS``)."""
    for key, ok, what in (
        ("partial_rotary_factor", _fraction, "a number in (0, 1]"),
        ("rope_theta", lambda v: _is_number(v) and v > 1, "a finite number greater than 1"),
    ):
        if params.get(key) is not None and not ok(params[key]):
            raise ValueError(f"rope scaling's {key} must be {what}, got {params[key]!r}")


def parse_scaling(scaling: Mapping[str, Any] | str | None) -> tuple[str, dict[str, Any]]:
    """Validate a ``rope_scaling`` dictionary and return ``(rope_type, params)``.

    Accepts ``None`` (default RoPE), a bare type name, or the dict from ``config.json`` with
    ``rope_type`` (or the legacy ``type``; the legacy name ``su`` means ``longrope``). Unknown types
    and keys, missing keys and out-of-range values are rejected with the list of what that type
    accepts. Optional keys set to ``null`` are dropped (HF treats them as unset).
    """
    if scaling is None:
        return "default", {}
    if isinstance(scaling, str):
        scaling = {"rope_type": scaling}
    if not isinstance(scaling, Mapping):
        raise TypeError(f"scaling must be None, a rope_type name or a rope_scaling dict, got {type(scaling).__name__}")
    params = dict(scaling)
    kind = params.get("rope_type", params.get("type", "default"))
    if not isinstance(kind, str):
        raise TypeError(f"rope scaling's rope_type must be a name such as 'yarn', got {kind!r}")
    kind = _ALIASES.get(kind, kind)
    if kind not in ROPE_SCALINGS:
        raise ValueError(f"unknown rope scaling type {kind!r}; choose one of: {', '.join(map(repr, ROPE_SCALINGS))}")
    required, optional = SCALING_KEYS[kind]
    accepted = required | optional
    _check_passthrough(params)
    unknown = sorted(set(params) - accepted - _PASSTHROUGH_KEYS)
    if unknown:
        whole = {"rope_scaling", "rope_parameters", "model_type", "hidden_size"} & set(unknown)
        hint = (
            (
                "; this looks like a whole config.json: pass its rope_scaling object, or read the file with "
                "posenc.rope_from_config"
            )
            if whole
            else ""
        )
        raise ValueError(f"rope scaling {kind!r} does not take {unknown}; it accepts: {_describe(kind)}{hint}")
    missing = sorted(k for k in required if params.get(k) is None)
    if missing:
        raise ValueError(f"rope scaling {kind!r} needs {missing}; it accepts: {_describe(kind)}")
    params = {k: v for k, v in params.items() if k in accepted and v is not None}  # null optional = unset
    _check_values(kind, params)
    return kind, params
