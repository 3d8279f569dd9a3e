"""MIMIC-III v1.4 -> the paper's first-24-hour features and 10 lab events, in the dataset contract.

Plain functions (no Prefect); ``flows/mimic.py`` wires them as tasks. Steps: stage the CSV
tables to typed parquet; run ``sql/mimic`` (staging views -> intermediate tables -> marts);
pivot, impute and standardise with training statistics; censor with the shared function;
write the folder atomically. Only aggregate counts and item metadata reach the manifest and
the logs: no MIMIC row values.

Decisions (docs/datasets.md): the unit is the hospital admission with chart and lab rows; the
origin of both the window and the event times is min(ADMITTIME, first chart row, first lab
row); the window is [origin, origin + 24 h] (nothing before the origin is used); event times
are hours from the origin plus 0.01 h (as the reference did, so an event at the origin has
t > 0); events inside the feature window are kept, as the reference did.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from cet_model.censoring import censor_by_median
from cet_model.dataset import (
    GROUP_COLUMN,
    SPLIT_METHODS,
    assign_splits,
    event_columns,
    write_dataset,
)
from flows.lib.infra.crash import crash_point
from flows.lib.infra.errors import InputError
from flows.lib.infra.sql_runner import SQL_ROOT, run_sql_file, set_variables
from flows.lib.mimic.schema import TABLES
from flows.lib.mimic.staging import StagedTable, connect, stage_all

log = logging.getLogger("flows.mimic.build")

EVENTS: dict[str, list[int]] = {
    "WBC_CSF": [51363], "Troponin_T": [51003], "Intubated": [50812], "WBC_Pleural": [51458],
    "TSH": [50993], "D_Dimer": [50915, 51196], "Urobilinogen": [51514], "ANA": [50873],
    "Ammonia": [50866], "Lipase": [50956],
}
SPECIMEN_TYPE = 50800
SQL_STEPS = (
    "staging/stg_mimic__admissions.sql", "staging/stg_mimic__chartevents.sql",
    "staging/stg_mimic__labevents.sql", "staging/stg_mimic__outputevents.sql",
    "staging/stg_mimic__d_items.sql", "staging/stg_mimic__d_labitems.sql",
    "intermediate/int_admissions_origin.sql",
    None,  # the seeded patient split is drawn here, between the two SQL layers
    "intermediate/int_admissions_split.sql", "intermediate/int_window_stats.sql",
    "intermediate/int_items_selected.sql", "marts/mimic_features_long.sql", "marts/mimic_events.sql",
)
STAT_ORDER = {"count": 0, "mean": 1, "min": 2, "max": 3, "sum": 1}
SOURCE_ORDER = {"chart": 0, "lab": 1, "output": 2}


@dataclass(frozen=True)
class MimicParams:
    window_hours: int = 24
    n_chart: int = 80
    n_lab: int = 30
    n_output: int = 10
    split_seed: int = 0
    censor_seed: int = 0
    censor_factor: float = 2.0
    split_fractions: tuple[float, float, float] = (0.6, 0.2, 0.2)
    memory_limit: str = "2500MB"  # DuckDB's limit for the SQL; the process peaks ~0.5 GB above it
    window_events: str = "keep"  # or "mask": leave out a task whose event falls in the feature window
    split_method: str = "random"  # or "hash": a patient keeps its split when the cohort grows

    def __post_init__(self):
        if self.window_events not in ("keep", "mask"):
            raise ValueError(f"window_events must be 'keep' or 'mask', got {self.window_events!r}")
        if self.split_method not in SPLIT_METHODS:
            raise ValueError(f"split_method must be one of {SPLIT_METHODS}, got {self.split_method!r}")


def split_subjects(subject_ids: np.ndarray, seed: int, fractions=(0.6, 0.2, 0.2),
                   method: str = "random") -> pl.DataFrame:
    """Seeded 60/20/20 split of patients (``cet_model.dataset.assign_splits``: ``"random"`` does
    not depend on their order; ``"hash"`` keeps each patient's split when patients are added)."""
    ids = np.sort(np.unique(subject_ids))
    split = assign_splits(ids, seed, fractions, method)
    return pl.DataFrame({"subject_id": ids.astype(np.int64), "split": split})


def run_sql(staged: dict[str, StagedTable], work_dir: Path, params: MimicParams):
    """Run ``sql/mimic`` on the staged tables; returns the DuckDB connection holding the marts."""
    missing = [t for t in TABLES if t not in staged]
    if missing:
        raise ValueError(f"staged tables missing: {missing}; the build reads {list(TABLES)}")
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    con = connect(params.memory_limit, work_dir / "duckdb-tmp")
    try:
        _run_steps(con, staged, params)
    except BaseException as exc:  # closed now, and no frame of the error's traceback keeps it (a failed
        con.close()  # task's record keeps the error until the command exits)
        del con
        traceback.clear_frames(exc.__traceback__)
        raise
    return con


def _run_steps(con, staged: dict[str, StagedTable], params: MimicParams) -> None:
    set_variables(con, {f"{t.lower()}_parquet": str(s.parquet) for t, s in staged.items()})
    con.register("event_items", pl.DataFrame(
        [(e, i) for e, ids in EVENTS.items() for i in ids], schema=["event", "itemid"], orient="row"))
    bound = {"window_hours": params.window_hours, "n_chart": params.n_chart, "n_lab": params.n_lab,
             "n_output": params.n_output, "event_itemids": [i for ids in EVENTS.values() for i in ids],
             "excluded_lab_itemids": [SPECIMEN_TYPE]}
    for step in SQL_STEPS:
        if step is None:
            subjects = con.execute("SELECT DISTINCT subject_id FROM int_admissions_origin").fetchnumpy()["subject_id"]
            if subjects.size == 0:
                raise InputError(f"{staged['ADMISSIONS'].parquet.parent}: empty cohort (no admission has both "
                                 "chart and lab rows)")
            con.register("subject_splits", split_subjects(subjects, params.split_seed, params.split_fractions,
                                                                       params.split_method))
            continue
        run_sql_file(con, SQL_ROOT / "mimic" / step, bound)
        log.info("sql: %s", step)
        crash_point("sql")


def query(con, sql: str) -> pl.DataFrame:
    """A query result as a Polars frame (through Arrow)."""
    return pl.from_arrow(con.sql(sql).to_arrow_table())


def _feature_order(name: str, items: dict) -> tuple:
    source, itemid, stat = name.split("_")
    return SOURCE_ORDER[source], items[(source, int(itemid))]["item_rank"], STAT_ORDER[stat]


def feature_columns(items: pl.DataFrame) -> list[str]:
    """Every feature the selected items define (numeric: count/mean/min/max; other: count;
    output: count/sum), in a stable order: source, item rank, statistic."""
    names = []
    for row in items.iter_rows(named=True):
        stem = f"{row['source']}_{row['itemid']}"
        if row["source"] == "output":
            names += [f"{stem}_count", f"{stem}_sum"]
        elif row["is_numeric"]:
            names += [f"{stem}_{s}" for s in ("count", "mean", "min", "max")]
        else:
            names.append(f"{stem}_count")
    lookup = {(r["source"], r["itemid"]): r for r in items.iter_rows(named=True)}
    return sorted(names, key=lambda n: _feature_order(n, lookup))


def widen(long: pl.DataFrame, cohort: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """Long features -> one row per cohort admission and one column per name, before imputation:
    counts and sums absent from the window are 0 (no row means none), other gaps stay null."""
    wide = long.pivot(on="feature", index="hadm_id", values="value", aggregate_function="first") if long.height \
        else pl.DataFrame(schema={"hadm_id": pl.Int32})
    wide = cohort.join(wide.with_columns(pl.col("hadm_id").cast(cohort.schema["hadm_id"])), on="hadm_id", how="left")
    for n in names:
        if n not in wide.columns:
            wide = wide.with_columns(pl.lit(None, dtype=pl.Float64).alias(n))
    zero_fill = [n for n in names if n.endswith(("_count", "_sum"))]
    return wide.with_columns([pl.col(n).fill_null(0.0) for n in zero_fill])


def fit_preprocessing(wide_train: pl.DataFrame, names: list[str]) -> dict:
    """Training statistics of every feature: the median that fills a gap (0 when the feature
    is missing on every training admission), then the mean and sd (of the filled column) that
    standardise it. JSON-ready; stored in the manifest so new raw data is featurised the same way
    (``apply_preprocessing``)."""
    fill, mean, sd, all_missing = {}, {}, {}, []
    for n in names:
        med = wide_train[n].median()
        if med is None:
            all_missing.append(n)
            med = 0.0
        filled = wide_train[n].cast(pl.Float64).fill_null(med)
        m, s = filled.mean(), filled.std()
        fill[n], mean[n], sd[n] = float(med), float(m if m is not None else 0.0), float(s if s and s > 0 else 1.0)
    return {"fill": fill, "mean": mean, "sd": sd, "imputed_all_missing_in_train": all_missing}


def apply_preprocessing(wide: pl.DataFrame, names: list[str], prep: dict) -> pl.DataFrame:
    """Fill gaps with the training medians and standardise with the training mean and sd."""
    missing = [n for n in names if n not in prep["fill"]]
    if missing:
        raise ValueError(f"no training statistics for features {missing[:5]}: the preprocessing record does not "
                         "belong to these features")
    return wide.with_columns([((pl.col(n).cast(pl.Float64).fill_null(prep["fill"][n]) - prep["mean"][n])
                               / prep["sd"][n]).alias(n) for n in names])


def features_frame(long: pl.DataFrame, cohort: pl.DataFrame, names: list[str]) -> tuple[pl.DataFrame, dict]:
    """Wide features: counts and sums absent from the window are 0; other gaps take the
    training median; every column is standardised with training mean and sd. Returns the frame
    and the preprocessing record (``fit_preprocessing``)."""
    wide = widen(long, cohort, names)
    prep = fit_preprocessing(wide.filter(pl.col("split") == "train"), names)
    return apply_preprocessing(wide, names, prep).select(["hadm_id", "split", *names]), prep


def build(mimic_dir, out_dir, work_dir, params: MimicParams = MimicParams()) -> Path:
    """Stage the tables in ``mimic_dir`` (under ``work_dir/staged``), then ``build_staged``."""
    return build_staged(stage_all(mimic_dir, Path(work_dir) / "staged"), out_dir, work_dir, params)


def build_staged(staged: dict[str, StagedTable], out_dir, work_dir, params: MimicParams = MimicParams()) -> Path:
    """Build the MIMIC dataset folder ``out_dir`` from staged tables (``staging.stage_table``)."""
    out_dir, work_dir = Path(out_dir), Path(work_dir)
    con = run_sql(staged, work_dir, params)
    cohort = query(con, "SELECT hadm_id, split FROM int_admissions_split ORDER BY hadm_id")
    patients = query(con, f"SELECT hadm_id, CAST(subject_id AS VARCHAR) AS {GROUP_COLUMN} FROM int_admissions_split")
    items = query(con, "SELECT * FROM int_items_selected ORDER BY source, item_rank")
    names = feature_columns(items)
    features, prep = features_frame(query(con, "SELECT * FROM mimic_features_long"), cohort, names)
    # the patient each admission belongs to, the unit of the split (promotion leaves a patient's new admissions out)
    features = features.join(patients, on="hadm_id", how="left", maintain_order="left").select(
        "hadm_id", "split", GROUP_COLUMN, *names)
    ev = query(con, "SELECT * FROM mimic_events")
    event_names = list(EVENTS)
    ev_wide = cohort.select("hadm_id")
    for e in event_names:
        part = ev.filter(pl.col("event") == e).select(
            "hadm_id", pl.col("occurred").cast(pl.Int8).alias(f"c_{e}"),
            (pl.col("hours_to_event") + 0.01).alias(f"t_true_{e}"))
        ev_wide = ev_wide.join(part, on="hadm_id", how="left")
    c = ev_wide.select([f"c_{e}" for e in event_names]).to_numpy().astype(np.int8)
    t_true = ev_wide.select([f"t_true_{e}" for e in event_names]).to_numpy().astype(np.float64)
    train = (cohort["split"] == "train").to_numpy()
    t, s, cens = censor_by_median(t_true, c, train, factor=params.censor_factor, seed=params.censor_seed,
                                  event_names=event_names, fallback=True)
    events = cohort.rename({"hadm_id": "id"})
    for j, e in enumerate(event_names):
        tc, sc, cc, ttc = event_columns(e)
        events = events.with_columns(pl.Series(tc, t[:, j]), pl.Series(sc, s[:, j]), pl.Series(cc, c[:, j]),
                                     pl.Series(ttc, t_true[:, j]))
    in_window = (c == 1) & (t_true <= params.window_hours + 0.01)
    if params.window_events == "mask":
        for j, e in enumerate(event_names):
            events = events.with_columns(pl.Series(f"mask_{e}", (~in_window[:, j]).astype(np.int8)))
    manifest = {
        "name": "mimic",
        "feature_names": names,
        "event_names": event_names,
        "time_unit": "hours",
        "censoring": cens,
        "seeds": {"split": params.split_seed, "censoring": params.censor_seed},
        "split_method": params.split_method,
        "split_sizes": {k: int((cohort["split"] == k).sum()) for k in ("train", "val", "test")},
        "split_by": "subject_id",
        "source_fingerprints": {t_: s_.fingerprint for t_, s_ in staged.items()},
        "params": {k: v for k, v in params.__dict__.items()},
        "event_itemids": EVENTS,
        "items": items.to_dicts(),
        "cohort": _cohort_counts(con),
        "events": _event_counts(ev, train, cohort),
        "imputation": {"imputed_all_missing_in_train": prep["imputed_all_missing_in_train"]},
        "featurization": {
            "source": "mimic",
            "window_hours": params.window_hours,
            "items": items.select("source", "itemid", "is_numeric", "item_rank").to_dicts(),
            "preprocessing": {k: prep[k] for k in ("fill", "mean", "sd")},
        },
        "events_in_feature_window": {e: int(in_window[:, j].sum()) for j, e in enumerate(event_names)},
        "decisions": {
            "unit": "hospital admission (HADM_ID) with chart and lab rows",
            "origin": "min(ADMITTIME, first chart row, first lab row)",
            "window": "[origin, origin + window_hours]",
            "window_events": params.window_events,
            "event_time": "hours from origin + 0.01",
            "follow_up_end": "discharge",
        },
    }
    con.close()
    return write_dataset(out_dir, features.rename({"hadm_id": "id"}), events, manifest)


def _cohort_counts(con) -> dict:
    q = """SELECT (SELECT count(*) FROM stg_mimic__admissions),
                  (SELECT count(DISTINCT hadm_id) FROM stg_mimic__chartevents),
                  (SELECT count(DISTINCT hadm_id) FROM stg_mimic__labevents),
                  (SELECT count(*) FROM int_admissions_origin),
                  (SELECT count(DISTINCT subject_id) FROM int_admissions_origin)"""
    keys = ("admissions", "with_chart_rows", "with_lab_rows", "cohort_admissions", "cohort_patients")
    return dict(zip(keys, (int(v) for v in con.execute(q).fetchone()), strict=True))


def _event_counts(ev: pl.DataFrame, train: np.ndarray, cohort: pl.DataFrame) -> dict:
    out = {}
    for e in EVENTS:
        part = ev.filter(pl.col("event") == e)
        out[e] = {"admissions_with_event": int(part["occurred"].sum()),
                  "collections_after_discharge": int(part["n_after_discharge"].sum())}
    return out
