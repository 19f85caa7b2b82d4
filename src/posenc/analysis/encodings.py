"""Every scheme (and the naive references) as a matrix of position codes, positions x features.

Shape legend: ``n`` positions, ``d`` code width (the scheme's ``dim``), ``h`` heads, ``hd`` head
width, ``r`` rotated width.

Position convention: rows follow ``positions``; an int ``n`` means positions ``0..n-1``, so row
``p`` is the code of position ``p`` (the articles' "position 1" is row 1).

What the matrix is, per family (all float64):

* absolute (``sinusoidal``, ``learned``) — the code added to the token embedding, ``encode(positions)``
  (the sinusoid recomputed in float64 from its config);
* rotary (``rope``, ``xpos``) — the rotated image of the unit query ``u`` (1 on the first feature
  of every rotated pair, 0 elsewhere) at each position: the (cos, sin) features of every angle, with
  the scaling's attention factor and xPos's query decay. For RoPE, ``E[m] · E[n]`` is exactly the
  logit between the query ``u`` at ``m`` and the key ``u`` at ``n``;
* bias (``t5``, ``alibi``) — per head, the bias between a query at each position and the key at
  position 0 (the key ``p`` tokens back, valid under a causal mask): ``[n, h]``;
* relative (``shaw``) — the key embedding ``a^K`` that a query at position ``p`` uses for the key at
  position 0 (distance clipped at ``max_relative_position``): ``[n, hd]``;
* ``none`` — zeros ``[n, dim]``;
* reference names (:data:`~posenc.analysis.references.REFERENCE_ENCODINGS`) — the naive codes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor

from .. import functional as F
from ..schemes import PositionalEncoding, available, create, scheme_class
from ..schemes.shaw import Shaw
from ..schemes.sinusoidal import Sinusoidal
from .references import REFERENCE_ENCODINGS, reference_encoding

__all__ = [
    "ATLAS_DEFAULTS",
    "atlas_config",
    "build_scheme",
    "encoding_matrix",
    "scheme_family",
    "is_reference",
    "is_data_dependent",
]

#: Config the atlas uses for each name when the caller gives none (the caller's keys win).
ATLAS_DEFAULTS: dict[str, dict[str, Any]] = {
    "none": {"dim": 128},
    "sinusoidal": {"dim": 128},
    "learned": {"dim": 128, "max_len": 1024},
    "shaw": {"dim": 64, "max_relative_position": 16},
    "t5": {"num_heads": 8},
    "alibi": {"num_heads": 8},
    "rope": {"dim": 64},
    "xpos": {"dim": 64},
    "index": {"dim": 128},
    "fraction": {"dim": 128},
    "binary": {"dim": 16},  # 16 bits count to 65535
    "sine_only": {"dim": 128},
}


def is_reference(scheme: object) -> bool:
    """True for the names of the naive reference codes (not registered schemes)."""
    return isinstance(scheme, str) and scheme in REFERENCE_ENCODINGS


def _check_name(scheme: object) -> str:
    if isinstance(scheme, str) and (scheme in REFERENCE_ENCODINGS or scheme in available()):
        return scheme
    choices = ", ".join([*available(), *REFERENCE_ENCODINGS])
    raise ValueError(f"unknown scheme {scheme!r}: pass a PositionalEncoding or one of: {choices}")


#: Values for required config keys of schemes that :data:`ATLAS_DEFAULTS` does not list.
_FALLBACK = {"dim": 64, "num_heads": 8}


def atlas_config(name: str, **config: Any) -> dict[str, Any]:
    """``config`` over :data:`ATLAS_DEFAULTS` for ``name`` (defaults only fill the keys not given).

    A registered scheme missing from :data:`ATLAS_DEFAULTS` gets ``dim=64`` / ``num_heads=8`` for
    those of the two that its config requires.
    """
    name = _check_name(name)
    if name in ATLAS_DEFAULTS:
        return {**ATLAS_DEFAULTS[name], **config}
    required = [
        f.name
        for f in dataclasses.fields(scheme_class(name).Config)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    return {**{k: v for k, v in _FALLBACK.items() if k in required}, **config}


def is_data_dependent(scheme: str | PositionalEncoding) -> bool:
    """True for schemes whose position term depends on the queries, keys or layer input (their class
    attribute ``data_dependent``: CoPE, forgetting attention): they have no code from positions alone,
    so the atlas neither draws nor checks them."""
    if isinstance(scheme, PositionalEncoding):
        return bool(scheme.data_dependent)
    if is_reference(_check_name(scheme)):
        return False
    return bool(getattr(scheme_class(scheme), "data_dependent", False))


def scheme_family(scheme: str | PositionalEncoding) -> str:
    """``"reference"`` for the naive codes, else the scheme's family (none/absolute/rotary/bias/relative)."""
    if isinstance(scheme, PositionalEncoding):
        return scheme.family
    if is_reference(_check_name(scheme)):
        return "reference"
    return scheme_class(scheme).family


def build_scheme(scheme: str | PositionalEncoding, *, seed: int = 0, **config: Any) -> PositionalEncoding:
    """A scheme built from its name with :func:`atlas_config`, its random initialisation drawn from
    ``seed`` (the global RNG is left untouched); an instance is returned as it is."""
    if isinstance(scheme, PositionalEncoding):
        if config:
            raise ValueError(f"config {sorted(config)} cannot be applied to an already built {type(scheme).__name__}")
        return scheme
    name = _check_name(scheme)
    if is_reference(name):
        raise ValueError(f"{name!r} is a reference code of the atlas, not a scheme; use encoding_matrix")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return create(name, **atlas_config(name, **config))


def unit_query(width: int, rotated: int, layout: str) -> Tensor:
    """``[width]`` float64: 1 on the first feature of every rotated pair (``layout``), 0 elsewhere;
    RoPE turns it into the (cos, sin) of each angle."""
    u = torch.zeros(width, dtype=torch.float64)  # [hd]
    if layout == "half":
        u[: rotated // 2] = 1.0
    else:
        u[0:rotated:2] = 1.0
    return u


def _scheme_matrix(module: PositionalEncoding, positions: Tensor) -> Tensor:
    family = module.family
    if module.data_dependent:
        raise ValueError(
            f"scheme {module.name!r} has no code from positions alone: its position term depends on the "
            "queries, keys or layer input (data_dependent)"
        )
    if isinstance(module, Sinusoidal):
        c = module.config
        table = F.sinusoidal(
            positions, c.dim, base=c.base, layout=c.layout, frequencies=c.frequencies, dtype=torch.float64
        )
        return table * module.scale.to(torch.float64) if module.scale is not None else table
    if family == "absolute":
        return module.encode(positions).to(torch.float64)
    if family == "rotary":
        c = module.config
        u = unit_query(c.dim, c.rotary_width, c.layout).to(positions.device)
        q = u.expand(1, 1, positions.shape[0], c.dim)  # [1, 1, n, hd]
        rotated, _ = module.rotate(q, q, positions, positions)
        return rotated[0, 0]  # [n, hd]
    key = torch.zeros(1, dtype=torch.long, device=positions.device)
    if family == "bias":
        bias = module.bias(positions, key)  # [h, n, 1]
        return bias[:, :, 0].T.to(torch.float64)  # [n, h]
    if isinstance(module, Shaw):
        index = module.index(positions, key)[:, 0]  # [n]
        return module.key_embeddings.weight.to(torch.float64)[index]  # [n, hd]
    if family != "none":
        raise ValueError(
            f"encoding_matrix has no code for scheme {module.name!r} of family {family!r}; "
            "it draws none, absolute, rotary, bias and shaw schemes"
        )
    width = getattr(module.config, "dim", None) or ATLAS_DEFAULTS["none"]["dim"]
    return torch.zeros(positions.shape[0], width, dtype=torch.float64, device=positions.device)


def encoding_matrix(
    scheme: str | PositionalEncoding,
    positions: int | Tensor,
    *,
    seed: int = 0,
    seq_len: int | None = None,
    **config: Any,
) -> Tensor:
    """The position codes of ``scheme`` at ``positions`` (an int ``n`` or a 1-D tensor): float64 ``[n, d]``.

    ``scheme`` is a registered name (built with :func:`atlas_config` and ``seed``), a built
    :class:`~posenc.PositionalEncoding`, or a reference name (``index``, ``fraction``, ``binary``,
    ``sine_only``; ``config`` may give ``dim`` and ``base``, ``seq_len`` is the fraction's ``L``).
    The module docstring says what the rows are for each family. Learned tables raise for positions
    past their ``max_len``. Registered schemes ignore ``seq_len``: their codes depend on the positions
    alone (length-dependent RoPE scalings take the length from the largest position, as HF does).
    """
    if isinstance(scheme, PositionalEncoding):
        name = None
    else:
        name = _check_name(scheme)
    p = F.as_positions(positions)
    if p.dim() != 1:
        raise ValueError(f"positions must be an int or a 1-D tensor, got shape {tuple(p.shape)}")
    if name is not None and is_reference(name):
        cfg = atlas_config(name, **config)
        unknown = sorted(set(cfg) - {"dim", "base"})
        if unknown:
            raise ValueError(f"reference code {name!r} does not take {unknown}; it accepts: dim, base")
        return reference_encoding(
            name,
            positions if isinstance(positions, int) else p,
            cfg["dim"],
            seq_len=seq_len,
            base=cfg.get("base", 10000.0),
        )
    module = build_scheme(scheme, seed=seed, **config)
    param = next(module.parameters(), None)
    buf = next(module.buffers(), None)
    device = param.device if param is not None else buf.device if buf is not None else p.device
    with torch.no_grad():
        return _scheme_matrix(module, p.to(device))
