"""``posenc plot``, ``posenc check`` and ``posenc report`` end to end (Typer's test runner).

Bad input must exit with code 2 and one line naming the value and the choices, no traceback.
"""

from __future__ import annotations

import pytest

pytest.importorskip("typer")
pytest.importorskip("matplotlib")

from typer.testing import CliRunner  # noqa: E402

from posenc.cli import build_app  # noqa: E402

runner = CliRunner()


def _run(*args: str):
    return runner.invoke(build_app(), list(args), env={"COLUMNS": "200"})


@pytest.mark.parametrize(("suffix", "magic"), [("png", b"\x89PNG"), ("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_plot_writes_the_format_of_the_suffix(tmp_path, suffix, magic):
    out = tmp_path / f"heat.{suffix}"
    result = _run("plot", "sinusoidal", "--kind", "heatmap", "--dim", "64", "--positions", "20", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(magic)
    assert f"wrote {out}" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("plot", "sinusoidal", "--kind", "spiral", "--out", "x.png"),
            "unknown kind of figure 'spiral'; choose one of: heatmap",
        ),
        (("plot", "bogus", "--kind", "heatmap"), "unknown scheme 'bogus'; choose one of: none, sinusoidal"),
        (
            ("plot", "sinusoidal", "--kind", "heatmap", "--out", "x.gif"),
            "unknown suffix .gif; use one of .png, .svg, .pdf",
        ),
        (("plot", "alibi", "--kind", "cosine", "--out", "x.png"), "kinds for 'alibi': heatmap, logits, slopes"),
        (("plot", "t5", "--kind", "heatmap", "--base", "500", "--out", "x.png"), "scheme 't5' has no 'base' (--base)"),
        (("check", "bogus"), "unknown scheme 'bogus'"),
        (("report", "--scheme", "bogus"), "unknown scheme 'bogus'"),
        (("report", "--results", "/nonexistent/runs"), "is not a folder"),
        (
            ("plot", "sinusoidal", "--kind", "dot", "--positions", "40000", "--out", "x.png"),
            "positions must be at most 8192 for the atlas's figures and checks, got 40000",
        ),
        (
            ("plot", "sinusoidal", "--kind", "cosine", "--positions", "1", "--out", "x.png"),
            "positions must be at least 2",
        ),
        (
            ("plot", "sinusoidal", "--kind", "dot", "--out", "/proc/posenc/x.png"),
            "--out: cannot write '/proc/posenc/x.png'",
        ),
        (
            ("report", "--out", "/proc/posenc/atlas", "--scheme", "none"),
            "--out: cannot create the folder '/proc/posenc/atlas'",
        ),
        # side² coordinates: 8192 took 24 GB before the kernel killed it
        (
            ("plot", "sinusoidal_nd", "--kind", "grid", "--positions", "8192", "--out", "x.png"),
            "the grid figure takes --positions as the side of its grid (side² positions); it must be at most 512, got 8192",
        ),
        (
            (
                "plot",
                "sinusoidal",
                "--kind",
                "heatmap",
                "--dpi",
                "20000",
                "--out",
                "x.png",
            ),  # was a MemoryError traceback
            "dpi must be a whole number from 1 to 1200, got 20000",
        ),
        (
            ("plot", "sinusoidal", "--kind", "heatmap", "--out", "/dev/null/x.png"),
            "cannot write '/dev/null/x.png': '/dev/null' is a file, not a folder",
        ),
        # options the figure would have ignored without a word
        (
            ("plot", "sinusoidal", "--kind", "heatmap", "--method", "umap", "--out", "x.png"),
            "method='umap' chooses the 2D projection of --kind projection; figure kind 'heatmap' draws none",
        ),
        (
            ("plot", "rope", "--kind", "logits", "--seed", "3", "--out", "x.png"),
            "seed=3 sets the random initialisation of learned tables (learned, t5, shaw); 'rope' has none",
        ),
    ],
)
def test_bad_input_exits_2_with_the_choices(tmp_path, args, message):
    result = _run(*[str(tmp_path / a) if a.startswith("x.") else a for a in args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_umap_without_its_extra_names_the_extra(tmp_path):
    pytest.importorskip("numpy")
    try:
        import umap  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("umap-learn is installed: the projection would run")
    result = _run("plot", "sinusoidal", "--kind", "projection", "--method", "umap", "--out", str(tmp_path / "p.png"))
    assert result.exit_code == 2
    assert "pip install 'posenc[umap]'" in result.output  # brackets survive rich's markup


def test_plot_lists_the_kinds_of_a_scheme():
    result = _run("plot", "t5", "--kind", "list")
    assert result.exit_code == 0
    assert result.output.strip() == "kinds for t5: heatmap, logits, buckets, bias"


def _verdicts(output: str) -> dict[str, str]:
    rows = {}
    for line in output.splitlines():
        cells = line.split()
        if len(cells) >= 2 and cells[1] in ("pass", "fail", "n/a"):
            rows[cells[0]] = cells[1]
    return rows


@pytest.mark.parametrize("scheme", ["cope", "fire", "rope"])
def test_check_fits_80_columns_without_splitting_words(scheme):
    """Piped (no terminal, no COLUMNS), ``check`` writes lines of 80 characters at most, and every
    word and number of every finding arrives whole (a table squeezed into 80 columns had split
    "decays_with_distan / ce" and "1.58967e- / 14")."""
    import json

    result = runner.invoke(build_app(), ["check", scheme], env={"COLUMNS": None, "LINES": None})
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80, result.output
    words = set(result.output.split())
    document = json.loads(_run("check", scheme, "--json").output)
    for criterion, found in document["criteria"].items():
        assert criterion in words
        assert set(found["reason"].split()) <= words, (criterion, found["reason"])
        if found["value"] is not None:
            assert f"{found['value']:.6g}" in words and f"{found['threshold']:.6g}" in words


def test_check_prints_the_property_table():
    result = _run("check", "index")
    assert result.exit_code == 0, result.output
    verdicts = _verdicts(result.output)
    assert verdicts == {
        "unique": "pass",
        "bounded": "fail",
        "deterministic": "pass",
        "length_invariant": "pass",
        "linear_offset_map": "fail",
        "offset_similarity": "fail",
        "distance_monotone": "fail",
        "decays_with_distance": "fail",
        "extrapolates": "pass",
    }
    assert "1023" in result.output  # the largest |value| over 1024 positions


def test_check_takes_scheme_options():
    result = _run("check", "alibi", "--heads", "4")
    assert result.exit_code == 0, result.output
    verdicts = _verdicts(result.output)
    assert verdicts["bounded"] == "fail" and verdicts["linear_offset_map"] == "n/a"
    bad = _run("check", "alibi", "--dim", "64")
    assert bad.exit_code == 2 and "has no 'dim'" in bad.output


@pytest.mark.slow
def test_report_with_results_and_selected_schemes(tmp_path):
    runs = tmp_path / "runs" / "length"
    runs.mkdir(parents=True)
    record = {
        "experiment": "length",
        "task": "copy",
        "scheme": "alibi",
        "variant": "default",
        "seed": 0,
        "train_length": 16,
        "metrics": {"per_length": {"8": 1.0, "24": 0.93}},
        "in_distribution": 1.0,
        "out_of_distribution": 0.93,
        "summary_metric": "exact_match",
        "wall_time_s": 31.2,
        "config": {},
    }
    from posenc.experiments.results import add_record  # the experiments' own writer

    add_record(runs, record)
    add_record(runs, {**record, "seed": 1, "out_of_distribution": 0.91, "metrics": {}})
    (tmp_path / "runs" / "broken").mkdir()
    (tmp_path / "runs" / "broken" / "results.json").write_text("{not json")
    out = tmp_path / "atlas"
    result = _run(
        "report", "--out", str(out), "--results", str(tmp_path / "runs"), "--scheme", "alibi", "--scheme", "index"
    )
    assert result.exit_code == 0, result.output
    assert "2 sections" in result.output and "2 results" in result.output
    assert f"wrote {out / 'explorer.html'}: the interactive explorer" in result.output
    assert (out / "explorer.html").stat().st_size > 1_000_000  # with plotly inlined
    html = (out / "index.html").read_text()
    assert html.count('class="scheme"') == 2
    assert 'data-scheme="alibi"' in html and 'data-scheme="index"' in html
    assert "<td>0.930</td>" in html and "24: 0.93</td>" in html  # the record's OOD summary and per-length value
    assert "<td>0.920 (0.910–0.930)</td>" in html  # mean over the two seeds, with the range
    assert "broken/results.json: unreadable" in html
    assert "warning: results: broken/results.json: unreadable" in result.output  # and on the terminal
    again = _run(
        "report", "--out", str(out), "--results", str(tmp_path / "runs" / "broken" / "none"), "--scheme", "alibi"
    )
    assert again.exit_code == 2 and "is not a folder" in again.output
    (tmp_path / "empty").mkdir()
    empty = _run(
        "report", "--out", str(out), "--results", str(tmp_path / "empty"), "--scheme", "alibi", "--scheme", "alibi"
    )
    assert empty.exit_code == 0 and "warning: results: no results.json found under this folder" in empty.output
    assert (out / "index.html").read_text().count('id="scheme-alibi"') == 1  # a repeated --scheme: one section


def test_results_are_read_defensively(tmp_path):
    import json

    from posenc.report import read_results

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "results.json").write_text(json.dumps([{"scheme": "rope"}, 3]))  # a bare list
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "results.json").write_text(json.dumps({"scheme": "t5", "seed": 0}))  # one record
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "results.json").write_text("7")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "results.json").write_text("[]")  # an empty list says so, as {"records": []} does
    found, problems = read_results(tmp_path)
    assert [(p.parent.name, records) for p, records in found] == [
        ("a", [{"scheme": "rope"}]),
        ("b", [{"scheme": "t5", "seed": 0}]),
        ("d", []),
    ]
    assert problems == [
        "a/results.json: skipped 1 entries that are not objects",
        "c/results.json: not a list or object of results",
        "d/results.json: holds no records",
    ]


def test_results_tables_say_why_a_score_is_missing(tmp_path):
    """A learned table too short for the longer lengths: the summary and the run's row say so, with
    the reason the record stores, instead of a bare dash (the terminal table already did)."""
    import json

    from posenc.report.results import results_section

    reason = "learned table too short: max_len=34 positions, length 17 needs 35; a learned table says nothing past its last row"
    record = {
        "experiment": "length",
        "task": "copy",
        "scheme": "learned",
        "variant": "default",
        "seed": 0,
        "train_length": 16,
        "in_distribution": 0.5,
        "out_of_distribution": None,
        "summary_metric": "exact_match",
        "metrics": {"per_length": {"16": {"exact_match": 0.5}, "17": {"unavailable": reason}}},
    }
    other = {
        **record,
        "scheme": "none",
        "out_of_distribution": 0.25,
        "metrics": {"per_length": {"17": {"exact_match": 0.25}}},
    }
    (tmp_path / "results.json").write_text(json.dumps({"schema": 1, "records": [record, other]}))
    html, shown, problems = results_section(tmp_path)
    assert shown == 2 and not problems
    assert html.count("n/a: learned table too short: max_len=34 positions, length 17 needs 35<") == 2  # summary, row
    assert "0.250" in html and "a learned table says nothing" not in html


def test_rope_scaling_reaches_the_figures_and_the_checks(tmp_path):
    """--scaling (an HF rope_scaling object as JSON, or a .json/.toml file) builds RoPE with that
    context extension: YaRN's attention factor lifts the logit at distance 0 by mscale² =
    (0.1 ln 4 + 1)² for factor 4, linear x8 turns the first pair eight times slower, and titles say
    which scaling is drawn. Schemes without a scaling refuse it; bad values name what is accepted."""
    import math

    import matplotlib.pyplot as plt

    from posenc.analysis import logits_vs_distance
    from posenc.viz import PlotOptions, plot

    yarn = {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 256}
    plain, scaled = (
        logits_vs_distance("rope", max_distance=8, dim=64, **extra)["mean"] for extra in ({}, {"scaling": yarn})
    )
    assert float(scaled[0] / plain[0]) == pytest.approx((0.1 * math.log(4) + 1) ** 2, rel=1e-5)
    figure = plot("rope", "logits", PlotOptions(positions=64, scaling=yarn))
    assert "rope, yarn ×4" in figure._suptitle.get_text()
    plt.close(figure)

    out = tmp_path / "lin.png"
    (tmp_path / "lin.toml").write_text('rope_type = "linear"\nfactor = 8.0\n')
    for scaling in ('{"rope_type": "linear", "factor": 8}', str(tmp_path / "lin.toml")):
        result = _run("plot", "rope", "--kind", "heatmap", "--scaling", scaling, "--out", str(out))
        assert result.exit_code == 0, result.output
    linear = _run("check", "rope", "--scaling", '{"rope_type": "linear", "factor": 8}')
    assert linear.exit_code == 0, linear.output
    assert _verdicts(linear.output)["offset_similarity"] == "pass"  # still a rotation: relative

    for scaling, message in (
        ('{"rope_type": "bogus"}', "unknown rope scaling type 'bogus'; choose one of"),
        ('{"rope_type": "yarn", "factor": 4}', "needs ['original_max_position_embeddings']"),
        ("[1, 2]", "--scaling must be a JSON object"),
        ("{bad", "--scaling: the value is not valid JSON"),
        (str(tmp_path / "missing.json"), "--scaling: no file"),
    ):
        for command in (("plot", "rope", "--kind", "heatmap", "--out", str(out)), ("check", "rope")):
            result = _run(*command, "--scaling", scaling)
            assert result.exit_code == 2 and message in " ".join(result.output.split()), (scaling, result.output)
            assert "Traceback" not in result.output
    refused = _run("check", "alibi", "--scaling", '{"rope_type": "linear", "factor": 2}')
    assert refused.exit_code == 2 and "scheme 'alibi' has no 'scaling' (--scaling)" in refused.output


def test_report_draws_the_shipped_records_by_default(tmp_path, monkeypatch):
    """Run from a clone, ``report`` reads the experiments' records in docs/experiments unless told
    otherwise: ``--results DIR`` reads DIR, ``--no-results`` none, and the two together are refused."""
    import posenc.report
    from posenc.report.atlas import shipped_records

    given = []

    def build(out, *, results_dir, schemes, progress):
        given.append(results_dir)
        return posenc.report.ReportSummary(out / "index.html", ["alibi"])

    monkeypatch.setattr(posenc.report, "build_report", build)
    default = _run("report", "--out", str(tmp_path / "a"), "--scheme", "alibi")
    assert default.exit_code == 0 and "--no-results" in default.output
    assert "trained encodings: from docs/experiments (" in default.output  # not the builder's absolute path
    assert _run("report", "--out", str(tmp_path / "b"), "--scheme", "alibi", "--no-results").exit_code == 0
    assert _run("report", "--out", str(tmp_path / "c"), "--results", str(tmp_path)).exit_code == 0
    assert given == [shipped_records(), None, tmp_path]
    both = _run("report", "--out", str(tmp_path / "d"), "--results", str(tmp_path), "--no-results")
    assert both.exit_code == 2 and "contradict" in both.output


def test_report_out_that_cannot_be_written_fails_before_drawing(tmp_path, monkeypatch):
    """A folder without write access, or index.html that is a folder: one line, exit 2, before the
    figures are drawn (it was a traceback after ~10 s of drawing)."""
    import tempfile

    import posenc.report

    drawn = []
    monkeypatch.setattr(posenc.report, "build_report", lambda *a, **k: drawn.append(a))
    (tmp_path / "a" / "index.html").mkdir(parents=True)
    result = _run("report", "--out", str(tmp_path / "a"), "--scheme", "alibi")
    assert result.exit_code == 2 and "index.html' is a folder" in result.output, result.output

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", read_only)
    result = _run("report", "--out", str(tmp_path / "b"), "--scheme", "alibi")
    assert (
        result.exit_code == 2
        and "cannot write into the folder" in result.output
        and "Permission denied" in result.output
    )
    assert not drawn and "Traceback" not in result.output


def test_scaling_values_that_are_not_objects_or_json_files(tmp_path):
    """A file of another suffix, a folder, or a JSON value that is not an object: named as such
    (they read as "not valid JSON", or "got NoneType")."""
    (tmp_path / "s.txt").write_text('{"rope_type": "linear", "factor": 2}')
    for value, message in (
        (str(tmp_path / "s.txt"), "is a file, but not a .json or .toml one"),
        (str(tmp_path), "is a folder"),
        ("null", "got null"),
        ('"linear"', "got a string"),
    ):
        result = _run("check", "rope", "--scaling", value)
        assert result.exit_code == 2 and message in result.output, (value, result.output)


def test_check_refuses_a_seed_that_changes_nothing():
    """As ``posenc plot`` does: --seed only moves learned tables (it was accepted and ignored)."""
    result = _run("check", "sinusoidal", "--seed", "3")
    assert result.exit_code == 2 and "'sinusoidal' has none" in result.output
    assert _run("check", "learned", "--seed", "3").exit_code == 0
    assert _run("plot", "learned", "--kind", "heatmap", "--seed", "99999999999999999999").exit_code == 2
    # a base only for the reference that has one (index drew the same figure whatever --base said)
    refused = _run("plot", "index", "--kind", "heatmap", "--base", "3")
    assert refused.exit_code == 2 and "scheme 'index' has no 'base' (--base)" in refused.output


def test_report_warns_of_results_in_another_schema(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "results.json").write_text('{"schema": 99, "records": []}')
    result = _run("report", "--out", str(tmp_path / "atlas"), "--results", str(tmp_path / "runs"), "--scheme", "alibi")
    assert result.exit_code == 0, result.output
    assert "has schema 99, and this posenc writes schema 1" in result.output and "holds no records" in result.output
    assert "0 results" in result.output


def test_a_toml_scaling_file_without_a_toml_reader_is_a_clear_error(tmp_path, monkeypatch):
    """Python 3.10 has no ``tomllib``: the cli extra brings ``tomli``, and with neither the command
    says what to install (it raised ModuleNotFoundError with a traceback)."""
    import sys

    (tmp_path / "lin.toml").write_text('rope_type = "linear"\nfactor = 8.0\n')
    monkeypatch.setitem(sys.modules, "tomllib", None)  # import raises ModuleNotFoundError
    monkeypatch.setitem(sys.modules, "tomli", None)
    result = _run("check", "rope", "--scaling", str(tmp_path / "lin.toml"))
    assert result.exit_code == 2 and "needs Python 3.11 or newer, or the tomli package" in result.output
    assert "Traceback" not in result.output


def test_figures_stay_readable_at_sizes_the_limits_allow(tmp_path):
    """A learned table as long as --positions (the CLI has no --max-len), and ALiBi's slope bars in
    a figure of bounded width (it grew 0.45 inch per head: 55536 pixels at 1024 heads)."""
    out = tmp_path / "learned.png"
    result = _run("plot", "learned", "--kind", "heatmap", "--positions", "2000", "--out", str(out))
    assert result.exit_code == 0 and out.exists(), result.output
    from posenc.viz import PlotOptions, plot

    figure = plot("alibi", "slopes", PlotOptions(heads=1024))
    assert figure.get_size_inches()[0] <= 9.0 and len(figure.axes[0].patches) == 1024


def test_version():
    import posenc

    result = _run("--version")
    assert result.exit_code == 0 and result.output.strip() == f"posenc {posenc.__version__}"
    import subprocess
    import sys

    module = subprocess.run(
        [sys.executable, "-m", "posenc", "--version"], capture_output=True, text=True
    )  # python -m posenc
    assert module.returncode == 0 and module.stdout.strip() == f"posenc {posenc.__version__}", module.stderr


def test_help_shows_switches_as_switches():
    """Rich help printed "--quick <bool>", as if the switch took a value ("--quick true" is an error)."""
    text = _run("experiment", "--help").output
    assert "--quick " in text and "<bool>" not in text


def test_report_thresholds_are_not_rounded_past_the_value() -> None:
    """A learned table of 4096 rows passes "extrapolates" at 4095 >= 4095; the page showed the
    threshold as 4.1e+03, which reads as a pass below its threshold."""
    from posenc.analysis.checks import CheckResult
    from posenc.report.atlas import _properties_table

    result = CheckResult("extrapolates", 4095.0, 4095.0, True, "", comparison=">=")
    html = _properties_table(
        {"results": {"extrapolates": result}, "verdict": {"extrapolates": "pass"}, "reasons": {"extrapolates": ""}}
    )
    assert "4095</td>" in html and "&gt;= 4095" in html and "e+03" not in html


def test_interrupted_commands_say_so_and_leave_no_partial_file(tmp_path, monkeypatch):
    """Ctrl-C (or posenc's SIGTERM interrupt) while a figure or the atlas is being written: one line
    naming what was not written, exit 130 / 143, and no half-written file, where an earlier
    index.html stays as it was (they ended without a word, and wrote straight to the target)."""
    import signal

    import matplotlib.figure

    from posenc.experiments.train import Interrupted

    real_savefig = matplotlib.figure.Figure.savefig

    def cut_short(self, fname, *args, **kwargs):  # half the file written, then the interrupt
        real_savefig(self, fname, *args, **kwargs)
        with open(fname, "r+b") as handle:
            handle.truncate(100)
        raise KeyboardInterrupt

    out = tmp_path / "heat.png"
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", cut_short)
    result = _run("plot", "sinusoidal", "--kind", "heatmap", "--positions", "20", "--out", str(out))
    assert result.exit_code == 130 and f"interrupted: {out} not written" in result.output
    assert list(tmp_path.iterdir()) == []  # neither the figure nor its temporary
    monkeypatch.undo()

    atlas = tmp_path / "atlas"
    atlas.mkdir()
    (atlas / "index.html").write_text("earlier")

    def stopped_by_term(*args, **kwargs):
        raise Interrupted(None, None, signal.SIGTERM)

    monkeypatch.setattr("posenc.report.build_report", stopped_by_term)
    result = _run("report", "--out", str(atlas), "--scheme", "alibi")
    assert result.exit_code == 143
    assert "stopped by SIGTERM:" in result.output and "not written (the earlier one is unchanged)" in result.output
    assert [p.name for p in atlas.iterdir()] == ["index.html"] and (atlas / "index.html").read_text() == "earlier"


def test_rope_theta_in_scaling_is_the_base_on_the_command_line(tmp_path):
    """transformers 5's rope_parameters hold the base as rope_theta: on the command line it is the
    base (the figure equals one drawn with --base), and a different --base is refused naming
    --base, not the library's base= keyword."""
    import json

    from PIL import Image

    args = ("plot", "rope", "--kind", "logits", "--positions", "40", "--dim", "32")
    a, b = tmp_path / "theta.png", tmp_path / "base.png"
    theta = json.dumps({"rope_type": "linear", "factor": 2.0, "rope_theta": 500})
    assert _run(*args, "--scaling", theta, "--out", str(a)).exit_code == 0
    assert (
        _run(*args, "--scaling", '{"rope_type": "linear", "factor": 2.0}', "--base", "500", "--out", str(b)).exit_code
        == 0
    )
    assert Image.open(a).tobytes() == Image.open(b).tobytes()
    assert Image.open(a).tobytes() != Image.open(_plot_default(tmp_path, args)).tobytes()  # the base mattered
    result = _run("check", "rope", "--scaling", theta, "--base", "10000")
    said = " ".join(result.output.split())
    assert (
        result.exit_code == 2
        and "rope_theta=500, but --base is 10000.0" in said
        and "base=" not in said.replace("--base", "")
    )


def _plot_default(tmp_path, args):
    out = tmp_path / "default.png"
    assert _run(*args, "--scaling", '{"rope_type": "linear", "factor": 2.0}', "--out", str(out)).exit_code == 0
    return out


def test_out_under_a_file_names_the_file(tmp_path, monkeypatch):
    """``--out afile/x`` with ``afile`` a file: one line naming ``afile``, exit 2, before anything is
    drawn (report said "cannot create the folder ... (File exists)")."""
    import posenc.report
    import posenc.viz

    drawn = []
    monkeypatch.setattr(posenc.report, "build_report", lambda *a, **k: drawn.append(a))
    monkeypatch.setattr(posenc.viz, "plot", lambda *a, **k: drawn.append(a))
    afile = tmp_path / "afile"
    afile.write_text("")
    for args, out in (
        (("report", "--scheme", "alibi"), afile / "atlas"),
        (("plot", "sinusoidal", "--kind", "heatmap"), afile / "heat.png"),
        (("plot", "sinusoidal", "--kind", "heatmap"), afile / "deeper" / "heat.png"),
    ):
        result = _run(*args, "--out", str(out))
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and lines == [
            f"error: --out: cannot write {str(out)!r}: {str(afile)!r} is a file, not a folder"
        ]
    assert not drawn and afile.read_text() == ""


def test_plot_without_a_kind_lists_the_kinds_of_the_scheme():
    result = _run("plot", "rope")
    assert result.exit_code == 2
    assert "--kind is required; for rope choose one of: heatmap, clock, dot, cosine, distance" in result.output


def test_check_prints_json_and_strict_fails_on_a_failed_criterion():
    """``--json``: one object whose verdicts are the table's; ``--strict``: status 1 when a
    criterion fails (the raw index is unbounded), 0 when none does (the sinusoid)."""
    import json

    result = _run("check", "index", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["scheme"] == "index" and document["family"] == "reference" and document["scaling"] is None
    linear = {"rope_type": "linear", "factor": 8}
    scaled = json.loads(_run("check", "rope", "--json", "--scaling", json.dumps(linear)).output)
    assert scaled["scheme"] == "rope" and scaled["scaling"] == linear  # the name, and the scaling beside it
    helped = " ".join(_run("check", "--help").output.split())  # --help names the object's keys
    assert f"(one object: {', '.join(document)})" in helped
    bounded = document["criteria"]["bounded"]
    assert bounded["verdict"] == "fail" and bounded["comparison"] == "<=" and bounded["value"] > bounded["threshold"]
    assert document["criteria"]["unique"]["verdict"] == "pass"
    assert _run("check", "index", "--json", "--strict").exit_code == 1
    strict = _run("check", "index", "--strict")
    assert strict.exit_code == 1 and "failed: bounded" in strict.output
    assert _run("check", "sinusoidal", "--strict").exit_code == 0


@pytest.mark.parametrize("command", ["plot", "check"])
def test_help_names_every_scheme(command):
    import posenc

    result = _run(command, "--help")
    assert result.exit_code == 0, result.output
    listed = " ".join(result.output.split())  # the help text wraps lines
    for name in (*posenc.available(), "sine_only"):
        assert f" {name}," in listed or f" {name};" in listed or f" {name}." in listed, name
