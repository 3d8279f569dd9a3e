"""Prefect flow ``build-table-dataset``: a table of your own data (CSV or parquet) as a dataset folder.

    python -m flows.table --table cohort.csv --name mycohort --event death=days,died --time-unit days \\
        [--event readmission=days_to_readm,readmitted] [--features age,sofa,...] [--id-column ID] \\
        [--split-column SPLIT | --group-column PATIENT] [--seed 0] [--categorical sex,site] \\
        [--impute median|median+indicator] [--missing-times mask] [--out DIR]

A row per subject (or per admission, with ``--group-column`` naming the patient, whose rows
then stay in one split); per event a follow-up time (> 0) and an indicator (1 = the event was seen at
that time, 0 = follow-up ended without it). Features default to every other column and must be
numbers, in their own units (the models scale them), or named ``--categorical`` (one 0/1 column per
level seen in training); a missing value is refused, or with ``--impute median`` filled with the
training rows' median (counted, and recorded for predict, which prepares new rows the same way;
``median+indicator`` also adds a 0/1 ``<column>_missing`` column). Such data carry no true occurrence, so the
dataset has ``c_e`` null: AUC against the truth is left empty, the Oracle is left out and
promotion goes by Harrell's C of the restricted mean event-free time (docs/datasets.md, "Your own data"). Then ``python
-m flows.train
evaluate --dataset mycohort``. Skipped when the output holds a build of the same table and options;
``python -m flows.train retrain --dataset mycohort`` (and the scheduled ``retrain`` deployment with
CET_RETRAIN_DATASET=mycohort) rebuilds it from the same file when the file has changed, then trains.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early

    parse_early("table")

import sys

from prefect import flow, task
from prefect.logging import get_run_logger

from flows.common import check_cache, record_stage
from flows.lib import commands, tables
from flows.lib.flow_params import TableBuildParams
from flows.lib.infra.cli import apply_log_level, require_path, run_build
from flows.lib.infra.folders import check_output_folder
from flows.lib.infra.locks import output_lock
from flows.lib.infra.run_names import file_task_name, run_name
from flows.lib.infra.runners import thread_runner
from flows.lib.infra.served import confine
from flows.lib.infra.settings import Settings

CODE = ["cet_model.dataset", "flows.lib.ingest", "flows.lib.tables"]


@task(name="write-table-dataset", task_run_name=file_task_name("write-table", "table"))
def write_table_dataset(table: str, out: str, params: dict) -> str:
    path = tables.write(table, out, params)
    for line in tables.build_summary(path):
        get_run_logger().info("%s", line)
    few = tables.few_observed_warning(path)
    if few:
        get_run_logger().warning("%s", few)
    return str(path)


@flow(name="build-table-dataset", flow_run_name=run_name("table"), task_runner=thread_runner())
def build_table_dataset(params: TableBuildParams) -> str:
    """A table of your own (``params.table``) -> a dataset folder with no true occurrence."""
    s = Settings()
    confine(params, s)
    out = params.out or str(s.dataset_dir(params.name))
    options = params.model_dump(exclude={"table", "out"})
    check_output_folder(out, {"--table": params.table})
    with output_lock(out, s.lock_wait, tables.STAGE):
        key, current = check_cache(tables.STAGE, out, {"table": params.table}, options, CODE)
        if current:
            return out
        path = write_table_dataset(params.table, out, options)
        return record_stage(tables.STAGE, path, key, tables.recipe(params, out))


def main(argv=None) -> int:
    ap = commands.table()
    args = ap.parse_args(argv)
    apply_log_level(args)
    require_path(ap, "--table", args.table, "file")
    try:
        params = commands.params(args, TableBuildParams, events=commands.events(args.events))
    except ValueError as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))
    try:  # a bad value is a usage error naming file, column and row now, not a failed flow's tracebacks
        check_output_folder(params.out or str(Settings().dataset_dir(params.name)), {"--table": params.table})
        tables.write(params.table, None, params.model_dump(exclude={"table", "out"}))
    except ValueError as exc:
        ap.error(str(exc))
    return run_build(build_table_dataset, params, params.out or str(Settings().dataset_dir(params.name)))


if __name__ == "__main__":
    sys.exit(main())
