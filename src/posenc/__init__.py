"""posenc: every positional encoding for transformers behind one API.

>>> import posenc
>>> rope = posenc.create("rope", dim=64)
>>> attn = posenc.Attention(256, 4, encoding="alibi", causal=True)

``import posenc`` needs torch alone; figures, the CLI and the experiments import their extras
when first used.
"""

from . import functional
from .attention import Attention, KVCache
from .rope_config import rope_from_config
from .schemes import PositionalEncoding, available, create, register, scheme_class

__version__ = "0.1.0"

__all__ = [
    "Attention",
    "KVCache",
    "PositionalEncoding",
    "available",
    "create",
    "functional",
    "register",
    "rope_from_config",
    "scheme_class",
    "__version__",
]
