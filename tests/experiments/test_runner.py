"""posenc.experiments.runner: which jobs run again, and what a finished job leaves behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from posenc.experiments import runner
from posenc.experiments.results import add_record, load_results
from posenc.experiments.suite import Settings, plan


def test_a_job_with_some_variants_stored_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner skips a job only when the records of all its variants are stored: an extend job
    whose "default" record alone made it to results.json (a run killed between two add_record
    calls) must train again, or its linear, ntk and yarn rows would never appear."""
    settings = Settings(steps=2, quick=True)
    jobs = plan("extend", settings)
    job = jobs[0]
    assert len(job.variants) > 1 and "default" in job.variants
    add_record(
        tmp_path,
        {
            "experiment": job.experiment,
            "task": job.task.name,
            "scheme": job.scheme,
            "variant": "default",
            "seed": job.seed,
            "train_length": job.train.max_length,
            "metrics": {},
            "in_distribution": 1.0,
            "out_of_distribution": 2.0,
            "summary_metric": "loss",
            "wall_time_s": 0.0,
            "config": runner.job_config(job),
        },
    )
    called: list[str] = []
    monkeypatch.setattr(runner, "run_job", lambda j, out, hooks=None, command=None: called.append(j.base_label) or [])
    runner.run_experiment("extend", tmp_path, settings)
    assert job.base_label in called


def test_checkpoint_is_deleted_once_records_are_stored(tmp_path: Path) -> None:
    """A finished job leaves no checkpoint behind: its records are in results.json, and a stale
    checkpoint would only take disk space (and be checked against every later run's settings)."""
    settings = Settings(steps=2, tasks=("copy",), schemes=("none",), quick=True)
    records = runner.run_experiment("length", tmp_path, settings)
    assert records and load_results(tmp_path)
    assert list((tmp_path / "checkpoints").glob("*.pt")) == []


def _dead_pid() -> int:
    """The id of a process that has ended."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


def test_temporaries_of_killed_runs_are_cleared_at_the_next_start(tmp_path: Path) -> None:
    """A kill while results.json, a checkpoint or a figure is written leaves ``.NAME.tmp<pid>``
    beside it; the next run on the folder deletes those of processes that are gone (the results'
    ones stayed for good). A running process's temporaries and other files are left alone."""
    dead, running = _dead_pid(), os.getppid()
    left = [
        tmp_path / f".results.json.tmp{dead}",
        tmp_path / "checkpoints" / f".length__copy__none__seed0.pt.tmp{dead}",
        tmp_path / "checkpoints" / f"length__copy__none__seed0.pt.tmp{dead}",  # as older versions named them
        tmp_path / "figures" / f".length_copy.png.tmp{dead}",
    ]
    kept = [tmp_path / f".results.json.tmp{running}", tmp_path / f"notes.tmp{dead}"]
    for path in left + kept:
        path.parent.mkdir(exist_ok=True)
        path.write_text("{")
    settings = Settings(steps=1, tasks=("copy",), schemes=("none",), quick=True)
    assert len(runner.run_experiment("length", tmp_path, settings)) == 1
    assert not any(path.exists() for path in left) and all(path.exists() for path in kept)


def test_a_checkpoint_left_beside_stored_records_is_deleted(tmp_path: Path) -> None:
    """A run killed after it stored a job's records and before it deleted the job's checkpoint left
    the checkpoint for good (the job is skipped from then on); the next run deletes it."""
    settings = Settings(steps=1, tasks=("copy",), schemes=("none",), quick=True)
    runner.run_experiment("length", tmp_path, settings)
    checkpoint = runner.checkpoint_path(plan("length", settings)[0], tmp_path)
    checkpoint.write_bytes(b"left by a killed run")
    assert runner.run_experiment("length", tmp_path, settings) == []  # the job is skipped
    assert list(checkpoint.parent.iterdir()) == []
