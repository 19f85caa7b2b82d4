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

__all__ = ["AGAIN_S", "reset", "send_again", "acknowledge", "acknowledged", "shielded"]

#: Seconds between two deliveries: a lost exception costs at most this (plus the time the main thread
#: spends inside one C call, which no signal interrupts), and the main thread meets the signal about
#: twice a second at most, which leaves a clean-up between two deliveries ample time to finish.
AGAIN_S = 0.5

_state: dict[str, Any] = {"signum": 0, "acknowledged": False, "shielded": 0, "thread": None}


def reset() -> None:
    """A new command begins: no signal has been taken yet."""
    _state["acknowledged"] = False


def send_again(signum: int, handler: Callable[[int, Any], Any]) -> None:
    """Called by ``handler`` (the handler that raises) when it has raised for ``signum``: from now on
    the signal goes to the main thread again every :data:`AGAIN_S` seconds while ``handler`` is the
    signal's handler, nothing is :func:`shielded` and the command has not :func:`acknowledge`\\ d it."""
    if _state["acknowledged"] or threading.current_thread() is not threading.main_thread():
        return
    _state["signum"] = signum  # the latest: a thread still running from an earlier command sends it
    thread = _state["thread"]
    if thread is not None and thread.is_alive():
        return
    thread = threading.Thread(target=_deliver, args=(handler,), name="posenc-signal-again", daemon=True)
    _state["thread"] = thread
    thread.start()


def acknowledge() -> None:
    """The command has taken the signal: it is saving or reporting, and nothing is sent again."""
    _state["acknowledged"] = True


def acknowledged() -> bool:
    """Whether a signal ended the command, which said so (see :func:`acknowledge`)."""
    return bool(_state["acknowledged"])


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """No signal is sent again while the block runs (one the user sends still arrives)."""
    _state["shielded"] += 1
    try:
        yield
    finally:
        _state["shielded"] -= 1


def _deliver(handler: Callable[[int, Any], Any]) -> None:
    main = threading.main_thread()
    while True:
        time.sleep(AGAIN_S)
        signum = _state["signum"]
        if _state["acknowledged"] or not main.is_alive() or signal.getsignal(signum) is not handler:
            return
        if _state["shielded"]:
            continue
        if hasattr(signal, "pthread_kill"):  # to the main thread itself: a sleep or a wait there ends (EINTR)
            signal.pthread_kill(main.ident, signum)
        else:  # pragma: no cover - Windows
            import _thread

            _thread.interrupt_main(signum)
