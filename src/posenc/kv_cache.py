"""The key/value cache of incremental decoding.

Shape legend: ``b`` batch, ``h`` key/value heads, ``sk`` cached positions, ``s`` new tokens,
``hd`` head width, ``n`` coordinates per position (N-D schemes).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from .kernels.ranges import known_range, mark_range

__all__ = ["KVCache"]


@dataclass
class KVCache:
    """Keys (already rotated), values and key positions seen so far, grown by :meth:`append`.

    One cache serves one attention layer: a model keeps one per layer
    (``caches = [posenc.KVCache() for _ in layers]``). :class:`posenc.Attention` passes itself as
    ``owner`` and a cache filled by one layer refuses another."""

    k: Tensor | None = None  # [b, h, sk, hd]
    v: Tensor | None = None  # [b, h, sk, hd]
    positions: Tensor | None = None  # [sk] or [b, sk]; coordinates [sk, n] or [b, sk, n] for N-D schemes
    #: [b, h, sk]: per-token terms of schemes computed from the layer input (forgetting attention's
    #: log forget gates, ``PositionalEncoding.input_terms``); None for the others
    terms: Tensor | None = None
    _tokens: int = field(default=0, repr=False)
    _owner: weakref.ref | None = field(default=None, repr=False, compare=False)  # the layer that filled it

    @property
    def length(self) -> int:
        return self._tokens

    def __getstate__(self) -> dict:
        """Pickled without its owner (a weak reference cannot be pickled): the copy is any layer's."""
        return {**self.__dict__, "_owner": None}

    def append(
        self,
        k: Tensor,
        v: Tensor,
        positions: Tensor,
        *,
        seq_dim: int = -1,
        owner: nn.Module | None = None,
        terms: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Add keys, values and their positions; ``seq_dim=-2`` for coordinates ``[..., s, n]``.

        Positions ``[s]``, ``[1, s]`` and ``[b, s]`` may follow each other: once one is batched, the
        cache holds ``[b, sk]``. ``owner``: the layer appending (:class:`posenc.Attention` passes
        itself); the first one given is kept, and another one is refused. ``terms [b, h, s]``: the
        new tokens' input terms (see :attr:`terms`), given at every append or at none."""
        _check_append(k, v, positions, seq_dim)
        self._check_terms(k, terms)
        self._check_owner(owner)
        if self.k is None:  # copies of their own: views would keep the whole qkv projection alive (and
            # give compiled decoding a second layout to specialise on at the next step), and the
            # caller's tensors may be edited or reused (a positions buffer stepped with +=)
            self.k, self.v = (t.clone(memory_format=torch.contiguous_format) for t in (k, v))
            self.positions, start = positions.clone(), known_range(positions)
            if start is not None:  # a default range stays known (decoding continues it without a read)
                mark_range(self.positions, start)
        else:
            if (
                k.shape[:2] != self.k.shape[:2]
                or k.shape[-1] != self.k.shape[-1]
                or v.shape[-1] != self.v.shape[-1]
                or k.dtype != self.k.dtype
                or k.device != self.k.device
                or positions.device != self.positions.device
                or self.positions.dim() not in (-seq_dim, 1 - seq_dim)
                or (seq_dim == -2 and self.positions.shape[-1] != positions.shape[-1])
            ):
                raise ValueError(
                    f"this KVCache holds keys [b, h, sk, hd] = {list(self.k.shape)} ({self.k.dtype}, "
                    f"{self.k.device}) at positions {list(self.positions.shape)} ({self.positions.device}); "
                    f"new keys {list(k.shape)} ({k.dtype}, {k.device}) at positions {list(positions.shape)} "
                    f"({positions.device}) do not continue them: use a new KVCache for another batch, model, "
                    "dtype or device (or move this one's k and v with the model)"
                )
            self.k = torch.cat((self.k, k), dim=-2)  # [b, h, sk + s, hd]
            self.v = torch.cat((self.v, v), dim=-2)  # [b, h, sk + s, hd]
            old, new = self.positions, positions
            core = -seq_dim  # the dims of one row's positions: [s] or coordinates [s, n]
            if old.dim() > core or new.dim() > core:  # one of them batched ([1, s] or [b, s]): broadcast both
                b = k.shape[0]
                old, new = old.expand(b, *old.shape[-core:]), new.expand(b, *new.shape[-core:])
            self.positions = torch.cat((old, new), dim=seq_dim)  # [..., sk + s(, n)]
            start = known_range(old) if old.dim() == 1 else None
            if start is not None and known_range(new) == start + old.shape[0]:  # two ranges end to end: one range
                mark_range(self.positions, start)
        if terms is not None:  # [b, h, sk + s]
            self.terms = terms.clone() if self.terms is None else torch.cat((self.terms, terms), dim=-1)
        self._tokens += k.shape[-2]
        return self.k, self.v, self.positions

    def _check_terms(self, k: Tensor, terms: Tensor | None) -> None:
        if self.k is not None and (terms is None) != (self.terms is None):
            raise ValueError(
                f"this KVCache holds {'no ' if self.terms is None else ''}input terms for its {self._tokens} "
                f"tokens; new keys came {'with' if terms is not None else 'without'} them: a cache serves one "
                "scheme, give terms at every append or at none"
            )
        if terms is not None and (
            not isinstance(terms, Tensor)
            or terms.dim() != 3
            or terms.shape[0] != k.shape[0]
            or terms.shape[-1] != k.shape[-2]
        ):
            shape = list(terms.shape) if isinstance(terms, Tensor) else type(terms).__name__
            raise ValueError(
                f"KVCache.append: terms must be [b, h, s] with b = {k.shape[0]}, s = {k.shape[-2]} (k {list(k.shape)}), got {shape}"
            )

    def _check_owner(self, owner: nn.Module | None) -> None:
        if owner is None:
            return
        if self._owner is None:
            self._owner = weakref.ref(owner)
        elif self._owner() is not owner:
            raise ValueError(
                f"this KVCache holds the keys and values of another attention layer ({self._tokens} tokens "
                "cached there); use one KVCache per layer, e.g. caches = [posenc.KVCache() for _ in layers]"
            )


def _check_append(k: object, v: object, positions: object, seq_dim: int) -> None:
    """Raise unless ``k`` and ``v`` are ``[b, h, s, hd]`` tensors of one batch, head count and
    length, and ``positions`` give one position (or coordinate row) per key: ``[s]``, ``[1, s]`` or
    ``[b, s]`` (``seq_dim=-2``: ``[s, n]``, ``[1, s, n]`` or ``[b, s, n]``)."""
    if seq_dim not in (-1, -2):
        raise ValueError(f"seq_dim must be -1 (positions [.., s]) or -2 (coordinates [.., s, n]), got {seq_dim!r}")
    for name, t in (("k", k), ("v", v), ("positions", positions)):
        if not isinstance(t, Tensor):
            raise TypeError(f"KVCache.append: {name} must be a tensor, got {type(t).__name__}")
    if k.dim() != 4 or v.dim() != 4 or k.shape[:3] != v.shape[:3]:
        raise ValueError(
            f"KVCache.append: k and v must be [b, h, s, hd] with the same b, h and s, got k {list(k.shape)} "
            f"and v {list(v.shape)}"
        )
    core = -seq_dim  # dims of one row's positions: [s] or [s, n]
    b, s = k.shape[0], k.shape[-2]
    if (
        positions.dim() not in (core, core + 1)
        or positions.shape[seq_dim] != s
        or (positions.dim() == core + 1 and positions.shape[0] not in (1, b))
    ):
        want = "[s], [1, s] or [b, s]" if core == 1 else "[s, n], [1, s, n] or [b, s, n]"
        given = positions.shape[seq_dim] if positions.dim() >= core else positions.numel()
        raise ValueError(
            f"KVCache.append: positions of shape {list(positions.shape)} give {given} positions for {s} new "
            f"keys (k {list(k.shape)}): expected {want} with s = {s}, b = {b}"
        )
