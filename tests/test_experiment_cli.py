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
])
def test_bad_names_are_reported_with_the_choices(args, message, tmp_path):
    result = _run(*args, "--out", str(tmp_path))
    assert result.exit_code == 2
    assert message in " ".join(result.output.replace("│", " ").split())
    assert not (tmp_path / "results.json").exists()
