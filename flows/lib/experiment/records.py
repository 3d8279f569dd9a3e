"""What reports record to be compared and merged: the identity of a dataset folder's contents and
a fitted model's full settings."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

# the files of the dataset contract a report's figures depend on, in the order they are hashed
DATA_FILES = ("manifest.json", "features.parquet", "events.parquet", "sequences.npy")


def data_fingerprint(path) -> str:
    """sha256 over the dataset folder's contract files that exist (each one's name, size and bytes,
    in ``DATA_FILES`` order): the identity ``merge`` compares, so that parts run on the same data in
    two folders (a synthetic part writes its data under its own ``--out``) merge, and parts run on
    different data under one path do not.

    >>> import tempfile, pathlib
    >>> a, b = (pathlib.Path(tempfile.mkdtemp()) for _ in range(2))
    >>> for d in (a, b):
    ...     _ = (d / "manifest.json").write_text('{"name": "x"}')
    >>> data_fingerprint(a) == data_fingerprint(b)
    True
    >>> _ = (b / "events.parquet").write_bytes(b"other")
    >>> data_fingerprint(a) == data_fingerprint(b)
    False
    """
    h = hashlib.sha256()
    for name in DATA_FILES:
        file = Path(path) / name
        if not file.is_file():
            continue
        h.update(f"{name}\0{file.stat().st_size}\0".encode())
        with open(file, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()


_RUN_SPECIFIC = ("seed", "device", "verbose", "comment_encoder")


def resolved_params(model) -> dict:
    """A fitted model's full settings, defaults included, less the per-run ones (seed, device):
    what makes two reports' rows of one model comparable even after a default changes."""
    out = {}
    settings = {**model.get_params(), **dataclasses.asdict(getattr(model, "recipe_", None) or _no_recipe())}
    for k, v in sorted(settings.items()):
        if k in _RUN_SPECIFIC:
            continue
        out[k] = list(v) if isinstance(v, tuple) else v
    return out


def _no_recipe():
    from cet_model.recipe import Recipe

    return Recipe()
