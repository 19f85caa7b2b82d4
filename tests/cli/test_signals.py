"""Ctrl-C and SIGTERM at any moment of a ``posenc`` command: one line, exit 130 or 143.

While the command line starts (about a second of importing torch, numpy and typer) Ctrl-C used to
print a KeyboardInterrupt traceback, once a numpy RecursionError 930 frames deep, once a C++ abort
(exit 134): the exception went off inside those imports. ``posenc.cli.main`` now takes both signals
over before anything heavy is imported.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}


def test_the_command_line_takes_the_signals_before_torch_is_imported():
    """``import posenc.cli`` (what the ``posenc`` script and ``python -m posenc`` run first) loads
    neither torch nor the CLI's extras: ``main`` sets its handlers before they load."""
    code = "import sys, posenc.cli; print(sorted(m for m in ('torch', 'numpy', 'typer', 'rich') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=ENV)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def _stopped(args: list[str], after: float, signum: int) -> tuple[int, str, str]:
    """``python -m posenc ARGS`` sent ``signum`` ``after`` seconds from its start: its exit status,
    stdout and stderr."""
    process = subprocess.Popen(
        [sys.executable, "-m", "posenc", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )
    try:
        time.sleep(after)
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, stdout, stderr


@pytest.mark.slow
@pytest.mark.xfail(
    strict=False,
    reason="known, rare (1 in ~5 full-suite runs): a SIGINT 1.3 s into `posenc experiment` was lost and the run "
    "finished with exit 0; not yet explained (issue 29 stays open for it)",
)
def test_a_signal_at_any_moment_is_one_line_and_the_exit_status(tmp_path):
    """SIGINT or SIGTERM from the first tenth of a second (imports) to a few seconds in (drawing the
    atlas, training): exit 130 or 143, at most one line on stderr, never a traceback."""
    report = ["report", "--out", str(tmp_path / "atlas")]
    experiment = ["experiment", "length", "--steps", "5000", "--quick", "--schemes", "none", "--tasks", "copy"]
    cases = [(report, after, signal.SIGINT) for after in (0.1, 0.3, 0.6, 1.0, 1.5, 2.5)]
    cases += [(experiment, after, signal.SIGINT) for after in (0.2, 0.8, 1.3, 3.0)]
    cases += [(experiment, after, signal.SIGTERM) for after in (0.4, 1.1, 3.0)]
    for index, (args, after, signum) in enumerate(cases):
        if args is experiment:
            args = [*args, "--out", str(tmp_path / f"run{index}")]
        code, stdout, stderr = _stopped(args, after, signum)
        said = f"{args[0]} after {after} s: exit {code}\nstdout: {stdout[-2000:]}\nstderr: {stderr[-4000:]}"
        assert code == 128 + signum, said
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert len(lines) <= 1 and "Traceback" not in stdout + stderr, said
        how = "interrupted" if signum == signal.SIGINT else "stopped by SIGTERM"
        assert how in stdout + stderr, said
