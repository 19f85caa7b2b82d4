"""posenc's speed and memory measurements, side by side with the peers (``posenc bench``).

Every timing uses ``torch.utils.benchmark`` with an explicit thread count, reports the median, and
records the share of the CPU that other processes used meanwhile (:mod:`posenc.bench.timing`);
ratios to a floor measured in the same process are the figures to quote.

* :func:`bench_rope` — RoPE on q, k ``[1, 32, L, 128]`` (``Rope.rotate``, :func:`posenc.kernels.rope`
  with each backend) against the copy floor, the clone floor and the peers;
* :func:`bench_bias` — building T5/ALiBi biases ``[h, L, L]`` against filling a preallocated tensor;
* :func:`bench_attention` — ``posenc.Attention`` per scheme;
* :func:`bench_flex_memory` — ALiBi at long L through FlexAttention vs SDPA with a materialised bias;
* :func:`bench_training` — the experiments' training step per scheme against no encoding;
* :func:`run` — all of the above as one JSON-ready dict.
"""

from __future__ import annotations

from .bias import bench_attention, bench_bias, bench_flex_memory
from .report import format_rows, run
from .rope import bench_rope
from .timing import Measurement, measure
from .train import bench_training

__all__ = [
    "bench_rope",
    "bench_bias",
    "bench_attention",
    "bench_flex_memory",
    "bench_training",
    "run",
    "format_rows",
    "measure",
    "Measurement",
]
