"""Figures and summary rows from ``results.json`` files; nothing here trains.

matplotlib is imported inside :func:`plot_results` (the ``viz`` extra).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from .._files import replaced_whole
from .results import load_results, unavailable_reason

__all__ = ["summary_rows", "plot_results", "ci95", "plot_groups", "group_figure", "TEXT_PT"]


#: Two-sided 97.5 % quantiles of Student's t for 1 .. 30 degrees of freedom (any statistics table,
#: e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2); past 30 the normal 1.96 is within 2 %.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def ci95(values: list[float]) -> float:
    """Half-width of the 95 % confidence interval of the mean of ``values`` (Student's t with
    ``n - 1`` degrees of freedom: ``t * sd / sqrt(n)``); 0 for a single value."""
    n = len(values)
    if n < 2:
        return 0.0
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return t * statistics.stdev(values) / math.sqrt(n)


def _spread(values: list[float | None]) -> tuple[float | None, float | None, int]:
    """Mean and 95 % interval half-width over the seeds that have a value, and how many have none
    (a diverged or unavailable seed): the caller reports that count, never drops it silently."""
    xs = [v for v in values if v is not None]
    missing = len(values) - len(xs)
    if not xs:
        return None, None, missing
    return statistics.fmean(xs), ci95(xs), missing


def summary_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (experiment, task, scheme, variant): mean and 95 % interval half-width (``*_ci95``,
    Student's t over seeds) of both summaries, with the counts of :func:`.stats.scheme_counts`
    (``learned``, ``generalised``, ``diverged``, ``missing``, ``status``). In distribution is the
    mean over every seed with a value; out of distribution over the learned seeds only (all seeds
    for records older than the ``learned`` flag), None with ``status`` "did not learn" when none
    learned. ``null_in``/``null_out`` count the seeds without a value."""
    from .stats import record_learned, scheme_counts

    counts = scheme_counts(records)
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["experiment"], r["task"], r["scheme"], r["variant"])].append(r)
    rows = []
    for (experiment, task, scheme, variant), rs in groups.items():
        ind, ind_ci, _ = _spread([r["in_distribution"] for r in rs])
        usable = [r for r in rs if record_learned(r) is not False]
        ood, ood_ci, _ = _spread([r["out_of_distribution"] for r in usable])
        reason = unavailable_reason(rs)
        rows.append(
            {
                "experiment": experiment,
                "task": task,
                "scheme": scheme,
                "variant": variant,
                "seeds": len(rs),
                "metric": rs[0]["summary_metric"],
                "train_length": rs[0]["train_length"],
                "in_distribution": ind,
                "in_distribution_ci95": ind_ci,
                "out_of_distribution": ood,
                "out_of_distribution_ci95": ood_ci,
                "ood_seeds": len(usable),
                "unavailable": reason,
                "wall_time_s": sum(r["wall_time_s"] / _shared_by(r) for r in rs),  # rows add up to the run
                "time_shared": any(_shared_by(r) > 1 for r in rs),
                **counts[(experiment, task, scheme, variant)],
            }
        )
    return rows


def _shared_by(record: dict[str, Any]) -> int:
    """How many records one training's wall time belongs to (``job_variants``; 1 in older files)."""
    n = record.get("job_variants", 1)
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 1 else 1


def _label(r: dict[str, Any]) -> str:
    if r["experiment"] == "length" and r["variant"] in ("default", "randomized"):
        return r["scheme"]
    return f"{r['scheme']} ({r['variant']})"


def _binned(values: list[float | None], width: int) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for start in range(0, len(values), width):
        chunk = [v for v in values[start : start + width] if v is not None]
        if chunk:
            xs.append(start + (len(chunk) - 1) / 2)
            ys.append(sum(chunk) / len(chunk))
    return xs, ys


def plot_results(results: Path | str, out: Path | str | None = None) -> list[Path]:
    """Write one PNG per (experiment, task) found in ``results`` into ``out`` (default ``DIR/figures``)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as err:  # pragma: no cover - only without the extra
        raise ImportError("plots need matplotlib: pip install 'posenc[viz]'") from err
    records = load_results(results)
    folder = Path(out) if out is not None else Path(results) / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for (experiment, task), rs in plot_groups(records).items():
        fig = group_figure(experiment, task, rs)
        path = folder / f"{experiment}_{task}.png"
        with replaced_whole(path) as tmp:  # a kill while saving leaves the earlier figure whole
            fig.savefig(tmp, format="png")
        written.append(path)
    return written


def plot_groups(records: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The records of each figure, by ``(experiment, task)`` in order (one probe figure, ``"text"``,
    for the causal and the MLM probes); the figure of ``(e, t)`` is saved as ``e_t.png``."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        task = "text" if r["experiment"] == "probe" else r["task"]
        groups[(r["experiment"], task)].append(r)
    return dict(sorted(groups.items()))


#: The smallest text of these figures, in points: legends, bar and value labels (ticks and axis
#: labels are matplotlib's 10). Shown at 96 CSS px per inch, as the atlas draws them, 8 pt is
#: 10.7 px on the screen.
TEXT_PT = 8

#: Probe R² below this is drawn at it (hollow triangle) with its value written underneath: a probe
#: worse than predicting the mean can reach -10 and would squash the interesting 0-1 range.
_R2_FLOOR = -0.1


def group_figure(
    experiment: str,
    task: str,
    rs: list[dict[str, Any]],
    *,
    size: tuple[float, float] = (6.4, 4.0),
    legend_beside: tuple[float, float] = (8.4, 4.4),
) -> Any:
    """The figure of one (experiment, task): its records ``rs`` drawn by the kind of metrics they
    hold, ``size`` inches (``legend_beside`` when more than 6 curves put the legend beside the
    axes), laid out at that size. The atlas draws it at the width it shows it across."""
    from matplotlib.figure import Figure  # no pyplot: no global state, nothing to close

    fig = Figure(figsize=size, dpi=120)
    ax = fig.add_subplot()
    L = rs[0]["train_length"]
    rs = sorted(rs, key=lambda r: (_label(r), r["seed"]))
    seeds = len({x["seed"] for x in rs}) > 1
    if any("per_layer" in r["metrics"] for r in rs):  # probes: one line per run
        _draw_probe(fig, ax, rs, [_label(r) + (f" s{r['seed']}" if seeds else "") for r in rs])
    else:  # one line per scheme: the mean over seeds, and a band for its 95 % interval
        runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in rs:
            runs[_label(r)].append(r)
        if any(isinstance(r.get("learned"), bool) for r in rs):  # the counts of the tables, in the legend
            runs = defaultdict(list, {f"{k} ({sum(r.get('learned') is True for r in g)}/{len(g)} learned)": g
                                      for k, g in runs.items()})  # fmt: skip
        if len(runs) > 10:  # the default cycle repeats after 10 colours
            from matplotlib import colormaps

            ax.set_prop_cycle(color=[colormaps["tab20"](i % 20) for i in range(len(runs))])
        if any("per_length" in r["metrics"] for r in rs):
            _draw_lengths(ax, runs, L, legend_beside)
        else:
            _draw_losses(ax, runs, L, legend_beside)
        if seeds:  # under the axis label, where no curve can be
            n = sorted({len(group) for group in runs.values()})
            note = f"mean of {'/'.join(map(str, n))} seeds; bands: 95 % interval"
            ax.set_xlabel(f"{ax.get_xlabel()}\n{note}")
    ax.set_title(f"{experiment}: {task} (trained at L = {L})")
    _lay_out(fig, ax)
    return fig


def _lay_out(fig: Any, ax: Any) -> None:
    """``tight_layout``, after growing the figure by the height of a legend placed under the axes."""
    legend = ax.get_legend()
    if legend is None or legend.get_in_layout():
        fig.tight_layout()
        return
    height = legend.get_window_extent().height / fig.dpi  # inches
    width, rest = fig.get_size_inches()
    fig.set_size_inches(width, rest + height)
    fig.tight_layout(rect=(0, height / (rest + height), 1, 1))


def _legend(ax: Any, beside: tuple[float, float]) -> None:
    """The curves' legend: inside the axes for up to 3, under them for up to 6 (:func:`_lay_out` makes
    the room), else beside them in a figure of ``beside`` inches."""
    handles = ax.get_legend_handles_labels()[0]
    if not handles:  # runs with nothing to draw (lengths all unavailable): none
        return
    if len(handles) <= 3:
        ax.legend(fontsize=TEXT_PT, ncol=2)
    elif len(handles) <= 6:  # under the axes, where it hides no curve; _lay_out makes the room
        legend = ax.legend(fontsize=TEXT_PT, ncol=2, loc="lower center", bbox_to_anchor=(0.5, 0.0),
                           bbox_transform=ax.figure.transFigure, frameon=False)  # fmt: skip
        legend.set_in_layout(False)
    else:  # beside the axes, where it hides no curve; the figure widens to make room
        ax.figure.set_size_inches(*beside)
        ax.legend(fontsize=TEXT_PT, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _integer_axis(axis: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))  # lengths, positions, layers: no 2.85 or 0.5


def _mean_band(ax: Any, xs: list[float], per_seed: list[list[float]], name: str) -> None:
    """The mean over seeds of ``per_seed`` curves (each aligned with ``xs``) and, with several seeds,
    its 95 % interval as a band of the same colour."""
    means = [statistics.fmean(col) for col in zip(*per_seed)]
    (line,) = ax.plot(xs, means, marker="." if len(xs) < 40 else None, label=name, lw=1.2)
    if len(per_seed) > 1:
        half = [ci95(list(col)) for col in zip(*per_seed)]
        lo = [m - h for m, h in zip(means, half)]
        hi = [m + h for m, h in zip(means, half)]
        ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.1, lw=0)


def _draw_lengths(ax: Any, runs: dict[str, list[dict[str, Any]]], L: int, beside: tuple[float, float]) -> None:
    """Exact match against task length, one line per scheme (mean over seeds); bars when every run
    has one length only."""
    curves: dict[str, dict[int, list[float]]] = {}
    for name, group in runs.items():
        by_length: dict[int, list[float]] = defaultdict(list)
        for r in group:
            for n, v in r["metrics"].get("per_length", {}).items():
                if v.get("exact_match") is not None:  # none: unavailable at that length
                    by_length[int(n)].append(v["exact_match"])
        # a length counts where every seed has it (a table that ends at L has none past it)
        curves[name] = {n: vs for n, vs in sorted(by_length.items()) if len(vs) == len(group)}
    lengths = sorted({n for curve in curves.values() for n in curve})
    ax.set(ylabel="exact match", ylim=(-0.03, 1.03))
    if len(lengths) == 1:  # a line through one x value is a dot on an axis of 2.85 ... 3.15
        (n,) = lengths
        drawn = [(name, statistics.fmean(curve[n])) for name, curve in curves.items() if curve]
        bars = ax.bar(
            range(len(drawn)), [v for _, v in drawn], width=0.5, color=[f"C{i % 10}" for i in range(len(drawn))]
        )
        ax.bar_label(bars, fmt="%.2f", fontsize=TEXT_PT, padding=2)
        ax.set_xticks(
            range(len(drawn)),
            [name for name, _ in drawn],
            rotation=20 if len(drawn) > 3 else 0,
            ha="right" if len(drawn) > 3 else "center",
        )
        ax.set_xlim(-0.6 if len(drawn) > 1 else -1.0, len(drawn) - 0.4 if len(drawn) > 1 else 1.0)
        where = "the training length" if n == L else ("beyond" if n > L else "below") + f" the training length {L}"
        ax.set_xlabel(f"all runs evaluated at one task length: n = {n} ({where})")
        return
    for name, curve in curves.items():
        if curve:
            xs = list(curve)
            _mean_band(ax, xs, [list(seed) for seed in zip(*curve.values())], name)
    ax.set_xlabel("task length n")
    _integer_axis(ax.xaxis)
    ax.axvline(L, color="grey", ls=":", lw=1)
    _legend(ax, beside)


def _draw_losses(ax: Any, runs: dict[str, list[dict[str, Any]]], L: int, beside: tuple[float, float]) -> None:
    """Held-out loss against position (bins of L/4), one line per scheme (mean over seeds)."""
    for name, group in runs.items():
        binned = [
            _binned(r["metrics"]["loss_per_position"], max(1, L // 4))
            for r in group
            if "loss_per_position" in r["metrics"]
        ]
        binned = [b for b in binned if b[0]]
        if not binned:
            continue
        shortest = min(len(xs) for xs, _ in binned)  # seeds agree; an older file may differ in length
        _mean_band(ax, binned[0][0][:shortest], [ys[:shortest] for _, ys in binned], name)
    ax.set(xlabel="position", ylabel="held-out loss (nats/byte)")
    _integer_axis(ax.xaxis)
    ax.axvline(L - 0.5, color="grey", ls=":", lw=1)
    _legend(ax, beside)


def _draw_probe(fig: Any, ax: Any, rs: list[dict[str, Any]], names: list[str]) -> None:
    """Probe R² per layer, one line per run; values below :data:`_R2_FLOOR` drawn at it, hollow,
    with the values written in the run's colour in a stack under the floor (nothing else is drawn
    there, so they collide with no line, and none with another)."""
    from matplotlib.lines import Line2D

    clipped: dict[int, list[tuple[float, str]]] = defaultdict(list)  # layer -> [(R², colour)]
    all_layers: set[int] = set()
    for r, name in zip(rs, names):
        per_layer = r["metrics"].get("per_layer")
        if not per_layer:
            continue
        layers = [p["layer"] for p in per_layer]
        r2 = [math.nan if p["r2"] is None else p["r2"] for p in per_layer]  # None: stored NaN
        all_layers.update(layers)
        (line,) = ax.plot(layers, [max(v, _R2_FLOOR) for v in r2], marker="o", label=f"{name} [{r['task']}]")
        for layer, v in zip(layers, r2):
            if v < _R2_FLOOR:
                ax.plot([layer], [_R2_FLOOR], marker="v", mfc="white", color=line.get_color(), zorder=3)
                clipped[layer].append((v, line.get_color()))
    ax.set(xlabel="layer (0 = input)", ylabel="probe R² (position)", ylim=(-0.12, 1.02))
    ax.set_yticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])  # none under the floor, where the labels go
    _integer_axis(ax.xaxis)
    handles, labels = ax.get_legend_handles_labels()
    if clipped:
        handles.append(Line2D([], [], color="0.35", marker="v", mfc="white", ls="none"))
        labels.append(f"R² < {_R2_FLOOR:g}: drawn at {_R2_FLOOR:g}, value below".replace("-", "−"))
    if handles:
        ax.legend(handles, labels, fontsize=TEXT_PT, ncol=2)
    if not clipped:
        return
    # room under the floor for the tallest stack: worked out on the laid-out axes, in points
    line_pt, gap_pt, size = TEXT_PT + 1.5, 3.0, TEXT_PT
    need_pt = gap_pt + line_pt * max(len(v) for v in clipped.values()) + 2.0
    fig.tight_layout()
    height_pt = ax.get_window_extent().height * 72 / fig.dpi
    share = min(need_pt / height_pt, 0.45)
    top = 1.02
    ax.set_ylim((_R2_FLOOR - share * top) / (1 - share), top)
    ax.axhline(_R2_FLOOR, color="0.7", lw=0.8, ls=":", zorder=0)
    first, last = min(all_layers), max(all_layers)
    for layer, entries in clipped.items():
        # the outermost layers' values run inwards, inside the axes; the others are centred
        ha, dx = (
            ("center", 0)
            if first == last
            else ("left", -3)
            if layer == first
            else ("right", 3)
            if layer == last
            else ("center", 0)
        )
        for i, (v, colour) in enumerate(sorted(entries, key=lambda e: -e[0])):  # nearest the floor first
            ax.annotate(
                f"{v:.2f}".replace("-", "−"),
                (layer, _R2_FLOOR),
                textcoords="offset points",
                xytext=(dx, -gap_pt - line_pt * i),
                ha=ha,
                va="top",
                fontsize=size,
                color=colour,
            )
