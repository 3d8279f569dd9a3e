"""One writer per output: an advisory lock beside the folder a run writes.

Two runs of the same build (a scheduled retrain and a hand-started one, two deployments) into
the same output would otherwise both work in the same scratch folder and race to publish. The
second run waits for the first (logging who holds the lock), then finds the output current and
skips; past ``wait_s`` seconds it refuses, naming the holder and the lock file. The lock is an
``flock`` on ``.<name>.lock`` next to the output: the kernel releases it when its holder exits,
even on SIGKILL, so a killed run never leaves a stale lock. (Local file systems; on NFS,
``flock`` depends on the server.)

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "mimic"
    >>> with output_lock(out, wait_s=0):
    ...     holder(out)["pid"] == os.getpid()
    True
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger("flows.locks")


class OutputLocked(RuntimeError):
    """Another live run holds the output's lock and did not finish within the wait."""


def lock_path(out) -> Path:
    out = Path(out)
    return out.parent / f".{out.name}.lock"


def holder(out) -> dict:
    """What the current (or last) holder wrote into the lock file: pid, host, since, what."""
    try:
        return json.loads(lock_path(out).read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        return {}


@contextmanager
def output_lock(out, wait_s: float = 3600.0, what: str = "a run", poll_s: float = 0.5):
    """Hold the lock of ``out`` for the block; wait up to ``wait_s`` seconds for another holder."""
    path = lock_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline, warned = time.monotonic() + wait_s, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                other = holder(out)
                who = f"pid {other.get('pid', '?')} on {other.get('host', '?')}, {other.get('what', 'a run')}, " \
                      f"since {other.get('since', '?')}"
                if time.monotonic() >= deadline:
                    raise OutputLocked(f"{out}: another run is writing it ({who}; lock {path}); waited {wait_s:g} s. "
                                       "Run again when it has finished, or raise CET_LOCK_WAIT") from None
                if not warned:
                    log.warning("%s: another run is writing it (%s); waiting up to %g s", out, who, wait_s)
                    warned = True
                time.sleep(poll_s)
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": os.uname().nodename, "what": what,
                                  "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode(), 0)
        if warned:
            log.info("%s: the other run finished; going on", out)
        yield path
    finally:
        os.close(fd)  # closing releases the flock
