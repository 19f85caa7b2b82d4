"""The experiments: what each one trains and how it scores it, as a list of jobs.

Shape legend: ``b`` batch, ``s`` sequence, ``d`` model width, ``L`` layers.

A :class:`Job` is one training run (task, scheme, seed) and the records its evaluation yields (one
per variant: ``extend`` scores one model under several RoPE scalings). :mod:`.runner` executes
jobs, skipping those whose records are already in ``results.json``.

Sizes are chosen for a CPU: a 2-layer, width-64, 4-head model learns copy at n <= 16 within a few
thousand steps (lr 3e-3); language models see 64-byte windows, byte-lm's 4-layer models 128-byte
ones (docs/experiments.md gives the measured times).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .evaluate import evaluate_lengths, loss_per_position, unavailable_reason
from .model import ModelConfig, TinyTransformer
from .probe import probe_positions
from .tasks import Task, Text, get_task
from .train import TrainConfig

__all__ = ["Job", "Settings", "EXPERIMENTS", "SchemeLabel", "plan", "parse_label", "parse_scheme", "nope_schedule"]

SEQ2SEQ_LENGTH = 16  # L for copy / reverse / sort / addition / binary-reverse: evaluated at 1 .. 2L
ADDITION_LENGTH = 8  # digits per operand (the sum needs 64-bit integers up to 18 digits)
TEXT_LENGTH = 64  # L for byte language models: loss per position up to 8L
EXTEND_FACTOR = 8


@dataclass(frozen=True)
class Settings:
    """What the command line chose; None means the experiment's default."""

    schemes: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    steps: int | None = None
    tasks: tuple[str, ...] | None = None
    quick: bool = False
    device: str = "cpu"
    layers: int | None = None  # transformer layers of every model (None: the experiment's, 2 but probe's 3)


@dataclass
class Job:
    experiment: str
    task: Task
    scheme: str  # as written on the command line, e.g. "rope+randomized"
    seed: int
    model: ModelConfig
    train: TrainConfig
    variants: tuple[str, ...]
    evaluate: Callable[[TinyTransformer, Job], dict[str, dict[str, Any]]]  # variant -> record fields
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def base_label(self) -> str:
        """``experiment/task/scheme/seedN``."""
        return f"{self.experiment}/{self.task.name}/{self.scheme}/seed{self.seed}"

    @property
    def label(self) -> str:
        """:attr:`base_label`, and ``/variant`` for a job that trains a model of its own per variant
        (``probe``'s residual and no-residual, ``add-vs-concat``'s add and concat): the name of its
        checkpoint too, so that two variants never share one."""
        own = (
            self.variants[0] if len(self.variants) == 1 and self.variants[0] not in ("default", "randomized") else None
        )
        return self.base_label + (f"/{own}" if own else "")


#: What a scheme label may append to the scheme's name, for error messages and ``--help``.
MODIFIERS = (
    "'+randomized' (positions drawn at random below the longest evaluated length, Ruoss et al. 2023), "
    "'+nopeN' (every N-th layer without positional encoding, N >= 2: layers N, 2N, ... counted from 1, "
    "as Llama 4 and SmolLM3 interleave NoPE layers; rope+nope4 needs a model of at least 4 layers)"
)
_NOPE = re.compile(r"nope([0-9]+)")


@dataclass(frozen=True)
class SchemeLabel:
    """A scheme label as written on the command line: ``NAME[+randomized][+nopeN]``."""

    name: str
    randomized: bool = False
    nope_every: int | None = None  # every N-th layer NoPE (layers N, 2N, ...); None: the scheme in every layer


def parse_label(spec: str) -> SchemeLabel:
    """``"rope"``, ``"rope+randomized"``, ``"rope+nope4"`` (every fourth layer NoPE), in any
    combination and order of the modifiers, each at most once. Names and modifiers are checked."""
    from ..schemes.base import available, scheme_class

    name, *suffixes = spec.split("+")
    one_d = [n for n in available() if getattr(scheme_class(n), "n_axes", 1) == 1]
    if name in available() and name not in one_d:
        raise ValueError(
            f"scheme {name!r} encodes multi-axis positions; the experiments use the 1-D schemes: {', '.join(one_d)}"
        )
    if name not in one_d:
        raise ValueError(f"unknown scheme {name!r}; choose from: {', '.join(one_d)} (modifiers: {MODIFIERS})")
    randomized, every = False, None
    for suffix in suffixes:
        nope = _NOPE.fullmatch(suffix)
        if suffix == "randomized" and not randomized:
            randomized = True
        elif nope is not None and every is None:
            every = int(nope.group(1))
            if every < 2:
                raise ValueError(f"{spec!r}: '+nope{every}' has no layer with the scheme; use 'none', or N >= 2")
            family = scheme_class(name).family
            if family in ("absolute", "none"):
                why = (
                    "has no encoding to leave out" if family == "none" else "is absolute: it enters once, at the input"
                )
                raise ValueError(
                    f"{spec!r}: '+nopeN' leaves the encoding out of some layers, and {name!r} {why}; "
                    "use a rotary or bias scheme such as rope"
                )
        else:
            again = suffix == "randomized" or nope is not None
            raise ValueError(
                f"{'repeated' if again else 'unknown'} scheme modifier {suffix!r} in {spec!r}; the modifiers are "
                f"{MODIFIERS}, each at most once"
            )
    return SchemeLabel(name, randomized, every)


def parse_scheme(spec: str) -> tuple[str, bool]:
    """``"rope"`` -> ("rope", False); ``"rope+randomized"`` -> ("rope", True). Names are checked
    (:func:`parse_label` gives the layer schedule as well)."""
    label = parse_label(spec)
    return label.name, label.randomized


def nope_schedule(name: str, num_layers: int, every: int) -> tuple[str, ...]:
    """``layer_schemes`` with every ``every``-th layer NoPE: layer ``i`` (from 0) is ``"none"`` when
    ``(i + 1) % every == 0`` (transformers ``Llama4TextConfig`` / ``SmolLM3Config``'s default
    ``no_rope_layers`` with ``no_rope_layer_interval = every``), ``name`` otherwise.

    >>> nope_schedule("rope", 4, 2)
    ('rope', 'none', 'rope', 'none')
    """
    if every > num_layers:
        raise ValueError(
            f"'+nope{every}' makes layers {every}, {2 * every}, ... NoPE; a model of {num_layers} layers has "
            f"none of them: use +nope{num_layers} or fewer, or a deeper model (--layers {every} or more; Settings(layers=...) in Python)"
        )
    return tuple("none" if (i + 1) % every == 0 else name for i in range(num_layers))


# -- summaries -------------------------------------------------------------------------------
def _mean(values: list[float | None]) -> float | None:
    """The mean of the values that exist (a position no sample scored is None)."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _split_summary(per_length: dict[str, dict[str, Any]], train_length: int, key: str) -> tuple[Any, Any]:
    inside = [v.get(key) for n, v in per_length.items() if int(n) <= train_length]
    outside = [v.get(key) for n, v in per_length.items() if int(n) > train_length]
    summary = lambda xs: None if not xs or any(x is None for x in xs) else _mean(xs)  # noqa: E731
    return summary(inside), summary(outside)


def _seq2seq_eval(model: TinyTransformer, job: Job) -> dict[str, dict[str, Any]]:
    L = job.train.max_length
    samples = job.extra["samples"]
    lengths = [L] if job.task.kind == "classify" else list(range(job.task.min_length, 2 * L + 1))  # word order: one
    per_length = evaluate_lengths(
        model, job.task, lengths, samples=samples, max_position=job.train.randomized_max_position
    )
    ind, ood = _split_summary(per_length, L, "exact_match")
    return {
        job.variants[0]: {
            "metrics": {"per_length": per_length},
            "in_distribution": ind,
            "out_of_distribution": ood,
            "summary_metric": "exact_match",
        }
    }


def _lm_fields(model: TinyTransformer, task: Text, train_length: int, eval_length: int, samples: int) -> dict[str, Any]:
    reason = unavailable_reason(model, task, eval_length)
    reachable = eval_length if reason is None else model.scheme.config.max_len
    losses = loss_per_position(model, task, reachable, samples=samples)
    ood = _mean(losses[train_length:]) if reason is None else None
    metrics: dict[str, Any] = {"loss_per_position": losses, "eval_length": eval_length}
    if reason is not None:
        metrics["unavailable"] = reason
    return {
        "metrics": metrics,
        "in_distribution": _mean(losses[:train_length]),
        "out_of_distribution": ood,
        "summary_metric": "loss",
    }


def _lm_eval(model: TinyTransformer, job: Job) -> dict[str, dict[str, Any]]:
    L = job.train.max_length
    return {job.variants[0]: _lm_fields(model, job.task, L, job.extra.get("eval_length", 8 * L), job.extra["samples"])}


def _extend_eval(model: TinyTransformer, job: Job) -> dict[str, dict[str, Any]]:
    """Score one RoPE model under each scaling by rebuilding its (weightless) Rope module."""
    from ..schemes.base import create

    L, factor = job.train.max_length, EXTEND_FACTOR
    scalings = {
        "default": None,
        "linear": {"rope_type": "linear", "factor": factor},
        "ntk": {"rope_type": "ntk", "factor": factor},
        "yarn": {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": L},
    }
    trained = model.scheme
    rotary = [block for block in model.blocks if block.attn.encoding is trained]  # a schedule's NoPE layers stay
    out = {}
    for variant in job.variants:
        options = {**dataclasses.asdict(trained.config), "scaling": scalings[variant]}
        rope = create("rope", **options).to(next(model.parameters()).device)
        for block in rotary:
            block.attn.encoding = rope
        out[variant] = _lm_fields(model, job.task, L, factor * L, job.extra["samples"])
        out[variant]["metrics"]["scaling"] = scalings[variant]
    for block in rotary:
        block.attn.encoding = trained
    return out


def _probe_eval(model: TinyTransformer, job: Job) -> dict[str, dict[str, Any]]:
    per_layer = probe_positions(model, job.task, job.train.max_length, samples=job.extra["samples"])
    return {
        job.variants[0]: {
            "metrics": {"per_layer": per_layer},
            "in_distribution": per_layer[-1]["r2"],
            "out_of_distribution": None,
            "summary_metric": "probe_r2_last_layer",
        }
    }


# -- plans -----------------------------------------------------------------------------------
#: Each paper's own settings, which every experiment uses (docs/experiments.md lists them): scheme
#: options given the training length L, and whether each layer gets a module of its own.
def published_settings(name: str, train_length: int) -> tuple[dict[str, Any], bool]:
    """``(scheme_options, per_layer)`` as each scheme's paper and reference code set them.

    * ``fire``: the threshold starts at the training length (Li et al. 2024, section 3.2: the
      progressive interpolation normalises by ``max(L, i)`` with ``L`` the training length), one
      MLP per layer;
    * ``forgetting``: gate bias 0 and weights N(0, 0.02), one gate per layer (Lin et al. 2025, the
      authors' ``forgetting-transformer`` code, ``ForgettingAttentionLayer``);
    * ``cope``: one table per layer (Golovneva et al. 2024, appendix B: a ``CoPE`` module in each
      ``SelfAttn``).
    Every other scheme keeps its defaults and one module shared by the layers."""
    if name == "fire":
        return {"init_L": float(train_length)}, True
    if name == "forgetting":
        return {"bias_init": 0.0, "weight_std": 0.02}, True
    if name == "cope":
        return {}, True
    return {}, False


#: Criteria (:mod:`.criteria`): copy and the other sequence tasks train until exact match at L
#: reaches 0.95; language models until their training loss plateaus (1 % over 200 steps).
SEQ_CRITERION = {"criterion": "exact_match", "target": 0.95, "check_every": 250}
LM_CRITERION = {"criterion": "plateau", "target": 0.01, "check_every": 200}


def _job(
    experiment: str,
    task_name: str,
    spec: str,
    seed: int,
    settings: Settings,
    steps: int,
    model_options: dict[str, Any] | None = None,
    variant: str = "default",
    evaluate: Callable[..., Any] | None = None,
    *,
    length: int | None = None,
    batch_size: int = 64,
    criterion: dict[str, Any] | None = None,
    fixed_length: bool = False,
    **extra: Any,
) -> Job:
    task = get_task(task_name)
    label = parse_label(spec)
    name, randomized = label.name, label.randomized
    L = TEXT_LENGTH if task.kind == "lm" else ADDITION_LENGTH if task.name == "addition" else SEQ2SEQ_LENGTH
    if task.kind == "classify":
        L = task.min_length
    L = length or L
    eval_length = 8 * L if task.kind == "lm" else 2 * L
    eval_length = extra.pop("eval_length", eval_length)
    longest = task.sequence_length(eval_length)
    train = TrainConfig(
        steps=settings.steps or steps,
        batch_size=batch_size,
        seed=seed,
        max_length=L,
        min_length=L if fixed_length else task.min_length,
        device=settings.device,
        warmup=min(100, max(1, (settings.steps or steps) // 10)),
        randomized_max_position=longest if randomized else None,
        **(criterion or {}),
    )
    model_options = dict(model_options or {})
    if settings.layers is not None:
        model_options["num_layers"] = settings.layers
    if label.nope_every is not None:
        depth = model_options.get("num_layers", ModelConfig.num_layers)
        model_options["layer_schemes"] = nope_schedule(name, depth, label.nope_every)
    options, per_layer = published_settings(name, L)
    if options:
        model_options["scheme_options"] = {**options, **model_options.get("scheme_options", {})}
    if per_layer and label.nope_every is None:
        model_options["per_layer"] = True
    # a learned table covers what training shows it (all of [0, longest) when positions are randomized)
    max_len = longest if randomized else task.sequence_length(L)
    model = ModelConfig(vocab_size=task.vocab_size, scheme=name, causal=task.causal, max_len=max_len, **model_options)
    if evaluate is None:
        evaluate = _lm_eval if task.kind == "lm" else _seq2seq_eval
    # sequences scored per length (byte LMs: windows per position; probes: sequences to fit on);
    # stored in each record's config, so quick scores are never reused for a full run
    samples = 16 if evaluate in (_lm_eval, _extend_eval) else 64
    samples *= 1 if settings.quick else 2
    variants = extra.pop("variants", (("randomized" if randomized else variant),))
    return Job(
        experiment,
        task,
        spec,
        seed,
        model,
        train,
        tuple(variants),
        evaluate,
        {"quick": settings.quick, "eval_length": eval_length, "samples": samples, **extra},
    )


#: The length experiment's schemes: Kazemnejad et al. 2023's five (NoPE, sinusoidal/learned APE,
#: RoPE, ALiBi, T5), randomized positions (Ruoss et al. 2023), and the bias family since 2022.
LENGTH_SCHEMES = (
    "none", "sinusoidal", "learned", "rope", "alibi", "t5", "rope+randomized",
    "kerple", "sandwich", "fire", "cope", "forgetting", "dpb",
)  # fmt: skip


def _plan_length(s: Settings) -> list[Job]:
    tasks = s.tasks or ("copy", "text")  # addition, reverse, sort: --tasks
    schemes = s.schemes or LENGTH_SCHEMES
    jobs = []
    for t in tasks:
        lm = get_task(t).kind == "lm"
        # copy: 5 seeds, counted (a seed learns or not); language models: 3 seeds
        seeds = s.seeds or ((0,) if s.quick else (0, 1, 2) if lm else (0, 1, 2, 3, 4))
        steps = (250 if lm else 500) if s.quick else (1500 if lm else 5000)  # budgets: the criterion stops earlier
        criterion = LM_CRITERION if lm else SEQ_CRITERION
        jobs += [
            _job("length", t, spec, seed, s, steps=steps, criterion=criterion)
            for seed in seeds  # seed by seed: a run stopped early holds whole paired seeds
            for spec in schemes
        ]
    return jobs


#: The byte-LM experiment's schemes: the 2022-25 claims about extrapolation (ALiBi, KERPLE, FIRE,
#: forgetting attention) against RoPE and NoPE.
BYTE_LM_SCHEMES = ("alibi", "kerple", "fire", "forgetting", "rope", "none")
BYTE_LM_LENGTH = 128  # L: trained on windows of 128 bytes, scored to 4L = 512 (the 4x the papers test)
BYTE_LM_LAYERS = 4
#: 600 steps of 32 windows (0.75 passes over fortunes' 2.6 MB), the loss checked over windows of 150 steps:
#: sized so that the 18 jobs run in under an hour on one core
BYTE_LM_CRITERION = {"criterion": "plateau", "target": 0.03, "check_every": 150}


def _plan_byte_lm(s: Settings) -> list[Job]:
    from .tasks import TASKS

    language = [name for name, cls in TASKS.items() if cls.kind == "lm" and cls.causal]
    tasks = s.tasks or ("fortunes",)
    if any(t not in language for t in tasks):
        raise ValueError(
            f"the byte-lm experiment trains causal byte LMs; its tasks are {', '.join(language)}, got {list(tasks)}"
        )
    seeds = s.seeds or ((0,) if s.quick else (0, 1, 2))
    # seed by seed: a run stopped early holds whole paired seeds (every scheme of seed 0 first)
    return [
        _job(
            "byte-lm",
            t,
            spec,
            seed,
            s,
            steps=200 if s.quick else 600,
            model_options={"num_layers": BYTE_LM_LAYERS},
            length=BYTE_LM_LENGTH,
            batch_size=32,
            criterion=BYTE_LM_CRITERION,
            fixed_length=True,  # every window L bytes, as the papers train
            eval_length=4 * BYTE_LM_LENGTH,
        )
        for t in tasks
        for seed in seeds
        for spec in s.schemes or BYTE_LM_SCHEMES
    ]


def _plan_learned_vs_sinusoidal(s: Settings) -> list[Job]:
    schemes = s.schemes or ("sinusoidal", "learned")
    seeds = s.seeds or ((0, 1) if s.quick else (0, 1, 2))
    return [
        _job("learned-vs-sinusoidal", t, spec, seed, s, steps=300 if s.quick else 500)
        for t in (s.tasks or ("text",))
        for spec in schemes
        for seed in seeds
    ]


def _plan_add_vs_concat(s: Settings) -> list[Job]:
    from ..schemes.base import available, config_fields, scheme_class

    schemes = s.schemes or ("sinusoidal", "learned")
    absolute = [n for n in available() if "combine" in config_fields(scheme_class(n))]
    wrong = [spec for spec in schemes if parse_scheme(spec)[0] not in absolute]
    if wrong:  # before anything trains: the concat half of each job would fail after the add half
        raise ValueError(
            f"add-vs-concat adds or concatenates an absolute code; {wrong} cannot be concatenated "
            f"(schemes that can: {', '.join(absolute)})"
        )
    seeds = s.seeds or (0,)
    jobs = []
    for t in s.tasks or ("text",):
        for spec in schemes:
            for seed in seeds:
                for combine in ("add", "concat"):
                    options = {"combine": combine} if combine == "concat" else {}
                    if combine == "concat":  # half the width for tokens, half for the code
                        options["dim"] = 32
                    job = _job("add-vs-concat", t, spec, seed, s, steps=300 if s.quick else 400, variant=combine)
                    job.model = replace(job.model, scheme_options=options)
                    jobs.append(job)
    return jobs


def _plan_probe(s: Settings) -> list[Job]:
    if s.tasks:
        raise ValueError(
            f"the probe experiment trains on 'text' (causal) and 'text-mlm' (bidirectional) itself; "
            f"it takes no --tasks, got {list(s.tasks)}"
        )
    schemes = s.schemes or ("none", "sinusoidal", "rope")
    seeds = s.seeds or (0,)
    steps = 200 if s.quick else 300
    jobs = []
    for seed in seeds:
        for spec in schemes:
            for residual in (True, False):
                job = _job(
                    "probe",
                    "text",
                    spec,
                    seed,
                    s,
                    steps,
                    {"num_layers": 3, "residual": residual},
                    variant="residual" if residual else "no-residual",
                    evaluate=_probe_eval,
                )
                jobs.append(job)
        if "none" in schemes:
            jobs.append(
                _job(
                    "probe",
                    "text-mlm",
                    "none",
                    seed,
                    s,
                    steps,
                    {"num_layers": 3},
                    variant="bidirectional",
                    evaluate=_probe_eval,
                )
            )
    return jobs


def _plan_extend(s: Settings) -> list[Job]:
    schemes = s.schemes or ("rope",)
    if any(parse_label(spec) != SchemeLabel("rope") for spec in schemes):
        raise ValueError(f"the extend experiment rescales RoPE; its only scheme is 'rope', got {list(schemes)}")
    from .tasks import TASKS

    language = [name for name, cls in TASKS.items() if cls.kind == "lm"]
    if any(t not in language for t in s.tasks or ()):
        raise ValueError(
            f"the extend experiment scores a language model's loss per position; its tasks are "
            f"{', '.join(language)}, got {list(s.tasks or ())}"
        )
    return [
        _job(
            "extend",
            t,
            "rope",
            seed,
            s,
            steps=400 if s.quick else 1000,
            evaluate=_extend_eval,
            variants=("default", "linear", "ntk", "yarn"),
        )
        for t in (s.tasks or ("text",))
        for seed in (s.seeds or (0,))
    ]


EXPERIMENTS: dict[str, tuple[str, Callable[[Settings], list[Job]]]] = {
    "length": (
        "exact match per length up to 2L and LM loss per position up to 8L (Kazemnejad et al. 2023; Press et al. 2022)",
        _plan_length,
    ),
    "learned-vs-sinusoidal": (
        "in-distribution quality over seeds (Vaswani et al. 2017, Table 3 row E)",
        _plan_learned_vs_sinusoidal,
    ),
    "add-vs-concat": (
        "adding the code to the token embedding against concatenating it, same width",
        _plan_add_vs_concat,
    ),
    "probe": (
        "linear probe of absolute position per layer; residuals; causal vs bidirectional (Haviv et al. 2022)",
        _plan_probe,
    ),
    "extend": ("a RoPE LM past its training length: interpolation, NTK-aware, YaRN", _plan_extend),
    "byte-lm": (
        "4-layer byte LMs on Debian's fortunes at L = 128, loss per position to 4L (Press et al. 2022; Chi et al. 2022; "
        "Li et al. 2024; Lin et al. 2025)",
        _plan_byte_lm,
    ),
}


def plan(name: str, settings: Settings) -> list[Job]:
    """The jobs of experiment ``name``; unknown names raise a ValueError listing the choices."""
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose one of: {', '.join(EXPERIMENTS)}")
    if settings.layers is not None and (
        isinstance(settings.layers, bool) or not isinstance(settings.layers, int) or settings.layers <= 0
    ):
        raise ValueError(f"layers must be a positive integer (the depth of every model), got {settings.layers!r}")
    for task in settings.tasks or ():
        get_task(task)
    return EXPERIMENTS[name][1](settings)
