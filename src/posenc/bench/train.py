"""End-to-end: one training step of the experiments' tiny transformer per scheme, against none.

Shape legend: ``b`` batch, ``s`` sequence, ``v`` vocabulary.

The model is :class:`posenc.experiments.model.TinyTransformer` (pre-LN, 2 layers, width 64,
4 heads by default: the size of the experiments); a step is forward, cross-entropy, backward and an
AdamW update on random tokens ``[b, s]``. The overhead of a scheme is the median over rounds of its
step time over that of ``none`` in the same round, minus one (issue 6 targets: at most 10% for
rope and sinusoidal, 20% for biases). ``first_step_ms`` is each scheme's first step, timed apart
before the warm-up: it carries the one-time costs (tables and caches built, a compile where
:mod:`posenc.kernels` compiles the rotation for inputs this large, first-touch page faults).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable

import torch

from .timing import measure

__all__ = ["bench_training"]


def bench_training(
    schemes: Iterable[str] = ("none", "sinusoidal", "learned", "rope", "alibi", "t5"),
    *,
    batch: int = 64,
    seq: int = 32,
    vocab: int = 32,
    dim: int = 64,
    num_heads: int = 4,
    num_layers: int = 2,
    num_threads: int = 1,
    min_run_time: float = 3.0,
    rounds: int = 9,
    device: torch.device | str = "cpu",
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per scheme: median training-step ms and the overhead against the first (``none``)."""
    from ..experiments.model import ModelConfig, TinyTransformer

    schemes = list(schemes)
    tokens = torch.randint(vocab, (batch, seq), device=device)  # [b, s]
    steps, first = {}, {}
    for name in schemes:
        torch.manual_seed(0)
        model = TinyTransformer(
            ModelConfig(
                vocab_size=vocab,
                scheme=name,
                dim=dim,
                num_heads=num_heads,
                num_layers=num_layers,
                max_len=max(512, seq),
            )
        ).to(device)
        steps[name] = _step(model, tokens)
        start = time.perf_counter()
        steps[name]()  # the first step: one-time costs, reported apart from the steady state
        first[name] = time.perf_counter() - start
    # Round-robin: each round times every scheme once, so a change in the machine's load between
    # rounds hits all schemes alike; the overhead is the median over rounds of each round's ratio
    # to none (a ratio of two medians let slow rounds of one scheme through: +/-7% between runs).
    medians: dict[str, list[float]] = {name: [] for name in schemes}
    others: dict[str, list[float]] = {name: [] for name in schemes}
    for r in range(rounds):
        for name in schemes:
            if progress:
                progress(f"training step: {name} (round {r + 1}/{rounds})")
            m = measure(
                name,
                steps[name],
                num_threads=num_threads,
                min_run_time=min_run_time / rounds,
                warmup=3 if r == 0 else 0,
            )
            medians[name].append(m.median_s)
            others[name].append(m.other_cpu or 0.0)
    median = {name: statistics.median(v) for name, v in medians.items()}
    base = medians[schemes[0]]
    overhead = {name: statistics.median(t / b for t, b in zip(v, base)) - 1.0 for name, v in medians.items()}
    return [
        {
            "case": f"train step {name}",
            "kind": "steady",
            "batch": batch,
            "seq": seq,
            "rounds": rounds,
            "median_ms": median[name] * 1e3,
            "overhead_vs_none": overhead[name],
            "first_step_ms": first[name] * 1e3,
            "other_cpu": max(others[name]),
            "num_threads": num_threads,
        }
        for name in schemes
    ]


def _step(model: torch.nn.Module, tokens: torch.Tensor) -> Callable[[], None]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        logits = model(tokens)  # [b, s, v]
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())  # [b*s, v]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step
