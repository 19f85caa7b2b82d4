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

__all__ = ["Measurement", "measure", "CpuProbe"]


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


def measure(name: str, fn: Callable[[], object], *, num_threads: int = 1, min_run_time: float = 0.5,
            warmup: int = 1) -> Measurement:
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
    return Measurement(name=name, median_s=float(m.median), iqr_s=float(m.iqr), runs=len(m.times),
                       num_threads=num_threads, other_cpu=other)
