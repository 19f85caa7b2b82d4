"""Multimodal RoPE (MRoPE) as a scheme: the Qwen-VL family's rotary embedding over (t, h, w)
coordinates (Wang et al. 2024, Qwen2-VL, arXiv 2409.12191, section 2.1; interleaved: Qwen3-VL).

Shape legend: ``b`` batch, ``h`` heads, ``s`` sequence, ``hd`` head width, ``r`` rotated width,
``n = r / 2`` rotary pairs, ``*p`` leading position dims; coordinates are ``[*p, 3]`` (t, h, w).

Each rotary pair keeps its RoPE frequency (any Hugging Face scaling, YaRN included: transformers'
Qwen-VL rotary modules take theirs from ``ROPE_INIT_FUNCTIONS``) and turns by one coordinate, picked
by ``sections`` (HF ``mrope_section``) contiguously or interleaved
(:func:`posenc.functional.mrope_axes`). Positions are coordinates ``[s, 3]`` / ``[b, s, 3]``
(:func:`posenc.config.mrope_positions` builds them for text, image and video tokens as
transformers' ``get_rope_index`` does); text positions ``[s]`` / ``[b, s]`` mean ``t = h = w``, where
MRoPE equals plain RoPE.

A subclass of :class:`~posenc.schemes.rope.Rope` for its frequencies: the length-dependent
scalings (``dynamic``, ``longrope``) use ``1 +`` the largest coordinate of a call, as HF's
``dynamic_rope_update`` takes ``max(position_ids) + 1`` over all three rows. Tables are built per
call from the coordinates (no row cache: rows are not indexed by one position).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .. import functional as F
from ..functional._checks import check_even_dim
from ..functional.mrope import check_interleaved, cos_sin_of_axes, mrope_coordinates, mrope_sections
from ..kernels import rope
from .base import check_head_width, check_positions_fit, register
from .rope import Rope, RopeConfig

__all__ = ["MRope", "MRopeConfig", "default_sections"]


def default_sections(pairs: int) -> tuple[int, int, int]:
    """Sections for ``pairs`` rotary pairs in Qwen2-VL's proportions (``[16, 24, 24]`` of 64):
    ``h = w = floor(3 pairs / 8)``, ``t`` the rest."""
    hw = 3 * pairs // 8
    return pairs - 2 * hw, hw, hw


@dataclass(frozen=True)
class MRopeConfig:
    dim: int  # head width
    base: float = 10000.0  # HF `rope_theta`
    #: rotary pairs per axis (t, h, w), adding up to rotary_dim / 2 (HF `mrope_section`);
    #: None: Qwen2-VL's proportions (:func:`default_sections`)
    sections: Sequence[int] | None = None
    #: False: contiguous blocks (Qwen2-VL); True: t h w t h w ... (Qwen3-VL); "hw": h w h w ... t (Ernie 4.5 VL)
    interleaved: bool | str = False
    layout: str = "half"  # "half" (Qwen: rotate_half) or "interleaved" (GLM-4V: pairs (2i, 2i+1))
    scaling: Mapping[str, Any] | None = None  # HF `rope_scaling` dict as in config.json, without mrope keys
    rotary_dim: int | None = None  # rotate only the first rotary_dim features (Qwen3.5, GLM-4V)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim", check_even_dim("dim", self.dim))
        check_interleaved(self.interleaved)
        if isinstance(self.scaling, Mapping):
            mrope_keys = sorted(k for k in self.scaling if k in ("mrope_section", "mrope_interleaved"))
            if mrope_keys:
                raise ValueError(
                    f"scaling holds {mrope_keys}: give them as sections= and interleaved= (posenc.rope_from_config "
                    "reads them from a config.json); scaling is the rope type and its keys only"
                )
        if self.rotary_dim is not None:
            object.__setattr__(self, "rotary_dim", check_even_dim("rotary_dim", self.rotary_dim))
        plain = self.rope_config()  # validates base, layout, scaling and rotary_dim as for RoPE
        pairs = plain.frequency_dim // 2
        sections = default_sections(pairs) if self.sections is None else mrope_sections(self.sections, pairs)
        F.mrope_axes(sections, interleaved=self.interleaved)  # validates the sections for "hw"
        object.__setattr__(self, "sections", sections)

    def rope_config(self) -> RopeConfig:
        """The plain RoPE with these frequencies: what MRoPE equals on text (``t = h = w``)."""
        return RopeConfig(
            dim=self.dim, base=self.base, layout=self.layout, scaling=self.scaling, rotary_dim=self.rotary_dim
        )

    @property
    def frequency_dim(self) -> int:
        return self.rotary_dim if self.rotary_dim is not None else self.dim

    @property
    def rotary_width(self) -> int:
        return self.frequency_dim


@register
class MRope(Rope):
    name = "mrope"
    family = "rotary"
    formula = "pair i of q_m ← R(m_a(i) · inv_freq_i), axis a(i) ∈ {t, h, w} by sections  ⇒  q_m·k_n depends on m − n per axis"
    citation = "Wang et al. 2024, Qwen2-VL (arXiv 2409.12191), section 2.1, Multimodal Rotary Position Embedding"
    Config = MRopeConfig
    n_axes = 3

    def __init__(self, config: MRopeConfig) -> None:
        super().__init__(config)
        axes = F.mrope_axes(config.sections, interleaved=config.interleaved)
        self.register_buffer("axes", axes, persistent=False)  # [r/2] long: the coordinate each pair reads

    def coordinates(
        self, positions: Tensor | int, *, length: int | None = None, device: torch.device | None = None
    ) -> Tensor:
        """Coordinates ``[*p, 3]``; text positions ``[s]`` / ``[b, s]`` mean ``t = h = w``
        (:func:`posenc.functional.mrope_coordinates`)."""
        return mrope_coordinates(positions, length=length, device=device)

    def _build(self, positions: Tensor, dtype: torch.dtype = torch.float32, inv_freq: Tensor | None = None) -> Tensor:
        inv_freq = self.inv_freq if inv_freq is None else inv_freq
        cos, sin = cos_sin_of_axes(
            positions,
            inv_freq,
            self.axes,
            layout=self.config.layout,
            attention_scale=self.attention_scale,
            dtype=dtype,
        )
        return torch.stack((cos, sin), dim=-2)  # [*p, 2, r]

    def cos_sin(
        self, positions: Tensor | int, *, dtype: torch.dtype = torch.float32, seq_len: int | Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """cos and sin tables ``[*p, r]`` at coordinates ``positions [*p, 3]`` (text positions
        ``[s]`` / ``[b, s]``: ``t = h = w``; a ``[n, 3]`` tensor is read as coordinates, so text rows
        of exactly 3 tokens go in as coordinates ``[b, 3, 3]``), in transformers' Qwen-VL table layout.

        For length-dependent scalings the frequencies are those for ``seq_len``, by default ``1 +``
        the largest coordinate (HF ``dynamic_rope_update``).
        """
        coords = self.coordinates(positions, device=self.inv_freq.device)
        if seq_len is None and coords.numel():
            seq_len = self.seq_len_of(coords, None, 0, 0)
        return self._build(coords, dtype, self.inv_freq_at(seq_len)).unbind(-2)

    def _coords(self, positions: Tensor | None, length: int, offset: int, x: Tensor, what: str) -> Tensor:
        if positions is None:
            positions = torch.arange(offset, offset + length, device=x.device)
        coords = self.coordinates(positions, length=length, device=x.device)  # [s, 3] or [b, s, 3]
        check_positions_fit(coords[..., 0], x, what)  # in the caller's terms, before any table is built
        return coords

    def rotate(
        self, q: Tensor, k: Tensor, q_positions: Tensor | None = None, k_positions: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Rotate ``q [b, h, sq, hd]`` and ``k [b, h, sk, hd]`` at coordinates ``[s, 3]`` / ``[b, s, 3]``
        (or text positions ``[s]`` / ``[b, s]``, ``t = h = w``).

        Default positions: keys ``0..sk-1`` and queries the last ``sq`` of those, as text.
        Length-dependent scalings use the frequencies for ``1 +`` the largest coordinate of the call.
        """
        check_head_width(self.name, self.config.dim, q, k)
        sq, sk = q.shape[-2], k.shape[-2]
        k_coords = self._coords(k_positions, sk, 0, k, "key")
        q_coords = self._coords(q_positions, sq, max(sk - sq, 0), q, "query")
        seq_len = self.seq_len_of(q_coords, k_coords, sq, sk)  # None unless dynamic / longrope
        inv_freq = self.inv_freq_at(seq_len)
        dtype = torch.float64 if torch.float64 in (q.dtype, k.dtype) else torch.float32
        cos_k, sin_k = self._build(k_coords, dtype, inv_freq).unbind(-2)
        if q_positions is k_positions and sq == sk:
            cos_q, sin_q = cos_k, sin_k
        else:
            cos_q, sin_q = self._build(q_coords, dtype, inv_freq).unbind(-2)
        layout = self.config.layout
        return rope(q, cos_q, sin_q, layout=layout), rope(k, cos_k, sin_k, layout=layout)

    def rotate_one(
        self, x: Tensor, positions: Tensor | None = None, *, inverse: bool = False, seq_dim: int = -2
    ) -> Tensor:
        """Rotate one tensor ``x [b, h, s, hd]`` at coordinates ``[s, 3]`` / ``[b, s, 3]`` (or text
        positions, ``t = h = w``; default ``0..s-1`` as text); ``inverse=True`` turns it back;
        ``seq_dim=-3`` takes ``[b, s, h, hd]`` where it lies."""
        check_head_width(self.name, self.config.dim, x)
        view = x if seq_dim == -2 else x.movedim(seq_dim, -2)  # [.., s, hd]: a view, for the checks and lengths
        coords = self._coords(positions, view.shape[-2], 0, view, "position")
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        inv_freq = self.inv_freq_at(self.seq_len_of(coords, None, 0, 0))
        cos, sin = self._build(coords, dtype, inv_freq).unbind(-2)
        return rope(x, cos, sin, layout=self.config.layout, inverse=inverse, seq_dim=seq_dim)

    def text_rope(self) -> Rope:
        """The plain :class:`~posenc.schemes.rope.Rope` with these frequencies: equal to this
        module on text positions (``t = h = w``)."""
        return Rope(self.config.rope_config())
