"""posenc.experiments.suite: the jobs it plans and the in- / out-of-distribution summaries."""

from __future__ import annotations

import pytest

from posenc.experiments import suite
from posenc.experiments.suite import Settings, plan


def test_split_summary_counts_the_training_length_as_in_distribution() -> None:
    """Lengths up to and including L are in distribution, longer ones out of it: with exact match
    n/32 at n = 1..32 and L = 16, the means are 8.5/32 and 24.5/32."""
    per_length = {str(n): {"exact_match": n / 32} for n in range(1, 33)}
    assert suite._split_summary(per_length, 16, "exact_match") == (0.265625, 0.765625)


def test_randomized_learned_table_covers_every_drawn_position() -> None:
    """A learned table trained with randomized positions needs a row for every position that can be
    drawn, [0, randomized_max_position), not just the training sequence's length."""
    (job,) = plan("length", Settings(schemes=("learned+randomized",), tasks=("copy",), seeds=(0,)))
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
