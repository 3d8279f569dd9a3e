"""A table of your own (``flows.table``): the build's steps, what it says in the log, and how
retrain finds the recipe that rebuilds it. The dataset itself is written by
``flows.lib.ingest.write_follow_up_dataset``."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from pathlib import Path

import polars as pl

from cet_model.dataset import SPLITS, event_columns
from flows.lib import flow_params
from flows.lib.flow_params import TableBuildParams
from flows.lib.infra import stage_cache
from flows.lib.infra.errors import InputError
from flows.lib.infra.folders import check_output_folder
from flows.lib.infra.locks import output_lock
from flows.lib.infra.settings import Settings
from flows.lib.ingest import missing_indicator, write_follow_up_dataset
from flows.lib.modeling.version_text import FEW_OBSERVED

STAGE = "build-table-dataset"
CODE = ["cet_model.dataset", "flows.lib.ingest", "flows.lib.tables"]  # the code whose change rebuilds a table


def write(table: str, out: str | None, options: dict) -> Path | None:
    """``write_follow_up_dataset`` with a build's options (``TableBuildParams`` less table and out);
    ``out=None`` checks the table and writes nothing (the command line does so before its flow).
    A table that cannot be built is an ``InputError`` (a rebuild by retrain finds it only here)."""
    events = {e: tuple(cols) for e, cols in options["events"].items()}
    try:
        return write_follow_up_dataset(out, table, options["features"], events, name=options["name"],
                                       time_unit=options["time_unit"], id_column=options["id_column"],
                                       split_column=options["split_column"], group_column=options["group_column"],
                                       seed=options["seed"], split_method=options["split_method"],
                                       impute=options["impute"], categorical=options["categorical"],
                                       missing_times=options["missing_times"])
    except InputError:
        raise
    except ValueError as exc:  # the reader names the file, column and row, never a cell's value
        raise InputError(str(exc)) from exc


def build(params: TableBuildParams, s: Settings, check: Callable, write_step: Callable, record: Callable) -> str:
    """Build ``params.table`` into its dataset folder (``params.out``, or the dataset's default) under
    the folder's lock, unless the folder holds a build of the same table, options and code; returns
    the folder. The steps are the flow's tasks or, for a command run without Prefect, the plain
    functions they call: ``check`` (``stage_cache.check_stage``'s arguments less the logger),
    ``write_step`` (``write_logged``'s) and ``record`` (``stage_cache.record_stage``'s)."""
    out = params.out or str(s.dataset_dir(params.name))
    options = params.model_dump(exclude={"table", "out"})
    check_output_folder(out, {"--table": params.table})
    with output_lock(out, s.lock_wait, STAGE):
        key, current = check(STAGE, out, {"table": params.table}, options, CODE)
        if current:
            return out
        path = write_step(params.table, out, options)
        return record(STAGE, path, key, recipe(params, out))


def write_logged(table: str, out: str, options: dict, logger) -> str:
    """``write``, then the build's summary (and a warning where an event is seen in few rows) on ``logger``."""
    path = write(table, out, options)
    for line in build_summary(path):
        logger.info("%s", line)
    few = few_observed_warning(path)
    if few:
        logger.warning("%s", few)
    return str(path)


def command_params(ap: argparse.ArgumentParser, args: argparse.Namespace) -> TableBuildParams:
    """``flows.table``'s parameters from its parsed options, with the table checked and nothing
    written: an option, a folder or a value that cannot be built is a usage error naming the file,
    column and row, before any build starts."""
    from flows.lib import commands
    from flows.lib.infra.cli import require_path

    require_path(ap, "--table", args.table, "file")
    try:
        params = commands.params(args, TableBuildParams, events=commands.events(args.events))
    except ValueError as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))
    try:
        check_output_folder(params.out or str(Settings().dataset_dir(params.name)), {"--table": params.table})
        write(params.table, None, params.model_dump(exclude={"table", "out"}))
    except ValueError as exc:
        ap.error(str(exc))
    return params


def build_here(params: TableBuildParams) -> str:
    """The build as the flow runs it, in this process and without Prefect (no server is
    configured to record a flow run); log lines go to the ``flows.table`` logger."""
    logger = logging.getLogger("flows.table")

    def check(stage, out, inputs, options, code):
        return stage_cache.check_stage(stage, out, inputs, options, code, logger)

    def write_step(table, out, options):
        return write_logged(table, out, options, logger)

    return build(params, Settings(), check, write_step, stage_cache.record_stage)


def build_summary(dataset_dir) -> list[str]:
    """Log lines for a built dataset folder: names and counts only, never a row's values.

    >>> import polars as pl, tempfile
    >>> from flows.lib.ingest import write_follow_up_dataset
    >>> t = pl.DataFrame({"age": [60.0, None, 55, 80, 66], "days": [5.0, 9, 2, 7, 3], "died": [1, 0, 1, 0, 0]})
    >>> out = write_follow_up_dataset(tempfile.mkdtemp() + "/mine", t, None, {"death": ("days", "died")},
    ...                               name="mine", time_unit="days", impute="median")
    >>> for line in build_summary(out): print(line)
    mine: filled missing values with training medians: age 1 (train 0, val 0, test 1)
    mine: 1 features (age), events death, rows train 3, val 1, test 1
    mine: rows with the event observed: death train 1, val 1, test 0
    """
    manifest = json.loads((Path(dataset_dir) / "manifest.json").read_text())
    name, record, lines = manifest["name"], manifest.get("featurization") or {}, []
    for c, counts in (record.get("categorical_counts") or {}).items():
        lines.append(f"{name}: {c} encoded as {len(record['categorical'][c])} levels; missing "
                     f"{sum(counts['missing'].values())}, levels not seen in training {sum(counts['unseen'].values())}")
    filled = record.get("imputed") or {}
    if filled:
        lines.append(f"{name}: filled missing values with training medians: " + "; ".join(
            f"{c} {sum(n.values())} ({', '.join(f'{k} {n[k]}' for k in ('train', 'val', 'test'))})"
            for c, n in filled.items()))
    if record.get("indicators"):
        lines.append(f"{name}: missingness indicator columns: "
                     + ", ".join(missing_indicator(c) for c in record["indicators"]))
    for e, n in ((manifest.get("censoring") or {}).get("masked") or {}).items():
        lines.append(f"{name}: {e} left out where its time is missing: "
                     + ", ".join(f"{k} {n[k]}" for k in ("train", "val", "test")))
    sizes = ", ".join(f"{k} {manifest['split_sizes'][k]}" for k in ("train", "val", "test"))
    lines.append(f"{name}: {len(manifest['feature_names'])} features ({', '.join(manifest['feature_names'])}), "
                 f"events {', '.join(manifest['event_names'])}, rows {sizes}")
    lines.append(f"{name}: rows with the event observed: " + "; ".join(
        f"{e} " + ", ".join(f"{k} {n[k]}" for k in SPLITS) for e, n in observed_by_split(dataset_dir).items()))
    return lines


def observed_by_split(dataset_dir) -> dict[str, dict[str, int]]:
    """Per event, the rows of each split where it was observed (``s_e`` = 1): counts only."""
    events = pl.read_parquet(Path(dataset_dir) / "events.parquet")
    names = json.loads((Path(dataset_dir) / "manifest.json").read_text())["event_names"]
    return {e: {k: int(events.filter(pl.col("split") == k)[event_columns(e)[1]].sum()) for k in SPLITS} for e in names}


def few_observed_warning(dataset_dir) -> str | None:
    """A warning when an event is observed in fewer than ``FEW_OBSERVED`` validation or test rows
    (early stopping, the promotion rule and every test figure rest on that many cases; with none,
    no concordance can be computed), with the remedy for how the split was drawn; None otherwise.

    >>> import polars as pl, tempfile
    >>> from flows.lib.ingest import write_follow_up_dataset
    >>> t = pl.DataFrame({"age": [60.0, 71, 55, 80, 66], "days": [5.0, 9, 2, 7, 3], "died": [1, 0, 1, 0, 0]})
    >>> out = write_follow_up_dataset(tempfile.mkdtemp() + "/mine", t, None, {"death": ("days", "died")},
    ...                               name="mine", time_unit="days")
    >>> print(few_observed_warning(out))
    mine: death is observed in 1 validation and 0 test rows, fewer than 10: early stopping, promotion and the test
    figures rest on that many cases, and a split without one has no concordance (Harrell's C, C (RMST)). More rows with
    the event are the remedy; --split-method stratified (split_method='stratified') at least spreads the observed rows
    60/20/20 over the splits
    """
    manifest = json.loads((Path(dataset_dir) / "manifest.json").read_text())
    few = {e: n for e, n in observed_by_split(dataset_dir).items() if min(n["val"], n["test"]) < FEW_OBSERVED}
    if not few:
        return None
    method = manifest.get("split_method")  # absent: the split was given by a column
    remedy = {"stratified": "More rows with the event are the remedy (the split is already stratified)",
              None: "More rows with the event are the remedy; the split was given by a column"}.get(
        method, "More rows with the event are the remedy; --split-method stratified (split_method='stratified') at "
                "least spreads the observed rows 60/20/20 over the splits")
    return (f"{manifest['name']}: " + "; ".join(f"{e} is observed in {n['val']} validation and {n['test']} test rows"
                                                for e, n in few.items())
            + f", fewer than {FEW_OBSERVED}: early stopping, promotion and the test figures rest on that many cases, "
            "and a split without one has no concordance (Harrell's C, C (RMST)). " + remedy)


def recipe(params: TableBuildParams, out) -> dict:
    """What retrain needs to rebuild ``out`` when the table changes: the parameters, with absolute
    paths (retrain may run from any folder)."""
    return flow_params.recipe(params, ("table",), out)


def recorded_build(folder) -> TableBuildParams | None:
    """The parameters that built ``folder`` with build-table-dataset, or None (not such a folder)."""
    return flow_params.recorded_params(folder, STAGE, TableBuildParams)
