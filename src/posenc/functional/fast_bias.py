"""Relative-position biases ``[h, sq, sk]`` built at the cost of writing them once, and cached.

Shape legend: ``h`` heads, ``sq``/``sk`` query/key lengths, ``w = sq + sk - 1`` distinct relative
positions.

A bias that depends only on ``k - q`` (T5, ALiBi, and any relative scheme on a contiguous range of
positions) is a Toeplitz matrix per head: ``bias[h, i, j] = values[h, (j - i) + sq - 1]``, fixed by
``w`` numbers per head. :func:`toeplitz` expands them with one ``index_select`` per head over an
overlapping (Hankel) view of ``values``: row ``i`` of the result is the contiguous slice starting at
``sq - 1 - i``, so each output element is written once and ``values`` stays in cache. The T5
bucket function then runs on ``w`` distances instead of ``sq * sk`` (Hugging Face's
``T5Attention.compute_bias`` buckets every pair and returns a permuted view; see
docs/performance.md for the timings).

:func:`cached_bias` is what the schemes call: for 1-D positions that are contiguous ranges it
returns the bias from a per-module cache keyed by lengths, offsets, dtype, device and the
parameters (their values on the CPU, where comparing them costs ~1 us; their address and version
counter on accelerators, where it would synchronise); anything else (batched or scattered
positions, gradients wanted for T5's table, ``torch.compile``) returns None and the scheme
computes the reference formula.
"""

from __future__ import annotations

import operator
import weakref

import torch
from torch import Tensor, nn

from ._checks import stale_inference, tracing, version_of
from .relative import t5_relative_bucket

__all__ = ["toeplitz", "relative_range", "alibi_bias_range", "t5_bias_range", "cached_bias", "cached_t5_buckets",
           "mark_range", "known_range", "CACHE_MAX_BYTES"]

#: A bias larger than this is built on each call but not kept (32 heads: 512 MiB at L = 2048, 8.6 GB
#: at L = 8192). Rebuilding means a fresh allocation, whose page faults cost ~3x the build itself;
#: lower it to trade speed for memory.
CACHE_MAX_BYTES = 1 << 30

_caches: weakref.WeakKeyDictionary[nn.Module, tuple[tuple, Tensor, Tensor]] = weakref.WeakKeyDictionary()
_bucket_caches: weakref.WeakKeyDictionary[nn.Module, tuple[tuple, Tensor]] = weakref.WeakKeyDictionary()


def _lengths(sq: object, sk: object) -> tuple[int, int]:
    """``sq, sk`` as non-negative ints (numpy and 0-d tensor integers too), else a ValueError naming them."""
    try:
        if isinstance(sq, bool) or isinstance(sk, bool):
            raise TypeError
        lengths = operator.index(sq), operator.index(sk)
    except TypeError:
        lengths = (-1, -1)
    if min(lengths) < 0:
        raise ValueError(f"sq and sk must be non-negative integers, got sq={sq!r}, sk={sk!r}")
    return lengths


def _width(sq: int, sk: int) -> int:
    """``w``: how many distinct ``k - q`` there are (none when either side is empty)."""
    return sq + sk - 1 if sq and sk else 0


def relative_range(sq: int, sk: int, *, q_offset: int = 0, k_offset: int = 0, device: torch.device | str | None = None) -> Tensor:
    """Every ``k - q`` for queries ``q_offset + [0, sq)`` and keys ``k_offset + [0, sk)``, ascending: ``[w]``."""
    sq, sk = _lengths(sq, sk)
    low = k_offset - (q_offset + sq - 1)
    return torch.arange(low, low + _width(sq, sk), device=device)


def toeplitz(values: Tensor, sq: int, sk: int, *, out: Tensor | None = None) -> Tensor:
    """``out[h, i, j] = values[h, j - i + sq - 1]``: ``values [h, sq + sk - 1]`` -> ``[h, sq, sk]``.

    Per head, one ``index_select`` of whole rows from the overlapping Hankel view
    ``values[h, i' + j]`` with rows reversed (``i' = sq - 1 - i``); on accelerators one
    ``index_select`` over all heads. ``out`` may be preallocated.
    """
    sq, sk = _lengths(sq, sk)
    if values.dim() != 2 or values.shape[-1] != _width(sq, sk):
        raise ValueError(f"values must be [h, sq + sk - 1] = [h, {_width(sq, sk)}] (no columns when sq or sk is 0), "
                         f"got {tuple(values.shape)}")
    values = values.contiguous()
    h = values.shape[0]
    if out is None:
        out = values.new_empty(h, sq, sk)
    elif out.shape != (h, sq, sk) or out.dtype != values.dtype or out.device != values.device:
        raise ValueError(f"out must be [{h}, {sq}, {sk}] of dtype {values.dtype} on {values.device}, "
                         f"got {tuple(out.shape)} {out.dtype} {out.device}")
    if out.numel() == 0:
        return out
    rows = torch.arange(sq - 1, -1, -1, device=values.device)  # [sq] reversed
    if values.device.type != "cpu":
        # one kernel for all heads: a launch per head would cost more than the copy (GPU: 32 heads,
        # L = 2048, 0.71 ms against a 0.17 ms fill, all of it host time)
        hankel = values.as_strided((h, sq, sk), (values.shape[-1], 1, 1))  # [h, sq, sk]
        return torch.index_select(hankel, 1, rows, out=out)
    for head in range(h):  # per head, index_select copies whole rows (memcpy); over [h, sq, sk] it is ~10x slower
        hankel = values[head].as_strided((sq, sk), (1, 1))  # [sq, sk], hankel[i', j] = values[head, i' + j]
        torch.index_select(hankel, 0, rows, out=out[head])
    return out


def alibi_bias_range(
    slopes: Tensor, sq: int, sk: int, *, q_offset: int = 0, k_offset: int = 0, bidirectional: bool = False,
    out: Tensor | None = None,
) -> Tensor:
    """ALiBi's bias ``[h, sq, sk]`` for contiguous positions; equals :func:`~posenc.functional.alibi_bias`.

    ``-slope * (q - k)`` (causal) or ``-slope * |q - k|`` (Press et al. 2022, section 3), evaluated
    on the ``w`` distances and expanded by :func:`toeplitz`.
    """
    if not isinstance(slopes, Tensor) or slopes.dim() != 1:
        raise ValueError(f"slopes must be a 1-D tensor [h], got "
                         f"{tuple(slopes.shape) if isinstance(slopes, Tensor) else type(slopes).__name__}")
    rel = relative_range(sq, sk, q_offset=q_offset, k_offset=k_offset, device=slopes.device).to(slopes.dtype)  # [w]
    distance = rel.abs() if bidirectional else -rel
    values = -slopes[:, None] * distance  # [h, w]
    return toeplitz(values, sq, sk, out=out)


def t5_bias_range(
    weight: Tensor, sq: int, sk: int, *, q_offset: int = 0, k_offset: int = 0, bidirectional: bool = True,
    num_buckets: int = 32, max_distance: int = 128, out: Tensor | None = None,
) -> Tensor:
    """T5's bias ``[h, sq, sk]`` from its table ``weight [num_buckets, h]`` for contiguous positions.

    Raffel et al. 2020, section 2.1; the buckets are :func:`~posenc.functional.t5_relative_bucket`
    (HF ``T5Attention._relative_position_bucket``) of the ``w`` distinct distances.
    """
    if not isinstance(weight, Tensor) or weight.dim() != 2 or weight.shape[0] < num_buckets:
        raise ValueError(f"weight must be the table [num_buckets, h] with num_buckets={num_buckets} rows, got "
                         f"{tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__}")
    rel = relative_range(sq, sk, q_offset=q_offset, k_offset=k_offset, device=weight.device)  # [w]
    buckets = t5_relative_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    values = weight[buckets].t()  # [w, h] -> [h, w]
    return toeplitz(values, sq, sk, out=out)


def mark_range(positions: Tensor, start: int) -> Tensor:
    """Record on ``positions`` (just made by ``torch.arange(start, ...)``) that it is that range, so
    that :func:`_range_start` need not read it: on an accelerator that read synchronises the host
    with the device (two syncs per call, which stall a launch-bound training step). An in-place
    edit later bumps the version counter and the record no longer applies (an edit through
    ``.data`` or a NumPy view does not: make new positions instead). Returns ``positions``."""
    if not torch.compiler.is_compiling() and not positions.is_inference():
        positions._posenc_range = (start, positions._version)
    return positions


def known_range(positions: Tensor) -> int | None:
    """The start of the range :func:`mark_range` recorded on ``positions``, while unedited; None
    otherwise (nothing is read from the tensor's values)."""
    known = None if torch.compiler.is_compiling() else getattr(positions, "_posenc_range", None)
    if known is not None and known[1] == positions._version:
        return known[0]
    return None


def _range_start(positions: Tensor) -> int | None:
    """``p0`` if ``positions`` is the 1-D integer range ``p0, p0 + 1, ...``, else None."""
    if positions.dim() != 1 or positions.is_floating_point() or positions.dtype == torch.bool or positions.numel() == 0 \
            or positions.device.type == "meta":
        return None
    known = known_range(positions)
    if known is not None:
        return known
    start = int(positions[0])
    expected = torch.arange(start, start + positions.numel(), device=positions.device)
    return start if torch.equal(positions.long(), expected) else None


def _params_key(params: Tensor) -> Tensor | tuple:
    """What :func:`_same_params` compares: a copy of the values on the CPU, else address and version."""
    if params.device.type == "cpu":
        return params.detach().clone()
    return (params.data_ptr(), params._version)


def _same_params(seen: Tensor | tuple, params: Tensor) -> bool:
    if isinstance(seen, Tensor):
        return params.device.type == "cpu" and torch.equal(seen, params.detach())
    return seen == (params.data_ptr(), params._version)


def cached_bias(module: nn.Module, q_positions: Tensor, k_positions: Tensor) -> Tensor | None:
    """The bias of an ``alibi`` or ``t5`` scheme via the Toeplitz build and a per-module cache.

    Returns None when the fast path does not apply (the caller then computes the reference): batched
    or non-contiguous positions, a T5 table that needs gradients, or inside ``torch.compile``. The
    returned tensor may be shared with later calls: one written to in place is rebuilt at the next
    call (its version counter moved), except under ``torch.inference_mode``, where tensors have no
    version counter: treat it as read-only there.
    """
    name = getattr(module, "name", None)
    if name not in ("alibi", "t5") or tracing():
        return None
    if not isinstance(q_positions, Tensor) or not isinstance(k_positions, Tensor):
        return None
    q0, k0 = _range_start(q_positions), _range_start(k_positions)
    if q0 is None or k0 is None:
        return None
    sq, sk, config = q_positions.numel(), k_positions.numel(), module.config
    if name == "alibi":
        params = module.slopes
    else:
        params = module.relative_attention_bias.weight
        if torch.is_grad_enabled() and params.requires_grad:
            return None  # training: the reference path carries the gradient to the table
    key = (name, sq, sk, q0, k0, params.device, params.dtype, tuple(params.shape), getattr(config, "bidirectional", None),
           getattr(config, "num_buckets", None), getattr(config, "max_distance", None))
    hit = _caches.get(module)
    # On the CPU the parameters are compared by value (an edit through ``param.data``, as in HF-style
    # initialisation, leaves the version counter alone); on an accelerator by address and version
    # counter, since reading values would synchronise the device at every call. A bias made under
    # inference mode cannot enter autograd outside it.
    if hit is not None and hit[0] == key and _same_params(hit[1], params) \
            and not stale_inference(hit[2]) and version_of(hit[2]) == hit[3]:
        return hit[2]
    if name == "alibi":
        bias = alibi_bias_range(params.float(), sq, sk, q_offset=q0, k_offset=k0, bidirectional=config.bidirectional)
    else:
        with torch.no_grad():
            bias = t5_bias_range(params, sq, sk, q_offset=q0, k_offset=k0, bidirectional=config.bidirectional,
                                 num_buckets=config.num_buckets, max_distance=config.max_distance)
    if bias.numel() * bias.element_size() <= CACHE_MAX_BYTES:
        _caches[module] = (key, _params_key(params), bias, version_of(bias))
    return bias


def cached_t5_buckets(module: nn.Module, q_positions: Tensor, k_positions: Tensor, device: torch.device) -> Tensor | None:
    """T5's bucket of every (query, key) pair ``[sq, sk]`` on ``device`` for 1-D contiguous ranges of
    positions, from a per-module cache keyed by lengths, offsets, the bucket settings and the device; None
    for other positions or inside ``torch.compile``.

    For training, where the table needs gradients and the bias cannot be cached: the reference
    path then costs one gather of the table (and its backward) per call, where bucketing every
    pair anew took ~15 kernels and, on an accelerator, synchronising checks of the positions.
    The buckets come from the ``w`` distinct distances (:func:`t5_relative_bucket`) expanded by
    :func:`toeplitz`, the same numbers as bucketing each pair."""
    if tracing() or not isinstance(q_positions, Tensor) or not isinstance(k_positions, Tensor):
        return None
    q0, k0 = _range_start(q_positions), _range_start(k_positions)
    if q0 is None or k0 is None:
        return None
    c = module.config
    sq, sk = q_positions.numel(), k_positions.numel()
    key = (sq, sk, q0, k0, c.bidirectional, c.num_buckets, c.max_distance, device)
    hit = _bucket_caches.get(module)
    # buckets made under inference mode cannot be saved for a backward outside it
    if hit is not None and hit[0] == key and not stale_inference(hit[1]):
        return hit[1]
    rel = relative_range(sq, sk, q_offset=q0, k_offset=k0, device=device)  # [w]
    values = t5_relative_bucket(rel, bidirectional=c.bidirectional, num_buckets=c.num_buckets,
                                max_distance=c.max_distance)  # [w]
    buckets = toeplitz(values[None], sq, sk)[0]  # [sq, sk]
    if buckets.numel() * buckets.element_size() <= CACHE_MAX_BYTES:
        _bucket_caches[module] = (key, buckets)
    return buckets
