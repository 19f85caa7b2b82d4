"""The experiments' results for the atlas: every ``results.json`` under a runs folder, read
defensively, as tables, plus the PNG plots found beside them.

``results.json`` is written by :mod:`posenc.experiments.results` as ``{"schema": 1, "records":
[...]}``; a bare list of records or a single record is accepted too. A file that cannot be read
or parsed becomes a note in the report, never an error: the atlas still gets built.
"""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path
from typing import Any

from ..experiments.results import SCHEMA_VERSION as _SCHEMA
from ..experiments.results import unavailable_reason
from ..experiments.stats import count_flags
from ..viz._mpl import compact_png
from .html import figure_html, pair_up, table_html

__all__ = ["read_results", "results_section", "COLUMNS", "METRICS"]

#: Record fields shown in the table, in order.
COLUMNS = (
    "experiment",
    "task",
    "scheme",
    "variant",
    "seed",
    "train_length",
    "in_distribution",
    "out_of_distribution",
    "summary_metric",
    "wall_time_s",
)
_MAX_PLOTS = 48
_MAX_PLOT_BYTES = 4_000_000
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def read_results(runs_dir: str | Path) -> tuple[list[tuple[Path, list[dict[str, Any]]]], list[str]]:
    """``([(file, records), ...], problems)`` for every ``results.json`` below ``runs_dir``."""
    runs_dir = Path(runs_dir)
    found, problems = [], []
    for path in sorted(runs_dir.rglob("results.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as err:
            problems.append(f"{path.relative_to(runs_dir)}: unreadable ({type(err).__name__}: {err})")
            continue
        if isinstance(data, dict) and isinstance(data.get("records"), list):
            records = data["records"]
            if data.get("schema") != _SCHEMA:
                problems.append(
                    f"{path.relative_to(runs_dir)}: has schema {data.get('schema')!r}, and this posenc "
                    f"writes schema {_SCHEMA}; its records are shown as far as their fields match"
                )
            if not records:
                problems.append(f"{path.relative_to(runs_dir)}: holds no records")
        elif isinstance(data, list):
            records = data
            if not records:
                problems.append(f"{path.relative_to(runs_dir)}: holds no records")
        elif isinstance(data, dict):
            records = [data]
        else:
            problems.append(f"{path.relative_to(runs_dir)}: not a list or object of results")
            continue
        kept = [r for r in records if isinstance(r, dict)]
        if len(kept) != len(records):
            problems.append(
                f"{path.relative_to(runs_dir)}: skipped {len(records) - len(kept)} entries that are not objects"
            )
        found.append((path, kept))
    return found, problems


def _cell(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value)
    if isinstance(value, float):
        return "—" if not math.isfinite(value) else f"{value:.3g}" if abs(value) >= 1000 else f"{value:.3f}"
    if isinstance(value, (int, str)):
        return value
    return json.dumps(value)[:60]


def _record_cell(record: dict[str, Any], column: str) -> Any:
    """``record[column]`` for the table; a missing out-of-distribution score says why, where the record does."""
    value = record.get(column)
    if column == "out_of_distribution" and _number(value) is None:
        reason = unavailable_reason([record])
        if reason:
            return f"n/a: {reason}"
    return _cell(value)


def _per_length(record: dict[str, Any]) -> str:
    """A compact ``length: value`` list from ``metrics["per_length"]`` when it is a flat mapping."""
    metrics = record.get("metrics")
    per_length = metrics.get("per_length") if isinstance(metrics, dict) else None
    if not isinstance(per_length, dict):
        return ""
    items = []
    for length, value in list(per_length.items())[:24]:
        if isinstance(value, dict):
            metric = record.get("summary_metric")
            value = value.get(metric) if isinstance(metric, str) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            items.append(f"{length}: {value:.2f}")
    return ", ".join(items)


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _summary_rows(records: list[dict[str, Any]]) -> list[list[Any]]:
    """Per (experiment, task, variant, scheme): seeds, the mean in distribution (every seed with a
    value) and out of distribution (the seeds that learned: :mod:`posenc.experiments.stats`), with
    their range, the seeds that learned and generalised ("did not learn" when none did), and flags
    for missing, diverged and valueless seeds."""
    from ..experiments.stats import record_learned, scheme_counts

    counts = scheme_counts(
        [r for r in records if all(k in r for k in ("experiment", "task", "scheme", "variant", "seed"))]
    )
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for r in records:
        key = tuple(str(r.get(k, "—")) for k in ("experiment", "task", "variant", "scheme"))
        groups.setdefault(key, []).append(r)
    rows = []
    for key, runs in sorted(groups.items()):
        count = counts.get((key[0], key[1], key[3], key[2]))
        cells: list[Any] = [*key, len(runs)]
        for field in ("in_distribution", "out_of_distribution"):
            usable = runs if field == "in_distribution" else [r for r in runs if record_learned(r) is not False]
            values = [v for v in (_number(r.get(field)) for r in usable) if v is not None]
            spread = f" ({min(values):.3f}–{max(values):.3f})" if len(values) > 1 else ""
            reason = None if values or field == "in_distribution" else unavailable_reason(runs)
            if field == "out_of_distribution" and count is not None and count["status"]:
                reason = unavailable_reason(runs)
                cells.append(count["status"] + (f"; n/a: {reason}" if reason else ""))
                continue
            cells.append(f"{sum(values) / len(values):.3f}{spread}" if values else f"n/a: {reason}" if reason else "—")
        cells += _count_cells(count, len(runs))
        metric = runs[0].get("summary_metric", "—")
        better = METRICS.get(str(metric), ("", ""))[1]
        smoke = " — smoke test (--quick)" if any(r.get("quick") for r in runs) else ""
        cells.append(f"{metric}" + (f" ({better})" if better else "") + smoke)
        rows.append(cells)
    return rows


def _count_cells(count: dict[str, Any] | None, seeds: int) -> list[str]:
    """``learned``, ``generalised`` (``k/n``; "?" for records older than the flag) and the flags."""
    if count is None:
        return ["?", "?", ""]
    known = count["learned_unknown"] < seeds
    return [
        f"{count['learned']}/{seeds}" if known else "?",
        f"{count['generalised']}/{seeds}" if known else "?",
        count_flags(count),
    ]


def _paired_rows(records: list[dict[str, Any]]) -> list[list[Any]]:
    """The paired differences of :func:`posenc.experiments.stats.paired_differences` against RoPE
    and against ALiBi (the two baselines docs/experiments.md gives), as table rows."""
    from ..experiments.stats import paired_differences

    usable = [r for r in records if all(k in r for k in ("experiment", "task", "scheme", "variant", "seed"))]
    pairs = paired_differences(usable)  # against rope (else the first scheme), and against alibi where it ran
    pairs += [p for p in paired_differences(usable, "alibi") if p["baseline"] == "alibi" and p["scheme"] != "rope"]
    pairs = list({tuple(str(p[k]) for k in ("experiment", "task", "variant", "scheme", "baseline", "range")): p
                  for p in pairs}.values())  # fmt: skip
    rows = []
    for p in pairs:
        if p["mean"] is None:
            difference = "—"
        elif p["low"] is None:
            difference = f"{p['mean']:+.3f}"
        else:
            difference = f"{p['mean']:+.3f} [{p['low']:+.3f}, {p['high']:+.3f}]"
        rows.append(
            [p["experiment"], p["task"], p["variant"], p["scheme"], p["baseline"], p["range"], p["pairs"],
             difference, p["words"], "; ".join(p["excluded"])]
        )  # fmt: skip
    return rows


#: What each summary metric measures, its unit, and which way is better.
METRICS = {
    "exact_match": ("exact match: the fraction of sequences reproduced without one wrong token", "higher is better"),
    "accuracy": ("accuracy: the fraction of correct predictions", "higher is better"),
    "loss": ("loss: cross-entropy per predicted token (a byte for text), in nats", "lower is better"),
    "bits_per_byte": ("bits per byte", "lower is better"),
    "probe_r2_last_layer": (
        "probe R²: the share of the position's variance a linear probe reads off the last layer",
        "higher is better",
    ),
}


def _metric_words(metric: Any) -> str:
    words = METRICS.get(str(metric))
    return f"{words[0]} ({words[1]})" if words else str(metric)


def _plot_caption(plot: Path, runs_dir: Path, records: list[dict[str, Any]]) -> str:
    """What a plot beside the results shows, from its name (``<experiment>_<task>.png``) and the
    records of that experiment and task."""
    name = plot.stem
    matching = [r for r in records if name in (f"{r.get('experiment')}_{r.get('task')}", f"{r.get('experiment')}")]
    where = str(plot.relative_to(runs_dir))
    if not matching:
        return f"{where}: a plot found beside the results."
    r = matching[0]
    seeds = len({x.get("seed") for x in matching})
    lengths = f", trained on lengths up to {r.get('train_length')}" if r.get("train_length") is not None else ""
    spread = "mean over seeds with a 95 % interval" if seeds > 1 else "one seed"
    return (
        f"{r.get('experiment')} / {r.get('task')}: {_metric_words(r.get('summary_metric'))} against the "
        f"evaluation length, per scheme ({spread}{lengths}). From {where}."
    )


def shown_path(path: str | Path) -> str:
    """``path`` as the page prints it: relative to the current folder when it lies below it, else to
    the repository posenc runs from (``docs/experiments``), else as given; never the builder's
    absolute path when a shorter one says the same."""
    path = Path(path)
    if not path.is_absolute():
        return path.as_posix()
    resolved = path.resolve()
    for root in (Path.cwd().resolve(), Path(__file__).resolve().parents[3]):
        try:
            return resolved.relative_to(root).as_posix() or "."
        except ValueError:
            continue
    return str(path)


def _plot_figures(
    found: list[tuple[Path, list[dict[str, Any]]]], runs_dir: Path, dpi: int, layout: list[Any]
) -> tuple[list[str], set[Path], list[str]]:
    """The plots of :func:`posenc.experiments.plots.plot_results`, drawn here from each results
    file's records at the width the page shows them (half the page, or all of it with the legend
    beside the axes) through the atlas's embedding, so that their text is as large on the screen
    as every other figure's: the ``<figure>`` elements, the PNG files they replace
    (``figures/<experiment>_<task>.png`` beside the results), and what could not be drawn."""
    from ..experiments.plots import group_figure, plot_groups
    from .atlas import _embed
    from .html import DISPLAY_PX, PX_PER_INCH

    half, wide = DISPLAY_PX["half"] / PX_PER_INCH, DISPLAY_PX["wide"] / PX_PER_INCH
    drawn, replaced, problems = [], set(), []
    needed = ("experiment", "task", "scheme", "variant", "seed", "train_length", "metrics")
    for path, records in found:
        usable = [r for r in records if all(k in r for k in needed) and isinstance(r["metrics"], dict)]
        for (experiment, task), rs in plot_groups(usable).items():
            name = f"{experiment}_{task}"
            try:
                figure = group_figure(experiment, task, rs, size=(half, half * 0.625), legend_beside=(wide, 4.4))
            except Exception as err:  # a plot that fails must not sink the atlas; it is reported
                problems.append(f"{path.relative_to(runs_dir)}: the plot {name} could not be drawn ({err})")
                continue
            if not any(ax.get_legend_handles_labels()[0] or ax.patches for ax in figure.axes):
                continue  # no curve to draw (every value unavailable): the tables say so
            caption = _group_caption(experiment, task, rs, path.relative_to(runs_dir).as_posix())
            drawn.append(_embed(figure, caption, dpi, layout))
            replaced.add((path.parent / "figures" / f"{name}.png").resolve())
            replaced.add((path.parent / f"{name}.png").resolve())
    return drawn, replaced, problems


def _group_caption(experiment: str, task: str, rs: list[dict[str, Any]], where: str) -> str:
    r = rs[0]
    seeds = len({x.get("seed") for x in rs})
    spread = "mean over seeds with a 95 % interval" if seeds > 1 else "one seed"
    if experiment == "probe":
        return (
            f"probe: {_metric_words('probe_r2_last_layer')} per layer, one line per run "
            f"(trained on lengths up to {r.get('train_length')}). Drawn from {where}."
        )
    if any("per_length" in x["metrics"] for x in rs):
        what = f"{_metric_words('exact_match')} against the task length"
    else:
        what = "held-out loss per byte (in nats; lower is better) against the position, in bins of L/4"
    return (
        f"{experiment} / {task}: {what}, per scheme ({spread}, trained on lengths up to "
        f"{r.get('train_length')}; dotted: L). Drawn from {where}."
    )


def results_section(
    runs_dir: str | Path, *, dpi: int = 168, layout: list[Any] | None = None
) -> tuple[str, int, list[str]]:
    """The HTML section with the results tables and plots, the number of records shown, and the
    problems met (unreadable files), which the page shows too. The plots are drawn from the records
    (their layouts appended to ``layout``, as the atlas's own figures'); a PNG found below
    ``runs_dir`` that is none of them is shown as it is."""
    runs_dir = Path(runs_dir)
    layout = [] if layout is None else layout
    parts = [
        '<section id="experiments" class="experiments"><h2>Experiments</h2>',
        f'<p class="meta">results read from <code>{escape(shown_path(runs_dir))}</code></p>',
    ]
    if not runs_dir.is_dir():
        parts.append(f'<p class="note">No such folder: {escape(shown_path(runs_dir))}; no results to show.</p></section>')
        return "".join(parts), 0, [f"no such folder: {runs_dir}"]
    found, problems = read_results(runs_dir)
    every = [r for _, records in found for r in records]
    if every:
        metrics = sorted({str(r.get("summary_metric")) for r in every})
        parts.append(
            "<p>In distribution: scored at the lengths training showed; out of distribution: at longer "
            "ones (the length-generalisation test). Metrics: "
            + "; ".join(escape(_metric_words(m)) for m in metrics)
            + ".</p>"
        )
        quick = sum(bool(r.get("quick")) for r in every)
        if quick:
            parts.append(
                f'<p class="note">{quick} of these {len(every)} runs are <b>--quick smoke tests</b> '
                "(fewer steps and seeds, marked “smoke test” below): they show that the pipeline runs, not "
                "how the schemes compare. Run without --quick for the measurement.</p>"
            )
        parts.append("<h3>Summary: mean over seeds (range in brackets); past L over the seeds that learned</h3>")
        parts.append(
            table_html(
                [
                    "experiment",
                    "task",
                    "variant",
                    "scheme",
                    "seeds",
                    "in distribution",
                    "out of distribution (learned seeds)",
                    "learned",
                    "generalised",
                    "flags",
                    "metric (which way is better)",
                ],
                _summary_rows(every),
            )
        )
        paired = _paired_rows(every)
        if paired:
            parts.append(
                "<h3>Paired differences per seed against a baseline</h3><p>Every scheme of one seed saw the "
                "same batches and evaluation windows: the difference scheme − baseline per seed, within the "
                "training length L over every seed, past it (1-2x: up to 2L, ...) over the seeds where both "
                "learned. 95 % interval: "
                "Student's t for losses, a percentile bootstrap over seeds for exact match; an interval "
                "holding 0 reads “no difference detected”.</p>"
            )
            parts.append(
                table_html(
                    [
                        "experiment",
                        "task",
                        "variant",
                        "scheme",
                        "baseline",
                        "range",
                        "pairs",
                        "mean difference [95 % interval]",
                        "verdict",
                        "left out",
                    ],
                    paired,
                )  # fmt: skip
            )
    total = 0
    for path, records in found:
        rows = [[_record_cell(r, c) for c in COLUMNS] + [(_per_length(r), "lengths")] for r in records]
        rows.sort(key=lambda row: tuple(str(x) for x in row[:5]))
        total += len(rows)
        parts.append(f"<h3>{escape(str(path.relative_to(runs_dir)))} ({len(rows)} runs)</h3>")
        parts.append(
            table_html(
                [*(c.replace("_", " ").replace("wall time s", "wall time (s)") for c in COLUMNS), "per length"], rows
            )
        )  # spaces: headers wrap, the per-length column stays in view
    if not found and not problems:  # (an unreadable one is named below instead)
        parts.append('<p class="note">No results.json found under this folder yet.</p>')
        problems = [*problems, "no results.json found under this folder"]
    drawn, replaced, plot_problems = _plot_figures(found, runs_dir, dpi, layout)
    problems = [*problems, *plot_problems]
    for problem in problems:
        parts.append(f'<p class="note">{escape(problem)}</p>')
    plots = [p for p in sorted(runs_dir.rglob("*.png")) if p.resolve() not in replaced]
    plots = [p for p in plots if p.stat().st_size <= _MAX_PLOT_BYTES][:_MAX_PLOTS]
    if plots or drawn:
        for plot in plots:
            data = plot.read_bytes()
            if data[:8] != _PNG_MAGIC:  # a broken image would show as a hole in the page
                parts.append(f'<p class="note">{escape(str(plot.relative_to(runs_dir)))}: not a PNG, skipped</p>')
                continue
            drawn.append(figure_html(compact_png(data), "png", _plot_caption(plot, runs_dir, every)))
        parts.append('<h3>Plots</h3><div class="figures">' + "".join(pair_up(drawn)) + "</div>")
    parts.append("</section>")
    return "".join(parts), total, problems
