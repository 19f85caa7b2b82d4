"""End-to-end: one training step of the experiments' tiny transformer per scheme, against none.

Shape legend: ``b`` batch, ``s`` sequence, ``v`` vocabulary.

The model is :class:`posenc.experiments.model.TinyTransformer` (pre-LN, 2 layers, width 64,
4 heads by default: the size of the experiments); a step is forward, cross-entropy, backward and an
AdamW update on random tokens ``[b, s]``. The overhead of a scheme is its median step time over
that of ``none`` minus one (issue 6 targets: at most 10% for rope and sinusoidal, 20% for biases).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from .timing import measure

__all__ = ["bench_training"]


def bench_training(schemes: Iterable[str] = ("none", "sinusoidal", "learned", "rope", "alibi", "t5"), *,
                   batch: int = 64, seq: int = 32, vocab: int = 32, dim: int = 64, num_heads: int = 4,
                   num_layers: int = 2, num_threads: int = 1, min_run_time: float = 1.0,
                   progress: Callable[[str], None] | None = None) -> list[dict]:
    """One row per scheme: median training-step ms and the overhead against ``none``."""
    from ..experiments.model import ModelConfig, TinyTransformer

    rows, base = [], None
    tokens = torch.randint(vocab, (batch, seq))  # [b, s]
    for name in schemes:
        if progress:
            progress(f"training step: {name}")
        torch.manual_seed(0)
        model = TinyTransformer(ModelConfig(vocab_size=vocab, scheme=name, dim=dim, num_heads=num_heads,
                                            num_layers=num_layers, max_len=max(512, seq)))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

        def step() -> None:
            logits = model(tokens)  # [b, s, v]
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())  # [b*s, v]
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        m = measure(name, step, num_threads=num_threads, min_run_time=min_run_time, warmup=3)
        base = m.median_s if base is None else base
        rows.append({"case": f"train step {name}", "kind": "steady", "batch": batch, "seq": seq,
                     "median_ms": m.median_s * 1e3, "iqr_ms": m.iqr_s * 1e3, "runs": m.runs,
                     "overhead_vs_none": m.median_s / base - 1.0, "other_cpu": m.other_cpu,
                     "num_threads": num_threads})
    return rows
