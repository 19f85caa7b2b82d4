"""FIRE: functional interpolation for relative positions (Li et al. 2024, "Functional Interpolation
for Relative Positions Improves Long Context Transformers", ICLR, section 3.2 and appendix A's code).

Shape legend: ``h`` heads, ``sq``/``sk`` query/key positions, ``b`` batch, ``n`` pairs, ``u``
distinct normalised distances, ``w`` hidden units of the MLP.

The bias of query ``i`` against key ``j <= i`` (causal attention) is

    b_h(i, j) = f_h( psi(i - j) / psi(max(L, i)) ),   psi(x) = log(|c x| + 1),

``f`` a two-layer MLP ``1 -> hidden_dim -> num_heads`` with a ReLU (the paper: width 32), ``c``
learned (initialised at 0.1) and the threshold ``L = |L_multiplier * init_L|`` with ``init_L = 512``
fixed and ``L_multiplier`` learned (initialised at 1): the "progressive interpolation" with a
learnable threshold of section 3.2, kept positive by the absolute value as in the appendix code;
``eps = 1e-6`` is added to the normaliser as there. Parameter names follow that code (``mlp.0``,
``mlp.2``, ``c``, ``L_multiplier``); its frozen ``init_L`` is a config value here.

The normaliser depends on the query position ``i`` itself, so the bias is not a function of
``i - j`` alone: :meth:`FIRE.bias` evaluates the MLP once per distinct normalised distance, and the
FlexAttention score mod computes the MLP per score from the captured weights. For two contiguous
ranges of positions and no gradient (inference), :func:`fire_bias` builds the same numbers ~3x
faster: the rows of queries ``i <= L`` are Toeplitz (one normaliser ``psi(L)``), those past ``L``
are evaluated row by row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from .. import functional as F
from ..functional._checks import check_number, check_out, check_positive_int, has_values
from ..functional.toeplitz import relative_range, toeplitz
from ..kernels.bias import range_starts, toeplitz_into
from ..kernels.flex import ScoreMod
from .base import PositionalEncoding, bias_into, check_bias_fits, register

__all__ = ["FIRE", "FIREConfig", "fire_bias", "fire_score_mod"]

#: Below this many inputs a ``Linear`` of one input feature takes another CPU path whose rounding
#: differs from a larger batch's (measured: 1-11 rows, torch 2.13); :func:`fire_bias` evaluates the
#: MLP on batches at least this large, as :meth:`FIRE.bias` does on its distinct values.
_MIN_BATCH = 16

#: Rows of FIRE's per-query part evaluated at once past the threshold: ``rows * sk * hidden``
#: floats of MLP activations (8 MiB at sk = 2048, hidden 32, 32 rows).
_ROW_BLOCK = 32


@dataclass(frozen=True)
class FIREConfig:
    num_heads: int
    hidden_dim: int = 32  # the MLP's width (the paper's mlp_width)
    init_c: float = 0.1  # psi's scale c at initialisation (appendix code)
    init_L: float = 512.0  # the threshold L at initialisation; L = |L_multiplier * init_L|
    eps: float = 1e-6  # added to the normaliser psi(max(L, i)) (appendix code)

    def __post_init__(self) -> None:
        object.__setattr__(self, "num_heads", check_positive_int("num_heads", self.num_heads))  # 8.0 -> 8
        object.__setattr__(self, "hidden_dim", check_positive_int("hidden_dim", self.hidden_dim))
        object.__setattr__(self, "init_c", check_number("init_c", self.init_c, positive=True))
        object.__setattr__(self, "init_L", check_number("init_L", self.init_L, positive=True))
        object.__setattr__(self, "eps", check_number("eps", self.eps, positive=True))


def fire_normalised_distance(query: Tensor, distance: Tensor, c: Tensor, threshold: Tensor, eps: float) -> Tensor:
    """``psi(i - j) / (psi(max(L, i)) + eps)`` with ``psi(x) = log(|c x| + 1)``, for query positions
    ``query`` and distances ``distance = i - j`` (broadcast together, float)."""
    normaliser = torch.log(torch.abs(c * torch.maximum(query, threshold)) + 1) + eps
    return torch.log(torch.abs(c * distance) + 1) / normaliser


def fire_bias(
    mlp: nn.Module,
    c: Tensor,
    threshold: Tensor,
    eps: float,
    q_positions: Tensor,
    k_positions: Tensor,
    *,
    out: Tensor | None = None,
) -> Tensor | None:
    """FIRE's bias ``[h, sq, sk]`` (Li et al. 2024, section 3.2:
    ``b_h(i, j) = f_h(psi(i - j) / psi(max(L, i)))``, ``psi(x) = log(|c x| + 1)``, ``eps`` added to
    the normaliser as in the appendix code) for contiguous ranges of positions, into ``out`` or a
    new tensor; None where the positions are not two ranges (or inside a trace).

    ``mlp`` is ``f``, an ``nn.Sequential`` from ``Linear(1, hidden)`` to ``Linear(hidden, h)``
    (``[n, 1] -> [n, h]``); ``c`` and ``threshold`` (``L``) 0-d. ``out``: ``[h, sq, sk]`` of the
    MLP's dtype and device, else a ValueError naming both. No gradient flows (inference). For
    queries ``i <= L`` the normaliser is the constant ``psi(L)``: those rows are Toeplitz, ``f``
    runs once on their ``w`` distances and :func:`~posenc.kernels.bias.toeplitz_into` expands it.
    Past ``L`` each row has its own normaliser: ``f`` runs on every pair of those rows (blocks of
    :data:`_ROW_BLOCK` rows), the work of the bias itself. The numbers are those of
    :meth:`FIRE.bias`'s general path bit for bit (the same elementwise expressions, and the MLP on
    batches of at least :data:`_MIN_BATCH`)."""
    starts = range_starts(q_positions, k_positions)
    if starts is None:
        return None
    (q0, k0), sq, sk = starts, q_positions.numel(), k_positions.numel()
    weight = mlp[0].weight  # [hidden, 1]
    h = mlp[-1].out_features
    if out is None:
        out = weight.new_empty(h, sq, sk)
    else:
        check_out(out, (h, sq, sk), weight.dtype, weight.device)
    if out.numel() == 0:
        return out
    dtype = torch.promote_types(weight.dtype, torch.float32)  # positions never in 16 bits, as in FIRE.bias

    def f(x: Tensor) -> Tensor:  # normalised distances [n] -> [n, h], the MLP on at least _MIN_BATCH rows
        n = x.shape[0]
        if n < _MIN_BATCH:
            x = torch.cat([x, x.new_zeros(_MIN_BATCH - n)])
        return mlp(x[:, None].to(weight.dtype))[:n]

    with torch.no_grad():
        c, threshold = c.to(dtype), threshold.to(dtype)
        queries = torch.arange(q0, q0 + sq, device=weight.device)  # [sq]
        keys = torch.arange(k0, k0 + sk, device=weight.device)  # [sk]
        below = int((queries.to(dtype) <= threshold).sum())  # a prefix (queries ascend): normaliser psi(L)
        if below:  # Toeplitz: f on the below + sk - 1 distances i - j of these rows, expanded
            rel = relative_range(below, sk, q_offset=q0, k_offset=k0, device=weight.device)  # [w]: j - i
            x = fire_normalised_distance(queries[:1].to(dtype), -rel.to(dtype), c, threshold, eps)  # [w]
            if below == sq and out.is_contiguous():
                toeplitz_into(f(x).t(), below, sk, out)
            else:  # out[:, :below] is not contiguous
                toeplitz(f(x).t(), below, sk, out=out[:, :below])
        for start in range(below, sq, _ROW_BLOCK):  # past the threshold: f on every pair of a block of rows
            q = queries[start : start + _ROW_BLOCK, None]  # [r, 1]
            x = fire_normalised_distance(q.to(dtype), -(keys - q).to(dtype), c, threshold, eps)  # [r, sk]
            out[:, start : start + q.shape[0]].copy_(f(x.flatten()).unflatten(0, x.shape).permute(2, 0, 1))
    return out


def fire_score_mod(
    w1: Tensor,
    b1: Tensor,
    w2: Tensor,
    b2: Tensor,
    c: Tensor,
    threshold: Tensor,
    *,
    eps: float = 1e-6,
    q_offset: int | Tensor = 0,
    k_start: int | Tensor = 0,
) -> ScoreMod:
    """FIRE as a FlexAttention score mod: the MLP ``relu(x w1 + b1) @ w2.T + b2`` written out as a
    sum over its ``w`` hidden units, evaluated at each score's normalised distance ``x``.

    ``w1, b1 [w]`` (the first layer's weight column and bias), ``w2 [h, w]``, ``b2 [h]``, ``c`` and
    ``threshold`` 0-d; query ``q_idx`` sits at position ``k_start + q_offset + q_idx`` and key
    ``kv_idx`` at ``k_start + kv_idx``. The offsets are captured as tensors (a new one does not
    recompile)."""
    offset = torch.as_tensor(q_offset, device=w1.device)
    start = torch.as_tensor(k_start, device=w1.device)
    hidden = w1.shape[0]

    def fire(score: Tensor, b: Tensor, h: Tensor, q_idx: Tensor, kv_idx: Tensor) -> Tensor:
        query = (q_idx + offset + start).to(w1.dtype)
        x = fire_normalised_distance(query, (q_idx + offset - kv_idx).to(w1.dtype), c, threshold, eps)
        out = b2[h]
        for k in range(hidden):  # unrolled when traced: one fused expression per score
            out = out + torch.relu(x * w1[k] + b1[k]) * w2[h, k]
        return score + out

    return fire


@register
class FIRE(PositionalEncoding):
    name = "fire"
    family = "bias"
    formula = "logit(i, j) += f_h(ψ(i − j) / ψ(max(L, i))),  ψ(x) = log(c·x + 1),  f an MLP, c and L learned (causal)"
    citation = "Li et al. 2024, Functional Interpolation for Relative Positions (FIRE), ICLR, section 3 and appendix"
    Config = FIREConfig
    score_mod_takes_k_start = True

    def __init__(self, config: FIREConfig) -> None:
        super().__init__(config)
        self.mlp = nn.Sequential(
            nn.Linear(1, config.hidden_dim), nn.ReLU(), nn.Linear(config.hidden_dim, config.num_heads)
        )
        self.c = nn.Parameter(torch.tensor(config.init_c))
        self.L_multiplier = nn.Parameter(torch.tensor(1.0))

    @classmethod
    def attention_defaults(cls, head_dim: int, num_heads: int, dim: int, causal: bool) -> dict:
        return {"num_heads": num_heads}

    def threshold(self) -> Tensor:
        """The learned threshold ``L = |L_multiplier * init_L|`` (0-d)."""
        return torch.abs(self.L_multiplier * self.config.init_L)

    def bias(self, q_positions: Tensor, k_positions: Tensor, *, out: Tensor | None = None) -> Tensor:
        """``[h, sq, sk]`` for positions ``[s]``; ``[b, h, sq, sk]`` for positions ``[b, s]``. Keys
        after the query get the bias of ``|i - j|`` (the causal mask hides them). Written into
        ``out`` where given (see :meth:`PositionalEncoding.bias`: inference, no gradient; a tensor
        of another shape, dtype or device is a ValueError).

        Without gradient (no parameter needs one, or grad mode is off), two contiguous ranges of
        positions whose queries are all at or below the threshold take :func:`fire_bias` (the same
        numbers, bit for bit: one Toeplitz build); so does any ``out``. Else the MLP runs once per
        distinct normalised distance, so that gradients reach ``f``, ``c`` and ``L`` (rows past the
        threshold: :func:`fire_bias`'s blocks of rows measured 2.5x slower than this with two
        threads, 2.7x faster with one, on the 2-core CPU host)."""
        weight = self.mlp[0].weight
        check_bias_fits(q_positions, k_positions, self.config.num_heads, weight.dtype, weight.device)
        q = F.as_positions(q_positions, device=weight.device)
        k = F.as_positions(k_positions, device=weight.device)
        no_grad = not (torch.is_grad_enabled() and any(p.requires_grad for p in self.parameters()))
        toeplitz_only = no_grad and q.dim() == 1 and has_values(q) and q.numel() > 0
        toeplitz_only = toeplitz_only and float(q.max()) <= float(self.threshold())  # every row's normaliser psi(L)
        if out is not None or toeplitz_only:
            fast = fire_bias(self.mlp, self.c, self.threshold(), self.config.eps, q, k, out=out)
            if fast is not None:
                return fast
        rel = F.relative_positions(q, k)  # [..., sq, sk]: j - i
        dtype = torch.promote_types(weight.dtype, torch.float32)  # positions never in 16 bits
        query = q.to(dtype)[..., :, None]  # [..., sq, 1]
        x = fire_normalised_distance(
            query, -rel.to(dtype), self.c.to(dtype), self.threshold().to(dtype), self.config.eps
        )
        flat = x.flatten()  # [n]
        if not has_values(flat):  # compiling, a torch.func transform or the meta device: every pair
            bias = self.mlp(flat[:, None].to(weight.dtype)).unflatten(0, x.shape).movedim(-1, -3)
            return bias if out is None else bias_into(out, bias)
        # f on the distinct values only (a function of i - j alone for queries below L): their
        # first occurrences are gathered from x itself, so gradients still reach c and L
        distinct, inverse = torch.unique(flat.detach(), return_inverse=True)  # [u], [n]
        n = flat.shape[0]
        first = torch.full((distinct.shape[0],), n, device=flat.device).scatter_reduce(
            0, inverse, torch.arange(n, device=flat.device), reduce="amin"
        )  # [u]
        values = self.mlp(flat[first, None].to(weight.dtype))  # [u, h]
        bias = values[inverse].unflatten(0, x.shape).movedim(-1, -3)  # [..., sq, sk, h] -> [..., h, sq, sk]
        return bias if out is None else bias_into(out, bias)

    def score_mod(self, q_offset: int | Tensor, k_start: int | Tensor = 0) -> ScoreMod:
        first, second = self.mlp[0], self.mlp[2]
        return fire_score_mod(
            first.weight.detach()[:, 0].float(),
            first.bias.detach().float(),
            second.weight.detach().float(),
            second.bias.detach().float(),
            self.c.detach().float(),
            self.threshold().detach().float(),
            eps=self.config.eps,
            q_offset=q_offset,
            k_start=k_start,
        )

    def check_attention(self, *, dim: int, num_heads: int, head_dim: int, causal: bool) -> None:
        super().check_attention(dim=dim, num_heads=num_heads, head_dim=head_dim, causal=causal)
        if not causal:
            raise ValueError(
                "fire is defined for causal attention (keys j <= i; its normaliser psi(max(L, i)) follows the "
                "query), got causal=False; use it with causal=True"
            )
