"""Bias schemes through FlexAttention: the bias is computed per score, never materialised.

Shape legend: ``b`` batch, ``h`` heads, ``sq``/``sk`` query/key lengths, ``hd`` head width,
``B`` block size (128), ``nq``/``nk`` query/key blocks.

``torch.nn.attention.flex_attention`` (Dong et al. 2024, "Flex Attention: A Programming Model for
Generating Optimized Attention Kernels"; PyTorch ``torch/nn/attention/flex_attention.py``) calls a
``score_mod(score, b, h, q_idx, kv_idx)`` on every logit inside a fused kernel. A materialised
bias costs ``h * sq * sk * 4`` bytes (8.6 GB for 32 heads at L = 8192); a score mod needs only
what the bias is made from (slopes, a bucket table).

A scheme joins by its hook :meth:`~posenc.schemes.base.PositionalEncoding.score_mod`
(``score_mod(q_offset)``: a function of ``(score, b, h, q_idx, kv_idx)`` adding its bias for
queries ``q_offset`` positions past the keys' start); :func:`score_mod_for` asks it. A scheme whose
bias is made from the layer input (``uses_input_terms``: forgetting attention) gets its input terms
of every key too, ``score_mod(q_offset, terms=terms [b, h, sk])``, with ``q_offset`` the number of
keys before the first query (its bias follows the index in the stream, not the positions): the score
mod captures what the bias is made from (``O(b h sk)``), never ``[b, h, sq, sk]``.

Block masks are built from block counts (:meth:`BlockMask.from_kv_blocks`): the causal one lists,
per query block, the kv blocks wholly in the past (full, no mask_mod call) and the diagonal ones
(partial); ``create_block_mask`` would first build a dense mask (2.95 GB at L = 16384).
Packed documents (``documents [b, s]``: non-decreasing document indices, see
:func:`posenc.functional.segments_from_document_ids`) add the document mask of FlexAttention's
document-masking example (``document_id[q_idx] == document_id[kv_idx]``, combined with causal):
blocks whose queries and keys share no document are skipped, blocks inside one document are full,
the rest partial. Positions restart in each document, so within one the distance of positions is
that of indices, and the scheme's score mod is asked for queries at the keys' start
(``q_offset = 0``); a scheme whose score mod needs the query's own position (``k_start``) is
left to SDPA.

:class:`posenc.Attention` calls :func:`attend`, which answers None unless FlexAttention applies:
a scheme with a score mod, no key mask, no dropout, positions that are contiguous ranges (not
needed by a scheme with input terms), no gradient wanted for the scheme's own parameters or its
input terms (a score mod captures them detached), none for q/k/v on the CPU (FlexAttention has no
CPU backward in torch 2.13; on CUDA training goes through it too), and either
``set_mode("always")`` or a materialised bias of at least :data:`MIN_BIAS_BYTES`.

It is compiled with static shapes: each new ``[b, h, sq, sk, hd]`` compiles anew (~4 s on a 2-core
CPU). Past torch's recompile limit for one function (``recompile_limit`` in Dynamo's config, 8 by
default; posenc leaves it as the application set it) torch runs ``flex_attention`` uncompiled, which
builds the whole score matrix as SDPA with a bias does, and warns: decoding token by token through
FlexAttention wants a higher limit, which only the application can choose. Symbolic lengths would serve
every length with one compile, but torch 2.13's CPU kernel then fails to build for some shapes
(``'cur_kvSplitSize5' was not declared``, after another shape was compiled first).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from ..functional._checks import check_positive_int, tracing
from .ranges import range_start

__all__ = [
    "ScoreMod",
    "score_mod_for",
    "block_mask",
    "flex_attention",
    "attend",
    "set_mode",
    "get_mode",
    "available",
    "errors",
    "clear_errors",
    "warmup",
    "MIN_BIAS_BYTES",
    "BLOCK_SIZE",
]

BLOCK_SIZE = 128
#: ``mode="auto"`` uses FlexAttention when the bias it replaces would take at least this many bytes.
MIN_BIAS_BYTES = 256 << 20
_MODES = ("auto", "always", "never")
_mode = "auto"
_compiled = None
_errors: dict[tuple[str, torch.dtype], str] = {}  # why compiling failed, per device type and dtype

ScoreMod = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]


def set_mode(mode: str) -> None:
    """``"auto"`` (large inference only), ``"always"`` (whenever it applies) or ``"never"``."""
    global _mode
    if mode not in _MODES:
        raise ValueError(f"unknown flex mode {mode!r}; choose one of: {', '.join(map(repr, _MODES))}")
    _mode = mode


def get_mode() -> str:
    return _mode


def available(device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> bool:
    """True when this torch has FlexAttention and compiling it has not failed in this process: for
    ``device``'s type and ``dtype`` when given (a float64 input the CPU kernel refuses does not
    turn it off for float32), for any of them when not."""
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    if device is None and dtype is None:
        return not _errors
    kind = None if device is None else torch.device(device).type
    return not any((kind is None or k == kind) and (dtype is None or d == dtype) for k, d in _errors)


def errors() -> dict[tuple[str, torch.dtype], str]:
    """Why compiling FlexAttention failed in this process, per (device type, dtype)."""
    return dict(_errors)


def clear_errors() -> None:
    """Forget the failures :func:`errors` lists (after installing a compiler, say): the next call
    for those devices and dtypes tries FlexAttention again."""
    _errors.clear()


def score_mod_for(
    encoding: Any,
    q_offset: int = 0,
    k_start: int = 0,
    terms: Tensor | None = None,
    sq: int | None = None,
    sk: int | None = None,
) -> ScoreMod | None:
    """The scheme's score mod (its ``score_mod`` hook) for queries ``q_offset`` positions past the
    keys' start, or None; a scheme with ``score_mod_takes_k_start`` also gets the first key's
    position ``k_start``, one with ``score_mod_takes_lengths`` the query and key counts ``sq``,
    ``sk`` (None without them), and one with ``uses_input_terms`` the input terms ``[b, h, sk]`` of
    every key (``terms=``; None without them: its bias cannot be made from positions)."""
    hook = getattr(encoding, "score_mod", None)
    if not callable(hook):
        return None
    if getattr(encoding, "uses_input_terms", False):
        return None if terms is None else hook(q_offset, terms=terms)
    if getattr(encoding, "score_mod_takes_lengths", False):
        return None if sq is None or sk is None else hook(q_offset, sq=sq, sk=sk)
    if getattr(encoding, "score_mod_takes_k_start", False):
        return hook(q_offset, k_start=k_start)
    return hook(q_offset)


# ---------------------------------------------------------------------------------------------
# block masks from block counts


def block_mask(
    sq: int,
    sk: int,
    *,
    causal: bool,
    q_offset: int = 0,
    device: torch.device | str = "cpu",
    block_size: int = BLOCK_SIZE,
    documents: Tensor | None = None,
):
    """A :class:`BlockMask` for ``[sq, sk]`` built from block counts, never from a dense mask.

    Causal: query ``i`` sees keys ``j <= i + q_offset`` (decoding after ``q_offset`` cached keys).
    Per query block, kv blocks wholly visible are *full* (listed first, no mask_mod call), those
    crossing the diagonal *partial*; the rest are skipped. Non-causal: every block is full.
    ``documents [b, s]`` (``sq == sk == s``, no cached keys): non-decreasing document indices of
    packed sequences; a query sees only keys of its own document (:func:`_document_blocks`).
    """
    from torch.nn.attention.flex_attention import BlockMask

    sq, sk, block_size = (check_positive_int(n, v) for n, v in (("sq", sq), ("sk", sk), ("block_size", block_size)))
    if isinstance(q_offset, bool) or not isinstance(q_offset, int) or q_offset < 0:
        raise ValueError(f"q_offset must be a non-negative int (keys cached before the first query), got {q_offset!r}")
    nq, nk = -(-sq // block_size), -(-sk // block_size)
    q_lo = q_offset + torch.arange(nq, device=device) * block_size  # [nq] first query index (in keys' frame)
    q_hi = q_offset + torch.clamp((torch.arange(nq, device=device) + 1) * block_size, max=sq) - 1  # [nq]
    k_lo = torch.arange(nk, device=device) * block_size  # [nk]
    k_hi = torch.clamp(k_lo + block_size, max=sk) - 1  # [nk]
    if causal:
        full = k_hi[None, :] <= q_lo[:, None]  # [nq, nk]
        partial = (k_lo[None, :] <= q_hi[:, None]) & ~full  # [nq, nk]
    else:
        full = torch.ones(nq, nk, dtype=torch.bool, device=device)
        partial = torch.zeros_like(full)
    full, partial = full[None], partial[None]  # [1, nq, nk]
    offset = torch.as_tensor(q_offset, device=device)

    def causal_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        return q_idx + offset >= kv_idx

    mask_mod = causal_mask if causal else None
    if documents is not None:
        full, partial, mask_mod = _document_blocks(documents, sq, sk, q_offset, block_size, full, partial, causal)
    # kv block indices per row, the selected ones first (a stable sort of "not selected")
    full_idx = torch.sort((~full).to(torch.int8), dim=-1, stable=True).indices.to(torch.int32)  # [B, nq, nk]
    part_idx = torch.sort((~partial).to(torch.int8), dim=-1, stable=True).indices.to(torch.int32)  # [B, nq, nk]
    return BlockMask.from_kv_blocks(
        partial.sum(-1, dtype=torch.int32)[:, None],
        part_idx[:, None],  # [B, 1, nq], [B, 1, nq, nk]
        full.sum(-1, dtype=torch.int32)[:, None],
        full_idx[:, None],
        BLOCK_SIZE=block_size,
        mask_mod=mask_mod,
        seq_lengths=(sq, sk),
    )


def _document_blocks(
    documents: Tensor, sq: int, sk: int, q_offset: int, block_size: int, full: Tensor, partial: Tensor, causal: bool
) -> tuple[Tensor, Tensor, Callable]:
    """The causal (or full) block lists ``[1, nq, nk]`` narrowed to packed documents ``[b, s]``
    (non-decreasing indices): ``[b, nq, nk]`` each, and the mask_mod ``same document (and causal)``.

    As the indices never decrease, a block's documents are the range from its first token's to
    its last's: query and key blocks whose ranges do not meet share no document (skipped), and a
    pair of blocks that both lie inside one document is masked by causality alone (full where the
    causal mask left it full)."""
    if not isinstance(documents, Tensor) or documents.dim() != 2 or documents.is_floating_point():
        raise ValueError(
            f"documents must be an integer tensor [b, s] of non-decreasing document indices, got "
            f"{tuple(documents.shape) if isinstance(documents, Tensor) else type(documents).__name__}"
        )
    if sq != sk or q_offset != 0 or documents.shape[-1] != sk:
        raise ValueError(
            f"a document mask needs the queries to be the keys (sq == sk == s, no cached keys), got sq={sq}, "
            f"sk={sk}, q_offset={q_offset}, documents of shape {tuple(documents.shape)}"
        )
    n = -(-sk // block_size)
    pad = n * block_size - sk
    docs = documents.long()
    padded = torch.cat((docs, docs[:, -1:].expand(-1, pad)), dim=-1) if pad else docs  # [b, n B]
    blocks = padded.view(docs.shape[0], n, block_size)  # [b, n, B]
    first, last = blocks[..., 0], blocks[..., -1]  # [b, n] each: a block's lowest and highest document
    meet = (first[:, None, :] <= last[:, :, None]) & (last[:, None, :] >= first[:, :, None])  # [b, nq, nk]
    single = first == last  # [b, n]
    inside = single[:, :, None] & single[:, None, :] & (first[:, :, None] == first[:, None, :])  # [b, nq, nk]
    visible = (full | partial) & meet
    full = full & inside
    partial = visible & ~full

    def document_mask(b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        same = padded[b, q_idx] == padded[b, kv_idx]
        return same & (q_idx >= kv_idx) if causal else same

    return full, partial, document_mask


# ---------------------------------------------------------------------------------------------
# running it


def _get_compiled():
    global _compiled
    if _compiled is None:
        from torch.nn.attention.flex_attention import flex_attention as _flex

        _compiled = torch.compile(_flex, dynamic=False)
    return _compiled


def flex_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    score_mod: ScoreMod | None,
    mask,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """Compiled FlexAttention ``[b, h, sq, hd]`` (eager flex builds the full score matrix: never used)."""
    with warnings.catch_warnings():
        # torch 2.11 warns while tracing flex_attention's own input check with q/k/v that need
        # gradients (it reads .grad of a non-leaf); the warning is about its code, not the caller's
        warnings.filterwarnings(
            "ignore", message="The .grad attribute of a Tensor that is not a leaf", category=UserWarning
        )
        return _get_compiled()(q, k, v, score_mod=score_mod, block_mask=mask, scale=scale, enable_gqa=enable_gqa)


def _wanted(
    encoding: Any,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    key_mask: Tensor | None,
    dropout_p: float,
    terms: Tensor | None = None,
) -> bool:
    if _mode == "never" or key_mask is not None or dropout_p > 0 or not available(q.device, q.dtype):
        return False
    if q.shape[-2] == 0 or k.shape[-2] == 0:
        return False  # nothing to attend: SDPA's path returns the empty result
    extra = () if terms is None else (terms,)
    if getattr(encoding, "uses_query_terms", False) or tracing(q, k, v, *extra):
        return False
    if torch.is_grad_enabled():
        if any(p.requires_grad for p in encoding.parameters()) or any(t.requires_grad for t in extra):
            return False  # a score mod captures the scheme's parameters detached: they would get no gradient
        if q.device.type == "cpu" and any(t.requires_grad for t in (q, k, v)):
            return False  # no CPU backward (torch 2.13); see the module docstring
    rows = q.shape[0] if terms is not None else 1  # a bias from input terms is [b, h, sq, sk]
    return _mode == "always" or rows * q.shape[1] * q.shape[2] * k.shape[2] * 4 >= MIN_BIAS_BYTES


def attend(
    encoding: Any,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_positions: Tensor,
    k_positions: Tensor,
    *,
    causal: bool,
    past: int = 0,
    key_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
    enable_gqa: bool = False,
    terms: Tensor | None = None,
    documents: Tensor | None = None,
) -> Tensor | None:
    """Attention ``[b, h, sq, hd]`` through FlexAttention when it applies (see module doc), else None.
    ``terms [b, h, sk]``: the input terms of every key, for a scheme with ``uses_input_terms``
    (whose bias follows the index in the stream: its queries sit ``past`` keys after the first).
    ``documents [1 or b, s]``: packed documents (non-decreasing indices, no cached keys) whose
    positions restart at 0 in each; a query attends to its own document only."""
    if not _wanted(encoding, q, k, v, key_mask, dropout_p, terms):
        return None
    if documents is not None and (tracing(documents) or past or q.shape[-2] != k.shape[-2]):
        return None
    if getattr(encoding, "uses_input_terms", False):
        score_mod = score_mod_for(encoding, q_offset=past, terms=terms)
    elif documents is not None:
        if getattr(encoding, "score_mod_takes_k_start", False):
            return None  # its bias needs each query's own position, which restarts per document
        # within a document positions and indices differ by the document's start: the distances agree
        score_mod = score_mod_for(encoding, q_offset=0, k_start=0, sq=q.shape[-2], sk=k.shape[-2])
    else:
        if tracing(q_positions, k_positions):
            return None
        q0, k0 = range_start(q_positions), range_start(k_positions)
        if q0 is None or k0 is None:
            return None
        score_mod = score_mod_for(encoding, q_offset=q0 - k0, k_start=k0, sq=q.shape[-2], sk=k.shape[-2])
    if score_mod is None:
        return None
    if documents is not None:
        documents = documents.to(q.device).expand(q.shape[0], -1)  # [b, s]: the mask_mod reads its row
    mask = block_mask(q.shape[-2], k.shape[-2], causal=causal, q_offset=past, device=q.device, documents=documents)
    try:
        return flex_attention(q, k, v, score_mod, mask, scale, enable_gqa)
    except Exception as err:  # no compiler here, or a dtype the kernel refuses: SDPA with a bias is exact
        _errors[(q.device.type, q.dtype)] = f"{type(err).__name__}: {err}"
        return None


def warmup(
    encoding: Any,
    *,
    length: int = 256,
    head_dim: int = 64,
    causal: bool = True,
    device: torch.device | str = "cpu",
    num_heads: int | None = None,
) -> float:
    """Compile FlexAttention for ``encoding`` (a bias scheme with a ``score_mod`` hook) on a small
    input; returns the seconds it took. ``num_heads`` defaults to the scheme's own. A scheme with
    input terms (forgetting) is compiled for a batch of one.

    The compile (10-15 s in a cold process on CPU) recurs for each new shape, so warm up with the
    shape you will run.
    """
    length = check_positive_int("length", length)
    h = num_heads if num_heads is not None else getattr(getattr(encoding, "config", None), "num_heads", None)
    terms = None
    width = getattr(getattr(encoding, "config", None), "dim", None)  # of the layer input its terms are read from
    if getattr(encoding, "uses_input_terms", False) and width is not None:
        # a score mod made from the input terms (forgetting): those of a zero input, the shapes are what compiles
        with torch.no_grad():
            terms = encoding.input_terms(torch.zeros(1, check_positive_int("length", length), width, device=device))
    score_mod = score_mod_for(encoding, terms=terms, sq=length, sk=length)
    if score_mod is None:
        raise ValueError(
            f"warmup compiles FlexAttention for a bias scheme (one whose score_mod hook gives a score "
            f"mod); {getattr(encoding, 'name', type(encoding).__name__)!r} has no score mod, and "
            "posenc.Attention runs it through SDPA"
        )
    if h is None:
        raise ValueError("this scheme's config has no num_heads: pass warmup(..., num_heads=)")
    h, length, head_dim = (
        check_positive_int(n, v) for n, v in (("num_heads", h), ("length", length), ("head_dim", head_dim))
    )
    start = time.perf_counter()
    q = torch.zeros(1, h, length, head_dim, device=device)
    with torch.no_grad():
        flex_attention(q, q, q, score_mod, block_mask(length, length, causal=causal, device=device))
    return time.perf_counter() - start
