"""The scheme protocol and the registry.

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``sq``/``sk`` query/key positions,
``d`` embedding width, ``hd`` head width.

Position can enter attention in three places (docs/design.md), and every :class:`PositionalEncoding`
offers all three, the unused ones doing nothing:

* :meth:`~PositionalEncoding.embed` — added to (or concatenated with) the token embeddings;
* :meth:`~PositionalEncoding.rotate` — applied to queries and keys (RoPE, xPos);
* :meth:`~PositionalEncoding.bias` — an additive attention-logit bias (T5, ALiBi).

Schemes whose terms depend on the query or touch the values (Shaw et al. 2018) set
``uses_query_terms = True`` and implement :meth:`~PositionalEncoding.query_scores` and
:meth:`~PositionalEncoding.value_term`; :class:`posenc.Attention` then computes attention with
explicit math instead of ``scaled_dot_product_attention``.

What other parts of posenc need from a scheme are hooks here, implemented in the scheme's own file
(nobody else names a scheme):

* :meth:`~PositionalEncoding.relative_bias_values` — a bias that depends on ``k - q`` only, as a
  function of the distance: :meth:`~PositionalEncoding.bias` then comes from it, for contiguous
  positions through the Toeplitz build and per-module cache of :mod:`posenc.kernels.bias`;
  :meth:`~PositionalEncoding.relative_index` — a bias that is a learned table looked up at an
  index of the distance (T5's buckets): the cache keeps that index while the table trains;
* :meth:`~PositionalEncoding.score_mod` — the bias as a FlexAttention score mod
  (:mod:`posenc.kernels.flex`);
* :meth:`~PositionalEncoding.check_attention` — what the scheme requires of an attention layer
  (head count, head width, causality).

Data-dependent terms (the smallest additions that keep Shaw's hooks as they were):

* :meth:`~PositionalEncoding.logit_term` — a term added to the scaled, masked logits that is a
  function of them and of the queries (CoPE: gates ``sigmoid(logit)``, counted per query). The
  scheme sets ``uses_query_terms = True`` (explicit math); :class:`posenc.Attention` calls it with
  the logits of every key it attends, cached ones included, ``-inf`` where masked;
* ``uses_input_terms = True`` with :meth:`~PositionalEncoding.input_terms` and
  :meth:`~PositionalEncoding.input_bias` — a bias computed from the layer input ``x`` (forgetting
  attention: per-token log forget gates). ``input_terms(x [b, s, d]) -> [b, h, s]`` is computed for
  the new tokens and kept by the :class:`~posenc.KVCache` beside their keys; ``input_bias(terms
  [b, h, sk], sq)`` turns the terms of every key into the bias ``[b, h, sq, sk]`` of the last ``sq``
  of them as queries. Its :meth:`~PositionalEncoding.bias` raises: there is no bias without ``x``.

:attr:`~PositionalEncoding.data_dependent` (a class attribute) says that a scheme has either: its
bias or term cannot be drawn from positions alone, and the atlas asks it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import torch
from torch import Tensor, nn

from .._memory import check_fits
from ..functional._checks import as_positions, broadcast_shape, check_out
from ..functional.multidim import as_coordinates
from ..functional.relative import relative_positions
from ..kernels.bias import build_bias, cached_bias
from ..kernels.ranges import mark_range

if TYPE_CHECKING:
    from ..kernels.flex import ScoreMod

__all__ = [
    "PositionalEncoding",
    "register",
    "unregister",
    "available",
    "create",
    "scheme_class",
    "no_encoding",
    "default_positions",
    "check_head_width",
    "check_bias_fits",
    "bias_into",
]

FAMILIES = ("none", "absolute", "rotary", "bias", "relative")

_REGISTRY: dict[str, type[PositionalEncoding]] = {}


def check_head_width(scheme: str, dim: int, *heads: Tensor) -> None:
    """Raise if queries or keys ``[b, h, s, hd]`` are not floating-point tensors with the head width
    ``dim`` the scheme was built for."""
    for x in heads:
        if not isinstance(x, Tensor):
            raise TypeError(f"{scheme}: queries and keys must be tensors [b, h, s, hd], got {type(x).__name__}")
        if x.dim() == 0 or x.shape[-1] != dim:
            raise ValueError(
                f"{scheme} was built for heads of width dim={dim}, got queries/keys of shape "
                f"{tuple(x.shape)}; build it with dim equal to the head width"
            )
        if not x.is_floating_point():  # the rotated or scaled values would be truncated to integers
            raise TypeError(f"{scheme}: queries and keys must be floating-point tensors, got dtype {x.dtype}")


def default_positions(positions: Tensor | int | None, length: int, device: torch.device, *, offset: int = 0) -> Tensor:
    """``positions`` checked, or ``offset .. offset + length - 1`` when None (marked as that range,
    see :func:`~posenc.kernels.ranges.mark_range`: the caches and FlexAttention take the range from
    that record and need not read the positions back from an accelerator)."""
    if positions is None:
        return mark_range(torch.arange(offset, offset + length, device=device), offset)
    return as_positions(positions, device=device)


def check_bias_fits(
    q_positions: object, k_positions: object, heads: int, dtype: torch.dtype, device: torch.device | None
) -> None:
    """Raise :class:`~posenc._memory.TooLargeError` (a ValueError and a MemoryError) before a
    bias ``[..., heads, sq, sk]`` for these positions (tensors, or ints meaning ``0..n-1``) is built
    that the memory available on ``device`` cannot hold, naming its size and the ways around it."""
    shapes = []
    for p in (q_positions, k_positions):
        if isinstance(p, int) and not isinstance(p, bool) and p >= 0:
            shapes.append((p,))
        elif isinstance(p, Tensor) and p.dim() > 0:
            shapes.append(tuple(p.shape))
        else:
            return  # lists, 0-d or negative: the positions' own checks speak
    (q, k) = shapes
    lead = broadcast_shape(q[:-1], k[:-1])
    if lead is not None:  # else the bias's own checks say what is wrong
        check_fits("a bias", (*lead, heads, q[-1], k[-1]), dtype, device)


def check_positions_fit(positions: Tensor, x: Tensor, what: str) -> None:
    """Raise ValueError unless ``positions`` ``[s]``, ``[b, s]`` or ``[b, h, s]`` fit ``x [b, h, s, hd]``
    (``what``: "query" or "key"), naming both shapes, before tables are built from them (the
    error would otherwise speak of tables the caller never made)."""
    p, want = tuple(positions.shape), tuple(x.shape[:-1])
    lead = want[:1] if x.dim() == 4 and len(p) == 2 else want[:-1]  # [b, s] tables get a head axis
    if (
        len(p) > len(want)
        or not p
        or p[-1] != want[-1]
        or any(a != b and a != 1 for a, b in zip(reversed(p[:-1]), reversed(lead)))
    ):
        raise ValueError(
            f"{what} positions of shape {p} do not fit {'queries' if what == 'query' else what + 's'} of shape {tuple(x.shape)}: "
            f"expected [s], [b, s] or [b, h, s] with s = {x.shape[-2]}"
        )


def bias_into(out: object, bias: Tensor) -> Tensor:
    """``out`` holding ``bias`` (copied without gradient): what :meth:`PositionalEncoding.bias` does
    with ``out=`` where no build writes into it directly. A ValueError naming the shape, dtype and
    device accepted and those given when ``out`` is not a tensor of ``bias``'s."""
    check_out(out, tuple(bias.shape), bias.dtype, bias.device, " (the bias of these positions)")
    with torch.no_grad():
        return out.copy_(bias)


class PositionalEncoding(nn.Module):
    """Base class of every scheme. Subclasses set ``name``, ``family``, ``Config`` and the hooks."""

    name: ClassVar[str] = ""
    family: ClassVar[str] = "none"
    #: One-line formula and citation, shown by the atlas and the CLI.
    formula: ClassVar[str] = ""
    citation: ClassVar[str] = ""
    #: True when attention must call :meth:`query_scores` / :meth:`value_term` (explicit math).
    uses_query_terms: ClassVar[bool] = False
    #: True when the position term depends on the data (queries, keys or layer input), not on
    #: positions alone (:meth:`logit_term`, :meth:`input_bias`): it cannot be drawn without them.
    data_dependent: ClassVar[bool] = False
    #: True when attention must compute :meth:`input_terms` from the layer input and add :meth:`input_bias`.
    uses_input_terms: ClassVar[bool] = False
    #: Coordinates per position: 1 for sequences; N-D schemes (``sinusoidal_nd``, ``rope_axial``) set it
    #: per instance from their config and take positions ``[s, n_axes]`` / ``[b, s, n_axes]``.
    n_axes: ClassVar[int] = 1
    #: True when :meth:`score_mod` also takes ``k_start=`` (the position of the first key): for a
    #: bias that depends on the query's own position, not only on the distance (FIRE's ``max(L, i)``).
    score_mod_takes_k_start: ClassVar[bool] = False
    #: ``score_mod(q_offset, sq=, sk=)``: the score mod reads a table over the call's ``sq + sk - 1``
    #: distances (a learned function of the distance, e.g. DPB's MLP), so it needs the lengths
    score_mod_takes_lengths: ClassVar[bool] = False
    Config: ClassVar[type]

    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config
        self.register_load_state_dict_post_hook(_off_meta_after_load)

    def coordinates(
        self, positions: Tensor | int, *, length: int | None = None, device: torch.device | None = None
    ) -> Tensor:
        """``positions`` as this scheme's coordinates ``[*p, n_axes]``: a tensor ``[.., length, n_axes]``
        as it is, 1-D positions ``[s]`` / ``[b, s]`` on axis 0 with the other axes 0
        (:func:`~posenc.functional.as_coordinates`). A scheme that reads 1-D positions otherwise
        overrides it (MRoPE: text has ``t = h = w``)."""
        return as_coordinates(positions, self.n_axes, length=length, device=device)

    # -- the three places position enters ---------------------------------------------------
    def embed(self, x: Tensor, positions: Tensor | None = None) -> Tensor:
        """Token embeddings ``[b, s, d]`` in, position-aware embeddings out (identity here)."""
        return x

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor | None = None, k_positions: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Queries and keys ``[b, h, s, hd]`` in, rotated out (identity here)."""
        return q, k

    def bias(self, q_positions: Tensor, k_positions: Tensor, *, out: Tensor | None = None) -> Tensor | None:
        """Additive logit bias ``[h, sq, sk]`` (``[b, h, sq, sk]`` for batched positions), or None.

        Here: from :meth:`relative_bias_values` where the scheme defines it (contiguous ranges of
        positions from the cache of :func:`~posenc.kernels.bias.cached_bias`, other positions by
        evaluating it at every pair's ``k - q``); None otherwise. A bias larger than the memory
        available is refused before it is built (:func:`check_bias_fits`; the schemes that override
        this hook call it too).

        ``out``: a preallocated tensor of the bias's shape, dtype and device (``[h, sq, sk]`` for
        1-D positions) to write it into, for inference; it is returned. Contiguous ranges are
        built straight into it (:func:`~posenc.kernels.bias.build_bias`, uncached), other
        positions computed and copied. No gradient flows into ``out``. A tensor of another shape,
        dtype or device is a ValueError naming what was given and what is accepted. Every scheme
        takes it (those without a bias return None and leave ``out`` alone).
        """
        if type(self).relative_bias_values is PositionalEncoding.relative_bias_values:
            return None
        device = next((t.device for t in (*self.parameters(), *self.buffers())), None)
        check_bias_fits(q_positions, k_positions, getattr(self.config, "num_heads", 1), torch.float32, device)
        if out is not None:
            built = build_bias(self, q_positions, k_positions, out=out)  # contiguous ranges: Toeplitz build
            if built is not None:
                return built
        else:
            cached = cached_bias(self, q_positions, k_positions)  # contiguous ranges: Toeplitz build + cache
            if cached is not None:
                return cached
        rel = relative_positions(as_positions(q_positions, device=device), as_positions(k_positions, device=device))
        values = self.relative_bias_values(rel.flatten())  # [h, (...) sq sk]: every pair
        bias = values.unflatten(-1, rel.shape).movedim(0, -3)  # [h, ..., sq, sk] -> [..., h, sq, sk]
        return bias if out is None else bias_into(out, bias)

    # -- capabilities: what attention, FlexAttention and the caches ask of a scheme ------------
    def relative_bias_values(self, rel: Tensor) -> Tensor | None:
        """The bias as a function of the distance alone: ``rel [w]`` (key minus query positions:
        int64, or floats where the caller gave float positions) -> ``[h, w]``; None (here) for
        schemes whose bias is not such a function. A scheme that defines it gets :meth:`bias` and
        its cache from it."""
        return None

    def relative_index(self, rel: Tensor) -> Tensor | None:
        """For a bias that is a learned table looked up at an index of the distance (T5's buckets):
        ``rel [w]`` -> LongTensor ``[w]``; None here. While the table needs gradients its bias
        cannot be cached, but this index, expanded to ``[sq, sk]``, is
        (:func:`~posenc.kernels.bias.cached_index`)."""
        return None

    def score_mod(self, q_offset: int | Tensor) -> ScoreMod | None:
        """The bias as a FlexAttention score mod ``(score, b, h, q_idx, kv_idx) -> score`` for query
        ``i`` at ``q_offset + i`` against key ``j`` at ``j`` (positions relative to the first key);
        None (here) where the scheme has none: :class:`posenc.Attention` then materialises
        :meth:`bias`. The score mod captures the scheme's parameters detached.

        A scheme with :attr:`uses_input_terms` (forgetting attention) takes its keys' input terms
        as well, ``score_mod(q_offset, terms=terms)`` with ``terms [b, h, sk]`` from
        :meth:`input_terms` (the cache's, when decoding), so that its bias is computed per score
        from O(L) numbers (see :mod:`posenc.kernels.flex`)."""
        return None

    def check_attention(self, *, dim: int, num_heads: int, head_dim: int, causal: bool) -> None:
        """Raise ValueError if this scheme cannot serve :class:`posenc.Attention` of width ``dim``
        with ``num_heads`` heads of width ``head_dim`` (``causal`` or not). Here: a scheme acting
        on heads (rotary or relative) must be as wide as a head, a bias scheme have one bias per
        head."""
        config = self.config
        width = getattr(config, "dim", head_dim)
        if self.family in ("rotary", "relative") and width != head_dim:
            raise ValueError(f"{self.name} acts on heads: its dim must be the head width {head_dim}, got {width}")
        heads = getattr(config, "num_heads", num_heads)
        if self.family == "bias" and heads != num_heads:
            raise ValueError(f"{self.name} has num_heads={heads} but Attention has {num_heads}")

    # -- query- and value-dependent terms (Shaw) ---------------------------------------------
    def query_scores(self, q: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor | None:
        """Raw (unscaled) logit term that depends on the query: ``[b, h, sq, sk]``, or None."""
        return None

    def value_term(self, probs: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor | None:
        """Term added to the attention output from the weights ``[b, h, sq, sk]``: ``[b, h, sq, hd]``."""
        return None

    # -- data-dependent terms (CoPE, forgetting attention) -------------------------------------
    def logit_term(self, q: Tensor, logits: Tensor, q_positions: Tensor, k_positions: Tensor) -> Tensor | None:
        """Term added to the logits that depends on them: queries ``q [b, h, sq, hd]`` and the scaled,
        masked logits ``[b, h, sq, sk]`` (``-inf`` where masked, biases included) -> ``[b, h, sq, sk]``,
        or None (here)."""
        return None

    def input_terms(self, x: Tensor) -> Tensor | None:
        """Per-token terms ``[b, h, s]`` from the layer input ``x [b, s, d]`` (kept in the KV cache), or None."""
        return None

    def input_bias(self, terms: Tensor, sq: int) -> Tensor | None:
        """Bias ``[b, h, sq, sk]`` from the terms ``[b, h, sk]`` of every key, the queries being the
        last ``sq`` keys of the stream; None here."""
        return None

    # -- helpers -----------------------------------------------------------------------------
    def encode(self, positions: Tensor | int) -> Tensor | None:
        """The position code itself ``[*p, dim]`` for absolute schemes (what ``embed`` adds); else None."""
        return None

    def output_dim(self, input_dim: int) -> int:
        """Width of :meth:`embed`'s output for inputs of width ``input_dim``."""
        return input_dim

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict[str, Any]:
        """Config values :class:`posenc.Attention` fills in when it builds this scheme by name."""
        return {}

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Dispatch to the scheme's main hook: ``embed`` (absolute), ``rotate`` or ``bias``."""
        if self.family == "rotary":
            return self.rotate(*args, **kwargs)
        if self.family == "bias":
            return self.bias(*args, **kwargs)
        return self.embed(*args, **kwargs)

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        """Name the config behind a table of another shape (torch alone says "size mismatch")."""
        error_msgs = args[-1]
        for name, param in self.named_parameters():
            saved = state_dict.get(prefix + name)
            if isinstance(saved, Tensor) and saved.shape != param.shape:
                error_msgs.append(
                    f"{prefix + name}: the checkpoint's {tuple(saved.shape)} does not fit this {self.name} "
                    f"scheme's {tuple(param.shape)}; it was saved from another configuration (this one: "
                    f"{self.config})"
                )
        super()._load_from_state_dict(state_dict, prefix, *args)

    def _apply(self, fn: Callable[[Tensor], Tensor], recurse: bool = True) -> PositionalEncoding:
        """Module-wide casts move float64 buffers to the new device but keep them float64, and
        empty the row caches (rebuilt on use).

        Frequencies, slopes and decay rates are float64 by the precision policy (docs/design.md): a
        ``model.to(torch.bfloat16)`` must not round the numbers positions are multiplied by
        (bf16 holds ~3 significant digits). Parameters and other buffers follow the cast as usual.
        """
        from ._cache import forget

        forget(self)  # caches are rebuilt on use: a cast down and back must not leave them rounded
        exact = {name: buf for name, buf in self._buffers.items() if buf is not None and buf.dtype == torch.float64}
        on_meta = [name for name, buf in self._buffers.items() if buf is not None and buf.is_meta]
        super()._apply(fn, recurse)
        for name, buf in exact.items():
            moved = self._buffers[name]
            if moved is not None and moved.dtype != torch.float64 and not buf.is_meta:
                self._buffers[name] = buf.to(device=moved.device)
        left_meta = [name for name in on_meta if self._buffers[name] is not None and not self._buffers[name].is_meta]
        if left_meta:
            self._rebuild_buffers(self._buffers[left_meta[0]].device)
        return self

    def _rebuild_buffers(self, device: torch.device) -> None:
        """Recompute the buffers derived from the config (frequencies, slopes; caches emptied).

        A buffer leaves the meta device only through ``Module.to_empty`` (meta tensors hold no data),
        which leaves it uninitialised: the low-memory loading path (build under ``torch.device("meta")``,
        ``to_empty``, ``load_state_dict``) would otherwise rotate by garbage, since these buffers are
        not in the ``state_dict``. The global RNG is left as it was.
        """
        with torch.random.fork_rng(devices=[]), torch.device("cpu"):
            fresh = type(self)(self.config)
        for name in list(self._buffers):
            buf = fresh._buffers.get(name)
            self._buffers[name] = None if buf is None else buf.to(device)

    def leave_meta(self, device: torch.device) -> None:
        """Rebuild the config-derived buffers on ``device`` if they are still on the meta device
        (nothing otherwise): ``load_state_dict(..., assign=True)`` into a module built under
        ``torch.device("meta")`` replaces the parameters and the saved buffers, never these, which
        the ``state_dict`` does not hold. Called after such a load by this module when it has a
        parameter or saved buffer to take the device from, and by :class:`posenc.Attention` (and
        the experiments' model) for the encodings they hold."""
        if device.type != "meta" and any(buf is not None and buf.is_meta for buf in self._buffers.values()):
            self._rebuild_buffers(device)

    def extra_repr(self) -> str:
        fields = dataclasses.asdict(self.config) if dataclasses.is_dataclass(self.config) else {}
        return ", ".join(f"{k}={v!r}" for k, v in fields.items())


def _off_meta_after_load(module: PositionalEncoding, incompatible_keys: Any) -> None:
    """Load post-hook: the device of a loaded parameter or saved buffer, where there is one."""
    saved = [t for t in module.parameters(recurse=False)]
    saved += [b for n, b in module._buffers.items() if b is not None and n not in module._non_persistent_buffers_set]
    device = next((t.device for t in saved if not t.is_meta), None)
    if device is not None:
        module.leave_meta(device)


P = TypeVar("P", bound=type[PositionalEncoding])


def register(cls: P) -> P:
    """Class decorator: add a scheme to the registry under ``cls.name``."""
    if not isinstance(cls, type) or not issubclass(cls, PositionalEncoding):
        raise TypeError(f"register takes a subclass of posenc.PositionalEncoding (cls), got {cls!r}")
    if not isinstance(cls.name, str):
        raise TypeError(f"a scheme's name must be a string, got {cls.name!r}")
    if not cls.name or cls.name in _REGISTRY:
        raise ValueError(f"scheme name {cls.name!r} is empty or taken")
    if cls.family not in FAMILIES:
        raise ValueError(f"scheme family {cls.family!r} is not one of {FAMILIES}")
    _REGISTRY[cls.name] = cls
    return cls


def unregister(name: str) -> type[PositionalEncoding]:
    """Remove the scheme registered as ``name`` (a scheme defined for a test, say); returns its class."""
    return _REGISTRY.pop(scheme_class(name).name)


def available() -> list[str]:
    """Every registered scheme name, in registration order."""
    return list(_REGISTRY)


def scheme_class(name: str) -> type[PositionalEncoding]:
    """The class registered under ``name``; unknown names raise a ValueError listing the choices."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ValueError(f"unknown positional encoding {name!r}; choose one of: {', '.join(available())}")
    return _REGISTRY[name]


def no_encoding() -> PositionalEncoding:
    """The registered scheme of family ``"none"``: what :class:`posenc.Attention` uses for
    ``encoding=None`` (attention without position information)."""
    return create(next(name for name, cls in _REGISTRY.items() if cls.family == "none"))


def config_fields(cls: type[PositionalEncoding]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls.Config)]


def create(name: str, **config: Any) -> PositionalEncoding:
    """Build the scheme registered as ``name`` from its config keys (see each scheme's ``Config``)."""
    cls = scheme_class(name)
    fields = config_fields(cls)
    unknown = sorted(set(config) - set(fields))
    if unknown:
        raise ValueError(f"scheme {name!r} does not take {unknown}; it accepts: {', '.join(fields)}")
    required = [
        f.name
        for f in dataclasses.fields(cls.Config)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [k for k in required if k not in config]
    if missing:
        raise ValueError(f"scheme {name!r} needs {missing}; it accepts: {', '.join(fields)}")
    return cls(cls.Config(**config))
