"""An experiment killed with SIGKILL at any moment resumes to the results of an uninterrupted run.

A run of two jobs (word order, the task quickest to score; checkpoints every 3 of 6 steps) is made
once uninterrupted, then started 32 times in fresh folders and killed: 20 times at seeded random
moments, and once inside each of its 12 file writes (a checkpoint's or results.json's: between the
temporary written and its rename, or between the rename and the folder's flush). Each is resumed
with the same call, and must end with the reference run's records (bit for bit, but for the time
taken and the step resumed from) and the reference run's files: no temporary, no checkpoint left.

The runs are forked from one driver process that imported torch and posenc once (a fresh
interpreter per run would spend longer importing than running); the driver itself never runs
torch, so forking it is safe.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posenc.experiments.results import load_results, record_key

pytestmark = pytest.mark.slow

#: Reads ``run FOLDER K`` lines: forks a run of the experiment into FOLDER (its K-th fsync announces
#: itself with a ``write`` line, then hangs; K = 0: none does) and answers ``pid PID``; on ``wait``
#: reaps it (only then: a pid the test may still signal is never reused) and answers ``exit CODE``.
_DRIVER = """
import functools, os, sys, time
import torch._dynamo  # what the first optimizer imports, and the slowest part of a run: once, here
from posenc.experiments import suite
from posenc.experiments.runner import run_experiment

suite.TrainConfig = functools.partial(suite.TrainConfig, checkpoint_every=3)
settings = suite.Settings(steps=6, tasks=("word-order",), schemes=("none", "alibi"), quick=True)

def run(out, k):
    fsync, calls = os.fsync, [0]

    def announced(fd):
        calls[0] += 1
        if calls[0] == k:
            print("write", flush=True)
            time.sleep(60)
        fsync(fd)

    os.fsync = announced
    run_experiment("length", out, settings, threads=1)
    print(f"fsyncs {calls[0]}", flush=True)

pid = None
for line in sys.stdin:
    command, *rest = line.split()
    if command == "run":
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                run(rest[0], int(rest[1]))
                code = 0
            except BaseException:
                import traceback
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        print(f"pid {pid}", flush=True)
    elif command == "wait":
        _, status = os.waitpid(pid, 0)
        print(f"exit {os.waitstatus_to_exitcode(status)}", flush=True)
"""


class _Driver:
    def __init__(self, log: Path) -> None:
        self.log = log
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        with open(log, "w") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _DRIVER],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                bufsize=1,
                env=env,
            )

    def _line(self) -> str:
        line = self.process.stdout.readline()
        assert line, f"the driver stopped:\n{self.log.read_text()[-4000:]}"
        return line.strip()

    def start(self, out: Path, k: int = 0) -> int:
        self.process.stdin.write(f"run {out} {k}\n")
        self.process.stdin.flush()
        return int(self._line().split()[1])

    def wait_for_write(self) -> None:
        assert self._line() == "write"

    def wait(self) -> tuple[int, list[str]]:
        """The run's exit code and the lines it printed."""
        self.process.stdin.write("wait\n")
        self.process.stdin.flush()
        lines = []
        while not (line := self._line()).startswith("exit "):
            lines.append(line)
        return int(line.split()[1]), lines

    def complete(self, out: Path) -> int:
        """Run to the end in ``out``; the number of fsync calls it made."""
        self.start(out)
        code, lines = self.wait()
        assert code == 0, f"exit {code}:\n{self.log.read_text()[-4000:]}"
        return int(lines[-1].split()[1])

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


def _comparable(out: Path) -> dict:
    """The records of ``out`` by key, without what differs between a resumed and a straight run."""
    return {
        record_key(r): {k: v for k, v in r.items() if k not in ("wall_time_s", "resumed_from_step")}
        for r in load_results(out)
    }


def _files(out: Path) -> list[str]:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*"))


def test_runs_killed_at_any_moment_resume_to_the_uninterrupted_results(tmp_path):
    driver = _Driver(tmp_path / "driver.log")
    try:
        driver.start(tmp_path / "reference")  # once the driver has imported torch
        began = time.perf_counter()
        code, lines = driver.wait()
        duration = time.perf_counter() - began
        assert code == 0, (tmp_path / "driver.log").read_text()[-4000:]
        writes = int(lines[-1].split()[1])
        reference, files = _comparable(tmp_path / "reference"), _files(tmp_path / "reference")
        # 2 jobs x (2 checkpoints + the trained encoding + results.json) x (file + folder)
        assert len(reference) == 2 and writes == 16
        rng = random.Random(29)
        trials = [("moment", rng.uniform(0.0, 0.95 * duration)) for _ in range(20)]
        trials += [("write", k) for k in range(1, writes + 1)]
        killed, left = 0, 0
        for index, (kind, when) in enumerate(trials):
            out = tmp_path / f"run{index}"
            pid = driver.start(out, k=when if kind == "write" else 0)
            if kind == "write":
                driver.wait_for_write()
            else:
                time.sleep(when)
            os.kill(pid, signal.SIGKILL)  # a zombie until reaped by wait(): the pid is still this run's
            code, _ = driver.wait()
            killed += code == -signal.SIGKILL
            left += any(".tmp" in name for name in _files(out))
            driver.complete(out)
            said = f"{kind} {when}: {_files(out)}"
            assert _comparable(out) == reference, said
            assert _files(out) == files, said
        assert killed >= 28 and left >= writes // 2, (killed, left)  # a kill before each rename left a temporary
    finally:
        driver.close()
