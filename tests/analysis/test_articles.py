"""The data of the founding articles' step-by-step pictures (``posenc.analysis.articles``)."""

from __future__ import annotations

import math

import pytest
import torch

from posenc import functional as F
from posenc.analysis.articles import add_or_concatenate, clipped_relative_index, two_waves
from posenc.viz import plot
from posenc.viz.kinds import PlotOptions


def test_two_waves_place_nearby_positions_closer_than_distant_ones():
    data = two_waves(slow=0.05, fast=0.4, positions=(10, 12, 50))
    codes = data["codes"]
    assert codes[0].tolist() == pytest.approx([math.cos(0.5), math.cos(4.0)])
    assert codes[2].tolist() == pytest.approx([math.cos(2.5), math.cos(20.0)])
    d = data["distances"]
    assert d[0, 1] < d[0, 2] and d[0, 1] < d[1, 2]  # Pim 2023's point: nearby codes are closer
    slow_gap, fast_gap = (codes[0] - codes[1]).abs().tolist()
    assert slow_gap < 0.1 < fast_gap  # the slow wave barely tells 10 from 12, the fast one does


def test_clipped_relative_index_is_shaws_clip():
    index = clipped_relative_index(6, 2)
    expected = torch.tensor([[max(-2, min(2, n - m)) for n in range(6)] for m in range(6)])
    assert torch.equal(index, expected)
    assert torch.equal(clipped_relative_index(5, (1, 3))[0], torch.tensor([0, 1, 2, 3, 3]))  # (left, right)


def test_add_or_concatenate_uses_the_papers_sinusoid():
    data = add_or_concatenate(width=8, position=3)
    code = torch.tensor(
        [f(3 / 10000 ** (2 * (i // 2) / 8)) for i, f in zip(range(8), [math.sin, math.cos] * 4)], dtype=torch.float64
    )
    torch.testing.assert_close(data["code"], code, rtol=0, atol=1e-12)
    torch.testing.assert_close(data["sum"], data["word"] + data["code"])
    assert data["concat"].shape == (16,) and torch.equal(data["concat"][8:], data["code"])
    assert torch.equal(F.sinusoidal(torch.tensor([3]), 8, dtype=torch.float64)[0], data["code"])


@pytest.mark.parametrize(("scheme", "kind"), [("sinusoidal", "waves"), ("sinusoidal", "concat"), ("shaw", "clipped")])
def test_article_figures_draw(scheme, kind):
    figure = plot(scheme, kind, PlotOptions())
    assert figure.axes and figure.get_suptitle()
