"""The training loop: AdamW, warm-up then cosine decay, clipping, checkpoints, and DDP when launched so.

Shape legend: ``b`` batch (global, split across ranks), ``s`` sequence, ``v`` vocabulary.

Every batch is drawn from a generator seeded by ``(seed, step)`` alone, and the checkpoint holds the
model, the optimizer state and the losses so far; a run resumed from its checkpoint therefore
repeats the uninterrupted one bit for bit (with one thread). Under ``torchrun`` (``WORLD_SIZE`` set)
each rank draws the same global batch, trains on its slice, and DistributedDataParallel averages the
gradients: the same training as one process with the global batch, up to float summation order.
The recipe is one that teaches every scheme at this size: lr 3e-3, AdamW, linear warm-up, cosine decay to a tenth, gradient clipping at 1.0.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import io
import math
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as nnf
from torch import Tensor, nn

from .. import _interrupts
from .. import functional as F
from .._files import replaced_whole
from .criteria import criterion_met
from .model import ModelConfig, TinyTransformer
from .tasks import IGNORE, Batch, Task

__all__ = [
    "TrainConfig",
    "TrainResult",
    "train",
    "batch_for_step",
    "set_threads",
    "distributed_context",
    "rank_device",
    "Interrupted",
    "terminate_as_interrupt",
    "check_signalled",
    "checkpoint_config",
    "config_differences",
    "describe_differences",
    "load_checkpoint",
]

StepCallback = Callable[[int, int, float, float], None]  # (step, total steps, loss, steps per second)


#: Largest seed: each batch's generator is seeded by ``seed * 1_000_003 + step``, which must stay
#: within the 64-bit seed torch takes.
MAX_SEED = 2**32 - 1


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 1000
    batch_size: int = 64  # global batch: split evenly across DDP ranks
    lr: float = 3e-3
    weight_decay: float = 0.01
    warmup: int = 100  # linear warm-up steps, then cosine decay to lr / 10
    clip: float = 1.0
    seed: int = 0
    min_length: int = 1  # task lengths drawn uniformly in [min_length, max_length] per batch
    max_length: int = 16  # the training length L
    randomized_max_position: int | None = None  # Ruoss et al. 2023: random ordered positions below this
    checkpoint_every: int = 250
    device: str = "cpu"
    # stop before the budget once the task is learned (:mod:`.criteria`): "exact_match" (at the longest
    # training length, >= target) or "plateau" (mean training loss of the last check_every steps within
    # target, relative, of the check_every before); None: train the whole budget
    criterion: str | None = None
    target: float | None = None
    check_every: int | None = None  # steps between checks of the criterion

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "min_length", "max_length", "checkpoint_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.min_length > self.max_length:
            raise ValueError(f"min_length={self.min_length} exceeds max_length={self.max_length}")
        if not self.lr > 0 or not self.clip > 0 or self.warmup < 0:
            raise ValueError(f"lr and clip must be > 0 and warmup >= 0, got {self.lr}, {self.clip}, {self.warmup}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed must be an integer in 0..{MAX_SEED} (2^32 - 1), got {self.seed!r}")
        if self.criterion is not None:
            from .criteria import check_criterion_config

            check_criterion_config(self.criterion, self.target, self.check_every)


@dataclass
class TrainResult:
    model: TinyTransformer
    losses: list[float] = field(default_factory=list)  # global mean training loss per step
    wall_time_s: float = 0.0  # time spent training, over every run a resumed run continues
    resumed_from: int = 0  # step the run restarted from (0: fresh)
    criterion_met_at: int | None = None  # the step whose check met TrainConfig.criterion (None: never)


def set_threads(threads: int | None) -> None:
    """Pin torch's intra-op threads (1 by default in the experiments: shared machines, bitwise repeats)."""
    if threads is not None:
        torch.set_num_threads(int(threads))


def distributed_context(device: str | torch.device = "cpu") -> tuple[int, int]:
    """``(rank, world_size)``; joins the process group when launched by torchrun.

    The backend follows the training ``device``, not the machine: gloo for CPU training (also on
    a machine with GPUs), nccl for CUDA, each rank on the GPU of its ``LOCAL_RANK``. Once joined,
    later calls return the group's rank and size whatever ``device`` they name.
    """
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return 0, 1
    if not dist.is_initialized():
        cuda = torch.device(device).type == "cuda"
        if cuda:
            torch.cuda.set_device(rank_device(device))
        dist.init_process_group("nccl" if cuda else "gloo")
    return dist.get_rank(), dist.get_world_size()


def rank_device(device: str | torch.device) -> torch.device:
    """The device this process trains on: under torchrun, ``"cuda"`` means the GPU of ``LOCAL_RANK``."""
    device = torch.device(device)
    if device.type != "cuda" or int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return device
    index = device.index if device.index is not None else int(os.environ.get("LOCAL_RANK", "0"))
    count = torch.cuda.device_count()
    if index >= count:
        raise ValueError(
            f"rank {os.environ.get('RANK', '?')} wants cuda:{index}, but this machine has {count} "
            f"GPU(s); launch at most {count} processes per node with device='cuda', "
            f"or train on device='cpu' (gloo)"
        )
    return torch.device("cuda", index)


def learning_rate(step: int, config: TrainConfig) -> float:
    """Linear warm-up to ``lr``, then cosine decay to ``lr / 10`` at the last step."""
    if step < config.warmup:
        return config.lr * (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    return config.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))))


def batch_for_step(task: Task, config: TrainConfig, step: int) -> tuple[Batch, Tensor | None]:
    """The global batch of ``step`` and its positions (None: 0..s-1), a function of (seed, step) only."""
    generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
    length = int(torch.randint(config.min_length, config.max_length + 1, (1,), generator=generator))
    batch = task.sample(config.batch_size, length, generator)
    positions = None
    if config.randomized_max_position is not None:
        randomized = getattr(F, "randomized_positions", None)
        if randomized is None:
            raise ValueError(
                "randomized positions need posenc.functional.randomized_positions, which this version of posenc lacks"
            )
        seq = batch.inputs.shape[1]
        positions = randomized(config.batch_size, seq, config.randomized_max_position, generator=generator)  # [b, s]
    return batch, positions


def loss_fn(logits: Tensor, targets: Tensor, reduction: str = "mean") -> Tensor:
    """Cross-entropy over the scored targets (``IGNORE`` elsewhere): their mean, or their sum."""
    return nnf.cross_entropy(
        logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction=reduction
    )  # [b*s, v] vs [b*s]


def checkpoint_config(model_config: ModelConfig, config: TrainConfig, task: Task) -> dict[str, Any]:
    """What a checkpoint stores as its ``config``: a checkpoint resumes only the run that wrote it."""
    return {
        "model": _plain(dataclasses.asdict(model_config)),
        "train": _plain(dataclasses.asdict(config)),
        "task": task.name,
    }


#: Config entries that do not change what a run measures: a record made with other values still counts.
_IRRELEVANT = {("train", "device"), ("train", "checkpoint_every")}


def describe_differences(diff: list[str]) -> str:
    """The first few of :func:`config_differences`, for an error message."""
    return "; ".join(diff[:4]) + ("; ..." if len(diff) > 4 else "")


def config_differences(stored: Any, wanted: Any, path: tuple = ()) -> list[str]:
    """``"train.steps: 700 stored, 50 asked"`` for each entry where two configs differ."""
    if path[:2] in _IRRELEVANT:
        return []
    if isinstance(stored, dict) and isinstance(wanted, dict):
        # an entry added after a record was made, asked at its default (None or False), matches it
        added = {k for k in set(wanted) - set(stored) if wanted[k] is None or wanted[k] is False}
        return [
            d
            for k in sorted((set(stored) | set(wanted)) - added, key=str)
            for d in config_differences(stored.get(k), wanted.get(k), (*path, k))
        ]
    if stored != wanted:
        return [f"{'.'.join(map(str, path))}: {stored!r} stored, {wanted!r} asked"]
    return []


def _plain(value: Any) -> Any:
    """Mappings and tuples as plain dicts and lists (what JSON and ``weights_only`` loading accept)."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """``torch.save`` into memory, then the bytes to a temporary file, flushed to the disk and renamed
    into place (:func:`posenc._files.replaced_whole`): a kill or a power cut never leaves half a
    checkpoint. Writing the bytes with a plain ``write`` makes a full disk the OSError it is (ENOSPC,
    "No space left on device"): torch's own writer reports it as a RuntimeError of its zip code.

    Any failure is an OSError naming the file."""
    buffer = io.BytesIO()
    try:
        torch.save(state, buffer)
    except RuntimeError as err:  # not a write: something in ``state`` torch cannot store
        raise OSError(errno.EIO, f"cannot save a checkpoint ({_short_reason(err)})", str(path)) from None
    path.parent.mkdir(parents=True, exist_ok=True)
    with replaced_whole(path) as tmp, open(tmp, "wb") as handle:
        handle.write(buffer.getbuffer())


def _short_reason(err: BaseException) -> str:
    """``Type: first sentence`` of ``err``, without the advice torch appends to a refused load (to
    load the file with ``weights_only=False``, which would run whatever code the file holds)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))  # torch bolds parts of its messages
    text = text.split("WeightsUnpickler error:", 1)[-1]  # what the safe unpickler met, after the advice
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    sentence = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    if "weights_only" in sentence or not sentence:
        return type(err).__name__
    return f"{type(err).__name__}: {sentence}"


def load_checkpoint(path: Path, device: torch.device) -> dict[str, Any]:
    """A checkpoint written by :func:`save_checkpoint`, loaded with ``weights_only=True`` (tensors and
    plain containers only: nothing in it executes); a ValueError naming the file when it is not one."""
    try:
        state = torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # pickle, zip and torch errors alike: the file is not a checkpoint of ours
        raise ValueError(f"checkpoint {path} is unreadable ({_short_reason(err)}); delete it to start over") from None
    kinds = {"config": dict, "model": dict, "optimizer": dict, "step": int, "losses": list}
    if (
        not isinstance(state, dict)
        or any(not isinstance(state.get(k), kind) for k, kind in kinds.items())
        or isinstance(state["step"], bool)
        or not 0 <= state["step"] == len(state["losses"])
        or not all(isinstance(v, float) for v in state["losses"])
    ):
        raise ValueError(
            f"checkpoint {path} is not a posenc training checkpoint (it needs a config, model and optimizer "
            "state, the step and one loss per step); delete it to start over"
        )
    return state


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM during a run. Raised by :func:`train` after the step in progress,
    once a checkpoint of it is saved; by :func:`terminate_as_interrupt` at once outside training
    (and by :func:`check_signalled`), with ``step`` and ``checkpoint`` None. ``signum`` says which
    signal it was."""

    def __init__(self, step: int | None, checkpoint: Path | None, signum: int = signal.SIGINT) -> None:
        super().__init__(step, checkpoint, signum)
        self.step, self.checkpoint, self.signum = step, checkpoint, signum


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()  # the only thread that may set handlers


#: The first signal that arrived while a :func:`terminate_as_interrupt` block runs (0: none yet), and
#: how many such blocks are open. The exception a handler raises goes off wherever the main thread
#: is, and there it can be dropped: Python drops one raised inside a finalizer, and mpmath runs
#: ``try: import gmpy2 ... except: pass`` when it is imported, which torch does (through sympy) on
#: the first ``torch.optim.AdamW``: Ctrl-C then was lost and the run went on to exit 0. The
#: training loop and :func:`check_signalled` look here, so a signal ends the run all the same.
_signalled = {"signum": 0, "blocks": 0}


def _interrupt(signum: int, frame: Any) -> None:
    _signalled["signum"] = _signalled["signum"] or signum
    _interrupts.send_again(signum, _interrupt)  # until the command takes it: this exception may be lost
    raise Interrupted(None, None, signum)


def check_signalled() -> None:
    """Raise :class:`Interrupted` when a signal arrived in the :func:`terminate_as_interrupt` block
    that runs, whether or not its exception came through."""
    if _signalled["blocks"] and _signalled["signum"]:
        raise Interrupted(None, None, _signalled["signum"])


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """For the duration, SIGTERM (kill, timeout, Slurm, docker stop) raises :class:`Interrupted` as
    Ctrl-C does, instead of ending the process at once: what catches Ctrl-C then saves work on
    SIGTERM too. Each signal is also noted (see :func:`check_signalled`). The previous handlers are
    restored after; off the main thread nothing changes, a signal that is ignored stays ignored, and
    a Ctrl-C handler of the caller's own (not Python's default) is kept."""
    if not _main_thread():
        yield
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    taken = [signal.SIGTERM] if previous[signal.SIGTERM] not in (None, signal.SIG_IGN) else []
    if previous[signal.SIGINT] in (signal.default_int_handler, _interrupt):
        taken.append(signal.SIGINT)
    if not _signalled["blocks"]:  # the outermost block: no signal has arrived in it yet
        _signalled["signum"] = 0
        _interrupts.reset()
    _signalled["blocks"] += 1
    try:
        for signum in taken:
            signal.signal(signum, _interrupt)
        yield
    finally:
        _signalled["blocks"] -= 1
        if not _signalled["blocks"]:
            _interrupts.reset()  # nothing is sent again after the block
        for signum in taken:
            signal.signal(signum, previous[signum])


@contextlib.contextmanager
def _deferred_interrupt(enabled: bool) -> Iterator[dict[str, int]]:
    """SIGINT or SIGTERM sets a flag (the signal's number) that the training loop reads after each
    whole step, so that the checkpoint it then saves holds one consistent step; a second one does
    what it did before (by default Ctrl-C interrupts at once, SIGTERM ends the process). Off the main thread
    and under several ranks (which would stop at different steps), both keep their usual effect;
    a signal that is ignored stays ignored. A signal that arrived earlier in the
    :func:`terminate_as_interrupt` block (its exception dropped on the way) sets the flag at once."""
    state = {"hit": _signalled["signum"] if enabled and _signalled["blocks"] else 0}
    if state["hit"]:
        _interrupts.acknowledge()  # training takes it over: the step in progress is saved, then it stops
    signums = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in signums} if _main_thread() else {}
    caught = [signum for signum, was in previous.items() if was is not None and was is not signal.SIG_IGN]
    if not enabled or not caught:
        yield state
        return

    def handler(signum: int, frame: Any) -> None:
        state["hit"] = state["hit"] or signum
        _interrupts.acknowledge()
        signal.signal(signum, previous[signum])  # a second one does what it did before

    for signum in caught:
        signal.signal(signum, handler)
    try:
        yield state
    finally:
        for signum in caught:
            signal.signal(signum, previous[signum])


def train(
    model_config: ModelConfig,
    task: Task,
    config: TrainConfig,
    *,
    checkpoint: Path | str | None = None,
    on_step: StepCallback | None = None,
) -> TrainResult:
    """Train a :class:`TinyTransformer` on ``task``; resume from ``checkpoint`` when it exists."""
    if model_config.causal != task.causal:
        kind = "a causal decoder" if task.causal else "a bidirectional encoder"
        raise ValueError(f"task {task.name!r} is posed for {kind}; set causal={task.causal}")
    rank, world = distributed_context(config.device)
    if config.batch_size % world:
        raise ValueError(f"batch_size={config.batch_size} must divide evenly across {world} ranks")
    device = rank_device(config.device)
    torch.manual_seed(config.seed)
    model = TinyTransformer(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(0.9, 0.98), weight_decay=config.weight_decay)
    meta = checkpoint_config(model_config, config, task)
    result, start = TrainResult(model), 0
    path = Path(checkpoint) if checkpoint is not None else None
    earlier = 0.0  # training time of the runs this one resumes
    if path is not None and path.exists():
        state = load_checkpoint(path, device)
        diff = config_differences(state["config"], meta)
        if diff:
            raise ValueError(
                f"checkpoint {path} was written with another configuration ({describe_differences(diff)}); "
                "delete it to start over"
            )
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as err:
            raise ValueError(
                f"checkpoint {path} does not fit this model ({str(err).splitlines()[0]}); delete it to start over"
            ) from None
        start, result.losses, result.resumed_from = state["step"], list(state["losses"]), state["step"]
        earlier = float(state.get("wall_time_s", 0.0))
        met = state.get("criterion_met_at")
        result.criterion_met_at = int(met) if isinstance(met, int) and not isinstance(met, bool) else None
    trained: nn.Module = model
    if world > 1:
        trained = nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    per_rank = config.batch_size // world
    model.train()
    began = time.perf_counter()
    if on_step is not None and start:
        on_step(start, config.steps, result.losses[-1] if result.losses else float("nan"), 0.0)
    last = config.steps if result.criterion_met_at is None else start  # a met criterion trains no further
    with _deferred_interrupt(world == 1) as interrupt:
        for step in range(start, last):
            batch, positions = batch_for_step(task, config, step)
            rows = slice(rank * per_rank, (rank + 1) * per_rank)
            inputs, targets = batch.inputs[rows].to(device), batch.targets[rows].to(device)  # [b/world, s]
            if positions is not None:
                positions = positions[rows].to(device)  # [b/world, s]
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, config)
            if world > 1:  # the mean over the global batch's scored tokens, which ranks may hold unequally (text-mlm)
                import torch.distributed as dist

                scored = (targets != IGNORE).sum().to(torch.float64)
                dist.all_reduce(scored)
                loss = (
                    loss_fn(trained(inputs, positions), targets, reduction="sum")
                    * (world / scored.clamp(min=1)).float()
                )
            else:
                loss = loss_fn(trained(inputs, positions), targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), config.clip)
            optimizer.step()
            value = loss.detach()
            if world > 1:
                dist.all_reduce(value)  # ranks' shares of the global mean: their sum is it
                value = value / world
            result.losses.append(float(value))
            done = step + 1
            checked = config.criterion is not None and done % config.check_every == 0
            if checked and criterion_met(model, task, config, result.losses):
                result.criterion_met_at = done
            met = result.criterion_met_at is not None
            save = done % config.checkpoint_every == 0 or done == config.steps or interrupt["hit"] or met
            if path is not None and rank == 0 and save:
                save_checkpoint(
                    path,
                    {
                        "config": meta,
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "step": done,
                        "losses": result.losses,
                        "wall_time_s": earlier + time.perf_counter() - began,
                        "criterion_met_at": result.criterion_met_at,
                    },
                )
            if interrupt["hit"]:
                raise Interrupted(done, path, interrupt["hit"])
            if on_step is not None:
                elapsed = time.perf_counter() - began
                on_step(done, config.steps, result.losses[-1], (done - start) / elapsed if elapsed > 0 else 0.0)
            if met:
                break
    if interrupt["hit"]:  # after the last step's check, or while the handlers were put back: its checkpoint is saved
        raise Interrupted(config.steps, path, interrupt["hit"])
    result.wall_time_s = earlier + time.perf_counter() - began
    model.eval()
    return result
