"""``posenc report``: the atlas page that draws and checks every scheme.

One self-contained ``index.html``: a section per scheme (every name in :func:`posenc.available`)
and per naive reference code, each with its formula, source, figures and property table, then the
comparison of every scheme against the criteria, and the experiments' results when a runs folder
is given. The page only assembles: numbers come from :mod:`posenc.analysis`, pictures from
:mod:`posenc.viz`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from html import escape
from pathlib import Path
from typing import Any

from .._files import replaced_whole
from .html import DISPLAY_PX, PX_PER_INCH, figure_html, page, pair_up, slug, table_html
from .plan import REFERENCE_SOURCES, figures_for
from .results import shown_path

__all__ = ["build_report", "ReportSummary", "Progress", "FigureLayout", "shipped_records", "RECORDS"]

#: Called after each step: ``(description of the next step, steps done, steps in all)``.
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class FigureLayout:
    """How one figure of the page is drawn and shown: its size in inches, the dpi of its PNG, the
    CSS pixels it is shown across in a 1400 px window, and its smallest text in points."""

    caption: str
    width_in: float
    height_in: float
    dpi: int
    display_px: int
    smallest_pt: float
    cut_off: tuple[str, ...] = ()  # texts that run past the figure's edge

    @property
    def px_per_pt(self) -> float:
        """Screen pixels per point of text: the figure's font scale on the page."""
        return self.display_px / (72 * self.width_in)

    @property
    def smallest_px(self) -> float:
        """The height of the figure's smallest text on the screen, in CSS pixels."""
        return self.smallest_pt * self.px_per_pt


@dataclass
class ReportSummary:
    """What :func:`build_report` wrote: the page, its sections, figures, problems and timing."""

    path: Path
    schemes: list[str]
    figures: int = 0
    results: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # what the reader should know that is no error
    layout: list[FigureLayout] = field(default_factory=list)  # every figure drawn, as shown


@dataclass
class _Section:
    name: str
    family: str
    figures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    verdict: dict[str, Any] | None = None


def _header(name: str, family: str) -> tuple[str, str]:
    """(formula, source) shown for ``name``."""
    from ..analysis import REFERENCE_ENCODINGS
    from ..schemes import scheme_class

    if family == "reference":
        return REFERENCE_ENCODINGS[name], REFERENCE_SOURCES.get(
            name, "naive reference code of the articles posenc was founded on"
        )
    cls = scheme_class(name)
    return cls.formula or "(no formula given)", cls.citation or "(no citation given)"


def _module_of(name: str, family: str) -> str:
    if family == "reference":
        return "posenc.analysis.references"
    from ..schemes import scheme_class

    return scheme_class(name).__module__


#: How a verdict that is neither pass nor fail reads in the tables.
_MARKS = {"input": "depends on input"}


def _properties_table(row: dict[str, Any]) -> str:
    rows = []
    for criterion, result in row["results"].items():
        verdict = row["verdict"][criterion]
        if result is None:
            rows.append([criterion, (_MARKS.get(verdict, "n/a"), "na"), "", "", row["reasons"][criterion]])
            continue
        rows.append(
            [
                criterion,
                (verdict, verdict),
                (f"{result.value:.6g}", "num"),
                (f"{result.comparison} {result.threshold:.6g}", "num"),
                row["reasons"][criterion],
            ]
        )
    return table_html(["criterion", "verdict", "value", "threshold", "what was found"], rows)


def _comparison_table(rows: list[dict[str, Any]]) -> str:
    """The verdict grid, then for each scheme the reasons behind its failures in words."""
    from ..analysis.verdict import CRITERIA

    body, reasons = [], []
    for row in rows:
        cells: list[Any] = [row["scheme"], row["family"]]
        for criterion in CRITERIA:
            verdict = row["verdict"][criterion]
            mark = {"pass": "✓ pass", "fail": "✗ fail", **_MARKS}.get(verdict, "n/a")
            cells.append((mark, verdict if verdict in ("pass", "fail") else "na", row["reasons"][criterion]))
        body.append(cells)
        failed = [f"<i>{escape(c)}</i>: {escape(row['reasons'][c])}" for c in CRITERIA if row["verdict"][c] == "fail"]
        if failed:
            reasons.append(f"<li><b>{escape(row['scheme'])}</b> — " + "; ".join(failed) + "</li>")
    why = (
        "<details><summary>Why they fail, scheme by scheme (each section's property table has the numbers)"
        '</summary><p class="note">A fail states what was measured against the criterion, not always a '
        "defect: for a bias or a relative table some are the design (a penalty that grows with distance, far "
        'distances sharing one value), as the reasons say.</p><ul class="why">' + "".join(reasons) + "</ul></details>"
        if reasons
        else ""
    )
    return table_html(["scheme", "family", *(c.replace("_", " ") for c in CRITERIA)], body) + why


#: Where each family's position enters the model, and the hook that puts it there.
_ENTERS = (
    ("absolute", "added to the token embeddings", "embed(x, positions)"),
    ("rotary", "a rotation of queries and keys", "rotate(q, k, q_positions, k_positions)"),
    ("bias", "a bias on the attention logits, from positions", "bias(q_positions, k_positions)"),
    ("input", "a bias on the logits computed from the tokens (contextual positions)", "logit_term / input_terms(x)"),
    ("relative", "relative embeddings in the logits (and values)", "query_scores / value_term"),
    ("none", "nowhere (NoPE): only a causal mask orders the tokens", "—"),
)


def _where_position_enters(names: list[str]) -> str:
    """The page's table of where each scheme's position enters the model."""
    from ..analysis import is_data_dependent, scheme_family

    groups: dict[str, list[str]] = {}
    for name in names:
        family = "input" if is_data_dependent(name) else scheme_family(name)
        groups.setdefault(family, []).append(name)
    rows = [(where, ", ".join(groups[family]), hook) for family, where, hook in _ENTERS if family in groups]
    return "<h3>Where position enters</h3>" + table_html(["where position enters", "schemes", "hook"], rows)


def _section_html(section: _Section) -> str:
    formula, source = _header(section.name, section.family)
    parts = [
        f'<section id="scheme-{slug(section.name)}" class="scheme" data-scheme="{escape(section.name)}">',
        f'<h2>{escape(section.name)} <span class="meta">({escape(section.family)})</span></h2>',
        f'<div class="formula">{escape(formula)}</div>',
        f'<p class="meta">Source: {escape(source)}. Implementation: <code>{escape(_module_of(section.name, section.family))}</code>.</p>',
    ]
    parts += [f'<p class="note">{escape(note)}</p>' for note in section.notes]
    if section.figures:
        parts.append('<h3>Figures</h3><div class="figures">' + "".join(pair_up(section.figures)) + "</div>")
    if section.verdict is not None:
        parts.append("<h3>Properties</h3>" + _properties_table(section.verdict))
    parts.append("</section>")
    return "".join(parts)


def _notes(name: str, family: str) -> list[str]:
    from ..schemes import scheme_class

    notes = []
    if family == "none":
        notes.append(
            "No position code at all: attention sees a bag of tokens unless a causal mask orders them "
            "(Haviv et al. 2022). Nothing to draw; the checks below show what is missing."
        )
    if family != "reference":
        n_axes = getattr(scheme_class(name), "n_axes", 1)
        if isinstance(n_axes, int) and n_axes > 1:
            notes.append(
                f"A multi-axis scheme: a position is a tuple of {n_axes} coordinates (rows, columns, …). "
                "The checks and the 1-D figures use positions on axis 0 (the other axes act the same "
                "way on their own features), so it is left out of the comparison table, whose criteria "
                "are stated for positions on a line; a grid figure, where drawn, uses 2-D positions."
            )
    if family != "reference" and getattr(scheme_class(name), "data_dependent", False):
        notes.append(
            "A data-dependent scheme: its position term is computed from the queries, keys or the layer "
            "input, not from positions alone, so it is drawn for random inputs (the mean and a band), and "
            "the criteria that the input decides read “depends on input”; its tests pin it against its "
            "reference implementation."
        )
    elif family in ("bias", "relative"):
        notes.append(
            "A relative scheme: it has no code per position, so its figures show what a query receives "
            "from the keys behind it (a heatmap, where drawn: a query at position p and the key at 0)."
        )
    return notes


#: Where a clone of the repository keeps the records of the experiments it reports (one runs
#: folder per experiment, with the encodings they trained).
RECORDS = Path("docs") / "experiments"


def shipped_records() -> Path | None:
    """The repository's folder of experiment records (``docs/experiments`` beside ``src/``) when
    posenc runs from a clone that has it (an editable install), else None (an installed wheel)."""
    from .trained import find_encodings

    folder = Path(__file__).resolve().parents[3] / RECORDS
    return folder if folder.is_dir() and find_encodings(folder)[0] else None


def _untrained_note(name: str) -> str | None:
    """For a scheme with learned parameters, when the atlas has no results: how to see it trained."""
    from ..analysis import build_scheme

    if not any(p.requires_grad for p in build_scheme(name).parameters()):
        return None
    return (
        f"Drawn at initialisation. In a clone of posenc, posenc report --results {RECORDS.as_posix()} draws "
        f"{name} as the experiments trained it, beside these (the repository ships their records); to train "
        f"your own: posenc experiment length --schemes {name} --out runs/{name}, then posenc report "
        f"--results runs/{name}."
    )


def _run_checks(section: _Section) -> None:
    from ..analysis.verdict import verdict_table

    section.verdict = verdict_table([section.name])[0]


def _wide(figure: Any) -> bool:
    """Whether a figure is shown across the page: a strip, or one of several panels (11 inches
    wide or more as drawn) whose labels half a column would shrink past reading."""
    width, height = figure.get_size_inches()
    return width / height > 2.2 or width >= 10.5


def _texts(figure: Any) -> list[Any]:
    """Every text ``figure`` draws: titles, labels, ticks, legends, annotations."""
    from matplotlib.text import Text

    return [t for t in figure.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _smallest_text(figure: Any) -> float:
    """The size in points of the smallest text ``figure`` draws."""
    return min((t.get_fontsize() for t in _texts(figure)), default=float("inf"))


def _cut_off(figure: Any) -> tuple[str, ...]:
    """The texts (not tick labels) of a drawn ``figure`` that run past its edge by a pixel or more,
    and the panel titles that run into another panel's title."""
    from matplotlib.axis import Tick

    ticks = {id(t) for tick in figure.findobj(Tick) for t in (tick.label1, tick.label2)}
    renderer = figure.canvas.get_renderer()
    box = figure.bbox
    out = []
    for text in _texts(figure):
        extent = text.get_window_extent(renderer)
        inside = (
            box.x0 - 1 <= extent.x0 and extent.x1 <= box.x1 + 1 and box.y0 - 1 <= extent.y0 and extent.y1 <= box.y1 + 1
        )
        if id(text) not in ticks and not inside:
            out.append(text.get_text())
    titles = [(ax.title.get_text(), ax.title.get_window_extent(renderer)) for ax in figure.axes if ax.title.get_text()]
    for i, (text, extent) in enumerate(titles):
        if any(extent.overlaps(other) for _, other in titles[:i] + titles[i + 1 :]):
            out.append(text)
    return tuple(out)


def _embed(figure: Any, caption: str, dpi: int, layout: list[FigureLayout]) -> str:
    """``figure`` as a ``<figure>`` of the page: resized to the width it is shown at
    (:data:`~posenc.report.html.DISPLAY_PX` at :data:`~posenc.report.html.PX_PER_INCH`, keeping
    its shape), so that a point of text is the same size on the screen in every figure; encoded
    as a palette PNG at ``dpi``; its layout appended to ``layout``."""
    from ..experiments.train import check_signalled
    from ..viz import figure_bytes

    wide = _wide(figure)
    display = DISPLAY_PX["wide" if wide else "half"]
    width, height = figure.get_size_inches()
    size = (display / PX_PER_INCH, height * display / PX_PER_INCH / width)
    figure.set_size_inches(*size)
    png = figure_bytes(figure, "png", dpi=dpi, colours=256)
    check_signalled()  # drawing ran finalizers and weakref callbacks, where a signal's exception is dropped
    layout.append(FigureLayout(caption, *size, dpi, display, _smallest_text(figure), _cut_off(figure)))
    return figure_html(png, "png", caption, wide=wide)


def _draw(section: _Section, spec: Any, dpi: int, errors: list[str], layout: list[FigureLayout]) -> None:
    """Draw one figure into ``section``; a failure becomes a note and an entry in ``errors``."""
    from ..viz import plot

    try:
        figure = plot(section.name, spec.kind, spec.options)
        section.figures.append(_embed(figure, spec.caption, dpi, layout))
    except Exception as err:  # a figure that fails must not sink the atlas; it is reported
        errors.append(f"{section.name} / {spec.kind}: {type(err).__name__}: {err}")
        section.notes.append(f"Figure '{spec.kind}' could not be drawn: {err}")


def _draw_trained(
    section: _Section,
    runs: list[Any] | None,
    results_dir: Path,
    dpi: int,
    errors: list[str],
    layout: list[FigureLayout],
) -> None:
    """The figures of ``section``'s trained encodings (found by :func:`~.trained.find_encodings`): the bias
    against distance, or the learned table beside a fresh one (learned, Shaw), placed after the
    figure at initialisation; without any, a note says the figures show initialisation only."""
    from .trained import ENCODINGS, TRAINED_AFTER, trained_bias_figures, trained_table_figures

    if not runs:
        where = results_dir / ENCODINGS
        saved = where.is_dir() or any(results_dir.glob(f"*/{ENCODINGS}"))
        why = "none for this scheme" if saved else f"no {ENCODINGS} folder: runs from before encodings were saved?"
        section.notes.append(
            f"--results: no trained {section.name} encodings under {shown_path(results_dir)} ({why}): the figures "
            f"are drawn at initialisation only (train one with posenc experiment length "
            f"--schemes {section.name} --out DIR)."
        )
        return
    try:
        draw = trained_table_figures if section.name in TRAINED_AFTER else trained_bias_figures
        figures, problems = draw(section.name, runs)
    except Exception as err:  # a figure that fails must not sink the atlas; it is reported
        figures, problems = [], [f"{type(err).__name__}: {err}"]
    for problem in problems:
        errors.append(f"{section.name} / trained: {problem}")
        section.notes.append(f"Trained encodings: {problem}")
    for figure, caption in figures:
        section.figures.append(_embed(figure, caption, dpi, layout))


def _layer_schedules_html(dpi: int, layout: list[FigureLayout]) -> tuple[str, int]:
    """Which layers of a few shipped model shapes rotate, with which RoPE, and which have none: the
    section's HTML and the number of figures in it."""
    from ..viz.layers import layer_strip_figure
    from .plan import LAYER_SCHEDULES

    figures = []
    for name, (config, caption) in LAYER_SCHEDULES.items():
        try:
            figures.append(_embed(layer_strip_figure(config, title=name), caption, dpi, layout))
        except Exception as err:  # a figure that fails must not sink the atlas
            figures.append(
                f'<p class="note">{escape(name)}: the layer strip could not be drawn: {escape(str(err))}</p>'
            )
    drawn = sum(f.startswith("<figure") for f in figures)
    return (
        '<section id="layer-schedules"><h2>Layer schedules: RoPE is not in every layer</h2>'
        "<p>Models mix layers: with RoPE, with another RoPE, or with none (NoPE). "
        "<code>posenc.layer_schedule(config)</code> reads the schedule from a config.json and "
        "<code>posenc.encodings_from_config(config)</code> builds one encoding per layer.</p>"
        f'<div class="figures">{"".join(figures)}</div></section>',
        drawn,
    )


def _assemble(
    sections: list[_Section], compared: set[str], results_html: str | None, dpi: int, layout: list[FigureLayout]
) -> tuple[str, int]:
    """The whole page from the finished sections, and the number of figures drawn for it alone."""
    from ..analysis.verdict import DEFINITIONS

    criteria = "".join(
        f"<li><b>{escape(c.replace('_', ' '))}</b>: {escape(text)}</li>" for c, text in DEFINITIONS.items()
    )
    comparison = (
        '<section id="comparison" class="comparison"><h2>All schemes against the criteria</h2>'
        f'<p>Each criterion is measured, not asserted:</p><ul class="criteria">{criteria}</ul>'
        "<p>Relative schemes (biases, Shaw) have no code per position, so the criteria about one do not apply to "
        "them; whether a bias depends on the distance alone is measured (offset similarity: FIRE's follows the "
        "query past its threshold). For data-dependent schemes (CoPE, forgetting attention) the input decides "
        "most criteria: those read “depends on input”. Each scheme's section gives the number behind each verdict "
        "(also on hover here).</p>"
        + _comparison_table([s.verdict for s in sections if s.verdict is not None and s.name in compared])
        + "</section>"
    )
    n_refs = sum(s.family == "reference" for s in sections)
    intro = (
        "<p>Every positional encoding in posenc, drawn and checked: the figures the articles posenc was founded on draw, "
        "and the criteria they argue in words, made into measurements. "
        f"posenc {escape(_version())}; scheme sections: {len(sections) - n_refs}, naive references: {n_refs}.</p>"
        '<p><a href="explorer.html">Interactive explorer</a>: pick sinusoidal, RoPE with any scaling, ALiBi or T5 '
        "buckets, move or type the dimension, base, scaling and length, load a published model's RoPE or paste "
        "a config.json's RoPE fields; the matrices, clock and curves redraw.</p>"
    )
    intro += _where_position_enters([s.name for s in sections if s.family != "reference"])
    nav = [("comparison", "Comparison table")] + [(f"scheme-{slug(s.name)}", s.name) for s in sections]
    if results_html is not None:
        nav.append(("experiments", "Experiments"))
    schedules, n_strips = _layer_schedules_html(dpi, layout) if any(s.family == "rotary" for s in sections) else ("", 0)
    if schedules:
        nav.insert(1, ("layer-schedules", "Layer schedules"))
    body = [comparison, schedules] + [_section_html(s) for s in sections] + ([results_html] if results_html else [])
    return page("posenc atlas of positional encodings", intro, nav, body), n_strips


def build_report(
    out_dir: str | Path,
    *,
    results_dir: str | Path | None = None,
    schemes: list[str] | None = None,
    progress: Progress | None = None,
    dpi: int = 168,
) -> ReportSummary:
    """Write ``out_dir/index.html`` and return a :class:`ReportSummary`.

    ``schemes`` defaults to every registered scheme followed by the reference codes; schemes on
    grids (``n_axes > 1``) get a section measured along axis 0 but no row in the comparison table.
    ``results_dir`` adds the experiments found there. A figure that fails becomes a note on the
    page and an entry in ``summary.errors``; nothing is fetched from the network. Each figure is
    drawn at the size it is shown (see :class:`FigureLayout`, listed in ``summary.layout``) and
    ``dpi`` sets its resolution: by default 1.75 image pixels per pixel of the screen (168 dpi), sharp on
    high-density screens too.
    """
    import torch

    from ..analysis.verdict import default_schemes
    from ..experiments.train import check_signalled
    from ..viz.kinds import family_of, scheme_names

    start = time.perf_counter()
    names = scheme_names() if schemes is None else list(schemes)
    sections = [_Section(name, family_of(name), notes=_notes(name, family_of(name))) for name in names]
    if results_dir is None:
        for section in sections:
            note = None if section.family in ("reference", "none") else _untrained_note(section.name)
            section.notes += [note] if note else []
    errors: list[str] = []
    notes: list[str] = []
    layout: list[FigureLayout] = []
    trained: dict[str, list[Any]] = {}
    if results_dir is not None:
        from .trained import find_encodings

        trained, problems = find_encodings(results_dir)
        errors += [f"results: {problem}" for problem in problems]
        if not trained:
            notes.append(
                f"no trained encodings under {shown_path(results_dir)}: the bias figures are drawn at "
                "initialisation only"
            )
    from .trained import TRAINED_AFTER

    steps: list[tuple[str, Callable[[], None]]] = []
    for section in sections:
        steps.append((f"checks: {section.name}", partial(_run_checks, section)))
        for spec in figures_for(section.name, section.family):
            steps.append((f"{spec.kind}: {section.name}", partial(_draw, section, spec, dpi, errors, layout)))
            after = spec.kind == "bias" or TRAINED_AFTER.get(section.name) == spec.kind
            if after and results_dir is not None:  # after training, beside the figure at init
                runs = trained.get(section.name)
                steps.append(
                    (
                        f"trained: {section.name}",
                        partial(_draw_trained, section, runs, Path(results_dir), dpi, errors, layout),
                    )
                )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small tensors: extra threads only contend on a shared machine
    try:
        for done, (label, step) in enumerate(steps):
            check_signalled()  # a signal whose exception was dropped inside the last step ends the atlas here
            if progress is not None:
                progress(label, done, len(steps))
            step()
        check_signalled()
    finally:
        torch.set_num_threads(threads)
    results_html, n_results, n_plots = None, 0, 0
    if results_dir is not None:
        if progress is not None:
            progress("experiments' results", len(steps), len(steps))
        from .results import results_section

        before = len(layout)
        results_html, n_results, problems = results_section(results_dir, dpi=dpi, layout=layout)
        n_plots = len(layout) - before
        errors += [f"results: {problem}" for problem in problems]  # unreadable files: in the page and the warnings
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "index.html"
    html, n_strips = _assemble(sections, set(default_schemes()), results_html, dpi, layout)
    with replaced_whole(path) as tmp:  # an earlier index.html stays whole until the new one is
        tmp.write_text(html, encoding="utf-8")
    from .explorer import write_explorer

    write_explorer(out_dir)  # explorer.html, linked from the intro
    if progress is not None:
        progress("done", len(steps), len(steps))
    n_figures = sum(len(s.figures) for s in sections) + n_strips + n_plots
    seconds = time.perf_counter() - start
    return ReportSummary(path, names, n_figures, n_results, errors, seconds, notes, layout)


def _version() -> str:
    from .. import __version__

    return __version__
