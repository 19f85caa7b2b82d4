"""posenc.viz: each figure draws the numbers posenc.analysis computes, with labels a reader needs.

Pinned numbers: the sinusoid's cosine distances from position 1 at d = 1024 are the ones Pim 2023
("Understanding positional embeddings in transformer models") prints with
``scipy.spatial.distance.cosine``; the heatmap's cells are ``sin(p · base^(-2i/d))`` (Vaswani et
al. 2017, §3.5); ALiBi's slopes are ``2^(-8h/H)`` (Press et al. 2022, §3).
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import pytest
import torch

pytest.importorskip("matplotlib")

import posenc  # noqa: E402
from posenc import functional as F  # noqa: E402
from posenc.viz import PlotOptions, kinds_for, plot, save_figure  # noqa: E402


def _main_axes(figure):
    """Axes that are not colour bars."""
    return [ax for ax in figure.axes if ax.get_label() != "<colorbar>"]


def test_cosine_distance_figure_pins_pim_2023_numbers():
    figure = plot("sinusoidal", "cosine", PlotOptions(dim=1024, positions=251))
    ax = _main_axes(figure)[0]
    x, y = ax.lines[0].get_xdata(), ax.lines[0].get_ydata()
    assert list(x[:4]) == [0, 1, 2, 3] and len(x) == 251
    assert y[2] == pytest.approx(0.026488616022189992, abs=1e-7)
    assert y[3] == pytest.approx(0.09339161307513, abs=1e-7)
    assert y[30] == pytest.approx(0.4323030365719962, abs=1e-7)
    assert y[1] == 0.0
    assert "position 1" in ax.get_ylabel() and ax.get_xlabel() == "position"


def test_heatmap_of_a_one_signed_code_uses_its_whole_colour_scale():
    """ALiBi's biases are all <= 0: white (0) to blue over the whole bar, where the symmetric scale
    left its red half unused and the gentle heads near white; a two-signed code stays symmetric."""
    figure = plot("alibi", "heatmap", PlotOptions(heads=8, positions=50))
    image = _main_axes(figure)[0].images[0]
    assert image.get_array().max() == 0 and image.get_clim() == (-24.5, 0.0)  # head 0: -49 / 2
    assert image.get_cmap().name == "Blues_r"
    rgb = image.to_rgba(0.0)
    assert min(rgb[:3]) > 0.95  # zero is white, as on the symmetric scale
    figure = plot("learned", "heatmap", PlotOptions(dim=16, positions=20))
    image = _main_axes(figure)[0].images[0]
    low, high = image.get_clim()
    assert low == -high and image.get_cmap().name == "RdBu_r"


def test_heatmap_cells_are_the_sinusoid_and_have_a_colour_bar():
    figure = plot("sinusoidal", "heatmap", PlotOptions(dim=128, positions=50))
    ax = _main_axes(figure)[0]
    cells = ax.images[0].get_array()
    assert cells.shape == (50, 128)  # positions down, features across
    assert cells[1, 0] == pytest.approx(math.sin(1.0), abs=1e-12)
    assert cells[7, 2 * 5 + 1] == pytest.approx(math.cos(7 * 10000 ** (-10 / 128)), abs=1e-12)
    assert ax.images[0].get_clim() == (-1.0, 1.0)  # symmetric scale about zero
    assert len(figure.axes) == 2 and figure.axes[1].get_label() == "<colorbar>"
    assert ax.get_xlabel().startswith("feature") and ax.get_ylabel() == "position"
    assert "50 positions × 128 dims" in ax.get_title()


def test_clock_hands_point_at_sin_cos_of_each_pair():
    figure = plot("sinusoidal", "clock", PlotOptions(dim=128, positions=31))
    faces = _main_axes(figure)
    titles = [ax.get_title() for ax in faces]
    assert titles == ["position 0", "position 1", "position 2", "position 5", "position 10", "position 30"]
    hands = [t for t in faces[1].texts if hasattr(t, "xy")]  # arrows of position 1
    pairs = [0, 4, 16, 35, 63]  # spread fast to slow over the 64 pairs of d = 128
    for hand, pair in zip(hands, pairs):
        angle = 1.0 * 10000 ** (-2 * pair / 128)
        assert hand.xy == pytest.approx((math.sin(angle), math.cos(angle)), abs=1e-12)
    for hand in [t for t in faces[0].texts if hasattr(t, "xy")]:
        assert hand.xy == pytest.approx((0.0, 1.0))  # twelve o'clock at position 0


def test_bits_beside_bands_shows_binary_digits_lowest_first():
    figure = plot("sinusoidal", "bits", PlotOptions(positions=64))
    left, right = _main_axes(figure)
    bits = left.images[0].get_array()
    assert bits.shape == (64, 6)
    assert list(bits[5]) == [1, 0, 1, 0, 0, 0] and list(bits[63]) == [1] * 6
    assert right.images[0].get_array()[3, 0] == pytest.approx(math.sin(3.0))


def test_word_plus_position_puts_copies_on_the_unit_circle():
    figure = plot("sinusoidal", "word", PlotOptions(positions=8))
    ax = _main_axes(figure)[0]
    offsets = [torch.as_tensor(c.get_offsets().data) for c in ax.collections]
    words = [o for o in offsets if o.shape[0] == 1]
    copies = [o for o in offsets if o.shape[0] == 8]
    assert len(words) == len(copies) == 2
    for word, points in zip(words, copies):
        radii = (points - word).norm(dim=1)
        assert radii.tolist() == pytest.approx([1.0] * 8, abs=1e-12)


def test_word_plus_position_labels_only_the_first_turn_when_crowded():
    figure = plot("sinusoidal", "word", PlotOptions(positions=100))
    ax = _main_axes(figure)[0]
    assert sorted(int(t.get_text()) for t in ax.texts) == sorted(list(range(8)) * 2)  # 2 words x positions 0-7
    copies = [c.get_offsets().data for c in ax.collections if c.get_offsets().shape[0] == 100]
    assert len(copies) == 2 and all(abs(float(((p - p.mean(0)) ** 2).sum(1).mean()) - 1.0) < 0.05 for p in copies)


def test_alibi_slopes_and_lines_per_head():
    slopes = _main_axes(plot("alibi", "slopes", PlotOptions(heads=8)))[0]
    heights = [bar.get_height() for bar in slopes.patches]
    assert heights == pytest.approx([2.0 ** (-(h + 1)) for h in range(8)])
    assert slopes.get_yscale() == "log"
    lines = _main_axes(plot("alibi", "logits", PlotOptions(heads=8, positions=100)))[0].lines
    head_lines = [line for line in lines if line.get_label().startswith("head")]
    assert len(head_lines) == 8
    assert head_lines[0].get_ydata()[99] == pytest.approx(-0.5 * 99)
    assert head_lines[0].get_label() == "head 0 (m = 0.5)"


def test_t5_bucket_map_matches_the_bucket_function():
    figure = plot("t5", "buckets", PlotOptions(positions=64))
    matrix = _main_axes(figure)[1].images[0].get_array()  # [query, key]
    q, k = torch.meshgrid(torch.arange(64), torch.arange(64), indexing="ij")
    expected = F.t5_relative_bucket(k - q, bidirectional=True, num_buckets=32, max_distance=128)
    assert (torch.as_tensor(matrix) == expected.double()).all()


def test_rope_decay_starts_at_one_and_falls():
    figure = plot("rope", "logits", PlotOptions(positions=256))
    mean_line = _main_axes(figure)[0].lines[0].get_ydata()  # mean over q = k ~ N(0, I) of R(t)q·k / d
    assert mean_line[0] == pytest.approx(1.0, abs=0.05)  # |q|² / d
    assert mean_line[200:].mean() < 0.6 * mean_line[0]


def test_projection_is_coloured_by_position():
    figure = plot("sinusoidal", "projection", PlotOptions(positions=1000))
    ax = _main_axes(figure)[0]
    scatter = ax.collections[0]
    assert scatter.get_offsets().shape == (1000, 2)
    assert list(scatter.get_array()[:3]) == [0, 1, 2]
    assert ax.get_xlabel() == "PCA component 1" and figure.axes[-1].get_ylabel() == "position"


def test_grid_distance_of_a_two_axis_sinusoid_is_symmetric_in_rows_and_columns():
    figure = plot("sinusoidal_nd", "grid", PlotOptions(positions=16))
    centre, corner = (torch.as_tensor(ax.images[0].get_array()) for ax in _main_axes(figure))
    assert centre.shape == corner.shape == (16, 16)
    assert centre[8, 8] == 0.0 and corner[0, 0] == 0.0
    assert torch.allclose(centre, centre.T, atol=1e-12)  # the same sinusoid on both axes
    assert corner[0, 1] < corner[0, 3] < corner[0, 8]  # farther along a row, farther in code


def test_kinds_follow_the_family():
    assert kinds_for("sinusoidal") == [
        *("heatmap", "clock", "dot", "cosine", "distance", "projection", "bits", "word", "waves", "concat")
    ]
    assert kinds_for("shaw") == ["heatmap", "clipped", "logits"]
    assert kinds_for("alibi") == ["heatmap", "logits", "slopes", "bias"]
    assert kinds_for("t5") == ["heatmap", "logits", "buckets", "bias"]
    assert kinds_for("rope") == [
        *("heatmap", "clock", "dot", "cosine", "distance", "projection", "logits"),
        *("rotation", "wavelengths", "scalings", "decay"),
    ]
    assert "decay" in kinds_for("xpos") and "wavelengths" not in kinds_for("xpos")
    assert "grid" in kinds_for("rope_axial") and "grid" not in kinds_for("rope")
    assert kinds_for("none") == []
    assert "grid" in kinds_for("sinusoidal_nd") and "grid" not in kinds_for("sinusoidal")


@pytest.mark.parametrize(
    ("scheme", "kind", "options", "message"),
    [
        ("sinusoidal", "spiral", PlotOptions(), "choose one of: heatmap, clock"),
        ("bogus", "heatmap", PlotOptions(), "choose one of: none, sinusoidal"),
        ("alibi", "cosine", PlotOptions(), "kinds for 'alibi': heatmap, logits, slopes, bias"),
        ("t5", "heatmap", PlotOptions(base=500.0), "has no 'base' (--base)"),
    ],
)
def test_bad_requests_name_the_choices(scheme, kind, options, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plot(scheme, kind, options)


def test_options_are_validated():
    with pytest.raises(ValueError, match="dim must be a positive integer, got 0"):
        PlotOptions(dim=0)
    with pytest.raises(ValueError, match="base must be a number greater than 1, got 1"):
        PlotOptions(base=1)


@pytest.mark.parametrize(("suffix", "magic"), [("png", b"\x89PNG"), ("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_save_figure_by_suffix(tmp_path, suffix, magic):
    path = save_figure(plot("alibi", "slopes"), tmp_path / f"slopes.{suffix}")
    assert path.read_bytes().startswith(magic)


def test_save_figure_rejects_unknown_suffix(tmp_path):
    with pytest.raises(ValueError, match=r"unknown suffix \.gif; use one of \.png, \.svg, \.pdf"):
        save_figure(plot("alibi", "slopes"), tmp_path / "slopes.gif")


@pytest.mark.parametrize(
    ("scheme", "kind", "options"),
    [
        ("sinusoidal", "heatmap", PlotOptions(dim=512, positions=128)),  # RdBu, blended where cells are dense
        ("sinusoidal", "cosine", PlotOptions()),  # viridis, with lines and text
        ("rope", "clock", PlotOptions()),
    ],
)
def test_palette_png_keeps_every_colour_within_a_few_levels(scheme, kind, options):
    """The atlas's palette PNGs (at most 256 colours) against the full-colour render: every pixel
    within 12 levels of 255 per channel, the colour map's ends included (median cut moved RdBu's
    darkest blue to a grey: 36-58 levels off on these figures)."""
    import io

    import numpy as np
    from PIL import Image

    from posenc.viz import figure_bytes

    figure = plot(scheme, kind, options)
    figure.set_dpi(96)
    _rendered(figure)  # the first draw places the colour bar (constrained layout); later ones agree
    want = _rendered(figure)
    image = Image.open(io.BytesIO(figure_bytes(figure, "png", dpi=96, colours=256)))
    assert image.mode == "P" and len(image.getcolors(256)) <= 256
    got = np.asarray(image.convert("RGB")).astype(int)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 12


@pytest.mark.parametrize("colours", [1, 257, 8.0, True])
def test_palette_png_refuses_a_colour_count_outside_2_to_256(colours):
    from posenc.viz import figure_bytes

    with pytest.raises(ValueError, match="colours must be a whole number from 2 to 256"):
        figure_bytes(plot("alibi", "slopes"), "png", colours=colours)


def test_importing_posenc_viz_does_not_import_matplotlib():
    code = (
        "import sys, posenc, posenc.viz, posenc.report, posenc.cli.atlas; "
        "print(sorted(m for m in ('matplotlib', 'rich', 'typer') if m in sys.modules))"
    )  # torch itself loads numpy
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert posenc.viz is not None


def _rendered(figure):
    """The figure drawn at its dpi: ``[height, width, 3]`` RGB integers, row 0 at the top."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].astype(int)


def _column_pixels(figure, ax, x, first, last):
    """The pixels down data column ``x`` from data row ``first`` to ``last``, clear of the spines."""
    rgb = _rendered(figure)
    (col, y0), (_, y1) = ax.transData.transform([(x, first), (x, last)])
    top, bottom = sorted((rgb.shape[0] - y0, rgb.shape[0] - y1))
    spine = 2 + int(figure.dpi / 72)  # a 0.8-point line, and a pixel to spare
    return rgb[int(top) + spine : int(bottom) - spine, int(col)]


@pytest.mark.parametrize("dpi", [72, 120, 300])
def test_bit_0_of_many_positions_is_drawn_as_its_mean_colour_not_moire(dpi):
    """8192 positions in a few hundred pixels: bit 0 flips every position, so each pixel covers
    dozens of 0s and 1s; drawn cell by cell ("nearest") it showed ~20 irregular black/white bands."""
    figure = plot("sinusoidal", "bits", PlotOptions(positions=8192))
    figure.set_dpi(dpi)
    bits_ax, code_ax = _main_axes(figure)
    image = bits_ax.images[0]
    assert image.get_array().shape == (8192, 13) and image.get_interpolation() == "nearest"  # every cell kept
    bit0 = _column_pixels(figure, bits_ax, 0, 0, 8191)
    assert len(bit0) > 150
    assert abs(bit0.mean() - 127.5) < 6 and bit0.max() - bit0.min() <= 10  # one mid grey all the way down
    bit12 = _column_pixels(figure, bits_ax, 12, 0, 8191)[:, 0]  # 0 for 0-4095, then 1: stays sharp
    assert set(bit12[: len(bit12) // 3].tolist()) == {255} and set(bit12[-len(bit12) // 3 :].tolist()) == {0}
    sin0 = _column_pixels(figure, code_ax, 0, 0, 8191)  # sin(p): period 2π positions, far below a pixel
    assert (sin0.max(axis=0) - sin0.min(axis=0)).max() <= 24  # one mixed colour, not red (103, 0, 31) and blue bands


def test_small_images_keep_one_sharp_block_per_cell():
    figure = plot("sinusoidal", "bits", PlotOptions(positions=64))
    bits_ax = _main_axes(figure)[0]
    bit0 = _column_pixels(figure, bits_ax, 0, 0, 63)[:, 0]  # 5 or so pixels per position
    assert set(bit0.tolist()) <= {0, 255} and bit0.tolist().count(0) > len(bit0) / 3
    runs = [len(list(run)) for _, run in itertools.groupby(bit0.tolist())]
    assert len(runs) >= 60 and min(runs[1:-1]) >= 3  # every position its own block


def test_heatmap_of_many_positions_shows_no_bands_that_are_not_in_the_data():
    figure = plot("sinusoidal", "heatmap", PlotOptions(positions=8192))
    ax = _main_axes(figure)[0]
    assert ax.images[0].get_array().shape == (8192, 128)
    for feature in (0, 1, 2):  # sin and cos of p and of 0.87 p: many periods per pixel
        pixels = _column_pixels(figure, ax, feature, 0, 8191)
        assert (pixels.max(axis=0) - pixels.min(axis=0)).max() <= 12


def test_sin_cos_columns_slightly_denser_than_pixels_show_no_stripes():
    """512 features in a few hundred pixels (the atlas's sinusoid heatmap): past feature ~300 the
    columns alternate sin ~ 0 and cos ~ 1, a pattern finer than the pixels. Each pixel must show
    their mean; a tent one pixel wide kept a third of the alternation, which beat against the pixel
    grid into stripes (neighbouring pixels 70 levels apart)."""
    figure = plot("sinusoidal", "heatmap", PlotOptions(positions=128, dim=512))
    ax = _main_axes(figure)[0]
    assert ax.images[0].get_array().shape == (128, 512)
    rgb = _rendered(figure)
    (x0, y), (x1, _) = ax.transData.transform([(320, 64), (500, 64)])
    row = rgb[rgb.shape[0] - int(y), int(x0) : int(x1)]  # the pixels along position 64, features 320-500
    # neighbouring pixels within a few levels (the mean drifts slowly as sin(64 θ) falls towards 0)
    assert len(row) > 120 and abs(row[1:] - row[:-1]).max() <= 4
    first = ax.transData.transform([(0.5, 64)])[0]  # the fast features stay drawn: not all one colour
    left = rgb[rgb.shape[0] - int(y), int(first[0]) : int(first[0]) + 60]
    assert (left.max(axis=0) - left.min(axis=0)).max() > 100


@pytest.mark.parametrize(
    ("scaling", "label"),
    [
        (None, "rope"),
        ({"rope_type": "linear", "factor": 8}, "rope, linear ×8"),
        ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}, "rope, yarn ×4"),
        ({"type": "dynamic", "factor": 2.5}, "rope, dynamic ×2.5"),
        ({"rope_type": "llama3", "factor": True}, "rope, llama3"),
    ],
)
def test_scaled_rope_is_named_with_its_scaling(scaling, label):
    from posenc.viz.options import scheme_label

    assert scheme_label("rope", scaling) == label
    assert PlotOptions(scaling=scaling).label("rope") == label  # what `posenc check` puts in its title
    if scaling and scaling.get("rope_type") == "linear":
        ax = _main_axes(plot("rope", "heatmap", PlotOptions(scaling=scaling)))[0]
        assert ax.get_title().startswith(label + ":")


def _record(experiment, task, scheme, variant, metrics, *, seed=0, train_length=3):
    return {
        "experiment": experiment,
        "task": task,
        "scheme": scheme,
        "variant": variant,
        "seed": seed,
        "train_length": train_length,
        "metrics": metrics,
    }


def test_length_figure_of_one_task_length_draws_bars_named_by_run():
    from posenc.experiments.plots import group_figure

    records = [
        _record("length", "word-order", scheme, "default", {"per_length": {"3": {"exact_match": value}}})
        for scheme, value in (("rope", 0.5625), ("alibi", 0.25))
    ]
    ax = group_figure("length", "word-order", records).axes[0]
    assert [bar.get_height() for bar in ax.patches] == [0.25, 0.5625]  # sorted by name
    assert [t.get_text() for t in ax.get_xticklabels()] == ["alibi", "rope"]
    assert "n = 3" in ax.get_xlabel() and not ax.lines  # no line through a single x value
    assert [t.get_text() for t in ax.texts] == ["0.25", "0.56"]


def test_length_and_loss_figures_tick_whole_numbers_only():
    from posenc.experiments.plots import group_figure

    per_length = {"2": {"exact_match": 1.0}, "5": {"exact_match": 0.5}}
    lengths = [_record("length", "copy", "rope", "default", {"per_length": per_length})]
    losses = [
        _record("extend", "text", "rope", "linear", {"loss_per_position": [1.0, 1.5, 2.0, 2.5, 3.0]}, train_length=4)
    ]
    for experiment, task, records in (("length", "copy", lengths), ("extend", "text", losses)):
        figure = group_figure(experiment, task, records)
        ax = figure.axes[0]
        _rendered(figure)
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks


def test_probe_values_below_the_floor_are_written_apart_and_inside_the_axes():
    """The audit's figure: -0.36 drawn over -0.35 at one layer, -0.29 cut off at the right edge."""
    from posenc.experiments.plots import group_figure

    def probe(scheme, r2):
        per_layer = [{"layer": i, "r2": v} for i, v in enumerate(r2)]
        return _record("probe", "text", scheme, "residual", {"per_layer": per_layer}, train_length=64)

    records = [
        probe("none", [-0.05, -0.36, -3.2, -0.29]),
        probe("rope", [-0.2, -0.35, -0.5, 0.1]),
        probe("sinusoidal", [1.0, 0.99, 0.98, 0.9]),
    ]
    figure = group_figure("probe", "text", records)
    ax = figure.axes[0]
    _rendered(figure)
    renderer = figure.canvas.get_renderer()
    labels = {t.get_text(): t.get_window_extent(renderer) for t in ax.texts}
    assert sorted(labels) == sorted(["−0.20", "−0.36", "−0.35", "−3.20", "−0.50", "−0.29"])
    inside = ax.get_window_extent(renderer)
    boxes = list(labels.values())
    for i, box in enumerate(boxes):
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1
        assert not any(box.overlaps(other) for other in boxes[i + 1 :])
    floor = ax.transData.transform((0, -0.1))[1]
    assert all(box.y1 < floor for box in boxes)  # under the floor, where no line is drawn
    assert min(ax.get_yticks()) == 0.0  # no tick beside the labels


# --- the bias against distance per head (kerple, sandwich, fire, dpb, cope, forgetting) -----------------


def test_bias_figure_draws_kerple_formula_and_applies_to_data_dependent_schemes() -> None:
    """``--kind bias``: KERPLE's lines are ``-r1·log(1 + r2·d)`` at initialisation (Chi et al. 2022,
    §4.2); CoPE and forgetting attention get it too (random inputs), with a band."""
    from posenc.analysis import build_scheme

    figure = plot("kerple", "bias", PlotOptions(positions=30))
    module = build_scheme("kerple")
    r1, r2 = (r.detach().double() for r in module.kernel_parameters())
    d = torch.arange(30, dtype=torch.float64)
    lines = [line for line in figure.axes[0].get_lines() if line.get_linewidth() == 1.6]
    assert len(lines) == 8
    for h, line in enumerate(lines):
        assert torch.allclose(torch.as_tensor(line.get_ydata()), -r1[h] * torch.log1p(r2[h] * d), atol=1e-5)
    assert figure.axes[0].get_xlabel().startswith("distance i − j")
    assert kinds_for("cope") == ["bias"] and kinds_for("forgetting") == ["bias"]
    assert "bias" in kinds_for("fire") and "bias" not in kinds_for("rope")
    forgetting = plot("forgetting", "bias", PlotOptions(positions=20))
    assert forgetting.axes[0].collections  # the 10-90 % bands
    fire = plot("fire", "bias", PlotOptions(positions=200))
    assert [ax.get_title() for ax in fire.axes[:3]] == ["query at i = 199", "query at i = 799", "query at i = 3199"]


@pytest.mark.parametrize(("scheme", "learned"), [("alibi", False), ("sandwich", False), ("kerple", True), ("t5", True)])
def test_bias_title_says_at_initialisation_only_for_learned_biases(scheme: str, learned: bool) -> None:
    """A bias without parameters is not "at initialisation": it never changes (ALiBi, Sandwich)."""
    title = plot(scheme, "bias", PlotOptions(positions=16))._suptitle.get_text()
    assert ("at initialisation" in title) == learned
    assert ("no learned parameters" in title) == (not learned)
