"""A table of bad command lines over every ``posenc`` subcommand (issue 29, the CLI half of
``tests/test_bad_inputs.py``).

Each row runs the root app in process (Typer's test runner, no subprocess) and asserts the exit
status (2 for a usage error; 1 only where the command documents it: a file in the way of an
experiment's results, "1 for a run or a file that failed"), that the output holds one error and
nothing else, that the error names the offending option or value (a regex per row), and that no
traceback appears.

One error means one of two shapes:

* posenc's own check: exactly one non-empty line, ``error: ...`` (:func:`posenc.cli.fail`);
* a check Typer/click makes itself (an unknown option, a missing argument, ``min=``/``max=`` of an
  option, a value that is not a number): click's standard usage block, ``Usage: posenc CMD ...``,
  ``Try 'posenc CMD --help' for help.`` and one ``Error: ...`` line, or that ``Error:`` line alone.
  Rows marked ``usage`` accept this shape and no other.

No row may start real work: the functions that draw, check, write the atlas, train or time are
replaced by a guard that stops the test (``StartedWork``) if a row gets past validation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("typer")
pytest.importorskip("matplotlib")

import torch  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from posenc.cli import build_app  # noqa: E402

runner = CliRunner()

LONG = "x" * 300  # longer than any file name may be (NAME_MAX is 255 on Linux and macOS)
HUGE = "1" + "0" * 30  # 10**30: over int64, over what torch takes
LINEAR = '{"rope_type": "linear", "factor": 4}'
# a longrope object as a model's config holds it (436 characters), with one key misspelt
LONGROPE_TYPO = json.dumps(
    {
        "rope_type": "longrope",
        "factor": 4,
        "original_max_position_embeddings": 2048,
        "short_factor": [1.0] * 32,
        "long_factors": [2.0] * 32,
    }
)


@dataclass(frozen=True)
class Row:
    id: str
    args: tuple[str, ...]  # "{tmp}" stands for the scratch folder
    match: str  # regex the error must match: it names the option or the value
    code: int = 2
    usage: bool = False  # the error comes from Typer/click itself (its usage block)


def bad(id: str, args: tuple[str, ...], match: str, code: int = 2) -> Row:
    """posenc's own check: one line ``error: ...``."""
    return Row(id, args, match, code)


def usage(id: str, args: tuple[str, ...], match: str) -> Row:
    """Typer's or click's own check: its usage error, exit 2."""
    return Row(id, args, match, usage=True)


# fmt: off
ROOT = [
    usage("root-unknown-command", ("nosuch",), r"No such command 'nosuch'"),
    usage("root-unknown-option", ("--bogus",), r"No such option: --bogus"),
]

PLOT = [
    bad("plot-unknown-scheme", ("plot", "bogus", "--kind", "heatmap"), r"unknown scheme 'bogus'; choose one of: none, sinusoidal"),
    bad("plot-empty-scheme", ("plot", "", "--kind", "heatmap"), r"unknown scheme ''; choose one of"),
    usage("plot-missing-scheme", ("plot",), r"Missing argument 'SCHEME'"),
    bad("plot-missing-kind", ("plot", "sinusoidal"), r"--kind is required; for sinusoidal choose one of: heatmap, clock"),
    usage("plot-kind-without-value", ("plot", "sinusoidal", "--kind"), r"Option '--kind' requires an argument"),
    bad("plot-unknown-kind", ("plot", "sinusoidal", "--kind", "spiral"), r"unknown kind of figure 'spiral'; choose one of: heatmap"),
    bad("plot-empty-kind", ("plot", "sinusoidal", "--kind", ""), r"unknown kind of figure ''"),
    bad("plot-kind-not-for-scheme", ("plot", "alibi", "--kind", "cosine"), r"figure kind 'cosine' applies to .*, not to 'alibi'; kinds for 'alibi': heatmap, logits, slopes"),
    bad("plot-dim-zero", ("plot", "sinusoidal", "--kind", "heatmap", "--dim", "0"), r"\bdim must be a positive integer, got 0\b"),
    bad("plot-dim-negative", ("plot", "sinusoidal", "--kind", "heatmap", "--dim", "-3"), r"\bdim must be a positive integer, got -3\b"),
    usage("plot-dim-not-a-number", ("plot", "sinusoidal", "--kind", "heatmap", "--dim", "abc"), r"Invalid value for '--dim'"),
    bad("plot-dim-huge", ("plot", "sinusoidal", "--kind", "heatmap", "--dim", HUGE), rf"\bdim must be at most 8192 .*got {HUGE}"),
    bad("plot-dim-odd-for-rope", ("plot", "rope", "--kind", "heatmap", "--dim", "7"), r"\bdim must be a positive even number .*got 7\b"),
    bad("plot-positions-zero", ("plot", "sinusoidal", "--kind", "heatmap", "--positions", "0"), r"\bpositions must be a positive integer, got 0\b"),
    bad("plot-positions-one", ("plot", "sinusoidal", "--kind", "heatmap", "--positions", "1"), r"\bpositions must be at least 2\b"),
    bad("plot-positions-huge", ("plot", "sinusoidal", "--kind", "heatmap", "--positions", HUGE), rf"\bpositions must be at most 8192 .*got {HUGE}"),
    usage("plot-positions-fraction", ("plot", "sinusoidal", "--kind", "heatmap", "--positions", "2.5"), r"Invalid value for '--positions'"),
    bad("plot-grid-side-huge", ("plot", "sinusoidal_nd", "--kind", "grid", "--positions", "8192"), r"--positions as the side of its grid .*at most 512, got 8192"),
    bad("plot-base-zero", ("plot", "sinusoidal", "--kind", "heatmap", "--base", "0"), r"\bbase must be a number greater than 1, got 0\.0"),
    bad("plot-base-nan", ("plot", "sinusoidal", "--kind", "heatmap", "--base", "nan"), r"\bbase must be a number greater than 1, got nan"),
    bad("plot-base-infinite", ("plot", "sinusoidal", "--kind", "heatmap", "--base", "inf"), r"\bbase must be a finite number greater than 1, got inf"),
    bad("plot-base-for-t5", ("plot", "t5", "--kind", "heatmap", "--base", "500"), r"scheme 't5' has no 'base' \(--base\)"),
    bad("plot-heads-zero", ("plot", "alibi", "--kind", "heatmap", "--heads", "0"), r"\bheads must be a positive integer, got 0\b"),
    bad("plot-heads-huge", ("plot", "alibi", "--kind", "heatmap", "--heads", "100000"), r"\bheads must be at most 1024 .*got 100000"),
    bad("plot-scaling-unknown-key", ("plot", "rope", "--kind", "heatmap", "--scaling", '{"rope_type": "linear", "factor": 4, "bogus": 1}'), r"rope scaling 'linear' does not take \['bogus'\]"),
    bad("plot-scaling-malformed-json", ("plot", "rope", "--kind", "heatmap", "--scaling", "{not json"), r"--scaling: the value is not valid JSON"),
    bad("plot-scaling-array", ("plot", "rope", "--kind", "heatmap", "--scaling", "[1, 2]"), r"--scaling must be a JSON object .*got an array"),
    bad("plot-scaling-unknown-type", ("plot", "rope", "--kind", "heatmap", "--scaling", '{"rope_type": "warp", "factor": 4}'), r"unknown rope scaling type 'warp'; choose one of: 'default', 'linear'"),
    # was "--out: cannot write 'figure.png' (File name too long)": a value over 255 characters was looked up as a file
    bad("plot-scaling-long-json", ("plot", "rope", "--kind", "heatmap", "--dim", "64", "--scaling", LONGROPE_TYPO), r"rope scaling 'longrope' does not take \['long_factors'\]"),
    bad("plot-scaling-nested-too-deeply", ("plot", "rope", "--kind", "heatmap", "--scaling", "[" * 100_000), r"--scaling: the value is nested too deeply"),  # was the same misplaced --out error
    bad("plot-scaling-integer-too-long", ("plot", "rope", "--kind", "heatmap", "--scaling", '{"rope_type": "linear", "factor": ' + "9" * 5000 + "}"), r"--scaling: the value is not usable JSON \(Exceeds the limit"),
    bad("plot-scaling-for-alibi", ("plot", "alibi", "--kind", "heatmap", "--scaling", LINEAR), r"scheme 'alibi' has no 'scaling' \(--scaling\)"),
    bad("plot-out-unknown-suffix", ("plot", "sinusoidal", "--kind", "heatmap", "--out", "{tmp}/x.gif"), r"cannot save a figure as '.*/x\.gif': unknown suffix \.gif; use one of \.png, \.svg, \.pdf"),
    bad("plot-out-under-a-file", ("plot", "sinusoidal", "--kind", "heatmap", "--out", "{tmp}/afile/x.png"), r"--out: cannot write '.*/afile/x\.png': '.*/afile' is a file, not a folder"),
    bad("plot-out-is-a-folder", ("plot", "sinusoidal", "--kind", "heatmap", "--out", "{tmp}/dir.png"), r"--out: '.*/dir\.png' is a folder; give a file name"),  # was found after drawing
    bad("plot-out-name-too-long", ("plot", "sinusoidal", "--kind", "heatmap", "--out", f"{{tmp}}/{LONG}/x.png"), r"--out: cannot use '.*' \(File name too long\)"),  # was an OSError traceback
    bad("plot-dpi-zero", ("plot", "sinusoidal", "--kind", "heatmap", "--dpi", "0"), r"--dpi must be a whole number from 1 to 1200, got 0\b"),  # was refused only after drawing
    bad("plot-dpi-huge", ("plot", "sinusoidal", "--kind", "heatmap", "--dpi", "20000"), r"--dpi must be a whole number from 1 to 1200, got 20000"),
    bad("plot-method-unknown", ("plot", "sinusoidal", "--kind", "projection", "--method", "tsne"), r"unknown projection method 'tsne'; choose pca or umap"),
    bad("plot-method-without-projection", ("plot", "sinusoidal", "--kind", "heatmap", "--method", "umap"), r"method='umap' chooses the 2D projection of --kind projection"),
    usage("plot-seed-negative", ("plot", "learned", "--kind", "heatmap", "--seed", "-1"), r"Invalid value for '--seed'"),
    bad("plot-seed-for-rope", ("plot", "rope", "--kind", "logits", "--seed", "3"), r"seed=3 sets the random initialisation .*'rope' has none"),
    usage("plot-unknown-option", ("plot", "sinusoidal", "--kind", "heatmap", "--bogus"), r"No such option: --bogus"),
    usage("plot-extra-argument", ("plot", "sinusoidal", "extra", "--kind", "heatmap"), r"Got unexpected extra argument\(s\) \(extra\)"),
]

CHECK = [
    bad("check-unknown-scheme", ("check", "bogus"), r"unknown scheme 'bogus'; choose one of"),
    usage("check-missing-scheme", ("check",), r"Missing argument 'SCHEME'"),
    bad("check-dim-zero", ("check", "sinusoidal", "--dim", "0"), r"\bdim must be a positive integer, got 0\b"),
    bad("check-dim-odd-for-rope", ("check", "rope", "--dim", "7"), r"\bdim must be a positive even number .*got 7\b"),
    bad("check-dim-for-rope-axial", ("check", "rope_axial", "--dim", "6"), r"rope_axial .*dim must be a multiple of .*got dim=6"),
    bad("check-dim-huge", ("check", "sinusoidal", "--dim", "100000"), r"\bdim must be at most 8192 .*got 100000"),
    bad("check-heads-negative", ("check", "alibi", "--heads", "-2"), r"\bheads must be a positive integer, got -2\b"),
    bad("check-heads-for-sinusoidal", ("check", "sinusoidal", "--heads", "4"), r"scheme 'sinusoidal' has no 'num_heads' \(--heads\)"),
    usage("check-base-not-a-number", ("check", "rope", "--base", "abc"), r"Invalid value for '--base'"),
    bad("check-base-one", ("check", "rope", "--base", "1"), r"\bbase must be a number greater than 1, got 1\.0"),
    bad("check-scaling-missing-factor", ("check", "rope", "--scaling", '{"rope_type": "linear"}'), r"rope scaling 'linear' needs \['factor'\]"),
    bad("check-scaling-keys-for-default", ("check", "rope", "--scaling", '{"factor": 2, "typo": 1}'), r"rope scaling 'default' does not take \['factor', 'typo'\]"),
    bad("check-scaling-number", ("check", "rope", "--scaling", "5"), r"--scaling must be a JSON object .*got a number"),
    bad("check-scaling-null", ("check", "rope", "--scaling", "null"), r"--scaling must be a JSON object .*got null"),
    bad("check-scaling-factor-zero", ("check", "rope", "--scaling", '{"rope_type": "linear", "factor": 0}'), r"'factor' must be a positive number, got 0\b"),
    bad("check-scaling-factor-infinite", ("check", "rope", "--scaling", '{"rope_type": "linear", "factor": 1e999}'), r"'factor' must be a positive number, got inf"),
    bad("check-scaling-factor-bool", ("check", "rope", "--scaling", '{"rope_type": "linear", "factor": true}'), r"'factor' must be a positive number, got True"),
    bad("check-scaling-factor-nan", ("check", "rope", "--scaling", '{"rope_type": "linear", "factor": NaN}'), r"'factor' must be a positive number, got nan"),
    bad("check-scaling-type-not-a-string", ("check", "rope", "--scaling", '{"rope_type": 5, "factor": 2}'), r"rope_type must be a name such as 'yarn', got 5"),
    bad("check-scaling-llama3-incomplete", ("check", "rope", "--scaling", '{"rope_type": "llama3", "factor": 8}'), r"rope scaling 'llama3' needs \['high_freq_factor', 'low_freq_factor', 'original_max_position_embeddings'\]"),
    bad("check-scaling-yarn-betas", ("check", "rope", "--scaling", '{"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 2048, "beta_fast": 1, "beta_slow": 32}'), r"'beta_fast' must be greater than 'beta_slow'"),
    bad("check-scaling-yarn-length-zero", ("check", "rope", "--scaling", '{"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 0}'), r"'original_max_position_embeddings' must be a positive whole number, got 0"),
    bad("check-scaling-empty", ("check", "rope", "--scaling", ""), r"--scaling is empty"),  # was "--scaling: '' is a folder"
    bad("check-scaling-blank", ("check", "rope", "--scaling", "   "), r"--scaling is empty"),
    # was an OSError traceback: a value over 255 characters was looked up as a file
    bad("check-scaling-long-json", ("check", "rope", "--dim", "64", "--scaling", LONGROPE_TYPO), r"rope scaling 'longrope' does not take \['long_factors'\]"),
    bad("check-scaling-long-text", ("check", "rope", "--scaling", LONG), r"--scaling: the value is not valid JSON"),
    bad("check-scaling-theta-and-base", ("check", "rope", "--base", "100", "--scaling", '{"rope_theta": 500, "rope_type": "linear", "factor": 2}'), r"--scaling holds rope_theta=500, but --base is 100\.0"),
    bad("check-scaling-text-file", ("check", "rope", "--scaling", "{tmp}/s.txt"), r"--scaling: '.*/s\.txt' is a file, but not a \.json or \.toml one"),
    bad("check-scaling-missing-file", ("check", "rope", "--scaling", "{tmp}/none.json"), r"--scaling: no file '.*/none\.json'"),
    bad("check-scaling-folder", ("check", "rope", "--scaling", "{tmp}/empty"), r"--scaling: '.*/empty' is a folder"),
    bad("check-scaling-bad-json-file", ("check", "rope", "--scaling", "{tmp}/bad.json"), r"--scaling: '.*/bad\.json' is not valid JSON"),
    bad("check-scaling-bad-toml-file", ("check", "rope", "--scaling", "{tmp}/bad.toml"), r"--scaling: ('.*/bad\.toml' is not valid TOML|reading a \.toml file needs)"),
    bad("check-scaling-deep-json-file", ("check", "rope", "--scaling", "{tmp}/deep.json"), r"--scaling: '.*/deep\.json' is nested too deeply"),  # was a RecursionError traceback
    bad("check-scaling-deep-toml-file", ("check", "rope", "--scaling", "{tmp}/deep.toml"), r"--scaling: ('.*/deep\.toml' is (nested too deeply|not valid TOML)|reading a \.toml file needs)"),  # was a RecursionError traceback
    bad("check-scaling-not-utf8", ("check", "rope", "--scaling", "{tmp}/latin.json"), r"--scaling: cannot read '.*/latin\.json' \('utf-8' codec"),
    bad("check-scaling-file-with-array", ("check", "rope", "--scaling", "{tmp}/array.json"), r"--scaling must be a JSON object .*got an array"),
    bad("check-reference-with-dim", ("check", "index", "--dim", "8"), r"reference code 'index' is checked at its atlas settings; drop --dim/--base"),
    bad("check-seed-for-rope", ("check", "rope", "--seed", "3"), r"--seed 3 sets the random initialisation .*'rope' has none"),
    usage("check-seed-too-large", ("check", "learned", "--seed", "99999999999999999999"), r"Invalid value for '--seed'"),
    usage("check-kind-option", ("check", "sinusoidal", "--kind", "heatmap"), r"No such option: --kind"),
    usage("check-scaling-without-value", ("check", "rope", "--scaling"), r"Option '--scaling' requires an argument"),
]

REPORT = [
    bad("report-unknown-scheme", ("report", "--scheme", "bogus"), r"unknown scheme 'bogus'; choose one of"),
    bad("report-second-scheme-unknown", ("report", "--scheme", "none", "--scheme", "bogus"), r"unknown scheme 'bogus'"),
    bad("report-empty-scheme", ("report", "--scheme", ""), r"unknown scheme ''"),
    bad("report-out-is-a-file", ("report", "--out", "{tmp}/afile", "--scheme", "none"), r"--out '.*/afile' is a file; give a folder"),
    bad("report-out-under-a-file", ("report", "--out", "{tmp}/afile/atlas", "--scheme", "none"), r"--out: cannot write '.*/afile/atlas': '.*/afile' is a file, not a folder"),
    bad("report-out-name-too-long", ("report", "--out", f"{{tmp}}/{LONG}", "--scheme", "none"), r"--out: cannot use '.*' \(File name too long\)"),  # was an OSError traceback
    bad("report-results-missing", ("report", "--results", "{tmp}/nonexistent"), r"--results '.*/nonexistent' is not a folder"),
    bad("report-results-is-a-file", ("report", "--results", "{tmp}/afile"), r"--results '.*/afile' is not a folder"),
    bad("report-results-name-too-long", ("report", "--results", f"{{tmp}}/{LONG}"), r"--results: cannot use '.*' \(File name too long\)"),  # was an OSError traceback
    usage("report-unknown-option", ("report", "--bogus"), r"No such option: --bogus"),
    usage("report-extra-argument", ("report", "extra"), r"Got unexpected extra argument\(s\) \(extra\)"),
    usage("report-scheme-without-value", ("report", "--scheme"), r"Option '--scheme' requires an argument"),
]

EXPERIMENT = [
    usage("experiment-missing-name", ("experiment",), r"Missing argument 'NAME'"),
    bad("experiment-unknown-name", ("experiment", "bogus"), r"unknown experiment 'bogus'; choose one of: length, learned-vs-sinusoidal"),
    bad("experiment-empty-name", ("experiment", ""), r"unknown experiment ''"),
    bad("experiment-unknown-scheme", ("experiment", "length", "--schemes", "bogus"), r"unknown scheme 'bogus'; choose from: none, sinusoidal"),
    bad("experiment-unknown-modifier", ("experiment", "length", "--schemes", "rope+bogus"), r"unknown scheme modifier 'bogus' in 'rope\+bogus'"),
    bad("experiment-empty-schemes", ("experiment", "length", "--schemes", " , "), r"--schemes is empty"),
    bad("experiment-seeds-not-numbers", ("experiment", "length", "--seeds", "abc"), r"--seeds: seeds must be comma-separated integers in 0\.\.4294967295, got 'abc'"),
    bad("experiment-seeds-negative", ("experiment", "length", "--seeds", "-1"), r"--seeds: .*got '-1'"),
    bad("experiment-seeds-huge", ("experiment", "length", "--seeds", HUGE), rf"--seeds: .*got '{HUGE}'"),
    bad("experiment-seeds-partly-bad", ("experiment", "length", "--seeds", "1,x"), r"--seeds: .*got '1,x'"),
    usage("experiment-steps-zero", ("experiment", "length", "--steps", "0"), r"Invalid value for '--steps'"),
    usage("experiment-steps-not-a-number", ("experiment", "length", "--steps", "abc"), r"Invalid value for '--steps'"),
    bad("experiment-unknown-task", ("experiment", "length", "--tasks", "bogus"), r"unknown task 'bogus'; choose one of: copy"),
    bad("experiment-empty-tasks", ("experiment", "length", "--tasks", ","), r"--tasks is empty"),
    bad("experiment-tasks-for-probe", ("experiment", "probe", "--tasks", "copy"), r"the probe experiment .* takes no --tasks, got \['copy'\]"),
    bad("experiment-scheme-for-extend", ("experiment", "extend", "--schemes", "sinusoidal"), r"the extend experiment rescales RoPE; its only scheme is 'rope', got \['sinusoidal'\]"),
    usage("experiment-threads-zero", ("experiment", "length", "--threads", "0"), r"Invalid value for '--threads'"),
    usage("experiment-threads-huge", ("experiment", "length", "--threads", HUGE), r"Invalid value for '--threads'"),  # was "Overflow when unpacking long long", exit 1
    bad("experiment-device-unknown", ("experiment", "length", "--device", "bogus"), r"device 'bogus' is not usable here"),
    bad("experiment-device-absent", ("experiment", "length", "--device", "cuda:999"), r"device 'cuda:999' is not usable here"),
    bad("experiment-device-meta", ("experiment", "length", "--device", "meta"), r"device 'meta' is not usable here \(meta tensors hold no data\)"),
    bad("experiment-device-negative", ("experiment", "length", "--device", "cuda:-1"), r"device 'cuda:-1' is not usable here"),
    bad("experiment-plot-only-with-steps", ("experiment", "length", "--plot-only", "--steps", "3"), r"--plot-only .* takes no --steps"),
    bad("experiment-plot-only-without-results", ("experiment", "length", "--plot-only", "--out", "{tmp}/empty"), r"no results\.json in .*/empty"),
    # exit 1: a results file that cannot be read is a file that failed, not a usage error (experiment.py's docstring)
    bad("experiment-plot-only-broken-results", ("experiment", "length", "--plot-only", "--out", "{tmp}/broken"), r".*/broken/results\.json is not readable JSON", code=1),
    # exit 1: a file in the way of the results folder (experiment.py: "1 for a run or a file that failed")
    bad("experiment-plot-only-out-is-a-file", ("experiment", "length", "--plot-only", "--out", "{tmp}/afile"), r"cannot read results from .*/afile: .*/afile is a file, not a folder", code=1),
    bad("experiment-out-is-a-file", ("experiment", "length", "--out", "{tmp}/afile"), r"cannot write results to .*/afile: .*/afile is a file, not a folder", code=1),  # exit 1, as above
    bad("experiment-out-under-a-file", ("experiment", "length", "--out", "{tmp}/afile/run"), r"cannot write results to .*/afile/run: .*/afile is a file, not a folder", code=1),  # exit 1, as above
    bad("experiment-results-is-a-folder", ("experiment", "length", "--out", "{tmp}/results_folder"), r".*/results_folder/results\.json is a folder, where the results file goes", code=1),  # exit 1, as above
    bad("experiment-figures-is-a-file", ("experiment", "length", "--out", "{tmp}/figures_file"), r"cannot draw the figures into .*/figures_file/figures: it is a file", code=1),  # exit 1, as above
    bad("experiment-out-name-too-long", ("experiment", "length", "--out", f"{{tmp}}/{LONG}"), r"--out: cannot use '.*' \(File name too long\)"),  # was an OSError traceback
    usage("experiment-unknown-option", ("experiment", "length", "--bogus"), r"No such option: --bogus"),
    usage("experiment-extra-argument", ("experiment", "length", "extra"), r"Got unexpected extra argument\(s\) \(extra\)"),
]

BENCH = [
    bad("bench-unknown-section", ("bench", "--sections", "bogus"), r"--sections: unknown bench sections \['bogus'\]; choose from: rope, bias"),
    bad("bench-section-wrong-case", ("bench", "--sections", "rope,Rope"), r"--sections: unknown bench sections \['Rope'\]"),
    bad("bench-empty-sections", ("bench", "--sections", " , "), r"--sections: no bench section given"),  # named neither option nor value
    bad("bench-lengths-not-numbers", ("bench", "--lengths", "abc"), r"--lengths takes comma-separated integers, got 'abc'"),
    bad("bench-lengths-fraction", ("bench", "--lengths", "2048.5"), r"--lengths takes comma-separated integers, got '2048\.5'"),
    bad("bench-lengths-zero", ("bench", "--lengths", "0"), r"RoPE lengths must be positive integers, got \[0\]"),
    bad("bench-lengths-negative", ("bench", "--lengths", "-5"), r"RoPE lengths must be positive integers, got \[-5\]"),
    bad("bench-lengths-huge", ("bench", "--lengths", HUGE), rf"--lengths must be at most 65536 .*got '{HUGE}'"),
    bad("bench-lengths-empty", ("bench", "--lengths", ","), r"--lengths is empty"),
    bad("bench-dtypes-integer", ("bench", "--dtypes", "int32"), r"RoPE dtypes must be floating point .*got \['torch\.int32'\]"),
    bad("bench-dtypes-unknown", ("bench", "--dtypes", "float99"), r"--dtypes takes torch dtype names .*got 'float99'"),
    bad("bench-dtypes-not-a-dtype", ("bench", "--dtypes", "Tensor"), r"--dtypes takes torch dtype names .*got 'Tensor'"),
    bad("bench-dtypes-empty", ("bench", "--dtypes", ","), r"--dtypes is empty"),  # was "RoPE dtypes must be floating point ...; got none"
    usage("bench-threads-zero", ("bench", "--threads", "0"), r"Invalid value for '--threads'"),
    usage("bench-threads-not-a-number", ("bench", "--threads", "abc"), r"Invalid value for '--threads'"),
    usage("bench-threads-huge", ("bench", "--threads", HUGE), r"Invalid value for '--threads'"),  # was "error: Overflow when unpacking long long"
    bad("bench-device-unknown", ("bench", "--device", "bogus"), r"device 'bogus' is not usable here"),
    bad("bench-device-absent", ("bench", "--device", "cuda:999"), r"device 'cuda:999' is not usable here"),
    bad("bench-device-meta", ("bench", "--device", "meta"), r"device 'meta' is not usable here"),
    bad("bench-device-empty", ("bench", "--device", ""), r"device '' is not usable here"),
    bad("bench-json-under-a-file", ("bench", "--json", "{tmp}/afile/x.json"), r"--json: cannot write .*/afile/x\.json: .*/afile is a file, not a folder"),
    bad("bench-markdown-under-a-file", ("bench", "--markdown", "{tmp}/afile/p.md"), r"--markdown: cannot write .*/afile/p\.md: .*/afile is a file, not a folder"),
    bad("bench-json-is-a-folder", ("bench", "--json", "{tmp}/empty"), r"--json: .*/empty is a directory; give a file name"),
    bad("bench-json-and-markdown-same", ("bench", "--json", "{tmp}/same.json", "--markdown", "{tmp}/same.json"), r"--json and --markdown name the same file"),
    bad("bench-json-name-too-long", ("bench", "--json", f"{{tmp}}/{LONG}.json"), r"--json: cannot use '.*' \(File name too long\)"),  # was an OSError traceback
    bad("bench-markdown-name-too-long", ("bench", "--markdown", f"{{tmp}}/{LONG}/p.md"), r"--markdown: cannot use '.*' \(File name too long\)"),  # was an OSError traceback
    usage("bench-quick-with-value", ("bench", "--quick=3"), r"Option '--quick' does not take a value"),
    usage("bench-unknown-option", ("bench", "--dim", "3"), r"No such option: --dim"),
    usage("bench-extra-argument", ("bench", "extra"), r"Got unexpected extra argument\(s\) \(extra\)"),
    usage("bench-json-without-value", ("bench", "--json"), r"Option '--json' requires an argument"),
]
# fmt: on

ROWS = ROOT + PLOT + CHECK + REPORT + EXPERIMENT + BENCH


class StartedWork(BaseException):
    """A row got past validation: it would have drawn, checked, trained or timed. A BaseException,
    so that no ``except Exception`` of a command or of the test runner takes it for an error."""


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Files the rows point at: a file where a folder goes, folders where files go, bad configs."""
    tmp = tmp_path_factory.mktemp("bad_arguments")
    (tmp / "afile").write_text("a file, not a folder")
    (tmp / "dir.png").mkdir()
    (tmp / "empty").mkdir()
    (tmp / "s.txt").write_text(LINEAR)
    (tmp / "bad.json").write_text("{nope")
    (tmp / "bad.toml").write_text("= = =")
    (tmp / "deep.json").write_text("[" * 100_000)
    (tmp / "deep.toml").write_text("a = " + "[" * 100_000)
    (tmp / "latin.json").write_bytes(b'{"rope_type": "caf\xe9"}')
    (tmp / "array.json").write_text("[1]")
    (tmp / "broken").mkdir()
    (tmp / "broken" / "results.json").write_text("{not json")
    (tmp / "results_folder" / "results.json").mkdir(parents=True)
    (tmp / "figures_file").mkdir()
    (tmp / "figures_file" / "figures").write_text("a file where the figures folder goes")
    return tmp


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """The functions that do a command's work raise StartedWork; default outputs (figure.png,
    runs/NAME) land in the test's own folder; torch's thread count is put back after the row."""
    import posenc.analysis.verdict
    import posenc.bench.bias
    import posenc.bench.rope
    import posenc.bench.train
    import posenc.experiments.runner
    import posenc.report
    import posenc.viz

    def guard(what: str):
        def started(*args, **kwargs):
            raise StartedWork(f"the row got past validation and started {what}")

        return started

    for module, name, what in (
        (posenc.viz, "save_figure", "writing a figure"),
        (posenc.analysis.verdict, "verdict_table", "checking a scheme"),
        (posenc.report, "build_report", "writing the atlas"),
        (posenc.experiments.runner, "run_job", "training"),
        (posenc.bench.rope, "bench_rope", "timing RoPE"),
        (posenc.bench.bias, "bench_bias", "timing biases"),
        (posenc.bench.bias, "bench_attention", "timing attention"),
        (posenc.bench.bias, "bench_flex_memory", "timing FlexAttention"),
        (posenc.bench.train, "bench_training", "timing training"),
    ):
        monkeypatch.setattr(module, name, guard(what))
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def _run(args: tuple[str, ...]):
    return runner.invoke(build_app(), list(args), env={"COLUMNS": "200", "NO_COLOR": "1"})


def test_the_table_covers_every_command():
    commands = {row.args[0] for row in ROWS if row.args and not row.args[0].startswith("-")}
    assert commands >= {"plot", "check", "report", "experiment", "bench"}
    assert len(ROWS) >= 40 and len({row.id for row in ROWS}) == len(ROWS)
    listed = _run(("--help",)).output
    shown = set(re.findall(r"^  (\w[\w-]*)\s", listed.split("Commands:")[-1], flags=re.M))
    assert shown and shown <= commands, f"a command without rows: {sorted(shown - commands)}"


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_command_line(row: Row, scratch: Path, no_work):
    args = tuple(a.replace("{tmp}", str(scratch)) for a in row.args)
    result = _run(args)
    output = result.output
    assert "Traceback" not in output, output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{type(result.exception).__name__} escaped: {result.exception!r}") from result.exception
    assert result.exit_code == row.code, f"exit {result.exit_code}, not {row.code}: {output}"
    lines = [line for line in output.splitlines() if line.strip()]
    if row.usage:  # click's usage error: [Usage: posenc CMD ..., Try 'posenc CMD --help' for help.,] Error: ...
        assert len(lines) in (1, 3) and lines[-1].startswith("Error: "), output
        if len(lines) == 3:
            assert lines[0].startswith("Usage: posenc"), output
            assert re.fullmatch(r"Try 'posenc( [\w-]+)? --help' for help\.", lines[1]), output
        message = lines[-1]
    else:  # posenc's own check: one line
        assert len(lines) == 1 and lines[0].startswith("error: "), output
        message = lines[0]
    assert re.search(row.match, message), f"{row.match!r} not in {message!r}"
