"""Shared plumbing of the figures: the lazy matplotlib import, array conversion, saving.

Figures are built on :class:`matplotlib.figure.Figure` directly (no ``pyplot``): no global state,
no GUI backend, safe to call from any thread, and nothing to close afterwards.
"""

from __future__ import annotations

import functools
import io
from pathlib import Path
from typing import Any

from .._files import replaced_whole

__all__ = ["SUFFIXES", "new_figure", "as_array", "show_matrix", "save_figure", "figure_bytes", "require_matplotlib"]

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


#: Along an axis whose cells would be narrower than this many pixels, :func:`show_matrix` gives each
#: pixel the mean colour of the cells around it; at this size or more each cell is a sharp block
#: ("nearest" draws cells of 1 or 2 pixels unevenly, and skips cells narrower than a pixel: moiré).
MIN_CELL_PIXELS = 3


def show_matrix(
    ax: Any,
    values: Any,
    *,
    cmap: Any,
    vmin: float | None = None,
    vmax: float | None = None,
    extent: tuple[float, float, float, float] | None = None,
    aspect: str = "auto",
) -> Any:
    """``ax.imshow(values, interpolation="nearest")`` that stays faithful at any size; returns the image.

    Small images are drawn exactly as ``imshow`` draws them: each cell a sharp block. Along an axis
    with more cells than :data:`MIN_CELL_PIXELS` per pixel allows (8192 positions in a few hundred
    pixels), each pixel instead shows the mean *colour* of the cells around it (weighted by a tent
    two pixels wide, see :func:`_pixel_mean`), worked out when the figure is drawn, at whatever dpi
    it is saved with. A column that alternates every position then shows as the mean of its two
    colours instead of moiré bands that are not in the data; the other axis stays sharp, the
    image's interpolation stays "nearest", and ``get_array()`` still holds every cell.
    """
    image = _matrix_image_class()(ax, cmap=cmap, interpolation="nearest", origin="upper", extent=extent)
    ax.set_aspect(aspect)
    image.set_data(values)
    image.set_clip_path(ax.patch)
    if vmin is not None or vmax is not None:
        image.set_clim(vmin, vmax)
    image.autoscale_None()
    image.set_extent(image.get_extent())  # the data limits and sticky edges, as imshow sets them
    ax.add_image(image)
    return image


@functools.cache
def _matrix_image_class() -> type:
    """The image class of :func:`show_matrix` (made on first use: matplotlib is imported lazily)."""
    from matplotlib.image import AxesImage
    from matplotlib.transforms import Bbox, TransformedBbox

    class MatrixImage(AxesImage):
        """An ``AxesImage`` that averages colours along each axis too dense to show cell by cell."""

        def make_image(self, renderer: Any, magnification: float = 1.0, unsampled: bool = False) -> Any:
            data = self.get_array()
            if unsampled or data is None or data.ndim != 2 or not data.size:
                return super().make_image(renderer, magnification, unsampled)
            x0, x1, y0, y1 = self.get_extent()
            in_box = Bbox([[x0, y0], [x1, y1]])
            out_box = TransformedBbox(in_box, self.get_transform())
            rows, cols = data.shape
            height, width = abs(out_box.height) * magnification, abs(out_box.width) * magnification
            target_rows = max(1, round(height)) if height < MIN_CELL_PIXELS * rows else rows
            target_cols = max(1, round(width)) if width < MIN_CELL_PIXELS * cols else cols
            if (target_rows, target_cols) == (rows, cols):
                return super().make_image(renderer, magnification, unsampled)
            colours = _mean_colours(self, data, target_rows, target_cols)  # [target_rows, target_cols, 4]
            clip = (self.get_clip_box() or self.axes.bbox) if self.get_clip_on() else self.figure.bbox
            try:  # matplotlib's own resampler (private; 3.7-3.11 share this signature)
                return self._make_image(colours, in_box, out_box, clip, magnification, unsampled=False)
            except (AttributeError, TypeError):  # another matplotlib: plain imshow rather than no figure
                return super().make_image(renderer, magnification, unsampled)

    return MatrixImage


def _mean_colours(image: Any, data: Any, rows: int, cols: int) -> Any:
    """The colours of ``image`` showing ``data [n, m]``, resampled to ``[rows, cols, 4]``."""
    import numpy as np

    image.norm.autoscale_None(data)
    n, m = data.shape
    step = max(1, (1 << 20) // m)  # about a million cells coloured at a time (a 8192² matrix is 67 M)
    binned = np.concatenate(
        [_pixel_mean(image.to_rgba(data[start : start + step]), cols, axis=1) for start in range(0, n, step)]
    )  # [n, cols, 4]
    return _pixel_mean(binned, rows, axis=0)


def _pixel_mean(values: Any, pixels: int, axis: int) -> Any:
    """``values`` resampled to ``pixels`` along ``axis``: each pixel the mean of the cells under a
    tent two pixels wide centred on it, weighted by how much of each cell the tent covers.

    Exact for cells of constant colour (the integral of the tent over each cell, from a double
    cumulative sum). A box one pixel wide would leave faint bands where a pattern repeats every
    pixel or so (bit 4 of 8192 positions); the tent, like matplotlib's own antialiasing filter,
    all but removes them. Where a pattern alternating every cell would repeat in under 3 pixels
    (2/3 to 2 cells per pixel) the tent spans two cells on each side instead: the sinusoid's sin/cos
    columns (512 features in ~460-520 pixels) keep a third or more of their contrast through a tent
    of one pixel, which beats against the pixel grid into stripes that are not in the data, and none
    through one of two cells."""
    import numpy as np

    n = values.shape[axis]
    if pixels == n:
        return values
    values = np.moveaxis(np.asarray(values, dtype=np.float64), axis, 0)  # [n, ...]
    width = n / pixels  # one pixel, in cells
    half = 2.0 if 2 / 3 < width < 2.0 else width  # the tent's half-width, in cells
    centres = (np.arange(pixels) + 0.5) * width
    points = np.concatenate([centres - half, centres, centres + half])  # [3 * pixels]

    def twice_integrated(f: Any) -> Any:
        """G(x) = ∫₀ˣ ∫₀ʸ f, at ``points``; f is constant on each cell and 0 outside [0, n]."""
        once = np.concatenate([np.zeros_like(f[:1]), np.cumsum(f, axis=0)])  # [n + 1, ...]
        twice = np.concatenate([np.zeros_like(f[:1]), np.cumsum(once[:-1] + f / 2, axis=0)])
        inside = np.clip(points, 0.0, n)
        cell = np.minimum(np.floor(inside).astype(int), n - 1)
        shape = (-1, *([1] * (f.ndim - 1)))
        t = (inside - cell).reshape(shape)
        beyond = np.maximum(points - n, 0.0).reshape(shape)
        return twice[cell] + once[cell] * t + f[cell] * t * t / 2 + once[n] * beyond

    def tent(f: Any) -> Any:  # ∫ f · tent, up to the tent's constant height
        left, middle, right = np.split(twice_integrated(f), 3)
        return left - 2 * middle + right

    covered = tent(np.ones((n, *([1] * (values.ndim - 1)))))  # less than a whole tent at the edges
    return np.moveaxis(tent(values) / covered, 0, axis)


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
    with replaced_whole(path) as tmp:  # Ctrl-C while saving leaves no half-written figure
        figure.savefig(tmp, format=fmt, dpi=dpi, metadata=_metadata(fmt))
    return path


def figure_bytes(figure: Any, fmt: str = "png", *, dpi: int = 90, colours: int | None = None) -> bytes:
    """The figure encoded as ``fmt`` (png or svg) in memory, for embedding in the report.

    ``colours`` (PNG only, 2 to 256) writes a palette PNG of at most that many colours: the figure
    is rendered by Agg, and Pillow's maximum-coverage quantizer picks the palette without
    dithering, which makes the file about half as large. Every pixel keeps its colour to within
    about 12 levels of 255 per channel, a colour map's ends included (median cut, no smaller over
    the atlas, moved the darkest blue of RdBu to a grey, up to 60 levels off).
    """
    if fmt not in ("png", "svg"):
        raise ValueError(f"figure_bytes encodes 'png' or 'svg', got {fmt!r}")
    if colours is not None:
        if fmt != "png" or isinstance(colours, bool) or not isinstance(colours, int) or not 2 <= colours <= 256:
            raise ValueError(f"colours must be a whole number from 2 to 256, for png only; got {colours!r} ({fmt})")
        return _palette_png(figure, dpi, colours)
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt, dpi=dpi, metadata=_metadata(fmt))
    return buffer.getvalue()


def _palette_png(figure: Any, dpi: int, colours: int) -> bytes:
    """``figure`` at ``dpi`` as a PNG of at most ``colours`` colours (see :func:`figure_bytes`)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image  # a dependency of matplotlib

    canvas = FigureCanvasAgg(figure)
    figure.set_dpi(dpi)
    rgba, size = canvas.print_to_buffer()
    image = Image.frombuffer("RGBA", size, rgba, "raw", "RGBA", 0, 1).convert("RGB")  # figures are opaque
    return _quantized_png(image, colours)


def _quantized_png(image: Any, colours: int) -> bytes:
    """An RGB Pillow ``image`` as a palette PNG of at most ``colours`` colours (no dithering)."""
    from PIL import Image

    palette = image.quantize(colors=colours, method=Image.Quantize.MAXCOVERAGE, dither=Image.Dither.NONE)
    buffer = io.BytesIO()
    palette.save(buffer, format="PNG", compress_level=6)
    return buffer.getvalue()


def compact_png(data: bytes, colours: int = 256) -> bytes:
    """A PNG file's bytes re-encoded as a palette PNG of at most ``colours`` colours, composited on
    white (as the page shows it), when that is smaller; else ``data`` as it was (also when Pillow
    cannot read it). For plots the atlas embeds as files (the experiments' figures)."""
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as opened:
            rgba = opened.convert("RGBA")
    except Exception:  # noqa: BLE001 - any image Pillow cannot read is embedded as it came
        return data
    white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    smaller = _quantized_png(Image.alpha_composite(white, rgba).convert("RGB"), colours)
    return smaller if len(smaller) < len(data) else data


def _metadata(fmt: str) -> dict[str, Any]:
    # No creation dates: the same figure gives the same bytes (reproducible reports).
    if fmt == "png":
        return {"Software": None}
    if fmt == "svg":
        return {"Date": None}
    return {"CreationDate": None}
