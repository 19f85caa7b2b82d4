"""Tests that pin details of the experiment runner, the benchmarks and the reports which a
mutation-testing run found unchecked: each test fails when the line it names is changed."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
import torch
import torch.utils.benchmark
from torch import nn

from posenc.bench import rope as bench_rope
from posenc.bench import timing
from posenc.bench.report import markdown
from posenc.experiments import runner, suite
from posenc.experiments.evaluate import evaluate_lengths
from posenc.experiments.results import add_record, load_results
from posenc.experiments.suite import Settings, plan
from posenc.experiments.tasks import EOS, IGNORE, MASK, SEP, get_task
from posenc.report.html import table_html
from posenc.report.results import _summary_rows


# -- experiments -------------------------------------------------------------------------------
def test_text_mlm_targets_are_exactly_the_masked_bytes() -> None:
    """text-mlm scores the bytes it replaced by MASK and nothing else: a target at an unmasked
    byte would teach the encoder to copy its input, which is not masked byte modelling."""
    batch = get_task("text-mlm").sample(4, 64, torch.Generator().manual_seed(0))
    masked = batch.inputs == MASK
    assert masked.any() and not masked.all()
    assert torch.equal(batch.targets != IGNORE, masked)
    assert (batch.targets[masked] != MASK).all()


class _CopyOracle(nn.Module):
    """A stand-in model for the copy task that predicts every next token right except the first
    answer token (where it says SEP)."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.weight = nn.Parameter(torch.zeros(1))  # evaluate_lengths reads the device from a parameter
        self.scheme = None
        self.config = types.SimpleNamespace(family="none")

    def forward(self, inputs: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        b, s = inputs.shape
        nxt = torch.cat((inputs[:, 1:], torch.full((b, 1), EOS, dtype=torch.long)), dim=1)  # [b, s]
        n = (s - 2) // 2  # BOS x SEP y: s = 2n + 2
        nxt[:, n + 1] = SEP  # the position that sees SEP predicts y's first token: wrong here
        return torch.nn.functional.one_hot(nxt, self.vocab).float()  # [b, s, v]


def test_exact_match_needs_every_answer_token_right() -> None:
    """An answer counts as an exact match only when every answer token is right: a model wrong at
    the first answer token alone scores 0 exact match, and 4 of the 5 scored tokens (the four
    copied digits and EOS) right at length 4."""
    task = get_task("copy")
    out = evaluate_lengths(_CopyOracle(task.vocab_size), task, [4], samples=8)
    assert out["4"]["exact_match"] == 0.0
    assert out["4"]["token_accuracy"] == pytest.approx(0.8)


def test_a_job_with_some_variants_stored_still_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner skips a job only when the records of all its variants are stored: an extend job
    whose "default" record alone made it to results.json (a run killed between two add_record
    calls) must train again, or its linear, ntk and yarn rows would never appear."""
    settings = Settings(steps=2, quick=True)
    jobs = plan("extend", settings)
    job = jobs[0]
    assert len(job.variants) > 1 and "default" in job.variants
    add_record(tmp_path, {"experiment": job.experiment, "task": job.task.name, "scheme": job.scheme,
                          "variant": "default", "seed": job.seed, "train_length": job.train.max_length,
                          "metrics": {}, "in_distribution": 1.0, "out_of_distribution": 2.0,
                          "summary_metric": "loss", "wall_time_s": 0.0, "config": runner.job_config(job)})
    called: list[str] = []
    monkeypatch.setattr(runner, "run_job", lambda j, out, hooks=None: called.append(j.base_label) or [])
    runner.run_experiment("extend", tmp_path, settings)
    assert job.base_label in called


def test_checkpoint_is_deleted_once_records_are_stored(tmp_path: Path) -> None:
    """A finished job leaves no checkpoint behind: its records are in results.json, and a stale
    checkpoint would only take disk space (and be checked against every later run's settings)."""
    settings = Settings(steps=2, tasks=("copy",), schemes=("none",), quick=True)
    records = runner.run_experiment("length", tmp_path, settings)
    assert records and load_results(tmp_path)
    assert list((tmp_path / "checkpoints").glob("*.pt")) == []


def test_split_summary_counts_the_training_length_as_in_distribution() -> None:
    """Lengths up to and including L are in distribution, longer ones out of it: with exact match
    n/32 at n = 1..32 and L = 16, the means are 8.5/32 and 24.5/32."""
    per_length = {str(n): {"exact_match": n / 32} for n in range(1, 33)}
    assert suite._split_summary(per_length, 16, "exact_match") == (0.265625, 0.765625)


def test_randomized_learned_table_covers_every_drawn_position() -> None:
    """A learned table trained with randomized positions needs a row for every position that can be
    drawn, [0, randomized_max_position), not just the training sequence's length."""
    (job,) = plan("length", Settings(schemes=("learned+randomized",), tasks=("copy",)))
    assert job.train.randomized_max_position is not None
    assert job.model.max_len == job.train.randomized_max_position
    assert job.model.max_len > job.task.sequence_length(job.train.max_length)


def test_lm_summaries_split_the_losses_at_the_training_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """A language model's in-distribution loss is the mean over positions 0..L-1 and its
    out-of-distribution loss the mean over positions L onwards, each position in exactly one."""
    monkeypatch.setattr(suite, "unavailable_reason", lambda model, task, length: None)
    monkeypatch.setattr(suite, "loss_per_position", lambda model, task, length, samples: [float(i) for i in range(8)])
    fields = suite._lm_fields(None, None, 4, 8, 1)
    assert fields["in_distribution"] == 1.5
    assert fields["out_of_distribution"] == 5.5


# -- benchmarks --------------------------------------------------------------------------------
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
    monkeypatch.setattr(_ScriptedTimer, "scripts", {id(case): [0.004, 0.004, 0.040, 0.004, 0.004, 0.004, 0.004, 0.010],
                                                    id(floor): [0.002]})
    monkeypatch.setattr(torch.utils.benchmark, "Timer", _ScriptedTimer)
    paired = timing.measure_paired("x", case, floor, min_run_time=0.05, block_s=0.02, min_rounds=7)
    assert paired.rounds == 7
    assert paired.x_floor == pytest.approx(2.0)
    assert paired.x_floor_best == pytest.approx(2.0)
    assert paired.case.iqr_s == pytest.approx(0.006)


def test_rope_floor_cases_return_q_and_k() -> None:
    """Every floor case moves both q and k, as every posenc case does: a floor of q alone would
    halve the denominator of every ratio in the table."""
    q, k = torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)
    cos, sin = torch.ones(8, 16), torch.zeros(8, 16)  # the identity rotation
    cases, _ = bench_rope._posenc_cases(q, k, cos, sin, "half")
    for name in ("floor", "floor, new tensors"):
        got = cases[name]()
        assert len(got) == 2, name
        assert torch.equal(got[0], q) and torch.equal(got[1], k), name
    got = cases["floor, in place"]()
    assert len(got) == 2
    assert torch.equal(got[0], -q) and torch.equal(got[1], -k)


def test_peer_over_posenc_ratio_in_the_rope_table() -> None:
    """The peer / posenc column divides the peer's ratio to the floor by posenc's new-tensor ratio:
    8.0 over 2.0 reads 4.0x (a peer four times slower), not 0.2x."""
    base = {"L": 512, "dtype": "float32", "layout": "half", "kind": "steady", "median_ms": 1.0, "other_cpu": 0.0}
    rows = [{**base, "case": "floor", "x_floor": 1.0},
            {**base, "case": "posenc new tensors", "x_floor": 2.0},
            {**base, "case": "posenc out= (compiled)", "x_floor": 1.2},
            {**base, "case": "peer transformers", "x_floor": 8.0}]
    text = markdown({"meta": {"device": "cpu"}, "rope": rows})
    (row,) = [line for line in text.splitlines() if line.startswith("| 512 |")]
    assert "transformers 4.0x" in row


# -- reports -----------------------------------------------------------------------------------
def test_table_cells_and_tooltips_are_escaped() -> None:
    """A cell's text and its tooltip are escaped: results carry free text (error messages with
    '<' and quotes), which must neither inject markup nor end the title attribute early."""
    html = table_html(["a"], [[("<b>x</b>", "pass", 'say "hi" <now>')]])
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert 'title="say &quot;hi&quot; &lt;now&gt;"' in html
    assert "<b>" not in html


def _record(variant: str, ood: float | None) -> dict:
    return {"experiment": "extend", "task": "text", "scheme": "rope", "variant": variant, "seed": 0,
            "in_distribution": 1.0, "out_of_distribution": ood, "summary_metric": "loss"}


def test_summary_mean_is_over_the_values_present() -> None:
    """The summary mean divides by the number of runs that have a value: a run without an
    out-of-distribution value (a table too short) does not count as a zero."""
    (row,) = _summary_rows([_record("default", 0.2), {**_record("default", None), "seed": 1}])
    assert row[6] == "0.200"


def test_summary_rows_keep_variants_apart() -> None:
    """Variants are separate rows of the summary: extend's default and yarn scalings of one model
    are different results, not seeds of one."""
    rows = _summary_rows([_record("default", 0.2), _record("yarn", 0.3)])
    assert len(rows) == 2
    assert {row[2] for row in rows} == {"default", "yarn"}
