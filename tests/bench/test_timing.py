"""posenc.bench.timing: the summaries of paired case / floor measurements."""

from __future__ import annotations

import types

import pytest
import torch
import torch.utils.benchmark

from posenc.bench import timing


class _ScriptedTimer:
    """A torch.utils.benchmark.Timer whose timeit() medians come from a script per function."""

    scripts: dict[int, list[float]] = {}

    def __init__(self, stmt: str, globals: dict, num_threads: int = 1) -> None:
        self.fn = globals["f"]

    def timeit(self, number: int) -> types.SimpleNamespace:
        script = self.scripts[id(self.fn)]
        return types.SimpleNamespace(median=script.pop(0) if len(script) > 1 else script[0])


def test_measure_paired_summaries(monkeypatch: pytest.MonkeyPatch) -> None:
    """measure_paired quotes the median of the per-round ratios (one disturbed round at 10x the
    others does not move it), the fastest case round over the fastest floor round, and the case's
    interquartile range q3 - q1."""

    def case() -> None:
        pass

    def floor() -> None:
        pass

    # the case: one sizing call, then seven rounds (one disturbed at 10x, one at 2.5x); the floor steady
    monkeypatch.setattr(
        _ScriptedTimer,
        "scripts",
        {id(case): [0.004, 0.004, 0.040, 0.004, 0.004, 0.004, 0.004, 0.010], id(floor): [0.002]},
    )
    monkeypatch.setattr(torch.utils.benchmark, "Timer", _ScriptedTimer)
    paired = timing.measure_paired("x", case, floor, min_run_time=0.05, block_s=0.02, min_rounds=7)
    assert paired.rounds == 7
    assert paired.x_floor == pytest.approx(2.0)
    assert paired.x_floor_best == pytest.approx(2.0)
    assert paired.case.iqr_s == pytest.approx(0.006)
