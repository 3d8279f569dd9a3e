"""Skip a stage whose inputs are unchanged.

A stage's key is a hash of its input fingerprints, its parameters and the version of the
code it runs. The output folder carries the key in ``.stage.json``, written after the
output is complete; a stage is current when its output exists and holds the same key.
Deleting the output, touching an input, changing a parameter or editing the stage's code
all make it run again.

Fingerprints: files up to ``CONTENT_LIMIT`` are hashed by content; larger ones (raw MIMIC
tables, dumps) by name, size and modification time, as ``make`` would.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import json
import os
from pathlib import Path

from cet_model.atomic import write_text

CONTENT_LIMIT = 64 * 2**20
STAMP = ".stage.json"


def _hash_file(path: Path, h) -> None:
    st = path.stat()
    if st.st_size <= CONTENT_LIMIT:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(2**20), b""):
                h.update(block)
    else:
        h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())


def fingerprint(path) -> str:
    """sha256 over a file, or over every file under a folder (relative names included).
    Hidden entries (work folders, stamps, temporary names) are left out."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: cannot fingerprint, it does not exist")
    h = hashlib.sha256()
    if path.is_file():
        _hash_file(path, h)
        return h.hexdigest()
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(f for f in files if not f.startswith(".")):
            p = Path(root) / name
            h.update(str(p.relative_to(path)).encode() + b"\0")
            _hash_file(p, h)
    return h.hexdigest()


def source_files(part: str) -> list[tuple[str, Path]]:
    """(name, file) of the source behind ``part``: a module (``cet_model.models``), a package
    (``cet_model``: every .py under it) or a folder of the SQL package (``sql/mimic``). Found
    through the import system, so it works from a clone and from an installed wheel alike;
    names are the repository-relative paths (``flows/lib/mimic/build.py``) in both."""
    if part == "sql" or part.startswith("sql/"):
        root = Path(str(importlib.resources.files("cet_sql")))
        base = root.joinpath(*part.split("/")[1:])
        found = sorted(p for p in base.rglob("*.sql") if p.is_file())
        return [("sql/" + p.relative_to(root).as_posix(), p) for p in found]
    try:
        spec = importlib.util.find_spec(part)
    except ModuleNotFoundError:
        spec = None
    if spec is None:
        return []
    rel = part.replace(".", "/")
    if spec.submodule_search_locations:
        out = []
        for loc in spec.submodule_search_locations:
            out += [(f"{rel}/{p.relative_to(loc).as_posix()}", p) for p in sorted(Path(loc).rglob("*.py"))
                    if "__pycache__" not in p.parts]
        return out
    return [(rel + ".py", Path(spec.origin))] if spec.origin else []


def code_version(*parts: str) -> str:
    """Hash of the source files behind a stage (see ``source_files``)."""
    h = hashlib.sha256()
    for part in sorted(parts):
        files = source_files(part)
        if not files:
            raise FileNotFoundError(f"code_version: nothing found for {part!r}")
        for name, f in files:
            h.update(name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def stage_key(inputs: dict, params: dict, code: str) -> str:
    """One key from input fingerprints ({name: path or None}), JSON parameters and code version."""
    fps = {k: (fingerprint(v) if v is not None else None) for k, v in sorted(inputs.items())}
    blob = json.dumps({"inputs": fps, "params": params, "code": code}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def is_current(out, key: str) -> bool:
    stamp = Path(out) / STAMP
    if not stamp.is_file():
        return False
    try:
        return json.loads(stamp.read_text()).get("key") == key
    except (json.JSONDecodeError, OSError):
        return False


def record(out, key: str, **info) -> None:
    """Write the stamp atomically once ``out`` is complete."""
    write_text(Path(out) / STAMP, json.dumps({"key": key, **info}, indent=2, default=str))


def check_stage(stage: str, out: str, inputs: dict, params: dict, code: list[str], logger) -> tuple[str, bool]:
    """The stage's key and whether ``out`` already holds its result, said on ``logger`` (the flows'
    ``check-stage-cache`` task, and a command that runs its build without Prefect)."""
    key = stage_key(inputs, params, code_version(*code))
    current = is_current(out, key)
    logger.info("%s: %s", stage, f"inputs, parameters and code unchanged: skipping ({out})" if current
                else "inputs changed or no result yet: running")
    return key, current


def record_stage(stage: str, out: str, key: str, recipe: dict | None = None, source: dict | None = None) -> str:
    """Stamp ``out`` as the complete result of ``stage`` (and, given, the ``recipe`` that rebuilds it
    and the ``source`` it was built from: ``{"kind": ...}``, what ``refuse_standin_over_real`` reads);
    returns ``out``."""
    record(out, key, stage=stage, **({"recipe": recipe} if recipe is not None else {}),
           **({"source": source} if source is not None else {}))
    return out


def generated_standin(folder) -> bool:
    """Whether ``folder`` (raw MIMIC tables, Pushshift dumps) was written by a stand-in generator
    (``python -m flows.mimic generate``, ``flows.reddit generate``): its ``standin.json`` names one.
    A dataset built from it is a stand-in too, though the build was given a folder.

    >>> import json, tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> generated_standin(folder)
    False
    >>> _ = (folder / "standin.json").write_text(json.dumps({"generator": "flows.lib.standin.mimic"}))
    >>> generated_standin(folder)
    True
    """
    try:
        generator = json.loads((Path(folder) / "standin.json").read_text()).get("generator")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(generator, str) and generator.startswith("flows.lib.standin.")


def built_from(folder) -> str:
    """What a dataset folder was built from, as its build stamp records it: "synthetic (the
    paper's)", "generated stand-in", "MIMIC-III demo", "your data" or "not recorded"."""
    try:
        stamp = json.loads((Path(folder) / STAMP).read_text())
        source = stamp.get("source") or {}
    except (OSError, ValueError, AttributeError):
        return "not recorded"
    if stamp.get("stage") == "build-synthetic":
        return "synthetic (the paper's)"
    kind = source.get("kind") if isinstance(source, dict) else None
    return {"standin": "generated stand-in", "demo": "MIMIC-III demo"}.get(kind, "your data")


def recorded(out, stage: str) -> dict | None:
    """The stamp's record when ``out`` holds a complete result of ``stage``, else None."""
    stamp = Path(out) / STAMP
    try:
        info = json.loads(stamp.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return info if isinstance(info, dict) and info.get("stage") == stage else None


def refuse_standin_over_real(stage: str, out: str, work: str, what: str, how: str) -> None:
    """Refuse a build that would replace a dataset built from real data with a generated stand-in:
    the build had no source (``how`` says how to give one), and a silent swap would retrain the
    registry's models on generated rows. Real: the stamp's source kind is not ``standin``; for a
    stamp from before sources were recorded, the dataset's source fingerprints are not those of
    a stand-in generated in its work folder ``work``."""
    info = recorded(out, stage)
    if info is None:
        return
    kind = (info.get("source") or {}).get("kind")
    if kind == "standin" or (kind is None and _generated_here(out, work)):
        return
    built = (f"built from {what} ({info['source'].get('from', kind)})" if kind is not None else
             f"built before builds recorded their source, from files that are not a stand-in generated in {work}")
    raise ValueError(f"{out} holds a dataset {built}; this build has no source ({how}) and would replace it with "
                     "a generated stand-in: give the source, or build the stand-in into another folder")


def _generated_here(out: str, work: str) -> bool:
    """Whether every source fingerprint in ``out``'s manifest is listed by a stand-in generated in
    ``work`` (each stand-in folder lists its files' SHA-256)."""
    try:
        fingerprints = json.loads((Path(out) / "manifest.json").read_text()).get("source_fingerprints") or {}
    except (OSError, json.JSONDecodeError):
        return False
    listed = "\n".join(p.read_text() for p in Path(work).glob("standin-*/*") if p.name.lower() == "sha256sums.txt")
    return bool(fingerprints) and all(str(v) in listed for v in fingerprints.values())
