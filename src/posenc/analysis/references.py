"""The naive position codes of the articles posenc was founded on (listed in docs/design.md), kept
for the atlas only (not registered as schemes).

Shape legend: ``n`` positions, ``d`` code width, ``k`` bits.

Each one fails a criterion that the sinusoid meets, which is why the articles show them:

* ``index``: position ``p`` in every dimension — unbounded (grows with ``p``) and, under the cosine
  distance, every code points the same way ("Understanding positional embeddings in transformer
  models", 2023, "Some initial ideas": Pim 2023; and Kazemnejad 2019).
* ``fraction``: ``p / L`` in every dimension — bounded, but the code of a position depends on the
  sequence length ``L`` (Pim 2023, same section).
* ``binary``: the binary digits of ``p`` (least significant first), the discrete counter that the
  sinusoid smooths (Kazemnejad 2019, "Transformer Architecture: The Positional Encoding", "The intuition"). Collides past ``2^d``.
* ``sine_only``: ``sin(p · base^(-j/d))`` for every dimension ``j`` — the paper's frequency range,
  sines alone. ``PE(0)`` is the zero vector and ``sin(ω(p + k))`` needs ``cos(ωp)``, so no linear
  map takes ``PE(p)`` to ``PE(p + k)``: the articles' answer to "why both sine and cosine?"
  (Kazemnejad 2019, "Why are both sine and cosine used?"; Shibuya 2021, section 6).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..functional._checks import as_positions, check_choice, check_integer_positions, check_positive_int

__all__ = ["REFERENCE_ENCODINGS", "reference_encoding", "binary_bits"]

#: Name -> one-line description of each naive reference code (atlas only).
REFERENCE_ENCODINGS: dict[str, str] = {
    "index": "PE(p, j) = p  (the raw index in every dimension)",
    "fraction": "PE(p, j) = p / L  (the position as a fraction of the sequence length L)",
    "binary": "PE(p, j) = j-th binary digit of p  (least significant first)",
    "sine_only": "PE(p, j) = sin(p / base^(j/d))  (sines without cosines)",
}


def binary_bits(positions: int | Tensor, n_bits: int) -> Tensor:
    """The binary digits of each position: float64 ``[n, n_bits]`` of 0/1, least significant bit first.

    Column ``j`` flips every ``2^j`` positions, the discrete version of the sinusoid's bands
    (the fastest band sits in the first column in both; Kazemnejad 2019). Positions must be
    non-negative integers; bits above ``n_bits`` are dropped (so ``2^n_bits`` collides with 0).
    """
    n_bits = check_positive_int("n_bits", n_bits)
    positions = check_integer_positions(as_positions(positions), "binary_bits")
    if positions.numel() and int(positions.min()) < 0:
        raise ValueError(f"binary_bits needs non-negative positions, got {int(positions.min())}")
    shifts = torch.arange(min(n_bits, 63), device=positions.device)  # [k'] (int64 has 63 value bits)
    bits = ((positions[..., None] >> shifts) & 1).to(torch.float64)  # [*p, k']
    return torch.nn.functional.pad(bits, (0, n_bits - bits.shape[-1]))  # [*p, k]


def reference_encoding(
    name: str, positions: int | Tensor, dim: int, *, seq_len: int | None = None, base: float = 10000.0
) -> Tensor:
    """A naive reference code (see :data:`REFERENCE_ENCODINGS`): float64 ``[*p, dim]``.

    ``seq_len`` is ``L`` for ``fraction``; by default the number of positions when ``positions`` is an
    int, else ``max(positions) + 1``. ``base`` sets ``sine_only``'s slowest frequency (as in the paper).
    """
    check_choice("reference encoding", name, REFERENCE_ENCODINGS)
    dim = check_positive_int("dim", dim)
    p = as_positions(positions)
    pf = p.to(torch.float64)
    if name == "index":
        return pf[..., None].expand(*pf.shape, dim).clone()  # [*p, d]
    if name == "fraction":
        if seq_len is None:
            seq_len = positions if isinstance(positions, int) else int(p.max()) + 1 if p.numel() else 1
        seq_len = check_positive_int("seq_len", seq_len)
        return (pf / seq_len)[..., None].expand(*pf.shape, dim).clone()  # [*p, d]
    if name == "binary":
        return binary_bits(p, dim)
    if not (isinstance(base, (int, float)) and base > 1):
        raise ValueError(f"base must be a number greater than 1, got {base!r}")
    inv_freq = float(base) ** (-torch.arange(dim, dtype=torch.float64, device=p.device) / dim)  # [d]
    return torch.sin(pf[..., None] * inv_freq)  # [*p, d]
