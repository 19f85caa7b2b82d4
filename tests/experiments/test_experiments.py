"""The experiments on tiny settings: tasks, model, training with resume, metrics, results, plots.

Outcomes asserted are real ones: on word order a bidirectional model without an encoding is at
chance (both orders use the same words) while RoPE solves it; a linear probe finds no position in a
bidirectional model without an encoding (Haviv et al. 2022, section 4) and finds it in the input of
a sinusoidal one; a run stopped mid-way and resumed equals the uninterrupted run bit for bit.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import replace

import pytest
import torch

import posenc
from posenc.experiments import ModelConfig, Settings, TinyTransformer, TrainConfig, get_task, plan, train
from posenc.experiments.evaluate import evaluate_lengths, loss_per_position
from posenc.experiments.plots import plot_results, summary_rows
from posenc.experiments.probe import probe_positions, ridge_r2
from posenc.experiments.results import add_record, load_results
from posenc.experiments.runner import run_experiment
from posenc.experiments.tasks import BOS, DIGIT0, EOS, IGNORE, SEP, SYMBOLS
from posenc.experiments.train import batch_for_step

torch.set_num_threads(1)


def _tiny(task, scheme="rope", **kw):
    return ModelConfig(
        vocab_size=task.vocab_size, scheme=scheme, causal=task.causal, dim=32, num_heads=2, num_layers=1, **kw
    )


# -- tasks -----------------------------------------------------------------------------------
def _answer(inputs, targets):
    """Digits of the input (between BOS and SEP) and of the answer (targets before EOS)."""
    row_in, row_t = inputs.tolist(), targets.tolist()
    x = row_in[1 : row_in.index(SEP)]
    y = [t for t in row_t if t not in (IGNORE, EOS)]
    return x, y


@pytest.mark.parametrize("name, answer", [("copy", lambda x: x), ("reverse", lambda x: x[::-1]), ("sort", sorted)])
def test_sequence_tasks_answer(name, answer):
    batch = get_task(name).sample(50, 7, torch.Generator().manual_seed(1))
    assert batch.inputs.shape == batch.targets.shape == (50, 2 * 7 + 2)
    assert (batch.inputs[:, 0] == BOS).all() and (batch.targets[:, -1] == EOS).all()
    for inputs, targets in zip(batch.inputs, batch.targets):
        x, y = _answer(inputs, targets)
        assert y == answer(x) and len(x) == 7


def test_addition_writes_the_sum_least_significant_digit_first():
    batch = get_task("addition").sample(100, 5, torch.Generator().manual_seed(2))
    for inputs, targets in zip(batch.inputs, batch.targets):
        x, y = _answer(inputs, targets)
        text = "".join(SYMBOLS[t] for t in x)
        a, b = text.split("+")
        digits = "".join(SYMBOLS[t] for t in y)
        assert int(digits[::-1]) == int(a) + int(b) and len(digits) == 6


def test_binary_reverse_labels_each_position_with_the_mirrored_bit():
    batch = get_task("binary-reverse").sample(20, 9, torch.Generator().manual_seed(3))
    assert torch.equal(batch.targets, batch.inputs.flip(1))
    assert set(batch.inputs.unique().tolist()) <= {DIGIT0, DIGIT0 + 1}


def test_word_order_labels_are_independent_of_the_bag_of_words():
    """Every bag of words comes with either agent: a bag-of-words model can do no better than 0.5."""
    batch = get_task("word-order").sample(4000, 3, torch.Generator().manual_seed(4))
    agents = defaultdict(set)
    for inputs, target in zip(batch.inputs.tolist(), batch.targets[:, 0].tolist()):
        agents[tuple(sorted(inputs))].add(target)
        assert target in inputs[1:]
    big = [labels for labels in agents.values() if len(labels) > 1]
    assert len(big) / len(agents) > 0.95


def test_text_splits_do_not_overlap_and_are_bytes():
    task = get_task("text")
    train_part, held_out = task.split(False), task.split(True)
    assert len(train_part) > 400_000 and 0.09 < len(held_out) / (len(train_part) + len(held_out)) < 0.11
    batch = task.sample(4, 32, torch.Generator().manual_seed(0), held_out=True)
    assert torch.equal(batch.inputs[:, 1:], batch.targets[:, :-1]) and int(batch.inputs.max()) < 256


def test_unknown_names_list_the_choices():
    with pytest.raises(ValueError, match="copy, reverse"):
        get_task("copyy")
    with pytest.raises(ValueError, match="length, learned-vs-sinusoidal"):
        plan("lenght", Settings())
    with pytest.raises(ValueError, match="rope"):
        plan("length", Settings(schemes=("rop",)))
    with pytest.raises(ValueError, match="only scheme is 'rope'"):
        plan("extend", Settings(schemes=("alibi",)))


# -- model -----------------------------------------------------------------------------------
def test_model_is_deterministic_and_applies_absolute_codes_once():
    task = get_task("copy")
    torch.manual_seed(5)
    a = TinyTransformer(_tiny(task, "sinusoidal"))
    torch.manual_seed(5)
    b = TinyTransformer(_tiny(task, "sinusoidal"))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert all(block.attn.encoding.name == "none" for block in a.blocks) and a.encoding.name == "sinusoidal"
    rope = TinyTransformer(_tiny(task, "rope"))
    assert rope.encoding is None and rope.blocks[0].attn.encoding is rope.scheme


def test_token_embeddings_are_scaled_under_a_sinusoid_only():
    """Vaswani et al. 2017, 3.4: embeddings times sqrt(d_model) before the unit-amplitude code is added."""
    task = get_task("copy")
    assert _tiny(task, "sinusoidal").token_scale == pytest.approx(32**0.5)
    assert _tiny(task, "learned").token_scale == _tiny(task, "rope").token_scale == 1.0
    model = TinyTransformer(_tiny(task, "sinusoidal"))
    tokens = torch.randint(0, task.vocab_size, (2, 6))
    _, states = model(tokens, hidden_states=True)
    expected = model.token_embedding(tokens) * 32**0.5 + posenc.functional.sinusoidal(6, 32)
    torch.testing.assert_close(states[0], expected)
    with pytest.raises(ValueError, match="embedding_scale"):
        _tiny(task, "sinusoidal", embedding_scale=0.0)


def test_concatenated_code_keeps_the_model_width():
    task = get_task("text")
    model = TinyTransformer(_tiny(task, "sinusoidal", scheme_options={"combine": "concat", "dim": 8}))
    assert model.token_embedding.weight.shape == (task.vocab_size, 24)
    tokens = torch.randint(0, 256, (2, 10))
    assert model(tokens).shape == (2, 10, task.vocab_size)
    with pytest.raises(ValueError, match="no room"):
        TinyTransformer(_tiny(task, "sinusoidal", scheme_options={"combine": "concat", "dim": 32}))


def test_impossible_settings_are_reported():
    task = get_task("copy")
    with pytest.raises(ValueError, match="posed for a bidirectional encoder"):
        train(ModelConfig(vocab_size=40, causal=True), get_task("word-order"), TrainConfig(steps=1))
    for seed in (-1, 2**32, 2**63 - 1, True):  # batch seeds seed * 1_000_003 + step must fit torch's 64 bits
        with pytest.raises(ValueError, match=r"seed must be an integer in 0\.\.4294967295"):
            TrainConfig(seed=seed)
    assert TrainConfig(seed=2**32 - 1).seed == 2**32 - 1
    multi_axis = [n for n in posenc.available() if getattr(posenc.scheme_class(n), "n_axes", 1) != 1]
    for name in multi_axis:
        with pytest.raises(ValueError, match="1-D"):
            ModelConfig(vocab_size=10, scheme=name)
    model = TinyTransformer(_tiny(task, "learned", max_len=task.sequence_length(4)))
    scores = evaluate_lengths(model, task, [4, 5], samples=4)
    assert "exact_match" in scores["4"] and "max_len=10" in scores["5"]["unavailable"]
    lm = get_task("text")
    reason = loss_per_position(TinyTransformer(_tiny(lm, "learned", max_len=16)), lm, 32, samples=2)
    assert isinstance(reason, str) and "max_len=16" in reason


# -- training --------------------------------------------------------------------------------
@pytest.mark.slow
def test_word_order_none_is_at_chance_while_rope_solves_it():
    task = get_task("word-order")
    config = TrainConfig(steps=150, batch_size=32, warmup=10, min_length=3, max_length=3)
    scores = {}
    for scheme in ("none", "rope"):
        model = train(_tiny(task, scheme, max_len=8), task, config).model
        scores[scheme] = evaluate_lengths(model, task, [3], samples=1000)["3"]["exact_match"]
    assert 0.44 < scores["none"] < 0.56
    assert scores["rope"] > 0.97


def _stopped_then_resumed(scheme: str, steps: int, path, on_step, error: type[BaseException]):
    """Train ``steps`` steps straight, then again with ``on_step`` stopping it and a resume from
    its checkpoint: the resumed run must equal the straight one bit for bit. Returns what
    stopped it, the checkpoint's step and the resumed result."""
    task = get_task("copy")
    model, config = (
        _tiny(task, scheme),
        TrainConfig(steps=steps, batch_size=8, warmup=2, max_length=5, checkpoint_every=10),
    )
    full = train(model, task, config)
    with pytest.raises(error) as caught:
        train(model, task, config, checkpoint=path, on_step=on_step)
    saved = torch.load(path, weights_only=True)["step"]
    resumed = train(model, task, config, checkpoint=path)
    assert resumed.resumed_from == saved and resumed.losses == full.losses
    for p, q in zip(full.model.state_dict().values(), resumed.model.state_dict().values()):
        assert torch.equal(p, q)
    return caught.value, saved, resumed


def test_resumed_training_equals_uninterrupted_bitwise(tmp_path):
    def stop(step, total, loss, speed):
        if step == 17:
            raise KeyboardInterrupt

    path = tmp_path / "run.pt"
    _, saved, resumed = _stopped_then_resumed("t5", 24, path, stop, KeyboardInterrupt)
    assert saved == 10  # the last regular checkpoint
    task = get_task("copy")
    model = _tiny(task, "t5")
    with pytest.raises(ValueError, match=r"written with another configuration \(train.steps: 24 stored, 30 asked"):
        train(model, task, TrainConfig(steps=30, batch_size=8, max_length=5), checkpoint=path)
    assert resumed.wall_time_s > torch.load(path, weights_only=True)["wall_time_s"] > 0  # both runs' time


@pytest.mark.parametrize(
    "content, reason",
    [
        (b"garbage\n", "(UnpicklingError: Unsupported operand"),
        (b"", "(EOFError"),
        (b"PK\x03\x04 truncated zip", "(RuntimeError: PytorchStreamReader failed reading zip archive"),
        (None, "(UnpicklingError: Unsupported global: GLOBAL argparse.Namespace"),
    ],
)
def test_unreadable_checkpoint_is_a_clear_error(tmp_path, content, reason):
    """The reason is the exception's type and first sentence: torch's advice to load the file with
    weights_only=False (which runs whatever code it holds) is never passed on."""
    import argparse

    task = get_task("copy")
    path = tmp_path / "run.pt"
    if content is None:  # a pickle of a class the safe loader refuses
        torch.save({"args": argparse.Namespace(steps=2)}, path)
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError, match=f"checkpoint {path} is unreadable .*; delete it to start over") as caught:
        train(_tiny(task, "none"), task, TrainConfig(steps=2, batch_size=4, max_length=5), checkpoint=path)
    said = str(caught.value)
    assert said.startswith(f"checkpoint {path} is unreadable {reason}") and len(said) < len(str(path)) + 160, said
    assert "weights_only" not in said and "arbitrary code" not in said and "\n" not in said and "\x1b" not in said
    torch.save({"weights": torch.zeros(2)}, path)  # a loadable file of another kind
    with pytest.raises(ValueError, match="is not a posenc training checkpoint"):
        train(_tiny(task, "none"), task, TrainConfig(steps=2, batch_size=4, max_length=5), checkpoint=path)


def test_randomized_positions_are_sorted_distinct_and_bounded():
    config = TrainConfig(steps=1, batch_size=6, max_length=5, randomized_max_position=40)
    batch, positions = batch_for_step(get_task("copy"), config, 3)
    assert positions.shape == batch.inputs.shape
    assert (positions.diff(dim=1) > 0).all() and int(positions.max()) < 40
    again = batch_for_step(get_task("copy"), config, 3)[1]
    assert torch.equal(positions, again)


def test_randomized_evaluation_draws_positions_from_the_training_range():
    task = get_task("copy")
    model = TinyTransformer(_tiny(task, "rope"))
    with torch.no_grad():
        model.head.bias.copy_(torch.linspace(0, 1, task.vocab_size))
    seq = task.sequence_length(3)
    ordered = evaluate_lengths(model, task, [3], samples=16)
    full_range = evaluate_lengths(model, task, [3], samples=16, max_position=seq)  # the only subset: 0..s-1
    assert ordered == full_range
    with pytest.raises(ValueError, match="max_position"):
        evaluate_lengths(model, task, [3], samples=4, max_position=seq - 1)


@pytest.mark.slow
def test_killed_experiment_resumes_without_losing_results(tmp_path):
    settings = Settings(steps=6, tasks=("copy",), schemes=("none", "alibi"), quick=True)

    class StopInSecondJob:
        jobs = 0

        def job_started(self, job, index, total):
            self.jobs += 1

        def step(self, step, steps, loss, speed):
            if self.jobs == 2 and step == 3:
                raise KeyboardInterrupt

        def job_finished(self, job, records, skipped):
            pass

    with pytest.raises(KeyboardInterrupt):
        run_experiment("length", tmp_path / "a", settings, hooks=StopInSecondJob())
    assert [r["scheme"] for r in load_results(tmp_path / "a")] == ["none"]
    rerun = run_experiment("length", tmp_path / "a", settings)
    assert [r["scheme"] for r in rerun] == ["alibi"]
    straight = run_experiment("length", tmp_path / "b", settings)
    strip = lambda rs: [(r["scheme"], r["metrics"], r["final_train_loss"]) for r in rs]  # noqa: E731
    assert strip(load_results(tmp_path / "a")) == strip(straight)


def test_stored_records_of_another_configuration_are_not_reused(tmp_path):
    """A rerun asking for other steps must not report the old run as if it had those settings: it
    stops before training, naming the record and what differs. The device does not count."""
    settings = Settings(steps=2, tasks=("copy",), schemes=("none",), quick=True)
    first = run_experiment("length", tmp_path, settings)
    assert run_experiment("length", tmp_path, settings) == []  # the same settings: skipped
    with pytest.raises(
        ValueError,
        match=r"already holds length/copy/none/seed0 \[default\] made with another "
        r"configuration \(train.steps: 2 stored, 3 asked\)",
    ):
        run_experiment("length", tmp_path, replace(settings, steps=3))
    with pytest.raises(ValueError, match=r"eval_samples: 64 stored, 128 asked"):  # --quick scores fewer samples
        run_experiment("length", tmp_path, replace(settings, quick=False))
    assert load_results(tmp_path) == json.loads(json.dumps(first))  # untouched


def test_records_stored_before_eval_samples_existed_are_still_reused(tmp_path):
    settings = Settings(steps=2, tasks=("copy",), schemes=("none",), quick=True)
    first = run_experiment("length", tmp_path, settings)
    path = tmp_path / "results.json"
    data = json.loads(path.read_text())
    del data["records"][0]["config"]["eval_samples"]  # as the previous version wrote it
    path.write_text(json.dumps(data))
    assert run_experiment("length", tmp_path, settings) == [] and len(first) == 1


def test_an_ignored_ctrl_c_stays_ignored(tmp_path):
    import os
    import signal

    task = get_task("copy")
    config = TrainConfig(steps=6, batch_size=8, warmup=2, max_length=5)

    def press_ctrl_c(step, total, loss, speed):
        if step == 3:
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a job started in the background of a script
    try:
        result = train(_tiny(task, "none"), task, config, on_step=press_ctrl_c)
        assert len(result.losses) == 6 and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_saves_the_step_it_finishes_and_resumes_bitwise(tmp_path):
    """SIGINT lets the step in progress finish, saves a checkpoint of it (between the regular ones)
    and raises Interrupted; resuming from it equals an uninterrupted run bit for bit."""
    import os
    import signal

    from posenc.experiments.train import Interrupted

    def press_ctrl_c(step, total, loss, speed):
        if step == 3:
            os.kill(os.getpid(), signal.SIGINT)

    path = tmp_path / "run.pt"
    caught, saved, _ = _stopped_then_resumed("rope", 12, path, press_ctrl_c, Interrupted)
    assert caught.step == saved and 3 <= saved <= 4 and caught.checkpoint == path  # between regular checkpoints
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def _refuse_sigterm(signum, frame):
    raise AssertionError("SIGTERM reached the test's own handler")  # the run did not take it over


def test_sigterm_in_training_saves_the_step_it_finishes_and_resumes_bitwise(tmp_path):
    """SIGTERM (kill, timeout, Slurm, docker stop) is handled as Ctrl-C: the step in progress is saved
    and Interrupted says which signal it was; the previous handler is back afterwards."""
    import os
    import signal

    from posenc.experiments.train import Interrupted

    def terminate(step, total, loss, speed):
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, _refuse_sigterm)  # fails the test, not the process, without the fix
    try:
        caught, saved, _ = _stopped_then_resumed("rope", 12, tmp_path / "run.pt", terminate, Interrupted)
        assert caught.signum == signal.SIGTERM and caught.step == saved and 3 <= saved <= 4
        assert signal.getsignal(signal.SIGTERM) is _refuse_sigterm  # restored
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_sigterm_outside_training_interrupts_the_run_at_once(tmp_path):
    import os
    import signal

    from posenc.experiments.train import Interrupted

    class TerminateAfterFirstJob:
        def job_started(self, job, index, total):
            pass

        def step(self, step, steps, loss, speed):
            pass

        def job_finished(self, job, records, skipped):
            os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, _refuse_sigterm)
    try:
        with pytest.raises(Interrupted) as caught:
            run_experiment(
                "length",
                tmp_path,
                Settings(steps=1, tasks=("copy",), schemes=("none", "t5"), quick=True),
                hooks=TerminateAfterFirstJob(),
            )
        assert caught.value.signum == signal.SIGTERM and caught.value.step is None
        assert signal.getsignal(signal.SIGTERM) is _refuse_sigterm
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert [r["scheme"] for r in load_results(tmp_path)] == ["none"]  # the finished job is stored


def test_one_run_at_a_time_per_folder(tmp_path):
    """A run holds DIR/.lock: a second one stops at once, naming the folder, before it trains."""
    fcntl = pytest.importorskip("fcntl")
    settings = Settings(steps=1, tasks=("copy",), schemes=("none",), quick=True)
    with open(tmp_path / ".lock", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ValueError, match=f"another posenc experiment is running on {tmp_path} "):
            run_experiment("length", tmp_path, settings)
    assert not (tmp_path / "results.json").exists()
    assert len(run_experiment("length", tmp_path, settings)) == 1  # free again: it runs, then lets go
    with open(tmp_path / ".lock", "a") as again:
        fcntl.flock(again, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_stale_checkpoints_and_unwritable_folders_stop_before_training(tmp_path):
    from posenc.experiments.runner import checkpoint_path

    settings = Settings(steps=3, tasks=("copy",), schemes=("none",), quick=True)
    job = plan("length", settings)[0]
    path = checkpoint_path(job, tmp_path)
    train(job.model, job.task, replace(job.train, steps=2), checkpoint=path)  # a checkpoint of a 2-step run
    with pytest.raises(
        ValueError,
        match=rf"checkpoint {path} of length/copy/none/seed0 was written with another "
        r"configuration \(train.steps: 2 stored, 3 asked\)",
    ):
        run_experiment("length", tmp_path, settings)
    assert not (tmp_path / "results.json").exists()
    (tmp_path / "a-file").write_text("")
    with pytest.raises(ValueError, match=r"cannot write results to .*a-file .*give --out a folder you can write to"):
        run_experiment("length", tmp_path / "a-file", settings)
    torch.save({"config": {}, "model": {}, "optimizer": {}, "step": 5, "losses": 5}, path)
    with pytest.raises(ValueError, match="is not a posenc training checkpoint"):
        run_experiment("length", tmp_path, settings)
    (tmp_path / "b" / "results.json").mkdir(parents=True)  # a folder where the results file goes
    with pytest.raises(
        ValueError,
        match=r"cannot write results to .*b: .*results.json is a folder, where the results "
        "file goes",
    ):
        run_experiment("length", tmp_path / "b", settings)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "checkpoints").write_text("")  # a file where the checkpoints' folder goes
    with pytest.raises(ValueError, match=r"cannot write results to .*c: .*checkpoints is a file, not a folder"):
        run_experiment("length", tmp_path / "c", settings)


@pytest.mark.parametrize(
    "content, message",
    [
        ({"schema": 99, "records": []}, "has schema 99; this posenc reads schema 1"),
        ({"records": []}, "is not a posenc results file: it has no schema field (this posenc reads schema 1)"),
        ({"schema": 1}, "is not a posenc results file: it has no records list"),
        ([], 'is not a posenc results file (it holds an array, not an object {"schema": 1, "records": [...]})'),
    ],
)
def test_results_files_of_another_schema_say_what_they_hold(tmp_path, content, message):
    """ "is not a posenc results file (schema 1)" read as if the file had schema 1."""
    (tmp_path / "results.json").write_text(json.dumps(content))
    with pytest.raises(ValueError) as caught:
        load_results(tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / 'results.json'} {message}"), str(caught.value)
    assert "(schema 1)" not in str(caught.value)


@pytest.mark.parametrize(
    "records",
    [
        [{"experiment": "length"}],
        [1],
        [
            {
                "experiment": "length",
                "task": "copy",
                "scheme": "none",
                "variant": "default",
                "seed": "zero",
                "train_length": 16,
                "metrics": {},
                "in_distribution": 1.0,
                "out_of_distribution": None,
                "summary_metric": "exact_match",
                "wall_time_s": 1.0,
                "config": {},
            }
        ],
    ],
)
def test_malformed_records_are_named(tmp_path, records):
    (tmp_path / "results.json").write_text(json.dumps({"schema": 1, "records": records}))
    with pytest.raises(ValueError, match=r"results.json: record 0 is not a result record .*move the file away"):
        load_results(tmp_path)


def test_add_vs_concat_refuses_schemes_without_a_combine_before_training(tmp_path):
    with pytest.raises(ValueError, match=r"\['rope'\] cannot be concatenated \(schemes that can: .*sinusoidal"):
        run_experiment("add-vs-concat", tmp_path, Settings(steps=1, schemes=("learned", "rope"), quick=True))
    assert not (tmp_path / "results.json").exists()


# -- metrics, results, plots ------------------------------------------------------------------
def test_ridge_probe_recovers_a_linear_code_and_not_noise():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(500, 8, generator=g, dtype=torch.float64)
    y = x @ torch.arange(1.0, 9.0, dtype=torch.float64) + 3
    assert ridge_r2(x[:400], y[:400], x[400:], y[400:], ridge=1e-9)[0] > 0.999999
    noise = torch.randn(500, generator=g, dtype=torch.float64)
    assert ridge_r2(x[:400], noise[:400], x[400:], noise[400:])[0] < 0.05


def test_probe_finds_no_position_in_a_bidirectional_model_without_encoding():
    """Permutation equivariance: with no encoding and no mask, no layer can know where a token is."""
    task = get_task("text-mlm")
    none = probe_positions(TinyTransformer(_tiny(task, "none")), task, 32, samples=32)
    assert len(none) == 2 and all(layer["r2"] < 0.05 for layer in none)
    sinusoidal = probe_positions(TinyTransformer(_tiny(task, "sinusoidal")), task, 32, samples=32)
    assert sinusoidal[0]["r2"] > 0.99


@pytest.mark.parametrize("name", ["text", "text-mlm"])
def test_loss_per_position_averages_over_the_scored_targets_only(name):
    """A model with all-zero logits scores ln(vocab) on every target it is scored on. text-mlm scores
    ~15% of the bytes: the unmasked ones used to count as loss 0 and the sum was divided by every
    sample, reporting ~1/7 of the loss."""
    task = get_task(name)
    model = TinyTransformer(_tiny(task, "none"))
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
    losses = loss_per_position(model, task, 24, samples=8)
    present = [v for v in losses if v is not None]
    assert len(present) >= (24 if name == "text" else 8)  # 8 samples x 15%: some positions may go unscored
    assert all(v == pytest.approx(math.log(task.vocab_size), rel=1e-6) for v in present)


def test_summary_time_of_one_training_shared_by_variants_is_split():
    """extend trains once and evaluates four scalings: its four records carry the job's whole time
    and ``job_variants`` = 4, and the summary rows give each a quarter, so they add up to the run
    (each showed the whole: 4 x 16 s for a 20 s run). Records of older files (no field) count whole."""
    base = {
        "experiment": "extend",
        "task": "text",
        "scheme": "rope",
        "seed": 0,
        "train_length": 64,
        "in_distribution": 1.5,
        "out_of_distribution": 2.0,
        "summary_metric": "loss",
        "metrics": {},
        "wall_time_s": 16.0,
    }
    rows = summary_rows([{**base, "variant": v, "job_variants": 4} for v in ("none", "linear", "ntk", "yarn")])
    assert [r["wall_time_s"] for r in rows] == [4.0] * 4 and all(r["time_shared"] for r in rows)
    (row,) = summary_rows([{**base, "variant": "none"}, {**base, "variant": "none", "seed": 1}])
    assert row["wall_time_s"] == 32.0 and not row["time_shared"]


@pytest.mark.slow
def test_results_round_trip_and_summaries(tmp_path):
    base = {
        "experiment": "length",
        "task": "copy",
        "scheme": "rope",
        "variant": "default",
        "train_length": 4,
        "metrics": {"per_length": {"1": {"exact_match": 1.0}, "5": {"exact_match": 0.5}}},
        "summary_metric": "exact_match",
        "wall_time_s": 1.0,
        "config": {},
    }
    add_record(tmp_path, {**base, "seed": 0, "in_distribution": 1.0, "out_of_distribution": 0.2})
    add_record(tmp_path, {**base, "seed": 1, "in_distribution": 0.8, "out_of_distribution": float("nan")})
    add_record(tmp_path, {**base, "seed": 1, "in_distribution": 0.8, "out_of_distribution": 0.4})  # replaces
    records = load_results(tmp_path)
    assert len(records) == 2
    (row,) = summary_rows(records)
    assert row["in_distribution"] == pytest.approx(0.9) and row["in_distribution_ci95"] == pytest.approx(
        12.706 * 0.1414 / 2**0.5, abs=1e-3
    )  # Student's t, 1 degree of freedom: 12.706 · sd / sqrt(2)
    add_record(tmp_path / "nan", {**base, "seed": 0, "in_distribution": float("inf"), "out_of_distribution": None})
    assert json.loads((tmp_path / "nan" / "results.json").read_text())["records"][0]["in_distribution"] is None
    with pytest.raises(ValueError, match="lacks"):
        add_record(tmp_path, {"experiment": "x"})
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text("[]")
    with pytest.raises(ValueError, match="not a posenc results file"):
        load_results(tmp_path / "bad")
    (figure,) = plot_results(tmp_path)
    assert figure.name == "length_copy.png" and figure.stat().st_size > 5000


def test_extend_scores_each_scaling_and_restores_the_model():
    (job,) = plan("extend", Settings(steps=2, quick=True))
    model = TinyTransformer(job.model)
    trained = model.scheme
    fields = job.evaluate(model, job)
    assert list(fields) == ["default", "linear", "ntk", "yarn"] and model.scheme is trained
    assert len(fields["linear"]["metrics"]["loss_per_position"]) == 8 * job.train.max_length
    assert fields["linear"]["metrics"]["scaling"] == {"rope_type": "linear", "factor": 8}
    assert fields["default"]["out_of_distribution"] != fields["linear"]["out_of_distribution"]


def test_every_job_of_every_experiment_has_its_own_checkpoint(tmp_path):
    """probe's residual / no-residual and add-vs-concat's add / concat train separate models of one
    scheme and seed: they shared a checkpoint file, so a run stopped in the first one refused to
    resume ("written with another configuration")."""
    from posenc.experiments.runner import checkpoint_path
    from posenc.experiments.suite import EXPERIMENTS

    for name in EXPERIMENTS:
        for quick in (True, False):
            jobs = plan(name, Settings(quick=quick))
            assert len({checkpoint_path(j, tmp_path) for j in jobs}) == len(jobs), name


def test_a_probe_stopped_in_its_first_variant_resumes(tmp_path):
    settings = Settings(steps=4, schemes=("none",), quick=True)

    class StopInFirstJob:
        def job_started(self, job, index, total):
            pass

        def step(self, step, steps, loss, speed):
            if step == 2:
                raise KeyboardInterrupt

        def job_finished(self, job, records, skipped):
            pass

    with pytest.raises(KeyboardInterrupt):
        run_experiment("probe", tmp_path, settings, hooks=StopInFirstJob())
    records = run_experiment("probe", tmp_path, settings)  # used to refuse: the checkpoint of the other variant
    assert {"residual", "no-residual"} <= {r["variant"] for r in records}


def test_learning_rate_schedule_is_pinned():
    """Linear warm-up from lr / warmup at step 0 to lr, then cosine decay to lr / 10 (nanoGPT's
    schedule): a warm-up starting at 0 would waste the first step."""
    from posenc.experiments.train import learning_rate

    config = TrainConfig(lr=1e-3, warmup=10, steps=110)
    assert learning_rate(0, config) == pytest.approx(1e-4)
    assert learning_rate(9, config) == pytest.approx(1e-3)
    assert learning_rate(10, config) == pytest.approx(1e-3)
    assert learning_rate(60, config) == pytest.approx(1e-3 * (0.1 + 0.9 * 0.5))  # halfway through the decay
    assert learning_rate(110, config) == pytest.approx(1e-4)
    assert [learning_rate(s, config) for s in range(10, 111)] == sorted(
        (learning_rate(s, config) for s in range(10, 111)), reverse=True
    )


def test_the_95_percent_interval_uses_students_t() -> None:
    """Half-widths against hand values: sd 1 over 3 seeds is t(2) = 4.303 / sqrt(3); over 31 values
    the normal 1.96; one value has none."""
    from posenc.experiments.plots import ci95

    assert ci95([1.0, 2.0, 3.0]) == pytest.approx(4.303 / 3**0.5, abs=1e-6)
    assert ci95([0.0, 2.0]) == pytest.approx(12.706 * 2**0.5 / 2**0.5, abs=1e-6)  # sd sqrt(2), n 2
    values = [float(i % 2) for i in range(31)]
    sd = statistics.stdev(values)
    assert ci95(values) == pytest.approx(2.042 * sd / 31**0.5, abs=1e-6)  # 30 degrees of freedom
    assert ci95(values + [0.5]) == pytest.approx(1.96 * statistics.stdev(values + [0.5]) / 32**0.5, abs=1e-6)
    assert ci95([0.7]) == 0.0


@pytest.mark.parametrize("scheme", ["fire", "cope", "forgetting"])
def test_each_run_keeps_its_trained_encoding(tmp_path, scheme):
    """The trained encoding is saved beside the records and loads (weights_only) into a module whose
    bias equals the trained model's, not the initialisation's."""
    from posenc.experiments.runner import encoding_path, load_encoding
    from posenc.experiments.suite import plan

    settings = Settings(steps=3, tasks=("copy",), schemes=(scheme,), seeds=(0,), quick=True)
    (job,) = plan("length", settings)
    run_experiment("length", tmp_path, settings)
    path = encoding_path(job, tmp_path)
    assert path == tmp_path / "encodings" / f"length__copy__{scheme}__seed0.pt"
    loaded = load_encoding(path)
    assert loaded.name == scheme and not loaded.training
    trained = torch.load(path, weights_only=True)["state"]
    fresh = type(loaded)(loaded.config).state_dict()
    assert trained.keys() == loaded.state_dict().keys()
    for key, value in loaded.state_dict().items():
        assert torch.equal(value, trained[key])
    assert any(not torch.equal(fresh[k], trained[k]) for k in trained)  # three steps of AdamW moved them
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(Exception):  # noqa: B017 - torch's own unpickling error names the file's problem
        load_encoding(tmp_path / "bad.pt")
    torch.save({"x": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a trained encoding"):
        load_encoding(tmp_path / "other.pt")


def test_figures_of_several_seeds_draw_the_mean_and_its_interval(tmp_path):
    """Three seeds of one scheme make one line, the mean, and one band from mean - ci to mean + ci."""
    base = {
        "experiment": "length",
        "task": "copy",
        "scheme": "alibi",
        "variant": "default",
        "train_length": 2,
        "summary_metric": "exact_match",
        "wall_time_s": 1.0,
        "config": {},
        "in_distribution": 1.0,
        "out_of_distribution": 0.5,
    }
    values = {0: (1.0, 0.2), 1: (0.8, 0.4), 2: (0.9, 0.9)}
    for seed, (a, b) in values.items():
        per_length = {"1": {"exact_match": a}, "3": {"exact_match": b}}
        add_record(tmp_path, {**base, "seed": seed, "metrics": {"per_length": per_length}})
    from posenc.experiments.plots import ci95, group_figure

    fig = group_figure("length", "copy", load_results(tmp_path))
    (ax,) = fig.axes
    (line,) = ax.get_lines()[:-1]  # the last line is the training length's marker
    assert list(line.get_xdata()) == [1, 3]
    assert list(line.get_ydata()) == pytest.approx([0.9, 0.5])
    (band,) = ax.collections
    ys = band.get_paths()[0].vertices[:, 1]
    half = ci95([0.2, 0.4, 0.9])
    assert min(ys) == pytest.approx(min(0.9 - ci95([1.0, 0.8, 0.9]), 0.5 - half))
    assert max(ys) == pytest.approx(0.5 + half)


def test_the_model_keeps_the_initialisation_of_its_encoding():
    """GPT-2's N(0, 0.02) rule is for the transformer's layers: forgetting attention's gates keep
    their bias of 5 (f = sigmoid(5) ~ 0.993, Lin et al. 2025), FIRE's MLP keeps PyTorch's default
    (its first layer's bias is not zeroed), and the attention projections are still N(0, 0.02)."""
    torch.manual_seed(0)
    model = TinyTransformer(ModelConfig(vocab_size=20, scheme="forgetting"))
    assert torch.equal(model.scheme.forget_gates.bias, torch.full_like(model.scheme.forget_gates.bias, 5.0))
    torch.manual_seed(0)
    fire = TinyTransformer(ModelConfig(vocab_size=20, scheme="fire", dim=64, num_heads=4)).scheme
    first = fire.mlp[0]
    assert first.bias.abs().min() > 0 and first.weight.std() > 0.1  # U(-1, 1) for a fan-in of 1, not N(0, 0.02)
    qkv = model.blocks[0].attn.qkv.weight
    assert abs(qkv.std().item() - 0.02) < 0.002
