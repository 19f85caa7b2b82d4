"""Run an experiment's jobs: skip finished ones, train with checkpoints, store each record as it completes.

A run killed at any point and started again with the same command loses nothing: finished jobs are
in ``results.json`` and are skipped; the job in progress resumes from ``DIR/checkpoints/<job>.pt``
(deleted once its records are stored). Under ``torchrun`` every rank trains, rank 0 alone writes.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .results import add_record, completed_keys
from .suite import Job, Settings, plan
from .train import distributed_context, set_threads, train

__all__ = ["Hooks", "run_experiment", "run_job"]


class Hooks(Protocol):
    """What a front end (the CLI's progress bar) hears about; every method is optional."""

    def job_started(self, job: Job, index: int, total: int) -> None: ...
    def step(self, step: int, steps: int, loss: float, steps_per_s: float) -> None: ...
    def job_finished(self, job: Job, records: list[dict[str, Any]], skipped: bool) -> None: ...


@dataclass
class _Silent:
    def job_started(self, job: Job, index: int, total: int) -> None:
        pass

    def step(self, step: int, steps: int, loss: float, steps_per_s: float) -> None:
        pass

    def job_finished(self, job: Job, records: list[dict[str, Any]], skipped: bool) -> None:
        pass


def _keys(job: Job) -> list[tuple[str, str, str, str, int]]:
    return [(job.experiment, job.task.name, job.scheme, variant, job.seed) for variant in job.variants]


def run_job(job: Job, out: Path | None, hooks: Hooks | None = None) -> list[dict[str, Any]]:
    """Train and evaluate one job; return its records (written to ``out/results.json`` by rank 0)."""
    hooks = hooks or _Silent()
    safe = job.label.replace("/", "__").replace("+", "_")
    checkpoint = out / "checkpoints" / f"{safe}.pt" if out is not None else None
    began = time.perf_counter()
    result = train(job.model, job.task, job.train, checkpoint=checkpoint, on_step=hooks.step)
    fields = job.evaluate(result.model, job)
    wall = time.perf_counter() - began
    config = {"model": dataclasses.asdict(job.model), "train": dataclasses.asdict(job.train), "task": job.task.name,
              "eval_positions": "0..s-1" if job.train.randomized_max_position is None or job.task.kind == "lm"
              else f"randomized below {job.train.randomized_max_position}"}
    rank, _ = distributed_context()
    records = []
    for variant, values in fields.items():
        record = {"experiment": job.experiment, "task": job.task.name, "scheme": job.scheme, "variant": variant,
                  "seed": job.seed, "train_length": job.train.max_length, **values, "wall_time_s": wall,
                  "resumed_from_step": result.resumed_from, "final_train_loss": result.losses[-1],
                  "parameters": result.model.num_parameters(), "config": _jsonable(config)}
        records.append(record)
        if out is not None and rank == 0:
            add_record(out, record)
    if checkpoint is not None and rank == 0 and checkpoint.exists():
        checkpoint.unlink()  # its records are stored: nothing left to resume
    return records


def _jsonable(value: Any) -> Any:
    if hasattr(value, "items"):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def run_experiment(name: str, out: Path | str, settings: Settings | None = None, *, threads: int | None = 1,
                   hooks: Hooks | None = None) -> list[dict[str, Any]]:
    """Every job of experiment ``name`` not yet in ``out/results.json``; returns the new records."""
    settings = settings or Settings()
    jobs = plan(name, settings)  # validates names before anything trains
    set_threads(threads)
    out = Path(out)
    hooks = hooks or _Silent()
    done = completed_keys(out)
    records: list[dict[str, Any]] = []
    for index, job in enumerate(jobs):
        if all(key in done for key in _keys(job)):
            hooks.job_finished(job, [], True)
            continue
        hooks.job_started(job, index, len(jobs))
        new = run_job(job, out, hooks)
        records.extend(new)
        hooks.job_finished(job, new, False)
    return records
