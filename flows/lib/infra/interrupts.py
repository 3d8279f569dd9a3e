"""Ctrl-C that reaches the work a flow runs in its task threads.

Python hears Ctrl-C in the main thread only, and a flow's task runner waits for its running
tasks before the flow ends: left alone, a task in the middle of a DuckDB statement or of a dump's
scan would hold the command until it finished (CHARTEVENTS alone stages in minutes at full
scale). A command
(``cli.interruptible``) installs :func:`on_interrupt` as its SIGINT handler: it marks the
command interrupted and interrupts every DuckDB connection registered with :func:`stoppable`,
whose statement then ends with DuckDB's ``InterruptException``, raised on as :class:`Interrupted`;
long Python loops call :func:`check` between their steps and end with it. The task crashes, the
runner's wait ends, and the command exits with status 130.

    >>> class Connection:
    ...     def interrupt(self):
    ...         print("interrupted")
    >>> con = stoppable(Connection())
    >>> stop_all()
    interrupted
    >>> requested()   # check("reading RC_2015-01.zst") raises Interrupted now
    True
    >>> reset(); requested()
    False
"""

from __future__ import annotations

import threading
import weakref
from typing import TypeVar

T = TypeVar("T")

_requested = threading.Event()
_stoppable: weakref.WeakSet = weakref.WeakSet()  # a closed or collected connection leaves by itself
_lock = threading.Lock()


class Interrupted(KeyboardInterrupt):
    """Work in a task thread ended because the command was interrupted (Ctrl-C). A
    ``KeyboardInterrupt``: Prefect records the task as crashed by an interrupt, as it does the
    flow, in one line without a traceback, and no ``except Exception`` takes it for an error of the
    data (cleanups here catch ``BaseException``)."""


def stoppable(con: T) -> T:
    """Register ``con`` (an object with ``interrupt()``, such as a DuckDB connection) to be
    interrupted on Ctrl-C; returns it. It stays registered while it lives."""
    with _lock:
        _stoppable.add(con)
    if _requested.is_set():  # interrupted before it was registered: it must not start
        raise Interrupted("interrupted before it started")
    return con


def stop_all() -> None:
    """Mark the command interrupted and interrupt every registered connection (thread-safe; a
    closed connection's error is ignored)."""
    _requested.set()
    with _lock:
        live = list(_stoppable)
    for con in live:
        try:
            con.interrupt()
        except Exception:  # noqa: BLE001 (closed meanwhile: nothing of it runs)
            pass


def check(what: str) -> None:
    """Raise :class:`Interrupted` naming ``what`` once the command is interrupted."""
    if _requested.is_set():
        raise Interrupted(f"{what}: interrupted")


def requested() -> bool:
    """Whether the command has been interrupted."""
    return _requested.is_set()


_signals: list[int] = []  # the signals that interrupted the command, first first


def reset() -> None:
    """Forget an earlier interruption (a command that starts in a process that ran another)."""
    _requested.clear()
    _signals.clear()


def on_interrupt(signum, frame) -> None:
    """A handler of SIGINT (Ctrl-C), and of SIGTERM and SIGHUP (``kill``, a closed terminal), which
    stop a command the same way: :func:`stop_all`, then ``KeyboardInterrupt`` in the main thread."""
    _signals.append(signum)
    stop_all()
    raise KeyboardInterrupt


def signal_received() -> int | None:
    """The first signal that interrupted the command, or None."""
    return _signals[0] if _signals else None


def stopped_by() -> tuple[str, int]:
    """What a stopped command says and its exit status, by the signal that stopped it (Ctrl-C
    when none was heard: a ``KeyboardInterrupt`` raised otherwise).

    >>> reset(); stopped_by()
    ('interrupted', 130)
    """
    import signal

    signum = signal_received() or signal.SIGINT
    word = {signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}.get(signum, "interrupted")
    return word, 128 + int(signum)
