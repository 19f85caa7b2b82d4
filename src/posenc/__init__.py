"""posenc: every positional encoding for transformers behind one API.

>>> import posenc
>>> rope = posenc.create("rope", dim=64)
>>> attn = posenc.Attention(256, 4, encoding="alibi", causal=True)

``import posenc`` needs torch alone; figures, the CLI and the experiments import their extras
when first used. torch itself is imported with the first name used (``posenc.create``, or any
``import posenc.X``): ``posenc.cli`` takes Ctrl-C over before torch loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import functional
    from .attention import Attention, KVCache
    from .config import encodings_from_config, layer_schedule, query_scales_from_config, rope_from_config
    from .schemes import PositionalEncoding, available, create, register, scheme_class

__version__ = "0.1.0"

__all__ = [
    "Attention",
    "KVCache",
    "PositionalEncoding",
    "available",
    "create",
    "encodings_from_config",
    "functional",
    "layer_schedule",
    "query_scales_from_config",
    "register",
    "rope_from_config",
    "scheme_class",
    "__version__",
]


#: Where each public name lives: imported with its module on first use (PEP 562).
_HOMES = {
    "Attention": "attention",
    "KVCache": "attention",
    "PositionalEncoding": "schemes",
    "available": "schemes",
    "create": "schemes",
    "encodings_from_config": "config",
    "layer_schedule": "config",
    "query_scales_from_config": "config",
    "functional": None,  # the submodule itself
    "register": "schemes",
    "rope_from_config": "config",
    "scheme_class": "schemes",
}


def __getattr__(name: str) -> Any:
    """A public name, or a submodule (``posenc.config``), imported on first use."""
    import importlib
    import importlib.util

    if name in _HOMES:
        home = _HOMES[name]
        module = importlib.import_module(f".{home or name}", __name__)
        value = module if home is None else getattr(module, name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
