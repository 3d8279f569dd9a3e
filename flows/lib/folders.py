"""Folders that appear whole: build under a temporary sibling name, then swap into place."""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

log = logging.getLogger("flows.folders")
_WRITER = re.compile(r"-(\d+)(?:-[^-]+)?$")  # "...tmp-<pid>", ".partial-<pid>", ".incoming-<pid>-<random>"


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_dead_leftovers(directory, pattern: str) -> int:
    """Remove temporaries matching ``pattern`` in ``directory`` whose writer is gone (a kill -9,
    a power cut): their names carry the writer's pid, and a live writer's are left alone. They
    are never read as finished outputs either way; this only frees the space."""
    n = 0
    for p in Path(directory).glob(pattern):
        m = _WRITER.search(p.name)
        if m is None or _alive(int(m.group(1))):
            continue
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        n += 1
    if n:
        log.warning("%s: removed %d leftover temporaries of a killed run (%s)", directory, n, pattern)
    return n


def refuse_non_empty(out: Path, overwrite: bool) -> None:
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} exists and is not empty (pass overwrite=True / --force to replace it)")


def temporary_sibling(out: Path) -> Path:
    """A fresh, empty folder next to ``out`` to build in."""
    remove_dead_leftovers(out.parent, f".{out.name}.partial-*")
    remove_dead_leftovers(out.parent, f".{out.name}.old-*")
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def publish(tmp: Path, out: Path) -> Path:
    """Move the finished ``tmp`` to ``out``, replacing an old ``out`` only once ``tmp`` is complete."""
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, out)
    return out
