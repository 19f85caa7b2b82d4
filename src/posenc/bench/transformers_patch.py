"""A transformers Llama switched to posenc's RoPE against the stock model: forward time side by side.

Shape legend: ``b`` batch (1), ``s`` sequence, ``d`` hidden width.

The model is transformers' ``LlamaModel`` (the decoder stack: the LM head does not touch RoPE) with
random weights: 2 layers, hidden 512, 8 heads of width 64, MLP width 1376 (Llama's 8/3 ratio,
rounded), run on one sequence of ``s`` tokens under ``torch.inference_mode``. Two copies hold the
same weights: the stock one and one switched by
:func:`posenc.integrations.transformers.use_posenc_rope` (posenc's float64-exact tables and
:func:`posenc.kernels.rope`). Each posenc forward is timed in alternation with a stock forward
(:func:`~posenc.bench.timing.measure_paired_many`): ``x_stock`` is the median of the per-round
ratios posenc / stock (below 1: posenc is faster), ``x_stock_best`` the fastest posenc round over
the fastest stock round. While the posenc copy is switched, the stock copy's rotation also passes
through posenc's dispatcher (one Python call more per layer, handing its tables on unchanged).

Rows ``kind="one-time"`` hold each copy's first forward: posenc's compiles its rotation kernel for
inputs of at least :data:`posenc.kernels.COMPILE_MIN_NUMEL` elements (q is ``[1, 8, s, 64]``).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable

import torch

from .timing import measure_paired_many, synchronize

__all__ = ["bench_transformers_patch"]


def _llama(layers: int, hidden: int, heads: int, length: int, dtype: torch.dtype, device: torch.device | str):
    try:
        import transformers
    except ImportError as err:
        raise ImportError(
            "the transformers bench section needs transformers: pip install 'posenc[transformers]'"
        ) from err
    config = transformers.LlamaConfig(
        vocab_size=1024,
        hidden_size=hidden,
        intermediate_size=(8 * hidden // 3 + 31) // 32 * 32,  # Llama's 8/3 MLP ratio, to a multiple of 32
        num_hidden_layers=layers,
        num_attention_heads=heads,
        max_position_embeddings=max(length, 2048),
    )
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(config, dtype=dtype).to(device).eval()


def bench_transformers_patch(
    lengths: Iterable[int] = (2048,),
    dtypes: Iterable[torch.dtype] = (torch.float32, torch.bfloat16),
    *,
    layers: int = 2,
    hidden: int = 512,
    heads: int = 8,
    num_threads: int = 1,
    min_run_time: float = 2.0,
    device: torch.device | str = "cpu",
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per (case, s, dtype) for the cases ``"stock"`` and ``"posenc"``: median ms, spread,
    ``x_stock`` and ``x_stock_best`` (posenc over stock, paired rounds; 1.0 in the stock row),
    ``max_abs_diff`` (posenc's output against stock's, a check that both ran the same model), the
    load (``other_cpu``) and thread count; and ``kind="one-time"`` rows with each first forward.

    A forward takes about a second on one CPU core: ``min_run_time`` of 2 s gives at least 7 paired
    rounds (:func:`~posenc.bench.timing.measure_paired_many` stops after 3 once ``10 *
    min_run_time`` seconds have passed, so 0.5 s would leave 4).
    """
    from ..integrations.transformers import use_posenc_rope

    torch.set_num_threads(num_threads)
    rows: list[dict] = []
    for length in lengths:
        for dtype in dtypes:
            base = {"L": length, "dtype": str(dtype).removeprefix("torch."), "layers": layers, "hidden": hidden}
            base["heads"] = heads
            stock = _llama(layers, hidden, heads, length, dtype, device)
            patched = copy.deepcopy(stock)
            handle = use_posenc_rope(patched)
            ids = torch.randint(0, 1024, (1, length), generator=torch.Generator().manual_seed(1)).to(device)  # [b, s]

            def forward(model, ids=ids):
                with torch.inference_mode():
                    return model(ids).last_hidden_state  # [b, s, d]

            outputs = {}
            for name, model in (("stock", stock), ("posenc", patched)):
                if progress:
                    progress(f"transformers Llama s={length} {base['dtype']}: first {name} forward")
                start = time.perf_counter()
                outputs[name] = forward(model)
                synchronize(device)
                rows.append({**base, "case": f"{name} first forward", "kind": "one-time"})
                rows[-1]["seconds"] = time.perf_counter() - start
            diff = float((outputs["posenc"].double() - outputs["stock"].double()).abs().max())
            if progress:
                progress(f"transformers Llama s={length} {base['dtype']}: posenc and stock forwards, alternating")
            paired = measure_paired_many(
                {"posenc": lambda model=patched: forward(model)},
                lambda model=stock: forward(model),
                num_threads=num_threads,
                min_run_time=min_run_time,
            )["posenc"]
            for name, m, ratio, best in (
                ("stock", paired.floor, 1.0, 1.0),
                ("posenc", paired.case, paired.x_floor, paired.x_floor_best),
            ):
                rows.append(
                    {
                        **base,
                        "case": name,
                        "kind": "steady",
                        "median_ms": m.median_s * 1e3,
                        "iqr_ms": m.iqr_s * 1e3,
                        "runs": m.runs,
                        "x_stock": ratio,
                        "x_stock_best": best,
                        "rounds": paired.rounds,
                        "max_abs_diff": 0.0 if name == "stock" else diff,
                        "other_cpu": m.other_cpu,
                        "num_threads": num_threads,
                    }
                )
            handle.remove()
            del stock, patched, outputs
    return rows
