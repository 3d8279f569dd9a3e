"""Tasks shared by the flows: the stage cache check and its stamp."""

from __future__ import annotations

from pathlib import Path

from prefect import task
from prefect.logging import get_run_logger

from flows.lib.infra import stage_cache


@task(name="check-stage-cache")
def check_cache(stage: str, out: str, inputs: dict, params: dict, code: list[str]) -> tuple[str, bool]:
    """The stage's key and whether ``out`` already holds its result."""
    key = stage_cache.stage_key(inputs, params, stage_cache.code_version(*code))
    current = stage_cache.is_current(out, key)
    get_run_logger().info("%s: %s", stage, f"inputs, parameters and code unchanged: skipping ({out})" if current
                          else "inputs changed or no result yet: running")
    return key, current


@task(name="record-stage")
def record_stage(stage: str, out: str, key: str, recipe: dict | None = None) -> str:
    """Stamp ``out`` as the complete result of ``stage`` (and, given, the ``recipe`` that rebuilds it)."""
    stage_cache.record(out, key, stage=stage, **({"recipe": recipe} if recipe is not None else {}))
    return out


def work_dir_for(out: str, work_dir: str | None) -> str:
    return work_dir or str(Path(out).parent / f".{Path(out).name}-work")
