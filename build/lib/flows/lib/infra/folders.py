"""Folders that appear whole: build under a temporary sibling name, then swap into place."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cet_model.atomic import remove_dead_leftovers


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
