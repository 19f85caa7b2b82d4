"""posenc.report.results: the summary rows of experiment records."""

from __future__ import annotations

from posenc.report.results import _summary_rows


def _record(variant: str, ood: float | None) -> dict:
    return {"experiment": "extend", "task": "text", "scheme": "rope", "variant": variant, "seed": 0,
            "in_distribution": 1.0, "out_of_distribution": ood, "summary_metric": "loss"}


def test_summary_mean_is_over_the_values_present() -> None:
    """The summary mean divides by the number of runs that have a value: a run without an
    out-of-distribution value (a table too short) does not count as a zero."""
    (row,) = _summary_rows([_record("default", 0.2), {**_record("default", None), "seed": 1}])
    assert row[6] == "0.200"


def test_summary_rows_keep_variants_apart() -> None:
    """Variants are separate rows of the summary: extend's default and yarn scalings of one model
    are different results, not seeds of one."""
    rows = _summary_rows([_record("default", 0.2), _record("yarn", 0.3)])
    assert len(rows) == 2
    assert {row[2] for row in rows} == {"default", "yarn"}
