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
    assert "n/a: table too short" in first.output and (tmp_path / "figures" / "length_copy.png").exists()
    second = _run(*args)
    assert second.exit_code == 0 and second.output.count("already in results.json, skipped") == 2
    assert json.loads((tmp_path / "results.json").read_text()) == data
    shown = _run("length", "--plot-only", "--out", str(tmp_path))
    assert shown.exit_code == 0 and "learned" in shown.output


@pytest.mark.parametrize("args, message", [
    (("lenght",), "choose one of: length, learned-vs-sinusoidal, add-vs-concat, probe, extend"),
    (("length", "--schemes", "rope,ropee"), "unknown scheme 'ropee'"),
    (("length", "--tasks", "copy,parity"), "unknown task 'parity'"),
    (("length", "--seeds", "0,one"), "comma-separated integers"),
    (("extend", "--schemes", "alibi"), "only scheme is 'rope'"),
    (("length", "--schemes", " , "), "--schemes is empty; give comma-separated values or leave the option out"),
    (("length", "--seeds", "-1"), "seeds must be comma-separated integers >= 0"),
    (("extend", "--tasks", "copy"), "its tasks are text, fortunes, text-mlm, got ['copy']"),
    (("probe", "--tasks", "copy"), "it takes no --tasks"),
])
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
        assert result.exit_code == 1 and f"{tmp_path / 'results.json'} is not readable JSON" in said(result), said(result)
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_variant_names_are_printed_not_taken_for_markup():
    """``[default]``, ``[add]``, ``[concat]`` are rich markup tags unless escaped: they used to vanish."""
    import io

    from rich.console import Console

    from posenc.cli.experiment import _Progress

    console = Console(file=io.StringIO(), width=200)
    progress = type("P", (), {"console": console})()
    job = type("J", (), {"label": "add-vs-concat/text/sinusoidal/seed0/concat", "base_label": "add-vs-concat/text/sinusoidal/seed0"})()
    record = {"variant": "concat", "in_distribution": 1.5, "out_of_distribution": None, "summary_metric": "loss",
              "wall_time_s": 3.0}
    _Progress(progress).job_finished(job, [record, {**record, "variant": "add"}], False)
    printed = console.file.getvalue()
    assert "seed0 [concat]: loss in 1.500, out n/a" in printed and "seed0 [add]:" in printed


def test_plot_only_needs_results_of_that_experiment(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"schema": 1, "records": []}))
    result = _run("probe", "--plot-only", "--out", str(tmp_path))
    said = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and "holds no 'probe' results (it holds: none)" in said, said
