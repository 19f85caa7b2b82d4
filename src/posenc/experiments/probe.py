"""A linear probe for absolute position in every layer's hidden states.

Shape legend: ``b`` batch, ``s`` sequence, ``d`` model width, ``N = b * s`` probed vectors.

Haviv et al. 2022, "Transformer Language Models without Positional Encodings Still Learn Positional
Information", section 4: a probe trained on a layer's hidden states to predict each token's position
shows how much position the layer carries. Here the probe is ridge regression (closed form, float64)
fitted on the first 70 % of held-out sequences and scored by R² and mean absolute error on the rest,
so a probe cannot succeed by memorising the sequences it scores.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .model import TinyTransformer
from .tasks import Task

__all__ = ["probe_positions", "ridge_r2"]


def ridge_r2(
    train_x: Tensor, train_y: Tensor, test_x: Tensor, test_y: Tensor, *, ridge: float = 1e-3
) -> tuple[float, float]:
    """Fit ``y ≈ x·w + c`` by ridge regression on the train rows; (R², mean |error|) on the test rows."""
    mean, scale = train_x.mean(0), train_x.std(0).clamp_min(1e-8)  # [d]
    a = torch.cat(((train_x - mean) / scale, torch.ones(len(train_x), 1, dtype=train_x.dtype)), dim=1)  # [N, d + 1]
    b = torch.cat(((test_x - mean) / scale, torch.ones(len(test_x), 1, dtype=test_x.dtype)), dim=1)  # [N', d + 1]
    gram = a.T @ a + ridge * len(a) * torch.eye(a.shape[1], dtype=a.dtype)  # [d + 1, d + 1]
    weights = torch.linalg.solve(gram, a.T @ train_y)  # [d + 1]
    predicted = b @ weights  # [N']
    residual = ((test_y - predicted) ** 2).sum()
    total = ((test_y - test_y.mean()) ** 2).sum()
    return float(1 - residual / total), float((test_y - predicted).abs().mean())


@torch.no_grad()
def probe_positions(
    model: TinyTransformer, task: Task, length: int, *, samples: int = 128, seed: int = 777
) -> list[dict[str, float]]:
    """``[{"layer": l, "r2": ..., "mae": ...}]`` for the input (layer 0) and each block's output."""
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    kwargs = {"held_out": True} if hasattr(task, "split") else {}
    batch = task.sample(samples, length, generator, **kwargs).to(device)
    _, states = model(batch.inputs, hidden_states=True)  # L + 1 tensors [b, s, d]
    b, s = batch.inputs.shape
    positions = torch.arange(s, dtype=torch.float64).repeat(b, 1)  # [b, s]
    cut = int(0.7 * b)
    results = []
    for layer, hidden in enumerate(states):
        h = hidden.double().cpu()  # [b, s, d]
        r2, mae = ridge_r2(
            h[:cut].flatten(0, 1),
            positions[:cut].flatten(),  # [N, d], [N]
            h[cut:].flatten(0, 1),
            positions[cut:].flatten(),
        )
        results.append({"layer": layer, "r2": r2, "mae": mae})
    return results
