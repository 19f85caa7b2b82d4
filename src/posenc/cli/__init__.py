"""The ``posenc`` command line: ``report``, ``plot``, ``check``, ``experiment``, ``bench``.

Each group of commands lives in its own module and registers itself on the root app; every module
imports its heavy dependencies (matplotlib, the experiments, the peers) inside the command body,
so ``posenc --help`` stays fast.

Ctrl-C and SIGTERM end every command with one line and exit 130 or 143. :func:`main` takes both
signals over before anything heavy is imported (this module needs the standard library alone, and
``import posenc`` loads torch only when a name of it is used): until a command starts, a signal
ends the process at once, since an exception raised inside the imports of torch, numpy or typer
can leave them half built (a traceback, a RecursionError, a C++ abort at exit). While the command
runs, Ctrl-C and SIGTERM raise ``Interrupted`` (a KeyboardInterrupt), so that the command can save
its work or remove what it half wrote; one it does not catch is reported by the root command.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["main", "build_app", "fail", "usable_path", "stopped", "stoppable", "MAX_THREADS"]

#: Most ``--threads`` a command takes: more than any machine has CPUs, and far below the values
#: torch cannot take at all (2**63 and up stopped with "Overflow when unpacking long long").
MAX_THREADS = 1024

#: The signals that end a command, and the handlers :func:`main` found for them while it holds them.
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_found: dict[int, Any] = {}
#: Whether a signal ended the command (set by :func:`stopped`): :func:`main` then exits at once.
_ended = {"by_signal": False}


def fail(message: str, code: int = 2):  # -> NoReturn
    """Print ``error: MESSAGE`` as one line on stderr (never wrapped: logs and pipes stay greppable)
    and exit with ``code``: 2 for bad input (the usage-error code), 1 for a run that failed."""
    import typer
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True).print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=code)


def usable_path(option: str, path: str | os.PathLike) -> None:
    """Exit 2 with one line naming ``option`` when ``path`` cannot even be looked up: a name longer
    than the file system allows, a folder above it that may not be searched. pathlib's ``exists()``
    and ``is_dir()`` raise those as an OSError, which surfaced as a traceback. A path that does not
    exist yet, or has a file where a folder goes, is left to the command's own checks."""
    import errno

    try:
        os.stat(path)
    except OSError as err:
        if err.errno not in (errno.ENOENT, errno.ENOTDIR):
            fail(f"{option}: cannot use {str(path)!r} ({err.strerror or err})")
    except ValueError as err:  # an embedded NUL byte
        fail(f"{option}: cannot use {str(path)!r} ({err})")


def stopped(err: BaseException) -> tuple[str, int]:
    """How a command stopped by ``err`` says so, and its exit code: ``("interrupted", 130)`` for
    Ctrl-C, ``("stopped by SIGTERM", 143)`` for posenc's SIGTERM interrupt (128 + the signal, as a
    shell reports a process that a signal ended). The command is then taking the signal: it is
    no longer sent again (see :mod:`posenc._interrupts`), and :func:`main` ends the process at once."""
    from .. import _interrupts

    _interrupts.acknowledge()
    _ended["by_signal"] = True
    signum = int(getattr(err, "signum", signal.SIGINT))
    return _how(signum), 128 + signum


def _how(signum: int) -> str:
    return "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"


@contextlib.contextmanager
def _signals_end_the_process() -> Iterator[None]:
    """For the duration, Ctrl-C or SIGTERM writes ``interrupted`` (``stopped by SIGTERM``) on stderr
    and ends the process at once with 130 (143); the handlers found are restored after. A signal
    that is ignored stays ignored; off the main thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    found = {signum: signal.getsignal(signum) for signum in _SIGNALS}

    def end(signum: int, frame: Any) -> None:
        os.write(2, f"{_how(signum)}\n".encode())
        os._exit(128 + signum)  # no clean-up to run: nothing is written while this handler is set

    taken = [signum for signum, was in found.items() if was is not None and was is not signal.SIG_IGN]
    for signum in taken:
        signal.signal(signum, end)
    _found.update({signum: found[signum] for signum in taken})
    try:
        yield
    finally:
        for signum in taken:
            signal.signal(signum, found[signum])
            _found.pop(signum, None)


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """For the duration (a command), the handlers :func:`main` found are back, and SIGINT and SIGTERM
    raise ``Interrupted`` (a KeyboardInterrupt); :func:`main`'s after. The exception can go off
    where it is dropped (a finalizer, a library's bare ``except:``; see ``terminate_as_interrupt``):
    the signal is then sent again every half second until the command takes it (see
    :mod:`posenc._interrupts`), training stops after its step in progress, and a finalizer prints
    no traceback."""
    if not _found or threading.current_thread() is not threading.main_thread():
        yield
        return
    from ..experiments.train import check_signalled, terminate_as_interrupt

    held = {signum: signal.getsignal(signum) for signum in _found}
    hook = sys.unraisablehook

    def unraisable(info: Any) -> None:
        if not issubclass(info.exc_type, KeyboardInterrupt):
            hook(info)

    for signum, was in _found.items():
        signal.signal(signum, was)
    sys.unraisablehook = unraisable
    try:
        with terminate_as_interrupt():
            yield
            check_signalled()  # a signal whose exception the command never saw
    finally:
        sys.unraisablehook = hook
        for signum, handler in held.items():
            signal.signal(signum, handler)


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

    from typer.core import TyperGroup

    class Root(TyperGroup):
        """The root command: a command runs with the signals raising exceptions; one that it lets
        through ends it with one line, 130 or 143."""

        def invoke(self, ctx: Any) -> Any:
            try:
                with _signals_interrupt():
                    return super().invoke(ctx)
            except KeyboardInterrupt as err:
                how, code = stopped(err)
                typer.echo(how, err=True)
                raise typer.Exit(code) from None

    app = typer.Typer(
        name="posenc",
        cls=Root,
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
    """Entry point of the ``posenc`` script (``argv`` None: the command line's); returns the exit code.

    A command that a signal ended exits at once: the interpreter's own exit after it (freeing torch's
    and matplotlib's modules, C++ destructors) took 2-8 s on a loaded machine, with every file
    already written or removed. The ``atexit`` functions still run; only that teardown is skipped."""
    _ended["by_signal"] = False
    with _signals_end_the_process():
        code = _run(argv)
    if argv is None and threading.current_thread() is threading.main_thread():
        if hasattr(signal, "pthread_sigmask"):
            # the command is done and the interpreter's exit follows (long with torch loaded, and
            # mostly after Python stops handling signals): a signal now would only turn that exit into
            # a silent death by the signal, so it waits, and is dropped with the process
            signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
        if _ended["by_signal"]:
            _exit_now(code)
    return code


def _exit_now(code: int) -> None:  # -> NoReturn
    """End the process with ``code`` after the ``atexit`` functions and with the output flushed,
    without the interpreter's teardown."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _run(argv: list[str] | None) -> int:
    try:
        app = build_app()
        app(args=argv if argv is not None else sys.argv[1:], prog_name="posenc", standalone_mode=True)
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except KeyboardInterrupt as err:  # off the main thread, where the signals are not taken over
        how, code = stopped(err)
        print(how, file=sys.stderr)
        return code
    return 0
