"""posenc's RoPE in a loaded Hugging Face transformers model, and back (extra ``posenc[transformers]``).

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``r`` rotated width.

>>> handle = use_posenc_rope(model)   # doctest: +SKIP
>>> model.generate(...)               # doctest: +SKIP
>>> handle.remove()                   # the stock model again (or: with use_posenc_rope(model): ...)

:func:`use_posenc_rope` replaces exactly two things, and :meth:`PosencRope.remove` puts both back:

1. **The tables.** Every rotary-embedding submodule of the model (the ``*RotaryEmbedding`` module
   that transformers builds from the text config, such as ``model.model.rotary_emb``) is swapped,
   as an attribute of its parent module, for a :class:`PosencRotaryEmbedding`. It holds one
   :class:`posenc.schemes.rope.Rope` per layer type (:func:`posenc.rope_from_config` on the stock
   module's config; Gemma 3 and OLMo 3 have ``full_attention`` and ``sliding_attention``) and its
   ``forward(x, position_ids, layer_type=None)`` returns what the stock module returns, ``(cos, sin)
   [b, s, r]`` in ``x``'s dtype, with the angles formed from exact positions in float64 and reduced
   mod 2π (:func:`posenc.functional.rope_cos_sin`) where transformers forms ``position_ids.float() *
   inv_freq`` in float32 (off by about ``position * 2^-24`` rad: 0.006 at position 100k, 0.06 at
   1M). cos and sin are rounded to float32 (cached for whole positions), then to the model's
   dtype; a float64 model gets float64 tables. Qwen2-VL's MRoPE module gets a
   :class:`posenc.schemes.mrope.MRope`, which reads its ``position_ids [3, b, s]`` as (t, h, w)
   coordinates ``[b, s, 3]``; GPT-OSS's module returns ``(cos, sin) [b, s, r/2]`` and GPT-J's and
   CodeGen's ``(sin, cos) [b, s, r/2]`` (one value per pair; theirs from a table of
   ``max_position_embeddings`` rows), and posenc's returns the same form, at any position (their
   rotation functions stay transformers'); vision encoders' rotary modules (``*VisionRotaryEmbedding``) are left
   as they are. The stock module is kept inside (``.stock``), so that ``model.to(...)`` treats it
   as before, and ``remove()`` puts that same object back. Length-dependent scalings (``dynamic``,
   ``longrope``) take the frequencies for ``1 + max(position_ids)`` of each call, as transformers'
   ``dynamic_rope_update`` does, except that transformers' ``dynamic`` keeps the largest
   frequencies seen until a call falls below the original length (posenc: the current call alone).
2. **The rotation.** The attention layers call their modelling module's ``apply_rotary_pos_emb``
   as a module global (the function Liger-kernel replaces, and transformers' hub-kernel decorator
   ``use_kernel_forward_from_hub("rotary_pos_emb")`` marks; that route needs the ``kernels``
   package and a kernel repository, so it is not used here). That global is wrapped by a
   dispatcher which rotates with :func:`posenc.kernels.rope` the tables a
   :class:`PosencRotaryEmbedding` returned (recognised by identity) and hands every other call to the
   original function, so a model that is not patched runs exactly as before. The dispatcher is
   installed only where a check at patch time shows the original function computes posenc's
   rotation (``q * cos + rotate_half(q) * sin`` on the first ``r`` features, signature ``(q, k, cos,
   sin, unsqueeze_dim=1)``); it is process-wide while a handle uses it and removed with the last
   one. Other rotation functions (DeepSeek-V3's ``apply_rotary_pos_emb_interleave``) run unchanged
   on posenc's tables; inside ``torch.compile`` the dispatcher calls the original function.

Before anything is changed, posenc's tables are compared with the stock module's at positions
0..31 (on a copy of the stock module: no dynamic-scaling state moves). A model whose rotary
embedding posenc does not know or does not reproduce gets a ``ValueError`` naming its model type,
and is left unchanged. A model collected without ``remove()`` gives its share of the dispatchers
back.

:func:`register_rope_types` adds posenc's scaling rules that transformers lacks (the static
NTK-aware ``ntk``) to transformers' own ``ROPE_INIT_FUNCTIONS``, so that a config can name them.

References: Su et al. 2021, RoFormer, section 3.4 (the rotation); Hugging Face transformers
``models/llama/modeling_llama.py`` (``LlamaRotaryEmbedding.forward``, ``apply_rotary_pos_emb``)
and ``modeling_rope_utils.py`` (``ROPE_INIT_FUNCTIONS``, ``RotaryEmbeddingConfigMixin.validate_rope``),
version 5.24, which ``tests/integrations/test_transformers.py`` checks model by model.
"""

from __future__ import annotations

import copy
import functools
import inspect
import sys
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor, nn

from ..config import rope_from_config
from ..functional.rope_scaling import ROPE_SCALINGS, parse_scaling
from ..kernels import rope as rotate
from ..schemes.mrope import MRope
from ..schemes.rope import Rope

__all__ = [
    "use_posenc_rope",
    "restore",
    "is_patched",
    "PosencRope",
    "PosencRotaryEmbedding",
    "register_rope_types",
    "unregister_rope_types",
]

#: Positions ``0..n-1`` at which posenc's tables are checked against the stock module's.
CHECK_POSITIONS = 32
_SINGLE = "all"  # ModuleDict key of a model with one RoPE for every layer
_OTHER_LAYOUT = {"half": "interleaved", "interleaved": "half"}
_ROTATION = "apply_rotary_pos_emb"
#: What a rotary module returns: ``(cos, sin) [b, s, r]`` (Llama and most); one value per pair,
#: ``[b, s, r/2]``: GPT-OSS's ``(cos, sin)``, GPT-J's and CodeGen's ``(sin, cos)``.
#: ``complex``: Llama 4's and DeepSeek-V2's ``freqs_cis = cos + i sin`` ``[b, s, r/2]``, one tensor.
FORMS = ("cos_sin", "cos_sin_half", "sin_cos_half", "complex")


def _in_form(cos: Tensor, sin: Tensor, layout: str, form: str) -> tuple[Tensor, Tensor]:
    """Tables ``[*p, r]`` in ``form``."""
    if form == "cos_sin":
        return cos, sin
    half = cos.shape[-1] // 2  # one value per pair: every other feature (interleaved), the first half (half)
    pick = (lambda t: t[..., ::2]) if layout == "interleaved" else (lambda t: t[..., :half])
    return (pick(sin), pick(cos)) if form == "sin_cos_half" else (pick(cos), pick(sin))  # [*p, r/2] each


# -- tables made by posenc, recognised by identity in the rotation dispatcher -------------------------

_TABLES: dict[int, tuple[weakref.ref, weakref.ref, str]] = {}


def _remember(cos: Tensor, sin: Tensor, layout: str) -> None:
    key = id(cos)

    def forget(ref: weakref.ref, key: int = key) -> None:
        entry = _TABLES.get(key)
        if entry is not None and entry[0] is ref:  # not a newer tensor that reuses the id
            del _TABLES[key]

    _TABLES[key] = (weakref.ref(cos, forget), weakref.ref(sin), layout)


def _layout_of(cos: Tensor, sin: Tensor) -> str | None:
    """The pair layout of tables made by a :class:`PosencRotaryEmbedding`; None for any other tables."""
    entry = _TABLES.get(id(cos))
    if entry is None or entry[0]() is not cos or entry[1]() is not sin:
        return None
    return entry[2]


class PosencRotaryEmbedding(nn.Module):
    """Drop-in for a transformers ``*RotaryEmbedding`` module: posenc's float64-exact tables.

    ``forward(x, position_ids [b, s], layer_type=None) -> (cos, sin) [b, s, r]`` in ``x``'s dtype, as
    the stock module's (``layer_type`` picks Gemma 3's / OLMo 3's RoPE), or in another of the
    :data:`FORMS` (``form``: GPT-OSS's, GPT-J's). ``ropes`` maps each layer
    type (``"all"`` for a model with one RoPE) to its :class:`~posenc.schemes.rope.Rope`, whose
    ``layout`` is the pair layout of the stock tables; ``stock`` is the module it stands in for.
    """

    def __init__(self, stock: nn.Module, ropes: Mapping[str, Rope], form: str = "cos_sin") -> None:
        super().__init__()
        self.stock = stock
        self.ropes = nn.ModuleDict(dict(ropes))
        self.form = form
        self.config = getattr(stock, "config", None)  # transformers code may read rotary_emb.config
        #: whether its tables go through posenc.kernels.rope (use_posenc_rope(kernel=True) sets it where
        #: the rotation function is dispatched); False: transformers' own rotation on posenc's tables
        self.kernel = False

    def __getattr__(self, name: str) -> Any:
        """Attributes the stock module has and this one lacks (Lfm3Model reads ``rotary_emb.layer_types``)."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            stock = self.__dict__.get("_modules", {}).get("stock")
            if stock is None or name.startswith("__"):
                raise
            return getattr(stock, name)

    def forward(self, x: Tensor, position_ids: Tensor, layer_type: str | None = None) -> tuple[Tensor, Tensor]:
        key = _SINGLE if layer_type is None else layer_type
        if key not in self.ropes:
            raise ValueError(f"unknown layer_type {layer_type!r}; this model's RoPEs are for: {sorted(self.ropes)}")
        rope: Rope = self.ropes[key]
        if isinstance(rope, MRope) and position_ids.dim() == 3:
            position_ids = position_ids.permute(1, 2, 0)  # Qwen-VL's [3, b, s] -> coordinates [b, s, 3]
        # float64 angles; cos/sin rounded to float32 (cached rows) and then to x's dtype
        exact = torch.float64 if x.dtype == torch.float64 else torch.float32
        cos, sin = rope.cos_sin(position_ids, dtype=exact)  # [b, s, r] each
        if self.form == "complex":  # freqs_cis, complex64 as the stock module's (complex128 for float64)
            return torch.complex(*_in_form(cos, sin, rope.config.layout, self.form))
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        if self.form != "cos_sin":
            return _in_form(cos, sin, rope.config.layout, self.form)
        if self.kernel and not torch.compiler.is_compiling():
            _remember(cos, sin, rope.config.layout)
        return cos, sin


# -- the rotation dispatcher ------------------------------------------------------------------------------


@dataclass
class _Dispatcher:
    module: Any  # the modelling module whose global is wrapped
    original: Callable
    wrapper: Callable
    users: int = 0


_DISPATCHERS: dict[str, _Dispatcher] = {}  # by modelling module name
#: guards _DISPATCHERS and the wrapped globals: models patched or released from several threads (or
#: by the garbage collector, which may run inside a patch: hence re-entrant)
_LOCK = threading.RLock()


def _release(names: tuple[str, ...]) -> None:
    """One user fewer for each dispatcher; the last puts the original function back."""
    with _LOCK:
        for name in names:
            dispatcher = _DISPATCHERS.get(name)
            if dispatcher is None:
                continue
            dispatcher.users -= 1
            if dispatcher.users == 0:
                if getattr(dispatcher.module, _ROTATION, None) is dispatcher.wrapper:
                    setattr(dispatcher.module, _ROTATION, dispatcher.original)
                del _DISPATCHERS[name]


def _dispatching(original: Callable) -> Callable:
    @functools.wraps(original)
    def apply_rotary_pos_emb(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, *args: Any, **kwargs: Any):
        layout = None if torch.compiler.is_compiling() else _layout_of(cos, sin)
        if (
            layout is None
            or len(args) + len(kwargs) > 1
            or (kwargs and "unsqueeze_dim" not in kwargs)
            or not q.dtype == k.dtype == cos.dtype
        ):
            return original(q, k, cos, sin, *args, **kwargs)
        dim = args[0] if args else kwargs.get("unsqueeze_dim", 1)
        cos, sin = cos.unsqueeze(dim), sin.unsqueeze(dim)  # [b, 1, s, r] for q, k [b, h, s, hd]
        return rotate(q, cos, sin, layout=layout), rotate(k, cos, sin, layout=layout)

    return apply_rotary_pos_emb


def _rotation_matches(function: Callable, rope: Rope, device: torch.device) -> bool:
    """Whether ``function(q, k, cos, sin)`` is posenc's rotation with ``rope``'s tables (float32)."""
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return False
    if names[4:] != ["unsqueeze_dim"] or rope.config.rotary_width != rope.config.frequency_dim:
        return False  # another signature, or an odd rotated width that the kernels do not take
    generator = torch.Generator().manual_seed(0)
    q, k = (torch.randn(1, 2, CHECK_POSITIONS, rope.config.dim, generator=generator).to(device) for _ in "qk")
    cos, sin = rope.cos_sin(torch.arange(CHECK_POSITIONS, device=device)[None])  # [1, n, r]
    try:
        want = function(q, k, cos, sin)
    except Exception:  # noqa: BLE001 - any failure means: not this rotation
        return False
    got = (rotate(x, cos[:, None], sin[:, None], layout=rope.config.layout) for x in (q, k))
    return all(torch.allclose(g, w, rtol=1e-5, atol=1e-5) for g, w in zip(got, want))


# -- checks against the stock module -------------------------------------------------------------------


def _model_type(module: nn.Module) -> str:
    config = getattr(module, "config", None)
    return str(getattr(config, "model_type", None) or type(module).__name__)


def _is_rotary(module: nn.Module) -> bool:
    """A text stack's rotary module (vision encoders' ``*VisionRotaryEmbedding`` are left alone)."""
    name = type(module).__name__
    return name.endswith("RotaryEmbedding") and "Vision" not in name and not isinstance(module, PosencRotaryEmbedding)


def _config_of(stock: nn.Module, model: nn.Module) -> Any:
    """The config a rotary module was built from: its own (most keep it), else the model's (GPT-J)."""
    for config in (getattr(stock, "config", None), getattr(model, "config", None)):
        if getattr(config, "model_type", None) is not None:
            return config
    raise ValueError(
        f"{type(stock).__name__} has no transformers config (a .config with a model_type), nor has the model"
    )


def _layer_types(stock: nn.Module) -> list[str | None]:
    """Gemma 3 / OLMo 3 modules keep one RoPE per layer type (``rope_type`` is then a dict)."""
    if isinstance(getattr(stock, "rope_type", None), Mapping):
        return list(stock.rope_type)
    return [None]


def _device(module: nn.Module) -> torch.device:
    buffer = next(module.buffers(), None)
    return buffer.device if buffer is not None else torch.device("cpu")


def _stock_tables(stock: nn.Module, layer_type: str | None, positions: Tensor) -> tuple[Tensor, Tensor]:
    probe = copy.deepcopy(stock)  # dynamic / longrope modules update buffers in forward
    x = torch.zeros(1, device=positions.device)
    with torch.no_grad():
        out = probe(x, positions) if layer_type is None else probe(x, positions, layer_type)
    if isinstance(out, Tensor) and out.is_complex():  # freqs_cis (Llama 4, DeepSeek-V2)
        return out.real, out.imag
    if not (isinstance(out, tuple) and len(out) == 2 and all(isinstance(t, Tensor) for t in out)):
        raise ValueError(f"its {type(stock).__name__} returns {type(out).__name__}, not the (cos, sin) tables")
    return out


def _returns_complex(stock: nn.Module, layer_type: str | None) -> bool:
    probe = copy.deepcopy(stock)
    positions = torch.zeros(1, 1, dtype=torch.long, device=_device(stock))
    with torch.no_grad():
        x = torch.zeros(1, device=positions.device)
        out = probe(x, positions) if layer_type is None else probe(x, positions, layer_type)
    return isinstance(out, Tensor) and out.is_complex()


def _tolerance(stock: nn.Module, rope: Rope) -> float:
    """Float32 table rounding plus the stock module's angle error at the check positions (its
    ``inv_freq`` may have been cast to 16 bits with the model)."""
    freqs = [b for n, b in stock.named_buffers() if n.endswith("inv_freq") and b.is_floating_point()]
    eps = max((torch.finfo(b.dtype).eps for b in freqs), default=torch.finfo(torch.float32).eps)
    return 1e-5 + 2 * eps * CHECK_POSITIONS * float(rope.inv_freq.max()) * max(rope.attention_scale, 1.0)


class _Unknown(ValueError):
    """posenc.rope_from_config cannot read the module's config."""


def _check_positions(rope: Rope, device: torch.device) -> list[tuple[Tensor, Tensor]]:
    """``(stock position_ids, posenc positions)`` to compare tables at: ``0..n-1``, and for MRoPE
    also distinct (t, h, w) rows (``[3, 1, n]`` there, coordinates ``[1, n, 3]`` here)."""
    steps = torch.arange(CHECK_POSITIONS, device=device)
    checks = [(steps[None], steps[None])]  # [1, n]
    if isinstance(rope, MRope):
        rows = torch.stack((steps, steps // 2, steps % 5))[:, None]  # [3, 1, n]
        checks.append((rows, rows.permute(1, 2, 0)))
    return checks


def _table_error(stock: nn.Module, layer_type: str | None, rope: Rope, form: str) -> float | None:
    """The largest difference between ``rope``'s tables in ``form`` and the stock module's at the
    check positions; None when their shapes differ."""
    error = 0.0
    for stock_positions, positions in _check_positions(rope, _device(stock)):
        want = _stock_tables(stock, layer_type, stock_positions)
        if (form == "complex") != _returns_complex(stock, layer_type):
            return None
        got = _in_form(*rope.cos_sin(positions), rope.config.layout, form)
        if any(g.shape != w.shape for g, w in zip(got, want)):
            return None
        error = max(error, *(float((g - w.float()).abs().max()) for g, w in zip(got, want)))
    return error


def _matching_rope(stock: nn.Module, config: Any, layer_type: str | None) -> tuple[Rope, str]:
    """posenc's RoPE for one layer type of ``stock`` in the pair layout of its tables, and the form
    of its tables (:data:`FORMS`); ValueError (without the model type, added by the caller) when
    none reproduces them."""
    try:
        rope = rope_from_config(config, layer_type=layer_type)
    except ValueError as err:  # the list of known model types that follows is long
        raise _Unknown(str(err).split(" Known model types:")[0].rstrip(".")) from err
    worst = float("inf")
    other = type(rope)(replace(rope.config, layout=_OTHER_LAYOUT[rope.config.layout]))
    for candidate in (rope.to(_device(stock)), other.to(_device(stock))):
        for form in FORMS:
            error = _table_error(stock, layer_type, candidate, form)
            if error is not None and error <= _tolerance(stock, candidate):
                return candidate, form
            worst = min(worst, float("inf") if error is None else error)
    where = "" if layer_type is None else f" for layer type {layer_type!r}"
    if worst == float("inf"):
        shapes = [tuple(t.shape) for t in _stock_tables(stock, layer_type, torch.zeros(1, 4, dtype=torch.long))]
        raise ValueError(
            f"its tables{where} at position_ids [1, 4] have shapes {shapes}, which fit none of posenc's forms: "
            f"(cos, sin) [1, 4, {rope.config.rotary_width}] or [1, 4, {rope.config.rotary_width // 2}], or (sin, cos) "
            f"[1, 4, {rope.config.rotary_width // 2}]"
        )
    raise ValueError(f"posenc's tables{where} differ from its {type(stock).__name__}'s by up to {worst:.3g}")


# -- the handle ------------------------------------------------------------------------------------------


@dataclass
class _Swap:
    path: str
    parent: weakref.ref  # to the module holding the rotary module (the model itself for a bare LlamaModel)
    name: str
    new: PosencRotaryEmbedding


_HANDLES: weakref.WeakKeyDictionary[nn.Module, PosencRope] = weakref.WeakKeyDictionary()


class PosencRope:
    """What :func:`use_posenc_rope` changed in a model; :meth:`remove` (or leaving a ``with`` block)
    changes it back.

    ``model_type``; ``modules``: paths of the replaced rotary modules; ``layer_types``: the RoPEs per
    module (``"all"`` for one RoPE); ``kernel_functions``: the rotation functions dispatched to
    :func:`posenc.kernels.rope` (``"module.apply_rotary_pos_emb"``), empty where the rotation stays
    transformers' own.
    """

    def __init__(self, model: nn.Module, swaps: list[_Swap], dispatchers: list[str]) -> None:
        self.model_type = _model_type(model)
        self._model = weakref.ref(model)
        self._swaps = swaps
        self._dispatchers = dispatchers
        self.modules = tuple(s.path for s in swaps)
        self.layer_types = {s.path: tuple(s.new.ropes) for s in swaps}
        self.kernel_functions = tuple(f"{name}.{_ROTATION}" for name in dispatchers)
        self.removed = False
        # a model dropped without remove() gives its share of the dispatchers back when collected
        self._release = weakref.finalize(model, _release, tuple(dispatchers))

    def remove(self) -> None:
        """Put back the stock rotary modules and (with the last user) the original rotation functions."""
        if self.removed:
            return
        for swap in self._swaps:
            parent = swap.parent()
            if parent is not None and getattr(parent, swap.name, None) is swap.new:
                setattr(parent, swap.name, swap.new.stock)
        self._release()  # the rotation functions, once
        model = self._model()
        if model is not None and _HANDLES.get(model) is self:
            del _HANDLES[model]
        self.removed = True

    def __enter__(self) -> PosencRope:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __repr__(self) -> str:
        state = "removed" if self.removed else "active"
        return (
            f"PosencRope({self.model_type!r}, modules={list(self.modules)}, "
            f"kernel_functions={list(self.kernel_functions)}, {state})"
        )


def _refuse_unpatchable(model: nn.Module, found: list[tuple[str, nn.Module]]) -> None:
    """A ValueError naming the model type where there is nothing to patch, posenc's RoPE is there
    already (a patched part or copy), or the rotary buffers are on the meta device."""
    model_type = _model_type(model)
    if not found:
        raise ValueError(
            f"model type {model_type!r} ({type(model).__name__}) has no rotary-embedding module that "
            "posenc knows (a '*RotaryEmbedding' submodule built from the model's config, as in Llama, Qwen, "
            "Mistral, Gemma, Phi-3, GPT-NeoX, OLMo, DeepSeek); its RoPE cannot be switched to posenc's"
        )
    patched = [path for path, m in model.named_modules() if isinstance(m, PosencRotaryEmbedding)]
    if patched:
        raise ValueError(
            f"model type {model_type!r}: it already holds posenc's RoPE at {patched} (patched itself, as part of "
            "a patched model, or copied from one); remove that handle or call "
            "posenc.integrations.transformers.restore() on the model that was patched (or on the copy) first. "
            "The model is unchanged."
        )
    if any(b.is_meta for _, stock in found for b in stock.buffers()):
        raise ValueError(
            f"model type {model_type!r}: its rotary buffers are on the meta device (a model built before its "
            "weights were loaded); switch it to posenc's RoPE after loading. The model is unchanged."
        )


def _plan(model: nn.Module) -> list[_Swap]:
    found = [(path, m) for path, m in model.named_modules() if _is_rotary(m)]
    _refuse_unpatchable(model, found)
    model_type = _model_type(model)
    plan = []
    for path, stock in found:
        ropes, forms = {}, set()
        where = f"model type {model_type!r} ({type(stock).__name__} at {path!r})"
        try:
            config = _config_of(stock, model)
        except ValueError as err:
            raise ValueError(f"posenc does not know the rotary embedding of {where}: {err}") from err
        where = f"model type {config.model_type!r} ({type(stock).__name__} at {path!r})"
        for layer_type in _layer_types(stock):
            try:
                rope, form = _matching_rope(stock, config, layer_type)
            except _Unknown as err:
                raise ValueError(
                    f"posenc does not know the rotary embedding of {where}: {err}. The model is unchanged."
                ) from err
            except ValueError as err:
                raise ValueError(
                    f"posenc does not reproduce the rotary embedding of {where}: {err}. The model is unchanged."
                ) from err
            ropes[_SINGLE if layer_type is None else layer_type] = rope
            forms.add(form)
        parent_path, _, name = path.rpartition(".")
        new = PosencRotaryEmbedding(stock, ropes, next(iter(forms)))
        plan.append(_Swap(path, weakref.ref(model.get_submodule(parent_path)), name, new))
    return plan


def use_posenc_rope(model: nn.Module, *, kernel: bool = True) -> PosencRope:
    """Switch a loaded transformers ``model`` to posenc's RoPE; returns the handle that switches it back.

    Replaces each rotary-embedding module with a :class:`PosencRotaryEmbedding` (float64-exact
    tables in the model's dtype) and, with ``kernel=True``, routes its tables through
    :func:`posenc.kernels.rope` in the modelling module's ``apply_rotary_pos_emb`` (see the module
    docstring for exactly what is replaced). A model whose rotary embedding posenc does not know
    raises ``ValueError`` naming its model type, and is left unchanged; so is a model patched already.
    """
    _check_model(model)
    if model in _HANDLES:
        raise ValueError(
            f"this {_model_type(model)!r} model already uses posenc's RoPE ({_HANDLES[model]!r}); "
            "call handle.remove() or posenc.integrations.transformers.restore(model) first"
        )
    plan = _plan(model)
    with _LOCK:
        return _apply(model, plan, kernel)


def _dispatchable(plan: list[_Swap]) -> dict[str, tuple[Any, Callable]]:
    """The modelling modules whose rotation function a dispatcher may wrap: ``name -> (module, function)``."""
    checks: dict[str, tuple[Any, Callable]] = {}
    for new in (swap.new for swap in plan):
        name = type(new.stock).__module__
        module = sys.modules.get(name)
        function = getattr(module, _ROTATION, None)
        if name in _DISPATCHERS or name in checks or function is None or new.form != "cos_sin":
            continue
        ropes = list(new.ropes.values())
        if all(_rotation_matches(function, rope, _device(new.stock)) for rope in ropes):
            checks[name] = (module, function)
    return checks


def _apply(model: nn.Module, plan: list[_Swap], kernel: bool) -> PosencRope:
    """Put ``plan`` in place (holding ``_LOCK``): the rotary modules, the dispatchers, the handle."""
    checks = _dispatchable(plan) if kernel else {}
    for swap in plan:  # nothing fails from here on
        setattr(swap.parent(), swap.name, swap.new)
    for name, (module, function) in checks.items():
        wrapper = _dispatching(function)
        _DISPATCHERS[name] = _Dispatcher(module, function, wrapper)
        setattr(module, _ROTATION, wrapper)
    dispatchers = [type(swap.new.stock).__module__ for swap in plan] if kernel else []
    dispatchers = [name for name in dict.fromkeys(dispatchers) if name in _DISPATCHERS]
    for name in dispatchers:
        _DISPATCHERS[name].users += 1
    for swap in plan:  # another model's dispatcher must not take this one's tables when kernel=False
        swap.new.kernel = type(swap.new.stock).__module__ in dispatchers
    handle = PosencRope(model, plan, dispatchers)
    _HANDLES[model] = handle
    return handle


def _check_model(model: object) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a transformers model (a torch.nn.Module), got {type(model).__name__}")


def restore(model: nn.Module) -> bool:
    """Switch ``model`` back to its stock RoPE; False when it does not use posenc's. A copy of a
    patched model (``copy.deepcopy``, a pickled whole module) has no handle: its posenc modules are
    found and replaced by the stock modules they hold."""
    _check_model(model)
    handle = _HANDLES.get(model)
    if handle is not None:
        handle.remove()
        return True
    found = [(path, m) for path, m in model.named_modules() if isinstance(m, PosencRotaryEmbedding)]
    for path, module in found:
        parent_path, _, name = path.rpartition(".")
        setattr(model.get_submodule(parent_path), name, module.stock)
    return bool(found)


def is_patched(model: nn.Module) -> bool:
    """Whether ``model`` (or a copy of a patched model) uses posenc's RoPE."""
    _check_model(model)
    return model in _HANDLES or any(isinstance(m, PosencRotaryEmbedding) for m in model.modules())


# -- posenc's scalings in transformers' ROPE_INIT_FUNCTIONS ----------------------------------------------


def _init_function(name: str) -> Callable[..., tuple[Tensor, float]]:
    def compute(config: Any, device: Any = None, seq_len: int | None = None, layer_type: str | None = None, **_: Any):
        rope = rope_from_config(config, layout="half", layer_type=layer_type)
        inv_freq = rope.inv_freq_at(seq_len).to(device=device, dtype=torch.float32)
        return inv_freq, rope.attention_scale

    compute.__name__ = compute.__qualname__ = f"posenc_{name}_rope_parameters"
    compute.__doc__ = (
        f"posenc's {name!r} RoPE scaling (posenc.functional.rope_scaling) for transformers: "
        "(config, device=None, seq_len=None, layer_type=None) -> (inv_freq float32, attention_factor)."
    )
    compute.__posenc__ = name  # type: ignore[attr-defined]
    return compute


def _validator(name: str) -> Callable[..., None]:
    def validate(self: Any, rope_parameters: Mapping[str, Any], ignore_keys: Any = None) -> None:
        parse_scaling({k: v for k, v in rope_parameters.items() if k not in set(ignore_keys or ())})

    validate.__name__ = f"_validate_{name}_rope_parameters"
    validate.__posenc__ = name  # type: ignore[attr-defined]
    return validate


def _missing_types(init_functions: Mapping[str, Any]) -> list[str]:
    """posenc's rules that transformers has no function for (or has posenc's, registered before)."""
    return [
        n
        for n in ROPE_SCALINGS
        if n != "default" and (n not in init_functions or getattr(init_functions[n], "__posenc__", None) == n)
    ]


def register_rope_types() -> list[str]:
    """Add posenc's RoPE scalings that transformers lacks to ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS``.

    Each gets an init function ``(config, device=None, seq_len=None, layer_type=None) ->
    (inv_freq, attention_factor)`` computed by posenc (float64 rounded to float32, as transformers keeps
    ``inv_freq``), and a ``_validate_<name>_rope_parameters`` method on
    ``RotaryEmbeddingConfigMixin`` (posenc's :func:`~posenc.functional.rope_scaling.parse_scaling`), so
    a config may say ``"rope_parameters": {"rope_type": "ntk", "factor": 4.0, "rope_theta": 10000.0}``.
    transformers' own rules are never replaced. Returns the names posenc registered (idempotent);
    :func:`unregister_rope_types` takes them out again.
    """
    from transformers import modeling_rope_utils

    names = _missing_types(modeling_rope_utils.ROPE_INIT_FUNCTIONS)
    mixin = modeling_rope_utils.RotaryEmbeddingConfigMixin
    for name in names:
        if name not in modeling_rope_utils.ROPE_INIT_FUNCTIONS:
            modeling_rope_utils.ROPE_INIT_FUNCTIONS[name] = _init_function(name)
        if not hasattr(mixin, f"_validate_{name}_rope_parameters"):
            setattr(mixin, f"_validate_{name}_rope_parameters", _validator(name))
    return names


def unregister_rope_types() -> list[str]:
    """Take the scalings :func:`register_rope_types` added out of transformers again; returns their names."""
    from transformers import modeling_rope_utils

    removed = []
    for name, function in list(modeling_rope_utils.ROPE_INIT_FUNCTIONS.items()):
        if getattr(function, "__posenc__", None) == name:
            del modeling_rope_utils.ROPE_INIT_FUNCTIONS[name]
            removed.append(name)
    mixin = modeling_rope_utils.RotaryEmbeddingConfigMixin
    for name in ROPE_SCALINGS:
        if getattr(mixin.__dict__.get(f"_validate_{name}_rope_parameters"), "__posenc__", None) == name:
            delattr(mixin, f"_validate_{name}_rope_parameters")
    return removed
