"""Tasks shared by the flows: the stage cache check and its stamp."""

from __future__ import annotations

import json
from pathlib import Path

from prefect import task
from prefect.logging import get_run_logger

from flows.lib.infra import stage_cache


@task(name="check-stage-cache", task_run_name="check-{stage}")
def check_cache(stage: str, out: str, inputs: dict, params: dict, code: list[str]) -> tuple[str, bool]:
    """The stage's key and whether ``out`` already holds its result (``stage_cache.check_stage``)."""
    return stage_cache.check_stage(stage, out, inputs, params, code, get_run_logger())


@task(name="record-stage", task_run_name="record-{stage}")
def record_stage(stage: str, out: str, key: str, recipe: dict | None = None, source: dict | None = None) -> str:
    """Stamp ``out`` as the complete result of ``stage`` (``stage_cache.record_stage``)."""
    return stage_cache.record_stage(stage, out, key, recipe, source)


def refuse_standin_over_real(stage: str, out: str, work: str, what: str, how: str) -> None:
    """Refuse a build that would replace a dataset built from real data with a generated stand-in:
    the build had no source (``how`` says how to give one), and a silent swap would retrain the
    registry's models on generated rows. Real: the stamp's source kind is not ``standin``; for a
    stamp from before sources were recorded, the dataset's source fingerprints are not those of
    a stand-in generated in its work folder ``work``."""
    info = stage_cache.recorded(out, stage)
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
