"""Crash points for the crash-consistency tests (docs/reliability.md section 2).

``CET_CRASH_AT=<point>`` makes the process kill itself with SIGKILL when it reaches that point,
as a power cut or the kernel's OOM killer would: no exception, no cleanup, no flushing. Unset
(always, outside those tests) a crash point does nothing. Points: ``staging`` (a MIMIC table
half staged), ``sql`` (after the first SQL model ran), ``train`` (after a model's second
epoch), ``promote`` (a registry decision in ``history.jsonl``, ``promoted.json`` not yet
written), ``scan`` (a Reddit comment dump scanned but its part not yet in place), ``embed``
(after the first block of embeddings was saved), ``report`` (figures written, report.md not).
"""

from __future__ import annotations

import os
import signal

POINTS = ("staging", "sql", "train", "promote", "scan", "embed", "report")


def crash_point(name: str) -> None:
    """SIGKILL this process if CET_CRASH_AT names this point."""
    if name not in POINTS:
        raise ValueError(f"unknown crash point {name!r}")
    if os.environ.get("CET_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
