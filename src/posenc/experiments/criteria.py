"""When a run has learned its task: the criteria that end training early and the per-seed ``learned`` flag.

Shape legend: ``b`` batch, ``s`` sequence.

* ``exact_match``: a sequence task is learned when its exact match at the longest training length
  ``L`` reaches ``target`` (0.95 in the experiments). Scoring at ``L`` alone, not the mean over
  ``1..L``, is what keeps a model that fits short inputs and fails at ``L`` from passing.
* ``plateau``: a language model stops training when its training loss stops falling: the mean over
  the last ``window`` steps is within ``target`` (relative) of the mean over the ``window`` before.

Training checks the criterion every ``check_every`` steps (:func:`criterion_met`) and stops at the
first check it meets, or at the step budget. :func:`learned` decides the record's flag from the final
evaluation, so a run trained to its full budget is judged by the same rule: a sequence task by exact
match at ``L``; a language model by its held-out loss at positions ``< L`` against a bigram model of
the same corpus (:func:`bigram_loss`: the cross-entropy of predicting each byte from the one before,
counted on the training split, scored on the held-out split): a model below it uses more context than
one byte. (A plateau alone does not say a model learned: one stuck at a high loss plateaus too; and
the small budgets here stop before one.) A run whose loss is not finite has diverged and never
counts as learned.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

__all__ = ["CRITERIA", "check_criterion_config", "criterion_met", "learned", "describe", "CHECK_SAMPLES"]

CRITERIA = ("exact_match", "plateau")
#: Instances scored at L by each exact-match check: the same 128 (the same generator seed) that
#: the final evaluation of a full run scores at L, so a run that stops at the criterion is learned
CHECK_SAMPLES = 128


def check_criterion_config(criterion: object, target: object, check_every: object) -> None:
    """A ValueError naming the field when a TrainConfig's criterion settings do not fit together."""
    if criterion not in CRITERIA:
        raise ValueError(f"criterion must be one of {', '.join(CRITERIA)} or None, got {criterion!r}")
    if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0 < target <= 1:
        raise ValueError(f"target must be a number in (0, 1] with criterion={criterion!r}, got {target!r}")
    if isinstance(check_every, bool) or not isinstance(check_every, int) or check_every <= 0:
        raise ValueError(f"check_every must be a positive integer with criterion={criterion!r}, got {check_every!r}")


def plateaued(losses: list[float], window: int, tolerance: float) -> bool:
    """The mean of the last ``window`` losses is finite and at most ``tolerance`` (relative) below
    the mean of the ``window`` before; False while fewer than ``2 * window`` losses exist."""
    if len(losses) < 2 * window:
        return False
    last = sum(losses[-window:]) / window
    before = sum(losses[-2 * window : -window]) / window
    if not (math.isfinite(last) and math.isfinite(before)):
        return False
    return before - last <= tolerance * abs(before)


@torch.no_grad()
def exact_match_at(model: Any, task: Any, length: int, samples: int = CHECK_SAMPLES) -> float:
    """Exact match of ``model`` on ``samples`` fresh instances of ``task`` at ``length`` (teacher forced)."""
    from .evaluate import evaluate_lengths

    scores = evaluate_lengths(model, task, [length], samples=samples)
    return float(scores[str(length)].get("exact_match", 0.0))


def criterion_met(model: Any, task: Any, config: Any, losses: list[float]) -> bool:
    """Whether the run meets ``config.criterion`` now (the model is put back in training mode)."""
    if config.criterion == "plateau":
        return plateaued(losses, config.check_every, config.target)
    if config.randomized_max_position is not None:  # scored as trained: at randomized positions
        from .evaluate import evaluate_lengths

        with torch.no_grad():
            scores = evaluate_lengths(
                model,
                task,
                [config.max_length],
                samples=CHECK_SAMPLES,
                max_position=config.randomized_max_position,
            )
        score = float(scores[str(config.max_length)].get("exact_match", 0.0))
    else:
        score = exact_match_at(model, task, config.max_length)
    model.train()
    return math.isfinite(losses[-1]) and score >= config.target


@functools.lru_cache(maxsize=8)
def bigram_loss(task_name: str) -> float:
    """Held-out cross-entropy (nats per byte) of the bigram model of a byte-LM task's corpus: byte
    pair counts of the training split plus 0.01 (add-k smoothing), scored on the held-out split."""
    from .tasks import get_task

    task = get_task(task_name)
    train, held = task.split(False).long(), task.split(True).long()  # [N], [M]
    pairs = torch.bincount(train[:-1] * 256 + train[1:], minlength=256 * 256).double().view(256, 256) + 0.01
    conditional = pairs / pairs.sum(1, keepdim=True)  # [256, 256]: p(next | previous)
    return float(-conditional[held[:-1], held[1:]].log().mean())


#: The targets the experiments state (docs/experiments.md quotes them).
EXACT_MATCH_TARGET = 0.95


def learned(
    task: Any, train_config: Any, losses: list[float], per_length: dict[str, Any] | None, in_distribution: Any
) -> bool:
    """The record's ``learned`` flag: sequence tasks by exact match at ``L`` in the final evaluation
    (``>= target``, 0.95 by default); causal language models by a held-out loss at positions ``< L``
    (``in_distribution``) below :func:`bigram_loss`. A non-finite loss is never learned."""
    if not losses or not math.isfinite(losses[-1]):
        return False
    if task.kind == "lm":
        ok = isinstance(in_distribution, float) and math.isfinite(in_distribution)
        return ok and in_distribution < bigram_loss(task.name)
    target = train_config.target if train_config.criterion == "exact_match" else EXACT_MATCH_TARGET
    at_l = (per_length or {}).get(str(train_config.max_length), {})
    score = at_l.get("exact_match")
    return score is not None and score >= target


def describe(task: Any, train_config: Any) -> str:
    """The rule behind ``learned`` in words, stored with each record."""
    if task.kind == "lm":
        rule = f"held-out loss at positions < L below the bigram model's {bigram_loss(task.name):.3f} nats/byte"
        if train_config.criterion == "plateau":
            window = train_config.check_every
            rule += (
                f"; training stops early at a plateau (mean loss of the last {window} steps within "
                f"{train_config.target:.0%} of the {window} before: criterion_met_at)"
            )
        return rule
    target = train_config.target if train_config.criterion == "exact_match" else EXACT_MATCH_TARGET
    return f"exact match >= {target} at the training length {train_config.max_length}"
