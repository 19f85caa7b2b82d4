"""Shared plumbing of the figures: the lazy matplotlib import, array conversion, saving.

Figures are built on :class:`matplotlib.figure.Figure` directly (no ``pyplot``): no global state,
no GUI backend, safe to call from any thread, and nothing to close afterwards.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

__all__ = ["SUFFIXES", "new_figure", "as_array", "save_figure", "figure_bytes", "require_matplotlib"]

#: File formats a figure can be saved as, by suffix.
SUFFIXES = ("png", "svg", "pdf")


def require_matplotlib() -> Any:
    """The ``matplotlib`` module, or an ImportError naming the extra that provides it."""
    try:
        import matplotlib
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError("posenc's figures need matplotlib: pip install 'posenc[viz]'") from err
    return matplotlib


def new_figure(width: float, height: float, **kwargs: Any) -> Any:
    """A blank ``Figure`` of ``width`` × ``height`` inches with constrained layout."""
    require_matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained", **kwargs)


def integer_ticks(ax: Any) -> None:
    """Tick only whole numbers on both axes (positions, heads, features: no 2.5 or -0.5)."""
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.yaxis.get_major_locator().set_params(integer=True)


def as_array(values: Any, name: str = "values", ndim: int | None = None) -> Any:
    """A float64 numpy array from a tensor, array or sequence; checks the number of dimensions."""
    import numpy as np

    if hasattr(values, "detach"):
        values = values.detach().to("cpu").double().numpy()  # device-agnostic: figures draw on the CPU
    array = np.asarray(values, dtype=np.float64)
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(array.shape)}")
    return array


def check_suffix(path: str | Path) -> str:
    """The format named by ``path``'s suffix; ValueError listing the choices when it is not one."""
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in SUFFIXES:
        raise ValueError(
            f"cannot save a figure as {str(path)!r}: unknown suffix {('.' + suffix) if suffix else '(none)'}; "
            f"use one of {', '.join('.' + s for s in SUFFIXES)}"
        )
    return suffix


#: The finest resolution :func:`save_figure` writes (a 6.4-inch figure at 1200 dpi is 7680 pixels wide).
MAX_DPI = 1200


def save_figure(figure: Any, path: str | Path, *, dpi: int = 120) -> Path:
    """Write ``figure`` to ``path`` as PNG, SVG or PDF (chosen by the suffix); returns the path."""
    path = Path(path)
    fmt = check_suffix(path)
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not 1 <= dpi <= MAX_DPI:
        raise ValueError(f"dpi must be a whole number from 1 to {MAX_DPI}, got {dpi!r}")
    for folder in (path.parent, *path.parent.parents):
        if folder.exists() and not folder.is_dir():
            raise ValueError(f"cannot write {str(path)!r}: {str(folder)!r} is a file, not a folder")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format=fmt, dpi=dpi, metadata=_metadata(fmt))
    return path


def figure_bytes(figure: Any, fmt: str = "png", *, dpi: int = 90) -> bytes:
    """The figure encoded as ``fmt`` (png or svg) in memory, for embedding in the report."""
    if fmt not in ("png", "svg"):
        raise ValueError(f"figure_bytes encodes 'png' or 'svg', got {fmt!r}")
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt, dpi=dpi, metadata=_metadata(fmt))
    return buffer.getvalue()


def _metadata(fmt: str) -> dict[str, Any]:
    # No creation dates: the same figure gives the same bytes (reproducible reports).
    if fmt == "png":
        return {"Software": None}
    if fmt == "svg":
        return {"Date": None}
    return {"CreationDate": None}
