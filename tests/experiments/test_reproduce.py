"""A committed record repeats exactly: one seed of one scheme, re-run by the command the record
names (narrowed to that scheme and seed), gives the same numbers to the last bit."""

from __future__ import annotations

import json
import platform
import shlex
from pathlib import Path

import pytest
import torch

RECORDS = Path(__file__).resolve().parents[2] / "docs" / "experiments"
#: what a re-run must reproduce exactly (time, provenance and the resume count may differ)
EXACT = (
    "metrics",
    "in_distribution",
    "out_of_distribution",
    "final_train_loss",
    "steps_trained",
    "criterion_met_at",
    "learned",
    "parameters",
    "config",
)


def _committed() -> list[dict]:
    """Records with provenance (written by the runner since it stores the command) of every
    committed folder."""
    found = []
    for path in sorted(RECORDS.glob("*/results.json")):
        for record in json.loads(path.read_text())["records"]:
            if isinstance(record.get("provenance"), dict) and "steps_trained" in record:
                found.append(record)
    return found


def _cheapest(records: list[dict]) -> dict:
    """The record whose training was shortest (a copy seed that met its criterion early)."""
    return min(records, key=lambda r: (r["steps_trained"] * r["config"]["model"]["num_layers"], r["seed"]))


def _narrowed(command: str, record: dict, out: Path) -> list[str]:
    """The record's command for its own scheme, seed and task only, into ``out``."""
    args = shlex.split(command)[1:]  # without "posenc"
    wanted = {"--schemes": record["scheme"], "--seeds": str(record["seed"]), "--tasks": record["task"]}
    wanted["--out"] = str(out)
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in wanted:
            skip = True
            continue
        kept.append(arg)
    for option, value in wanted.items():
        kept += [option, value]
    return kept


def test_there_is_a_committed_record_to_repeat() -> None:
    records = _committed()
    assert records, f"no record with provenance under {RECORDS}"
    record = _cheapest(records)
    assert record["provenance"]["command"].startswith("posenc experiment ")


@pytest.mark.slow
def test_a_committed_record_repeats_exactly(tmp_path) -> None:
    from posenc.cli import main
    from posenc.experiments.results import load_results

    record = _cheapest(_committed())
    origin = record["provenance"]
    if origin["torch"] != torch.__version__:
        pytest.skip(f"the record was made with torch {origin['torch']}; bit-for-bit repeats need the same version")
    corpus = origin.get("corpus")
    if corpus and corpus["name"] == "text" and origin["python"] != platform.python_version():
        pytest.skip("pydoc_data.topics changes with the Python version")
    code = main(_narrowed(origin["command"], record, tmp_path))
    assert code == 0
    rerun = [r for r in load_results(tmp_path) if r["variant"] == record["variant"]]  # add-vs-concat runs both
    assert len(rerun) == 1, [r["variant"] for r in load_results(tmp_path)]
    (again,) = rerun
    for key in EXACT:
        assert again[key] == record[key], key
