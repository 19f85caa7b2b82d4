"""Timing with ``torch.utils.benchmark`` and the share of the CPU other processes took meanwhile.

On a shared machine a timing is only as good as the quiet it was taken in: every
:class:`Measurement` carries ``other_cpu``, the fraction of all cores that *other* processes used
while it ran (from ``/proc/stat`` minus this process's own CPU time; None off Linux). Results with
``other_cpu`` above ~0.1 should be discarded or re-run; ratios taken in one process hold better
than absolute times.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = [
    "Measurement",
    "measure",
    "measure_paired",
    "measure_paired_many",
    "Paired",
    "CpuProbe",
    "synchronize",
    "device_name",
    "resolve_device",
]


def synchronize(device: torch.device | str) -> None:
    """Wait for the work queued on ``device`` (a no-op on the CPU), before reading a clock.

    ``torch.utils.benchmark.Timer`` does this itself around every timed block."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type != "cpu" and hasattr(torch, "accelerator") and torch.accelerator.is_available():
        torch.accelerator.synchronize()


def resolve_device(device: torch.device | str) -> torch.device:
    """``device`` as a ``torch.device`` that works here; ValueError naming what is accepted if not."""
    import torch

    usable = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    try:
        dev = torch.device(device)
        if dev.type == "meta":  # tensors without data: nothing runs
            raise ValueError("meta tensors hold no data")
        torch.empty(0, device=dev)
    except (RuntimeError, AssertionError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"device {str(device)!r} is not usable here ({first}); usable here: {', '.join(usable)}"
        ) from None
    return dev


def device_name(device: torch.device | str) -> str:
    """``"cpu"`` or the accelerator's name, e.g. ``"cuda: NVIDIA H100 80GB HBM3"``."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda: {torch.cuda.get_device_name(device)}"
    return device.type


class CpuProbe:
    """Measures other processes' share of the machine's CPUs between :meth:`start` and :meth:`stop`."""

    def __init__(self) -> None:
        self._start: tuple[float, float, float] | None = None

    @staticmethod
    def _busy_seconds() -> float | None:
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    def start(self) -> None:
        t = os.times()
        self._start = (time.perf_counter(), t.user + t.system, self._busy_seconds() or 0.0)

    def stop(self) -> float | None:
        """Other processes' CPU seconds / (wall seconds * CPUs), in [0, 1]; None if unknown."""
        busy = self._busy_seconds()
        if self._start is None or busy is None:
            return None
        wall0, own0, busy0 = self._start
        t = os.times()
        wall = time.perf_counter() - wall0
        other = (busy - busy0) - (t.user + t.system - own0)
        cpus = os.cpu_count() or 1
        return max(0.0, min(1.0, other / max(wall * cpus, 1e-9)))


@dataclass
class Measurement:
    """Median seconds per call of one case, with its spread and the load it was taken under."""

    name: str
    median_s: float
    iqr_s: float
    runs: int
    num_threads: int
    other_cpu: float | None

    def as_dict(self) -> dict:
        return asdict(self)


def measure(
    name: str, fn: Callable[[], object], *, num_threads: int = 1, min_run_time: float = 0.5, warmup: int = 1
) -> Measurement:
    """Median time of ``fn()`` by ``torch.utils.benchmark.Timer.blocked_autorange``.

    ``num_threads`` is passed explicitly (the Timer otherwise runs with one thread whatever torch's
    setting); ``warmup`` calls run first so that compilation and caches are not in the timing.
    """
    from torch.utils.benchmark import Timer

    for _ in range(warmup):
        fn()
    probe = CpuProbe()
    probe.start()
    m = Timer(stmt="fn()", globals={"fn": fn}, num_threads=num_threads).blocked_autorange(min_run_time=min_run_time)
    other = probe.stop()
    return Measurement(
        name=name,
        median_s=float(m.median),
        iqr_s=float(m.iqr),
        runs=len(m.times),
        num_threads=num_threads,
        other_cpu=other,
    )


@dataclass
class Paired:
    """A case timed in alternation with its floor: both medians and the median of the per-round
    ratios (``x_floor``), which is what to quote on a machine whose speed drifts."""

    case: Measurement
    floor: Measurement
    x_floor: float
    rounds: int
    #: fastest case round over fastest floor round: the cost when neither was disturbed (noise
    #: only ever adds time); on this shared host memory-heavy passes have slow phases of seconds
    x_floor_best: float = float("nan")


def measure_paired(
    name: str,
    fn: Callable[[], object],
    floor_fn: Callable[[], object],
    *,
    num_threads: int = 1,
    min_run_time: float = 0.5,
    block_s: float = 0.02,
    min_rounds: int = 7,
) -> Paired:
    """Time ``fn`` and ``floor_fn`` in alternating blocks of ~``block_s`` each (``Timer.timeit``)
    for at least ``min_rounds`` rounds and ``2 * min_run_time`` seconds in all (three rounds
    suffice once ``10 * min_run_time`` have passed: a case at 50x the floor needs no more).

    A shared machine's memory bandwidth drifts by tens of percent over seconds (other tenants);
    timing a case long after its floor turns that drift into the ratio. Alternating short blocks
    puts both under the same conditions, and the median of the per-round ratios discards rounds
    that a burst of load hit on one side only.
    """
    return measure_paired_many(
        {name: fn}, floor_fn, num_threads=num_threads, min_run_time=min_run_time, block_s=block_s, min_rounds=min_rounds
    )[name]


def measure_paired_many(
    fns: dict[str, Callable[[], object]],
    floor_fn: Callable[[], object],
    *,
    num_threads: int = 1,
    min_run_time: float = 0.5,
    block_s: float = 0.02,
    min_rounds: int = 7,
) -> dict[str, Paired]:
    """:func:`measure_paired` for several cases against one floor, round-robin: each round times a
    block of every unfinished case, each followed by a block of the floor, until each case has
    what :func:`measure_paired` asks for (fast cases keep going while slow ones finish).

    On this shared host a slow phase lasts seconds; timing cases one after another lets a phase
    cover every round of one case (a 0.9x pass read 1.5x in one run). Round-robin spreads it over
    a few rounds of every case, which the per-case medians of per-round ratios then discard; the
    order turns by one case each round, so that no case always follows the same one.
    ``other_cpu`` is measured over the whole group.
    """
    import statistics

    from torch.utils.benchmark import Timer

    floor_timer = Timer(stmt="f()", globals={"f": floor_fn}, num_threads=num_threads)
    timers, numbers = {}, {}
    for name, fn in {**fns, "floor": floor_fn}.items():  # warm-up (compilation, caches, first-touch
        fn()  # page faults); calls per block from one call
        timer = floor_timer if name == "floor" else Timer(stmt="f()", globals={"f": fn}, num_threads=num_threads)
        timers[name], numbers[name] = timer, max(1, int(block_s / max(timer.timeit(1).median, 1e-9)))
    samples = {name: ([], []) for name in fns}  # per case: its rounds, the floor rounds beside them
    spent = dict.fromkeys(fns, 0.0)
    probe = CpuProbe()
    probe.start()
    active = list(fns)
    turn = 0
    while active:
        # each round starts one case further on: whatever a case leaves behind (a peer's hundreds
        # of MiB freed) slows the block after it, and with one fixed order that was always the
        # same case's (bf16 half pairs out= at L = 2048 read 1.37 with the best round at 0.99)
        start = turn % len(active)
        turn += 1
        for name in active[start:] + active[:start]:
            for i, key in enumerate((name, "floor")):
                per_call = timers[key].timeit(numbers[key]).median
                samples[name][i].append(per_call)
                spent[name] += per_call * numbers[key]
            rounds, total = len(samples[name][0]), spent[name]
            if (
                (rounds >= min_rounds and total >= 2 * min_run_time)
                or (rounds >= 3 and total >= 10 * min_run_time)
                or rounds >= 1000
            ):
                active.remove(name)  # enough rounds and time; a slow case (a peer at 50x) stops after three rounds
    other = probe.stop()

    def summary(label: str, times: list[float], number: int) -> Measurement:
        q = statistics.quantiles(times, n=4) if len(times) > 1 else [times[0]] * 3
        return Measurement(
            name=label,
            median_s=statistics.median(times),
            iqr_s=q[2] - q[0],
            runs=len(times) * number,
            num_threads=num_threads,
            other_cpu=other,
        )

    result = {}
    for name, (case, floor) in samples.items():
        ratios = [a / b for a, b in zip(case, floor)]
        result[name] = Paired(
            case=summary(name, case, numbers[name]),
            floor=summary("floor", floor, numbers["floor"]),
            x_floor=statistics.median(ratios),
            rounds=len(ratios),
            x_floor_best=min(case) / min(floor),
        )
    return result
