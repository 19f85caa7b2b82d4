"""Packed sequences: several documents in one token axis, positions restarting in each.

Shape legend: ``n`` documents, ``total`` tokens of all documents together, ``b`` batch, ``s``
sequence, ``h`` heads, ``hd`` head width, ``r`` rotated width, ``seqlen_ro`` rows of a table.

Two descriptions of the same packing are accepted, as the stacks that pack use them:

* ``cu_seqlens [n + 1]`` (flash-attention's varlen API, TransformerEngine): the cumulative
  document lengths, ``0 = cu[0] <= cu[1] <= ... <= cu[n] = total``; document ``i`` holds tokens
  ``cu[i] .. cu[i+1] - 1``;
* ``document_ids [s]`` or ``[b, s]`` (FlexAttention's document masking, ``torch.nn.attention``
  tutorials): one id per token; a document is a run of equal ids (a token whose id differs
  from its predecessor's starts a new document).

In both, positions restart at 0 in each document (:func:`positions_from_cu_seqlens`,
:func:`positions_from_document_ids`), so a packed batch is encoded as its documents one by one.

:func:`apply_rotary_emb` is flash-attention's ``flash_attn.layers.rotary.apply_rotary_emb`` with
its signature and semantics (Dao-AILab/flash-attention, ``flash_attn/ops/triton/rotary.py``,
``apply_rotary`` and ``rotary_kernel``): ``x [b, s, h, hd]`` (or packed ``[total, h, hd]`` with
``cu_seqlens``), half-width tables ``(seqlen_ro, r/2)``, token ``t`` of sequence ``i`` at table
row ``t + seqlen_offsets[i]``. Here it is the reference formula (:func:`apply_rope`);
:func:`posenc.kernels.apply_rotary_emb` is the same function through the fast dispatch.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ._checks import check_bool, check_fits, check_int, check_meta_mix, check_not_meta, has_values
from .rope import apply_rope, full_width_tables, resolve_layout

__all__ = [
    "check_cu_seqlens",
    "positions_from_cu_seqlens",
    "document_ids_from_cu_seqlens",
    "positions_from_document_ids",
    "segments_from_document_ids",
    "rotary_emb_tables",
    "apply_rotary_emb",
]


def check_cu_seqlens(cu_seqlens: object, total: int | None = None) -> Tensor:
    """``cu_seqlens`` as int64 after checking it: a 1-D integer tensor of at least two entries
    that starts at 0, never decreases (an empty document repeats a value) and ends at ``total``
    (the token count) when given. Each failure is a ValueError or TypeError naming the value."""
    if not isinstance(cu_seqlens, Tensor):
        raise TypeError(
            f"cu_seqlens must be an integer tensor [n + 1] of cumulative document lengths (0, l0, l0 + l1, ...), "
            f"got {type(cu_seqlens).__name__}"
        )
    if cu_seqlens.is_floating_point() or cu_seqlens.is_complex() or cu_seqlens.dtype == torch.bool:
        raise TypeError(f"cu_seqlens must be an integer tensor (int32 or int64), got dtype {cu_seqlens.dtype}")
    if total is not None:
        total = check_int("total", total)
    if cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
        raise ValueError(
            f"cu_seqlens must be 1-D with n + 1 >= 2 entries (0, then the end of each document), got shape "
            f"{tuple(cu_seqlens.shape)}"
        )
    cu = cu_seqlens.long()
    if not has_values(cu):
        return cu  # meta or a torch.func wrapper: nothing to read
    first, last = int(cu[0]), int(cu[-1])
    if first != 0:
        raise ValueError(f"cu_seqlens must start at 0 (the first document's first token), got {first}")
    steps = cu[1:] - cu[:-1]  # [n]: the document lengths
    if bool((steps < 0).any()):
        i = int(torch.nonzero(steps < 0)[0, 0])
        raise ValueError(
            f"cu_seqlens must be increasing (non-decreasing: an empty document repeats a value), but entry "
            f"{i + 1} ({int(cu[i + 1])}) is below entry {i} ({int(cu[i])})"
        )
    if total is not None and last != total:
        raise ValueError(
            f"cu_seqlens must end at the token count {total} (the total given; its last entry is the end of the last document), "
            f"got {last}"
        )
    return cu


def _token_count(cu: Tensor, total: object) -> int:
    """The token count of checked ``cu`` (``total`` when given), refused before ``[total]`` int64
    values are built past the memory available."""
    if total is None:
        if not has_values(cu):
            raise ValueError(
                "cu_seqlens on the meta device (or under a torch.func transform) holds no token count: pass total="
            )
        total = int(cu[-1])
    total = check_int("total", total)
    check_fits(
        f"{total} token positions from cu_seqlens",
        (total,),
        torch.int64,
        cu.device,
        hint="cu_seqlens ends at the token count of the packed batch: check its last entry",
    )
    return total


def positions_from_cu_seqlens(cu_seqlens: Tensor, total: int | None = None) -> Tensor:
    """Positions ``[total]`` (int64) restarting at 0 in each document: token ``t`` of document
    ``i`` is at ``t - cu_seqlens[i]`` (what flash-attention's varlen rotary kernel reads its table
    row from, with ``seqlen_offsets = 0``). ``total`` defaults to ``cu_seqlens[-1]``."""
    cu = check_cu_seqlens(cu_seqlens, total)
    total = _token_count(cu, total)
    lengths = cu[1:] - cu[:-1]  # [n]
    starts = torch.repeat_interleave(cu[:-1], lengths, output_size=total)  # [total]: each token's document start
    return torch.arange(total, device=cu.device) - starts


def document_ids_from_cu_seqlens(cu_seqlens: Tensor, total: int | None = None) -> Tensor:
    """The document index ``[total]`` (int64, 0 .. n - 1) of every token; empty documents get no token."""
    cu = check_cu_seqlens(cu_seqlens, total)
    total = _token_count(cu, total)
    lengths = cu[1:] - cu[:-1]  # [n]
    return torch.repeat_interleave(torch.arange(lengths.numel(), device=cu.device), lengths, output_size=total)


def _check_document_ids(document_ids: object) -> Tensor:
    if not isinstance(document_ids, Tensor):
        raise TypeError(f"document_ids must be an integer tensor [s] or [b, s], got {type(document_ids).__name__}")
    if document_ids.is_floating_point() or document_ids.is_complex() or document_ids.dtype == torch.bool:
        raise TypeError(f"document_ids must be an integer tensor [s] or [b, s], got dtype {document_ids.dtype}")
    if document_ids.dim() not in (1, 2):
        raise ValueError(
            f"document_ids must be [s] or [b, s] (one id per token), got shape {tuple(document_ids.shape)}"
        )
    return document_ids


def segments_from_document_ids(document_ids: Tensor) -> Tensor:
    """Non-decreasing document indices ``[..., s]`` (int64, from 0 in each row): a token whose id
    differs from its predecessor's starts the next one. Equal indices mean the same document."""
    ids = _check_document_ids(document_ids)
    change = ids[..., 1:] != ids[..., :-1]  # [..., s - 1]
    zero = torch.zeros_like(ids[..., :1], dtype=torch.long)  # [..., 1]
    return torch.cat((zero, change.long().cumsum(-1)), dim=-1)  # [..., s]


def positions_from_document_ids(document_ids: Tensor) -> Tensor:
    """Positions ``[..., s]`` (int64) restarting at 0 where each document (run of equal ids) starts."""
    ids = _check_document_ids(document_ids)
    s = ids.shape[-1]
    index = torch.arange(s, device=ids.device).expand(ids.shape)  # [..., s]
    starts = torch.ones_like(ids, dtype=torch.bool)  # [..., s]: True where a document starts
    starts[..., 1:] = ids[..., 1:] != ids[..., :-1]
    first = torch.where(starts, index, torch.zeros_like(index)).cummax(-1).values  # [..., s]: its document's start
    return index - first


def _table_rows(
    x: Tensor, seqlen_ro: int, seqlen_offsets: int | Tensor, cu_seqlens: Tensor | None, max_seqlen: int | None
) -> Tensor:
    """The table row of every token: ``[s]`` or ``[b, s]`` for ``x [b, s, h, hd]``, ``[total]`` for
    packed ``x [total, h, hd]``; checked against the table's ``seqlen_ro`` rows."""
    if cu_seqlens is None:
        if x.dim() != 4:
            raise ValueError(
                f"x must be [b, s, h, hd] (or packed [total, h, hd] with cu_seqlens), got shape {tuple(x.shape)}"
            )
        b, s = x.shape[0], x.shape[1]
        rows = torch.arange(s, device=x.device)  # [s]
        n = b
    else:
        if x.dim() != 3:
            raise ValueError(f"with cu_seqlens, x must be packed [total, h, hd], got shape {tuple(x.shape)}")
        check_not_meta("cu_seqlens", cu_seqlens, x.device)
        cu = check_cu_seqlens(cu_seqlens, x.shape[0])
        lengths = cu[1:] - cu[:-1]  # [n]
        if max_seqlen is not None:
            max_seqlen = check_int("max_seqlen", max_seqlen)
        if max_seqlen is not None and lengths.numel() and int(lengths.max()) > max_seqlen:
            raise ValueError(
                f"max_seqlen={max_seqlen} is shorter than the longest document ({int(lengths.max())} tokens in "
                "cu_seqlens); flash-attention would leave its tail unrotated: pass the longest length"
            )
        rows = positions_from_cu_seqlens(cu, x.shape[0]).to(x.device)  # [total]
        n = lengths.numel()
    if isinstance(seqlen_offsets, Tensor):
        check_not_meta("seqlen_offsets", seqlen_offsets, x.device)
        if seqlen_offsets.shape != (n,) or seqlen_offsets.is_floating_point() or seqlen_offsets.dtype == torch.bool:
            raise ValueError(
                f"seqlen_offsets must be an int or an integer tensor [{n}] (one per sequence), got "
                f"{seqlen_offsets.dtype} of shape {tuple(seqlen_offsets.shape)}"
            )
        offsets = seqlen_offsets.to(device=x.device, dtype=torch.long)
        if cu_seqlens is None:
            rows = rows + offsets[:, None]  # [b, s]
        else:
            rows = rows + torch.repeat_interleave(offsets, lengths.to(x.device), output_size=x.shape[0])  # [total]
    elif isinstance(seqlen_offsets, bool) or not isinstance(seqlen_offsets, int) or seqlen_offsets < 0:
        raise ValueError(
            f"seqlen_offsets must be a non-negative int or an integer tensor [{n}], got {seqlen_offsets!r}"
        )
    else:
        rows = rows + seqlen_offsets
    if rows.numel() and has_values(rows):
        low, high = int(rows.min()), int(rows.max())
        if low < 0 or high >= seqlen_ro:
            raise ValueError(
                f"the tables hold rows 0..{seqlen_ro - 1} but these tokens need rows {low}..{high} (position "
                "within the sequence + seqlen_offsets); build the tables for more positions"
            )
    return rows


def rotary_emb_tables(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    interleaved: bool = False,
    seqlen_offsets: int | Tensor = 0,
    cu_seqlens: Tensor | None = None,
    max_seqlen: int | None = None,
) -> tuple[Tensor, Tensor, str]:
    """Full-width tables for every token of :func:`apply_rotary_emb`'s ``x`` (``[s, r]``,
    ``[b, s, r]`` or ``[total, r]``: gathered rows of the half-width ``(seqlen_ro, r/2)`` ones) and
    the pair layout; they rotate ``x`` with ``seq_dim=-3``."""
    layout = resolve_layout(interleaved=interleaved)
    if not isinstance(x, Tensor) or not x.is_floating_point():
        what = f"dtype {x.dtype}" if isinstance(x, Tensor) else type(x).__name__
        raise TypeError(f"x must be a floating-point tensor, got {what}")
    if not isinstance(cos, Tensor) or not isinstance(sin, Tensor) or cos.dim() != 2 or cos.shape != sin.shape:
        shapes = [tuple(t.shape) if isinstance(t, Tensor) else type(t).__name__ for t in (cos, sin)]
        raise ValueError(f"cos and sin must be half-width tables (seqlen_ro, r/2) of one shape, got {shapes}")
    check_not_meta("cos", cos, x.device)
    check_not_meta("sin", sin, x.device)
    check_meta_mix(x=x, cos=cos, sin=sin, cu_seqlens=cu_seqlens, seqlen_offsets=seqlen_offsets)
    if 2 * cos.shape[-1] > x.shape[-1]:
        raise ValueError(
            f"half-width tables of width {cos.shape[-1]} rotate {2 * cos.shape[-1]} features, but x has "
            f"{x.shape[-1]} (x shape {tuple(x.shape)}); flash-attention needs rotary_dim <= headdim"
        )
    rows = _table_rows(x, cos.shape[0], seqlen_offsets, cu_seqlens, max_seqlen)
    cos_rows, sin_rows = cos[rows.to(cos.device)], sin[rows.to(cos.device)]  # [*rows, r/2]
    # flash-attention's kernel computes in float32 for half-precision x (x, cos and sin loaded as
    # float32, one rounding at the end): tables of at least float32 make the rotation promote likewise
    wide = torch.promote_types(x.dtype, torch.float32) if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    cos_rows, sin_rows = cos_rows.to(x.device, wide), sin_rows.to(x.device, wide)
    cos_full, sin_full = full_width_tables(cos_rows, sin_rows, layout)  # [*rows, r]
    return cos_full, sin_full, layout


def apply_rotary_emb(
    x: Tensor,
    cos: Tensor,
    sin: Tensor,
    interleaved: bool = False,
    inplace: bool = False,
    seqlen_offsets: int | Tensor = 0,
    cu_seqlens: Tensor | None = None,
    max_seqlen: int | None = None,
) -> Tensor:
    """flash-attention's ``apply_rotary_emb`` (Dao-AILab/flash-attention,
    ``flash_attn/layers/rotary.py``), by the reference formula.

    ``x [b, s, h, hd]``, or packed ``[total, h, hd]`` with ``cu_seqlens [n + 1]`` (positions restart
    in each document); ``cos``/``sin`` half-width ``(seqlen_ro, r/2)``: the first ``r`` features
    rotate (``interleaved``: pairs ``(2i, 2i+1)``, GPT-J; else ``(i, i + r/2)``, GPT-NeoX); token
    ``t`` of sequence ``i`` reads row ``t + seqlen_offsets[i]`` (an int: the same for all).
    ``inplace`` writes the result into ``x``. ``max_seqlen`` (flash-attention's grid size) is
    checked against the longest document when given.

    Where flash-attention asserts or reads past a table, this raises: rows past ``seqlen_ro``
    (flash-attention's kernel leaves such tokens unrotated for tensor offsets) and documents longer
    than ``max_seqlen``. Tables of another dtype than ``x`` are accepted (flash-attention requires
    one dtype): the rotation runs in the promoted dtype and is cast back.
    """
    check_bool("inplace", inplace)
    cos_full, sin_full, layout = rotary_emb_tables(x, cos, sin, interleaved, seqlen_offsets, cu_seqlens, max_seqlen)
    out = apply_rope(x, cos_full, sin_full, layout=layout, seq_dim=-3)
    return x.copy_(out) if inplace else out
