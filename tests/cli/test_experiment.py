"""``posenc experiment`` end to end on tiny settings: results, resume by rerunning, clear errors."""

from __future__ import annotations

import json

import pytest

typer = pytest.importorskip("typer")
from typer.testing import CliRunner  # noqa: E402

from posenc.cli.experiment import register  # noqa: E402


def _app():
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """posenc (test root)."""

    register(app)
    return app


def _run(*args: str):
    return CliRunner(env={"COLUMNS": "220", "OMP_NUM_THREADS": "1"}).invoke(_app(), ["experiment", *args])


@pytest.mark.slow
def test_experiment_writes_results_then_skips_them_on_rerun(tmp_path):
    args = ("length", "--steps", "3", "--schemes", "none,learned", "--tasks", "copy", "--quick", "--out", str(tmp_path))
    first = _run(*args)
    assert first.exit_code == 0, first.output
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["schema"] == 1
    records = {r["scheme"]: r for r in data["records"]}
    assert set(records) == {"none", "learned"}
    assert records["learned"]["out_of_distribution"] is None  # its table ends at the training length
    assert "max_len=34" in records["learned"]["metrics"]["per_length"]["17"]["unavailable"]
    assert records["none"]["config"]["train"]["steps"] == 3 and records["none"]["train_length"] == 16
    assert len(records["none"]["metrics"]["per_length"]) == 32
    assert (
        # three steps teach nothing: both rows read "did not learn", never a score past L
        " ".join(first.output.replace("│", " ").split()).count("did not learn") == 2
        and (tmp_path / "figures" / "length_copy.png").exists()
    )
    second = _run(*args)
    assert second.exit_code == 0 and second.output.count("already in results.json, skipped") == 2
    assert json.loads((tmp_path / "results.json").read_text()) == data
    shown = _run("length", "--plot-only", "--out", str(tmp_path))
    assert shown.exit_code == 0 and "learned" in shown.output


@pytest.mark.parametrize(
    "args, message",
    [
        (("lenght",), "choose one of: length, learned-vs-sinusoidal, add-vs-concat, probe, extend"),
        (("length", "--schemes", "rope,ropee"), "unknown scheme 'ropee'"),
        (("length", "--tasks", "copy,parity"), "unknown task 'parity'"),
        (("length", "--seeds", "0,one"), "comma-separated integers"),
        (("extend", "--schemes", "alibi"), "only scheme is 'rope'"),
        (("length", "--schemes", " , "), "--schemes is empty; give comma-separated values or leave the option out"),
        (("length", "--seeds", "-1"), "seeds must be comma-separated integers in 0..4294967295"),
        (("length", "--seeds", "0,9223372036854775807"), "seeds must be comma-separated integers in 0..4294967295"),
        (("extend", "--tasks", "copy"), "its tasks are text, fortunes, text-mlm, got ['copy']"),
        (("probe", "--tasks", "copy"), "it takes no --tasks"),
    ],
)
def test_bad_names_are_reported_with_the_choices(args, message, tmp_path):
    result = _run(*args, "--out", str(tmp_path))
    assert result.exit_code == 2
    assert message in " ".join(result.output.replace("│", " ").split())
    assert not (tmp_path / "results.json").exists()


def test_devices_and_folders_that_cannot_serve_are_refused_up_front(tmp_path):
    """A device that cannot run, --plot-only without results, or an unreadable results.json: one
    clear line naming the problem, no traceback, nothing trained."""

    def said(result):
        return " ".join(result.output.replace("│", " ").split())

    for device in ("nonsense", "meta") + (() if __import__("torch").cuda.is_available() else ("cuda",)):
        result = _run("length", "--quick", "--steps", "1", "--device", device, "--out", str(tmp_path))
        assert result.exit_code == 2 and f"device '{device}' is not usable here" in said(result), said(result)
        assert "Traceback" not in result.output and not (tmp_path / "results.json").exists()
    result = _run("length", "--plot-only", "--out", str(tmp_path / "missing"))
    assert result.exit_code == 2 and f"no results.json in {tmp_path / 'missing'}" in said(result), said(result)
    (tmp_path / "results.json").write_text('{"schema": 1, "rec')  # truncated
    for args in (("--plot-only",), ("--steps", "1", "--quick")):
        result = _run("length", *args, "--out", str(tmp_path))
        assert result.exit_code == 1 and f"{tmp_path / 'results.json'} is not readable JSON" in said(result), said(
            result
        )
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_variant_names_are_printed_not_taken_for_markup():
    """``[default]``, ``[add]``, ``[concat]`` are rich markup tags unless escaped: they used to vanish."""
    import io

    from rich.console import Console

    from posenc.cli.experiment import _Progress

    console = Console(file=io.StringIO(), width=200)
    progress = type("P", (), {"console": console})()
    job = type(
        "J",
        (),
        {"label": "add-vs-concat/text/sinusoidal/seed0/concat", "base_label": "add-vs-concat/text/sinusoidal/seed0"},
    )()
    record = {
        "variant": "concat",
        "in_distribution": 1.5,
        "out_of_distribution": None,
        "summary_metric": "loss",
        "wall_time_s": 3.0,
    }
    _Progress(progress).job_finished(job, [record, {**record, "variant": "add"}], False)
    printed = console.file.getvalue()
    assert "seed0 [concat]: loss in 1.500, out n/a" in printed and "seed0 [add]:" in printed


def test_plot_only_needs_results_of_that_experiment(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"schema": 1, "records": []}))
    result = _run("probe", "--plot-only", "--out", str(tmp_path))
    said = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and "holds no 'probe' results (it holds: none)" in said, said


TINY = ("length", "--steps", "1", "--quick", "--schemes", "none", "--tasks", "copy")


def _said(result) -> str:
    return " ".join(result.output.replace("│", " ").split())


def _failed(result, code: int, *messages: str) -> None:
    """``result`` exited ``code`` with one ``error:`` line holding each of ``messages`` whole, and no traceback."""
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == code and len(errors) == 1 and all(m in errors[0] for m in messages), result.output
    assert "Traceback" not in result.output and (result.exception is None or isinstance(result.exception, SystemExit))


def _results(folder, experiment: str = "length") -> None:
    """A results.json holding one hand-written record of ``experiment``."""
    record = {
        "experiment": experiment,
        "task": "copy",
        "scheme": "none",
        "variant": "default",
        "seed": 0,
        "train_length": 4,
        "metrics": {"per_length": {"1": {"exact_match": 1.0}, "5": {"exact_match": 0.5}}},
        "in_distribution": 1.0,
        "out_of_distribution": 0.5,
        "summary_metric": "exact_match",
        "wall_time_s": 1.0,
        "config": {},
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps({"schema": 1, "records": [record]}))


def test_files_where_folders_go_and_folders_where_files_go_stop_before_training(tmp_path):
    """A folder named results.json, a file named figures or checkpoints, a file as --out: one line
    naming the path (exit 1) before anything trains, where they used to end in a traceback."""
    a = tmp_path / "a"
    (a / "results.json").mkdir(parents=True)
    _failed(_run(*TINY, "--out", str(a)), 1, f"{a / 'results.json'} is a folder, where the results file goes")
    _failed(_run("length", "--plot-only", "--out", str(a)), 1, f"{a / 'results.json'} is a folder")
    b = tmp_path / "b"
    b.mkdir()
    (b / "figures").write_text("")
    _failed(
        _run(*TINY, "--out", str(b)), 1, f"cannot draw the figures into {b / 'figures'}: it is a file, not a folder"
    )
    _results(b)
    _failed(_run("length", "--plot-only", "--out", str(b)), 1, f"cannot draw the figures into {b / 'figures'}")
    c = tmp_path / "c"
    c.mkdir()
    (c / "checkpoints").write_text("")
    _failed(_run(*TINY, "--out", str(c)), 1, f"{c / 'checkpoints'} is a file, not a folder; give --out a folder")
    (tmp_path / "d").write_text("")
    _failed(_run(*TINY, "--out", str(tmp_path / "d")), 1, f"{tmp_path / 'd'} is a file, not a folder")
    for folder in (a, b):
        assert not (folder / "checkpoints").exists()  # nothing trained


@pytest.mark.slow
def test_write_failures_during_a_run_are_one_line_errors_and_lose_nothing(tmp_path):
    """A checkpoint, the results file or a figure that cannot be written (a folder holds its name):
    one line naming the path and why, exit 1; the run's checkpoint stays, so the rerun goes on."""
    import os

    checkpoint_tmp = tmp_path / "a" / "checkpoints" / f".length__copy__none__seed0.pt.tmp{os.getpid()}"
    checkpoint_tmp.mkdir(parents=True)
    _failed(_run(*TINY, "--out", str(tmp_path / "a")), 1, "error: the run failed: ", str(checkpoint_tmp))
    b = tmp_path / "b"
    (b / f".results.json.tmp{os.getpid()}").mkdir(parents=True)
    (b / "figures" / "length_copy.png").mkdir(parents=True)
    _failed(_run(*TINY, "--out", str(b)), 1, "error: the run failed: ", str(b / f".results.json.tmp{os.getpid()}"))
    assert (b / "checkpoints" / "length__copy__none__seed0.pt").exists()  # the trained step, kept
    (b / f".results.json.tmp{os.getpid()}").rmdir()
    _failed(_run(*TINY, "--out", str(b)), 1, "error: cannot draw the figures: ", str(b / "figures" / "length_copy.png"))
    (record,) = json.loads((b / "results.json").read_text())["records"]
    assert record["resumed_from_step"] == 1  # the rerun resumed the saved step and stored its results


_STOP_AT_STEP_3 = """
import signal, sys, time
from posenc.cli import experiment, main

shown = experiment._Progress.step

def step(self, done, *rest):
    shown(self, done, *rest)
    if done == 3:  # say so, then wait until the test's SIGTERM is handled (the handler then disarms itself)
        armed = signal.getsignal(signal.SIGTERM)
        print("step 3", file=sys.stderr, flush=True)
        deadline = time.monotonic() + 120
        while signal.getsignal(signal.SIGTERM) is armed and time.monotonic() < deadline:
            time.sleep(0.01)

experiment._Progress.step = step
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_sigterm_saves_the_step_in_progress_and_the_rerun_resumes(tmp_path):
    """kill, timeout, Slurm and docker stop send SIGTERM: the run saves a checkpoint of the step in
    progress and exits 143 (it used to die with nothing saved), and the same command resumes to the
    results of an uninterrupted run."""
    import os
    import signal
    import subprocess
    import sys

    import torch

    args = ("length", "--steps", "12", "--quick", "--schemes", "t5", "--tasks", "copy")
    process = subprocess.Popen(
        [sys.executable, "-c", _STOP_AT_STEP_3, "experiment", *args, "--out", str(tmp_path / "a")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "220"},
    )
    try:
        for line in process.stderr:
            if line.startswith("step 3"):
                break
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    said = " ".join((stdout + stderr).split())
    checkpoint = tmp_path / "a" / "checkpoints" / "length__copy__t5__seed0.pt"
    assert process.returncode == 143, said
    assert f"stopped by SIGTERM: a checkpoint of step 4 is in {checkpoint.parent}; the same command resumes" in said
    assert "keeps the finished runs" not in said  # there is no results.json yet
    assert torch.load(checkpoint, weights_only=True)["step"] == 4
    resumed = _run(*args, "--out", str(tmp_path / "a"))
    straight = _run(*args, "--out", str(tmp_path / "b"))
    assert resumed.exit_code == straight.exit_code == 0, resumed.output + straight.output
    (a,), (b,) = (json.loads((tmp_path / d / "results.json").read_text())["records"] for d in "ab")
    assert a["resumed_from_step"] == 4 and b["resumed_from_step"] == 0
    for field in ("metrics", "in_distribution", "out_of_distribution", "final_train_loss"):
        assert a[field] == b[field], field


def test_an_interrupted_run_names_results_json_only_when_there_is_one(tmp_path, monkeypatch):
    from posenc.experiments import runner
    from posenc.experiments.train import Interrupted

    def stopped(name, out, settings, **options):
        raise Interrupted(7, out / "checkpoints" / "job.pt")

    monkeypatch.setattr(runner, "run_experiment", stopped)
    first = _run(*TINY, "--out", str(tmp_path))
    assert first.exit_code == 130
    said = _said(first)
    assert f"interrupted: a checkpoint of step 7 is in {tmp_path / 'checkpoints'}; the same command resumes" in said
    assert "keeps the finished runs" not in first.output
    _results(tmp_path)
    second = _run(*TINY, "--out", str(tmp_path))
    assert second.exit_code == 130 and f"({tmp_path / 'results.json'} keeps the finished runs)" in _said(second)


def test_ctrl_c_while_drawing_says_the_results_are_saved(tmp_path, monkeypatch):
    """Ctrl-C after training, while the figures are drawn, used to exit 130 without a word."""
    from posenc.experiments import plots, runner

    def ctrl_c(*args, **options):
        raise KeyboardInterrupt

    _results(tmp_path)
    monkeypatch.setattr(runner, "run_experiment", lambda *args, **options: [])
    monkeypatch.setattr(plots, "plot_results", ctrl_c)
    for args in (TINY, ("length", "--plot-only")):
        result = _run(*args, "--out", str(tmp_path))
        assert result.exit_code == 130
        assert (
            f"the results are saved in {tmp_path / 'results.json'}; `posenc experiment length --plot-only "
            f"--out {tmp_path}` draws the figures again"
        ) in _said(result), result.output


@pytest.mark.parametrize(
    "options, named",
    [
        (("--steps", "5", "--schemes", "t5"), "--steps, --schemes"),
        (("--seeds", "0"), "--seeds"),
        (("--quick",), "--quick"),
        (("--tasks", "copy"), "--tasks"),
        (("--threads", "2"), "--threads"),
    ],
)
def test_plot_only_refuses_options_that_only_training_uses(tmp_path, options, named):
    """They were silently ignored: --plot-only draws what results.json holds, whatever they say."""
    _results(tmp_path)
    _failed(
        _run("length", "--plot-only", *options, "--out", str(tmp_path)),
        2,
        f"--plot-only draws everything in {tmp_path / 'results.json'} and trains nothing: it takes no {named};",
    )
    assert not (tmp_path / "figures").exists()


def test_a_second_run_on_the_same_folder_stops_at_once(tmp_path):
    """Two processes on one --out used to both train every job into the same checkpoint files."""
    fcntl = pytest.importorskip("fcntl")
    _results(tmp_path)
    with open(tmp_path / ".lock", "a") as held:  # as the first run holds it
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        _failed(_run(*TINY, "--out", str(tmp_path)), 1, f"another posenc experiment is running on {tmp_path} ")
        assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").iterdir())
        shown = _run("length", "--plot-only", "--out", str(tmp_path))  # reads only: needs no lock
        assert shown.exit_code == 0, shown.output


def test_more_threads_than_cpus_is_a_warning(tmp_path, monkeypatch):
    import os

    from posenc.experiments import runner

    calls = []
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    monkeypatch.setattr(runner, "run_experiment", lambda *args, **options: calls.append(options) or [])
    _results(tmp_path)
    result = _run(*TINY, "--threads", "2", "--out", str(tmp_path))
    assert result.exit_code == 0 and calls[0]["threads"] == 2, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: --threads 2 is more than the CPUs here (1): the extra threads only compete for "
        "them (slower, not faster)"
    ]


def test_out_under_a_file_names_the_file(tmp_path):
    """``--out afile/run`` with ``afile`` a file: one line naming ``afile`` (it named afile/run,
    "Not a directory"), before anything trains."""
    afile = tmp_path / "afile"
    afile.write_text("")
    out = afile / "run"
    _failed(_run(*TINY, "--out", str(out)), 1, f"cannot write results to {out}: {afile} is a file, not a folder")
    _failed(_run("length", "--plot-only", "--out", str(out)), 1, f"{afile} is a file, not a folder")
    assert afile.read_text() == ""


def test_a_full_disk_at_the_first_checkpoint_says_so(tmp_path, monkeypatch):
    """A full disk at the first checkpoint said "cannot save a checkpoint (RuntimeError: [enforce
    fail at inline_container.cc:672] .)": torch's zip writer hides the OSError. One line, exit 1,
    naming the checkpoint and "No space left on device", and no temporary left."""
    from ..experiments.test_train import full_disk_open, train

    monkeypatch.setattr(train, "open", full_disk_open, raising=False)
    checkpoint = tmp_path / "checkpoints" / "length__copy__none__seed0.pt"
    _failed(
        _run(*TINY, "--out", str(tmp_path)),
        1,
        f"error: the run failed: {checkpoint}: No space left on device",
    )
    assert list((tmp_path / "checkpoints").iterdir()) == [] and not (tmp_path / "results.json").exists()
