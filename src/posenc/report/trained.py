"""The encodings ``posenc experiment`` trained, for the atlas's "after training" figures.

The runner saves each run's encoding as ``RUNS/encodings/<experiment>__<task>__<scheme>__seed<N>.pt``
(``__<variant>`` appended for a job that trains a model per variant; ``+randomized`` written
``_randomized``), read back by :func:`posenc.experiments.runner.load_encoding`. A folder of
records, such as the repository's ``docs/experiments``, holds one runs folder per experiment:
their encodings are found too, each group named with its folder. A file that cannot be read
becomes a problem in words, never an error: the atlas still gets built.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "ENCODINGS",
    "TrainedRun",
    "find_encodings",
    "trained_bias_figures",
    "trained_table_figures",
    "TRAINED_AFTER",
    "MAX_GROUPS",
]

#: The folder under a runs folder that holds the trained encodings.
ENCODINGS = "encodings"
#: The figure (kind) of each scheme after which the atlas places its trained encodings: the bias
#: figure for bias schemes, and for the schemes with a learned table that is not a bias these.
TRAINED_AFTER = {"learned": "heatmap", "shaw": "logits"}
#: At most this many (experiment, task) groups are drawn per scheme; the others are named in a note.
MAX_GROUPS = 6
_NAME = re.compile(
    r"^(?P<experiment>[^_]+(?:_[^_]+)*)__(?P<task>.+?)__(?P<spec>.+?)__seed(?P<seed>\d+)(?:__(?P<variant>.+))?$"
)


@dataclass(frozen=True)
class TrainedRun:
    """One saved encoding: where it is, and the run it came from (parsed from the file name)."""

    path: Path
    experiment: str
    task: str
    spec: str  # the scheme as the file names it ("alibi", "alibi_randomized")
    seed: int
    variant: str = ""
    folder: str = ""  # the runs folder's name inside a folder of records ("" for a runs folder itself)

    @property
    def group(self) -> str:
        """``experiment/task`` (with the randomized positions and the variant when there are any),
        after ``folder:`` for a run found in a folder of records."""
        extra = "".join(f" +{part}" for part in re.findall(r"_(randomized|nope\d+)", self.spec))
        where = f"{self.folder}: " if self.folder else ""
        return f"{where}{self.experiment}/{self.task}{extra}" + (f" [{self.variant}]" if self.variant else "")

    @property
    def file(self) -> str:
        """The file's name from the folder given: ``encodings/NAME.pt`` or ``FOLDER/encodings/NAME.pt``."""
        return f"{self.folder}/{ENCODINGS}/{self.path.name}" if self.folder else f"{ENCODINGS}/{self.path.name}"


def _scheme_of(spec: str, names: set[str]) -> str | None:
    """The registered scheme a file's label names: ``rope``, ``rope_randomized`` and ``rope_nope4``
    (``rope+nope4``: a layer schedule) are all ``rope``'s runs."""
    if spec in names:
        return spec
    base = re.sub(r"(_randomized|_nope\d+)+$", "", spec)
    return base if base in names else None


def find_encodings(runs_dir: str | Path) -> tuple[dict[str, list[TrainedRun]], list[str]]:
    """``({scheme: [TrainedRun, ...]}, problems)`` for every ``*.pt`` in ``runs_dir/encodings`` and
    in ``runs_dir/*/encodings`` (a folder of records: one runs folder per experiment), sorted by
    group, then seed; names that do not parse or name no registered scheme are problems."""
    from ..schemes import available

    runs_dir = Path(runs_dir)
    folders = [(runs_dir / ENCODINGS, "")]
    if runs_dir.is_dir():
        folders += [(sub / ENCODINGS, sub.name) for sub in sorted(runs_dir.iterdir()) if (sub / ENCODINGS).is_dir()]
    names = set(available())
    found: dict[str, list[TrainedRun]] = {}
    problems = []
    for folder, name in folders:
        if not folder.is_dir():
            continue
        where = f"{name}/{ENCODINGS}" if name else ENCODINGS
        for path in sorted(folder.glob("*.pt")):
            match = _NAME.match(path.stem)
            scheme = _scheme_of(match["spec"], names) if match else None
            if match is None or scheme is None:
                problems.append(f"{where}/{path.name}: not named <experiment>__<task>__<scheme>__seed<N>.pt; skipped")
                continue
            seed, variant = int(match["seed"]), match["variant"] or ""
            run = TrainedRun(path, match["experiment"], match["task"], match["spec"], seed, variant, name)
            found.setdefault(scheme, []).append(run)
    for runs in found.values():
        runs.sort(key=lambda r: (r.group, r.seed))
    return found, problems


def trained_bias_figures(
    scheme: str, runs: list[TrainedRun], *, length: int = 256, load: Callable[[Path], Any] | None = None
) -> tuple[list[tuple[Any, str]], list[str]]:
    """``([(figure, caption), ...], problems)``: the bias against distance of ``scheme``'s trained
    encodings, one figure per (experiment, task) group (at most :data:`MAX_GROUPS`), every seed of
    the group in it (the lowest bold). ``load`` reads a file (default: ``load_encoding``)."""
    from ..analysis.bias import bias_against_distance
    from ..viz.bias import bias_figure

    if load is None:
        from ..experiments.runner import load_encoding as load
    groups = _groups(runs)
    figures, problems = [], []
    for group, members in list(groups.items())[:MAX_GROUPS]:
        data, seeds, learned = [], [], False
        for run in members:
            try:
                module = load(run.path)
                if module.name != scheme:
                    raise ValueError(f"it holds a {module.name!r} encoding, not {scheme!r}")
                data.append(bias_against_distance(module, length=length))
                seeds.append(run.seed)
                learned = learned or any(p.numel() for p in module.parameters())
            except Exception as err:  # a broken file must not sink the atlas; it is reported
                problems.append(f"{run.file}: cannot be drawn ({type(err).__name__}: {err})")
        if not data:
            continue
        heads = data[0]["heads"]
        heads_words = "one table for every head" if heads == 1 else f"{heads} heads"
        what = ", random inputs" if data[0]["data_dependent"] else ""
        title = f"{scheme}: bias per head after training ({heads_words}{what})"
        seed_words = (
            f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {', '.join(map(str, seeds))} (seed {seeds[0]} bold)"
        )
        caption = (
            f"After training on {group}, {seed_words}: the same figure for the encoding the experiment trained."
            + ("" if learned else " It has no learned parameters: training leaves it as it was.")
            + _learned_note(members)
            + f" (The experiment's model: {heads_words}; loaded from {', '.join(r.file for r in members[:3])}"
            + (", …" if len(members) > 3 else "")
            + ")."
        )
        label = members[0].group.removeprefix(f"{members[0].folder}: ")  # panel titles: the folder is in the caption
        figures.append((bias_figure(data, title=title, label=label), caption))
    return figures, problems + _undrawn(scheme, groups)


def _learned_note(members: list[TrainedRun]) -> str:
    """`` Seeds that learned the task: 0, 2 of 3.`` from the ``results.json`` beside the encodings
    (:func:`posenc.experiments.stats.record_learned`); empty when it says nothing about them."""
    import json

    from ..experiments.stats import record_learned

    path = members[0].path.parent.parent / "results.json"
    try:
        records = json.loads(path.read_text(encoding="utf-8"))["records"]
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    flags = {}
    for r in records if isinstance(records, list) else []:
        if not isinstance(r, dict):
            continue
        key = (r.get("experiment"), r.get("task"), str(r.get("scheme", "")).replace("+", "_"), r.get("seed"))
        flags[key] = record_learned(r)
    known = [(m.seed, f) for m in members if (f := flags.get((m.experiment, m.task, m.spec, m.seed))) is not None]
    if not known:
        return ""
    learned = sorted({seed for seed, f in known if f})
    total = len({seed for seed, _ in known})
    which = ", ".join(map(str, learned)) if learned else "none"
    return f" Seeds that learned the task: {which} of {total}."


def _groups(runs: list[TrainedRun]) -> dict[str, list[TrainedRun]]:
    groups: dict[str, list[TrainedRun]] = {}
    for run in runs:
        groups.setdefault(run.group, []).append(run)
    return groups


def _undrawn(scheme: str, groups: dict[str, list[TrainedRun]]) -> list[str]:
    """The problem naming the groups past :data:`MAX_GROUPS` (none when all are drawn)."""
    rest = list(groups)[MAX_GROUPS:]
    return [f"{scheme}: {len(rest)} more trained group(s) not drawn: {', '.join(rest)}"] if rest else []


def _table(module: Any) -> tuple[Any, Any, str]:
    """``(table [p, d], rows [p], row label)`` of a learned or Shaw module."""
    import torch

    if module.name == "learned":
        table = module.table.weight.detach().to(torch.float64)  # [max_len, d]
        return table, torch.arange(table.shape[0]), "position"
    from ..analysis.logits import shaw_embeddings

    data = shaw_embeddings(module)
    return data["key"], data["relative_positions"], "relative position (key − query), clipped"


def trained_table_figures(
    scheme: str, runs: list[TrainedRun], *, load: Callable[[Path], Any] | None = None
) -> tuple[list[tuple[Any, str]], list[str]]:
    """``([(figure, caption), ...], problems)``: a learned table (``learned``: rows are positions;
    ``shaw``: its key embeddings a^K, rows are clipped distances) after training beside the same
    scheme's table at initialisation, one figure per (experiment, task) group (at most
    :data:`MAX_GROUPS`), from the group's lowest seed."""
    from ..schemes.base import create
    from ..viz.trained import table_beside_init

    if load is None:
        from ..experiments.runner import load_encoding as load
    groups = _groups(runs)
    figures, problems = [], []
    for group, members in list(groups.items())[:MAX_GROUPS]:
        run = members[0]
        try:
            module = load(run.path)
            if module.name != scheme:
                raise ValueError(f"it holds a {module.name!r} encoding, not {scheme!r}")
            trained, rows, row_label = _table(module)
            fresh = create(scheme, **{f: getattr(module.config, f) for f in module.config.__dataclass_fields__})
            init = _table(fresh)[0]
        except Exception as err:  # a broken file must not sink the atlas; it is reported
            problems.append(f"{run.file}: cannot be drawn ({type(err).__name__}: {err})")
            continue
        what = "position table" if scheme == "learned" else "key embeddings a^K"
        title = f"{scheme}: the {what} after training on {group} (seed {run.seed}) beside a fresh one"
        caption = (
            f"After training on {group}, seed {run.seed} (loaded from {run.file}): the trained "
            f"{what} beside a table at the scheme's own initialisation, on one colour scale; below, the cosine "
            "similarity of every pair of rows. "
            + (
                "A band along the diagonal after training means nearby positions got similar codes."
                if scheme == "learned"
                else "Distances beyond the clipping distance share the edge rows."
            )
        )
        figures.append((table_beside_init(init, trained, rows=rows, row_label=row_label, title=title), caption))
    return figures, problems + _undrawn(scheme, groups)
