"""Figures and summary rows from ``results.json`` files; nothing here trains.

matplotlib is imported inside :func:`plot_results` (the ``viz`` extra).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from .results import load_results

__all__ = ["summary_rows", "plot_results"]


def _spread(values: list[float | None]) -> tuple[float | None, float | None]:
    xs = [v for v in values if v is not None]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def summary_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (experiment, task, scheme, variant): mean and spread over seeds of both summaries."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["experiment"], r["task"], r["scheme"], r["variant"])].append(r)
    rows = []
    for (experiment, task, scheme, variant), rs in groups.items():
        ind, ind_sd = _spread([r["in_distribution"] for r in rs])
        ood, ood_sd = _spread([r["out_of_distribution"] for r in rs])
        reason = next((r["metrics"].get("unavailable") for r in rs if r["metrics"].get("unavailable")), None)
        if reason is None:
            reason = next((v["unavailable"] for r in rs for v in r["metrics"].get("per_length", {}).values()
                           if "unavailable" in v), None)
        rows.append({"experiment": experiment, "task": task, "scheme": scheme, "variant": variant,
                     "seeds": len(rs), "metric": rs[0]["summary_metric"], "train_length": rs[0]["train_length"],
                     "in_distribution": ind, "in_distribution_sd": ind_sd, "out_of_distribution": ood,
                     "out_of_distribution_sd": ood_sd, "unavailable": reason,
                     "wall_time_s": sum(r["wall_time_s"] for r in rs)})
    return rows


def _label(r: dict[str, Any]) -> str:
    if r["experiment"] == "length" and r["variant"] in ("default", "randomized"):
        return r["scheme"]
    return f"{r['scheme']} ({r['variant']})"


def _binned(values: list[float | None], width: int) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for start in range(0, len(values), width):
        chunk = [v for v in values[start:start + width] if v is not None]
        if chunk:
            xs.append(start + (len(chunk) - 1) / 2)
            ys.append(sum(chunk) / len(chunk))
    return xs, ys


def plot_results(results: Path | str, out: Path | str | None = None) -> list[Path]:
    """Write one PNG per (experiment, task) found in ``results`` into ``out`` (default ``DIR/figures``)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - only without the extra
        raise ImportError("plots need matplotlib: pip install 'posenc[viz]'") from err
    records = load_results(results)
    folder = Path(out) if out is not None else Path(results) / "figures"
    folder.mkdir(parents=True, exist_ok=True)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        task = "text" if r["experiment"] == "probe" else r["task"]  # one probe figure: causal and MLM
        groups[(r["experiment"], task)].append(r)
    written = []
    for (experiment, task), rs in sorted(groups.items()):
        fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
        L = rs[0]["train_length"]
        for r in sorted(rs, key=lambda r: (_label(r), r["seed"])):
            m = r["metrics"]
            seed = f" s{r['seed']}" if len({x["seed"] for x in rs}) > 1 else ""
            if "per_length" in m:
                pts = [(int(n), v["exact_match"]) for n, v in m["per_length"].items() if "exact_match" in v]
                ax.plot(*zip(*pts), marker=".", label=_label(r) + seed)
                ax.set(xlabel="task length n", ylabel="exact match", ylim=(-0.03, 1.03))
            elif "loss_per_position" in m:
                ax.plot(*_binned(m["loss_per_position"], max(1, L // 4)), label=_label(r) + seed)
                ax.set(xlabel="position", ylabel="held-out loss (nats/byte)")
            elif "per_layer" in m:
                layers = [p["layer"] for p in m["per_layer"]]
                r2 = [p["r2"] for p in m["per_layer"]]
                line, = ax.plot(layers, [max(v, -0.1) for v in r2], marker="o", label=f"{_label(r)} [{r['task']}]" + seed)
                for layer, v in zip(layers, r2):  # below the axis: drawn at its floor, hollow, with the value
                    if v < -0.1:
                        ax.plot([layer], [-0.1], marker="v", mfc="white", color=line.get_color())
                        ax.annotate(f"{v:.2f}", (layer, -0.1), textcoords="offset points", xytext=(3, 3), fontsize=6)
                ax.set(xlabel="layer (0 = input)", ylabel="probe R² (position)", ylim=(-0.12, 1.02))
                ax.xaxis.get_major_locator().set_params(integer=True)
        if experiment != "probe":
            ax.axvline(L if "per_length" in rs[0]["metrics"] else L - 0.5, color="grey", ls=":", lw=1)
        ax.set_title(f"{experiment}: {task} (trained at L = {L})")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        path = folder / f"{experiment}_{task}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written
