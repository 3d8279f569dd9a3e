"""Folders that appear whole: build under a temporary sibling name, then swap into place; and
the checks that keep an output away from what the user owns (docs/reliability.md, "Outputs")."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from cet_model.atomic import (
    check_replaceable,
    marker_kind,
    owned_entries,
    remove_dead_leftovers,
    replace_folder,
    write_text,
)


def refuse_non_empty(out: Path, overwrite: bool) -> Path:
    """Refuse a non-empty ``out`` unless ``overwrite``; even then only a folder this project wrote
    is replaced (``check_replaceable``). Returns the real path to write (links followed)."""
    real = check_replaceable(out)
    if real.exists() and any(real.iterdir()) and not overwrite:
        raise FileExistsError(f"{out} exists and is not empty (pass overwrite=True / --force to replace it)")
    return real


def temporary_sibling(out: Path) -> Path:
    """A fresh, empty folder next to ``out`` to build in."""
    remove_dead_leftovers(out.parent, f".{out.name}.partial-*")
    remove_dead_leftovers(out.parent, f".{out.name}.old-*")
    tmp = out.with_name(f".{out.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def publish(tmp: Path, out: Path, kind: str = "standin") -> Path:
    """Move the finished ``tmp`` to ``out``, replacing an old ``out`` (only one this project
    wrote) once ``tmp`` is complete."""
    return replace_folder(tmp, out, kind)


def _real(path) -> Path:
    return Path(os.path.realpath(os.path.expanduser(str(path))))


def overlap(a, b) -> str | None:
    """How path ``a`` sits against ``b`` ("is", "is inside", "contains"), links followed; None when apart."""
    a, b = _real(a), _real(b)
    if a == b:
        return "is"
    if b in a.parents:
        return "is inside"
    if a in b.parents:
        return "contains"
    return None


def refuse_overlap(out, what: str, sources: dict) -> None:
    """ValueError when the output ``out`` (named ``what``, e.g. ``--out``) is, is inside or contains
    any of ``sources`` ({option: path or list of paths or None}): a build must not write into, or
    replace a folder holding, what it reads."""
    for option, paths in sources.items():
        for p in paths if isinstance(paths, (list, tuple)) else [paths]:
            if p is None or str(p).startswith(("http://", "https://")):
                continue
            how = overlap(out, p)
            if how is not None:
                raise ValueError(f"{what} {out} {how} {option} {p}: an output must lie apart from the inputs it is "
                                 "built from (replacing it could delete them): choose another path")


def check_output_folder(out, sources: dict, work_dir=None, what: str = "--out") -> Path:
    """Everything a build checks of its output folder before it starts: apart from its sources
    and its work folder, and replaceable (absent, empty or written by CET). Returns the real path."""
    refuse_overlap(out, what, sources)
    if work_dir is not None:
        refuse_overlap(work_dir, "--work-dir", sources)
        how = overlap(out, work_dir)
        if how is not None:
            raise ValueError(f"{what} {out} {how} the work folder {work_dir}: give them apart")
    try:
        return check_replaceable(out, "dataset folder")
    except FileExistsError as exc:
        raise ValueError(str(exc)) from None


# kinds of marker that list only some files of a user's folder, CET's among the user's (predict's CSV scores)
SHARED_FOLDER_KINDS = frozenset({"scores"})


def inside_project_folder(path) -> Path | None:
    """The nearest folder above ``path`` that this project wrote whole (a dataset, a stand-in), or None.
    A folder whose marker only lists CET's files among the user's (``SHARED_FOLDER_KINDS``) is not one."""
    for parent in _real(path).parents:
        if owned_entries(parent) is not None and marker_kind(parent) not in SHARED_FOLDER_KINDS:
            return parent
    return None


def check_output_file(out, what: str, suffix: str | tuple[str, ...], sources: dict, registries=(),
                      ours: Callable[[Path], bool] | None = None) -> Path:
    """Everything a command checks of an output file before it writes it; ValueError naming ``what``:
    the format's ``suffix`` (or one of several); apart from every input in ``sources``
    (``refuse_overlap``); not inside a dataset folder or a model registry (``registries``: their root
    folders); an existing file only when ``ours`` says this project wrote it. Returns the path."""
    out = Path(out)
    suffixes = (suffix,) if isinstance(suffix, str) else tuple(suffix)
    if out.suffix.lower() not in suffixes:
        raise ValueError(f"{what} {out}: this command writes {' or '.join(s[1:] for s in suffixes)}; give a file "
                         f"name ending in {' or '.join(suffixes)}")
    refuse_overlap(out, what, sources)
    folder = inside_project_folder(out)
    if folder is not None:
        raise ValueError(f"{what} {out}: inside {folder}, a folder CET wrote whole (a dataset or a stand-in); "
                         "write elsewhere, so that the folder stays as it was built")
    for root in registries:
        if root is not None and overlap(out, root) in ("is", "is inside"):
            raise ValueError(f"{what} {out}: inside the model registry {root}; write elsewhere")
    if out.is_symlink() or (out.exists() and not out.is_file()):
        raise ValueError(f"{what} {out}: exists and is not a plain file; give another name")
    if out.exists() and (ours is None or not ours(out)):
        raise ValueError(f"{what} {out}: exists and was not written by this command; CET overwrites only its own "
                         "outputs: give another name, or move the file away")
    return out


SCRATCH_MARKER = ".cet-scratch.json"


def scratch_folder(path, owner: str) -> Path:
    """A folder that ``owner`` (a benchmark's name) fills, empties and reuses, for options such as
    ``--keep DIR``: ``path`` absent or empty (then marked as ``owner``'s), or marked so by an earlier
    run of ``owner``. Anything else raises FileExistsError before a byte is written, so that the
    folders ``owner`` removes inside it to start cold were all made by ``owner``. Returns the path.

    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> scratch_folder(root / "keep", "bench") == root / "keep"
    True
    >>> scratch_folder(root / "keep", "bench") == root / "keep"      # reused by its owner
    True
    >>> _ = (root / "mine").mkdir(); _ = (root / "mine" / "notes.txt").write_text("a user's")
    >>> scratch_folder(root / "mine", "bench")
    Traceback (most recent call last):
    ...
    FileExistsError: .../mine: exists, is not empty and was not made by bench; it removes folders inside the one ...
    """
    path = Path(path)
    marker = path / SCRATCH_MARKER
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        raise FileExistsError(f"{path}: is a link or not a folder; give {owner} an empty folder or a new path")
    if path.is_dir() and any(path.iterdir()):
        try:
            made_by = json.loads(marker.read_text()).get("scratch_of")
        except (OSError, ValueError, AttributeError):
            made_by = None
        if made_by != owner or marker.is_symlink():
            raise FileExistsError(f"{path}: exists, is not empty and was not made by {owner}; it removes folders "
                                  "inside the one it is given, so give it an empty folder or a new path")
        return path
    path.mkdir(parents=True, exist_ok=True)
    write_text(marker, json.dumps({"written_by": "cet", "scratch_of": owner}) + "\n")
    return path


def work_dir_for(out: str, work_dir: str | None) -> str:
    """``work_dir``, else the hidden work folder beside ``out`` (``.scores.parquet-work``)."""
    return work_dir or str(Path(out).parent / f".{Path(out).name}-work")
