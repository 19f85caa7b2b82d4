"""The ``posenc`` command line: ``report``, ``plot``, ``check``, ``experiment``, ``bench``.

Each group of commands lives in its own module and registers itself on the root app; every module
imports its heavy dependencies (matplotlib, the experiments, the peers) inside the command body,
so ``posenc --help`` stays fast.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

__all__ = ["main", "build_app", "fail", "stopped", "stoppable"]


def fail(message: str, code: int = 2):  # -> NoReturn
    """Print ``error: MESSAGE`` as one line on stderr (never wrapped: logs and pipes stay greppable)
    and exit with ``code``: 2 for bad input (the usage-error code), 1 for a run that failed."""
    import typer
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=code)


def stopped(err: BaseException) -> tuple[str, int]:
    """How a command stopped by ``err`` says so, and its exit code: ``("interrupted", 130)`` for
    Ctrl-C, ``("stopped by SIGTERM", 143)`` for posenc's SIGTERM interrupt (128 + the signal, as a
    shell reports a process that a signal ended)."""
    import signal

    signum = int(getattr(err, "signum", signal.SIGINT))
    return ("interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"), 128 + signum


@contextlib.contextmanager
def stoppable(unwritten: str) -> Iterator[None]:
    """Ctrl-C or SIGTERM inside the block: one line on stderr, ``interrupted: UNWRITTEN``, and exit
    130 or 143 (files are written whole or not at all)."""
    import typer

    from ..experiments.train import terminate_as_interrupt

    try:
        with terminate_as_interrupt():
            yield
    except KeyboardInterrupt as err:
        how, code = stopped(err)
        typer.echo(f"{how}: {unwritten}", err=True)
        raise typer.Exit(code) from None


_GROUPS = ("posenc.cli.atlas", "posenc.cli.experiment", "posenc.cli.bench")


def build_app():  # -> typer.Typer
    """The root Typer app with every command group registered."""
    try:
        import typer
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise SystemExit("the posenc command line needs its extra: pip install 'posenc[cli]'") from err
    import importlib

    app = typer.Typer(
        name="posenc",
        help="posenc: positional encodings for transformers, drawn, checked, trained and timed.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        # plain click help and errors: rich mode prints "<bool>" beside every on/off switch (--quick
        # looked like it took a value) and boxes usage errors unlike posenc's own one-line errors
        rich_markup_mode=None,
    )

    def show_version(value: bool) -> None:
        if value:  # an eager option's callback: runs before click asks for a command
            from .. import __version__

            typer.echo(f"posenc {__version__}")
            raise typer.Exit()

    @app.callback()
    def root(
        version: bool = typer.Option(
            False, "--version", is_eager=True, callback=show_version, help="Print posenc's version and exit."
        ),
    ) -> None:
        """posenc: positional encodings for transformers, drawn, checked, trained and timed."""

    for module in _GROUPS:
        try:
            group = importlib.import_module(module)
        except ModuleNotFoundError as err:
            if err.name != module:
                raise
            continue  # group not built yet
        group.register(app)
    return app


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``posenc`` script; returns the exit code."""
    app = build_app()
    try:
        app(args=argv if argv is not None else sys.argv[1:], prog_name="posenc", standalone_mode=True)
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0
