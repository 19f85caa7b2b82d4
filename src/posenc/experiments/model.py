"""A small pre-LayerNorm transformer on :class:`posenc.Attention`, for the experiments.

Shape legend: ``b`` batch, ``s`` sequence, ``d`` model width, ``v`` vocabulary, ``c`` classes,
``L`` layers.

Pre-LN blocks ``x + attn(ln(x))`` then ``x + mlp(ln(x))`` (Xiong et al. 2020, "On Layer
Normalization in the Transformer Architecture"; nanoGPT's ``Block``). Position enters once:

* absolute schemes (``sinusoidal``, ``learned``) encode the input through ``encoding.embed`` — added
  to the token embedding, or concatenated after a narrower one (``combine="concat"``: token width
  ``d - code_dim``, so the model width and every layer stay the same);
* rotary and bias schemes (``rope``, ``t5``, ``alibi``, ...) are built once and shared by every
  layer's attention, as T5 shares its relative bias across layers (Raffel et al. 2020, 2.1), or
  built once per layer (``per_layer=True``), as the CoPE paper, the authors' code of forgetting
  attention and FIRE give every layer its own parameters;
* a layer schedule (``layer_schemes``: one scheme name per layer) gives layers schemes of their
  own: ``"none"`` for NoPE layers, as Llama 4 and SmolLM3 interleave RoPE layers with every fourth
  one without (``posenc.layer_schedule`` reads such schedules from a model's config). Layers with
  the same name share one module; ``scheme`` (with ``scheme_options``) is the one the schedule must
  name at least once.

``residual=False`` drops the skip connections (the probe experiment asks what they carry).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn

from ..attention import Attention
from ..schemes.base import PositionalEncoding, create, scheme_class

__all__ = ["ModelConfig", "TinyTransformer", "build_encoding", "build_layer_encodings"]


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    scheme: str = "rope"  # any name in posenc.available() that acts on 1-D positions
    scheme_options: Mapping[str, Any] = field(default_factory=dict)  # extra config keys of the scheme
    dim: int = 64
    num_heads: int = 4
    num_layers: int = 2
    causal: bool = True  # decoder-only (True) or encoder-only (False)
    max_len: int = 512  # rows of a learned table: positions 0 .. max_len - 1
    mlp_ratio: int = 4
    residual: bool = True
    num_classes: int | None = None  # a classification head over positions instead of the LM head
    # token embeddings times this; None: sqrt(dim) under a sinusoid (Vaswani et al. 2017, 3.4: the code has
    # amplitude 1 and would drown N(0, 0.02) token embeddings), 1 otherwise (GPT-2)
    embedding_scale: float | None = None
    # one scheme name per layer ("none": a NoPE layer), None: `scheme` in every layer; rotary and bias
    # schemes only (an absolute code enters once, at the input)
    layer_schemes: tuple[str, ...] | None = None
    # one module of `scheme` per layer, each with its own parameters (the CoPE paper, the authors' code of
    # forgetting attention and FIRE's per-layer MLPs); False: one module shared by every layer
    per_layer: bool = False

    def __post_init__(self) -> None:
        cls = scheme_class(self.scheme)  # unknown names list the choices
        if getattr(cls, "n_axes", 1) != 1:
            raise ValueError(
                f"scheme {self.scheme!r} encodes {cls.n_axes}-D positions; the experiments use 1-D schemes"
            )
        for name in ("vocab_size", "dim", "num_heads", "num_layers", "max_len", "mlp_ratio"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.dim % self.num_heads:
            raise ValueError(f"dim={self.dim} must be divisible by num_heads={self.num_heads}")
        if self.embedding_scale is not None and not self.embedding_scale > 0:
            raise ValueError(f"embedding_scale must be a positive number or None, got {self.embedding_scale!r}")
        if not isinstance(self.scheme_options, Mapping):
            raise TypeError(f"scheme_options must be a mapping, got {type(self.scheme_options).__name__}")
        if self.layer_schemes is not None:
            object.__setattr__(self, "layer_schemes", _check_layer_schemes(self))
        if not isinstance(self.per_layer, bool):
            raise TypeError(f"per_layer must be True or False, got {self.per_layer!r}")
        if self.per_layer and cls.family == "absolute":
            raise ValueError(
                f"per_layer builds one module per layer; {self.scheme!r} is absolute: it enters once, at the input"
            )

    @property
    def family(self) -> str:
        return scheme_class(self.scheme).family

    @property
    def token_scale(self) -> float:
        if self.embedding_scale is not None:
            return float(self.embedding_scale)
        return self.dim**0.5 if self.scheme == "sinusoidal" else 1.0


def _check_layer_schemes(config: ModelConfig) -> tuple[str, ...]:
    """``config.layer_schemes`` as a tuple, checked: one registered 1-D, non-absolute scheme per layer,
    ``config.scheme`` among them."""
    names = config.layer_schemes
    if isinstance(names, str) or not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise TypeError(f"layer_schemes must be a list of scheme names, one per layer, got {names!r}")
    if len(names) != config.num_layers:
        raise ValueError(
            f"layer_schemes names {len(names)} layers; the model has num_layers={config.num_layers}: give one "
            "scheme name per layer"
        )
    for name in (config.scheme, *names):
        cls = scheme_class(name)  # unknown names list the choices
        if cls.family == "absolute" or getattr(cls, "n_axes", 1) != 1:
            raise ValueError(
                f"layer_schemes takes rotary and bias schemes (and 'none') acting on 1-D positions; {name!r} "
                + ("is absolute: it encodes the input once, not a layer" if cls.family == "absolute" else "is N-D")
            )
    if config.scheme not in names:
        raise ValueError(
            f"layer_schemes {list(names)} never names the model's scheme {config.scheme!r}; name it in at least one layer"
        )
    return tuple(names)


def build_encoding(config: ModelConfig) -> tuple[PositionalEncoding, int]:
    """The scheme built from ``config``, and the token-embedding width it leaves.

    Absolute schemes get ``dim`` (and ``max_len`` when they take it); others get the defaults that
    :class:`posenc.Attention` would pick (head width, heads, causal or not). ``scheme_options``
    override either.
    """
    cls = scheme_class(config.scheme)
    fields = {f for f in getattr(cls.Config, "__dataclass_fields__", {})}
    options = dict(config.scheme_options)
    if config.family == "absolute":
        defaults: dict[str, Any] = {"dim": config.dim}
        if "max_len" in fields:
            defaults["max_len"] = config.max_len
    else:
        defaults = cls.attention_defaults(config.dim // config.num_heads, config.num_heads, config.dim, config.causal)
    encoding = create(config.scheme, **{**defaults, **options})
    token_dim = config.dim
    if config.family == "absolute" and getattr(encoding.config, "combine", "add") == "concat":
        token_dim = config.dim - encoding.config.dim
        if token_dim <= 0:
            raise ValueError(
                f"a concatenated code of width {encoding.config.dim} leaves no room for tokens "
                f"in a model of width {config.dim}"
            )
    return encoding, token_dim


def build_layer_encodings(config: ModelConfig, encoding: PositionalEncoding) -> list[PositionalEncoding]:
    """The encoding of each layer: ``encoding`` (the model's scheme) wherever ``layer_schemes`` names
    it or when there is no schedule, a module of each other named scheme (its Attention defaults)
    shared by the layers that name it. With ``per_layer``, each layer of the model's scheme gets a
    module of its own (``encoding`` the first), built with the same options."""
    names = config.layer_schemes or (config.scheme,) * config.num_layers
    if config.layer_schemes is None and not config.per_layer:
        return [encoding] * config.num_layers
    head_dim = config.dim // config.num_heads
    built = {config.scheme: encoding}
    layers = []
    for name in names:
        if name == config.scheme and config.per_layer:  # the first such layer takes `encoding`, others a new one
            layers.append(encoding if encoding not in layers else build_encoding(config)[0])
            continue
        if name not in built:
            defaults = scheme_class(name).attention_defaults(head_dim, config.num_heads, config.dim, config.causal)
            built[name] = create(name, **defaults)
        layers.append(built[name])
    return layers


class Block(nn.Module):
    """One pre-LN transformer layer; the attention's encoding is shared (or None for absolute schemes)."""

    def __init__(self, config: ModelConfig, encoding: PositionalEncoding | None) -> None:
        super().__init__()
        self.residual = config.residual
        self.ln1, self.ln2 = nn.LayerNorm(config.dim), nn.LayerNorm(config.dim)
        self.attn = Attention(config.dim, config.num_heads, encoding=encoding, causal=config.causal)
        hidden = config.mlp_ratio * config.dim
        self.mlp = nn.Sequential(nn.Linear(config.dim, hidden), nn.GELU(), nn.Linear(hidden, config.dim))

    def forward(self, x: Tensor, positions: Tensor | None) -> Tensor:
        h = self.attn(self.ln1(x), positions)  # [b, s, d]
        x = x + h if self.residual else h
        h = self.mlp(self.ln2(x))  # [b, s, d]
        return x + h if self.residual else h


class TinyTransformer(nn.Module):
    """Tokens ``[b, s]`` -> logits ``[b, s, v]`` (or ``[b, s, c]`` with ``num_classes``)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        encoding, token_dim = build_encoding(config)
        self.token_embedding = nn.Embedding(config.vocab_size, token_dim)
        absolute = config.family == "absolute"
        self.encoding = encoding if absolute else None  # applied once at the input
        layers = [None] * config.num_layers if absolute else build_layer_encodings(config, encoding)
        self.blocks = nn.ModuleList(Block(config, layer_encoding) for layer_encoding in layers)
        #: the first layer with the model's scheme (the others may have a schedule's NoPE)
        self._scheme_layer = 0 if absolute else layers.index(encoding)
        self.register_load_state_dict_post_hook(_encoding_off_meta)
        self.ln_f = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.num_classes or config.vocab_size)
        # GPT-2's rule for the transformer's own layers; the encoding keeps the initialisation its
        # scheme defines (forgetting's gate bias of 5, FIRE's and DPB's MLPs, T5's and learned tables)
        own = {id(m) for e in (encoding, *(b.attn.encoding for b in self.blocks)) for m in e.modules()}
        for module in self.modules():
            if id(module) not in own:
                _init_weights(module)

    @property
    def scheme(self) -> PositionalEncoding:
        """The positional-encoding module (the input's, or the one the layers share: with a layer
        schedule, that of the model's ``scheme``)."""
        return self.encoding if self.encoding is not None else self.blocks[self._scheme_layer].attn.encoding

    def forward(
        self, tokens: Tensor, positions: Tensor | None = None, *, hidden_states: bool = False
    ) -> Tensor | tuple[Tensor, list[Tensor]]:
        """Logits; with ``hidden_states=True`` also the ``L + 1`` residual streams ``[b, s, d]``."""
        if tokens.dim() != 2:
            raise ValueError(f"tokens must be [b, s], got shape {tuple(tokens.shape)}")
        x = self.token_embedding(tokens) * self.config.token_scale  # [b, s, d] (or [b, s, d - code] before concat)
        if self.encoding is not None:
            x = self.encoding.embed(x, positions)  # [b, s, d]
        states = [x]
        for block in self.blocks:
            x = block(x, positions)  # [b, s, d]
            states.append(x)
        logits = self.head(self.ln_f(x))  # [b, s, v or c]
        return (logits, states) if hidden_states else logits

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def _encoding_off_meta(model: TinyTransformer, incompatible_keys: Any) -> None:
    """Load post-hook: an absolute scheme built on the meta device follows the loaded weights."""
    if model.encoding is not None:
        model.encoding.leave_meta(model.token_embedding.weight.device)


def _init_weights(module: nn.Module) -> None:
    """GPT-2's initialisation: N(0, 0.02) weights, zero biases (nanoGPT ``_init_weights``), for the
    layers that are not the encoding's (learned rows and T5 buckets default to N(0, 0.02) as well)."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
