"""Counts and paired comparisons over seeds: what the tables of ``docs/experiments.md``, the CLI
and the atlas print.

* Per scheme: how many seeds ran, learned the task (the record's ``learned``), generalised, diverged,
  and which seeds are missing against the other schemes of the same experiment and task.
* Paired differences: every scheme of one seed sees the same batches and evaluation windows, so
  ``scheme - baseline`` per seed is the sharp test. Within the training length ``L`` (``within L``:
  lengths ``n <= L``, positions ``[0, L)``) every seed counts; past it (``1-2x``: lengths or
  positions in ``(L, 2L]`` / ``[L, 2L)``; ``1-4x``; ``1-8x``, as far as the evaluation reaches)
  only the seeds where both runs learned. Each has a 95 % interval: Student's t for losses, a
  percentile bootstrap over seeds for exact match (a score bounded by 0 and 1 whose per-seed
  values are often 0 or 1, where t-intervals mislead; from 4 pairs on). The words follow the
  interval: one that holds 0 is "no difference detected".

Generalised: a learned sequence-task seed whose exact match past ``L`` (mean over ``L < n <= 2L``)
is at least 0.5; a learned language model whose loss over ``[L, 4L)`` (or as far as it was
scored) is within 5 % of its loss over ``[0, L)``.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from typing import Any

__all__ = [
    "RANGES",
    "record_learned",
    "range_value",
    "generalised",
    "scheme_counts",
    "paired_differences",
    "verdict_words",
    "bootstrap_interval",
    "t_interval",
    "default_baseline",
    "VARIANT_BASELINES",
]

#: (label, factor): factor 1 is within the training length (every seed counts there), k past it
RANGES = (("within L", 1), ("1-2x", 2), ("1-4x", 4), ("1-8x", 8))
GENERALISED_EXACT_MATCH = 0.5
GENERALISED_LOSS_RATIO = 1.05
BOOTSTRAP_RESAMPLES = 10_000
#: fewest paired seeds a bootstrap interval is given for (with 2 or 3 values it has only a handful
#: of distinct resamples and says nothing)
MIN_BOOTSTRAP_PAIRS = 4
_BOOTSTRAP_SEED = 20261128

#: two-sided 97.5 % quantiles of Student's t for 1 .. 10 degrees of freedom (any statistics table)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_lm(record: dict[str, Any]) -> bool:
    return isinstance(record.get("metrics"), dict) and "loss_per_position" in record["metrics"]


def record_learned(record: dict[str, Any]) -> bool | None:
    """The record's ``learned``; for records made before the flag, sequence tasks are judged by the
    same rule (exact match >= 0.95 at ``L``), and language models (and records without a score at
    ``L``) are unknown (None)."""
    if isinstance(record.get("learned"), bool):
        return record["learned"]
    per_length = (record.get("metrics") or {}).get("per_length")
    at_l = per_length.get(str(record.get("train_length"))) if isinstance(per_length, dict) else None
    if isinstance(at_l, dict) and _finite(at_l.get("exact_match")):  # else: no score at L, unknown
        return at_l["exact_match"] >= 0.95
    return None


def range_value(record: dict[str, Any], factor: int) -> float | None:
    """The record's mean past ``L`` up to ``factor * L``: exact match over lengths ``L < n <=
    factor L``, or loss over positions ``[L, factor L)``; ``factor`` 1: within ``L`` (lengths
    ``n <= L``, positions ``[0, L)``). None when the evaluation stops short or a value is missing."""
    L = record.get("train_length")
    metrics = record.get("metrics") or {}
    if not isinstance(L, int) or not isinstance(metrics, dict):
        return None
    start = 0 if factor == 1 else L  # factor 1: within L
    if _is_lm(record):
        losses = metrics["loss_per_position"]
        if not isinstance(losses, list) or len(losses) < factor * L:
            return None
        part = losses[start : factor * L]
        return statistics.fmean(part) if part and all(_finite(v) for v in part) else None
    per_length = metrics.get("per_length")
    if not isinstance(per_length, dict) or str(factor * L) not in per_length:
        return None
    lengths = [int(n) for n in per_length if int(n) <= L] if factor == 1 else range(L + 1, factor * L + 1)
    values = [per_length.get(str(n), {}).get("exact_match") for n in lengths]
    return statistics.fmean(values) if values and all(_finite(v) for v in values) else None


def _in_distribution_loss(record: dict[str, Any]) -> float | None:
    losses = (record.get("metrics") or {}).get("loss_per_position")
    L = record.get("train_length")
    if not isinstance(losses, list) or not isinstance(L, int):
        return None
    part = losses[:L]
    return statistics.fmean(part) if part and all(_finite(v) for v in part) else None


def generalised(record: dict[str, Any]) -> bool:
    """Whether a learned seed kept its quality past ``L`` (see the module's docstring)."""
    if not record_learned(record):
        return False
    if _is_lm(record):
        inside = _in_distribution_loss(record)
        past = next((v for f in (4, 2) if (v := range_value(record, f)) is not None), None)
        return inside is not None and past is not None and past <= GENERALISED_LOSS_RATIO * inside
    past = range_value(record, 2)
    return past is not None and past >= GENERALISED_EXACT_MATCH


def _group(records: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[(r["experiment"], r["task"], r["scheme"], r["variant"])].append(r)
    return groups


def scheme_counts(records: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    """Per (experiment, task, scheme, variant): ``seeds``, ``learned``, ``generalised``,
    ``learned_unknown`` (records older than the flag), ``diverged``, ``missing`` (seeds other
    schemes of that experiment and task have and this one lacks), ``null_in``/``null_out``
    (seeds with no in/out-of-distribution value) and ``status``: ``"did not learn"`` when no seed
    learned."""
    groups = _group(records)
    seeds_of_task: dict[tuple[str, str], set[int]] = defaultdict(set)
    for (experiment, task, _, _), rs in groups.items():
        seeds_of_task[(experiment, task)].update(r["seed"] for r in rs)
    out = {}
    for key, rs in groups.items():
        flags = [record_learned(r) for r in rs]
        learned = sum(f is True for f in flags)
        unknown = sum(f is None for f in flags)
        out[key] = {
            "seeds": len(rs),
            "learned": learned,
            "learned_unknown": unknown,
            "generalised": sum(generalised(r) for r in rs),
            "diverged": sum(_diverged(r) for r in rs),
            "missing": sorted(seeds_of_task[key[:2]] - {r["seed"] for r in rs}),
            "null_in": sum(r.get("in_distribution") is None for r in rs),
            "null_out": sum(r.get("out_of_distribution") is None for r in rs),
            "status": "did not learn" if learned == 0 and unknown == 0 else "",
        }
    return out


def count_flags(count: dict[str, Any]) -> str:
    """What a summary must not hide, from a :func:`scheme_counts` entry: missing and diverged seeds,
    and seeds without an in-distribution value ("" when there is nothing to flag)."""
    flags = []
    if count["missing"]:
        flags.append("missing seed " + ", ".join(map(str, count["missing"])))
    if count["diverged"]:
        flags.append(f"{count['diverged']} diverged")
    if count["null_in"]:
        flags.append(f"{count['null_in']} without an in-distribution value")
    return "; ".join(flags)


def _diverged(record: dict[str, Any]) -> bool:
    """The record says so, or its final training loss is not a finite number."""
    value = record.get("final_train_loss")
    return record.get("diverged") is True or (value is not None and not _finite(value))


def t_interval(values: list[float]) -> tuple[float, float]:
    """95 % interval of the mean (Student's t, ``n - 1`` degrees of freedom); needs 2 values."""
    n = len(values)
    mean = statistics.fmean(values)
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    half = t * statistics.stdev(values) / math.sqrt(n)
    return mean - half, mean + half


def bootstrap_interval(values: list[float], resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """95 % percentile bootstrap interval of the mean over seeds (resampled with replacement from a
    generator of fixed seed, so the interval repeats exactly)."""
    rng = random.Random(_BOOTSTRAP_SEED)
    n = len(values)
    means = sorted(statistics.fmean(rng.choices(values, k=n)) for _ in range(resamples))
    return means[int(0.025 * resamples)], means[min(resamples - 1, int(0.975 * resamples))]


def verdict_words(low: float, high: float, lower_is_better: bool) -> str:
    """ "better" / "worse" than the baseline when the interval excludes 0, else "no difference detected"."""
    if low <= 0 <= high:
        return "no difference detected"
    below = high < 0
    return "better" if below == lower_is_better else "worse"


#: Experiments whose variants are the comparison: each other variant of a scheme is paired, seed by
#: seed, with this variant of the same scheme (add-vs-concat: concatenating against adding).
VARIANT_BASELINES = {"add-vs-concat": "add"}


def default_baseline(schemes: list[str]) -> str | None:
    """``rope`` when it ran, else the first scheme."""
    return "rope" if "rope" in schemes else (schemes[0] if schemes else None)


def paired_differences(records: list[dict[str, Any]], baseline: str | None = None) -> list[dict[str, Any]]:
    """One row per (experiment, task, variant, scheme != baseline, range): ``mean`` of the per-seed
    differences ``scheme - baseline`` over the seeds where both learned (and, for the experiments of
    :data:`VARIANT_BASELINES`, of each variant against the baseline variant of the same scheme,
    whose ``baseline`` reads ``"sinusoidal (add)"``), its 95 % interval
    (``low``, ``high``; ``method`` "t" or "bootstrap"), ``pairs`` (how many), ``words``, and
    ``excluded`` (seeds left out: not learned by one of the two, missing, or without a value)."""
    rows = []
    by_task: dict[tuple[str, str, str], dict[str, dict[int, dict[str, Any]]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        by_task[(r["experiment"], r["task"], r["variant"])][r["scheme"]][r["seed"]] = r
    for (experiment, task, variant), schemes in sorted(by_task.items()):
        base = baseline if baseline in schemes else default_baseline(sorted(schemes))
        if base is None:
            continue
        for scheme in sorted(schemes):
            if scheme != base:
                rows += _pair_rows((experiment, task, variant, scheme, base), schemes[scheme], schemes[base])
    for (experiment, task, variant), schemes in sorted(by_task.items()):  # variant against variant
        base_variant = VARIANT_BASELINES.get(experiment)
        if base_variant is None or variant == base_variant:
            continue
        others = by_task.get((experiment, task, base_variant), {})
        for scheme in sorted(set(schemes) & set(others)):
            key = (experiment, task, variant, scheme, f"{scheme} ({base_variant})")
            rows += _pair_rows(key, schemes[scheme], others[scheme])
    return rows


def _pair_rows(
    key: tuple[str, str, str, str, str], runs: dict[int, dict[str, Any]], base: dict[int, dict[str, Any]]
) -> list[dict[str, Any]]:
    """The rows of one comparison (``key``: experiment, task, variant, scheme, baseline label), one
    per range the evaluation reaches."""
    rows = []
    for label, factor in RANGES:
        row = _pair_row(runs, base, factor)
        if row is not None:
            rows.append(
                dict(zip(("experiment", "task", "variant", "scheme", "baseline"), key)) | {"range": label} | row
            )
    return rows


def _pair_row(runs: dict[int, dict[str, Any]], base: dict[int, dict[str, Any]], factor: int) -> dict[str, Any] | None:
    reachable = [r for r in (*runs.values(), *base.values()) if range_value(r, factor) is not None]
    if not reachable:  # the evaluation never reaches factor * L: no row for this range
        return None
    lm = _is_lm(reachable[0])
    diffs, excluded = [], []
    for seed in sorted(set(runs) | set(base)):
        a, b = runs.get(seed), base.get(seed)
        if a is None or b is None:
            excluded.append(f"seed {seed}: missing")
            continue
        if factor > 1 and (record_learned(a) is False or record_learned(b) is False):  # past L: learned only
            excluded.append(f"seed {seed}: not learned")
            continue
        va, vb = range_value(a, factor), range_value(b, factor)
        if va is None or vb is None:
            excluded.append(f"seed {seed}: no value")
            continue
        diffs.append(va - vb)
    row: dict[str, Any] = {"pairs": len(diffs), "excluded": excluded, "metric": "loss" if lm else "exact_match"}
    if len(diffs) < (2 if lm else MIN_BOOTSTRAP_PAIRS):
        return row | {"mean": statistics.fmean(diffs) if diffs else None, "low": None, "high": None, "method": None,
                      "words": "too few paired learned seeds"}  # fmt: skip
    low, high = t_interval(diffs) if lm else bootstrap_interval(diffs)
    return row | {
        "mean": statistics.fmean(diffs),
        "low": low,
        "high": high,
        "method": "t" if lm else "bootstrap",
        "words": verdict_words(low, high, lower_is_better=lm),
    }
