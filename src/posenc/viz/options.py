"""What a figure may be asked for: :class:`PlotOptions`, and how those options become a scheme's
config (only the keys the scheme accepts; the atlas's defaults for the rest).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["PlotOptions", "scheme_label", "scheme_names", "family_of", "scheme_config", "code_matrix"]


#: The largest values a figure takes (a distance or dot-product figure of 40000 positions would need
#: a 12.8 GB matrix, and nobody could read it).
_LIMITS = {"dim": 8192, "positions": 8192, "heads": 1024}


@dataclass(frozen=True)
class PlotOptions:
    """Settings a figure may use; None means the kind's default (then the atlas's)."""

    dim: int | None = None  # code width (head width for rotary and Shaw)
    positions: int | None = None  # number of positions 0 .. positions-1
    base: float | None = None  # frequency base of sinusoids and rotary schemes
    heads: int | None = None  # heads of bias schemes
    method: str = "pca"  # 2D projection: "pca" or "umap" (needs the umap extra)
    seed: int = 0  # initialisation of learned tables
    scaling: Mapping[str, Any] | None = None  # RoPE context extension: an HF ``rope_scaling`` dict

    def __post_init__(self) -> None:
        for name in ("dim", "positions", "heads"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
            if value is not None and value > _LIMITS[name]:  # n x n float64 matrices: 512 MiB each at 8192 (~5 GB peak)
                raise ValueError(
                    f"{name} must be at most {_LIMITS[name]} for the atlas's figures and checks, got {value}"
                )
        if self.positions == 1:
            raise ValueError("positions must be at least 2: a figure compares positions")
        if self.base is not None and not (isinstance(self.base, (int, float)) and self.base > 1):
            raise ValueError(f"base must be a number greater than 1, got {self.base!r}")
        if self.scaling is not None and not isinstance(self.scaling, Mapping):
            raise ValueError(
                "scaling must be a mapping like Hugging Face's rope_scaling, e.g. "
                f"{{'rope_type': 'linear', 'factor': 4.0}}, got {type(self.scaling).__name__}"
            )

    def label(self, scheme: str) -> str:
        """``scheme`` as figure and table titles name it: with its RoPE scaling when one is given
        (``rope, yarn ×4``); see :func:`scheme_label`."""
        return scheme_label(scheme, self.scaling)


def scheme_label(scheme: str, scaling: Mapping[str, Any] | None = None) -> str:
    """The scheme's name in a title, with its RoPE scaling when one is given: ``rope``,
    ``rope, linear ×8``, ``rope, yarn ×4``, ``rope, dynamic`` (no factor given)."""
    if not scaling:
        return scheme
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    factor = scaling.get("factor")
    numeric = isinstance(factor, (int, float)) and not isinstance(factor, bool)
    return f"{scheme}, {kind}" + (f" ×{factor:g}" if numeric else "")


def scheme_names() -> list[str]:
    """Every name the atlas knows: the registered schemes, then the naive reference codes."""
    from .. import available
    from ..analysis import REFERENCE_ENCODINGS

    return [*available(), *REFERENCE_ENCODINGS]


def scheme_config(scheme: str, options: PlotOptions, **defaults: Any) -> dict[str, Any]:
    """Config keys for ``scheme`` from ``options`` (given values win over ``defaults``), restricted
    to the keys the scheme accepts; an option the scheme cannot take is a ValueError."""
    from ..analysis import ATLAS_DEFAULTS, is_reference
    from ..schemes import scheme_class

    if is_reference(scheme):  # only sine_only has a frequency base (index, fraction, binary would ignore one)
        accepted = {"dim", "base"} if scheme == "sine_only" else {"dim"}
    else:
        accepted = {f.name for f in dataclasses.fields(scheme_class(scheme).Config)}
    given = {"dim": options.dim, "base": options.base, "num_heads": options.heads, "scaling": options.scaling}
    if scheme not in ATLAS_DEFAULTS:  # a scheme registered after the atlas's table: fill what it needs
        width = 64 if family_of(scheme) in ("rotary", "relative") else 128
        defaults = {"dim": width, "num_heads": 8, **defaults}
    config = {k: v for k, v in defaults.items() if k in accepted and v is not None}
    if "max_len" in accepted and options.positions and options.positions > config.get("max_len", 0):
        config["max_len"] = options.positions  # a learned table as long as the figure (it has no --max-len)
    for key, value in given.items():
        if value is None:
            continue
        if key not in accepted:
            flag = "--heads" if key == "num_heads" else f"--{key}"
            raise ValueError(f"scheme {scheme!r} has no {key!r} ({flag}); it accepts: {', '.join(sorted(accepted))}")
        config[key] = value
    return config


def code_matrix(scheme: str, n: int | torch.Tensor, options: PlotOptions, **defaults: Any) -> torch.Tensor:
    """:func:`posenc.analysis.encoding_matrix` of ``scheme`` at ``n`` positions with these options."""
    from ..analysis import encoding_matrix

    return encoding_matrix(scheme, n, seed=options.seed, **scheme_config(scheme, options, **defaults))


def family_of(scheme: str) -> str:
    """``"reference"`` for the naive codes, else the registered class's family (no instance built)."""
    from ..analysis import is_reference
    from ..schemes import scheme_class

    return "reference" if is_reference(scheme) else scheme_class(scheme).family
