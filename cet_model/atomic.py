"""Files that appear whole: write under a temporary name in the same folder, then rename."""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
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


# how a full disk or a file-size limit shows up in libraries that do not raise OSError
# (polars: "os error 28"; DuckDB: the C library's message)
_NO_SPACE_TEXT = ("No space left on device", "File too large", "Disk quota exceeded",
                  "os error 27", "os error 28", "os error 122")
_NO_SPACE_ERRNO = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}


def storage_error(path, exc: BaseException) -> OSError | None:
    """An OSError naming ``path`` when ``exc`` is a failed write (no space, a file-size limit, a
    permission), else None."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if (isinstance(exc, OSError) and exc.errno in _NO_SPACE_ERRNO) or any(t in str(exc) for t in _NO_SPACE_TEXT):
        return OSError(errno.ENOSPC, f"{path}: could not be written: no space left on the device or the file-size "
                                     f"limit reached ({text}); nothing partial was kept: free space and run again")
    if isinstance(exc, OSError):
        return OSError(exc.errno, f"{path}: could not be written ({exc.strerror or text})")
    return None


@contextmanager
def writing(path, *temporaries):
    """Around a write of ``path``: on failure, remove ``temporaries`` and raise an error naming
    ``path`` (``storage_error``) instead of a library's message without a file name.

    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "x.json"
    >>> with writing(target):
    ...     raise OSError(errno.ENOSPC, "No space left on device")
    Traceback (most recent call last):
    ...
    OSError: [Errno 28] .../x.json: could not be written: no space left on the device or the file-size limit ...
    """
    try:
        yield
    except BaseException as exc:
        for t in temporaries:
            t = Path(t)
            if t.is_dir():
                shutil.rmtree(t, ignore_errors=True)
            else:
                t.unlink(missing_ok=True)
        err = storage_error(path, exc) if isinstance(exc, Exception) else None
        if err is not None:
            raise err from exc
        raise


def write_text(path, text: str) -> Path:
    """Write ``text`` to a temporary name beside ``path``, then rename: readers see the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_name(path))
    with writing(path, tmp):
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    return path


def save_figure(fig, path) -> Path:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_name(path))
    os.close(fd)
    try:
        with writing(path, tmp):
            fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
            os.replace(tmp, path)
    finally:
        plt.close(fig)
    return path
