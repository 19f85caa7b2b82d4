"""Rotary position embedding as a scheme (Su et al. 2021, RoFormer, section 3.4).

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``r`` rotated width.

The module holds the frequencies (float64, from :func:`posenc.functional.rope_inv_freq`, any
Hugging Face scaling) and a cos/sin row cache; :meth:`Rope.rotate` rotates queries and keys at
their positions. Partial rotary (GPT-NeoX ``rotary_pct``) rotates the first ``rotary_dim`` features,
or those from ``rotary_start`` (DeepSeek-V4 rotates the trailing slice of each head);
:meth:`Rope.rotate_one` rotates one tensor, by the negative angles with ``inverse=True``
(DeepSeek-V4 de-rotates attention outputs: ``R(a)^T = R(-a)``, Su et al. 2021, eq. 13).
Packed documents rotate with positions restarting in each document
(:func:`posenc.functional.positions_from_cu_seqlens`), their tables gathered from the row cache.

Scalings whose frequencies depend on the sequence length (``dynamic``, ``longrope``) never change a
buffer: the ``inv_freq`` buffer holds the short-sequence frequencies, and for a longer sequence
:meth:`Rope.inv_freq_at` computes the long ones as a pure function of the length (for a tensor
length with ``torch.where``, so a compiled forward needs no host sync and gives the eager result).
The cos/sin cache holds only short-sequence rows; longer sequences build their tables directly.
The length of a call is ``1 + the largest position`` among its queries and keys (Hugging Face's
``dynamic_rope_update`` takes ``max(position_ids) + 1``). Unlike HF, which keeps the largest
frequencies it has seen until the length drops below the original one, posenc's result depends on
the current call alone.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_bool, check_choice, check_even_dim, check_positive_int, check_seq_dim, plain
from ..functional.rope_scaling import LENGTH_DEPENDENT, long_inv_freq, parse_scaling
from ..kernels import rope, rope_pair
from ..kernels.ranges import known_range
from ._cache import cached_range, cached_rows
from .base import PositionalEncoding, check_head_width, check_positions_fit, default_positions, register

__all__ = ["Rope", "RopeConfig"]


@dataclass(frozen=True)
class RopeConfig:
    dim: int  # head width
    base: float = 10000.0  # HF `rope_theta`
    layout: str = "half"  # "half" (HF/NeoX rotate_half) or "interleaved" (paper, Meta, GPT-J)
    scaling: Mapping[str, Any] | None = None  # HF `rope_scaling` dict as in config.json
    #: rotate only the first rotary_dim features (partial rotary). An odd value is transformers'
    #: GPT-NeoX reading of an odd ``int(head_dim * rotary_pct)``: frequencies over that width
    #: (``base^(-2i/rotary_dim)``, :func:`~posenc.functional.rope_inv_freq`) rotating one more feature.
    rotary_dim: int | None = None
    #: the first rotated feature: features [rotary_start, rotary_start + rotary width) rotate, the
    #: rest pass unchanged (DeepSeek-V4's trailing slice: rotary_start = dim - rotary_dim)
    rotary_start: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_even_dim("dim", self.dim))  # 8.0 -> 8
        check_choice("layout", self.layout, F.ROPE_LAYOUTS)
        if isinstance(self.scaling, Mapping):  # a copy of its own: the caller may edit or reuse the dict
            object.__setattr__(self, "scaling", copy.deepcopy(dict(self.scaling)))
        if self.rotary_dim is not None:
            object.__setattr__(self, "rotary_dim", check_positive_int("rotary_dim", self.rotary_dim))
            if self.rotary_width > self.dim:
                raise ValueError(
                    f"rotary_dim must be at most dim={self.dim} (rounded up to even when odd: "
                    f"features rotate in pairs), got {self.rotary_dim}"
                )
        start = self.rotary_start
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ValueError(f"rotary_start must be a non-negative int (the first rotated feature), got {start!r}")
        if start + self.rotary_width > self.dim:
            raise ValueError(
                f"rotary_start={start} with {self.rotary_width} rotated features needs {start + self.rotary_width} "
                f"features, but dim={self.dim}; the trailing slice starts at {self.dim - self.rotary_width}"
            )
        F.rope_inv_freq(self.frequency_dim, base=self.base, scaling=self.scaling)  # validates base and scaling
        kind = parse_scaling(self.scaling)[0]
        factor = self.scaling.get("partial_rotary_factor") if isinstance(self.scaling, Mapping) else None
        implied = None if factor is None or kind == "proportional" else int(self.dim * factor)
        if implied is not None and implied != self.frequency_dim:
            # transformers 5 keeps the rotated share inside rope_parameters: it must agree with rotary_dim
            raise ValueError(
                f"scaling holds partial_rotary_factor={factor!r}, which rotates int({self.dim} * {factor!r})"
                f" = {implied} features of dim={self.dim}, but rotary_dim is {self.frequency_dim}; "
                f"pass rotary_dim={implied} (posenc.rope_from_config reads both from a config.json)"
            )
        if self.rotary_dim is not None and kind == "proportional":
            raise ValueError(
                "rope scaling 'proportional' spans the whole head (its partial_rotary_factor zeroes "
                f"frequencies instead); leave rotary_dim out, got rotary_dim={self.rotary_dim}"
            )

    @property
    def frequency_dim(self) -> int:
        """The width the frequencies are computed over (HF's ``dim`` in ``base^(-2i/dim)``)."""
        return self.rotary_dim if self.rotary_dim is not None else self.dim

    @property
    def rotary_width(self) -> int:
        """How many leading features rotate: ``frequency_dim`` rounded up to even."""
        return self.frequency_dim + self.frequency_dim % 2


def _same_positions(a: Tensor | None, b: Tensor | None) -> bool:
    """Whether two position arguments are the same positions without reading them: one object, both
    None, or two views of the same memory (``pos[0], pos[0]`` make two objects; one table lookup
    instead of two)."""
    if a is b:
        return True
    if a is None or b is None or not (plain(a) and plain(b)):
        return False
    return (
        a.data_ptr() == b.data_ptr()
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.dtype == b.dtype
        and a.device == b.device
    )


@register
class Rope(PositionalEncoding):
    name = "rope"
    family = "rotary"
    formula = "q_m ← R(m·θ) q_m,  k_n ← R(n·θ) k_n,  θ_i = base^(-2i/d)  ⇒  q_m·k_n depends on m − n"
    citation = "Su et al. 2021, RoFormer, section 3.4"
    Config = RopeConfig

    def __init__(self, config: RopeConfig) -> None:
        super().__init__(config)
        inv_freq, attention_scale = F.rope_inv_freq(config.frequency_dim, base=config.base, scaling=config.scaling)
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # [r/2] float64, short sequences
        self.attention_scale = attention_scale
        self.register_buffer("_cos_sin", None, persistent=False)  # row cache [n, 2, r], see _cache.py
        self._scaling_kind, self._scaling_params = parse_scaling(config.scaling)
        #: Sequences longer than this use other frequencies (dynamic, longrope); None: never.
        self.original_length: int | None = None
        if self._scaling_kind in LENGTH_DEPENDENT:
            self.original_length = int(self._scaling_params.get("original_max_position_embeddings", 0)) or None
            if self.original_length is None:
                raise ValueError(
                    f"rope scaling {self._scaling_kind!r} needs 'original_max_position_embeddings' "
                    '(the length past which it rescales), e.g. {"rope_type": '
                    f'"{self._scaling_kind}", "factor": 2.0, "original_max_position_embeddings": 2048}}'
                )
        long = None
        if self._scaling_kind == "longrope":  # fixed long frequencies: a buffer, never reassigned
            long = long_inv_freq("longrope", config.frequency_dim, float(config.base), self._scaling_params, 0)
        self.register_buffer("_long_inv_freq", long, persistent=False)  # [r/2] float64 or None

    @property
    def length_dependent(self) -> bool:
        """True when the frequencies change with the sequence length (``dynamic``, ``longrope``)."""
        return self.original_length is not None

    def inv_freq_at(self, seq_len: int | Tensor | None) -> Tensor:
        """The frequencies ``[r/2]`` (float64) in force for a sequence of ``seq_len`` positions.

        A pure function of ``seq_len`` (an int, a 0-d tensor, or None for the short frequencies):
        no buffer is changed, so it is safe inside ``torch.compile``.
        """
        if seq_len is None or self.original_length is None:
            return self.inv_freq
        if not isinstance(seq_len, Tensor):
            if float(seq_len) <= self.original_length:
                return self.inv_freq
            return self._long_frequencies(seq_len)
        return torch.where(seq_len > self.original_length, self._long_frequencies(seq_len), self.inv_freq)  # [r/2]

    def _long_frequencies(self, seq_len: int | Tensor) -> Tensor:
        if self._long_inv_freq is not None:
            return self._long_inv_freq
        return long_inv_freq(
            self._scaling_kind, self.config.frequency_dim, float(self.config.base), self._scaling_params, seq_len
        ).to(self.inv_freq.device)

    def _is_long(self, seq_len: int | Tensor | None) -> bool:
        """Whether tables for ``seq_len`` may differ from the cached short ones (always, when compiling)."""
        if seq_len is None or self.original_length is None:
            return False
        if torch.compiler.is_compiling() and isinstance(seq_len, Tensor):
            return True
        return float(seq_len) > self.original_length  # float: fractional positions compare as in torch.where

    def seq_len_of(
        self, q_positions: Tensor | None, k_positions: Tensor | None, sq: int, sk: int
    ) -> int | Tensor | None:
        """``1 +`` the largest position of a call (None when the frequencies do not depend on it).

        Default positions are ``0..sk-1`` for keys and the last ``sq`` of those for queries.
        """
        if self.original_length is None:
            return None
        longest: int | Tensor = max(sq, sk) if q_positions is None or k_positions is None else 0
        for positions in (q_positions, k_positions):
            start = None if positions is None else known_range(positions)
            if start is not None:  # a range made by default_positions: its end, without a read from the device
                longest = (
                    max(longest, start + positions.numel())
                    if isinstance(longest, int)
                    else longest.clamp(min=start + positions.numel())
                )
            elif positions is not None and positions.numel():
                top = positions.max() + 1  # 0-d
                if isinstance(longest, Tensor):
                    longest = torch.maximum(longest, top)
                else:
                    longest = top if longest == 0 else top.clamp(min=longest)
        return longest

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"dim": head_dim}

    def _build(self, positions: Tensor, dtype: torch.dtype = torch.float32, inv_freq: Tensor | None = None) -> Tensor:
        inv_freq = self.inv_freq if inv_freq is None else inv_freq
        cos, sin = F.rope_cos_sin(
            positions, inv_freq, layout=self.config.layout, attention_scale=self.attention_scale, dtype=dtype
        )
        return torch.stack((cos, sin), dim=-2)  # [*p, 2, r]

    def cos_sin(
        self, positions: Tensor | int, *, dtype: torch.dtype = torch.float32, seq_len: int | Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """cos and sin tables ``[*p, r]`` at ``positions`` (cached for whole non-negative positions).

        For length-dependent scalings the frequencies are those for ``seq_len``, by default
        ``1 + positions.max()`` (what Hugging Face's rotary modules return for these ``position_ids``).
        """
        positions = F.as_positions(positions, device=self.inv_freq.device)
        if seq_len is None and positions.numel():
            seq_len = self.seq_len_of(positions, None, 0, 0)
        if self._is_long(seq_len):
            return self._build(positions, dtype, self.inv_freq_at(seq_len)).unbind(-2)
        if dtype == torch.float32:
            table = cached_rows(self, "_cos_sin", positions, self._build, dtype=torch.float32)
        else:
            table = self._build(positions, dtype)
        return table.unbind(-2)

    def _tables(
        self,
        positions: Tensor | None,
        length: int,
        offset: int,
        x: Tensor,
        seq_len: int | Tensor | None = None,
        what: str = "key",
    ) -> tuple[Tensor, Tensor]:
        """Tables ``[s, r]`` (or ``[*p, r]``) for ``x``'s positions; ``seq_len`` picks length-dependent frequencies."""
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        if positions is None and dtype == torch.float32 and not self._is_long(seq_len):
            table = cached_range(self, "_cos_sin", offset, length, self._build, dtype=dtype, device=x.device)
            return table.unbind(-2)  # [s, r] each
        positions = default_positions(positions, length, x.device, offset=offset).to(x.device)
        check_positions_fit(positions, x, what)
        if self._is_long(seq_len):
            return self._build(positions, dtype, self.inv_freq_at(seq_len)).unbind(-2)
        return self.cos_sin(positions, dtype=dtype, seq_len=seq_len)

    def rotate(
        self,
        q: Tensor,
        k: Tensor,
        q_positions: Tensor | None = None,
        k_positions: Tensor | None = None,
        *,
        inverse: bool = False,
    ) -> tuple[Tensor, Tensor]:
        """Rotate ``q [b, h, sq, hd]`` and ``k [b, h, sk, hd]`` (by the negative angles when ``inverse``).

        Default positions: keys ``0..sk-1``; queries the last ``sq`` of those (decoding with a cache).
        Length-dependent scalings use the frequencies for ``1 +`` the largest query or key position.
        Packed documents ``[1, h, total, hd]``: positions from
        :func:`~posenc.functional.positions_from_cu_seqlens` (restarting in each document).
        """
        check_bool("inverse", inverse)
        check_head_width(self.name, self.config.dim, q, k)
        same = q_positions is k_positions
        if k_positions is not None and not isinstance(k_positions, Tensor):  # a list or range: as a tensor
            k_positions = F.as_positions(k_positions, device=k.device)
        if q_positions is not None and not isinstance(q_positions, Tensor):
            q_positions = k_positions if same else F.as_positions(q_positions, device=q.device)
        sq, sk = q.shape[-2], k.shape[-2]
        seq_len = self.seq_len_of(q_positions, k_positions, sq, sk)  # None unless dynamic / longrope
        cos_k, sin_k = self._tables(k_positions, sk, 0, k, seq_len)
        if sq == sk and q.dtype == k.dtype and _same_positions(q_positions, k_positions):
            cos_q, sin_q = cos_k, sin_k  # same positions (self-attention without a cache): one lookup
        else:
            cos_q, sin_q = self._tables(q_positions, sq, max(sk - sq, 0), q, seq_len, "query")
        options = {"layout": self.config.layout, "inverse": inverse, "rotary_start": self.config.rotary_start}
        # through posenc.kernels (equal to F.apply_rope; backward = inverse rotation): q and k in one
        # pass where they share the tables, else one pass each
        if cos_q is cos_k:
            return rope_pair(q, k, cos_k, sin_k, **options)
        return rope(q, cos_q, sin_q, **options), rope(k, cos_k, sin_k, **options)

    def rotate_one(
        self, x: Tensor, positions: Tensor | None = None, *, inverse: bool = False, seq_dim: int = -2
    ) -> Tensor:
        """Rotate one tensor ``x [b, h, s, hd]`` at ``positions`` (default ``0..s-1``): queries, keys,
        or, with ``inverse=True``, attention outputs to de-rotate (DeepSeek-V4 rotates the values'
        rotary slice and turns the output back by the query's angle). ``seq_dim=-3`` takes
        ``[b, s, h, hd]`` or packed ``[total, h, hd]`` (positions from
        :func:`~posenc.functional.positions_from_cu_seqlens`) where they lie, without a transpose."""

        check_head_width(self.name, self.config.dim, x)
        check_bool("inverse", inverse)
        check_seq_dim(x, seq_dim)
        if positions is not None and not isinstance(positions, Tensor):
            positions = F.as_positions(positions, device=x.device)
        view = x if seq_dim == -2 else x.movedim(seq_dim, -2)  # [.., s, hd]: a view, for the checks and lengths
        length = view.shape[-2]
        cos, sin = self._tables(positions, length, 0, view, self.seq_len_of(positions, None, length, 0))
        return rope(
            x,
            cos,
            sin,
            layout=self.config.layout,
            inverse=inverse,
            rotary_start=self.config.rotary_start,
            seq_dim=seq_dim,
        )
