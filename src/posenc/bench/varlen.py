"""Packed (varlen) RoPE against the padded batch of the same documents.

Shape legend: ``n`` documents, ``total`` tokens of all documents, ``h`` heads, ``hd`` head width,
``S`` the longest document (the padded length).

The floor is the rotation of the padded batch ``[n, h, S, hd]`` with tables ``[S, hd]`` built
beforehand (what a padded model runs: :func:`posenc.kernels.rope`). The packed cases rotate the same
documents as ``[total, h, hd]`` (flash-attention's varlen layout) with positions restarting in each
document, everything a call needs done inside it:

* ``packed kernels.apply_rotary_emb``: flash-attention's signature, half-width tables
  ``[S, hd/2]``, ``cu_seqlens``; rows gathered per token, then one pass (``seq_dim=-3``);
* ``packed Rope.rotate_one``: the scheme on ``[total, h, hd]`` (``seq_dim=-3``) at
  :func:`~posenc.functional.positions_from_cu_seqlens`, its rows gathered from the row cache.
  (The same tokens as a transposed view ``[1, h, total, hd]`` cost about twice as much on the CPU:
  the rotation reads them across the grain.)

Two packings: ``equal`` (every document ``S`` long: the padded batch holds exactly the packed
tokens, the packed cases' worst case) and ``varied`` (lengths from ``S/16`` to ``S``: the padded
batch also rotates its padding). The target (issue 27) is ``x_padded <= 1.2``. The default sizes
keep each result under 32 MiB: glibc hands larger blocks back to the system on free, and every
call then pays for faulting its output's pages in, which would favour whichever case allocates less. Every packed result
is checked against the padded one on the real tokens before anything is timed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from .. import functional as F
from .. import kernels
from ..kernels.rotary import apply_rotary_emb
from ..schemes.rope import Rope, RopeConfig
from .timing import measure_paired_many

__all__ = ["bench_varlen", "packing_lengths", "TARGET_X_PADDED"]

#: What issue 27 asks of packed rotation: at most this many times the padded batch's time.
TARGET_X_PADDED = 1.2


def packing_lengths(packing: str, documents: int, longest: int) -> list[int]:
    """Document lengths: ``"equal"`` (all ``longest``) or ``"varied"`` (``longest / 16`` up to
    ``longest``, evenly spread, in a fixed shuffled order)."""
    if packing == "equal":
        return [longest] * documents
    if packing != "varied":
        raise ValueError(f"unknown packing {packing!r}; choose one of: 'equal', 'varied'")
    low = max(1, longest // 16)
    lengths = torch.linspace(low, longest, documents).round().long().tolist()
    order = torch.randperm(documents, generator=torch.Generator().manual_seed(0)).tolist()
    return [lengths[i] for i in order]


def _cases(x_padded, x_packed, cu, lengths, layout, hd):
    """The floor (padded rotation), the packed cases, and a check of each packed result."""
    longest = x_padded.shape[2]
    rope = Rope(RopeConfig(dim=hd, layout=layout)).to(x_padded.device)
    cos, sin = rope.cos_sin(longest)  # [S, hd] float32, built beforehand as a padded model holds them
    half = (cos[:, : hd // 2], sin[:, : hd // 2]) if layout == "half" else (cos[:, ::2], sin[:, ::2])  # [S, hd/2]
    interleaved = layout == "interleaved"
    cases: dict[str, Callable[[], torch.Tensor]] = {
        "padded kernels.rope": lambda: kernels.rope(x_padded, cos, sin, layout=layout),
        "packed kernels.apply_rotary_emb": lambda: apply_rotary_emb(
            x_packed, *half, interleaved, cu_seqlens=cu, max_seqlen=longest
        ),
        "packed Rope.rotate_one": lambda: rope.rotate_one(x_packed, F.positions_from_cu_seqlens(cu), seq_dim=-3),
    }
    with torch.no_grad():
        padded = cases["padded kernels.rope"]()  # [n, h, S, hd]
        want = torch.cat([padded[i, :, :n].transpose(0, 1) for i, n in enumerate(lengths)])  # [total, h, hd]
        errors = {
            "packed kernels.apply_rotary_emb": cases["packed kernels.apply_rotary_emb"](),
            "packed Rope.rotate_one": cases["packed Rope.rotate_one"](),
        }
        errors = {name: float((got.double() - want.double()).abs().max()) for name, got in errors.items()}
    for name, error in errors.items():
        limit = 1e-5 if x_padded.dtype in (torch.float32, torch.float64) else 2e-2
        if not error <= limit:
            raise RuntimeError(f"{name} differs from the padded rotation by {error:.3g}: not timing a wrong pass")
    return cases, errors


def bench_varlen(
    packings: Iterable[str] = ("equal", "varied"),
    dtypes: Iterable[torch.dtype] = (torch.float32, torch.bfloat16),
    layouts: Iterable[str] = ("half",),
    *,
    documents: int = 8,
    longest: int = 192,
    heads: int = 32,
    head_dim: int = 128,
    num_threads: int = 1,
    min_run_time: float = 0.5,
    device: torch.device | str = "cpu",
    progress: Callable[[str], None] | None = None,
) -> list[dict]:
    """One row per (packing, dtype, layout, case): median ms, and ``x_padded``, the median of the
    per-round ratios to the padded rotation timed in alternation with it
    (:func:`~posenc.bench.timing.measure_paired_many`; ``x_padded_best``: fastest round over
    fastest round), with the target :data:`TARGET_X_PADDED`, the largest difference from the
    padded result (``max_error``) and the load (``other_cpu``)."""
    rows: list[dict] = []
    for packing in packings:
        lengths = packing_lengths(packing, documents, longest)
        cu = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], device=device)  # [n + 1]
        total, S = sum(lengths), max(lengths)
        for dtype in dtypes:
            x_padded = torch.zeros(documents, heads, S, head_dim, device=device, dtype=dtype)  # [n, h, S, hd]
            for i, n in enumerate(lengths):
                x_padded[i, :, :n] = torch.randn(heads, n, head_dim, device=device).to(dtype)
            x_packed = torch.cat([x_padded[i, :, :n].transpose(0, 1) for i, n in enumerate(lengths)])  # [total, h, hd]
            for layout in layouts:
                base = {
                    "packing": packing,
                    "documents": documents,
                    "tokens": total,
                    "padded_tokens": documents * S,
                    "heads": heads,
                    "head_dim": head_dim,
                    "dtype": str(dtype).removeprefix("torch."),
                    "layout": layout,
                }
                if progress:
                    progress(f"varlen rope {packing} {base['dtype']} {layout}: {total} tokens in {documents} documents")
                cases, errors = _cases(x_padded, x_packed, cu, lengths, layout, head_dim)
                floor = cases.pop("padded kernels.rope")
                paired = measure_paired_many(cases, floor, num_threads=num_threads, min_run_time=min_run_time)
                first = next(iter(paired.values()))
                rows.append(
                    {
                        **base,
                        "case": "padded kernels.rope",
                        "kind": "steady",
                        "median_ms": first.floor.median_s * 1e3,
                        "x_padded": 1.0,
                        "other_cpu": first.floor.other_cpu,
                        "num_threads": num_threads,
                    }
                )
                for name, p in paired.items():
                    rows.append(
                        {
                            **base,
                            "case": name,
                            "kind": "steady",
                            "median_ms": p.case.median_s * 1e3,
                            "iqr_ms": p.case.iqr_s * 1e3,
                            "runs": p.case.runs,
                            "x_padded": p.x_floor,
                            "x_padded_best": p.x_floor_best,
                            "padded_ms_paired": p.floor.median_s * 1e3,
                            "target_x_padded": TARGET_X_PADDED,
                            "max_error": errors[name],
                            "other_cpu": p.case.other_cpu,
                            "num_threads": num_threads,
                        }
                    )
    return rows
