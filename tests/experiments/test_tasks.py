"""posenc.experiments.tasks: what each task's batches score."""

from __future__ import annotations

import torch

from posenc.experiments.tasks import IGNORE, MASK, get_task


def test_text_mlm_targets_are_exactly_the_masked_bytes() -> None:
    """text-mlm scores the bytes it replaced by MASK and nothing else: a target at an unmasked
    byte would teach the encoder to copy its input, which is not masked byte modelling."""
    batch = get_task("text-mlm").sample(4, 64, torch.Generator().manual_seed(0))
    masked = batch.inputs == MASK
    assert masked.any() and not masked.all()
    assert torch.equal(batch.targets != IGNORE, masked)
    assert (batch.targets[masked] != MASK).all()
