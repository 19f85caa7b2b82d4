"""Run an experiment's jobs: skip finished ones, train with checkpoints, store each record as it completes.

A run killed at any point and started again with the same command loses nothing: finished jobs are
in ``results.json`` and are skipped; the job in progress resumes from ``DIR/checkpoints/<job>.pt``
(deleted once its records are stored). Under ``torchrun`` every rank trains, rank 0 alone writes.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .results import RESULTS_FILE, add_record, load_results, record_key
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
    result = train(job.model, job.task, job.train, checkpoint=checkpoint, on_step=hooks.step)
    began = time.perf_counter()
    fields = job.evaluate(result.model, job)
    wall = result.wall_time_s + time.perf_counter() - began  # training (over every resumed run) and evaluation
    config = job_config(job)
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


def job_config(job: Job) -> dict[str, Any]:
    """What a record stores as its ``config``: the model, the training and the evaluation positions."""
    return _jsonable({"model": dataclasses.asdict(job.model), "train": dataclasses.asdict(job.train),
                      "task": job.task.name,
                      "eval_positions": "0..s-1" if job.train.randomized_max_position is None or job.task.kind == "lm"
                      else f"randomized below {job.train.randomized_max_position}"})


#: Config entries that do not change what a run measures: a record made with other values still counts.
_IRRELEVANT = {("train", "device"), ("train", "checkpoint_every")}


def _differences(stored: Any, wanted: Any, path: tuple = ()) -> list[str]:
    """``"train.steps: 700 stored, 50 asked"`` for each entry where two configs differ."""
    if path[:2] in _IRRELEVANT:
        return []
    if isinstance(stored, dict) and isinstance(wanted, dict):
        return [d for k in sorted(set(stored) | set(wanted), key=str)
                for d in _differences(stored.get(k), wanted.get(k), (*path, k))]
    if stored != wanted:
        return [f"{'.'.join(map(str, path))}: {stored!r} stored, {wanted!r} asked"]
    return []


def _check_stored(jobs: list[Job], records: list[dict[str, Any]], out: Path) -> None:
    """A ValueError, before anything trains, when ``results.json`` already holds a job's records
    made with another configuration (other steps, model or task sizes): skipping the job would
    report the old run under the new settings."""
    stored = {record_key(r): r for r in records}
    for job in jobs:
        wanted = json.loads(json.dumps(job_config(job)))  # as it reads back from the file
        for key in _keys(job):
            if key in stored:
                diff = _differences(stored[key].get("config"), wanted)
                if diff:
                    raise ValueError(
                        f"{out / RESULTS_FILE} already holds {job.label} [{key[3]}] made with another configuration "
                        f"({'; '.join(diff[:4])}{'; ...' if len(diff) > 4 else ''}); give another --out, or move "
                        "that results.json away to train again")


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
    records_before = load_results(out)
    _check_stored(jobs, records_before, out)
    done = {record_key(r) for r in records_before}
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
