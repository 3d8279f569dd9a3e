"""Prefect flow ``build-table-dataset``: a table of your own (CSV, TSV, Stata or parquet) as a dataset folder.

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
With no Prefect server configured (``PREFECT_API_URL`` unset) the command builds in its own
process, without loading Prefect (a temporary server would keep no record of the run); with a
server, as a flow run.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early
    from flows.lib.infra.cli import run_here, without_server

    _ap, _args = parse_early("table")
    if without_server():  # no Prefect server configured: built in this process, Prefect not loaded at all
        from flows.lib import tables

        run_here(_ap, _args, lambda: tables.build_here(tables.command_params(_ap, _args)))

import sys

from prefect import flow, task
from prefect.logging import get_run_logger

from flows.common import check_cache, record_stage
from flows.lib import commands, tables
from flows.lib.flow_params import TableBuildParams
from flows.lib.infra.cli import apply_log_level, run_build, without_server
from flows.lib.infra.run_names import file_task_name, run_name
from flows.lib.infra.runners import thread_runner
from flows.lib.infra.served import confine
from flows.lib.infra.settings import Settings


@task(name="write-table-dataset", task_run_name=file_task_name("write-table", "table"))
def write_table_dataset(table: str, out: str, params: dict) -> str:
    return tables.write_logged(table, out, params, get_run_logger())


@flow(name="build-table-dataset", flow_run_name=run_name("table"), task_runner=thread_runner())
def build_table_dataset(params: TableBuildParams) -> str:
    """A table of your own (``params.table``) -> a dataset folder with no true occurrence."""
    s = Settings()
    confine(params, s)
    return tables.build(params, s, check_cache, write_table_dataset, record_stage)


def main(argv=None) -> int:
    ap = commands.table()
    args = ap.parse_args(argv)
    apply_log_level(args)
    params = tables.command_params(ap, args)  # a bad value: a usage error naming file, column and row, not a failed run
    return run_build(ap, build_table_dataset, params, params.out or str(Settings().dataset_dir(params.name)),
                     here=lambda: tables.build_here(params))


if __name__ == "__main__":
    sys.exit(main())
