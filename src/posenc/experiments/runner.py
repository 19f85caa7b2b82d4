"""Run an experiment's jobs: skip finished ones, train with checkpoints, store each record as it completes.

A run killed at any point and started again with the same command loses nothing: finished jobs are
in ``results.json`` and are skipped; the job in progress resumes from ``DIR/checkpoints/<job>.pt``
(deleted once its records are stored); the temporaries a kill leaves mid-write are deleted by the
next run. SIGTERM stops a run as Ctrl-C does, with the same checkpoint.
Under ``torchrun`` every rank trains, rank 0 alone writes. One run at a time holds ``DIR/.lock``: a
second one on the same folder stops at once rather than train the same jobs into the same checkpoints.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import math
import re
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from .._files import file_in_the_way, remove_stale_temporaries, replaced_whole
from .results import RESULTS_FILE, add_record, load_results, record_key
from .suite import Job, Settings, plan
from .train import (
    checkpoint_config,
    config_differences,
    describe_differences,
    distributed_context,
    load_checkpoint,
    set_threads,
    terminate_as_interrupt,
    train,
)

__all__ = ["Hooks", "run_experiment", "run_job", "LOCK_FILE", "save_encoding", "load_encoding", "load_layer_encodings"]

LOCK_FILE = ".lock"  # in the output folder, held by the run writing to it


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


def checkpoint_path(job: Job, out: Path) -> Path:
    """Where ``job`` keeps its checkpoint under ``out`` while it trains."""
    return out / "checkpoints" / (job.label.replace("/", "__").replace("+", "_") + ".pt")


def encoding_path(job: Job, out: Path) -> Path:
    """Where ``job``'s trained encoding (:func:`save_encoding`) is kept under ``out``."""
    return out / "encodings" / (job.label.replace("/", "__").replace("+", "_") + ".pt")


def _encoding_payload(encoding: Any) -> dict[str, Any]:
    return {
        "scheme": encoding.name,
        "config": _jsonable(dataclasses.asdict(encoding.config)),
        "state": {k: v.detach().cpu().clone() for k, v in encoding.state_dict().items()},
    }


def save_encoding(encoding: Any, path: Path, *, layers: list[Any] | None = None) -> None:
    """The trained positional encoding: its scheme name, config and tensors (no pickled classes:
    :func:`load_encoding` reads it with ``weights_only=True``), written whole or not at all.

    ``layers``: with a layer schedule (``ModelConfig.layer_schemes``), each layer's encoding
    (``encoding`` is the model's scheme among them): their scheme names are stored in layer order,
    and each other scheme once (:func:`load_layer_encodings` rebuilds the list)."""
    payload = _encoding_payload(encoding)
    if layers is not None:
        payload["layers"] = [e.name for e in layers]
        payload["other_layers"] = {e.name: _encoding_payload(e) for e in layers if e is not encoding}
        if len({id(e) for e in layers if e.name == encoding.name}) > 1:  # one module per layer
            payload["per_layer"] = [_encoding_payload(e) for e in layers]
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced_whole(path) as tmp:
        torch.save(payload, tmp)


def load_encoding(path: Path | str) -> Any:
    """The encoding :func:`save_encoding` wrote, rebuilt from its scheme, config and tensors (with a
    layer schedule: the model's scheme; :func:`load_layer_encodings` gives every layer's)."""
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or not {"scheme", "config", "state"} <= payload.keys():
        raise ValueError(f"{path} is not a trained encoding written by posenc experiment")
    return _rebuilt(payload)


def _rebuilt(payload: dict[str, Any]) -> Any:
    from ..schemes.base import create

    encoding = create(payload["scheme"], **payload["config"])
    encoding.load_state_dict(payload["state"])
    return encoding.eval()


def load_layer_encodings(path: Path | str) -> list[Any]:
    """Each layer's encoding of a run with a layer schedule (``rope+nope4``), as :func:`save_encoding`
    wrote them: layers with the same scheme share one module, the model's own scheme is the one
    :func:`load_encoding` gives. A file of a run without a schedule is a ValueError."""
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or not {"scheme", "config", "state"} <= payload.keys():
        raise ValueError(f"{path} is not a trained encoding written by posenc experiment")
    if "layers" not in payload:
        raise ValueError(
            f"{path} holds one encoding shared by every layer (a run without a layer schedule): read it with load_encoding"
        )
    if "per_layer" in payload:
        return [_rebuilt(each) for each in payload["per_layer"]]
    built = {payload["scheme"]: _rebuilt(payload)}
    built.update({name: _rebuilt(other) for name, other in payload["other_layers"].items()})
    return [built[name] for name in payload["layers"]]


def run_job(job: Job, out: Path | None, hooks: Hooks | None = None, command: str | None = None) -> list[dict[str, Any]]:
    """Train and evaluate one job; return its records (written to ``out/results.json`` by rank 0,
    after the trained encoding, ``out/encodings/LABEL.pt``). Each record says whether the seed
    ``learned`` its task (:func:`.criteria.learned`) and what produced it (``provenance``: the
    ``command``, this process's own by default, the versions and the corpus)."""
    hooks = hooks or _Silent()
    checkpoint = checkpoint_path(job, out) if out is not None else None
    result = train(job.model, job.task, job.train, checkpoint=checkpoint, on_step=hooks.step)
    began = time.perf_counter()
    fields = job.evaluate(result.model, job)
    wall = result.wall_time_s + time.perf_counter() - began  # training (over every resumed run) and evaluation
    config = job_config(job)
    rank, _ = distributed_context()
    if out is not None and rank == 0:
        scheduled = job.model.layer_schemes is not None or job.model.per_layer
        layers = [b.attn.encoding for b in result.model.blocks] if scheduled else None
        save_encoding(result.model.scheme, encoding_path(job, out), layers=layers)
    from .criteria import describe, learned
    from .provenance import provenance

    origin = provenance(job.task.name, command)
    records = []
    for variant, values in fields.items():
        per_length = values["metrics"].get("per_length")
        finite = bool(result.losses) and math.isfinite(result.losses[-1])
        record = {
            "experiment": job.experiment,
            "task": job.task.name,
            "scheme": job.scheme,
            "variant": variant,
            "seed": job.seed,
            "train_length": job.train.max_length,
            **values,
            "wall_time_s": wall,
            "job_variants": len(fields),  # records sharing this training and its wall time (extend's scalings)
            "resumed_from_step": result.resumed_from,
            "final_train_loss": result.losses[-1] if finite else None,
            "diverged": not finite,
            "learned": learned(job.task, job.train, result.losses, per_length, values["in_distribution"]),
            "learned_rule": describe(job.task, job.train),
            "steps_trained": len(result.losses),
            "criterion_met_at": result.criterion_met_at,
            "parameters": result.model.num_parameters(),
            "quick": bool(job.extra.get("quick", False)),  # a --quick smoke test, not a measurement
            "config": _jsonable(config),
            "provenance": origin,
        }
        records.append(record)
        if out is not None and rank == 0:
            add_record(out, record)
    if checkpoint is not None and rank == 0 and checkpoint.exists():
        checkpoint.unlink()  # its records are stored: nothing left to resume
    return records


def job_config(job: Job) -> dict[str, Any]:
    """What a record stores as its ``config``: the model, the training and the evaluation positions."""
    return _jsonable(
        {
            "model": dataclasses.asdict(job.model),
            "train": dataclasses.asdict(job.train),
            "task": job.task.name,
            "eval_samples": job.extra["samples"],
            "eval_positions": "0..s-1"
            if job.train.randomized_max_position is None or job.task.kind == "lm"
            else f"randomized below {job.train.randomized_max_position}",
        }
    )


def _check_stored(jobs: list[Job], records: list[dict[str, Any]], out: Path) -> None:
    """A ValueError, before anything trains, when ``results.json`` already holds a job's records
    made with another configuration (other steps, model or task sizes): skipping the job would
    report the old run under the new settings."""
    stored = {record_key(r): r for r in records}
    for job in jobs:
        wanted = json.loads(json.dumps(job_config(job)))  # as it reads back from the file
        for key in _keys(job):
            if key in stored:
                config = stored[key].get("config")
                if isinstance(config, dict) and "eval_samples" not in config:  # stored before the field existed:
                    config = {**config, "eval_samples": wanted["eval_samples"]}  # the counts were these already
                diff = config_differences(config, wanted)
                if diff:
                    raise ValueError(
                        f"{out / RESULTS_FILE} already holds {job.base_label} [{key[3]}] made with "
                        "another configuration "
                        f"({describe_differences(diff)}); give another --out, or move "
                        "that results.json away to train again"
                    )


def _check_checkpoints(jobs: list[Job], out: Path) -> None:
    """A ValueError, before anything trains, when a job's checkpoint was written with another
    configuration (resuming it would mix two runs); it names what differs. Unreadable ones say so."""
    for job in jobs:
        path = checkpoint_path(job, out)
        if path.exists():
            stored = load_checkpoint(path, torch.device("cpu"))["config"]
            diff = config_differences(stored, checkpoint_config(job.model, job.train, job.task))
            if diff:
                raise ValueError(
                    f"checkpoint {path} of {job.label} was written with another configuration "
                    f"({describe_differences(diff)}); delete it to start that run over, or give "
                    "another --out"
                )


def _check_writable(out: Path) -> None:
    """A ValueError now, not after the first run trains, when ``out`` cannot hold results and
    checkpoints (a file where a folder goes, a folder where ``results.json`` goes, no permission)."""
    fix = "give --out a folder you can write to"
    checkpoints = out / "checkpoints"
    # a file named like out, checkpoints or a folder above them (out = afile/run: "afile")
    blocking = checkpoints if checkpoints.exists() and not checkpoints.is_dir() else file_in_the_way(checkpoints)
    if blocking is not None:
        raise ValueError(f"cannot write results to {out}: {blocking} is a file, not a folder; {fix}")
    if (out / RESULTS_FILE).is_dir():
        raise ValueError(
            f"cannot write results to {out}: {out / RESULTS_FILE} is a folder, where the results "
            f"file goes; move it away or {fix}"
        )
    try:
        checkpoints.mkdir(parents=True, exist_ok=True)
        for folder in (out, checkpoints):  # the results file and the checkpoints are written here
            with tempfile.TemporaryFile(dir=folder):  # nameless where the system allows: a kill leaves nothing
                pass
    except OSError as err:
        raise ValueError(f"cannot write results to {out}: {_os_reason(err)}; {fix}") from None


def _clear_leftovers(out: Path) -> None:
    """Delete the temporaries that killed runs left in ``out`` (``.results.json.tmp<pid>``), in its
    checkpoints folder and among its figures; called by the run that holds ``out``."""
    remove_stale_temporaries(out, rf"\.{re.escape(RESULTS_FILE)}")
    remove_stale_temporaries(out / "figures", r"\..+\.png")
    remove_stale_temporaries(out / "checkpoints", r".+\.pt")  # also the names of older versions, NAME.pt.tmp<pid>
    remove_stale_temporaries(out / "encodings", r"\..+\.pt")


def _os_reason(err: OSError) -> str:
    """``PATH: reason`` of an OSError (both paths of a failed rename)."""
    paths = " -> ".join(str(p) for p in (err.filename, err.filename2) if p is not None)
    reason = err.strerror or str(err) or type(err).__name__
    return f"{paths}: {reason}" if paths else reason


@contextlib.contextmanager
def _exclusive(out: Path) -> Iterator[None]:
    """Hold ``out/.lock`` (``flock``, not waiting) for the duration: a second run on the same folder
    is a ValueError naming it, at once, rather than one more process training every job and
    writing the same checkpoint files. No lock where fcntl is missing (Windows) or the file system
    has none; the file stays (removing it would let two runs lock two different files)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path = out / LOCK_FILE
    try:
        handle = open(path, "a")
    except OSError as err:
        raise ValueError(
            f"cannot write results to {out}: {_os_reason(err)}; give --out a folder you can write to"
        ) from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            locked = True
        except OSError as err:
            if err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise ValueError(
                    f"another posenc experiment is running on {out} (it holds {path}); wait for it "
                    "to finish, or give another --out"
                ) from None
            locked = False  # a file system without locks (some network mounts): run unlocked, as before
        try:
            yield
        finally:
            if locked:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "items"):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def run_experiment(
    name: str,
    out: Path | str,
    settings: Settings | None = None,
    *,
    threads: int | None = 1,
    hooks: Hooks | None = None,
    command: str | None = None,
) -> list[dict[str, Any]]:
    """Every job of experiment ``name`` not yet in ``out/results.json``; returns the new records.

    Ctrl-C or SIGTERM during training saves a checkpoint of the step in progress and raises
    :class:`~posenc.experiments.train.Interrupted`; outside training Ctrl-C raises KeyboardInterrupt
    and SIGTERM Interrupted at once (SIGTERM only in the main thread, and where it is not ignored).
    A second run on ``out`` while this one holds it is a ValueError."""
    settings = settings or Settings()
    jobs = plan(name, settings)  # validates names before anything trains
    from .provenance import git_commit

    git_commit()  # the commit of the code this process runs, read now: the source may change while it trains
    set_threads(threads)
    out = Path(out)
    rank, _ = distributed_context()
    with terminate_as_interrupt(), contextlib.ExitStack() as held:
        if rank == 0:  # the rank that writes checks the folder and locks it, before reading what it holds
            _check_writable(out)
            held.enter_context(_exclusive(out))
            _clear_leftovers(out)
        return _run_jobs(jobs, out, hooks or _Silent(), writer=rank == 0, command=command)


def _run_jobs(
    jobs: list[Job], out: Path, hooks: Hooks, writer: bool, command: str | None = None
) -> list[dict[str, Any]]:
    records_before = load_results(out)
    _check_stored(jobs, records_before, out)
    done = {record_key(r) for r in records_before}
    _check_checkpoints([job for job in jobs if not all(key in done for key in _keys(job))], out)
    records: list[dict[str, Any]] = []
    for index, job in enumerate(jobs):
        if all(key in done for key in _keys(job)):
            if writer:  # a run killed between storing the records and deleting the checkpoint left it
                with contextlib.suppress(OSError):
                    checkpoint_path(job, out).unlink(missing_ok=True)
            hooks.job_finished(job, [], True)
            continue
        hooks.job_started(job, index, len(jobs))
        new = run_job(job, out, hooks, command)
        records.extend(new)
        hooks.job_finished(job, new, False)
    return records
