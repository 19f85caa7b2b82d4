"""``python -m posenc`` and the ``posenc`` command: the command line of :mod:`posenc.cli`.

Until :func:`posenc.cli.main` takes the signals over, Ctrl-C or SIGTERM would stop the start-up
imports with Python's own traceback (SIGINT) or no word at all (SIGTERM): here they end the
process with one line and the usual status (130, 143), as they do later. Nothing has run yet, so
there is nothing to save. A signal that is ignored (``nohup``, a background job) stays ignored.
"""

import os
import signal
import sys

_DEFAULTS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


def _while_starting(signum: int, frame: object) -> None:
    how = "interrupted" if signum == signal.SIGINT else "stopped by SIGTERM"
    os.write(2, f"{how} while starting: nothing was run\n".encode())
    os._exit(128 + signum)  # not an exception: an import's bare `except:` could swallow one


def run() -> int:
    """Take the signals for the imports, give them back, then run the command line."""
    taken = {s: h for s, h in _DEFAULTS.items() if signal.getsignal(s) is h}
    for signum in taken:
        signal.signal(signum, _while_starting)
    from .cli import main

    for signum, handler in taken.items():
        signal.signal(signum, handler)  # main() takes the defaults over (and keeps what it did not find)
    return main()


if __name__ == "__main__":
    sys.exit(run())
