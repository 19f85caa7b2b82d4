"""Metrics of a trained model: accuracy per task length, loss per position, and what cannot be measured.

Shape legend: ``b`` batch, ``s`` sequence, ``v`` vocabulary, ``n`` task length.

Exact match is scored with teacher forcing: an answer counts when the arg-max at every answer
position is the right token. Given the right prefix the greedy decoder emits exactly those arg-maxes,
so by induction this equals greedy decoding's exact match, at the cost of one forward pass.
"""

from __future__ import annotations

import torch
import torch.nn.functional as nnf

from .. import functional as F
from .model import TinyTransformer
from .tasks import IGNORE, Task, Text

__all__ = ["evaluate_lengths", "loss_per_position", "unavailable_reason"]


def unavailable_reason(model: TinyTransformer, task: Task, length: int) -> str | None:
    """Why ``model`` cannot be evaluated at task length ``length`` (a learned table too short), or None."""
    scheme = model.scheme
    max_len = getattr(getattr(scheme, "config", None), "max_len", None)
    if model.config.family == "absolute" and max_len is not None:
        needed = task.sequence_length(length)
        if needed > max_len:
            return (
                f"{scheme.name} table too short: max_len={max_len} positions, length {length} needs {needed}; "
                "a learned table says nothing past its last row"
            )
    return None


@torch.no_grad()
def evaluate_lengths(
    model: TinyTransformer,
    task: Task,
    lengths: list[int],
    *,
    samples: int = 256,
    seed: int = 12345,
    batch_size: int = 256,
    max_position: int | None = None,
) -> dict[str, dict[str, float | str]]:
    """``{str(n): {"exact_match", "token_accuracy"}}`` over ``samples`` fresh instances per length,
    or ``{"unavailable": reason}`` where the model cannot reach that length.

    ``max_position``: score at randomized positions from ``[0, max_position)``, as the model was
    trained (Ruoss et al. 2023 draw them at evaluation too); None: positions ``0..s-1``.
    """
    model.eval()
    device = next(model.parameters()).device
    out: dict[str, dict[str, float | str]] = {}
    for n in lengths:
        reason = unavailable_reason(model, task, n)
        if reason is not None:
            out[str(n)] = {"unavailable": reason}
            continue
        generator = torch.Generator().manual_seed(seed + n)
        exact = correct = total = 0
        for start in range(0, samples, batch_size):
            batch = task.sample(min(batch_size, samples - start), n, generator).to(device)
            positions = None
            if max_position is not None:
                b, s = batch.inputs.shape
                positions = F.randomized_positions(b, s, max_position, generator=generator).to(device)  # [b, s]
            predicted = model(batch.inputs, positions).argmax(-1)  # [b, s]
            scored = batch.targets != IGNORE  # [b, s]
            right = (predicted == batch.targets) & scored
            exact += int((right.sum(1) == scored.sum(1)).sum())
            correct += int(right.sum())
            total += int(scored.sum())
        out[str(n)] = {"exact_match": exact / samples, "token_accuracy": correct / max(total, 1)}
    return out


@torch.no_grad()
def loss_per_position(
    model: TinyTransformer, task: Text, length: int, *, samples: int = 64, seed: int = 12345, batch_size: int = 16
) -> list[float] | str:
    """Mean held-out cross-entropy (nats) at each position ``0..length-1`` over the targets scored
    there (all of them for a causal LM; the masked bytes only for ``text-mlm``; None where no
    sample scored that position), or the reason it is unavailable."""
    reason = unavailable_reason(model, task, length)
    if reason is not None:
        return reason
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    total = torch.zeros(length, dtype=torch.float64)
    count = torch.zeros(length, dtype=torch.float64)
    for start in range(0, samples, batch_size):
        batch = task.sample(min(batch_size, samples - start), length, generator, held_out=True).to(device)
        logits = model(batch.inputs)  # [b, s, v]
        loss = nnf.cross_entropy(
            logits.transpose(1, 2), batch.targets, reduction="none", ignore_index=IGNORE
        )  # [b, s]; 0 where ignored
        total += loss.double().sum(0).cpu()
        count += (batch.targets != IGNORE).sum(0).double().cpu()
    return [t / c if c else None for t, c in zip(total.tolist(), count.tolist())]
