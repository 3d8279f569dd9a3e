"""A table of your own (``flows.table``): what its build says in the log, and how retrain finds
the recipe that rebuilds it. The build itself is ``cet_model.dataset.write_follow_up_dataset``."""

from __future__ import annotations

import json
from pathlib import Path

from cet_model.dataset import missing_indicator, write_follow_up_dataset
from flows.lib import flow_params
from flows.lib.flow_params import TableBuildParams

STAGE = "build-table-dataset"


def write(table: str, out: str | None, options: dict) -> Path | None:
    """``write_follow_up_dataset`` with a build's options (``TableBuildParams`` less table and out);
    ``out=None`` checks the table and writes nothing (the command line does so before its flow)."""
    events = {e: tuple(cols) for e, cols in options["events"].items()}
    return write_follow_up_dataset(out, table, options["features"], events, name=options["name"],
                                   time_unit=options["time_unit"], id_column=options["id_column"],
                                   split_column=options["split_column"], group_column=options["group_column"],
                                   seed=options["seed"], split_method=options["split_method"],
                                   impute=options["impute"], categorical=options["categorical"],
                                   missing_times=options["missing_times"])


def build_summary(dataset_dir) -> list[str]:
    """Log lines for a built dataset folder: names and counts only, never a row's values.

    >>> import polars as pl, tempfile
    >>> from cet_model.dataset import write_follow_up_dataset
    >>> t = pl.DataFrame({"age": [60.0, None, 55, 80, 66], "days": [5.0, 9, 2, 7, 3], "died": [1, 0, 1, 0, 0]})
    >>> out = write_follow_up_dataset(tempfile.mkdtemp() + "/mine", t, None, {"death": ("days", "died")},
    ...                               name="mine", time_unit="days", impute="median")
    >>> for line in build_summary(out): print(line)
    mine: filled missing values with training medians: age 1 (train 0, val 0, test 1)
    mine: 1 features (age), events death, rows train 3, val 1, test 1
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
    return lines


def recipe(params: TableBuildParams, out) -> dict:
    """What retrain needs to rebuild ``out`` when the table changes: the parameters, with absolute
    paths (retrain may run from any folder)."""
    return flow_params.recipe(params, ("table",), out)


def recorded_build(folder) -> TableBuildParams | None:
    """The parameters that built ``folder`` with build-table-dataset, or None (not such a folder)."""
    return flow_params.recorded_params(folder, STAGE, TableBuildParams)
