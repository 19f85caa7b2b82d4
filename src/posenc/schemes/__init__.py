"""Every positional-encoding scheme, one per file, registered by name."""

# ruff: noqa: I001 -- the import order is the registration order, which posenc.available() and the atlas follow
from .base import PositionalEncoding, available, create, register, scheme_class
from .none import NoPositionalEncoding
from .sinusoidal import Sinusoidal
from .learned import Learned
from .shaw import Shaw
from .t5 import T5Bias
from .alibi import ALiBi
from .rope import Rope
from .xpos import XPos
from .sinusoidal_nd import SinusoidalND
from .rope_axial import RopeAxial
from .mrope import MRope
from .fire import FIRE
from .dpb import DynamicPositionBias
from .cope import CoPE
from .forgetting import Forgetting
from .kerple import KERPLE
from .sandwich import Sandwich

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
    "MRope",
    "FIRE",
    "DynamicPositionBias",
    "CoPE",
    "Forgetting",
    "KERPLE",
    "Sandwich",
]
