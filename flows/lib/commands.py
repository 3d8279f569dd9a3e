"""Every command line's options, light to import: each ``python -m flows.<name>`` parses its
options here before Prefect, PyTorch or polars load, so ``--help``, ``--version`` and a usage
error answer at once (``parse_early``), and its ``main`` parses them again to run.

    >>> ap = table()
    >>> ap.parse_args(["--table", "t.csv", "--name", "c", "--event", "death=days,died", "--time-unit", "days"]).name
    'c'
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

from cet_model.choices import (
    IMPORTANCE_REPEATS,
    IMPORTANCE_SCORES,
    IMPUTE,
    REFERENCE_CHOICES,
    TABLE_SPLIT_METHODS,
)
from flows.lib.choices import (
    BUILDS,
    DEMO_URL,
    EMBEDDING_MODEL,
    EVIDENCE,
    EXPLAIN_SPLITS,
    METRIC_DIRECTION,
    MIMIC_STANDIN_SCALE,
    REDDIT_STANDIN_USERS,
    SYNTHETIC_MODES,
)
from flows.lib.infra.cli import command_parser

FLOWS = Path(__file__).resolve().parents[1]


def _doc(name: str) -> str:
    """The docstring of ``flows/<name>.py``, read without importing it."""
    return ast.get_docstring(ast.parse((FLOWS / f"{name}.py").read_text())) or ""


def parse_early(name: str) -> None:
    """Parse ``sys.argv`` with command ``name``'s options: ``--help``, ``--version`` and a usage
    error exit here, before the flow module's imports; valid options return, to be parsed again
    by its ``main``."""
    globals()[name]().parse_args(sys.argv[1:])


def synthetic() -> argparse.ArgumentParser:
    """``python -m flows.synthetic``'s options."""
    ap = command_parser("python -m flows.synthetic", _doc("synthetic").split("\n\n")[0])
    ap.add_argument("--out", help="dataset folder (default: $CET_DATA_DIR/synthetic)")
    ap.add_argument("--mode", choices=SYNTHETIC_MODES, help="reference (the original code's) or independent")
    ap.add_argument("--n", type=int, help="rows (default: $CET_SYNTHETIC_N or 40000, the paper's)")
    ap.add_argument("--seed", type=int, default=0, help="generator and censoring seed (default %(default)s)")
    return ap


def mimic() -> argparse.ArgumentParser:
    """``python -m flows.mimic``'s options."""
    ap = command_parser("python -m flows.mimic", _doc("mimic").split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the MIMIC dataset folder")
    src = b.add_mutually_exclusive_group()
    src.add_argument("--mimic-dir", help="folder with ADMISSIONS, CHARTEVENTS, ... as .csv or .csv.gz "
                                         "(default: a generated stand-in, see --standin-scale)")
    src.add_argument("--download-demo", nargs="?", const=DEMO_URL, metavar="URL",
                     help=f"fetch and verify the open demo (default {DEMO_URL})")
    b.add_argument("--out", help="dataset folder (default: $CET_DATA_DIR/mimic)")
    b.add_argument("--work-dir", help="staged tables and scratch (default: a hidden folder beside --out)")
    b.add_argument("--window-hours", type=int, default=24, help="feature window after the origin (default %(default)s)")
    b.add_argument("--seed", type=int, default=0, help="split and censoring seed")
    b.add_argument("--split-method", choices=["random", "hash"], default="random",
                   help="random: a seeded permutation with exact 60/20/20 shares (default); hash: each patient keeps "
                        "its split when the cohort grows and is rebuilt (shares in expectation)")
    b.add_argument("--memory-limit", default="2500MB", help="DuckDB memory limit (default %(default)s)")
    b.add_argument("--window-events", choices=("keep", "mask"), default="keep",
                   help="events inside the feature window: keep them (the reference) or mask that task")
    b.add_argument("--standin-scale", type=float,
                   help="size of the default stand-in source, as a fraction of the full release "
                        f"(default: $CET_MIMIC_STANDIN_SCALE or {MIMIC_STANDIN_SCALE})")
    g = sub.add_parser("generate", help="write a MIMIC-III stand-in in the full release's layout, with planted truth")
    g.add_argument("--scale", type=float, required=True,
                   help="fraction of the full release (61,532 ICU stays, 330M chart rows): 0.001 to 1")
    g.add_argument("--out", required=True, help="folder for the stand-in tables (must be empty or absent)")
    g.add_argument("--seed", type=int, default=0, help="generator seed (default %(default)s)")
    g.add_argument("--compresslevel", type=int, default=6, choices=range(1, 10), metavar="1-9",
                   help="gzip level (default %(default)s, as gzip's default)")
    g.add_argument("--force", action="store_true", help="replace an existing, non-empty --out")
    return ap


def reddit() -> argparse.ArgumentParser:
    """``python -m flows.reddit``'s options."""
    ap = command_parser("python -m flows.reddit", _doc("reddit").split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the Reddit dataset folder")
    b.add_argument("--dumps", nargs="+", metavar="DIR_OR_URL",
                   help="folders holding RC_/RS_YYYY-MM dumps, searched recursively (the archive's "
                        "reddit/comments + reddit/submissions layout, month folders or flat), or one base URL "
                        "(default: $CET_REDDIT_DUMPS, else a generated stand-in)")
    b.add_argument("--out", help="dataset folder (default: $CET_DATA_DIR/reddit)")
    b.add_argument("--work-dir", help="scans, embeddings and scratch (default: a hidden folder beside --out)")
    b.add_argument("--start", help="first month to read, YYYY-MM (default: all)")
    b.add_argument("--comment-end", default="2017-11", help="last comment month (default %(default)s, the paper's)")
    b.add_argument("--submission-end", default="2020-01", help="last submission month (default %(default)s)")
    b.add_argument("--standin-users", type=int, help=f"default: $CET_REDDIT_STANDIN_USERS or {REDDIT_STANDIN_USERS}")
    b.add_argument("--standin-text", choices=["phrases", "realistic"],
                   help="stand-in comment text (default: $CET_REDDIT_STANDIN_TEXT or phrases)")
    b.add_argument("--model", help=f"sentence-transformers model name or folder (default: $CET_EMBEDDING_MODEL "
                                   f"or {EMBEDDING_MODEL})")
    b.add_argument("--device", help="auto, cpu or cuda (default: $CET_DEVICE or auto)")
    b.add_argument("--seed", type=int, default=0, help="split and censoring seed")
    b.add_argument("--split-method", choices=["random", "hash"], default="random",
                   help="random: a seeded permutation with exact 60/20/20 shares (default); hash: each user keeps "
                        "its split when the set of users grows and is rebuilt (shares in expectation)")
    b.add_argument("--max-error-rate", type=float, default=0.01, help="malformed-line share that fails a file")
    g = sub.add_parser("generate", help="write stand-in Pushshift dumps with planted truth")
    g.add_argument("--users", type=int, required=True, help="simulated users (1k to 1M)")
    g.add_argument("--out", required=True, help="folder for the stand-in dumps (must be empty or absent)")
    g.add_argument("--seed", type=int, default=0, help="generator seed (default %(default)s)")
    g.add_argument("--start", default="2015-01", help="first month written, YYYY-MM (default %(default)s)")
    g.add_argument("--comment-end", default="2017-11", help="last comment month (default %(default)s)")
    g.add_argument("--submission-end", default="2020-01", help="last submission month (default %(default)s)")
    g.add_argument("--text", choices=["phrases", "realistic"], default="phrases",
                   help="comment text: short topical phrases (default) or real length with a long tail and "
                        "almost no repeats")
    g.add_argument("--malformed-rate", type=float, default=0.0, help="share of broken lines to inject (tests)")
    g.add_argument("--force", action="store_true", help="replace an existing, non-empty --out")
    return ap


def table() -> argparse.ArgumentParser:
    """``python -m flows.table``'s options."""
    ap = command_parser("python -m flows.table", _doc("table").split("\n\n")[0])
    ap.add_argument("--table", required=True, help=".csv or .parquet file, one row per subject")
    ap.add_argument("--name", required=True, help="the dataset's name (models/<name>/; default folder "
                                                  "$CET_DATA_DIR/<name>)")
    ap.add_argument("--event", action="append", required=True, metavar="NAME=TIME,INDICATOR",
                    help="an event: its time column and its 0/1 indicator column (repeat for several)")
    ap.add_argument("--time-unit", required=True, help="unit of the time columns, e.g. days")
    ap.add_argument("--features", help="comma-separated feature columns (default: every column not named by "
                                       "--event, --id-column, --split-column or --group-column)")
    ap.add_argument("--id-column", help="unique subject ids (default: the row number)")
    ap.add_argument("--split-column", help="train/val/test per row (default: a seeded 60/20/20 split)")
    ap.add_argument("--group-column", help="draw the seeded split by groups, e.g. a patient id when a patient has "
                                           "several rows: no group in two splits")
    ap.add_argument("--seed", type=int, default=0, help="seed of the split (default %(default)s)")
    ap.add_argument("--split-method", choices=list(TABLE_SPLIT_METHODS), default="random",
                    help="random: a seeded permutation with exact 60/20/20 shares (default); hash: each id (or "
                         "--group-column group) keeps its split when the table grows and is rebuilt (shares in "
                         "expectation); stratified: the rows (groups) with each combination of observed events "
                         "spread 60/20/20 over the splits, for a rare outcome")
    ap.add_argument("--categorical", help="comma-separated feature columns (text or codes) to encode as one 0/1 "
                                          "column per level seen in training (predict encodes new rows the same "
                                          "way); default: none, and a text column is an error")
    ap.add_argument("--missing-times", choices=["refuse", "mask"], default="refuse",
                    help="a missing follow-up time (its indicator missing or 0): refused (default), or that event "
                         "left out for that row (counted)")
    ap.add_argument("--impute", choices=[m for m in IMPUTE if m is not None],
                    help="fill missing feature values with the training rows' median (recorded; predict fills new "
                         "rows the same way); median+indicator also adds a 0/1 column <column>_missing after each "
                         "column with a training gap; default: a missing value is an error naming its row")
    ap.add_argument("--out", help="dataset folder (default: $CET_DATA_DIR/<name>)")
    return ap


def train() -> argparse.ArgumentParser:
    """``python -m flows.train``'s options."""
    ap = command_parser("python -m flows.train", _doc("train").split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="train CET, ET and BC on a dataset folder and register them")
    ev.add_argument("--dataset", help="the dataset's name; models go to models/<name>/ "
                                      "(default: $CET_RETRAIN_DATASET)")
    ev.add_argument("--data", help="the dataset folder (default: $CET_DATA_DIR/<dataset>)")
    ev.add_argument("--max-epochs", type=int, help="epoch cap (default: $CET_MAX_EPOCHS, else automatic)")
    ev.add_argument("--hidden", type=int, help="hidden width (default: $CET_HIDDEN or 100)")
    ev.add_argument("--seed", type=int, help="training seed (default: $CET_SEED or 0)")
    ev.add_argument("--models", help="comma-separated presets to train (default: CET,CET-paper,ET,BC,Oracle on data "
                                     "with the true occurrence; CET,ET,BC on data censored by follow-up alone)")
    ev.add_argument("--subgroups", help="comma-separated categorical columns or features (e.g. sex,age): CET's test "
                                        "metrics per subgroup, printed and kept in the version's subgroups.json")
    ev.add_argument("--horizon", type=float, help="the time, in the dataset's unit (e.g. 52 for a year in weeks), "
                                                  "at which calibration against Kaplan-Meier and the AUC at h are "
                                                  "judged for every event (default: each "
                                                  "event's median training follow-up)")
    ev.add_argument("--reference", choices=REFERENCE_CHOICES, default="auto",
                    help="a classical Cox fit per event on the same split, shown beside the models: auto (on data "
                         "without the true occurrence, where no Oracle is trained; default), cox (any data without "
                         "comment embeddings), none")
    ev.add_argument("--runs", type=int, default=0, help="also write the paper-format report over this many seeds")
    ev.add_argument("--search", type=int, default=0, help="random-search trials for CET before those runs")
    rt = sub.add_parser("retrain", help="rebuild a dataset if its inputs changed, train, apply the promotion rule")
    rt.add_argument("--dataset", help="synthetic, mimic, reddit, or the name of a table built by python -m "
                                      "flows.table (default: $CET_RETRAIN_DATASET)")
    rt.add_argument("--seed", type=int, help="training seed (default: $CET_SEED or 0)")
    for p in (ev, rt):
        p.add_argument("--promote-metric", choices=sorted(METRIC_DIRECTION),
                       help="validation metric of CET that decides promotion (default: $CET_PROMOTE_METRIC or val_auc)")
        p.add_argument("--promote-tolerance", type=float,
                       help="how much worse a new version may be and still be promoted "
                            "(default: $CET_PROMOTE_TOLERANCE or 0)")
        p.add_argument("--promote-evidence", choices=EVIDENCE,
                       help="point: compare the two values; not-worse: promote unless the paired 95%% interval of "
                            "the difference shows the new version worse; better: only when it shows it better (AUC "
                            "and C; default: $CET_PROMOTE_EVIDENCE or point)")
    ls = sub.add_parser("versions", help="list a dataset's model versions: promoted, data, CET's validation "
                                         "AUC and C (RMST), the rule's decision (no flow run)")
    pr = sub.add_parser("promote", help="promote a version by hand (a rollback), with a reason kept in "
                                        "history.jsonl (no flow run)")
    sh = sub.add_parser("show", help="a version's test metrics, as evaluate printed them after training (no flow run)")
    ex = sub.add_parser("explain", help="which inputs a version's model relies on: permutation importance per "
                                        "event on the validation rows of its own data (no flow run)")
    for p in (ls, pr, ex, sh):
        p.add_argument("--dataset", help="the dataset's name (default: $CET_RETRAIN_DATASET)")
    pr.add_argument("--model-version", required=True, help="the version to promote, e.g. v0002")
    pr.add_argument("--reason", required=True, help="why, in words: kept in models/<name>/history.jsonl")
    for p in (ex, sh):
        p.add_argument("--model-version", help="the version (default: the promoted one)")
    ex.add_argument("--model", default="CET", help="which of the version's models (default: CET)")
    ex.add_argument("--split", choices=EXPLAIN_SPLITS, default="val",
                    help="the rows shuffled and scored (default: val; the test split is for the reported figures)")
    ex.add_argument("--repeats", type=int, default=IMPORTANCE_REPEATS,
                    help=f"shuffles per input (default: {IMPORTANCE_REPEATS})")
    ex.add_argument("--seed", type=int, default=0, help="seed of the shuffles (default: 0)")
    ex.add_argument("--score", choices=IMPORTANCE_SCORES,
                    help="score only this, and rank by it: auc (whether, against the true occurrence), ci_rmst "
                         "(later or never), ci_timing (when, among the rows with the event observed); default: all "
                         "that are defined, ranked by the first (AUC where the data have the truth, else C (RMST))")
    ex.add_argument("--max-rows", type=int, default=5000,
                    help="a larger split is cut to this many rows drawn at random (default: "
                         "5000; the time grows with the rows)")
    ex.add_argument("--top", type=int, default=20, help="inputs printed (default: 20; --out has all)")
    ex.add_argument("--out", help="a CSV with every input, event and score")
    ex.add_argument("--data", help="the dataset folder, if it moved since the version was trained (default: where "
                                   "it was; it must hold the same files)")
    return ap


def predict() -> argparse.ArgumentParser:
    """``python -m flows.predict``'s options."""
    ap = command_parser("python -m flows.predict", _doc("predict").split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--features", help="parquet or .csv with id and the model's feature columns, prepared as in "
                                        "the training dataset (raw units are scaled by the model as in training)")
    src.add_argument("--mimic-dir", help="raw MIMIC-III tables of new admissions (ADMISSIONS, CHARTEVENTS, "
                                         "LABEVENTS, OUTPUTEVENTS as .csv or .csv.gz)")
    src.add_argument("--dumps", action="append", help="folder of Pushshift RC_/RS_ dumps of new users, searched "
                                                      "recursively (repeat for several)")
    ap.add_argument("--out", required=True, help="output parquet")
    ap.add_argument("--work-dir", help="staged tables, scans and embeddings (default: a hidden folder beside --out)")
    ap.add_argument("--dataset", help="registry name of the model: synthetic, mimic, reddit, ... "
                                      "(default: $CET_RETRAIN_DATASET)")
    ap.add_argument("--model-version", help="a registered model version, e.g. v0003 (default: the promoted one)")
    ap.add_argument("--quantiles", default="0.1,0.5,0.9", help="time quantiles (default %(default)s)")
    ap.add_argument("--horizons", default="", help="comma-separated times, in the dataset's unit (e.g. 7,30): adds "
                                                    "risk_<h>_<event> = P(the event happens by h) (default: none)")
    ap.add_argument("--rmst", action="store_true", help="also rmst_<h>_<event>: the restricted mean event-free "
                                                         "time up to each --horizons h (the score C (RMST) judges; "
                                                         "larger: later or never)")
    ap.add_argument("--sequences", help="comment embeddings .npy, with --features for models trained on Reddit")
    return ap


def serve() -> argparse.ArgumentParser:
    """``python -m flows.serve``'s options."""
    ap = command_parser(
        "python -m flows.serve",
        _doc("serve").split("\n\n")[0],
        epilog=_doc("serve").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--limit", type=int, default=2, help="flow runs at once (default %(default)s; 2 cores)")
    ap.add_argument("--retry-seconds", type=float, default=5.0,
                    help="while the Prefect API is unreachable, check it this often (default %(default)s)")
    ap.add_argument("--single-user", action="store_true",
                    help="serve even when the Prefect API asks for no credentials: only on a machine where no other "
                         "user or untrusted process can reach it")
    ap.add_argument("--max-outages", type=int, default=0,
                    help="API outages to wait out; the next one ends serve with its error "
                         "(default 0: wait out every one)")
    return ap


def full_pipeline() -> argparse.ArgumentParser:
    """``python -m flows.full_pipeline``'s options."""
    ap = command_parser(
        "python -m flows.full_pipeline",
        _doc("full_pipeline").split("\n\n")[0],
        epilog=_doc("full_pipeline").split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--datasets", default=",".join(BUILDS), help="comma-separated subset of %(default)s")
    ap.add_argument("--max-epochs", type=int, help="training epochs cap (default: $CET_MAX_EPOCHS, else automatic)")
    ap.add_argument("--hidden", type=int, help="hidden width (default: $CET_HIDDEN or 100)")
    ap.add_argument("--seed", type=int, help="training seed (default: $CET_SEED or 0)")
    return ap
