"""The harness's command lines, built from names alone (no PyTorch, pandas or scikit-learn), so that
``--help`` and a usage error answer at once; :mod:`cet_experiments.experiments` and
:mod:`cet_experiments.real` run what they parse."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from cet_model.choices import PAPER_PRESETS, PRESET_NAMES, REFERENCE_CHOICES

from .rows import OWN_DATA_ROWS, PAPER_ROWS, VARIANTS

EXPERIMENTS = "Repeated-seed experiments and tables in the paper's layout."
REAL = "The real-data benchmark: published multi-event cohorts under two protocols."


def quiet_library() -> None:
    """The harness prints its own progress (a line per run or seed, the time left); the model
    library's line per fit (``cet_model`` at INFO) shows only when ``CET_LOG_LEVEL`` asks for it
    (INFO, DEBUG). Warnings show either way."""
    from flows.lib.infra.cli import configured_log_level

    logging.basicConfig(level=logging.WARNING)
    level = (configured_log_level() or "WARNING").upper()
    logging.getLogger("cet_model").setLevel(level if level in logging.getLevelNamesMapping() else logging.WARNING)


def experiments_parser() -> argparse.ArgumentParser:
    """``python -m cet_experiments``: synthetic, dataset, real, summary, merge and goal."""
    parser = argparse.ArgumentParser(prog="python -m cet_experiments", description=EXPERIMENTS,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    syn = sub.add_parser("synthetic", help="the paper's synthetic data (Table 3)")
    syn.add_argument("--mode", choices=("reference", "independent"), default="reference",
                     help="reference: the original generator (its artefact included); independent: the paper's text "
                          "(default %(default)s)")
    syn.add_argument("--data", type=Path, help="an existing synthetic dataset folder (default: generate one)")
    syn.add_argument("--n", type=int, default=40_000, help="rows to generate, split "
                                                           "60/20/20 (default: the paper's 40,000)")
    ds_cmd = sub.add_parser("dataset", help="any dataset folder in the contract")
    ds_cmd.add_argument("--data", type=Path, required=True, help="a dataset folder in the contract")
    for p in (syn, ds_cmd):
        p.add_argument("--runs", type=int, default=10, help="seeds per model (default 10)")
        p.add_argument("--out", type=Path, required=True, help="folder for metrics.json and table.md")
        p.add_argument("--models", default=",".join(PAPER_PRESETS),
                       help=f"comma-separated, from {','.join(PRESET_NAMES)} (default: %(default)s)")
        p.add_argument("--hidden", type=int, default=100, help="hidden width (paper: 100 synthetic, 750 others)")
        p.add_argument("--max-epochs", type=int, default=None,
                       help="epoch cap (default: automatic, >= 100 epochs and >= 5,000 steps)")
        p.add_argument("--patience", type=int, default=None, help="early-stopping patience (default: automatic)")
        p.add_argument("--first-seed", type=int, default=0, help="seed of the first run; run r uses first + r "
                                                                  "(default %(default)s)")
        p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's; with --jobs "
                       "above 1, one a process)")
        p.add_argument("--jobs", type=int, default=1, help="processes the runs are split between, each a block of "
                       "consecutive seeds; the figures are those of one process (default %(default)s)")
        p.add_argument("--search", type=int, default=0, metavar="BUDGET",
                       help="random-search trials for CET-paper before the runs (0: the paper's settings)")
        p.add_argument("--search-epochs", type=int, default=None, help="epoch cap per trial (default: --max-epochs)")
        p.add_argument("--reference", choices=REFERENCE_CHOICES, default="auto",
                       help="the row Cox (reference), a Cox fit per event on the same split: auto (on data "
                            "without the true occurrence), cox (also with it) or none (default %(default)s)")
        p.add_argument("--model-runs", default="", metavar="MODEL=N,...",
                       help="fewer runs for costly rows, e.g. CET-exact=3,CET-marginal=3 (default: --runs each)")
    sub.add_parser("real", add_help=False, help="the real-data benchmark: published multi-event cohorts, two protocols "
                   "(python -m cet_experiments real --help)")
    summ = sub.add_parser("summary", help="rewrite the generated results block of docs/results.md")
    summ.add_argument("--results", type=Path, default=Path("docs/results"), help="report folders "
                                                                                 "(default: %(default)s)")
    summ.add_argument("--doc", type=Path, default=Path("docs/results.md"),
                      help="the markdown file holding the block (default: %(default)s)")
    mrg = sub.add_parser("merge", help="merge reports run on disjoint seeds into one (see cet_experiments.merge)")
    mrg.add_argument("parts", type=Path, nargs="+", help="report folders, each with a metrics.json")
    mrg.add_argument("--out", type=Path, required=True, help="folder for the merged metrics.json and table.md")
    mrg.add_argument("--title", default=None, help="table title (default: the first part's)")
    mrg.add_argument("--drop-first", default="", help="comma-separated models to leave out of the first part "
                     "(rows the later parts rerun, e.g. after a default changed)")
    gl = sub.add_parser("goal", help="the model issue's occurrence goal from a report (see cet_experiments.goal)")
    gl.add_argument("report", type=Path, help="a report folder with a metrics.json")
    gl.add_argument("--model", default="CET", help="the row judged (default %(default)s)")
    gl.add_argument("--baselines", default="ET,BC", help="comma-separated; the better "
                                                         "one per run (default %(default)s)")
    gl.add_argument("--oracle", default="Oracle", help="the row with the true occurrence (default %(default)s)")
    return parser


def real_parser() -> argparse.ArgumentParser:
    """``python -m cet_experiments real``: the cohorts, rows and protocols of one benchmark run."""
    from .cohorts import ALL, COHORTS

    parser = argparse.ArgumentParser(prog="python -m cet_experiments real", description=REAL)
    parser.add_argument("--out", type=Path, required=True, help="folder for <cohort>/metrics.json and table.md")
    parser.add_argument("--cohorts", default="multi", help="comma-separated names or groups: multi (the "
                        f"benchmark's: {', '.join(COHORTS)}), single (single-event data sets: "
                        f"{', '.join(n for n in ALL if n not in COHORTS)}); default %(default)s")
    parser.add_argument("--data", type=Path, action="append", default=[],
                        help="a dataset folder of your own (flows.table) in place of the cohorts; repeatable")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per network row (default %(default)s)")
    parser.add_argument("--first-seed", type=int, default=0, help="seed of the first run (default %(default)s)")
    parser.add_argument("--models", default=None,
                        help="rows of protocol a; those with times also run protocol b (default "
                             f"{','.join(PAPER_ROWS)}; with --data {','.join(OWN_DATA_ROWS)}, CET-paper only when "
                             f"named; recipe variants: {', '.join(VARIANTS)})")
    parser.add_argument("--protocols", default="a,b", help="a, b or both (default %(default)s)")
    parser.add_argument("--no-classical", action="store_true", help="leave out CoxPH, LogNormalAFT and RSF")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads of each process (default "
                        "%(default)s: cohorts run side by side in processes instead, --jobs)")
    parser.add_argument("--jobs", type=int, default=None, help="cohorts run side by side in this many processes "
                        "(default: the CPUs this process may use divided by --threads, at most one per cohort)")
    parser.add_argument("--max-epochs", type=int, default=None, help="the networks' epoch cap (default: their "
                        "automatic budget)")
    parser.add_argument("--scored", choices=("test", "val"), default="test",
                        help="the split every figure is computed on (default %(default)s; val: to decide a default)")
    parser.add_argument("--tables-only", action="store_true", help="only rewrite table.md from the cohort folders")
    parser.add_argument("--combine", type=Path, nargs="+", metavar="DIR",
                        help="write into --out the cohort records of these folders, each row from the last folder "
                             "that has it (same data and seeds), instead of running anything")
    parser.add_argument("--against", default="CET", help="comma-separated rows the recipe variants are compared "
                        "with, each variant with the row of its own preset (default %(default)s; e.g. "
                        "ET/no-validation,BC/no-validation)")
    parser.add_argument("--rows", default="", help="with --combine: only these rows (comma-separated)")
    return parser
