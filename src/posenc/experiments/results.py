"""``results.json``: one record per finished (experiment, task, scheme, variant, seed), written as it completes.

The file (``SCHEMA_VERSION`` 1) is a JSON object::

    {"schema": 1, "records": [record, ...]}

and each record::

    {"experiment": "length", "task": "copy", "scheme": "rope", "variant": "default", "seed": 0,
     "train_length": 16,                      # L: the longest task length seen in training
     "metrics": {...},                        # per-length / per-position / per-layer, see docs/experiments.md, "results.json"
     "in_distribution": 1.0,                  # summary at lengths <= L (null when unavailable)
     "out_of_distribution": 0.13,             # summary at lengths > L (null when unavailable)
     "summary_metric": "exact_match",         # what the two summaries measure
     "wall_time_s": 31.2, "parameters": 103234,
     "config": {"model": {...}, "train": {...}, "task": "copy"}}

Writes go to a temporary file renamed over the old one, so a killed run never leaves a broken file.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._files import replaced_whole

__all__ = [
    "SCHEMA_VERSION",
    "RESULTS_FILE",
    "record_key",
    "load_results",
    "add_record",
    "completed_keys",
    "unavailable_reason",
]

SCHEMA_VERSION = 1
RESULTS_FILE = "results.json"
REQUIRED = (
    "experiment",
    "task",
    "scheme",
    "variant",
    "seed",
    "train_length",
    "metrics",
    "in_distribution",
    "out_of_distribution",
    "summary_metric",
    "wall_time_s",
    "config",
)


def record_key(record: dict[str, Any]) -> tuple[str, str, str, str, int]:
    return (record["experiment"], record["task"], record["scheme"], record["variant"], int(record["seed"]))


def load_results(out: Path | str) -> list[dict[str, Any]]:
    """The records in ``out/results.json`` (or ``out`` itself when it names the file); [] if none yet."""
    path = Path(out)
    path = path / RESULTS_FILE if path.is_dir() or path.suffix != ".json" else path
    if not path.exists():
        return []
    if path.is_dir():
        raise ValueError(f"{path} is a folder, where the results file goes; move it away or use another folder")
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"cannot read {path} ({err.strerror or type(err).__name__})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not readable JSON ({err}); move it away to start a new results file") from None
    if not isinstance(data, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(data), "a number")
        raise ValueError(
            f"{path} is not a posenc results file (it holds {kind}, not an object "
            f'{{"schema": {SCHEMA_VERSION}, "records": [...]}}); move it away to start a new one'
        )
    if "schema" not in data:
        raise ValueError(
            f"{path} is not a posenc results file: it has no schema field (this posenc reads schema "
            f"{SCHEMA_VERSION}); move it away to start a new one"
        )
    if data["schema"] != SCHEMA_VERSION:
        raise ValueError(
            f"{path} has schema {data['schema']!r}; this posenc reads schema {SCHEMA_VERSION} "
            "(a newer posenc wrote it, or another program): move it away to start a new one"
        )
    if not isinstance(data.get("records"), list):
        raise ValueError(
            f"{path} is not a posenc results file: it has no records list; move it away to start a new one"
        )
    for index, record in enumerate(data["records"]):
        if not _well_formed(record):
            raise ValueError(
                f"{path}: record {index} is not a result record (a record is an object with "
                f"{', '.join(REQUIRED)}; experiment, task, scheme and variant as strings, seed and "
                "train_length as integers); move the file away or remove that record"
            )
    return data["records"]


def unavailable_reason(records: list[Any]) -> str | None:
    """Why a score of these records is missing (the first reason stored by
    :func:`posenc.experiments.evaluate.unavailable_reason`: the run's own, else one length's), cut
    to its first clause for a table cell; None when they give none. Reads records defensively
    (the report shows files of other versions)."""
    for key in ("metrics", "per_length"):
        for r in records:
            metrics = r.get("metrics") if isinstance(r, dict) else None
            if not isinstance(metrics, dict):
                continue
            values = (
                [metrics]
                if key == "metrics"
                else list((metrics.get("per_length") or {}).values())
                if isinstance(metrics.get("per_length"), dict)
                else []
            )
            for v in values:
                reason = v.get("unavailable") if isinstance(v, dict) else None
                if isinstance(reason, str) and reason:
                    return reason.split(";")[0]
    return None


def _well_formed(record: object) -> bool:
    if not isinstance(record, dict) or any(k not in record for k in REQUIRED):
        return False
    whole = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731
    number = lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))  # noqa: E731
    return (
        all(isinstance(record[k], str) for k in ("experiment", "task", "scheme", "variant", "summary_metric"))
        and whole(record["seed"])
        and whole(record["train_length"])
        and isinstance(record["metrics"], dict)
        and number(record["in_distribution"])
        and number(record["out_of_distribution"])
        and number(record["wall_time_s"])
        and isinstance(record["config"], dict)
    )


def completed_keys(out: Path | str) -> set[tuple[str, str, str, str, int]]:
    return {record_key(r) for r in load_results(out)}


def add_record(out: Path | str, record: dict[str, Any]) -> Path:
    """Store ``record`` in ``out/results.json`` (replacing one with the same key), atomically."""
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise ValueError(f"result record lacks {missing}; a record needs {', '.join(REQUIRED)}")
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / RESULTS_FILE
    with _locked(folder / f".{RESULTS_FILE}.lock"):  # several experiments may share one folder
        records = [r for r in load_results(folder) if record_key(r) != record_key(record)]
        records.append(_finite(record))
        with replaced_whole(path) as tmp:  # a full disk, or a folder where the file goes: no temporary left
            tmp.write_text(json.dumps({"schema": SCHEMA_VERSION, "records": records}, indent=1, allow_nan=False) + "\n")
    return path


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (POSIX ``flock``; no lock where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _finite(value: Any) -> Any:
    """The record with NaN and infinities as null (JSON has no such numbers; a diverged run is data)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
