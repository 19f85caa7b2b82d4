"""Every public function, fed what a new user might give it: generated from the signatures.

The functions in ``__all__`` of ``posenc``, ``posenc.functional`` and ``posenc.kernels`` (and of
``posenc.integrations.transformers`` and ``posenc.config.positions``) are each called with a known
good set of arguments (the table ``GOOD``) in which one argument at a time is replaced by a bad or
edge value chosen from the parameter's annotation: strings and lists for numbers, non-bools for
flags, unknown and unhashable names, NaN, infinite, negative, zero, huge and fractional numbers,
empty and size-1 axes, NaN tensors, integer tensors for float ones, meta tensors, and ``out=``
overlapping an input. Each call must either

* raise a ``ValueError`` or ``TypeError`` whose message names the parameter (its name or an alias
  in ``ALIASES``), or
* return a result equal to the same call with every floating-point tensor in float64 (the
  reference), at float32 tolerance, and finite where the inputs were.

Values of the wrong type (a string for a number, a list for a name, a string for a flag, a dtype
that is not one) must raise. No other exception type may escape.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections.abc import Callable

import pytest
import torch

import posenc
from posenc import functional as F
from posenc import kernels as K
from posenc._memory import TooLargeError
from posenc.config import positions as mrope_positions

ERRORS = (ValueError, TypeError)

_INV = F.rope_inv_freq(8)[0]
_COS, _SIN = F.rope_cos_sin(3, _INV)


def _x() -> torch.Tensor:
    return torch.linspace(-1, 1, 48).reshape(1, 2, 3, 8)


#: A good call of each function: name -> (function, keyword arguments by parameter name).
GOOD: dict[str, tuple[Callable, Callable[[], dict]]] = {
    "posenc.create": (posenc.create, lambda: {"name": "rope", "dim": 8}),
    "posenc.scheme_class": (posenc.scheme_class, lambda: {"name": "alibi"}),
    "F.sinusoidal": (F.sinusoidal, lambda: {"positions": torch.arange(4), "dim": 8}),
    "F.sinusoidal_inv_freq": (F.sinusoidal_inv_freq, lambda: {"dim": 8}),
    "F.rope_inv_freq": (F.rope_inv_freq, lambda: {"dim": 8}),
    "F.rope_cos_sin": (F.rope_cos_sin, lambda: {"positions": torch.arange(3), "inv_freq": _INV.clone()}),
    "F.apply_rope": (F.apply_rope, lambda: {"x": _x(), "cos": _COS.clone(), "sin": _SIN.clone()}),
    "F.apply_rotary_emb": (
        F.apply_rotary_emb,
        lambda: {
            "x": torch.randn(5, 2, 8),
            "cos": _COS[:, :4].repeat(3, 1),
            "sin": _SIN[:, :4].repeat(3, 1),
            "cu_seqlens": torch.tensor([0, 2, 5]),
            "max_seqlen": 3,
        },
    ),
    "F.check_cu_seqlens": (F.check_cu_seqlens, lambda: {"cu_seqlens": torch.tensor([0, 2, 5]), "total": 5}),
    "F.positions_from_cu_seqlens": (
        F.positions_from_cu_seqlens,
        lambda: {"cu_seqlens": torch.tensor([0, 2, 5]), "total": 5},
    ),
    "F.document_ids_from_cu_seqlens": (
        F.document_ids_from_cu_seqlens,
        lambda: {"cu_seqlens": torch.tensor([0, 2, 5]), "total": 5},
    ),
    "F.positions_from_document_ids": (F.positions_from_document_ids, lambda: {"document_ids": torch.tensor([0, 0, 1])}),
    "F.segments_from_document_ids": (F.segments_from_document_ids, lambda: {"document_ids": torch.tensor([0, 0, 1])}),
    "F.resolve_layout": (F.resolve_layout, lambda: {"layout": "half"}),
    "F.alibi_bias_range": (F.alibi_bias_range, lambda: {"slopes": torch.tensor([0.5, 0.25]), "sq": 3, "sk": 4}),
    "F.t5_bias_range": (F.t5_bias_range, lambda: {"weight": torch.randn(32, 2), "sq": 3, "sk": 4}),
    "F.toeplitz": (F.toeplitz, lambda: {"values": torch.randn(2, 6), "sq": 3, "sk": 4}),
    "F.relative_range": (F.relative_range, lambda: {"sq": 3, "sk": 4}),
    "F.rotate_pairs": (F.rotate_pairs, lambda: {"x": _x(), "layout": "half"}),
    "F.t5_relative_bucket": (F.t5_relative_bucket, lambda: {"relative_position": torch.arange(-4, 5)}),
    "F.alibi_slopes": (F.alibi_slopes, lambda: {"num_heads": 4}),
    "F.alibi_bias": (
        F.alibi_bias,
        lambda: {"slopes": torch.tensor([0.5, 0.25]), "q_positions": torch.arange(3), "k_positions": torch.arange(4)},
    ),
    "F.relative_positions": (
        F.relative_positions,
        lambda: {"q_positions": torch.arange(3), "k_positions": torch.arange(4)},
    ),
    "F.clipped_relative_index": (
        F.clipped_relative_index,
        lambda: {"q_positions": torch.arange(3), "k_positions": torch.arange(4), "max_relative_position": 2},
    ),
    "F.relative_clip": (F.relative_clip, lambda: {"max_relative_position": 2}),
    "F.as_positions": (F.as_positions, lambda: {"positions": torch.arange(3)}),
    "F.permute_qk_weight": (
        F.permute_qk_weight,
        lambda: {"weight": torch.randn(16, 4), "num_heads": 2, "source": "half", "target": "interleaved"},
    ),
    "F.rope_layout_permutation": (
        F.rope_layout_permutation,
        lambda: {"head_dim": 8, "source": "half", "target": "interleaved"},
    ),
    "F.randomized_positions": (
        F.randomized_positions,
        lambda: {"batch": 2, "seq_len": 3, "max_position": 10, "generator": torch.Generator().manual_seed(0)},
    ),
    "F.as_coordinates": (F.as_coordinates, lambda: {"positions": torch.arange(3), "n_axes": 2}),
    "F.sinusoidal_nd": (F.sinusoidal_nd, lambda: {"coords": torch.arange(6).reshape(3, 2), "dim": 8}),
    "F.sinusoidal_nd_axis_width": (F.sinusoidal_nd_axis_width, lambda: {"dim": 8, "n_axes": 2}),
    "F.axial_rope_inv_freq": (F.axial_rope_inv_freq, lambda: {"dim": 8, "n_axes": 2}),
    "F.axial_rope_cos_sin": (
        F.axial_rope_cos_sin,
        lambda: {"coords": torch.arange(6).reshape(3, 2), "inv_freq": F.axial_rope_inv_freq(8, 2)},
    ),
    "F.mrope_axes": (F.mrope_axes, lambda: {"sections": (1, 1, 2)}),
    "F.mrope_coordinates": (F.mrope_coordinates, lambda: {"positions": torch.arange(3)}),
    "F.mrope_cos_sin": (
        F.mrope_cos_sin,
        lambda: {"positions": torch.arange(9).reshape(3, 3), "inv_freq": _INV.clone(), "sections": (1, 1, 2)},
    ),
    "F.mrope_sections": (F.mrope_sections, lambda: {"sections": (1, 1, 2)}),
    "F.query_temperature": (
        F.query_temperature,
        lambda: {"positions": torch.arange(4), "beta": 0.1, "floor_scale": 8.0},
    ),
    "F.interpolate_positions": (F.interpolate_positions, lambda: {"table": torch.randn(4, 8), "new_length": 6}),
    "F.interpolate_grid": (
        F.interpolate_grid,
        lambda: {"table": torch.randn(1 + 4, 8), "old_hw": (2, 2), "new_hw": (3, 3)},
    ),
    "F.vision_rope_inv_freq": (F.vision_rope_inv_freq, lambda: {"dim": 8, "family": F.VISION_ROPES[0]}),
    "F.vision_rope_cos_sin": (
        F.vision_rope_cos_sin,
        lambda: {"coords": torch.arange(6).reshape(3, 2), "dim": 8, "family": F.VISION_ROPES[0]},
    ),
    "F.llama4_vision_coordinates": (F.llama4_vision_coordinates, lambda: {"side": 2}),
    "F.patch_centre_coordinates": (F.patch_centre_coordinates, lambda: {"height": 2, "width": 3}),
    "F.augment_patch_coordinates": (
        F.augment_patch_coordinates,
        lambda: {
            "coords": F.patch_centre_coordinates(2, 3),
            "shift": 0.1,
            "generator": torch.Generator().manual_seed(0),
        },
    ),
    "F.pad_unrotated": (F.pad_unrotated, lambda: {"cos": _COS.clone(), "sin": _SIN.clone(), "before": 2}),
    "F.apply_vision_rope": (
        F.apply_vision_rope,
        lambda: {
            "x": torch.randn(1, 2, 6, 8),
            **dict(zip(("cos", "sin"), F.vision_rope_cos_sin(F.grid_positions(2, 3), 8, F.VISION_ROPES[0]))),
            "family": F.VISION_ROPES[0],
        },
    ),
    "K.rope_pair": (K.rope_pair, lambda: {"q": _x(), "k": _x() + 1, "cos": _COS.clone(), "sin": _SIN.clone()}),
    "K.rope": (K.rope, lambda: {"x": _x(), "cos": _COS.clone(), "sin": _SIN.clone(), "out": torch.empty(1, 2, 3, 8)}),
    "K.rope_": (K.rope_, lambda: {"x": _x(), "cos": _COS.clone(), "sin": _SIN.clone()}),
    "K.apply_rotary_emb": (
        K.apply_rotary_emb,
        lambda: {
            "x": torch.randn(5, 2, 8),
            "cos": _COS[:, :4].repeat(3, 1),
            "sin": _SIN[:, :4].repeat(3, 1),
            "cu_seqlens": torch.tensor([0, 2, 5]),
            "max_seqlen": 3,
        },
    ),
    "K.backend_for": (K.backend_for, lambda: {"x": _x(), "cos": _COS.clone(), "layout": "half"}),
    "K.fast_apply_rope": (K.fast_apply_rope, lambda: {"x": _x(), "cos": _COS.clone(), "sin": _SIN.clone()}),
    "K.fast_apply_rope_": (K.fast_apply_rope_, lambda: {"x": _x(), "cos": _COS.clone(), "sin": _SIN.clone()}),
    "posenc.config.positions.token_types": (
        mrope_positions.token_types,
        lambda: {"input_ids": torch.tensor([[1, 5, 5, 2]]), "image_token_id": 5},
    ),
    "posenc.config.positions.decode_positions": (
        mrope_positions.decode_positions,
        lambda: {"rope_deltas": torch.tensor([[0]]), "start": 3},
    ),
    "posenc.config.positions.mrope_positions": (
        mrope_positions.mrope_positions,
        lambda: {
            "types": torch.tensor([[0, 1, 1, 1, 1, 0]]),
            "image_grid_thw": torch.tensor([[1, 4, 4]]),
            "spatial_merge_size": 2,
        },
    ),
}

#: Names a message may use for a parameter besides its own.
ALIASES = {
    "q_positions": ("query positions", "positions"),
    "k_positions": ("key positions", "positions"),
    "positions": ("coordinates", "position"),
    "coords": ("coordinates", "coords", "positions"),
    "relative_position": ("relative", "positions"),
    "cos": ("cos/sin", "cos and sin", "tables"),
    "sin": ("cos/sin", "cos and sin", "tables"),
    "inv_freq": ("frequencies",),
    "name": ("positional encoding",),
    "sq": ("sq, sk", "lengths"),
    "sk": ("sq, sk", "lengths"),
    "dtype": ("dtype",),
    "x": ("x ", "token count"),
    "values": ("values",),
    "table": ("table",),
    "max_relative_position": ("max_relative_position",),
    "family": ("vision rope", "family"),
    "source": ("layout",),
    "target": ("layout",),
    "layout": ("layout",),
}

#: Generated cases that still fail: what is left of issue 35, each naming the gap (strict: a fix must
#: remove its entry).
KNOWN: dict[str, str] = {}


def _kind(param: inspect.Parameter) -> str:
    ann = str(param.annotation)
    name = param.name
    if name == "out":
        return "out"
    if name in ("generator",):
        return "skip"
    if "Tensor" in ann and "int" not in ann.split("Tensor")[0]:
        return "tensor" if "Tensor" in ann.split("|")[0] else "tensor_or"
    if "torch.dtype" in ann:
        return "dtype"
    if "device" in ann:
        return "device"
    if ann.startswith("bool"):
        return "bool"
    if ann.startswith("float"):
        return "float"
    if ann.startswith("int") and "tuple" not in ann:
        return "int"
    if ann.startswith("str"):
        return "str"
    return "other"


def _bad_values(kind: str, good: object) -> list[tuple[str, object, bool]]:
    """``(label, value, must_raise)`` for a parameter of ``kind`` whose good value is ``good``."""
    if kind == "int":
        return [
            ("str", "7", True),
            ("list", [3], True),
            ("bool", True, True),
            ("frac", 2.5, False),
            ("neg", -1, False),
            ("zero", 0, False),
            ("huge", 2**62, False),
            ("nan", math.nan, True),
            ("inf", math.inf, True),
        ]
    if kind == "float":
        return [
            ("str", "1.5", True),
            ("list", [1.0], True),
            ("bool", True, True),
            ("nan", math.nan, False),
            ("inf", math.inf, False),
            ("neg", -1.0, False),
            ("zero", 0.0, False),
            ("huge", 1e300, False),
        ]
    if kind == "bool":
        return [("str", "no", True), ("int", 1, True), ("list", [True], True)]
    if kind == "str":
        return [("unknown", "nope", True), ("int", 5, True), ("unhashable", ["half"], True), ("none", None, False)]
    if kind == "dtype":
        return [("int_dtype", torch.int64, True), ("str", "float32", True)]
    if kind == "device":
        return [("int", 5.5, True), ("unknown", "nodevice", True)]
    if kind in ("tensor", "tensor_or") and isinstance(good, torch.Tensor):
        out = [("str", "abc", True), ("meta", good.to("meta"), False), ("nested_list", [[object()]], True)]
        if good.dim():
            out.append(("empty", good[..., :0], False))
            out.append(("size1", good[..., :1], False))
            out.append(("first1", good[:1], False))
        if good.is_floating_point():
            out += [("nan", torch.full_like(good, math.nan), False), ("inf", torch.full_like(good, math.inf), False)]
            out.append(("int", good.long(), False))
        else:
            out += [("float", good.double() + 0.5, False), ("neg", -good - 1, False), ("bool", good.bool(), False)]
            out.append(("huge", good + 2**40, False))
        return out
    return []


def _cases():
    cases = []
    for label, (fn, good) in GOOD.items():
        sig = inspect.signature(fn)
        kwargs = good()
        for param in sig.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            kind = _kind(param)
            value = kwargs.get(param.name, param.default)
            if kind == "out":
                cases.append(pytest.param(label, param.name, "overlap", "OVERLAP", False, id=f"{label}-out-overlap"))
                continue
            for what, bad, must in _bad_values(kind, value):
                must = must and not ("Tensor" in str(param.annotation) and what == "list")  # a list is a tensor
                case = f"{label}-{param.name}-{what}"
                marks = []
                if case in KNOWN:
                    marks = [pytest.mark.xfail(strict=True, reason=f"open (issue 35): {KNOWN[case]}")]
                cases.append(pytest.param(label, param.name, what, bad, must, id=case, marks=marks))
    return cases


def _double(value: object) -> object:
    if isinstance(value, torch.Tensor) and value.is_floating_point() and value.device.type != "meta":
        return value.double()
    return value


def _as_tensors(result: object) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, tuple):
        return [t for t in result if isinstance(t, torch.Tensor)]
    return []


def _names(message: str, param: str) -> bool:
    return any(alias in message for alias in (param, *ALIASES.get(param, ())))


CASES = _cases()


def test_enough_cases():
    assert len(CASES) + len(HAND) + len(CONFIG_CASES) + len(TRANSFORMERS_FUNCTIONS) * len(NOT_MODELS) >= 400


@pytest.mark.parametrize(("label", "param", "what", "bad", "must_raise"), CASES)
def test_generated(label, param, what, bad, must_raise):
    fn, good = GOOD[label]
    kwargs = good()
    if bad == "OVERLAP":  # out= and the first tensor argument: two views of one buffer, offset by one element
        kwargs.pop(param, None)
        reference = fn(**{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()})
        name, first = next((k, v) for k, v in kwargs.items() if isinstance(v, torch.Tensor))
        buf = torch.zeros(max(first.numel(), reference.numel()) + 1, dtype=reference.dtype)
        buf[: first.numel()] = first.flatten()
        kwargs[name] = buf[: first.numel()].view(first.shape)
        kwargs[param] = buf[1 : 1 + reference.numel()].view(reference.shape)
    else:
        kwargs[param] = bad
    states = {k: v.get_state() for k, v in kwargs.items() if isinstance(v, torch.Generator)}
    try:
        result = fn(**kwargs)
    except ERRORS as err:
        named = _names(str(err), param) or isinstance(err, TooLargeError)  # a size: the message gives it in GiB
        assert named or bad == "OVERLAP" and "shares memory" in str(err), (
            f"{label}({param}={what}): {type(err).__name__} does not name {param!r}: {err}"
        )
        return
    assert not must_raise, f"{label}({param}={what}) accepted a value of the wrong type: {bad!r}"
    if bad == "OVERLAP":  # what was written is what a separate out= would hold
        torch.testing.assert_close(result, reference, rtol=1e-6, atol=1e-6)
        return
    for name, state in states.items():  # the reference draws what the call drew
        kwargs[name].set_state(state)
    _check_result(fn, kwargs, result)


def _check_result(fn: Callable, kwargs: dict, result: object) -> None:
    """A result of the edge value equals the float64 reference and is finite where the inputs are
    (generators in ``kwargs`` are at the state the call started from)."""
    tensors = _as_tensors(result)
    inputs = [v for v in kwargs.values() if isinstance(v, torch.Tensor)]
    if any(t.device.type == "meta" for t in inputs) or "out" in kwargs or fn in (K.rope_, K.fast_apply_rope_):
        return  # meta: shapes only; in place / out=: the reference would read the rotated values
    finite_in = all(bool(torch.isfinite(t).all()) for t in inputs if t.is_floating_point())
    floats = [t for t in tensors if t.is_floating_point()]
    if finite_in and not any(isinstance(v, float) and not math.isfinite(v) for v in kwargs.values()):
        for t in floats:
            assert bool(torch.isfinite(t).all()), f"{fn.__name__} gave non-finite values from finite inputs"
    reference = fn(**{k: _double(v) for k, v in kwargs.items()})
    for got, want in zip(floats, [t for t in _as_tensors(reference) if t.is_floating_point()]):
        torch.testing.assert_close(got.double(), want.double(), rtol=1e-5, atol=1e-5, equal_nan=True)


# -- the hand-written table: calls a signature cannot generate -----------------------------------------
def _meta_x():
    return torch.randn(1, 2, 3, 8, device="meta")


HAND = [
    (
        "relative_positions mixed dtypes",
        lambda: F.relative_positions(torch.tensor([2**24 + 1]), torch.tensor([2.0**24])),
        lambda r: r.tolist() == [[-1.0]],
    ),
    (
        "kernels.rope out overlapping sin",
        lambda: K.rope(_x(), _COS, (buf := torch.randn(1, 2, 3, 8))[0, 0], out=buf),
        "sin",
    ),
    ("rope_ sin inside x", lambda: K.rope_((t := torch.randn(3, 16))[:, :8], _COS, t[:, 8:]), "sin"),
    (
        "toeplitz out overlapping values",
        lambda: F.toeplitz((b := torch.zeros(2, 4, 4)).view(-1)[:14].view(2, 7), 4, 4, out=b),
        "values",
    ),
    (
        "apply_rope size-1 seq vs 5 rows",
        lambda: F.apply_rope(torch.randn(1, 2, 1, 8), *F.rope_cos_sin(5, _INV)),
        "cos/sin",
    ),
    (
        "apply_rope seq_dim=-3 size-1",
        lambda: F.apply_rope(torch.randn(1, 1, 2, 8), *F.rope_cos_sin(5, _INV), seq_dim=-3),
        "cos/sin",
    ),
    ("Rope.rotate inverse='no'", lambda: posenc.create("rope", dim=8).rotate(_x(), _x(), inverse="no"), "inverse"),
    ("rotate_one seq_dim=5", lambda: posenc.create("rope", dim=8).rotate_one(_x(), seq_dim=5), "seq_dim"),
    ("rotate_one seq_dim='1'", lambda: posenc.create("rope", dim=8).rotate_one(_x(), seq_dim="1"), "seq_dim"),
    ("register(5)", lambda: posenc.register(5), "register"),
    ("alibi slopes [1, 2]", lambda: posenc.create("alibi", num_heads=2, slopes=torch.ones(1, 2)), "slopes"),
    (
        "Attention float64 x",
        lambda: posenc.Attention(16, 2, encoding="rope")(torch.randn(1, 3, 16, dtype=torch.float64)),
        "x is torch.float64",
    ),
    (
        "Attention meta document_ids",
        lambda: posenc.Attention(16, 2)(
            torch.randn(1, 3, 16), document_ids=torch.zeros(3, dtype=torch.long, device="meta")
        ),
        "document_ids",
    ),
    ("create unhashable name", lambda: posenc.create(["rope"], dim=8), "positional encoding"),
    ("create unknown option", lambda: posenc.create("rope", dim=8, bogus=1), "bogus"),
    ("create dim string", lambda: posenc.create("rope", dim="8"), "dim"),
    ("create dim odd", lambda: posenc.create("rope", dim=7), "dim"),
    ("create heads zero", lambda: posenc.create("alibi", num_heads=0), "num_heads"),
    ("create heads nan", lambda: posenc.create("alibi", num_heads=math.nan), "num_heads"),
    (
        "bias positions NaN",
        lambda: posenc.create("alibi", num_heads=2).bias(torch.tensor([math.nan]), torch.arange(2)),
        "positions",
    ),
    ("KVCache.append wrong type", lambda: posenc.KVCache().append("k", "v", torch.arange(3)), "k"),
]


@pytest.mark.parametrize(("call", "expect"), [pytest.param(c, e, id=n) for n, c, e in HAND])
def test_hand(call, expect):
    if callable(expect):
        assert expect(call())
        return
    with pytest.raises(ERRORS) as info:
        call()
    assert expect in str(info.value), str(info.value)


# -- the config readers: every field of a few real configs replaced by a bad or edge value -------------
CONFIG_READERS = {
    "rope_from_config": lambda c: (
        posenc.rope_from_config(c, layer_type="sliding_attention")
        if c["model_type"] == "gemma3_text"
        else posenc.rope_from_config(c)
    ),
    "layer_schedule": posenc.layer_schedule,
    "encodings_from_config": posenc.encodings_from_config,
    "query_scales_from_config": posenc.query_scales_from_config,
}
CONFIGS = {
    "llama-yarn": {
        "model_type": "llama",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_hidden_layers": 2,
        "max_position_embeddings": 128,
        "rope_theta": 10000.0,
        "head_dim": 16,
        "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 64, "beta_fast": 32},
    },
    "qwen2-vl": {
        "model_type": "qwen2_vl",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "max_position_embeddings": 128,
        "rope_theta": 10000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
    },
    "gemma3": {
        "model_type": "gemma3_text",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_hidden_layers": 4,
        "head_dim": 16,
        "max_position_embeddings": 128,
        "rope_theta": 1e6,
        "rope_local_base_freq": 1e4,
        "sliding_window_pattern": 2,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0},
    },
}
CONFIG_VALUES = {
    "str": "7",
    "list": [1],
    "dict": {"a": 1},
    "none": None,
    "bool": True,
    "nan": math.nan,
    "inf": math.inf,
    "neg": -1,
    "zero": 0,
    "huge": 1e300,
    "hugeint": 2**62,
    "frac": 2.5,
}
#: Fields that rope_from_config reads in each config: a value of the wrong type (a string, list,
#: dict or bool) or a base of 0 there must be refused, never read as absent or by its truthiness.
ROPE_READS = {
    "llama-yarn": ("model_type", "max_position_embeddings", "rope_theta", "head_dim", "rope_scaling"),
    "qwen2-vl": ("model_type", "hidden_size", "num_attention_heads", "rope_theta", "rope_scaling"),
    "gemma3": ("model_type", "head_dim", "rope_local_base_freq"),
}
#: Names a config reader's message may use for a field besides its own.
FIELD_ALIASES = {
    "head_dim": ("dim",),
    "hidden_size": ("dim",),
    "rope_type": ("rope scaling type",),
    "type": ("rope scaling type", "mrope"),
    "mrope_section": ("mrope",),
}


def _config_cases():
    cases = []
    for name, config in CONFIGS.items():
        paths = [(k,) for k in config] + [("rope_scaling", k) for k in config["rope_scaling"]]
        for path in paths:
            for what in CONFIG_VALUES:
                cases.append(pytest.param(name, path, what, id=f"{name}-{'.'.join(path)}-{what}"))
    return cases


CONFIG_CASES = _config_cases()


@pytest.mark.parametrize(("name", "path", "what"), CONFIG_CASES)
def test_config_field(name, path, what):
    """Each reader of a config with one field replaced: a result, or a ValueError / TypeError that
    names the field (or says the config has a RoPE per layer type, where a dict takes a value's
    place); nothing else escapes. Where rope_from_config reads the field, a value of the wrong type
    is refused."""
    config = {k: dict(v) if isinstance(v, dict) else v for k, v in CONFIGS[name].items()}
    target = config if len(path) == 1 else config[path[0]]
    kind = {str: "str", dict: "dict", list: "list"}.get(type(target[path[-1]]), "number")
    target[path[-1]] = CONFIG_VALUES[what]
    wrong_type = what in {"str", "list", "dict", "bool"} - {kind} or (
        what == "zero" and path[-1].endswith(("theta", "freq"))
    )
    for reader, read in CONFIG_READERS.items():
        try:
            with warnings.catch_warnings():  # a warning (unknown keys ignored, as transformers does) is an answer
                warnings.simplefilter("ignore", UserWarning)
                read(config)
        except ERRORS as err:
            message = str(err)
            named = any(n in message for n in (path[-1], *FIELD_ALIASES.get(path[-1], ())))
            assert named or isinstance(err, TooLargeError) or "RoPE per layer type" in message, (
                f"{reader}({'.'.join(path)}={what}): {type(err).__name__} does not name the field: {message}"
            )
            continue
        assert not (reader == "rope_from_config" and wrong_type and path[0] in ROPE_READS[name]), (
            f"rope_from_config read {'.'.join(path)}={CONFIG_VALUES[what]!r} without a word"
        )


#: Public functions the generated walk does not call, and why (each is exercised where named).
NOT_GENERATED = {
    "posenc.available": "takes no arguments",
    "posenc.register": "takes a class: the hand table (register(5)) and tests/schemes",
    "posenc.rope_from_config": "takes a config: test_config_field",
    "posenc.layer_schedule": "takes a config: test_config_field",
    "posenc.encodings_from_config": "takes a config: test_config_field",
    "posenc.query_scales_from_config": "takes a config: test_config_field",
    "posenc.functional.grid_positions": "takes *sizes: tests/test_bad_inputs.py (grid_positions-*)",
    "posenc.functional.patch_grid_coordinates": "takes *grids: tests/functional/test_vision_rope.py",
    "posenc.kernels.warmup": "compiles every backend (seconds): tests/kernels",
    "posenc.integrations.transformers.use_posenc_rope": "takes a model: test_transformers_integration_refuses_non_models",
    "posenc.integrations.transformers.restore": "takes a model: test_transformers_integration_refuses_non_models",
    "posenc.integrations.transformers.is_patched": "takes a model: test_transformers_integration_refuses_non_models",
    "posenc.integrations.transformers.register_rope_types": "takes no arguments",
    "posenc.integrations.transformers.unregister_rope_types": "takes no arguments",
}
WALKED_MODULES = (
    "posenc",
    "posenc.functional",
    "posenc.kernels",
    "posenc.integrations.transformers",
    "posenc.config.positions",
)


def test_every_public_function_is_walked():
    """Every function in ``__all__`` of the walked modules has a good call in GOOD (so the generated
    cases cover it) or a reason in NOT_GENERATED; a new public function must be added to one."""
    import importlib

    pytest.importorskip("transformers")
    covered = {fn for fn, _ in GOOD.values()}
    missing = []
    for module_name in WALKED_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isfunction(obj) and obj not in covered and f"{module_name}.{name}" not in NOT_GENERATED:
                missing.append(f"{module_name}.{name}")
    assert not missing, f"public functions neither in GOOD nor in NOT_GENERATED: {missing}"


TRANSFORMERS_FUNCTIONS = ("use_posenc_rope", "restore", "is_patched")
NOT_MODELS = {"int": 5, "str": "model", "none": None, "list": [1], "linear": torch.nn.Linear(2, 2)}


@pytest.mark.parametrize("what", list(NOT_MODELS))
@pytest.mark.parametrize("name", TRANSFORMERS_FUNCTIONS)
def test_transformers_integration_refuses_non_models(name, what):
    """Not a module: a TypeError naming ``model``. A module that is no transformers model: patching
    is refused, while ``restore`` and ``is_patched`` answer False (it holds no posenc RoPE)."""
    pytest.importorskip("transformers")
    from posenc.integrations import transformers as integration

    function = getattr(integration, name)
    if isinstance(NOT_MODELS[what], torch.nn.Module) and name != "use_posenc_rope":
        assert function(NOT_MODELS[what]) is False
        return
    with pytest.raises(ERRORS) as info:
        function(NOT_MODELS[what])
    assert "model" in str(info.value)
