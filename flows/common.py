"""Tasks shared by the flows: the stage cache check and its stamp; a mapped task as one step."""

from __future__ import annotations

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


def mapped(task_):
    """A function that maps ``task_`` over its list arguments (the others shared, as ``Task.map``
    takes them) and returns each item's result in order, once every item has ended; an item that
    failed raises its own error: a build's mapped step (``flows.lib.mimic.builds.Steps``)."""
    def run(*args):
        futures = task_.map(*args)
        futures.wait()  # Ctrl-C included: the running items end at their next interrupt check first
        return [f.result() for f in futures]
    run.__name__ = f"mapped_{task_.name}"
    return run
