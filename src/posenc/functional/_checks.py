"""Input validation shared by the functional core.

Every check raises ``ValueError`` or ``TypeError`` with a message that names the value received
and what is accepted, so a user never has to read a traceback from deep inside torch.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable

import torch
from torch import Tensor

from .. import _memory

__all__ = [
    "check_base",
    "check_bool",
    "check_number",
    "check_choice",
    "check_even_dim",
    "check_positive_int",
    "check_finite_positions",
    "check_integer_positions",
    "as_positions",
    "has_values",
    "check_fits",
    "check_table_fits",
    "broadcast_shape",
    "check_no_overlap",
    "check_seq_dim",
    "check_int",
    "check_not_meta",
    "check_meta_mix",
    "check_scale_fits",
    "check_device",
]


_LARGEST = 2**31 - 1


def check_positive_int(name: str, value: object) -> int:
    """Return ``value`` as an int if it is a positive whole number, else raise.

    Values, not types, are checked: ``8``, ``8.0``, ``numpy.int64(8)`` and a 0-d integer tensor are all 8.
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a positive integer, got {value!r}")
    try:
        number = operator.index(value)  # int, numpy integers, 0-d integer tensors
    except TypeError:
        if not isinstance(value, numbers.Real) or not math.isfinite(value) or not float(value).is_integer():
            raise TypeError(f"{name} must be a positive integer, got {value!r}") from None
        number = int(value)
    if number <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if number > _LARGEST:  # sizes and counts: torch could not allocate or index past this
        raise ValueError(f"{name} must be at most 2**31 - 1, got {value!r}")
    return number


def check_int(name: str, value: object, *, low: int = 0) -> int:
    """Return ``value`` as an int if it is a whole number (as :func:`check_positive_int` reads one)
    from ``low`` to 2**63 - 1, else a TypeError (not a number: a string, a bool, a fraction) or a
    ValueError (out of range) naming ``name``. A symbolic size (``torch.SymInt``, while tracing or
    exporting with a dynamic length) is a tensor's size already and is passed through unread, since
    reading it would fix the traced length."""
    if isinstance(value, torch.SymInt):
        return value
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer >= {low}, got {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        if not isinstance(value, numbers.Real) or not math.isfinite(value) or not float(value).is_integer():
            raise TypeError(f"{name} must be an integer >= {low}, got {value!r}") from None
        number = int(value)
    if not low <= number < 2**63:
        raise ValueError(f"{name} must be an integer >= {low} (and below 2**63), got {value!r}")
    return number


def check_device(device: object, name: str = "device") -> torch.device | None:
    """``device`` as a ``torch.device`` (None stays None), else a TypeError or ValueError naming it."""
    if device is None or isinstance(device, torch.device):
        return device
    if isinstance(device, bool) or not isinstance(device, (str, int)):
        raise TypeError(f"{name} must be a torch.device, a string such as 'cpu' or 'cuda:0', or None; got {device!r}")
    try:
        return torch.device(device)
    except (RuntimeError, ValueError, TypeError) as err:
        raise ValueError(f"{name} {device!r} is not a torch device ('cpu', 'cuda', 'cuda:1', 'meta', ...)") from err


def check_not_meta(name: str, t: object, device: torch.device, other: str = "x") -> None:
    """Refuse a tensor ``t`` on the meta device (shapes only, no values) where the tensor it comes
    with (``other``) is on a real ``device``: its values are needed there."""
    if isinstance(t, Tensor) and t.device.type == "meta" and torch.device(device).type != "meta":
        raise ValueError(
            f"{name} is on the meta device (shapes only, no values) but {other} is on {device}; pass {name} on "
            f"{device} (or everything on meta)"
        )


def check_meta_mix(**tensors: object) -> None:
    """Refuse a call whose tensor arguments (name -> value; others are skipped) mix the meta device
    with real ones, in either direction: the first meta tensor is named, with a real one. A call
    wholly on meta (shapes only) is left to the function."""
    real = next(((n, t) for n, t in tensors.items() if isinstance(t, Tensor) and t.device.type != "meta"), None)
    if real is None:
        return
    for name, t in tensors.items():
        check_not_meta(name, t, real[1].device, real[0])


def check_scale_fits(name: str, value: float, dtype: torch.dtype) -> None:
    """Refuse a factor ``value`` that multiplies values of magnitude up to 1 (cos/sin tables) but is
    beyond the largest finite ``dtype``: every table entry would be inf or NaN without a word."""
    if abs(value) > torch.finfo(dtype).max:
        raise ValueError(
            f"{name}={value!r} is beyond the largest {dtype} ({torch.finfo(dtype).max:.4g}): the tables would be "
            f"infinite; pass a factor within {dtype}'s range (or a wider dtype)"
        )


#: The ways around a table of positions too large to build.
TABLE_HINT = (
    "build the rows for fewer positions at a time (a shorter length, the positions in use as a tensor, "
    "or chunks of them)"
)


def check_fits(
    what: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str | None, *, hint: str | None = None
) -> None:
    """Raise :class:`posenc._memory.TooLargeError` (a ValueError and a MemoryError) before a tensor
    larger than the memory available on ``device`` is built (:func:`posenc._memory.check_fits`)."""
    if torch.compiler.is_compiling():  # sizes may be symbolic; nothing is read in a graph
        return
    _memory.check_fits(what, shape, dtype, device, **({} if hint is None else {"hint": hint}))


def check_out(out: object, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device, what: str = "") -> Tensor:
    """``out`` if it is a tensor of ``shape``, ``dtype`` and ``device`` (what a function writes
    into); else a ValueError naming what is accepted (``what``: a note after it) and what was given."""
    if isinstance(out, Tensor) and out.shape == shape and out.dtype == dtype and out.device == device:
        return out
    got = f"{tuple(out.shape)} {out.dtype} {out.device}" if isinstance(out, Tensor) else type(out).__name__
    dims = ", ".join(str(n) for n in shape)
    raise ValueError(f"out must be [{dims}] of dtype {dtype} on {device}{what}, got {got}")


def byte_span(t: Tensor) -> tuple[int, int]:
    """The bytes ``[first, last]`` that ``t``'s elements occupy (its lowest address to its highest)."""
    low = sum((n - 1) * st for n, st in zip(t.shape, t.stride()) if st < 0)
    high = sum((n - 1) * st for n, st in zip(t.shape, t.stride()) if st > 0)
    size = t.element_size()
    return t.data_ptr() + low * size, t.data_ptr() + (high + 1) * size - 1


def check_no_overlap(target_name: str, target: Tensor, inputs: dict[str, object], what: str) -> None:
    """Refuse a tensor written to (``target``: an ``out=`` or a tensor rotated in place) whose memory
    overlaps any of ``inputs`` (name -> tensor; non-tensors are skipped): each write would change an
    input not yet read, and the result would be wrong without a word. ``what`` names the call in the
    message. Tensors without storage (``torch.func`` wrappers, tensors being compiled) and empty
    ones are passed, as are tensors on another device."""
    if not isinstance(target, Tensor) or not target.numel() or not plain(target) or target.device.type == "meta":
        return
    t0, t1 = byte_span(target)
    for name, tensor in inputs.items():
        if not isinstance(tensor, Tensor) or tensor.device != target.device or not tensor.numel():
            continue
        if not plain(tensor):
            continue
        s0, s1 = byte_span(tensor)
        if s0 <= t1 and t0 <= s1:
            raise ValueError(
                f"{what}: {target_name} shares memory with {name} (each write would change {name} before it "
                f"is read); write into a separate tensor, or pass {name} as a copy (.clone())"
            )


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape ``a`` and ``b`` broadcast to, or None where they do not (a plain loop:
    ``torch.broadcast_shapes`` costs ~15 us, as much as a cached bias lookup)."""
    if len(a) < len(b):
        a, b = b, a
    b = (1,) * (len(a) - len(b)) + tuple(b)
    out = []
    for m, n in zip(a, b):
        if m != n and m != 1 and n != 1:
            return None
        out.append(n if m == 1 else m)
    return tuple(out)


def check_table_fits(what: str, positions: object, width: int, device: torch.device | str | None) -> None:
    """:func:`check_fits` for a table ``[*p, width]`` formed in float64 at ``positions`` (an int
    ``n``: ``[n]``); other positions are left to :func:`as_positions` to check."""
    if isinstance(positions, int) and not isinstance(positions, bool):
        shape = (positions,) if positions >= 0 else None
    else:
        shape = tuple(positions.shape) if isinstance(positions, Tensor) else None
    if shape is not None:
        check_fits(what, (*shape, width), torch.float64, device, hint=TABLE_HINT)


def check_float_dtype(dtype: object, name: str = "dtype") -> torch.dtype:
    """Return ``dtype`` if it is a floating-point torch dtype, else raise TypeError: a table of
    cosines in an integer dtype would be truncated to 0 and 1 without a word."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(
            f"{name} must be a floating-point torch dtype (torch.float32, torch.bfloat16, torch.float16, "
            f"torch.float64), got {dtype!r}"
        )
    return dtype


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` if it is True or False, else raise TypeError: a string such as ``"false"``
    from a config file would otherwise be read by its truthiness, as True."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def check_seq_dim(x: Tensor, seq_dim: object) -> int:
    """``seq_dim`` as a negative axis of ``x`` (at most -2: the last axis holds the features)."""
    if isinstance(seq_dim, bool) or not isinstance(seq_dim, int):
        raise TypeError(f"seq_dim must be an int (the axis of x holding the sequence), got {seq_dim!r}")
    axis = seq_dim - x.dim() if seq_dim >= 0 else seq_dim
    if not -x.dim() <= axis <= -2:
        raise ValueError(
            f"seq_dim={seq_dim} is not a sequence axis of x of shape {tuple(x.shape)}: it must name one of "
            f"its axes but the last (the features): -2 for [b, h, s, hd], -3 (or 1) for [b, s, h, hd], "
            "-3 (or 0) for packed [total, h, hd]"
        )
    return axis


def check_number(name: str, value: object, *, low: float = -math.inf, positive: bool = False) -> float:
    """Return ``value`` as a float if it is a finite real number (not a bool) at least ``low`` (above
    0 when ``positive``), else raise naming ``name`` and what is accepted."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a finite number, got {value!r}")
    if not math.isfinite(value) or value < low or (positive and not value > 0):
        what = (
            "a positive finite number"
            if positive
            else f"a finite number >= {low:g}"
            if low > -math.inf
            else "a finite number"
        )
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return float(value)


def check_base(value: object, name: str = "base") -> float:
    """Return ``value`` as a float if it is a finite real number greater than 1, else raise ValueError.
    While compiling it is passed through unchecked: under ``dynamic=True`` a float is symbolic, and
    the module's config was checked when it was built."""
    if torch.compiler.is_compiling():
        return value  # type: ignore[return-value]
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or not value > 1:
        raise ValueError(f"{name} must be a finite number greater than 1, got {value!r}")
    return float(value)


def check_even_dim(name: str, value: object) -> int:
    """Return ``value`` as an int if it is a positive even number (features come in pairs)."""
    value = check_positive_int(name, value)
    if value % 2:
        raise ValueError(f"{name} must be a positive even number (features come in pairs), got {value}")
    return value


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise listing them."""
    choices = list(choices)
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; choose one of: {', '.join(map(repr, choices))}")
    return value  # type: ignore[return-value]


def plain(t: Tensor) -> bool:
    """Whether ``t`` is an ordinary tensor with storage: not a ``torch.func`` wrapper (under ``grad``
    every tensor, even one made inside, is a wrapper; under ``vmap`` the batched inputs are) and not
    a fake tensor while compiling. Caches, ``out=`` kernels and anything keyed on memory step aside
    for the others and run the reference formulas."""
    if torch.compiler.is_compiling():
        return False
    try:
        t.untyped_storage()
    except (NotImplementedError, RuntimeError):  # "Cannot access storage of TensorWrapper / BatchedTensorImpl"
        return False
    return True


def has_tangent(t: Tensor) -> bool:
    """Whether ``t`` carries a forward-mode tangent (``torch.autograd.forward_ad`` or ``torch.func.jvp``)."""
    from torch.autograd import forward_ad

    return isinstance(t, Tensor) and forward_ad.unpack_dual(t).tangent is not None


def tracing(*tensors: Tensor) -> bool:
    """Inside ``torch.compile``, or any of ``tensors`` is a ``torch.func`` wrapper (see :func:`plain`):
    no host reads of values, and no cache keyed on (or storing) tensors made there."""
    return torch.compiler.is_compiling() or not all(plain(t) for t in tensors)


def has_values(t: Tensor) -> bool:
    """Whether ``t``'s values can be read on the host now: not while compiling (a graph break, or
    a symbolic value), under a ``torch.func`` transform (a batched value) or on the ``meta``
    device (shapes only)."""
    return not tracing(t) and t.device.type != "meta"


def version_of(t: Tensor) -> int | None:
    """``t``'s version counter, bumped by every in-place write to it or to a view of it: the caches
    keep it beside what they hand out, so that a cached table or bias written to in place (a
    ``masked_fill_`` on what ``bias()`` returned) is rebuilt rather than served again. None for an
    inference tensor, which has none: an edit made under ``torch.inference_mode`` cannot be seen
    (treat what the caches hand out as read-only)."""
    return None if t.is_inference() else t._version


def stale_inference(cached: Tensor) -> bool:
    """Whether a cached tensor made under ``torch.inference_mode`` is asked for outside it, where it
    cannot be saved for backward: the caches rebuild it then."""
    return cached.is_inference() and not torch.is_inference_mode_enabled()


def check_finite_positions(positions: Tensor) -> None:
    """Reject NaN or infinite positions (skipped while compiling, where it would need a host sync,
    and on the meta device, which holds no values)."""
    if positions.is_floating_point() and has_values(positions):
        if not bool(torch.isfinite(positions).all()):
            bad = positions[~torch.isfinite(positions)].flatten()[0].item()
            raise ValueError(f"positions must be finite numbers, got {bad!r}")


def check_integer_positions(positions: Tensor, what: str) -> Tensor:
    """Return integer positions as a LongTensor; float positions with a fractional part are rejected.

    Used where the formula is defined on whole numbers only (T5 buckets, learned tables, Shaw's
    clipped index). Float tensors holding whole numbers are accepted and converted.
    """
    if positions.is_floating_point():
        check_finite_positions(positions)
        if has_values(positions) and not bool((positions == positions.round()).all()):
            bad = positions[positions != positions.round()].flatten()[0].item()
            raise TypeError(
                f"{what} needs integer positions, got a float position {bad!r}; "
                "pass an integer tensor (float positions are only meaningful for continuous encodings "
                "such as sinusoidal and rope)"
            )
        return positions.round().long()
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"{what} needs integer positions, got a tensor of dtype {positions.dtype}")
    return positions.long()


def as_positions(positions: int | Tensor | Iterable[float], *, device: torch.device | None = None) -> Tensor:
    """Normalise ``positions``: an int ``n`` means ``0..n-1``; a tensor is checked and kept.

    Integer and float32/float64 positions keep their dtype (every consumer forms its products in
    float64). Half-precision position tensors are refused: bf16 cannot even represent 257. Python
    sequences are converted with ``torch.as_tensor``.
    """
    device = check_device(device)
    if isinstance(positions, bool):
        raise TypeError(f"positions must be an int or a tensor, got {positions!r}")
    if isinstance(positions, int):
        if positions < 0:
            raise ValueError(f"positions as an int is a length and must be >= 0, got {positions}")
        check_fits(f"positions 0..{positions - 1}", (positions,), torch.int64, device, hint=TABLE_HINT)
        return torch.arange(positions, device=device)
    if isinstance(positions, float):
        raise TypeError(f"positions must be an int (a length) or a tensor, got the float {positions!r}")
    if not isinstance(positions, Tensor):
        try:
            positions = torch.as_tensor(positions)
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(f"positions must be an int or a tensor, got {type(positions).__name__}") from err
    if positions.dtype in (torch.float16, torch.bfloat16):
        raise TypeError(
            f"positions of dtype {positions.dtype} lose whole numbers past 256 or 2048; "
            "pass int64 (or float32/float64) positions"
        )
    if positions.dtype == torch.bool or positions.is_complex():
        raise TypeError(f"positions must be integer or real, got dtype {positions.dtype}")
    if device is not None and positions.device.type == "meta" and torch.device(device).type != "meta":
        raise ValueError(
            f"positions (or the tensors they come with) are on the meta device, but this encoding's "
            f"tables are on {device}: a meta-device run needs the module on meta too "
            "(build it under torch.device('meta') or call .to('meta'))"
        )
    check_finite_positions(positions)
    if device is not None:
        positions = positions.to(device)
    return positions


def two_pi_mod(angles: Tensor) -> Tensor:
    """Reduce float64 angles to [0, 2π) before they are cast to a lower precision."""
    return torch.remainder(angles, 2 * math.pi)
