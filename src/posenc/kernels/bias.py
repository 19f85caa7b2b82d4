"""Relative-position biases ``[h, sq, sk]`` for contiguous positions: the Toeplitz build, cached per module.

Shape legend: ``h`` heads, ``sq``/``sk`` query/key lengths, ``w = sq + sk - 1`` distinct relative
positions.

A scheme whose bias depends only on ``k - q`` says so with its hook
:meth:`~posenc.schemes.base.PositionalEncoding.relative_bias_values` (``rel [w] -> [h, w]``).
:func:`cached_bias` evaluates it on the ``w`` distances of two contiguous ranges of positions,
expands them with :func:`~posenc.functional.toeplitz.toeplitz` (each element written once) and
keeps the result per module, keyed by the lengths, the offsets, the scheme's config and the
tensors the bias is computed from (the scheme's parameters and buffers: their values on the CPU,
where comparing them costs ~1 us; their address and version counter on accelerators, where
reading them would synchronise). A bias whose sources need gradients (training) is not cached:
the scheme's own path carries the gradient.

A scheme whose bias is a table looked up at an index of the distance (T5's buckets) also has
:meth:`~posenc.schemes.base.PositionalEncoding.relative_index` (``rel [w] -> LongTensor [w]``):
:func:`cached_index` keeps that index expanded to ``[sq, sk]``, so that training gathers the table
once per call instead of bucketing every pair anew.

Both answer None where they do not apply, and the scheme computes its reference formula: batched
or scattered positions, ``torch.compile`` and ``torch.func`` transforms (no cache is filled or
keyed on tensors made there).

Uncached builds, for inference into a preallocated tensor (issue 26: a parameter-only bias
``[32, 2048, 2048]`` within 2x of filling a preallocated tensor): :func:`build_bias` is the
Toeplitz build of :func:`cached_bias` without the cache, into ``out`` (what
``scheme.bias(q, k, out=out)`` uses); it gives the same numbers as the schemes' :meth:`bias`, bit
for bit. A fresh ``[h, L, L]`` tensor costs more in page faults than the build itself (~10x a fill
of a warm one on this project's CPU host), which is why ``out`` matters. Schemes whose bias is not
Toeplitz (FIRE's normaliser follows the query) have their own build in their own module, from
:func:`toeplitz_into` and :func:`range_starts`.
"""

from __future__ import annotations

import weakref

import torch
from torch import Tensor, nn

from ..functional._checks import check_fits, stale_inference, tracing, version_of
from ..functional.toeplitz import relative_range, toeplitz, toeplitz_gather
from .ranges import range_start

__all__ = [
    "cached_bias",
    "cached_index",
    "build_bias",
    "toeplitz_into",
    "range_starts",
    "params_key",
    "same_params",
    "CACHE_MAX_BYTES",
]

#: A bias larger than this is built on each call but not kept (32 heads: 512 MiB at L = 2048, 8.6 GB
#: at L = 8192). Rebuilding means a fresh allocation, whose page faults cost more than the build
#: itself; lower it to trade speed for memory.
CACHE_MAX_BYTES = 1 << 30

_biases: weakref.WeakKeyDictionary[nn.Module, tuple[tuple, list, Tensor, int | None]] = weakref.WeakKeyDictionary()
_indices: weakref.WeakKeyDictionary[nn.Module, tuple[tuple, Tensor]] = weakref.WeakKeyDictionary()


def params_key(params: Tensor) -> Tensor | tuple:
    """What :func:`same_params` compares: a copy of the values on the CPU (an edit through
    ``param.data``, as HF-style initialisation makes, leaves the version counter alone), else
    address and version counter (reading values would synchronise the device at every call)."""
    if params.device.type == "cpu":
        return params.detach().clone()
    return (params.data_ptr(), params._version)


def same_params(seen: Tensor | tuple, params: Tensor) -> bool:
    """Whether ``params`` still holds what :func:`params_key` saw."""
    if isinstance(seen, Tensor):
        return params.device.type == "cpu" and torch.equal(seen, params.detach())
    return seen == (params.data_ptr(), params._version)


def _sources(module: nn.Module) -> list[Tensor]:
    """What a scheme's bias is computed from: its parameters and buffers, row caches aside."""
    caches = module.__dict__.get("_cache_names", ())
    return [*module.parameters(), *(b for name, b in module.named_buffers() if name not in caches)]


def range_starts(q_positions: object, k_positions: object) -> tuple[int, int] | None:
    """``(q0, k0)`` when both are 1-D integer ranges (tensors) outside any trace, else None."""
    if not isinstance(q_positions, Tensor) or not isinstance(k_positions, Tensor) or tracing(q_positions, k_positions):
        return None
    q0, k0 = range_start(q_positions), range_start(k_positions)
    return None if q0 is None or k0 is None else (q0, k0)


def cached_bias(module: nn.Module, q_positions: Tensor, k_positions: Tensor) -> Tensor | None:
    """``module``'s bias ``[h, sq, sk]`` from ``module.relative_bias_values`` by the Toeplitz build,
    through a per-module cache; None where that does not apply (see the module docstring) or the
    scheme has no such values.

    The returned tensor may be shared with later calls: one written to in place is rebuilt at the
    next call (its version counter moved), except under ``torch.inference_mode``, where tensors have
    no version counter: treat it as read-only there.
    """
    starts = range_starts(q_positions, k_positions)
    if starts is None:
        return None
    sources = _sources(module)
    if torch.is_grad_enabled() and any(t.requires_grad for t in sources):
        return None  # training: the scheme's own path carries the gradient to its parameters
    (q0, k0), sq, sk = starts, q_positions.numel(), k_positions.numel()
    key = (sq, sk, q0, k0, module.config, [(t.device, t.dtype, tuple(t.shape)) for t in sources])
    hit = _biases.get(module)
    # a bias made under inference mode cannot enter autograd outside it
    if (
        hit is not None
        and hit[0] == key
        and all(map(same_params, hit[1], sources))
        and not stale_inference(hit[2])
        and version_of(hit[2]) == hit[3]
    ):
        return hit[2]
    device = sources[0].device if sources else q_positions.device
    with torch.no_grad():
        values = module.relative_bias_values(relative_range(sq, sk, q_offset=q0, k_offset=k0, device=device))  # [h, w]
    if values is None:
        return None
    check_fits("a relative-position bias", (values.shape[0], sq, sk), values.dtype, values.device)
    bias = values.new_empty(values.shape[0], sq, sk)  # [h, sq, sk]
    if bias.numel():
        toeplitz_into(values, sq, sk, bias)
    if bias.numel() * bias.element_size() <= CACHE_MAX_BYTES:
        _biases[module] = (key, [params_key(t) for t in sources], bias, version_of(bias))
    return bias


def cached_index(module: nn.Module, q_positions: Tensor, k_positions: Tensor, device: torch.device) -> Tensor | None:
    """``module.relative_index`` of every (query, key) pair ``[sq, sk]`` on ``device``, from the ``w``
    distinct distances expanded by the Toeplitz build (the same numbers as indexing each pair), kept
    per module by lengths, offsets, config and device; None where that does not apply."""
    starts = range_starts(q_positions, k_positions)
    if starts is None:
        return None
    (q0, k0), sq, sk = starts, q_positions.numel(), k_positions.numel()
    key = (sq, sk, q0, k0, module.config, torch.device(device))
    hit = _indices.get(module)
    # an index made under inference mode cannot be saved for a backward outside it
    if hit is not None and hit[0] == key and not stale_inference(hit[1]):
        return hit[1]
    values = module.relative_index(relative_range(sq, sk, q_offset=q0, k_offset=k0, device=device))  # [w]
    if values is None:
        return None
    index = toeplitz(values[None], sq, sk)[0]  # [sq, sk]
    if index.numel() * index.element_size() <= CACHE_MAX_BYTES:
        _indices[module] = (key, index)
    return index


def toeplitz_into(values: Tensor, sq: int, sk: int, out: Tensor) -> Tensor:
    """``out[h, i, j] = values[h, j - i + sq - 1]`` (:func:`~posenc.functional.toeplitz.toeplitz`'s
    layout) without its checks: ``values [h, w]``, ``out [h, sq, sk]`` contiguous, of the same
    dtype and device. Every head in one ``index_select`` of whole rows
    (:func:`~posenc.functional.toeplitz.toeplitz_gather`)."""
    return toeplitz_gather(values, sq, sk, out)


def build_bias(
    module: nn.Module, q_positions: Tensor, k_positions: Tensor, *, out: Tensor | None = None
) -> Tensor | None:
    """``module``'s bias ``[h, sq, sk]`` by the Toeplitz build of :func:`cached_bias`, not cached,
    written into ``out`` (``[h, sq, sk]``, the dtype and device of ``module.relative_bias_values``,
    else a ValueError naming both) or a new tensor; None where :func:`cached_bias` would not apply
    or the scheme has no such values.

    ``relative_bias_values`` runs once, on the ``w = sq + sk - 1`` distances, and
    :func:`~posenc.functional.toeplitz.toeplitz` writes each element of ``out`` once (whole rows
    copied from a view of the values). No gradient flows: this is the inference build."""
    starts = range_starts(q_positions, k_positions)
    if starts is None:
        return None
    (q0, k0), sq, sk = starts, q_positions.numel(), k_positions.numel()
    sources = _sources(module)
    device = sources[0].device if sources else q_positions.device
    with torch.no_grad():
        values = module.relative_bias_values(relative_range(sq, sk, q_offset=q0, k_offset=k0, device=device))  # [h, w]
        if values is None:
            return None
        return toeplitz(values, sq, sk, out=out)
