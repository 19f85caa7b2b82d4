"""A signal's exception sent again until the command takes it (standard library only).

While a command runs, SIGINT and SIGTERM raise an exception wherever the main thread is (see
:func:`posenc.experiments.train.terminate_as_interrupt`), and there it can be lost: Python drops one
raised inside a finalizer or a weakref callback, and a library's bare ``except:`` swallows one
(mpmath around ``import gmpy2``; clean-ups in matplotlib and torch). ``posenc report`` then drew on
until its next check, once 35-47 s later on a loaded machine. So once the handler has raised, the
signal is sent to the main thread again every :data:`AGAIN_S` seconds until the command says it has
begun its orderly exit (:func:`acknowledge`: the exception reached the code that reports it, or
training took the signal over to save the step in progress), or the handler that raises is no
longer in place. A clean-up that must finish (removing a temporary file) runs :func:`shielded`: no
signal is sent again while it runs.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["AGAIN_S", "reset", "send_again", "acknowledge", "shielded"]

#: Seconds between two deliveries: a lost exception costs at most this (plus the time the main thread
#: spends inside one C call, which no signal interrupts), and the main thread meets the signal about
#: twice a second at most, which leaves a clean-up between two deliveries ample time to finish.
AGAIN_S = 0.5

_state: dict[str, Any] = {"signum": 0, "acknowledged": False, "shielded": 0, "command": 0, "thread": None}


def reset() -> None:
    """A command begins or ends (the outermost block that raises on a signal): nothing taken yet,
    and nothing an earlier command's signal started is sent into this one."""
    _state["acknowledged"] = False
    _state["command"] += 1


def send_again(signum: int, handler: Callable[[int, Any], Any]) -> None:
    """Called by ``handler`` (the handler that raises) when it has raised for ``signum``: from now on
    the signal goes to the main thread again every :data:`AGAIN_S` seconds while ``handler`` is the
    signal's handler, nothing is :func:`shielded` and the command has not :func:`acknowledge`\\ d it."""
    if _state["acknowledged"] or threading.current_thread() is not threading.main_thread():
        return
    _state["signum"] = signum
    thread = _state["thread"]
    if thread is not None and thread.is_alive() and thread.command == _state["command"]:
        return
    thread = threading.Thread(target=_deliver, args=(handler, _state["command"]), name="posenc-signal-again")
    thread.daemon, thread.command = True, _state["command"]
    _state["thread"] = thread
    thread.start()


def acknowledge() -> None:
    """The command has taken the signal: it is saving or reporting, and nothing is sent again."""
    _state["acknowledged"] = True


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """No signal is sent again while the block runs (one the user sends still arrives)."""
    _state["shielded"] += 1
    try:
        yield
    finally:
        _state["shielded"] -= 1


def _deliver(handler: Callable[[int, Any], Any], command: int) -> None:
    import _thread

    main = threading.main_thread()
    while True:
        time.sleep(AGAIN_S)
        signum = _state["signum"]
        if _state["acknowledged"] or _state["command"] != command or not main.is_alive():
            return
        if signal.getsignal(signum) is not handler:
            return
        if not _state["shielded"]:
            # runs the handler in place in the main thread, as a signal would; never the default
            # action (a handler put back in between: SIGTERM's would end the process silently)
            _thread.interrupt_main(signum)
