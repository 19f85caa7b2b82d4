"""Every positional-encoding scheme, one per file, registered by name."""

from .alibi import ALiBi
from .base import PositionalEncoding, available, create, register, scheme_class
from .learned import Learned
from .none import NoPositionalEncoding
from .rope import Rope
from .rope_axial import RopeAxial
from .shaw import Shaw
from .sinusoidal import Sinusoidal
from .sinusoidal_nd import SinusoidalND
from .t5 import T5Bias
from .xpos import XPos

__all__ = [
    "PositionalEncoding",
    "available",
    "create",
    "register",
    "scheme_class",
    "NoPositionalEncoding",
    "Sinusoidal",
    "Learned",
    "Shaw",
    "T5Bias",
    "ALiBi",
    "Rope",
    "XPos",
    "SinusoidalND",
    "RopeAxial",
]
