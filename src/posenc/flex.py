"""FlexAttention for bias schemes: the bias computed per score, never materialised.

The implementation is :mod:`posenc.kernels.flex` (see its docstring for when
:class:`posenc.Attention` takes this path); this module is its public face. A scheme's own
score-mod builder, defined in the scheme's module as ``<scheme name>_score_mod``, is reachable here
under that name too (``posenc.flex.alibi_score_mod``): it is looked up through the registry, so this
module names no scheme.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from .kernels.flex import (
    BLOCK_SIZE,
    MIN_BIAS_BYTES,
    ScoreMod,
    attend,
    available,
    block_mask,
    clear_errors,
    errors,
    flex_attention,
    get_mode,
    score_mod_for,
    set_mode,
    warmup,
)
from .schemes import available as _scheme_names
from .schemes import scheme_class

_SUFFIX = "_score_mod"


def _builders() -> dict[str, Callable[..., Any]]:
    """``<name>_score_mod`` of every registered scheme whose module defines one."""
    found = {}
    for name in _scheme_names():
        module = sys.modules.get(scheme_class(name).__module__)
        builder = getattr(module, name + _SUFFIX, None)
        if callable(builder):
            found[name + _SUFFIX] = builder
    return found


def __getattr__(attr: str) -> Callable[..., Any]:
    builder = _builders().get(attr) if attr.endswith(_SUFFIX) else None
    if builder is None:
        raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
    return builder


def __dir__() -> list[str]:
    return sorted({*globals(), *_builders()})


__all__ = [
    "ScoreMod",
    "score_mod_for",
    "block_mask",
    "flex_attention",
    "attend",
    "set_mode",
    "get_mode",
    "available",
    "errors",
    "clear_errors",
    "warmup",
    "MIN_BIAS_BYTES",
    "BLOCK_SIZE",
    *_builders(),
]
