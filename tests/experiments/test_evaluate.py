"""posenc.experiments.evaluate: exact match and token accuracy per length."""

from __future__ import annotations

import types

import pytest
import torch
from torch import nn

from posenc.experiments.evaluate import evaluate_lengths
from posenc.experiments.tasks import EOS, SEP, get_task


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
