"""Reference multi-head attention that applies any registered scheme through its hooks.

Shape legend: ``b`` batch, ``h`` heads, ``s`` new tokens, ``sq``/``sk`` query/key positions,
``d`` model width, ``hd = d / h`` head width.

The scheme is injected (composition, as torchtune does), never selected by flags:

1. absolute schemes: ``embed`` is added to the input before the projections (one-layer use; a
   stack should apply the encoding once at its input and give its layers ``encoding=None``);
2. ``rotate`` turns q and k at their positions (RoPE, xPos);
3. ``bias`` adds to the logits (T5, ALiBi), through ``scaled_dot_product_attention``'s float mask,
   or, for a scheme with a ``score_mod`` hook, FlexAttention computes it per score
   (:mod:`posenc.kernels.flex`);
4. schemes with query- or value-dependent terms (Shaw; CoPE's ``logit_term`` of the masked
   logits), and on the CPU biases that need gradients (T5 in training), are computed with explicit
   math;
5. a scheme with ``uses_input_terms`` (forgetting attention) computes per-token terms from the
   layer input, kept in the KV cache beside the keys, and its bias from those of every key:
   materialised (``input_bias``), or, where FlexAttention applies, per score from the terms
   (its ``score_mod`` gets them: ``O(b h sk)``, never ``[b, h, sq, sk]``).

What a scheme requires of the layer (head count, head width, causality) it checks itself
(``check_attention``). Default positions are ``0..s-1`` made by ``default_positions``, marked as
that range, and take the same path as positions given explicitly: the schemes serve the range
from their caches without reading it.

Packed documents: ``cu_seqlens`` (flash-attention's varlen description, one packed row) or
``document_ids [s]`` / ``[b, s]`` given to ``forward`` mask attention across documents (in SDPA's
float mask, or FlexAttention's block mask) and restart the default positions at 0 in each, for
every scheme family: absolute codes, rotations and biases see each document as if it ran alone.

Decoding: pass a :class:`KVCache` (one per layer: a cache refuses a second layer); the new
tokens' positions default to continuing after the cached ones, keys are cached after rotation, and
the causal mask is by index in the stream.

Where scores, a mask or a bias ``[b, h, sq, sk]`` are materialised, one larger than the memory
available is refused before it is allocated (:class:`~posenc._memory.TooLargeError`, a
ValueError naming its size and the ways around it).
"""

from __future__ import annotations

import numbers
from typing import Any

import torch
import torch.nn.functional as nnf
from torch import Tensor, nn

from . import flex
from ._memory import check_fits
from .functional._checks import (
    check_bool,
    check_not_meta,
    check_number,
    check_positive_int,
    has_tangent,
    plain,
    tracing,
)
from .functional.packed import (
    check_cu_seqlens,
    document_ids_from_cu_seqlens,
    positions_from_document_ids,
    segments_from_document_ids,
)
from .kernels.ranges import known_range
from .kv_cache import KVCache
from .schemes.base import PositionalEncoding, create, default_positions, no_encoding, scheme_class

__all__ = ["Attention", "KVCache"]

#: The ways around scores or a mask ``[b, h, sq, sk]`` too large to materialise.
SCORES_HINT = (
    "Attention materialises them with a key_mask, dropout, a scheme with query terms (shaw), or a bias "
    "that needs gradients on the CPU; a bias scheme's scores are computed per block through FlexAttention "
    "for inference without a key_mask or dropout (posenc.flex.set_mode('always') makes it the path "
    "whenever it applies); otherwise use a shorter sequence, or for inference feed the sequence in chunks "
    "of tokens through a posenc.KVCache"
)


def _build_encoding(
    encoding: PositionalEncoding | str | None, head_dim: int, num_heads: int, dim: int, causal: bool
) -> PositionalEncoding:
    if encoding is None:
        return no_encoding()
    if isinstance(encoding, str):
        cls = scheme_class(encoding)
        try:
            return create(encoding, **cls.attention_defaults(head_dim, num_heads, dim, causal))
        except ValueError as err:  # say which Attention sizes the scheme's value came from
            raise ValueError(
                f"encoding {encoding!r} cannot serve Attention(dim={dim}, num_heads={num_heads}), "
                f"heads of width {head_dim}: {err}"
            ) from None
    if isinstance(encoding, PositionalEncoding):
        return encoding
    raise TypeError(f"encoding must be a scheme name, a PositionalEncoding or None, got {type(encoding).__name__}")


def _encoding_off_meta(module: Attention, incompatible_keys: Any) -> None:
    """Load post-hook (a function, not a lambda: modules stay picklable)."""
    module.encoding.leave_meta(module.qkv.weight.device)


def _sdpa(q: Tensor, k: Tensor, v: Tensor, **options: Any) -> Tensor:
    """``scaled_dot_product_attention``; through its MATH kernel for ``torch.func`` wrappers and
    forward-mode tangents, which the fused CPU kernel has no rules for (``jvp``, ``jacfwd`` and
    ``hessian`` failed; a learned mask, T5's, got no gradient under ``grad``)."""
    tensors = [t for t in (q, k, v, options.get("attn_mask")) if t is not None]
    if not torch.compiler.is_compiling() and any(not plain(t) or has_tangent(t) for t in tensors):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(SDPBackend.MATH):
            return nnf.scaled_dot_product_attention(q, k, v, **options)
    return nnf.scaled_dot_product_attention(q, k, v, **options)


def _repeat_kv(k: Tensor, v: Tensor, heads: int) -> tuple[Tensor, Tensor]:
    """Grouped-query keys and values ``[b, kv, sk, hd]`` as ``[b, heads, sk, hd]``: each shared head
    once per query head of its group (HF ``repeat_kv``)."""
    return k.repeat_interleave(heads // k.shape[1], dim=1), v.repeat_interleave(heads // v.shape[1], dim=1)


def _check_sizes(dim: int, num_heads: int, head_dim: int | None, num_kv_heads: int | None) -> tuple[int, int, int, int]:
    """``(dim, num_heads, head_dim, num_kv_heads)`` checked, the defaults filled in."""
    dim = check_positive_int("dim", dim)
    num_heads = check_positive_int("num_heads", num_heads)
    if head_dim is None and dim % num_heads:
        raise ValueError(f"dim={dim} must be divisible by num_heads={num_heads} (or pass head_dim=)")
    head_dim = dim // num_heads if head_dim is None else check_positive_int("head_dim", head_dim)
    num_kv_heads = num_heads if num_kv_heads is None else check_positive_int("num_kv_heads", num_kv_heads)
    if num_heads % num_kv_heads:
        raise ValueError(
            f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads} (each group of "
            f"{num_heads} // num_kv_heads query heads shares one key/value head)"
        )
    return dim, num_heads, head_dim, num_kv_heads


def _check_dropout(dropout: object) -> float:
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real):
        raise TypeError(f"dropout must be a probability in [0, 1], got {dropout!r}")
    if not 0.0 <= dropout <= 1.0:
        raise ValueError(f"dropout must be a probability in [0, 1], got {dropout!r}")
    return float(dropout)


def _check_inputs(
    x: object, dim: int, device: torch.device, dtype: torch.dtype, cache: object, key_mask: object
) -> None:
    """Raise on an ``x`` that is not ``[b, s, dim]`` floats of the weights' ``dtype`` (outside
    autocast) on their ``device``, a cache of
    another kind or batch, or a key mask that is not boolean or not on ``x``'s device."""
    if not isinstance(x, Tensor) or not x.is_floating_point():
        what = f"a tensor of dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"Attention expects floating-point embeddings x [b, s, {dim}], got {what}")
    if x.dim() != 3 or x.shape[-1] != dim:
        raise ValueError(f"Attention expects x of shape [b, s, {dim}], got {tuple(x.shape)}")
    if x.device != device:
        raise ValueError(f"x is on {x.device} but this Attention's weights are on {device}: move one to the other")
    if x.dtype != dtype and not torch.is_autocast_enabled(x.device.type):
        raise TypeError(
            f"x is {x.dtype} but this Attention's weights are {dtype}: cast the module to x's dtype "
            f"(attention.to({x.dtype})) or x to the weights' (x.to({dtype})), or run under torch.autocast"
        )
    if cache is not None and not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a posenc.KVCache or None, got {type(cache).__name__}")
    if key_mask is not None and (
        not isinstance(key_mask, Tensor) or key_mask.is_floating_point() or key_mask.is_complex()
    ):
        what = f"a tensor of dtype {key_mask.dtype}" if isinstance(key_mask, Tensor) else type(key_mask).__name__
        raise TypeError(
            f"key_mask must be a bool (or 0/1 integer) tensor [b, sk], True or 1 where a key is "
            f"attended, got {what}; an additive float mask (0 attend, -inf masked) converts with "
            "key_mask = mask == 0, a 1/0 float mask with key_mask = mask.bool()"
        )
    if key_mask is not None and key_mask.device != x.device:
        raise ValueError(f"key_mask is on {key_mask.device} but x is on {x.device}: move it to x's device")
    if cache is not None and cache.k is not None and cache.k.shape[0] != x.shape[0]:
        raise ValueError(
            f"this KVCache holds keys [b, h, sk, hd] = {list(cache.k.shape)}; x {list(x.shape)} has "
            f"batch {x.shape[0]}: use a new KVCache for another batch"
        )


def _documents(
    x: Tensor, cache: KVCache | None, cu_seqlens: Tensor | None, document_ids: Tensor | None
) -> Tensor | None:
    """Packed documents as non-decreasing indices ``[1 or b, s]`` on ``x``'s device, or None:
    from ``cu_seqlens`` (one packed row) or ``document_ids [s]`` / ``[b, s]``, checked."""
    if cu_seqlens is None and document_ids is None:
        return None
    if cu_seqlens is not None and document_ids is not None:
        raise ValueError("pass packed documents as cu_seqlens or as document_ids, not both")
    if cache is not None:
        raise ValueError(
            "packed documents (cu_seqlens / document_ids) take no KVCache: decode each document with its own cache"
        )
    b, s, _ = x.shape
    check_not_meta("cu_seqlens", cu_seqlens, x.device)
    check_not_meta("document_ids", document_ids, x.device)
    if cu_seqlens is not None:
        if b != 1:
            raise ValueError(
                f"cu_seqlens describes one packed row (flash-attention's [total, ...]), but x has {b} rows: "
                "pass x [1, total, d], or document_ids [b, s] for several packed rows"
            )
        ids = document_ids_from_cu_seqlens(check_cu_seqlens(cu_seqlens, s), s)  # [s]
    else:
        ids = document_ids
        if (
            not isinstance(ids, Tensor)
            or ids.shape[-1:] != (s,)
            or ids.dim() not in (1, 2)
            or (ids.dim() == 2 and ids.shape[0] not in (1, b))
        ):
            got = tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
            raise ValueError(f"document_ids must be [s] or [b, s] with b={b}, s={s} (one id per token), got {got}")
    segments = segments_from_document_ids(ids.to(x.device))  # [s] or [b, s]
    return segments if segments.dim() == 2 else segments[None]  # [1 or b, s]


def _continued(cached: Tensor, s: int) -> Tensor:
    """The positions of ``s`` new tokens after each row's last cached one (left-padded rows start
    lower): ``[s]`` or ``[b, s]``. A cache of default positions holds a known range: continued
    without reading the last one back."""
    start = known_range(cached)
    if start is not None:
        return default_positions(None, s, cached.device, offset=start + cached.shape[0])
    # int64: a cache of uint8 / int8 positions would wrap at 255 / 127
    return cached[..., -1:].long() + 1 + torch.arange(s, device=cached.device)  # [s] or [b, s]


def _check_positions_shape(positions: Tensor, n_axes: int, b: int, s: int) -> None:
    seq_shape = positions.shape[:-1] if n_axes > 1 else positions.shape  # [s] or [b, s]
    if seq_shape[-1:] != (s,) or len(seq_shape) not in (1, 2) or (len(seq_shape) == 2 and seq_shape[0] not in (1, b)):
        raise ValueError(
            f"positions must be [s], [1, s] or [b, s] with b={b}, s={s}, got shape {tuple(positions.shape)}"
            + (
                f" (coordinates [s, {n_axes}] or [b, s, {n_axes}] also accepted)"
                if n_axes > 1
                else "; coordinates [.., s, n_axes] are for N-D schemes such as rope_axial"
            )
        )


class Attention(nn.Module):
    """Multi-head self-attention ``[b, s, d] -> [b, s, d]`` with a pluggable positional encoding."""

    def __init__(
        self,
        dim: int,
        num_heads: int,
        *,
        encoding: PositionalEncoding | str | None = None,
        causal: bool = False,
        qkv_bias: bool = False,
        dropout: float = 0.0,
        scale: float | None = None,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        query_scale: Any = None,
    ) -> None:
        super().__init__()
        from .functional.temperature import as_query_scale  # the functional core is loaded already

        #: a factor on each query by its absolute position (``posenc.functional.QueryTemperature``:
        #: Llama 4's NoPE-layer temperature, Mistral's ``llama_4_scaling_beta``; or a function of
        #: positions ``[s]`` / ``[b, s]``), applied after the rotation; None: no factor
        self.query_scale = as_query_scale(query_scale)
        dim, num_heads, head_dim, num_kv_heads = _check_sizes(dim, num_heads, head_dim, num_kv_heads)
        self.dim, self.num_heads, self.head_dim = dim, num_heads, head_dim
        #: key/value heads: fewer than ``num_heads`` is grouped-query attention (one for multi-query)
        self.num_kv_heads = num_kv_heads
        self.causal = check_bool("causal", causal)
        check_bool("qkv_bias", qkv_bias)
        self.dropout = _check_dropout(dropout)
        #: what the logits ``q . k`` are multiplied by before the bias is added: 1/sqrt(head width)
        #: unless given (T5 does not scale: ``scale=1.0`` with its weights, HF ``T5Attention``)
        self.scale = self.head_dim**-0.5 if scale is None else check_number("scale", scale, positive=True)
        self.encoding = _build_encoding(encoding, head_dim, num_heads, dim, self.causal)
        self.encoding.check_attention(dim=dim, num_heads=num_heads, head_dim=head_dim, causal=self.causal)
        # q, then k, then v along the output features ([(h + 2 kv) hd, d]; [3 d, d] without GQA)
        self.qkv = nn.Linear(dim, (num_heads + 2 * num_kv_heads) * head_dim, bias=qkv_bias)
        self.proj = nn.Linear(num_heads * head_dim, dim)
        # load_state_dict(assign=True) into a meta-built layer: the encoding's derived buffers follow the weights
        self.register_load_state_dict_post_hook(_encoding_off_meta)
        self._mask_cache: tuple | None = None  # (key, bias, mask): the last causal-masked constant bias

    def forward(
        self,
        x: Tensor,
        positions: Tensor | None = None,
        *,
        cache: KVCache | None = None,
        key_mask: Tensor | None = None,
        cu_seqlens: Tensor | None = None,
        document_ids: Tensor | None = None,
    ) -> Tensor:
        """``x [b, s, d]`` at ``positions`` (``[s]`` or ``[b, s]``; default: each row continues after its
        last cached position, or ``0..s-1`` without a cache).

        Schemes with ``n_axes > 1`` (``rope_axial``, ``sinusoidal_nd``, ``mrope``) take coordinates
        ``[s, n_axes]`` or ``[b, s, n_axes]``; 1-D positions given to them are read by the scheme's
        ``coordinates`` (axis 0, the other coordinates 0; MRoPE's text tokens: t = h = w).
        A 2-D tensor of shape ``[s, n_axes]`` is read as coordinates even when it could be positions
        ``[b, s]`` (``b = s = n_axes``): give per-row positions there as coordinates
        ``[b, s, n_axes]`` (axis 0 the positions, the rest 0).
        Their default with a cache is ``past .. past + s - 1`` along axis 0 (``past`` = cached
        tokens): a grid has no "next" coordinate, so pass coordinates when decoding one.

        ``key_mask [b, sk]`` (bool, True = attend) masks padding keys, cached ones included.

        Packed documents: ``cu_seqlens [n + 1]`` (for ``b = 1``: ``0, l_0, l_0 + l_1, ..., s``) or
        ``document_ids [s]`` / ``[b, s]`` (a document is a run of equal ids): no token attends to
        another document, and positions (when not given) restart at 0 in each document. Not with a
        ``cache``: decode each document with its own.
        """
        _check_inputs(x, self.dim, self.qkv.weight.device, self.qkv.weight.dtype, cache, key_mask)
        enc = self.encoding
        past = cache.length if cache is not None else 0
        documents = _documents(x, cache, cu_seqlens, document_ids)  # [1 or b, s] or None
        restart = documents is not None and positions is None  # positions restart per document
        if restart:
            positions = positions_from_document_ids(documents)  # [1 or b, s]
            positions = positions[0] if positions.shape[0] == 1 else positions  # [s] or [b, s]
        positions = self._positions(x, positions, cache)  # [s] or [b, s]; coordinates [.., s, n_axes]
        x = enc.embed(x, positions)  # absolute schemes add their code; the others return x
        q, k, v = self._project(x)  # [b, h, s, hd], [b, kv, s, hd], [b, kv, s, hd]
        q, k = enc.rotate(q, k, positions, positions)
        if self.query_scale is not None:  # at the queries' absolute positions (after the cached ones)
            q = self.query_scale.scale(q, positions, enc.n_axes)
        terms = enc.input_terms(x) if enc.uses_input_terms else None  # [b, h, s]: forgetting attention
        k_positions = positions
        if cache is not None:  # [b, kv, sk, hd] x 2, [.., sk(, n_axes)]
            seq_dim = -2 if enc.n_axes > 1 else -1
            k, v, k_positions = cache.append(k, v, positions, seq_dim=seq_dim, owner=self, terms=terms)
            terms = cache.terms  # [b, h, sk]: every cached key's
        out = self._attend(q, k, v, positions, k_positions, past, key_mask, terms, documents, restart)  # [b, h, s, hd]
        out = out.transpose(1, 2).flatten(2)  # [b, h, s, hd] -> [b, s, h hd]
        return self.proj(out)

    def _positions(self, x: Tensor, positions: Tensor | None, cache: KVCache | None) -> Tensor:
        """The new tokens' positions: given; else continuing the cache's; else ``past .. past + s - 1``
        (a marked range, see :func:`~posenc.schemes.base.default_positions`). Checked against ``x``."""
        b, s, _ = x.shape
        past, n_axes = (cache.length if cache is not None else 0), self.encoding.n_axes
        if positions is None and past and cache.positions is not None and n_axes == 1:
            positions = _continued(cache.positions, s)
        positions = default_positions(positions, s, x.device, offset=past)
        if n_axes > 1:
            positions = self.encoding.coordinates(positions, length=s)  # [s, n] or [b, s, n]; MRoPE text: t = h = w
        _check_positions_shape(positions, n_axes, b, s)
        return positions

    def _project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """q ``[b, h, s, hd]``, k and v ``[b, kv, s, hd]``: views of one projection, split along its
        own axis, then transposed (the backward then stacks the three gradients straight into the
        projection's ``[b, s, 3, h, hd]`` layout instead of building ``[3, b, h, s, hd]`` and copying)."""
        b, s, _ = x.shape
        h, kv, hd = self.num_heads, self.num_kv_heads, self.head_dim
        proj = self.qkv(x)  # [b, s, (h + 2 kv) hd]
        if kv == h:
            q, k, v = (t.transpose(1, 2) for t in proj.view(b, s, 3, h, hd).unbind(2))  # [b, s, h, hd] -> [b, h, s, hd]
        else:  # grouped-query attention: q [b, h, s, hd], k and v [b, kv, s, hd]
            q, k, v = (t.unflatten(-1, (-1, hd)).transpose(1, 2) for t in proj.split((h * hd, kv * hd, kv * hd), -1))
        return q, k, v

    def _attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        q_positions: Tensor,
        k_positions: Tensor,
        past: int,
        key_mask: Tensor | None,
        terms: Tensor | None = None,
        documents: Tensor | None = None,
        restart: bool = False,
    ) -> Tensor:
        """The kernel, ``[b, h, sq, hd]``: FlexAttention where it applies (the bias per score, never
        materialised; see :mod:`posenc.kernels.flex`); explicit math for query or value terms and,
        on the CPU, a bias that needs gradients; SDPA otherwise. ``terms [b, h, sk]``: the scheme's
        input terms of every key (``uses_input_terms``), from which its bias is built.
        ``documents [1 or b, s]``: packed documents (non-decreasing indices) attended separately;
        ``restart``: their positions restart in each (FlexAttention's score mods assume it)."""
        enc, grouped = self.encoding, k.shape[1] != q.shape[1]
        out = None
        if documents is None or restart:
            out = flex.attend(
                enc,
                q,
                k,
                v,
                q_positions,
                k_positions,
                causal=self.causal,
                past=past,
                key_mask=key_mask,
                dropout_p=self._p(),
                scale=self.scale,
                enable_gqa=grouped,
                terms=terms,
                documents=documents,
            )
        if out is not None:
            return out
        bias = enc.input_bias(terms, q.shape[-2]) if enc.uses_input_terms else enc.bias(q_positions, k_positions)
        mask = self._mask(q, k, bias, past, key_mask, documents)
        if enc.uses_query_terms or (mask is not None and mask.requires_grad and q.device.type == "cpu"):
            return self._explicit(q, k, v, mask, q_positions, k_positions)
        if mask is None:
            gqa = {"enable_gqa": True} if grouped else {}
            return _sdpa(q, k, v, dropout_p=self._p(), is_causal=self.causal and past == 0, scale=self.scale, **gqa)
        if grouped:  # SDPA's enable_gqa with a mask falls back to its slowest kernel on CUDA: repeat, as HF does
            k, v = _repeat_kv(k, v, q.shape[1])
        return _sdpa(q, k, v, attn_mask=mask, dropout_p=self._p(), scale=self.scale)

    def _p(self) -> float:
        return self.dropout if self.training else 0.0

    def _mask(
        self,
        q: Tensor,
        k: Tensor,
        bias: Tensor | None,
        past: int,
        key_mask: Tensor | None,
        documents: Tensor | None = None,
    ) -> Tensor | None:
        """Float mask ``[(b,) h or 1, sq, sk]``: the bias, plus -inf where causality, padding or
        document boundaries forbid."""
        sq, sk = q.shape[-2], k.shape[-2]
        explicit_causal = self.causal and (
            past > 0
            or bias is not None
            or key_mask is not None
            or documents is not None
            or self.encoding.uses_query_terms
        )
        if bias is None and not explicit_causal and key_mask is None and documents is None:
            return None
        cacheable = (
            bias is not None
            and not tracing(q, k, bias)
            and key_mask is None  # not compiling, not in torch.func
            and documents is None
            and not self.encoding.uses_input_terms  # a bias from the input: new at every call
            and not bias.requires_grad
            and not bias.is_inference()  # is_inference() stops Dynamo
            and not torch.is_inference_mode_enabled()
        )
        if cacheable:
            # The schemes return the same cached bias call after call; masking it anew copies
            # h * sq * sk values into freshly faulted pages (ALiBi, 8 heads, L = 2048: ~100 ms,
            # as long as the attention itself). One masked copy is kept while the bias is unchanged.
            key = (
                bias.data_ptr(),
                bias._version,
                tuple(bias.shape),
                bias.stride(),
                past,
                sq,
                sk,
                self.causal,
                q.dtype,
                q.device,
            )
            hit = self._mask_cache
            if hit is not None and hit[0] == key and hit[1] is bias:
                return hit[2]
        mask = self._build_mask(q, sk, bias, past, key_mask, explicit_causal, documents)
        if cacheable:
            self._mask_cache = (key, bias, mask)
        return mask

    def _build_mask(
        self,
        q: Tensor,
        sk: int,
        bias: Tensor | None,
        past: int,
        key_mask: Tensor | None,
        explicit_causal: bool,
        documents: Tensor | None = None,
    ) -> Tensor:
        sq = q.shape[-2]
        if key_mask is not None or (documents is not None and documents.shape[0] > 1):
            b = q.shape[0]
        else:
            b = bias.shape[0] if bias is not None and bias.dim() == 4 else 1
        heads = bias.shape[-3] if bias is not None else 1
        check_fits("the attention mask", (b, heads, sq, sk), q.dtype, q.device, hint=SCORES_HINT)
        mask = bias.to(q.dtype) if bias is not None else q.new_zeros(1, sq, sk)
        forbid = None
        if explicit_causal:
            q_index = torch.arange(past, past + sq, device=q.device)
            forbid = torch.arange(sk, device=q.device)[None, :] > q_index[:, None]  # [sq, sk]
        if key_mask is not None:
            if key_mask.shape != (q.shape[0], sk):
                raise ValueError(f"key_mask must be [b, sk] = [{q.shape[0]}, {sk}], got {tuple(key_mask.shape)}")
            pad = ~key_mask.bool()[:, None, None, :]  # [b, 1, 1, sk]
            forbid = pad if forbid is None else (forbid | pad)
        if documents is not None:  # sq == sk: no cache with packed documents
            other = documents[:, None, :, None] != documents[:, None, None, :]  # [1 or b, 1, s, s]
            forbid = other if forbid is None else (forbid | other)
        if forbid is not None:
            mask = mask.masked_fill(forbid, float("-inf"))
        if mask.dim() == 3:
            mask = mask[None]  # [1, h or 1, sq, sk]: SDPA's CPU kernel takes a 4-D mask ~2.5x faster than a 3-D one
        return mask

    def _explicit(
        self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, q_positions: Tensor, k_positions: Tensor
    ) -> Tensor:
        """Attention with explicit math: for schemes whose terms depend on the query or the values,
        and on the CPU for a bias that needs gradients (T5 in training). SDPA has no fused CPU
        kernel with gradients for its mask and takes its math kernel there, whose softmax also
        scans every row of the scores for fully masked ones; here the mask alone is scanned
        (``[h, sq, sk]``, not ``[b, h, sq, sk]``). The experiments' training step with T5, one
        thread: +20-21% -> +9-15% over no encoding (``bench_training``, three runs each)."""
        enc = self.encoding
        b, h, sq, _ = q.shape
        check_fits("the attention scores", (b, h, sq, k.shape[-2]), q.dtype, q.device, hint=SCORES_HINT)
        if k.shape[1] != q.shape[1]:  # grouped-query attention: each key/value head serves a group of queries
            k, v = _repeat_kv(k, v, q.shape[1])
        extra = enc.query_scores(q, q_positions, k_positions)
        if extra is None:  # the scale on q: a pass over [b, h, sq, hd] instead of the scores
            scores = (q * self.scale) @ k.transpose(-2, -1)  # [b, h, sq, sk]
        else:
            scores = (q @ k.transpose(-2, -1) + extra) * self.scale  # [b, h, sq, sk]
        empty = None
        if mask is not None:
            scores = scores + mask
        term = enc.logit_term(q, scores, q_positions, k_positions)  # CoPE: from the masked logits
        if term is not None:
            scores = scores + term
        if mask is not None:
            # a query whose keys are all masked (a left pad under a causal mask) gets a zero output, as
            # SDPA gives, not NaN; its scores are zeroed first so that no NaN reaches the gradients
            empty = torch.isneginf(mask).all(dim=-1, keepdim=True)  # [(b,) h or 1, sq, 1]
            if q.device.type == "cpu" and not tracing(q, mask) and not empty.any():
                empty = None  # none (causal attention without padding): two passes over the scores saved
            else:
                scores = scores.masked_fill(empty, 0.0)
        probs = scores.softmax(dim=-1)  # [b, h, sq, sk]
        if empty is not None:
            probs = probs.masked_fill(empty, 0.0)
        probs = nnf.dropout(probs, p=self._p())
        out = probs @ v  # [b, h, sq, hd]
        value = enc.value_term(probs, q_positions, k_positions)
        return out if value is None else out + value
