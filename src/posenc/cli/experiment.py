"""``posenc experiment NAME``: train small transformers and put a claim about encodings to the test.

Runs unchanged under ``torchrun --nproc-per-node N -m posenc.cli experiment ...`` (rank 0 shows the
progress and writes the results). typer and rich are imported here, the experiments inside the command.
Every error is one line (``posenc.cli.fail``): 2 for bad input, 1 for a run or a file that failed;
Ctrl-C exits 130 and SIGTERM 143, each after saving a checkpoint of the step in progress.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from . import MAX_THREADS, fail, stopped, usable_path

__all__ = ["register", "print_summary"]


def _split(text: str | None, option: str) -> tuple[str, ...] | None:
    if text is None:
        return None
    items = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))  # each once
    if not items:  # an empty value would silently mean the experiment's defaults
        fail(f"{option} is empty; give comma-separated values or leave the option out")
    return items


def _seeds(text: str | None) -> tuple[int, ...] | None:
    items = _split(text, "--seeds")
    if items is None:
        return None
    try:
        seeds = tuple(int(x) for x in items)
    except ValueError:
        seeds = ()
    from ..experiments.train import MAX_SEED

    if not seeds or min(seeds) < 0 or max(seeds) > MAX_SEED:
        fail(f"--seeds: seeds must be comma-separated integers in 0..{MAX_SEED}, got {text!r}")
    return seeds


def _fmt(mean: float | None, ci: float | None, seeds: int) -> str:
    if mean is None:
        return "n/a"
    return f"{mean:.3f} ± {ci:.3f}" if seeds > 1 else f"{mean:.3f}"


def _count(r: dict[str, Any], field: str) -> str:
    """``k/n`` seeds, "?" for records older than the ``learned`` flag."""
    if r["learned_unknown"] == r["seeds"]:
        return "?"
    return f"{r[field]}/{r['seeds']}"


def print_summary(results: Path | str, console: Any = None, baseline: str | None = None) -> None:
    """Rich tables of ``results.json``: one row per (experiment, task, scheme, variant) with the
    seeds that learned and generalised, then the paired differences against ``baseline``."""
    from rich.console import Console
    from rich.table import Table

    from ..experiments.plots import summary_rows
    from ..experiments.results import load_results
    from ..experiments.stats import count_flags, paired_differences

    console = console or Console()
    records = load_results(results)
    rows = summary_rows(records)
    table = Table(title=f"posenc experiments: {results}")
    for column in (
        "experiment",
        "task",
        "scheme",
        "variant",
        "metric",
        "L",
        "learned",
        "generalised",
        "in distribution",
        "out of distribution (learned seeds)",
        "flags",
        "time (s)",
    ):
        table.add_column(column, overflow="fold")  # wrap in a narrow terminal rather than cut to "leng…"
    for r in rows:
        ood = _fmt(r["out_of_distribution"], r["out_of_distribution_ci95"], r["ood_seeds"])
        if r["status"]:
            ood = r["status"]
        elif r["out_of_distribution"] is None and r["unavailable"]:
            ood = f"n/a: {r['unavailable']}"
        table.add_row(
            r["experiment"],
            r["task"],
            r["scheme"],
            r["variant"],
            r["metric"],
            str(r["train_length"]),
            _count(r, "learned"),
            _count(r, "generalised"),
            _fmt(r["in_distribution"], r["in_distribution_ci95"], r["seeds"]),
            ood,
            count_flags(r),
            f"{r['wall_time_s']:.0f}",
        )
    notes = []
    if any(r["seeds"] > 1 for r in rows):
        notes.append("mean ± half-width of the 95 % interval over seeds (Student's t)")
    if any(r["time_shared"] for r in rows):
        notes.append("time: one training evaluated as several variants (extend's scalings) is split among them")
    table.caption = "; ".join(notes) or None
    console.print(table)
    pairs = paired_differences(records, baseline)
    if pairs:
        console.print(paired_table(pairs, title=f"paired differences per seed: scheme - baseline ({results})"))


def paired_table(pairs: list[dict[str, Any]], title: str) -> Any:
    """The rich table of :func:`posenc.experiments.stats.paired_differences`."""
    from rich.table import Table

    table = Table(title=title)
    for column in (
        "task",
        "scheme",
        "baseline",
        "range",
        "pairs",
        "mean difference [95 % interval]",
        "verdict",
        "left out",
    ):
        table.add_column(column, overflow="fold")
    for p in pairs:
        table.add_row(
            p["task"],
            p["scheme"] + ("" if p["variant"] in ("default", "randomized") else f" ({p['variant']})"),
            p["baseline"],
            p["range"],
            str(p["pairs"]),
            format_difference(p),
            p["words"],
            "; ".join(p["excluded"]),
        )
    table.caption = "loss: t-interval over paired seeds (lower is better); exact match: percentile bootstrap over seeds"
    return table


def format_difference(p: dict[str, Any]) -> str:
    """``+0.012 [-0.004, +0.028]``, or the one difference there is."""
    if p["mean"] is None:
        return "—"
    if p["low"] is None:
        return f"{p['mean']:+.3f}"
    return f"{p['mean']:+.3f} [{p['low']:+.3f}, {p['high']:+.3f}]"


class _Progress:
    """Rich progress bar for the runner's hooks: one bar per job, with loss and speed."""

    def __init__(self, progress: Any) -> None:
        self.progress, self.task = progress, None

    def job_started(self, job: Any, index: int, total: int) -> None:
        from rich.markup import escape

        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task(
            escape(f"[{index + 1}/{total}] {job.label}"), total=job.train.steps, loss=float("nan"), speed=0.0
        )

    def step(self, step: int, steps: int, loss: float, steps_per_s: float) -> None:
        self.progress.update(self.task, completed=step, loss=loss, speed=steps_per_s)

    def job_finished(self, job: Any, records: list, skipped: bool) -> None:
        from rich.markup import escape

        if skipped:
            self.progress.console.print(f"[dim]{escape(job.label)}: already in results.json, skipped[/dim]")
        for r in records:
            ind, ood = r["in_distribution"], r["out_of_distribution"]
            text = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
            named = f"{job.base_label} [{r['variant']}]"
            self.progress.console.print(
                escape(
                    f"{named}: {r['summary_metric']} in {text(ind)}, "
                    f"out {text(ood)} ({r['wall_time_s']:.0f} s"
                    + (f", one training for {len(records)} variants)" if len(records) > 1 else ")")
                )
            )


def _interrupted(err: BaseException, results: Path) -> str:
    """What an interrupted run saved and how to go on; results.json is named only when there is one."""
    from ..experiments.train import Interrupted

    how, _ = stopped(err)
    saved = (
        f"a checkpoint of step {err.step} is in {err.checkpoint.parent}; "
        if isinstance(err, Interrupted) and err.checkpoint is not None
        else ""
    )
    kept = f" ({results} keeps the finished runs)" if results.is_file() else ""
    return f"{how}: {saved}the same command resumes{kept}"


def _check_figures(folder: Path) -> None:
    """Exit 1 now, not after training, when the figures cannot go into ``folder/figures``."""
    figures = folder / "figures"
    if figures.exists() and not figures.is_dir():
        fail(
            f"cannot draw the figures into {figures}: it is a file, not a folder; move it away or give another --out",
            code=1,
        )


def _draw(name: str, folder: Path, console: Any, baseline: str | None = None) -> None:
    """The summary table and the figures of ``folder/results.json``; every failure one line."""
    from rich.markup import escape

    from ..experiments.plots import plot_results
    from ..experiments.results import RESULTS_FILE
    from ..experiments.runner import _os_reason

    try:
        print_summary(folder, console, baseline)
        figures = plot_results(folder)
    except ImportError as err:
        console.print(f"[yellow]{escape(str(err))}[/yellow]", soft_wrap=True)
    except ValueError as err:  # an unreadable or foreign results.json: its path and what is wrong
        fail(str(err), code=1)
    except OSError as err:
        fail(f"cannot draw the figures: {_os_reason(err)}", code=1)
    except KeyboardInterrupt as err:
        console.print(
            escape(
                f"interrupted while drawing the figures: the results are saved in "
                f"{folder / RESULTS_FILE}; `posenc experiment {name} --plot-only --out {folder}` "
                "draws the figures again"
            ),
            soft_wrap=True,
        )
        raise typer.Exit(stopped(err)[1]) from None
    else:
        console.print(escape("figures: " + ", ".join(str(p) for p in figures)), soft_wrap=True)


#: What each experiment trains, its tasks and its schemes (``--help``; a test holds it to the plans).
EXPERIMENT_HELP = {
    "length": "2-layer decoders on copy (5 seeds, trained until exact match >= 0.95 at L = 16, budget 5000 "
    "steps) and a byte LM on pydoc_data.topics (text, 3 seeds, L = 64, budget 1500 steps); tasks copy, text "
    "(--tasks: also reverse, sort, addition, fortunes, binary-reverse, word-order, text-mlm); schemes none, "
    "sinusoidal, learned, rope, alibi, t5, rope+randomized, kerple, sandwich, fire, cope, forgetting, dpb",
    "byte-lm": "4-layer byte LMs on Debian's fortunes at L = 128, loss per position to 512, 3 paired seeds, "
    "600 steps of 32 windows (stopping early at a loss plateau); task fortunes (or text); schemes alibi, "
    "kerple, fire, forgetting, rope, none",
    "learned-vs-sinusoidal": "byte LMs on pydoc_data.topics, 3 seeds, held-out loss below L; task text; "
    "schemes sinusoidal, learned",
    "add-vs-concat": "byte LMs with the code added to the token embedding or concatenated to a narrower one; "
    "task text; schemes sinusoidal, learned",
    "probe": "3-layer byte LMs with and without residuals and a bidirectional masked-byte encoder, then a "
    "ridge probe of position per layer; tasks text, text-mlm (fixed); schemes none, sinusoidal, rope",
    "extend": "a RoPE byte LM at L = 64 scored to 8L under default, linear, ntk and yarn scaling; task text; "
    "scheme rope",
}


def experiment(
    name: str = typer.Argument(
        ...,
        metavar="NAME",
        help="; ".join(f"{key}: {words}" for key, words in EXPERIMENT_HELP.items()),
    ),
    schemes: str | None = typer.Option(
        None,
        metavar="NAMES",
        help="comma-separated scheme labels: NAME, NAME+randomized, NAME+nopeN (layers N, 2N, ... without "
        "positional encoding, as Llama 4's every fourth: rope+nope4 with --layers 4 or more)",
    ),
    layers: int | None = typer.Option(
        None,
        min=1,
        metavar="L",
        help="transformer layers of every model (default: the experiment's, 2; probe 3, byte-lm 4)",
    ),
    seeds: str | None = typer.Option(None, metavar="SEEDS", help="comma-separated integer seeds"),
    steps: int | None = typer.Option(
        None, min=1, metavar="N", help="training steps per run (default: the experiment's)"
    ),
    tasks: str | None = typer.Option(None, metavar="TASKS", help="comma-separated tasks (default: the experiment's)"),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="small budget: fewer steps and evaluation samples (and seeds where an experiment repeats them)",
    ),
    out: Path | None = typer.Option(
        None, metavar="DIR", help="results folder (default runs/NAME); rerun to resume; one run at a time per folder"
    ),
    threads: int = typer.Option(
        1, min=1, max=MAX_THREADS, metavar="T", help="torch threads (1: repeatable and kind to shared machines)"
    ),
    device: str = typer.Option("cpu", metavar="DEVICE", help="torch device, e.g. cpu or cuda"),
    baseline: str | None = typer.Option(
        None,
        metavar="SCHEME",
        help="the scheme label the paired differences are taken against (default: rope where it ran, else the first)",
    ),
    plot_only: bool = typer.Option(
        False,
        "--plot-only",
        help="only draw the figures and the table of everything in "
        "DIR/results.json; trains nothing, so it refuses --steps, --seeds, --quick, "
        "--tasks, --schemes and --threads",
    ),
) -> None:
    """Train small transformers on generated tasks and compare encodings (results in DIR/results.json).

    Every record says whether its seed learned the task; the tables give, per scheme, the seeds that
    learned and generalised, and the paired differences per seed against --baseline.

    Ctrl-C or SIGTERM saves a checkpoint of the step in progress (exit 130 or 143); the same command resumes.
    """
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from .._files import file_in_the_way
    from ..bench.timing import resolve_device
    from ..experiments.results import RESULTS_FILE, load_results
    from ..experiments.runner import _os_reason, run_experiment
    from ..experiments.suite import EXPERIMENTS, Settings, plan
    from ..experiments.train import distributed_context, terminate_as_interrupt

    console = Console()
    if not console.is_terminal:  # a log file or a pipe: no terminal width to fit, keep the table whole
        console = Console(width=160)
    if name not in EXPERIMENTS:
        fail(f"unknown experiment {name!r}; choose one of: {', '.join(EXPERIMENTS)}")
    folder = out if out is not None else Path("runs") / name
    results = folder / RESULTS_FILE
    usable_path("--out", results)  # a name too long for the file system: one line, not a traceback
    if plot_only:
        given = [
            option
            for option, used in (
                ("--steps", steps is not None),
                ("--seeds", seeds is not None),
                ("--quick", quick),
                ("--tasks", tasks is not None),
                ("--schemes", schemes is not None),
                ("--layers", layers is not None),
                ("--threads", threads != 1),
            )
            if used
        ]
        if given:
            fail(
                f"--plot-only draws everything in {results} and trains nothing: it takes no {', '.join(given)}; "
                "leave them out, or drop --plot-only to train"
            )
    try:
        resolve_device(device)  # a clear error now, not a traceback from the first training step
    except ValueError as err:
        fail(str(err))
    if plot_only:
        blocking = file_in_the_way(results)
        if blocking is not None:
            fail(f"cannot read results from {folder}: {blocking} is a file, not a folder; give --out a folder", code=1)
        if not results.exists():
            fail(
                f"no results.json in {folder}: run the experiment without --plot-only first, or give --out the "
                "folder of an earlier run"
            )
        try:
            held = sorted({r["experiment"] for r in load_results(folder)})
        except ValueError as err:
            fail(str(err), code=1)
        if name not in held:
            fail(
                f"{results} holds no {name!r} results (it holds: {', '.join(held) or 'none'}); give --out the "
                f"folder of a {name} run"
            )
        _check_figures(folder)
        with terminate_as_interrupt():
            _draw(name, folder, console, baseline)
        return
    settings = Settings(
        schemes=_split(schemes, "--schemes"),
        seeds=_seeds(seeds),
        steps=steps,
        tasks=_split(tasks, "--tasks"),
        quick=quick,
        device=device,
        layers=layers,
    )
    try:
        plan(name, settings)  # every name checked before anything trains
    except ValueError as err:
        fail(str(err))
    try:
        rank, _ = distributed_context(device)
    except ValueError as err:
        fail(f"--device: {err}")
    if rank == 0:
        cpus = os.cpu_count()
        if cpus is not None and threads > cpus:
            Console(stderr=True).print(
                f"[yellow]warning:[/] --threads {threads} is more than the CPUs here ({cpus}): "
                "the extra threads only compete for them (slower, not faster)",
                highlight=False,
                soft_wrap=True,
            )
        _check_figures(folder)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TextColumn("loss {task.fields[loss]:.4f}"),
        TextColumn("{task.fields[speed]:.1f} steps/s"),
        TimeElapsedColumn(),
    )
    with terminate_as_interrupt():  # SIGTERM saves the step in progress as Ctrl-C does, here and while drawing
        try:
            with Progress(*columns, console=console, disable=rank != 0) as progress:
                run_experiment(
                    name, folder, settings, threads=threads, hooks=_Progress(progress) if rank == 0 else None
                )
        except (ValueError, OSError) as err:  # under torchrun every rank meets it; one says so
            if rank == 0:
                fail(str(err) if isinstance(err, ValueError) else f"the run failed: {_os_reason(err)}", code=1)
            raise typer.Exit(1) from None
        except KeyboardInterrupt as err:
            if rank == 0:
                console.print(escape(_interrupted(err, results)), soft_wrap=True)
            raise typer.Exit(stopped(err)[1]) from None
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        if rank == 0:
            _draw(name, folder, console, baseline)


def register(app: typer.Typer) -> None:
    """Add ``posenc experiment`` to the root app."""
    app.command("experiment", short_help="Train small transformers to compare encodings (resumable).")(experiment)
