"""The key/value cache of incremental decoding.

Shape legend: ``b`` batch, ``h`` key/value heads, ``sk`` cached positions, ``s`` new tokens,
``hd`` head width, ``n`` coordinates per position (N-D schemes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from .kernels.ranges import known_range, mark_range

__all__ = ["KVCache"]


@dataclass
class KVCache:
    """Keys (already rotated), values and key positions seen so far, grown by :meth:`append`."""

    k: Tensor | None = None  # [b, h, sk, hd]
    v: Tensor | None = None  # [b, h, sk, hd]
    positions: Tensor | None = None  # [sk] or [b, sk]; coordinates [sk, n] or [b, sk, n] for N-D schemes
    _tokens: int = field(default=0, repr=False)

    @property
    def length(self) -> int:
        return self._tokens

    def append(self, k: Tensor, v: Tensor, positions: Tensor, *, seq_dim: int = -1) -> tuple[Tensor, Tensor, Tensor]:
        """Add keys, values and their positions; ``seq_dim=-2`` for coordinates ``[..., s, n]``.

        Positions ``[s]``, ``[1, s]`` and ``[b, s]`` may follow each other: once one is batched, the
        cache holds ``[b, sk]``."""
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
                or k.dtype != self.k.dtype
                or k.device != self.k.device
            ):
                raise ValueError(
                    f"this KVCache holds keys [b, h, sk, hd] = {list(self.k.shape)} ({self.k.dtype}, "
                    f"{self.k.device}); new keys {list(k.shape)} ({k.dtype}, {k.device}) do not continue "
                    "them: use a new KVCache for another batch, model, dtype or device (or move this one's "
                    "k and v with the model)"
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
        self._tokens += k.shape[-2]
        return self.k, self.v, self.positions
