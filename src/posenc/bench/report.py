"""Run the benchmark sections and shape their rows for the terminal and for JSON."""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Callable, Iterable, Sequence

import torch

__all__ = ["run", "format_rows", "SECTIONS", "summary_columns", "rope_ratios", "markdown"]

#: bias-build and bias-memory are issue 26's targets (parameter-only biases built against a fill;
#: FlexAttention's memory with the newer bias schemes at L = 16384), varlen and transformers issue 27's
#: (packed documents against the padded batch; a transformers Llama on posenc's RoPE against stock);
#: not in the CLI's default list
SECTIONS = ("rope", "bias", "attention", "flex", "training", "bias-build", "bias-memory", "varlen", "transformers")

#: sizes of the full run and of ``--quick`` (the harness checked end to end in seconds)
FULL = {
    "rope_lengths": (512, 2048, 8192),
    "bias_lengths": (2048,),
    "attention_L": 2048,
    "flex_L": (8192, 16384),
    "bias_build_lengths": (2048,),
    "bias_memory_L": 16384,
    "transformers_lengths": (2048,),
    "min_run_time": 0.5,
}
QUICK = {
    "rope_lengths": (512,),
    "bias_lengths": (512,),
    "attention_L": 256,
    "flex_L": (1024,),
    "bias_build_lengths": (256,),
    "bias_memory_L": 512,
    "transformers_lengths": (256,),
    "min_run_time": 0.05,
}


def run(
    *,
    quick: bool = False,
    sections: Iterable[str] = SECTIONS,
    num_threads: int = 1,
    rope_lengths: Sequence[int] | None = None,
    dtypes: Sequence[torch.dtype] = (torch.float32, torch.bfloat16),
    peers: bool = True,
    device: str = "cpu",
    min_run_time: float | None = None,
    all_backends: bool = True,
    progress: Callable[[str], None] | None = None,
    on_section: Callable[[dict], None] | None = None,
) -> dict:
    """Every requested section, in this process (the flex section spawns one process per mode), with
    the tensors on ``device`` ("cpu", "cuda", "cuda:1", ...). ``on_section`` gets the result so far
    after each section (the CLI writes it then: an interrupted run keeps the sections it finished)."""
    from .allocator import reuses_memory
    from .bias import bench_attention, bench_bias, bench_bias_build, bench_bias_memory, bench_flex_memory
    from .rope import bench_rope
    from .timing import device_name, resolve_device
    from .train import bench_training
    from .transformers_patch import bench_transformers_patch
    from .varlen import bench_varlen

    sections = list(dict.fromkeys(sections))  # each once, in the order given
    dtypes = tuple(dict.fromkeys(dtypes))
    rope_lengths = None if rope_lengths is None else list(dict.fromkeys(rope_lengths))
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown or not sections:
        raise ValueError(
            f"unknown bench sections {unknown}; choose from: {', '.join(SECTIONS)}"
            if unknown
            else f"no bench section given; choose from: {', '.join(SECTIONS)}"
        )
    if rope_lengths is not None and not all(isinstance(v, int) and v > 0 for v in rope_lengths):
        raise ValueError(f"RoPE lengths must be positive integers, got {list(rope_lengths)}")
    bad = [str(d) for d in dtypes if not (isinstance(d, torch.dtype) and d.is_floating_point)]
    if bad or not dtypes:
        raise ValueError(
            f"RoPE dtypes must be floating point (float32, bfloat16, float16, float64); got {bad or 'none'}"
        )
    size = QUICK if quick else FULL
    if min_run_time is not None:  # the timing of each case, whatever the sizes
        size = {**size, "min_run_time": min_run_time}
    dev = resolve_device(device)
    torch.set_num_threads(num_threads)
    result: dict = {
        "meta": {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "posenc": _posenc_version(),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpu_model": _cpu_model(),
            "cpus": os.cpu_count(),
            "num_threads": num_threads,
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            "quick": quick,
            "min_run_time": size["min_run_time"],
            "device": device_name(dev),
            "peers": _peer_versions() if peers else "skipped (--no-peers)",
            "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            # whether new tensors reuse freed memory (no page faults: the clone floor is the copy
            # floor) or are fresh mappings that fault in; see posenc.bench.allocator
            "GLIBC_TUNABLES": os.environ.get("GLIBC_TUNABLES"),
            "freed_memory_reused": reuses_memory(),
        }
    }
    timing = {"num_threads": num_threads, "min_run_time": size["min_run_time"], "device": dev, "progress": progress}

    def flex() -> list[dict]:
        if progress:
            progress(f"flex vs sdpa at L={size['flex_L']} (one subprocess each)")
        return [row for L in size["flex_L"] for row in bench_flex_memory(L, num_threads=num_threads, device=dev)]

    runners: dict[str, Callable[[], list[dict]]] = {
        "rope": lambda: bench_rope(
            rope_lengths or size["rope_lengths"], dtypes, peers=peers, all_backends=all_backends, **timing
        ),
        "bias": lambda: bench_bias(size["bias_lengths"], peers=peers, **timing),
        "attention": lambda: bench_attention(L=size["attention_L"], **timing),
        "flex": flex,
        "training": lambda: bench_training(
            num_threads=num_threads, min_run_time=size["min_run_time"] * 6, device=dev, progress=progress
        ),
        "bias-build": lambda: bench_bias_build(size["bias_build_lengths"], **timing),
        "bias-memory": lambda: bench_bias_memory(
            size["bias_memory_L"], num_threads=num_threads, device=dev, progress=progress
        ),
        "varlen": lambda: bench_varlen(dtypes=dtypes, **timing),
        "transformers": lambda: bench_transformers_patch(  # ~1 s forwards: x4 gives 7 paired rounds
            size["transformers_lengths"], dtypes, **{**timing, "min_run_time": size["min_run_time"] * 4}
        ),
    }
    from ..kernels import compiled

    for section in SECTIONS:  # the fixed order, whatever order they were asked in
        if section in sections:
            result[section] = runners[section]()
            # known once something tried to compile: False after a failed compile (why: compile_error)
            result["meta"]["compile_available"] = compiled.available()
            result["meta"]["compile_error"] = compiled.error()
            if on_section is not None:
                on_section(result)
    return result


def _posenc_version() -> str:
    """posenc's version, with the git commit when it runs from a checkout (``0.1.0+g1234abc``)."""
    import subprocess
    from pathlib import Path

    from .. import __version__

    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return __version__
    return f"{__version__}+g{commit}" if commit else __version__


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _peer_versions() -> dict[str, str | None]:
    """Each peer's installed version (None: not installed), read without importing it."""
    from importlib import metadata

    versions = {}
    for name in ("transformers", "torchtune", "rotary-embedding-torch", "x-transformers"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def check_output_path(path: str | os.PathLike) -> None:
    """ValueError (saying why) unless a file can be written at ``path``: checked before a run, so a
    bad path does not cost a full benchmark. Creates missing parent folders but no file, so an
    interrupted run leaves nothing behind."""
    import tempfile
    from pathlib import Path

    from .._files import file_in_the_way

    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a directory; give a file name, e.g. {path / 'bench.json'}")
    blocking = file_in_the_way(path)
    if blocking is not None:  # mkdir would say "File exists" or "Not a directory" of another path
        raise ValueError(f"cannot write {path}: {blocking} is a file, not a folder")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=True):
            pass
        if path.exists() and not os.access(path, os.W_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as err:
        raise ValueError(f"cannot write {path} ({err.strerror or err})") from None


def write_output(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file beside it, then renamed."""
    from .._files import replaced_whole

    with replaced_whole(path) as tmp:
        tmp.write_text(text)


def summary_columns(section: str) -> list[str]:
    """The columns shown in the terminal for a section's rows."""
    return {
        "rope": ["L", "dtype", "layout", "case", "median_ms", "x_floor", "page_faults_per_call", "other_cpu"],
        "bias": ["L", "heads", "case", "median_ms", "x_floor", "other_cpu"],
        "attention": ["L", "heads", "case", "median_ms", "x_none", "x_none_best", "other_cpu"],
        "flex": ["L", "heads", "mode", "seconds", "peak_rss_mib", "peak_gpu_mib", "first_call_s", "other_cpu", "error"],
        "training": ["case", "median_ms", "overhead_vs_none", "first_step_ms", "other_cpu"],
        "bias-build": ["L", "heads", "case", "median_ms", "x_floor", "x_floor_best", "target_x_floor", "other_cpu"],
        "varlen": [
            "packing",
            "tokens",
            "padded_tokens",
            "dtype",
            "layout",
            "case",
            "median_ms",
            "x_padded",
            "x_padded_best",
            "max_error",
            "other_cpu",
        ],
        "transformers": ["L", "dtype", "case", "median_ms", "x_stock", "x_stock_best", "max_abs_diff", "other_cpu"],
        "bias-memory": [
            "L",
            "heads",
            "scheme",
            "peak_rss_mib",
            "baseline_rss_mib",
            "peak_rss_over_baseline_mib",
            "target_mib",
            "seconds",
            "first_call_at_L_s",
            "other_cpu",
            "error",
        ],
    }[section]


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def format_rows(rows: list[dict], columns: Sequence[str]) -> list[list[str]]:
    """Rows as strings, steady-state rows only; one-time costs are listed by :func:`one_time_rows`."""
    return [[_cell(row.get(c)) for c in columns] for row in rows if row.get("kind", "steady") == "steady"]


def one_time_rows(rows: list[dict]) -> list[list[str]]:
    return [
        [_cell(row.get(c)) for c in ("L", "dtype", "layout", "case", "seconds")]
        for row in rows
        if row.get("kind") == "one-time"
    ]


def _auto_backend(cases: dict[str, dict], layout: str, dtype: str = "float32", device: str = "cpu") -> str:
    """The backend the default dispatch took for one shape: the ``auto_backend`` its rows record;
    for results recorded without it (before the rows carried it), the path of that release's
    dispatch for q and k ``[1, 32, L, 128]``: compiled for half pairs and bfloat16 interleaved
    pairs on the CPU, eager (the complex multiply) otherwise, the Triton kernel (named compiled
    then) on CUDA. Eager where the rows have no ``out=`` case of that backend (no compiler)."""
    recorded = next((c["auto_backend"] for c in cases.values() if c.get("auto_backend")), None)
    if recorded is not None:
        path = recorded
    else:
        path = "compiled" if layout == "half" or dtype == "bfloat16" or device.startswith("cuda") else "eager"
    return path if f"posenc out= ({path})" in cases else "eager"


def _rope_groups(rows: list[dict]) -> dict[tuple, dict[str, dict]]:
    """Steady RoPE rows by (L, dtype, layout), then by case."""
    groups: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        if r.get("kind", "steady") == "steady":
            groups.setdefault((r["L"], r["dtype"], r["layout"]), {})[r["case"]] = r
    return groups


def rope_ratios(rows: list[dict]) -> list[dict]:
    """The RoPE ratios to quote, one row per (L, dtype, layout) from :func:`bench_rope` rows (each
    ratio over floors paired in the same rounds; None where a case was not timed):

    * ``rotate_x_clone``: ``Rope.rotate`` over ``q.clone(); k.clone()``;
    * ``new_x_clone``: ``kernels.rope`` returning new tensors over the same clone;
    * ``out_x_floor``: ``kernels.rope(..., out=)`` through the default dispatch's backend
      (``backend``) over the copy floor; ``out_eager_x_floor`` the eager backend's;
    * ``in_place_x_floor``: ``kernels.rope_`` over the copy floor, ``in_place_floor_x_floor`` the
      in-place floor's (``x.neg_()``) over it;
    * ``transformers_x_rotate``: transformers' ``apply_rotary_pos_emb`` over ``Rope.rotate``
      (how many times slower it is; half pairs only); ``fastest_peer_x_rotate`` the fastest peer's;
    * ``clone_x_floor``: the clone floor over the copy floor (1 where new tensors reuse freed
      memory, 2-3 where they page-fault), ``rotate_x_floor``: ``Rope.rotate`` over the copy floor.
    """
    out = []
    for (L, dtype, layout), cases in _rope_groups(rows).items():
        backend = _auto_backend(cases, layout, dtype)

        def ratio(name: str, floor: str = "floor", cases: dict[str, dict] = cases) -> float | None:
            if name not in cases or floor not in cases:
                return None
            return cases[name]["x_floor"] / cases[floor]["x_floor"]

        out.append(
            {
                "L": L,
                "dtype": dtype,
                "layout": layout,
                "backend": backend,
                "rotate_x_clone": ratio("posenc Rope.rotate", "floor, new tensors"),
                "new_x_clone": ratio("posenc new tensors", "floor, new tensors"),
                "out_x_floor": ratio(f"posenc out= ({backend})"),
                "out_eager_x_floor": ratio("posenc out= (eager)"),
                "in_place_x_floor": ratio(f"posenc in-place ({backend})"),
                "in_place_floor_x_floor": ratio("floor, in place"),
                "transformers_x_rotate": ratio("peer transformers", "posenc Rope.rotate"),
                "fastest_peer_x_rotate": min(
                    (ratio(n, "posenc Rope.rotate") for n in cases if n.startswith("peer ")), default=None
                ),
                "clone_x_floor": ratio("floor, new tensors"),
                "rotate_x_floor": ratio("posenc Rope.rotate"),
            }
        )
    return out


def _wrong(row: dict) -> bool:
    """A row whose output differs from the reference by more than its tolerance (peers only ever)."""
    return row.get("max_error") is not None and row.get("tolerance") is not None and row["max_error"] > row["tolerance"]


def _num(v: float) -> str:
    """Three significant figures at most, without an exponent down to 0.001: small timings do not
    print as 0.0."""
    v = float(v)
    if v != v or v == 0:
        return f"{v:.0f}" if v == 0 else "nan"
    for bound, digits in ((100, 0), (10, 1), (0.1, 2), (0.01, 3), (0.001, 4)):
        if abs(v) >= bound:
            return f"{v:.{digits}f}"
    return f"{v:.1e}"


def markdown(result: dict) -> str:
    """The performance tables of docs/performance.md from a :func:`run` result."""
    lines: list[str] = []
    meta = result.get("meta", {})
    lines.append(
        f"Measured {meta.get('date')} on {meta.get('device', 'cpu')} with torch {meta.get('torch')}, {meta.get('cpus')} CPUs, "
        f"{meta.get('num_threads')} thread(s), load average at start "
        f"{[round(v, 1) for v in meta.get('load_average') or []]}. "
        + (
            f"Freed memory reused (`GLIBC_TUNABLES={meta.get('GLIBC_TUNABLES')}`): new tensors do not page-fault, "
            "so the clone floor is the copy floor."
            if meta.get("freed_memory_reused")
            else "The system's allocator: new tensors of 32 MiB or more are fresh mappings that page-fault, so "
            "the clone floor (new tensors) is above the copy floor."
        )
    )
    rope = [r for r in result.get("rope", []) if r.get("kind") == "steady"]
    if rope:
        from .rope import BACKEND_ORDER

        lines += [
            "",
            "#### RoPE, q and k `[1, 32, L, 128]`: time / floor (lower is better)",
            "",
            "Each cell: the median of the per-round ratios to the floor (`out.copy_(x)` for q and k) timed in "
            "alternation, and in brackets the fastest round of the case over the fastest round of the floor. "
            "*posenc out=* is `posenc.kernels.rope(x, cos, sin, out=)` with the backend the default dispatch "
            "picks (named beside it); *out= per backend* forces each backend. *backward* is the inverse "
            "rotation returning new tensors (what autograd's backward runs). *in place* is beside the in-place "
            "floor (`x.neg_()` of q and k: one read and one write of the same memory, cheaper than a copy). "
            "*new tensors* (`kernels.rope`) and *Rope.rotate* (the scheme, as users call it) return new q and k "
            "as the peers do, beside `x.clone()` of q and k: allocating costs the same to both. *peer / posenc* "
            "divides a peer's ratio by posenc's `Rope.rotate` ratio, both paired with the same floor. Every case "
            "was checked against `apply_rope` before it was timed.",
            "",
            "| L | dtype | layout | floor ms | posenc out= | posenc backward | in place: posenc / floor | posenc eager | "
            "new tensors: posenc / clone | Rope.rotate / clone | out= per backend | reference apply_rope | "
            "peers (x floor) | peer / posenc | other CPU |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        wrong: set[str] = set()
        for (L, dtype, layout), cases in _rope_groups(rope).items():
            path = _auto_backend(cases, layout, dtype, str(meta.get("device", "cpu")))

            def x(name: str, cases: dict[str, dict] = cases) -> str:
                if name not in cases:
                    return "-"
                best = cases[name].get("x_floor_best")
                return f"{cases[name]['x_floor']:.2f}" + (f" ({best:.2f})" if best is not None and best == best else "")

            def over(name: str, floor: str, cases: dict[str, dict] = cases) -> str:
                if name not in cases or floor not in cases:
                    return "-"
                return f"{cases[name]['x_floor']:.2f} / {cases[floor]['x_floor']:.2f}"

            mine = cases.get("posenc Rope.rotate") or cases.get("posenc new tensors")
            peers = {n.removeprefix("peer "): c for n, c in cases.items() if n.startswith("peer ")}
            peer_x = ", ".join(f"{n} {c['x_floor']:.1f}" + ("*" if _wrong(c) else "") for n, c in peers.items()) or "-"
            peer_ratio = (
                ", ".join(f"{n} {c['x_floor'] / mine['x_floor']:.1f}x" for n, c in peers.items()) if mine else ""
            ) or "-"
            in_place = x(f"posenc in-place ({path})") + (
                f" / {cases['floor, in place']['x_floor']:.2f}"
                if "floor, in place" in cases and f"posenc in-place ({path})" in cases
                else ""
            )
            backward = x("posenc backward") if "posenc backward" in cases else x(f"posenc backward ({path})")
            per_backend = (
                ", ".join(
                    f"{b} {cases[f'posenc out= ({b})']['x_floor']:.2f}"
                    for b in BACKEND_ORDER
                    if f"posenc out= ({b})" in cases
                )
                or "-"
            )
            wrong.update(
                f"{n} ({dtype} {layout}, L = {L}: largest error {c['max_error']:.3g})"
                for n, c in peers.items()
                if _wrong(c)
            )
            load = max((c.get("other_cpu") or 0.0) for c in cases.values())
            lines.append(
                f"| {L} | {dtype} | {layout} | {_num(cases['floor']['median_ms'])} | {x(f'posenc out= ({path})')} ({path}) | "
                f"{backward} | {in_place} | {x('posenc out= (eager)')} | "
                f"{over('posenc new tensors', 'floor, new tensors')} | {over('posenc Rope.rotate', 'floor, new tensors')} | "
                f"{per_backend} | {x('posenc reference apply_rope')} | {peer_x} | {peer_ratio} | {load:.2f} |"
            )
        if wrong:
            lines += [
                "",
                "\\* differs from the float64-angle reference by more than a float32-angle rotation may: "
                + "; ".join(sorted(wrong)),
            ]
        skipped = sorted({f"{r['case']}: {r['reason']}" for r in result.get("rope", []) if r.get("kind") == "skipped"})
        if skipped:
            lines += ["", "Not timed: " + "; ".join(skipped)]
    bias = [r for r in result.get("bias", []) if r.get("kind") == "steady"]
    if bias:
        lines += [
            "",
            f"#### Bias construction `[{bias[0]['heads']}, L, L]` float32: time / filling a preallocated tensor",
            "",
            "| L | case | ms | x floor | other CPU |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['L']} | {r['case']} | {_num(r['median_ms'])} | {_num(r['x_floor'])} | {r.get('other_cpu') or 0:.2f} |"
            for r in bias
        ]
        skipped = sorted({f"{r['case']}: {r['reason']}" for r in result.get("bias", []) if r.get("kind") == "skipped"})
        if skipped:
            lines += ["", "Not timed: " + "; ".join(skipped)]
    attn = result.get("attention", [])
    if attn:
        lines += [
            "",
            f"#### posenc.Attention forward, causal, L = {attn[0]['L']}, {attn[0]['heads']} heads, no grad",
            "",
            "Each scheme timed in alternation with none: the median of the per-round ratios, and in brackets the "
            "fastest round over the fastest round of none.",
            "",
            "| scheme | ms | x none | other CPU |",
            "|---|---|---|---|",
        ]
        for r in attn:
            best = "" if r.get("x_none_best") is None else f" ({r['x_none_best']:.2f})"
            lines.append(
                f"| {r['case'].removeprefix('Attention ')} | {r['median_ms']:.1f} | {r['x_none']:.2f}{best} "
                f"| {r.get('other_cpu') or 0:.2f} |"
            )
    flex_rows = result.get("flex", [])
    if flex_rows:
        gpu = any("peak_gpu_mib" in r for r in flex_rows)
        memory = "peak GPU MiB (allocated)" if gpu else "peak RSS MiB"
        lines += [
            "",
            "#### Causal ALiBi at long L: FlexAttention vs SDPA with a materialised bias (one process each)",
            "",
            f"| L | heads | mode | seconds (median of the timed calls) | {memory} | first calls (compile) s | other CPU |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in flex_rows:
            if "error" in r:
                lines.append(f"| {r['L']} | {r['heads']} | {r['mode']} | failed: {r['error']} | | | |")
                continue
            compile_s = (
                f"{(r.get('first_call_s') or 0) + (r.get('first_call_at_L_s') or 0):.1f}"
                if r["mode"] == "flex"
                else "-"
            )
            peak = r.get("peak_gpu_mib") if gpu else r["peak_rss_mib"]
            lines.append(
                f"| {r['L']} | {r['heads']} | {r['mode']} | {r['seconds']:.2f} | {peak:.0f} | {compile_s} | "
                f"{r.get('other_cpu') or 0:.2f} |"
            )
    build = [r for r in result.get("bias-build", []) if r.get("kind") == "steady"]
    if build:
        lines += [
            "",
            f"#### Parameter-only biases `[{build[0]['heads']}, L, L]` float32, built without a cache: "
            f"time / `fill_` of a preallocated tensor ({build[0]['num_threads']} thread(s))",
            "",
            "Each case timed in alternation with the fill: the median of the per-round ratios, and in brackets the "
            "fastest round over the fastest fill. Target (issue 26): out= at most 2x.",
            "",
            "| L | case | ms | x fill | target met | other CPU |",
            "|---|---|---|---|---|---|",
        ]
        for r in build:
            met = "-" if r.get("target_x_floor") is None else "yes" if r["x_floor"] <= r["target_x_floor"] else "no"
            lines.append(
                f"| {r['L']} | {r['case']} | {_num(r['median_ms'])} | {_num(r['x_floor'])} "
                f"({_num(r['x_floor_best'])}) | {met} | {r.get('other_cpu') or 0:.2f} |"
            )
    memory = result.get("bias-memory", [])
    if memory:
        lines += [
            "",
            "#### Causal FlexAttention forward per bias scheme: peak process memory (one process each)",
            "",
            "| L | heads | scheme | peak RSS MiB | RSS before the calls MiB | added MiB | under 1 GiB | seconds | "
            "first call at L (compile) s | other CPU |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in memory:
            if "error" in r:
                lines.append(f"| {r['L']} | {r['heads']} | {r.get('scheme')} | failed: {r['error']} | | | | | | |")
                continue
            lines.append(
                f"| {r['L']} | {r['heads']} | {r['scheme']} | {r['peak_rss_mib']:.0f} | {_cell(r.get('baseline_rss_mib'))} "
                f"| {_cell(r.get('peak_rss_over_baseline_mib'))} | {'yes' if r['peak_rss_mib'] < 1024 else 'no'} "
                f"| {r['seconds']:.2f} | {_cell(r.get('first_call_at_L_s'))} | {r.get('other_cpu') or 0:.2f} |"
            )
    train = result.get("training", [])
    if train:
        lines += [
            "",
            f"#### Training step of the tiny transformer (batch {train[0]['batch']}, length {train[0]['seq']})",
            "",
            "| scheme | ms | overhead vs none | first step ms (one-time costs) | other CPU |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['case'].removeprefix('train step ')} | {r['median_ms']:.1f} | {100 * r['overhead_vs_none']:+.0f}% | "
            f"{_cell(r.get('first_step_ms'))} | {r.get('other_cpu') or 0:.2f} |"
            for r in train
        ]
    varlen = [r for r in result.get("varlen", []) if r.get("kind", "steady") == "steady" and "x_padded" in r]
    if varlen:
        lines += [
            "",
            "#### Packed documents (`[total, h, hd]` + `cu_seqlens`) against the padded batch of the same documents",
            "",
            "Each case timed in alternation with the padded rotation: the median of the per-round ratios (the "
            "fastest round in brackets). Target (issue 27): at most 1.2x.",
            "",
            "| packing | tokens (padded) | dtype | case | ms | x padded | other CPU |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['packing']} | {r['tokens']} ({r['padded_tokens']}) | {r['dtype']} | {r['case']} | "
            f"{_num(r['median_ms'])} | {_num(r['x_padded'])} ({_num(r['x_padded_best'])}) | {r.get('other_cpu') or 0:.2f} |"
            for r in varlen
        ]
    patched = [r for r in result.get("transformers", []) if r.get("kind") == "steady"]
    if patched:
        r0 = patched[0]
        lines += [
            "",
            f"#### A transformers Llama ({r0['layers']} layers, hidden {r0['hidden']}, {r0['heads']} heads) switched "
            "to posenc's RoPE against the stock model: forward time",
            "",
            "| L | dtype | case | ms | x stock | outputs differ by | other CPU |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['L']} | {r['dtype']} | {r['case']} | {_num(r['median_ms'])} | {_num(r['x_stock'])} "
            f"({_num(r['x_stock_best'])}) | {_cell(r.get('max_abs_diff'))} | {r.get('other_cpu') or 0:.2f} |"
            for r in patched
        ]
    return "\n".join(lines) + "\n"
