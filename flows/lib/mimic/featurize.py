"""New raw MIMIC-III admissions -> model inputs, exactly as the training build made them.

Scoring must not refit anything on the new data: the feature items, the window, the medians
that fill gaps and the means and sds that standardise come from the training build's
``featurization`` record (its manifest, copied into every model version trained on it). The
same SQL files compute the window statistics; the same ``widen``/``apply_preprocessing``
turn them into columns. So an admission of the training build featurised from its raw tables
gets the values of its row of ``features.parquet``.

Only the tables the features read are needed: ADMISSIONS, CHARTEVENTS, LABEVENTS and
OUTPUTEVENTS (a missing column is an error naming the file and column). An admission without
chart or lab rows has no origin and cannot be scored: it is counted, never silently dropped.
No row values reach the logs.
"""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl

from flows.lib.infra.sql_runner import SQL_ROOT, run_sql_file, set_variables
from flows.lib.mimic.build import MimicParams, apply_preprocessing, query, widen
from flows.lib.mimic.staging import connect, stage_table

log = logging.getLogger("flows.mimic.featurize")

SCORING_TABLES = ("ADMISSIONS", "CHARTEVENTS", "LABEVENTS", "OUTPUTEVENTS")
SCORING_SQL = (
    "staging/stg_mimic__admissions.sql", "staging/stg_mimic__chartevents.sql",
    "staging/stg_mimic__labevents.sql", "staging/stg_mimic__outputevents.sql",
    "intermediate/int_admissions_origin.sql", "intermediate/int_window_stats.sql",
    None,  # the training build's items stand in for int_items_selected here
    "marts/mimic_features_long.sql",
)


def check_record(record: dict | None, where) -> dict:
    """The featurisation record of a MIMIC build, or an error saying what to do."""
    if not record or record.get("source") != "mimic":
        raise ValueError(f"{where}: no MIMIC featurisation record (a model trained on a MIMIC build made before "
                         "raw scoring existed, or on another source); rebuild the dataset and retrain")
    for k in ("window_hours", "items", "preprocessing"):
        if k not in record:
            raise ValueError(f"{where}: featurisation record lacks {k!r}")
    return record


def featurize(mimic_dir, record: dict, feature_names: list[str], work_dir,
              memory_limit: str = MimicParams.memory_limit, keep_staged: bool = True) -> tuple[pl.DataFrame, dict]:
    """Featurise every admission in ``mimic_dir`` with the training build's ``record``.

    Returns (frame with ``id`` = HADM_ID and ``feature_names`` as float columns, one row per
    scorable admission in HADM_ID order; counts: admissions read, scored, and left out for
    having no chart or lab rows). The tables are staged as parquet in ``work_dir/staged``;
    ``keep_staged=False`` removes those copies of the patients' rows when done, failed or not
    (``drop_staged``), else a rerun on unchanged tables reuses them.
    """
    record = check_record(record, mimic_dir)
    work_dir = Path(work_dir)
    try:
        return _featurize(mimic_dir, record, feature_names, work_dir, memory_limit)
    finally:
        if not keep_staged:
            drop_staged(work_dir)


def drop_staged(work_dir) -> None:
    """Remove what scoring staged in ``work_dir`` (each scoring table's parquet and record, DuckDB's
    scratch folder), then each folder left empty, ``work_dir`` last; any other file stays.

    >>> import tempfile
    >>> work = Path(tempfile.mkdtemp()) / ".scores.csv-work"
    >>> (work / "staged").mkdir(parents=True)
    >>> for name in ("LABEVENTS.parquet", "LABEVENTS.json"):
    ...     _ = (work / "staged" / name).write_text("rows")
    >>> drop_staged(work); work.exists()
    False
    """
    work_dir = Path(work_dir)
    for table in SCORING_TABLES:
        for name in (f"{table}.parquet", f"{table}.json"):
            (work_dir / "staged" / name).unlink(missing_ok=True)
    for folder in (work_dir / "staged", work_dir / "duckdb-tmp", work_dir):
        try:
            folder.rmdir()  # only when empty
        except OSError:
            pass


def _featurize(mimic_dir, record: dict, feature_names: list[str], work_dir: Path,
               memory_limit: str) -> tuple[pl.DataFrame, dict]:
    staged = {t: stage_table(Path(mimic_dir), t, work_dir / "staged") for t in SCORING_TABLES}
    con = connect(memory_limit, work_dir / "duckdb-tmp")
    try:
        set_variables(con, {f"{t.lower()}_parquet": str(s.parquet) for t, s in staged.items()})
        for step in SCORING_SQL:
            if step is None:
                con.register("selected_items", pl.DataFrame(record["items"]).select(
                    pl.col("source").cast(pl.String), pl.col("itemid").cast(pl.Int32),
                    pl.col("is_numeric").cast(pl.Boolean), pl.col("item_rank").cast(pl.Int64)))
                con.execute("CREATE OR REPLACE TABLE int_items_selected AS SELECT * FROM selected_items")
                continue
            run_sql_file(con, SQL_ROOT / "mimic" / step, {"window_hours": int(record["window_hours"])})
        cohort = query(con, "SELECT hadm_id FROM int_admissions_origin ORDER BY hadm_id")
        long = query(con, "SELECT * FROM mimic_features_long")
        n_admissions = con.execute("SELECT count(*) FROM stg_mimic__admissions").fetchone()[0]
    finally:
        con.close()
    wide = apply_preprocessing(widen(long, cohort, feature_names), feature_names, record["preprocessing"])
    counts = {"admissions": int(n_admissions), "scored": cohort.height,
              "left_out_no_chart_or_lab_rows": int(n_admissions) - cohort.height}
    log.info("featurised %d of %d admissions (%d without chart or lab rows cannot be scored)",
             counts["scored"], counts["admissions"], counts["left_out_no_chart_or_lab_rows"])
    return wide.select(pl.col("hadm_id").alias("id"), *feature_names), counts
