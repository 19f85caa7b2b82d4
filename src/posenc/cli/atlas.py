"""``posenc plot``, ``posenc check`` and ``posenc report``: the atlas on the command line.

Every heavy import (matplotlib, rich, the analysis) happens inside the commands. Bad input (an
unknown scheme, kind of figure or file suffix; an option a scheme does not take) prints one line
naming the value and the choices, and exits with code 2, without a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import fail as _fail
from . import stoppable, usable_path

__all__ = ["register"]


def _scheme_config(
    scheme: str, dim: int | None, base: float | None, heads: int | None, scaling: dict | None = None
) -> dict[str, Any]:
    """The config keys the user gave, checked against what ``scheme`` accepts."""
    from ..viz.options import PlotOptions, scheme_config

    return scheme_config(scheme, PlotOptions(dim=dim, base=base, heads=heads, scaling=scaling))


_SCALING_HELP = (
    "RoPE context extension (rope only): a Hugging Face rope_scaling object as JSON, e.g. "
    '\'{"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 2048}\', '
    "or a .json/.toml file holding one."
)


def _parse_scaling(text: str | None) -> dict | None:
    """``--scaling``: a JSON object, or a .json/.toml file holding one (read as data, never run)."""
    if text is None:
        return None
    if not text.strip():  # Path("") is the current folder: "'' is a folder" would be the message
        raise ValueError(
            '--scaling is empty; give a JSON object like {"rope_type": "linear", "factor": 4} or a .json/.toml file'
        )
    path = Path(text)
    try:
        is_dir, is_file = path.is_dir(), path.is_file()
    except (OSError, ValueError):  # no file can have this name (a JSON object longer than NAME_MAX): a value
        is_dir = is_file = False
    if is_dir:
        raise ValueError(f"--scaling: {text!r} is a folder; give a JSON object or a .json/.toml file")
    if is_file and path.suffix.lower() not in (".json", ".toml"):
        raise ValueError(
            f"--scaling: {text!r} is a file, but not a .json or .toml one; rename it, or pass its contents as the value"
        )
    if path.suffix.lower() in (".json", ".toml"):
        if not is_file:
            raise ValueError(f"--scaling: no file {text!r}")
        try:
            raw = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ValueError(f"--scaling: cannot read {text!r} ({err})") from None
        if path.suffix.lower() == ".toml":
            toml = _toml_reader()
            try:
                value: Any = toml.loads(raw)
            except RecursionError:
                raise ValueError(f"--scaling: {text!r} is nested too deeply for a rope_scaling table") from None
            except ValueError as err:  # TOMLDecodeError, or an integer too long to convert
                raise ValueError(f"--scaling: {text!r} is not valid TOML ({err})") from None
        else:
            value = _json(raw, repr(text))
    else:
        value = _json(text, "the value")
    if not isinstance(value, dict):
        kind = {
            type(None): "null",
            bool: "true/false",
            int: "a number",
            float: "a number",
            str: "a string",
            list: "an array",
        }.get(type(value), type(value).__name__)
        raise ValueError(f'--scaling must be a JSON object like {{"rope_type": "linear", "factor": 4}}, got {kind}')
    return value


def _scaling_and_base(text: str | None, base: float | None) -> tuple[dict | None, float | None]:
    """``--scaling`` parsed, and the base: transformers 5 keeps the base inside ``rope_parameters``
    as ``rope_theta``, which becomes the base here when ``--base`` is not given (the library's
    ``base=`` message would name a keyword the command line does not have)."""
    scaling = _parse_scaling(text)
    if scaling is None or "rope_theta" not in scaling:
        return scaling, base
    scaling = dict(scaling)
    theta = scaling.pop("rope_theta")
    if base is not None and theta != base:
        raise ValueError(
            f"--scaling holds rope_theta={theta!r}, but --base is {base!r}: give one of them "
            "(HF's rope_theta is the frequency base, --base here)"
        )
    return scaling, theta if base is None else base


def _check_writable(folder: Path) -> None:
    """Fail now, with the reason, when files cannot be created in ``folder`` (a read-only mount, a
    folder of another user)."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        _fail(f"--out: cannot write into the folder {str(folder)!r} ({err.strerror or err})")


def _check_parents(out: Path) -> None:
    """Fail when a file stands where a folder above ``out`` goes (``--out afile/x``): creating the
    folders would say "File exists" or "Not a directory" of another path."""
    from .._files import file_in_the_way

    blocking = file_in_the_way(out)
    if blocking is not None:
        _fail(f"--out: cannot write {str(out)!r}: {str(blocking)!r} is a file, not a folder")


def _toml_reader() -> Any:
    """The standard library's ``tomllib`` (Python 3.11+), else ``tomli`` (the ``cli`` extra
    installs it on 3.10), else a clear error."""
    try:
        import tomllib
    except ModuleNotFoundError:
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise ValueError(
                "--scaling: reading a .toml file needs Python 3.11 or newer, or the tomli package "
                "(pip install tomli); a .json file works everywhere"
            ) from None
    return tomllib


def _json(text: str, what: str) -> Any:
    import json

    example = '{"rope_type": "linear", "factor": 4}'
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(
            f"--scaling: {what} is not valid JSON ({err.msg} at character {err.pos}); give an object "
            f"like {example} or a .json/.toml file"
        ) from None
    except RecursionError:
        raise ValueError(f"--scaling: {what} is nested too deeply for a rope_scaling object like {example}") from None
    except ValueError as err:  # an integer too long to convert (sys.get_int_max_str_digits)
        raise ValueError(f"--scaling: {what} is not usable JSON ({err}); give an object like {example}") from None


def _finite(value: float) -> float | None:
    """A number JSON can hold: NaN and infinities become null."""
    import math

    return float(value) if math.isfinite(value) else None


def _check_scheme(scheme: str) -> None:
    from ..viz.kinds import scheme_names

    names = scheme_names()
    if scheme not in names:
        _fail(f"unknown scheme {scheme!r}; choose one of: {', '.join(names)}")


def _print_check(row: dict[str, Any], label: str) -> None:
    """The property table of ``posenc check``: criterion, verdict, value and threshold (80 columns
    wide at most), then what was found for each criterion, wrapped between words at the console's
    width (80 columns when the output is not a terminal)."""
    import textwrap

    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console()
    table = Table(title=f"{escape(label)} ({row['family']}): the property criteria", box=box.SIMPLE_HEAD)
    for column in ("criterion", "verdict", "value", "threshold"):
        table.add_column(column, no_wrap=True)
    for criterion, result in row["results"].items():
        verdict = row["verdict"][criterion]
        style = {"pass": "green", "fail": "bold red"}.get(verdict, "dim")
        mark = verdict if result is not None else "depends on input" if verdict == "input" else "n/a"
        value = "" if result is None else f"{result.value:.6g}"
        threshold = "" if result is None else f"{result.comparison} {result.threshold:.6g}"
        table.add_row(criterion, f"[{style}]{mark}[/]", value, threshold)
    console.print(table)
    console.print("What was found:", highlight=False)
    width = max(40, min(console.width, 100))
    for criterion in row["results"]:
        lines = textwrap.wrap(
            f"{criterion}: {row['reasons'][criterion]}",
            width=width,
            initial_indent="  ",
            subsequent_indent="    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        console.print(escape("\n".join(lines)), highlight=False, soft_wrap=True)


def register(app: Any) -> None:
    """Add ``plot``, ``check`` and ``report`` to the root Typer ``app``."""
    import typer

    from ..analysis.references import REFERENCE_ENCODINGS
    from ..schemes import available
    from ..viz.kinds import KINDS  # torch-only: the catalogue's names, no matplotlib

    kind_help = f"Kind of figure: {', '.join(KINDS)} (`--kind list` shows those that apply to SCHEME)."
    scheme_help = f"One of: {', '.join(available())}; or a naive reference: {', '.join(REFERENCE_ENCODINGS)}."

    @app.command("plot", short_help="Draw one figure of one scheme (PNG, SVG or PDF).")
    def plot_command(
        scheme: str = typer.Argument(
            ...,
            metavar="SCHEME",
            help=scheme_help,
        ),
        kind: str | None = typer.Option(None, "--kind", "-k", metavar="KIND", help=kind_help),
        out: Path = typer.Option(
            Path("figure.png"), "--out", "-o", metavar="FILE", help="Output file: .png, .svg or .pdf."
        ),
        dim: int | None = typer.Option(None, metavar="D", help="Code width (head width for rope, xpos, shaw)."),
        positions: int | None = typer.Option(
            None,
            metavar="N",
            help="Number of positions 0 .. N-1 (at most 8192; for --kind grid "
            "the side of an N x N grid, at most 512). The N x N figures "
            "(distance, dot) need ~5 GB and ~20 s at 8192.",
        ),
        base: float | None = typer.Option(None, metavar="BASE", help="Frequency base (sinusoids, rotary schemes)."),
        heads: int | None = typer.Option(None, metavar="H", help="Number of heads (alibi, t5)."),
        scaling: str | None = typer.Option(None, metavar="JSON|FILE", help=_SCALING_HELP),
        method: str = typer.Option(
            "pca", metavar="METHOD", help="2D projection: pca, or umap when umap-learn is installed."
        ),
        seed: int = typer.Option(
            0, min=0, max=2**63 - 1, metavar="SEED", help="Seed of random initialisations (learned, t5, shaw)."
        ),
        dpi: int = typer.Option(120, metavar="DPI", help="Resolution of PNG output (1 to 1200 dots per inch)."),
    ) -> None:
        """Draw one figure of one scheme and save it (PNG, SVG or PDF by the suffix of --out)."""
        from ..viz import KINDS, PlotOptions, kinds_for, plot, save_figure
        from ..viz._mpl import MAX_DPI, check_suffix

        _check_scheme(scheme)
        if kind is None:
            _fail(f"--kind is required; for {scheme} choose one of: {', '.join(kinds_for(scheme)) or '(none)'}")
        if kind == "list":
            typer.echo(f"kinds for {scheme}: {', '.join(kinds_for(scheme)) or '(none)'}")
            return
        usable_path("--out", out)
        _check_parents(out)  # before the figure is drawn, not after
        try:
            check_suffix(out)
            if out.is_dir():
                raise ValueError(f"--out: {str(out)!r} is a folder; give a file name, e.g. {str(out / 'figure.png')!r}")
            if isinstance(dpi, bool) or not 1 <= dpi <= MAX_DPI:  # save_figure's check, before the drawing
                raise ValueError(f"--dpi must be a whole number from 1 to {MAX_DPI}, got {dpi!r}")
            if kind not in KINDS:
                raise ValueError(f"unknown kind of figure {kind!r}; choose one of: {', '.join(KINDS)}")
            if method not in ("pca", "umap"):
                raise ValueError(f"unknown projection method {method!r}; choose pca or umap")
            rope_scaling, base = _scaling_and_base(scaling, base)
            options = PlotOptions(
                dim=dim, positions=positions, base=base, heads=heads, method=method, seed=seed, scaling=rope_scaling
            )
            with stoppable(f"{out} not written"):
                figure = plot(scheme, kind, options)
                path = save_figure(figure, out, dpi=dpi)
        except (ValueError, TypeError, ImportError) as err:
            _fail(str(err))
        except OSError as err:
            _fail(f"--out: cannot write {str(out)!r} ({err.strerror or err})")
        typer.echo(f"wrote {path}")

    @app.command("check", short_help="Measure one scheme against the property criteria.")
    def check_command(
        scheme: str = typer.Argument(
            ...,
            metavar="SCHEME",
            help=scheme_help,
        ),
        dim: int | None = typer.Option(None, metavar="D", help="Code width (head width for rope, xpos, shaw)."),
        base: float | None = typer.Option(None, metavar="BASE", help="Frequency base (sinusoids, rotary schemes)."),
        heads: int | None = typer.Option(None, metavar="H", help="Number of heads (alibi, t5)."),
        scaling: str | None = typer.Option(None, metavar="JSON|FILE", help=_SCALING_HELP),
        seed: int = typer.Option(
            0, min=0, max=2**63 - 1, metavar="SEED", help="Seed of random initialisations (learned, t5, shaw)."
        ),
        as_json: bool = typer.Option(
            False,
            "--json",
            help="Print the verdicts as JSON (one object: scheme, scaling, family, criteria) instead of a table.",
        ),
        strict: bool = typer.Option(False, "--strict", help="Exit with status 1 when a criterion fails."),
    ) -> None:
        """Measure one scheme against the atlas's property criteria and print the table and what was
        found (exit status 0, or 1 with --strict when a criterion fails)."""
        from ..analysis.verdict import verdict_table
        from ..viz.kinds import PlotOptions, _randomly_initialised

        _check_scheme(scheme)
        try:
            rope_scaling, base = _scaling_and_base(scaling, base)
            options = PlotOptions(dim=dim, base=base, heads=heads, scaling=rope_scaling)  # validates the values
            config = _scheme_config(scheme, dim, base, heads, rope_scaling)
            if seed != 0 and not _randomly_initialised(scheme, options):  # as `posenc plot` says
                raise ValueError(
                    f"--seed {seed} sets the random initialisation of learned tables (learned, t5, "
                    f"shaw); {scheme!r} has none, so every seed gives the same table"
                )
            target: Any = scheme
            if config:
                from ..analysis import build_scheme, is_reference

                if is_reference(scheme):
                    raise ValueError(f"reference code {scheme!r} is checked at its atlas settings; drop --dim/--base")
                target = build_scheme(scheme, seed=seed, **config)
            with stoppable("no table printed"):
                row = verdict_table([target], seed=seed)[0]
        except (ValueError, TypeError) as err:
            _fail(str(err))
        failed = [c for c, v in row["verdict"].items() if v == "fail"]
        if as_json:
            import json

            criteria = {}
            for criterion, result in row["results"].items():
                criteria[criterion] = {
                    "verdict": row["verdict"][criterion],  # pass, fail, n/a or input (depends on the input)
                    "value": None if result is None else _finite(result.value),
                    "comparison": None if result is None else result.comparison,
                    "threshold": None if result is None else _finite(result.threshold),
                    "reason": row["reasons"][criterion],
                }
            document = {"scheme": scheme, "scaling": rope_scaling, "family": row["family"], "criteria": criteria}
            typer.echo(json.dumps(document, indent=2, ensure_ascii=False))
            if strict and failed:
                raise typer.Exit(1)
            return
        _print_check(row, options.label(scheme))
        if strict and failed:
            typer.echo(f"failed: {', '.join(failed)}", err=True)
            raise typer.Exit(1)

    @app.command("report", short_help="Write the atlas: index.html with every figure and check.")
    def report_command(
        out: Path = typer.Option(Path("atlas"), "--out", "-o", metavar="DIR", help="Folder to write index.html into."),
        results: Path | None = typer.Option(
            None,
            "--results",
            metavar="DIR",
            help="Runs folder of `posenc experiment` (or a folder of them): adds its results and draws the "
            "encodings it trained. Default: the records a clone of posenc ships in docs/experiments, "
            "when posenc runs from one.",
        ),
        no_results: bool = typer.Option(
            False, "--no-results", help="Leave the experiments out: the figures at initialisation only."
        ),
        scheme: list[str] | None = typer.Option(
            None,
            "--scheme",
            "-s",
            metavar="NAME",
            help="Only this scheme's section (repeat for several); default: every scheme and reference.",
        ),
    ) -> None:
        """Write the atlas: one self-contained index.html with every scheme drawn and checked."""
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        from ..report import build_report
        from ..report.atlas import shipped_records

        usable_path("--out", out)
        if no_results and results is not None:
            _fail("--results and --no-results contradict each other; give one")
        shipped = None if no_results or results is not None else shipped_records()
        if results is not None:
            usable_path("--results", results)
        if results is not None and not results.is_dir():
            _fail(f"--results {str(results)!r} is not a folder; give the runs folder of `posenc experiment`")
        scheme = list(dict.fromkeys(scheme or []))  # each section once
        for name in scheme:
            _check_scheme(name)
        if out.exists() and not out.is_dir():
            _fail(f"--out {str(out)!r} is a file; give a folder (index.html is written into it)")
        _check_parents(out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            _fail(f"--out: cannot create the folder {str(out)!r} ({err.strerror or err})")
        page = out / "index.html"
        if page.is_dir():
            _fail(f"--out: {str(page)!r} is a folder; remove it or give another --out")
        _check_writable(out)  # before the figures are drawn, not after
        with Progress(
            TextColumn("{task.description:<34}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            transient=False,
        ) as bar:
            task = bar.add_task("atlas", total=None)

            def progress(label: str, done: int, total: int) -> None:
                bar.update(task, description=label, completed=done, total=total)

            try:
                with stoppable(f"{page} not written" + (" (the earlier one is unchanged)" if page.exists() else "")):
                    summary = build_report(
                        out, results_dir=results or shipped, schemes=scheme or None, progress=progress
                    )
            except OSError as err:
                _fail(f"--out: cannot write {str(err.filename or out)!r} ({err.strerror or err})", code=1)
        sections = len(summary.schemes)
        typer.echo(
            f"wrote {summary.path}: {sections} section{'s' * (sections != 1)}, {summary.figures} figures"
            + (f", {summary.results} result{'s' * (summary.results != 1)}" if results or shipped else "")
            + f" in {summary.seconds:.1f} s"
        )
        if shipped is not None:
            from ..report.results import shown_path

            typer.echo(
                f"the experiments' results and trained encodings: from {shown_path(shipped)} "
                "(--no-results leaves them out)"
            )
        typer.echo(f"wrote {summary.path.with_name('explorer.html')}: the interactive explorer, linked from the atlas")
        for note in summary.notes:
            typer.echo(f"note: {note}", err=True)
        for error in summary.errors:
            typer.echo(f"warning: {error}", err=True)
