"""posenc.experiments.runner: which jobs run again, and what a finished job leaves behind."""

from __future__ import annotations

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
    monkeypatch.setattr(runner, "run_job", lambda j, out, hooks=None: called.append(j.base_label) or [])
    runner.run_experiment("extend", tmp_path, settings)
    assert job.base_label in called


def test_checkpoint_is_deleted_once_records_are_stored(tmp_path: Path) -> None:
    """A finished job leaves no checkpoint behind: its records are in results.json, and a stale
    checkpoint would only take disk space (and be checked against every later run's settings)."""
    settings = Settings(steps=2, tasks=("copy",), schemes=("none",), quick=True)
    records = runner.run_experiment("length", tmp_path, settings)
    assert records and load_results(tmp_path)
    assert list((tmp_path / "checkpoints").glob("*.pt")) == []
