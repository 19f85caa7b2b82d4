"""The attention-logit bias against distance, one curve per head: from the parameters alone, or, for
data-dependent schemes, its spread over random inputs.

Shape legend: ``h`` heads, ``D`` distances, ``S`` random input samples, ``n`` positions, ``d`` the
layer input's width, ``hd`` head width.

Distances count how far the key lies behind the query (``d = i - j``, keys ``j <= i``: the half a
causal mask keeps).

* Bias schemes (ALiBi, T5, KERPLE, Sandwich, FIRE, DPB): ``bias(i, j)`` for the query at
  ``i = length - 1`` and every key ``j = i - d``. A bias that depends on the query position as well
  as on the distance (FIRE's normaliser ``ψ(max(L, i))``, Li et al. 2024, section 3.2) is also
  drawn for queries further out (``4·length - 1`` and ``16·length - 1``): whether it does is
  measured, not assumed.
* Data-dependent schemes have no fixed curve. Forgetting attention (Lin et al. 2025, section 2):
  ``Σ_{j<t<=i} log f_t`` with the gates read from a layer input ``x ~ N(0, 1)``; CoPE (Golovneva et
  al. 2024, section 3): its term ``q_i · e[p_ij]`` for queries and keys ``~ N(0, I)`` with the logits
  ``q·k / sqrt(hd)`` under a causal mask. The result is the mean over every (sample, query) pair at
  each distance and its 10 % and 90 % quantiles.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from ..functional._checks import check_positive_int
from ..schemes import PositionalEncoding
from .encodings import build_scheme, is_data_dependent, scheme_family

__all__ = ["bias_against_distance", "bias_at_query", "random_input_bias", "QUANTILES"]

#: The band drawn around a data-dependent scheme's mean: these quantiles over samples and queries.
QUANTILES = (0.1, 0.9)


def bias_at_query(module: PositionalEncoding, query: int) -> Tensor:
    """``[h, query + 1]`` float64: the bias of the query at ``query`` against the key ``d`` positions
    behind it, column ``d`` (``d = 0 .. query``)."""
    device = next(iter([*module.parameters(), *module.buffers()]), torch.empty(0)).device
    with torch.no_grad():
        bias = module.bias(torch.tensor([query], device=device), torch.arange(query + 1, device=device))  # [h, 1, q+1]
    if bias is None:
        raise ValueError(f"scheme {module.name!r} has no bias from positions alone")
    return bias[:, 0].flip(-1).to(torch.float64).cpu()  # [h, q+1]: column d is the key at query - d


def random_input_bias(module: PositionalEncoding, length: int, *, num_samples: int = 16, seed: int = 0) -> Tensor:
    """``[S, h, n, n]`` float64: a data-dependent scheme's logit term for random inputs (seeded
    ``N(0, 1)``; see the module docstring), ``-inf``/unused above the diagonal (keys after the query)."""
    gen = torch.Generator().manual_seed(seed)
    param = next(iter([*module.parameters(), *module.buffers()]), torch.empty(0))
    dtype = param.dtype if param.is_floating_point() else torch.float32
    with torch.no_grad():
        if module.uses_input_terms:  # forgetting attention: gates from the layer input x [S, n, d]
            x = torch.randn(num_samples, length, module.config.dim, generator=gen).to(param.device, dtype)
            term = module.input_bias(module.input_terms(x), length)  # [S, h, n, n]
        else:  # a term from the queries and the logits (CoPE): one head's worth, every head draws alike
            hd = module.config.dim
            q, k = torch.randn(2, num_samples, 1, length, hd, generator=gen).to(param.device, dtype)  # [S, 1, n, hd]
            logits = q @ k.transpose(-1, -2) / math.sqrt(hd)  # [S, 1, n, n]
            future = torch.ones(length, length, dtype=torch.bool, device=param.device).triu(1)
            logits = logits.masked_fill(future, float("-inf"))
            positions = torch.arange(length, device=param.device)
            term = module.logit_term(q, logits, positions, positions)  # [S, 1, n, n]
    if term is None:
        raise ValueError(f"scheme {module.name!r} gives no data-dependent term to draw")
    return term.to(torch.float64).cpu()


def _by_distance(term: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Mean and :data:`QUANTILES` ``[h, n]`` each of ``term [S, h, n, n]`` over every (sample, query)
    pair at each distance ``d = i - j``."""
    n = term.shape[-1]
    means, lows, highs = [], [], []
    for d in range(n):
        values = torch.diagonal(term, offset=-d, dim1=-2, dim2=-1)  # [S, h, n - d]: queries i >= d
        values = values.transpose(0, 1).reshape(term.shape[1], -1)  # [h, S·(n - d)]
        means.append(values.mean(-1))
        q = torch.quantile(values, torch.tensor(QUANTILES, dtype=values.dtype), dim=-1)  # [2, h]
        lows.append(q[0])
        highs.append(q[1])
    return torch.stack(means, -1), torch.stack(lows, -1), torch.stack(highs, -1)  # [h, n] each


def bias_against_distance(
    scheme: str | PositionalEncoding,
    *,
    length: int = 256,
    num_samples: int = 16,
    seed: int = 0,
    **config: Any,
) -> dict[str, Any]:
    """The bias against distance, one curve per head, for a bias or data-dependent scheme.

    ``scheme`` is a name (built with the atlas's config and ``seed``) or a built module (a trained
    one: :func:`posenc.experiments.runner.load_encoding`). Returns ``{"scheme", "data_dependent",
    "heads", "length"}`` and:

    * parameters alone: ``queries`` (the query positions drawn, ``length - 1`` first) and ``values``
      (one ``[h, query + 1]`` float64 tensor per query, column ``d`` the key ``d`` behind);
      ``depends_on_query`` says whether the curve at ``4·length - 1`` differs from the first one over
      their common distances (then ``queries`` also holds ``4·length - 1`` and ``16·length - 1``);
    * data-dependent: ``distances [n]``, ``mean``, ``low`` and ``high`` ``[h, n]`` (the
      :data:`QUANTILES` over ``num_samples`` random inputs and every query), ``inputs`` (what was
      drawn, in words).
    """
    length = check_positive_int("length", length)
    if length < 2:
        raise ValueError(f"length must be at least 2 (a distance needs two positions), got {length}")
    module = build_scheme(scheme, seed=seed, **config)
    out: dict[str, Any] = {"scheme": module.name, "data_dependent": is_data_dependent(module), "length": length}
    if out["data_dependent"]:
        term = random_input_bias(module, length, num_samples=check_positive_int("num_samples", num_samples), seed=seed)
        mean, low, high = _by_distance(term)
        out.update(distances=torch.arange(length), mean=mean, low=low, high=high, heads=mean.shape[0])
        if module.uses_input_terms:
            out["inputs"] = f"layer input x ~ N(0, 1), {num_samples} sequences (seed {seed})"
        else:
            out["inputs"] = f"queries and keys ~ N(0, I), {num_samples} sequences, causal logits q·k/√hd (seed {seed})"
        return out
    if scheme_family(module) != "bias":
        raise ValueError(
            f"bias_against_distance draws bias and data-dependent schemes, not {module.name!r} "
            f"(family {module.family!r})"
        )
    first = bias_at_query(module, length - 1)  # [h, length]
    far = bias_at_query(module, 4 * length - 1)  # [h, 4 length]
    scale = max(float(first.abs().max()), 1e-30)
    depends = not torch.allclose(far[:, :length], first, rtol=0.0, atol=1e-6 * scale)
    queries, values = [length - 1], [first]
    if depends:
        queries += [4 * length - 1, 16 * length - 1]
        values += [far, bias_at_query(module, 16 * length - 1)]
    out.update(queries=queries, values=values, depends_on_query=depends, heads=first.shape[0])
    return out
