"""Files that appear whole: write under a temporary name in the same folder, then rename."""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import shutil
import tempfile
import uuid
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


def _replace(path, write) -> Path:
    """``write(temporary)`` a file beside ``path``, then rename it to ``path``: readers see the old
    file or the new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_name(path))
    os.close(fd)
    with writing(path, tmp):
        write(tmp)
        os.replace(tmp, path)
    return path


def write_text(path, text: str) -> Path:
    """Write ``text`` to a temporary name beside ``path``, then rename: readers see the old file or the new one."""
    return _replace(path, lambda tmp: Path(tmp).write_text(text))


def copy_file(src, path) -> Path:
    """Copy the file ``src`` to ``path`` through a temporary name beside it, then rename."""
    return _replace(path, lambda tmp: shutil.copyfile(src, tmp))


def save_figure(fig, path) -> Path:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    try:
        return _replace(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight"))
    finally:
        plt.close(fig)


# --- which folders a write may replace -------------------------------------------------------
# Every folder this project writes whole (a dataset, a stand-in's tables) carries MARKER, which
# lists the entries it wrote. A folder is replaced only when it is absent, empty, or holds the
# marker and nothing besides what the marker lists and the project's stamps: never a folder of the
# user's, never one the user added a file to.
MARKER = ".cet-output.json"
STAMPS = frozenset({MARKER, ".stage.json"})
# what a dataset folder held before folders were marked (read as the project's own, see owned_entries)
_DATASET_FILES = frozenset({"manifest.json", "features.parquet", "events.parquet", "sequences.npy"})


def mark(folder, kind: str) -> Path:
    """Write ``MARKER`` into ``folder`` listing its present entries (call it last, before the rename)."""
    folder = Path(folder)
    entries = sorted(p.name for p in folder.iterdir() if p.name not in STAMPS)
    (folder / MARKER).write_text(json.dumps({"written_by": "cet", "kind": kind, "entries": entries}, indent=2))
    return folder / MARKER


def marker_kind(folder) -> str | None:
    """The kind of output ``folder``'s ``MARKER`` records ("dataset", "report", ...), or None."""
    try:
        record = json.loads((Path(folder) / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return str(record.get("kind")) if isinstance(record, dict) and record.get("written_by") == "cet" else None


def owned_entries(folder) -> set[str] | None:
    """The entries of ``folder`` this project wrote (its ``MARKER``'s list), or None when it holds
    no mark of this project. A folder written before folders were marked counts as the project's
    when it holds a dataset's ``manifest.json`` (and then only dataset files are its), or a
    stand-in's ``standin.json`` (its truth, its checksum file and the files that lists)."""
    folder = Path(folder)
    try:
        record = json.loads((folder / MARKER).read_text())
        if isinstance(record, dict) and record.get("written_by") == "cet" and isinstance(record.get("entries"), list):
            return {str(e) for e in record["entries"]}
    except (OSError, ValueError):
        pass
    if (folder / "manifest.json").is_file():
        return set(_DATASET_FILES)
    try:  # a stand-in's record names its generator; its tables or dumps are listed in its checksum file
        record = json.loads((folder / "standin.json").read_text())
    except (OSError, ValueError):
        return None
    if not (isinstance(record, dict) and str(record.get("generator", "")).startswith("flows.lib.standin.")):
        return None
    owned = {"standin.json", "standin_truth.parquet"}
    for name in ("SHA256SUMS.txt", "sha256sums.txt"):
        try:
            lines = (folder / name).read_text().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        owned |= {name} | {line.split()[-1].lstrip("*") for line in lines if len(line.split()) >= 2}
    return owned


def check_replaceable(path, what: str = "output folder") -> Path:
    """Raise FileExistsError naming ``path`` unless a write may replace it: absent, an empty folder,
    or a folder this project wrote that holds nothing else (``owned_entries``). A symbolic link is
    followed to the folder it names, which must then pass the same test; returns the real path to
    write (a link to nothing is refused)."""
    path = Path(path)
    if path.is_symlink():
        target = path.resolve()
        if not target.exists():
            raise FileExistsError(f"{path}: a symbolic link to {target}, which does not exist; give an existing "
                                  f"folder or a path that is not a link as the {what}")
        path = target
    path = Path(os.path.abspath(path))
    if not path.exists():
        return path
    if not path.is_dir():
        raise FileExistsError(f"{path}: exists and is not a folder; the {what} must be a folder this project "
                              "writes: choose another path")
    entries = {p.name for p in path.iterdir()}
    if not entries:
        return path
    owned = owned_entries(path)
    if owned is None:
        raise FileExistsError(f"{path}: exists, is not empty and was not written by CET (no {MARKER}); CET "
                              f"replaces only folders it wrote: choose another {what}, or empty it yourself")
    foreign = sorted(entries - owned - STAMPS)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise FileExistsError(
            f"{path}: holds {len(foreign)} entr{'y' if len(foreign) == 1 else 'ies'} CET did not "
            f"write ({shown}); replacing the folder would delete {'it' if len(foreign) == 1 else 'them'}"
            f": move {'it' if len(foreign) == 1 else 'them'} out or choose another {what}"
        )
    return path


def claim_files(folder, names, kind: str = "report", legacy=None, what: str = "output folder",
                record: bool = True) -> Path:
    """Before files ``names`` are written into ``folder`` (a report, a table, figures), which may
    hold other files: refuse (FileExistsError naming the file) when one of them exists and this
    project did not write it there, else record them in the folder's ``MARKER`` and return the
    folder. The marker is written before the files, so that a write a kill interrupts is still
    claimed on the rerun. ``legacy(folder)``: True when the folder holds a record of this project
    written before folders were marked; its files of these names then count as the project's.
    A folder marked as another kind (a dataset, a stand-in) is refused: it stays as it was built.
    ``record=False`` only checks: a long command asks before its work, and claims when it writes.

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (out / "notes.md").write_text("mine")
    >>> claim_files(out, ["table.md"]) == out          # new names beside a user's file: fine
    True
    >>> _ = (out / "table.md").write_text("written")
    >>> claim_files(out, ["table.md"]) == out          # claimed before: replaced
    True
    >>> claim_files(out, ["notes.md"])
    Traceback (most recent call last):
    ...
    FileExistsError: .../notes.md: exists and was not written by CET; CET replaces only its own outputs: ...
    """
    folder = Path(folder)
    if folder.is_symlink() and not folder.resolve().is_dir():
        raise FileExistsError(f"{folder}: a symbolic link to {folder.resolve()}, which is not a folder; give a "
                              f"folder as the {what}")
    if folder.exists() and not folder.is_dir():
        raise FileExistsError(f"{folder}: exists and is not a folder; the {what} must be a folder")
    names, marker = [str(n) for n in names], None
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        pass
    if not (isinstance(marker, dict) and marker.get("written_by") == "cet" and isinstance(marker.get("entries"), list)):
        marker = None
        if (folder / MARKER).exists() or (folder / MARKER).is_symlink():  # a file of that name, not CET's
            raise FileExistsError(f"{folder / MARKER}: exists and is not CET's record of its outputs; choose "
                                  f"another {what}, or move the file away")
    if marker is not None and marker.get("kind") != kind:
        raise FileExistsError(f"{folder}: a folder CET wrote as a {marker.get('kind')}; it stays as it was built: "
                              f"choose another {what}")
    if marker is None and folder.is_dir() and owned_entries(folder) is not None:  # one from before the marker
        raise FileExistsError(f"{folder}: a dataset or stand-in folder CET wrote; it stays as it was built: "
                              f"choose another {what}")
    owned = {str(e) for e in marker["entries"]} if marker is not None else set()
    if marker is None and legacy is not None and folder.is_dir() and legacy(folder):
        owned = set(names)
    for name in names:
        path = folder / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise FileExistsError(f"{path}: exists and is not a plain file; choose another {what}")
        if path.exists() and name not in owned:
            raise FileExistsError(f"{path}: exists and was not written by CET; CET replaces only its own outputs: "
                                  f"choose another {what}, or move the file away")
    if record and (marker is None or not set(names) <= owned):
        folder.mkdir(parents=True, exist_ok=True)
        write_text(folder / MARKER, json.dumps({"written_by": "cet", "kind": kind,
                                                "entries": sorted(owned | set(names))}, indent=2))
    return folder


def replace_folder(src, dst, kind: str) -> Path:
    """Mark the finished ``src`` and move it to ``dst``; an old ``dst`` is replaced only when
    ``check_replaceable`` allows it, and only once ``src`` is complete."""
    src, dst = Path(src), check_replaceable(dst)
    mark(src, kind)
    if dst.exists():
        old = dst.parent / f"{temporary_name(dst, 'old')}{uuid.uuid4().hex[:8]}"
        os.replace(dst, old)
        os.replace(src, dst)
        shutil.rmtree(old, ignore_errors=True)
    else:
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, dst)
    return dst


# a cell a spreadsheet would run as a formula (OWASP's list): written with a leading apostrophe
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value):
    """``value`` with a leading ``'`` when it is text a spreadsheet would read as a formula.

    >>> spreadsheet_safe("@SUM(A1:A9)"), spreadsheet_safe("age"), spreadsheet_safe(-1.5)
    ("'@SUM(A1:A9)", 'age', -1.5)
    """
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA_START) else value


def write_csv(frame, path) -> Path:
    """Write a polars frame as CSV atomically, every text cell and column name ``spreadsheet_safe``."""
    import polars as pl

    path = Path(path)
    text = [c for c, t in frame.schema.items() if t == pl.Utf8]
    frame = frame.with_columns(pl.col(c).map_elements(spreadsheet_safe, return_dtype=pl.Utf8) for c in text)
    frame = frame.rename({c: spreadsheet_safe(c) for c in frame.columns if spreadsheet_safe(c) != c})
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=temporary_name(path))
    os.close(fd)
    with writing(path, tmp):
        frame.write_csv(tmp)
        os.replace(tmp, path)
    return path
