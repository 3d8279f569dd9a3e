"""Flow run names that say what a run does: ``<what>-<subject>-<UTC YYYYMMDD-HHMMSS>``, e.g.
``mimic-standin-…`` for build-mimic-features or ``train-cohort-…`` for train-evaluate, instead of
Prefect's random two words. Each flow names its run from its ``params`` when the run starts.

    >>> describe({"mimic_dir": "/data/mimic-iii-clinical-database-1.4"}, "mimic")
    'mimic-mimic-iii-clinical-database-1.4'
    >>> describe({"dataset": None}, "train")
    'train-default'
    >>> describe({"datasets": ["synthetic", "mimic"]}, "pipeline")
    'pipeline-synthetic+mimic'
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import PurePath

SOURCES = (
    "mimic_dir",
    "download_demo_url",
    "dumps",
    "table",
    "data",
    "features",
)  # the first one given names the source


def _get(params, field: str):
    return params.get(field) if isinstance(params, dict) else getattr(params, field, None)


def describe(params, what: str) -> str:
    """``what`` and the run's subject: its dataset, its table's name, or the folder of its source."""
    subject = _get(params, "dataset") or _get(params, "name")
    if subject is None and _get(params, "datasets"):
        subject = "+".join(_get(params, "datasets"))
    if subject is None:
        for field in SOURCES:
            value = _get(params, field)
            if value:
                value = value[0] if isinstance(value, list | tuple) else value
                subject = PurePath(str(value).rstrip("/")).name or str(value)
                break
    if subject is None and what in ("mimic", "reddit"):
        subject = "standin"
    label = f"{what}-{subject or 'default'}"
    return re.sub(r"[^A-Za-z0-9_.+-]+", "-", label)[:80]


def file_task_name(what: str, field: str = "path"):
    """A ``task_run_name`` callable: ``<what>-<file name without its suffixes>``, e.g. ``scan-RC_2017-01``
    for the task's ``path``: a scan is named by its month's dump."""
    def name() -> str:
        from prefect.runtime import task_run

        value = (task_run.parameters or {}).get(field)
        stem = PurePath(str(value)).name.split(".")[0] if value else "file"
        return f"{what}-{stem}"
    return name


def run_name(what: str):
    """A ``flow_run_name`` callable: ``describe`` of the run's ``params``, then the UTC time."""
    def name() -> str:
        from prefect.runtime import flow_run

        params = (flow_run.parameters or {}).get("params")
        return f"{describe(params or {}, what)}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    return name
