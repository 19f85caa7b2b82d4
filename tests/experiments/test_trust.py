"""Experiments you can trust: criteria, the learned flag, counts, paired statistics, schemes as
published, and provenance in every record."""

from __future__ import annotations

import json
import statistics

import pytest
import torch

from posenc.experiments import (
    ModelConfig,
    Settings,
    TinyTransformer,
    TrainConfig,
    get_task,
    plan,
    run_experiment,
    train,
)
from posenc.experiments.criteria import bigram_loss, learned, plateaued
from posenc.experiments.plots import _spread, summary_rows
from posenc.experiments.stats import (
    bootstrap_interval,
    paired_differences,
    range_value,
    scheme_counts,
    t_interval,
    verdict_words,
)


def _copy_record(scheme: str, seed: int, at_l: float, past: list[float], **extra) -> dict:
    """A copy record at L = 2 scored to 2L = 4: exact match ``at_l`` at n <= 2, ``past`` at n = 3, 4."""
    per_length = {"1": {"exact_match": at_l}, "2": {"exact_match": at_l}}
    per_length.update({str(3 + i): {"exact_match": v} for i, v in enumerate(past)})
    return {"experiment": "length", "task": "copy", "scheme": scheme, "variant": "default", "seed": seed,
            "train_length": 2, "metrics": {"per_length": per_length}, "in_distribution": at_l,
            "out_of_distribution": statistics.fmean(past), "summary_metric": "exact_match", "wall_time_s": 1.0,
            "final_train_loss": 0.1, **extra}  # fmt: skip


def _lm_record(scheme: str, seed: int, inside: float, past: float, learned_flag: bool = True) -> dict:
    """An LM record at L = 2 scored to 8L = 16 positions."""
    losses = [inside, inside] + [past] * 14
    return {"experiment": "byte-lm", "task": "fortunes", "scheme": scheme, "variant": "default", "seed": seed,
            "train_length": 2, "metrics": {"loss_per_position": losses, "eval_length": 16},
            "in_distribution": inside, "out_of_distribution": past, "summary_metric": "loss", "wall_time_s": 1.0,
            "final_train_loss": inside, "learned": learned_flag}  # fmt: skip


def test_plateau_compares_two_windows() -> None:
    """Flat within the tolerance is a plateau; a 10 % drop is not; too few steps and NaN never are."""
    assert plateaued([2.0] * 4 + [1.99] * 4, window=4, tolerance=0.01)
    assert not plateaued([2.0] * 4 + [1.8] * 4, window=4, tolerance=0.01)
    assert not plateaued([2.0] * 7, window=4, tolerance=0.01)
    assert not plateaued([2.0] * 4 + [float("nan")] * 4, window=4, tolerance=0.01)


def test_learned_copy_is_exact_match_at_the_training_length() -> None:
    """Copy learned means exact match >= 0.95 at n = L, not the mean over 1..L (which hid failures)."""
    task, config = get_task("copy"), TrainConfig(max_length=2)
    good = {"1": {"exact_match": 0.5}, "2": {"exact_match": 0.96}}
    bad = {"1": {"exact_match": 1.0}, "2": {"exact_match": 0.90}}
    assert learned(task, config, [0.1], good, 0.73)
    assert not learned(task, config, [0.1], bad, 0.95)
    assert not learned(task, config, [float("nan")], good, 0.73)  # diverged


def test_learned_lm_beats_the_bigram_model() -> None:
    """A byte LM learned when its loss below L beats the corpus's bigram model (2.3 nats/byte on
    pydoc_data.topics: between a byte-frequency model, 3.26, and what the models here reach, ~1.3)."""
    task = get_task("text")
    baseline = bigram_loss("text")
    assert 2.0 < baseline < 2.6
    assert learned(task, TrainConfig(), [1.0], None, baseline - 0.01)
    assert not learned(task, TrainConfig(), [1.0], None, baseline + 0.01)
    assert not learned(task, TrainConfig(), [1.0], None, None)


def test_training_stops_at_the_criterion_and_resumes_stopped(tmp_path) -> None:
    """Exact match >= target at L stops training at a check; a checkpoint taken there resumes as
    met (no more steps), so a killed run repeats the uninterrupted one."""
    task = get_task("copy")
    model = ModelConfig(vocab_size=task.vocab_size, scheme="alibi", max_len=10)
    config = TrainConfig(steps=400, max_length=3, criterion="exact_match", target=0.5, check_every=50)
    first = train(model, task, config, checkpoint=tmp_path / "c.pt")
    assert first.criterion_met_at is not None and first.criterion_met_at % 50 == 0
    assert len(first.losses) == first.criterion_met_at < 400
    again = train(model, task, config, checkpoint=tmp_path / "c.pt")
    assert again.losses == first.losses and again.criterion_met_at == first.criterion_met_at


@pytest.mark.parametrize(
    ("criterion", "target", "every", "match"),
    [("plateau", None, 5, "target"), ("nope", 0.5, 5, "criterion"), ("plateau", 0.1, 0, "check_every")],
)
def test_criterion_settings_are_checked(criterion, target, every, match) -> None:
    with pytest.raises(ValueError, match=match):
        TrainConfig(criterion=criterion, target=target, check_every=every)


def test_spread_counts_missing_values() -> None:
    """A seed without a value (diverged, unavailable) is counted, not dropped silently."""
    mean, half, missing = _spread([1.0, None, 3.0])
    assert mean == 2.0 and missing == 1 and half > 0
    assert _spread([None, None]) == (None, None, 2)


def test_counts_say_did_not_learn_and_flag_missing_and_diverged_seeds() -> None:
    records = [
        _copy_record("alibi", 0, 1.0, [0.9, 0.7]),
        _copy_record("alibi", 1, 1.0, [0.2, 0.0]),
        _copy_record("alibi", 2, 0.5, [0.0, 0.0], final_train_loss=float("nan")),
        _copy_record("none", 0, 0.3, [0.0, 0.0]),
        _copy_record("none", 1, 0.6, [0.0, 0.0]),
    ]
    counts = scheme_counts(records)
    alibi, none = counts[("length", "copy", "alibi", "default")], counts[("length", "copy", "none", "default")]
    assert (alibi["learned"], alibi["generalised"], alibi["diverged"], alibi["status"]) == (2, 1, 1, "")
    assert (none["learned"], none["status"], none["missing"]) == (0, "did not learn", [2])
    rows = {r["scheme"]: r for r in summary_rows(records)}
    assert rows["none"]["out_of_distribution"] is None and rows["none"]["status"] == "did not learn"
    assert rows["alibi"]["out_of_distribution"] == pytest.approx((0.8 + 0.1) / 2)  # learned seeds only
    assert rows["alibi"]["ood_seeds"] == 2


def test_range_values_per_multiple_of_l() -> None:
    r = _lm_record("rope", 0, 1.0, 2.0)
    r["metrics"]["loss_per_position"][2:4] = [3.0, 3.0]  # positions [L, 2L)
    assert range_value(r, 2) == 3.0
    assert range_value(r, 4) == pytest.approx((3.0 * 2 + 2.0 * 4) / 6)
    assert range_value(r, 16) is None  # not scored that far
    copy = _copy_record("rope", 0, 1.0, [0.5, 0.25])
    assert range_value(copy, 2) == pytest.approx(0.375) and range_value(copy, 4) is None


def test_intervals() -> None:
    """t: mean ± t(n-1) sd / sqrt(n); bootstrap: percentile, repeatable, inside [min, max]."""
    low, high = t_interval([1.0, 2.0, 3.0])
    assert (low + high) / 2 == pytest.approx(2.0) and high - 2.0 == pytest.approx(4.303 / 3**0.5)
    values = [0.0, 0.2, 0.4, 0.2, 0.1]
    assert bootstrap_interval(values) == bootstrap_interval(values)
    low, high = bootstrap_interval(values)
    assert 0.0 <= low < statistics.fmean(values) < high <= 0.4
    assert bootstrap_interval([1.0] * 5) == (1.0, 1.0)


def test_words_follow_the_interval() -> None:
    assert verdict_words(-0.2, 0.1, lower_is_better=True) == "no difference detected"
    assert verdict_words(-0.2, -0.1, lower_is_better=True) == "better"
    assert verdict_words(-0.2, -0.1, lower_is_better=False) == "worse"
    assert verdict_words(0.1, 0.2, lower_is_better=False) == "better"


def test_paired_differences_use_learned_pairs_only() -> None:
    """Per seed scheme - baseline over seeds where both learned; ranges the evaluation reaches."""
    records = [
        *(_lm_record("rope", s, 1.0, 3.0 + 0.1 * s) for s in range(3)),
        *(_lm_record("alibi", s, 1.0, 2.0 + 0.05 * s) for s in range(3)),
        _lm_record("none", 0, 1.0, 2.5),
        _lm_record("none", 1, 1.0, 2.5, learned_flag=False),
    ]
    rows = {(r["scheme"], r["range"]): r for r in paired_differences(records, "rope")}
    assert {key[1] for key in rows} == {"within L", "1-2x", "1-4x", "1-8x"}
    assert rows[("none", "within L")]["pairs"] == 2  # within L every seed counts
    alibi = rows[("alibi", "1-8x")]
    assert alibi["pairs"] == 3 and alibi["method"] == "t"
    assert alibi["mean"] == pytest.approx(statistics.fmean([-1.0, -1.05, -1.1]))
    assert alibi["words"] == "better" and alibi["high"] < 0
    none = rows[("none", "1-2x")]
    assert none["pairs"] == 1 and none["words"] == "too few paired learned seeds"
    assert "seed 1: not learned" in none["excluded"] and "seed 2: missing" in none["excluded"]


def test_add_vs_concat_pairs_each_scheme_concatenated_with_itself_added() -> None:
    """add-vs-concat's comparison is a variant against a variant of the same scheme, seed by seed:
    concat - add per seed (here 0.1, 0.2, 0.3 below), not one scheme against another."""

    def record(scheme: str, variant: str, seed: int, inside: float) -> dict:
        return _lm_record(scheme, seed, inside, inside) | {"experiment": "add-vs-concat", "task": "text",
                                                            "variant": variant}  # fmt: skip

    records = [record(n, "add", s, 2.0 + s) for n in ("sinusoidal", "learned") for s in range(3)]
    records += [record("sinusoidal", "concat", s, 2.0 + s - 0.1 * (s + 1)) for s in range(3)]
    rows = [r for r in paired_differences(records) if r["baseline"] == "sinusoidal (add)"]
    within = next(r for r in rows if r["range"] == "within L")
    assert within["variant"] == "concat" and within["scheme"] == "sinusoidal" and within["pairs"] == 3
    assert within["mean"] == pytest.approx(-0.2) and within["method"] == "t"
    assert within["low"] == pytest.approx(-0.2 - 4.303 * 0.1 / 3**0.5)
    assert not any(r["baseline"] == "learned (add)" for r in paired_differences(records))  # no concat run of it


def test_copy_differences_are_bootstrapped() -> None:
    records = [_copy_record("rope", s, 1.0, [0.0, 0.0]) for s in range(5)]
    records += [_copy_record("alibi", s, 1.0, [0.9, 0.5 + 0.1 * s]) for s in range(5)]
    within, row = paired_differences(records, "rope")
    assert within["range"] == "within L" and within["mean"] == 0.0 and within["words"] == "no difference detected"
    assert row["method"] == "bootstrap" and row["pairs"] == 5 and row["words"] == "better"
    assert row["range"] == "1-2x"


def test_published_settings_per_layer() -> None:
    """FIRE's threshold starts at L and forgetting's gate bias at 0 with N(0, 0.02) weights, each
    layer with its own module; ALiBi stays one shared module."""
    jobs = {j.scheme: j for j in plan("byte-lm", Settings(seeds=(0,)))}
    fire, forgetting, alibi = jobs["fire"], jobs["forgetting"], jobs["alibi"]
    assert fire.model.scheme_options == {"init_L": 128.0} and fire.model.per_layer
    assert forgetting.model.scheme_options == {"bias_init": 0.0, "weight_std": 0.02} and forgetting.model.per_layer
    assert not alibi.model.per_layer and fire.model.num_layers == 4 and fire.train.max_length == 128
    torch.manual_seed(0)
    model = TinyTransformer(forgetting.model)
    gates = [block.attn.encoding for block in model.blocks]
    assert len({id(g) for g in gates}) == 4
    for gate in gates:
        assert torch.all(gate.forget_gates.bias == 0)
        assert 0.01 < float(gate.forget_gates.weight.detach().std()) < 0.03
    shared = TinyTransformer(alibi.model)
    assert len({id(b.attn.encoding) for b in shared.blocks}) == 1
    assert float(TinyTransformer(fire.model).blocks[0].attn.encoding.threshold().detach()) == 128.0


def test_per_layer_refuses_absolute_schemes() -> None:
    with pytest.raises(ValueError, match="absolute"):
        ModelConfig(vocab_size=10, scheme="sinusoidal", per_layer=True)
    with pytest.raises(TypeError, match="per_layer"):
        ModelConfig(vocab_size=10, scheme="rope", per_layer=1)


def test_records_carry_learned_and_provenance(tmp_path) -> None:
    """The runner writes the learned flag, its rule, the steps trained and the provenance: the
    command, Python, torch, posenc (with its commit) and the corpus's hash."""
    run_experiment(
        "byte-lm",
        tmp_path,
        Settings(schemes=("forgetting",), seeds=(0,), steps=3, quick=True, tasks=("text",)),
        command="posenc x",
    )
    (record,) = json.loads((tmp_path / "results.json").read_text())["records"]
    assert record["learned"] is False and record["steps_trained"] == 3 and record["diverged"] is False
    assert "bigram" in record["learned_rule"]
    origin = record["provenance"]
    assert origin["command"] == "posenc x" and origin["torch"] == torch.__version__
    assert origin["corpus"]["name"] == "text" and len(origin["corpus"]["sha256"]) == 64
    assert set(origin) >= {"python", "posenc", "posenc_commit"}
    from posenc.experiments.runner import load_layer_encodings

    (path,) = (tmp_path / "encodings").glob("*.pt")
    layers = load_layer_encodings(path)
    assert len(layers) == 4 and len({id(e) for e in layers}) == 4


def test_forgetting_weight_std_is_checked() -> None:
    from posenc.schemes.base import create

    with pytest.raises(ValueError, match="weight_std"):
        create("forgetting", dim=8, num_heads=2, weight_std=-1.0)


@pytest.mark.parametrize("name", ["length", "byte-lm", "learned-vs-sinusoidal", "add-vs-concat", "probe", "extend"])
def test_help_names_each_experiments_tasks_and_schemes(name) -> None:
    """``posenc experiment --help`` says, per experiment, the tasks and schemes its plan trains."""
    from posenc.cli.experiment import EXPERIMENT_HELP

    words = EXPERIMENT_HELP[name]
    jobs = plan(name, Settings())
    for task in {j.task.name for j in jobs}:
        assert task in words, (name, task)
    for scheme in {j.scheme for j in jobs}:
        assert scheme in words, (name, scheme)
    assert f"{jobs[0].model.num_layers}-layer" in words or name in ("learned-vs-sinusoidal", "add-vs-concat", "extend")


def test_the_atlas_shows_the_counts_and_paired_differences_of_the_docs(tmp_path) -> None:
    """The atlas's results section gives the learned/generalised counts and the paired differences
    against RoPE and ALiBi that docs/experiments.md prints, from the same functions."""
    from posenc.report.results import results_section

    records = [_lm_record(s, seed, 1.0, 2.0 + 0.1 * seed + (1.0 if s == "rope" else 0.0)) for s in ("rope", "alibi", "kerple") for seed in range(3)]  # fmt: skip
    (tmp_path / "results.json").write_text(json.dumps({"schema": 1, "records": records}))
    html, shown, problems = results_section(tmp_path)
    assert shown == 9 and not problems
    assert "3/3" in html and "Paired differences per seed" in html
    assert ">alibi</td><td>rope</td><td>1-2x</td><td>3</td><td>-1.000 [-1.000, -1.000]" in html.replace("\n", "")
    assert ">kerple</td><td>alibi</td>" in html.replace("\n", "")
