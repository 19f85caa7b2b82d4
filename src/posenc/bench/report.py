"""Run the benchmark sections and shape their rows for the terminal and for JSON."""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Callable, Iterable, Sequence

import torch

__all__ = ["run", "format_rows", "SECTIONS", "summary_columns"]

SECTIONS = ("rope", "bias", "attention", "flex", "training")

#: sizes of the full run and of ``--quick`` (the harness checked end to end in seconds)
FULL = {"rope_lengths": (512, 2048, 8192), "bias_lengths": (2048,), "attention_L": 2048, "flex_L": 16384,
        "min_run_time": 0.5}
QUICK = {"rope_lengths": (512,), "bias_lengths": (512,), "attention_L": 256, "flex_L": 1024, "min_run_time": 0.05}


def run(
    *,
    quick: bool = False,
    sections: Iterable[str] = SECTIONS,
    num_threads: int = 1,
    rope_lengths: Sequence[int] | None = None,
    dtypes: Sequence[torch.dtype] = (torch.float32, torch.bfloat16),
    peers: bool = True,
    progress: Callable[[str], None] | None = None,
) -> dict:
    """Every requested section, in this process (the flex section spawns one process per mode)."""
    from .bias import bench_attention, bench_bias, bench_flex_memory
    from .rope import bench_rope
    from .train import bench_training

    sections = list(sections)
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown bench sections {unknown}; choose from: {', '.join(SECTIONS)}")
    size = QUICK if quick else FULL
    torch.set_num_threads(num_threads)
    result: dict = {"meta": {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
        "cpus": os.cpu_count(), "num_threads": num_threads, "quick": quick,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }}
    timing = {"num_threads": num_threads, "min_run_time": size["min_run_time"], "progress": progress}
    if "rope" in sections:
        result["rope"] = bench_rope(rope_lengths or size["rope_lengths"], dtypes, peers=peers, **timing)
    if "bias" in sections:
        result["bias"] = bench_bias(size["bias_lengths"], peers=peers, **timing)
    if "attention" in sections:
        result["attention"] = bench_attention(L=size["attention_L"], **timing)
    if "flex" in sections:
        if progress:
            progress(f"flex vs sdpa at L={size['flex_L']} (subprocesses)")
        result["flex"] = bench_flex_memory(size["flex_L"], num_threads=num_threads)
    if "training" in sections:
        result["training"] = bench_training(num_threads=num_threads, min_run_time=size["min_run_time"] * 2,
                                            progress=progress)
    return result


def summary_columns(section: str) -> list[str]:
    """The columns shown in the terminal for a section's rows."""
    return {
        "rope": ["L", "dtype", "layout", "case", "median_ms", "gb_per_s", "x_floor", "other_cpu"],
        "bias": ["L", "heads", "case", "median_ms", "x_floor", "other_cpu"],
        "attention": ["L", "heads", "case", "median_ms", "x_none", "other_cpu"],
        "flex": ["L", "heads", "mode", "seconds", "peak_rss_mib", "first_call_s", "other_cpu", "error"],
        "training": ["case", "median_ms", "overhead_vs_none", "other_cpu"],
    }[section]


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def format_rows(rows: list[dict], columns: Sequence[str]) -> list[list[str]]:
    """Rows as strings, steady-state rows only; one-time costs are listed by :func:`one_time_rows`."""
    return [[_cell(row.get(c)) for c in columns] for row in rows if row.get("kind", "steady") == "steady"]


def one_time_rows(rows: list[dict]) -> list[list[str]]:
    return [[_cell(row.get(c)) for c in ("L", "dtype", "layout", "case", "seconds")]
            for row in rows if row.get("kind") == "one-time"]
