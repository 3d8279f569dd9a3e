"""Files that appear whole: write under a temporary name in the same folder, then rename."""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger("cet_model")
# temporaries carry their writer's pid: "<name>.tmp-<pid>", ".partial-<pid>", "-<pid>-<random>"
_WRITER = re.compile(r"-(\d+)(?:-[^-]+)?$")


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


def temporary_name(path: Path, kind: str = "tmp") -> str:
    """``.<name>.<kind>-<pid>-``: a prefix for a temporary next to ``path``, after sweeping the
    ones a killed writer left."""
    remove_dead_leftovers(path.parent, f".{path.name}.{kind}-*")
    return f".{path.name}.{kind}-{os.getpid()}-"


def write_text(path, text: str) -> Path:
    """Write ``text`` to a temporary name beside ``path``, then rename: readers see the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_name(path))
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def save_figure(fig, path) -> Path:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_name(path))
    os.close(fd)
    try:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)
    return path
