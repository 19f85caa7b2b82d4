"""posenc.report.trained and the atlas's bias figures after training (``posenc report --results``).

Pinned: the trained figure draws the loaded encoding's bias, KERPLE's ``-r1·log(1 + r2·d)`` with
the trained r1, r2 (Chi et al. 2022, §4.2); a runs folder without encodings draws initialisation
only and says so.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("matplotlib")

import posenc  # noqa: E402
from posenc.analysis.bias import bias_at_query  # noqa: E402
from posenc.experiments.runner import load_encoding, save_encoding  # noqa: E402
from posenc.report import build_report  # noqa: E402
from posenc.report.trained import find_encodings, trained_bias_figures  # noqa: E402


def _kerple(r1: list[float], r2: list[float]) -> posenc.PositionalEncoding:
    module = posenc.create("kerple", num_heads=len(r1))
    with torch.no_grad():  # log variant: bias_p is r1, bias_a is r2 (GPT-NeoX's names)
        module.bias_p.copy_(torch.tensor(r1))
        module.bias_a.copy_(torch.tensor(r2))
    return module


def _runs(tmp_path: Path) -> Path:
    runs = tmp_path / "runs"
    save_encoding(_kerple([0.5, 1.0, 2.0], [0.1, 0.2, 0.4]), runs / "encodings" / "length__copy__kerple__seed0.pt")
    save_encoding(_kerple([0.3, 0.6, 0.9], [1.0, 1.0, 1.0]), runs / "encodings" / "length__copy__kerple__seed1.pt")
    save_encoding(posenc.create("alibi", num_heads=4), runs / "encodings" / "length__copy__alibi_randomized__seed0.pt")
    return runs


def _lines(figure, width: float) -> list:
    return [line for ax in figure.axes for line in ax.get_lines() if line.get_linewidth() == width]


def test_find_encodings_reads_the_runner_names(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    (runs / "encodings" / "notes.pt").write_bytes(b"not a run")
    found, problems = find_encodings(runs)
    assert sorted(found) == ["alibi", "kerple"]
    assert [(r.group, r.seed) for r in found["kerple"]] == [("length/copy", 0), ("length/copy", 1)]
    assert found["alibi"][0].group == "length/copy +randomized"
    assert len(problems) == 1 and "notes.pt" in problems[0]
    assert find_encodings(tmp_path / "nowhere") == ({}, [])


def test_find_encodings_reads_a_folder_of_records(tmp_path: Path) -> None:
    """A folder holding one runs folder per experiment (as docs/experiments does): every runs
    folder's encodings are found, each group named with its folder, so that two reruns of one
    experiment stay apart."""
    records = tmp_path / "records"
    for name in ("length-2026-11-26", "length-2026-11-28"):
        _runs(records / name)  # each writes records/NAME/runs/encodings: one level too deep
        (records / name / "runs").rename(records / name / "moved")
        (records / name / "moved" / "encodings").rename(records / name / "encodings")
    found, problems = find_encodings(records)
    assert problems == []
    groups = [(r.group, r.seed) for r in found["kerple"]]
    assert groups == [
        ("length-2026-11-26: length/copy", 0),
        ("length-2026-11-26: length/copy", 1),
        ("length-2026-11-28: length/copy", 0),
        ("length-2026-11-28: length/copy", 1),
    ]
    assert found["kerple"][0].file == "length-2026-11-26/encodings/length__copy__kerple__seed0.pt"


def test_the_shipped_records_are_found() -> None:
    """Run from a clone, the atlas finds the repository's records: trained biases of the length
    experiment, the learned table and Shaw's embeddings among them."""
    from posenc.report.atlas import shipped_records

    records = shipped_records()
    assert records is not None and records.name == "experiments" and records.parent.name == "docs"
    found, problems = find_encodings(records)
    assert problems == [] and {"alibi", "t5", "kerple", "learned", "shaw", "fire", "cope"} <= set(found)


def test_trained_figure_draws_the_loaded_encodings_bias(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    found, _ = find_encodings(runs)
    ((figure, caption),), problems = trained_bias_figures("kerple", found["kerple"], length=64)
    assert problems == [] and "length/copy" in caption and "seeds 0, 1" in caption
    d = torch.arange(64, dtype=torch.float64)
    bold = _lines(figure, 1.6)  # seed 0, one line per head
    for line, r1, r2 in zip(bold, (0.5, 1.0, 2.0), (0.1, 0.2, 0.4)):
        assert torch.allclose(torch.as_tensor(line.get_ydata()), -r1 * torch.log1p(r2 * d), atol=1e-5)
    thin = _lines(figure, 0.7)  # seed 1
    loaded = bias_at_query(load_encoding(runs / "encodings" / "length__copy__kerple__seed1.pt"), 63)
    assert len(thin) == 3 and all(torch.allclose(torch.as_tensor(t.get_ydata()), v) for t, v in zip(thin, loaded))


def test_a_broken_encoding_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    (runs / "encodings" / "length__copy__kerple__seed2.pt").write_bytes(b"garbage")
    found, _ = find_encodings(runs)
    figures, problems = trained_bias_figures("kerple", found["kerple"], length=16)
    assert len(figures) == 1 and len(problems) == 1 and "seed2.pt: cannot be drawn" in problems[0]
    _, problems = trained_bias_figures("alibi", found["kerple"], length=16)
    assert "holds a 'kerple' encoding, not 'alibi'" in problems[0]


def test_report_draws_trained_beside_init_or_says_why_not(tmp_path: Path) -> None:
    runs = _runs(tmp_path)
    summary = build_report(tmp_path / "with", results_dir=runs, schemes=["kerple"])
    page = summary.path.read_text(encoding="utf-8")
    assert summary.figures == 3 and "After training on length/copy, seeds 0, 1" in page  # init, trained, heatmap
    assert page.index("at initialisation (r1 ~ 2·U") < page.index("After training on length/copy")
    empty = tmp_path / "empty"
    empty.mkdir()
    summary = build_report(tmp_path / "without", results_dir=empty, schemes=["kerple"])
    page = summary.path.read_text(encoding="utf-8")
    assert summary.figures == 2 and "drawn at initialisation only" in page
    assert any("no trained encodings" in note for note in summary.notes)
    assert not any("encodings" in error for error in summary.errors)  # (the empty folder has no results.json)


@pytest.mark.parametrize("scheme", ["learned", "shaw"])
def test_trained_tables_are_drawn_beside_a_fresh_table(tmp_path, scheme):
    """A learned table (rows: positions) or Shaw's key embeddings (rows: clipped distances) after
    training: the figure holds the saved table itself beside the scheme's initialisation (one colour
    scale for both), and the cosine similarity of its rows."""
    from posenc.report.trained import TRAINED_AFTER, trained_table_figures

    module = posenc.create(scheme, dim=8, **({"max_len": 12} if scheme == "learned" else {}))
    table = module.table.weight if scheme == "learned" else module.key_embeddings.weight
    with torch.no_grad():
        table.copy_(torch.linspace(-1, 1, table.numel()).reshape(table.shape))  # "trained": a ramp
    save_encoding(module, tmp_path / "runs" / "encodings" / f"length__copy__{scheme}__seed3.pt")
    found, problems = find_encodings(tmp_path / "runs")
    assert not problems and TRAINED_AFTER[scheme] in ("heatmap", "logits")
    ((figure, caption),) = trained_table_figures(scheme, found[scheme])[0]
    images = [ax.get_images()[0].get_array() for ax in figure.axes if ax.get_images()]
    trained = images[1]  # top right: the table after training
    assert trained.shape == tuple(table.shape)
    torch.testing.assert_close(torch.as_tensor(trained.data), table.detach().double())
    assert images[0].shape == trained.shape and not torch.allclose(
        torch.as_tensor(images[0].data), torch.as_tensor(trained.data)
    )
    similarity = torch.as_tensor(images[3].data)  # bottom right: cosine similarity of the trained rows
    unit = torch.nn.functional.normalize(table.detach().double(), dim=-1)
    torch.testing.assert_close(similarity, unit @ unit.T)
    assert f"After training on length/copy, seed 3 (loaded from encodings/length__copy__{scheme}__seed3.pt)" in caption


def test_runs_of_a_layer_schedule_are_the_schemes_own(tmp_path):
    """``rope+nope4`` (every fourth layer NoPE) is saved as ``..__rope_nope4__seed0.pt``: a run of
    ``rope``, in a group of its own, not a file the atlas cannot place."""
    for spec in ("rope", "rope_nope4", "rope_randomized_nope4"):
        save_encoding(posenc.create("rope", dim=8), tmp_path / "runs" / "encodings" / f"length__copy__{spec}__seed0.pt")
    found, problems = find_encodings(tmp_path / "runs")
    assert not problems
    assert [r.group for r in found["rope"]] == ["length/copy", "length/copy +nope4", "length/copy +randomized +nope4"]


def test_captions_count_the_seeds_that_learned(tmp_path) -> None:
    """A trained figure's caption says which of its seeds learned the task (from results.json)."""
    import json

    from posenc.report.trained import _groups, _learned_note, find_encodings

    (tmp_path / "encodings").mkdir()
    records = []
    for seed, learned in ((0, True), (1, False)):
        (tmp_path / "encodings" / f"length__copy__alibi__seed{seed}.pt").write_bytes(b"")
        records.append({"experiment": "length", "task": "copy", "scheme": "alibi", "seed": seed, "learned": learned})
    (tmp_path / "results.json").write_text(json.dumps({"schema": 1, "records": records}))
    found, _ = find_encodings(tmp_path)
    (members,) = _groups(found["alibi"]).values()
    assert _learned_note(members) == " Seeds that learned the task: 0 of 2."
