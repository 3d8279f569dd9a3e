"""Repeated-seed experiments and tables in the paper's layout.

    python -m cet_experiments synthetic --mode reference --runs 10 --out DIR

trains every model on the same dataset once per seed, evaluates on the test split and
writes ``DIR/metrics.json``, ``DIR/table.md`` and the paper's figures (mean +- std over runs,
plus the average over tasks). The models are the presets of :mod:`cet_model.evaluation`
(``CET`` is the product default; ``CET-paper`` the original code's objective; ``ET``, ``BC``
and ``Oracle`` the baselines), fitted with :func:`cet_model.evaluation.fit_preset` and scored
with :func:`cet_model.evaluation.evaluate` -- the same calls the production flow makes.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np
import torch

from cet_model.dataset import Dataset, load_dataset
from cet_model.evaluation import (
    COX_PENALIZER,
    DEFAULT_PRESETS,
    PRESET_OF_ESTIMATOR,
    PRESETS,
    REFERENCE,
    REFERENCE_CHOICES,
    check_presets,
    cox_reference,
    evaluate,
    fit_preset,
    machine,
    model_inputs,
    presets_for_truth,
    wants_reference,
)
from cet_model.metrics import calibration_curve, expected_calibration_error

from . import figures, synthetic
from .records import DATA_FILES, data_fingerprint, resolved_params  # noqa: F401  (re-exported)
from .report import write_figures, write_report  # noqa: F401  (re-exported)
from .search import overrides_from, random_search
from .tables import table_markdown

log = logging.getLogger("cet_experiments")


def run(ds: Dataset, runs: int, models=DEFAULT_PRESETS, hidden_sizes=(100,), max_epochs=None,
        patience=None, first_seed=0, overrides: dict | None = None, progress: bool = True,
        model_runs: dict | None = None, reference: str = "auto") -> dict:
    """Fit each model ``runs`` times (seeds first_seed, first_seed + 1, ...) and evaluate;
    ``model_runs`` gives some models fewer (or more) runs, e.g. {"CET-exact": 3}. ``reference``
    (``REFERENCE_CHOICES``; "auto": on data without the true occurrence, where the Oracle is left
    out) adds the row ``Cox (reference)``, ``cox_reference`` fitted once (it has no seed), features
    only: what the models' survival ranking is judged against on real data."""
    tr, va, te = ds.train, ds.val, ds.test
    models, skipped = presets_for_truth(check_presets(models), tr, va)
    for name, why in skipped.items():
        log.warning("%s left out: %s", name, why)
    no_truth = bool(np.isnan(te.C).all())  # censored by follow-up alone: said once, not per model and run
    if no_truth:
        log.info("the true occurrence is known for no test row: AUC and ECE are left empty; C (RMST) compares "
                 "the models' survival ranking")
    x_tr, x_va, x_te = model_inputs(tr), model_inputs(va), model_inputs(te)
    result = {"models": {m: {"tasks": {e: {} for e in ds.event_names}, "seconds": []} for m in models},
              "figures": {"calibration": {e: {} for e in ds.event_names}, "maps": None}}
    model_runs = {m: (model_runs or {}).get(m, runs) for m in models}
    for r in range(max(model_runs.values(), default=0)):
        seed = first_seed + r
        for name in models:
            if r >= model_runs[name]:
                continue
            t0 = time.perf_counter()
            model = fit_preset(name, tr, va, seed=seed, hidden_sizes=hidden_sizes, max_epochs=max_epochs,
                               patience=patience, params=(overrides or {}).get(name, {}), x_train=x_tr,
                               x_val=x_va)
            secs = time.perf_counter() - t0
            scores = evaluate(name, model, te, ds.event_names, x_te, train=tr, label=f"test, run {r + 1}",
                              warn_no_truth=not no_truth)
            if r == 0:
                _figure_data(result, name, model, ds, x_te)
                result.setdefault("resolved", {})[name] = resolved_params(model)
            entry = result["models"][name]
            entry["seconds"].append(secs)
            entry.setdefault("epochs", []).append(len(model.history_.train_loss))
            for e, row in scores.items():
                for k, v in row.items():
                    entry["tasks"][e].setdefault(k, []).append(v)
            if progress:
                key, title = ("ci_rmst", "C (RMST)") if no_truth else ("auc", "AUC")
                shown = " ".join(f"{e}={row.get(key, float('nan')):.3f}" for e, row in scores.items())
                print(f"run {r + 1}/{model_runs[name]} {name:<13} {secs:6.1f}s  {title} {shown}", flush=True)
    if wants_reference(reference, no_truth) and te.sequences is None:
        t0 = time.perf_counter()
        scores, _ = cox_reference(tr, {"test": te}, ds.event_names)
        result["models"][REFERENCE] = {
            "tasks": {e: {k: [v] for k, v in row.items()} for e, row in scores["test"].items()},
            "seconds": [time.perf_counter() - t0],
        }
        model_runs[REFERENCE] = 1
    elif wants_reference(reference, no_truth):
        log.warning("%s left out: the model input has comment embeddings", REFERENCE)
    result["config"] = {
        "runs": runs,
        "model_runs": model_runs,
        "first_seed": first_seed,
        "hidden_sizes": list(hidden_sizes),
        "max_epochs": max_epochs,
        "patience": patience,
        "models": {
            **{m: PRESETS[m][1] | (overrides or {}).get(m, {}) for m in models},
            **({REFERENCE: {"penalizer": COX_PENALIZER}} if REFERENCE in model_runs else {}),
        },
        "resolved": result.pop("resolved", {}),
    }
    result["skipped"] = skipped
    result["dataset"] = {"path": str(ds.path), "name": ds.manifest.get("name"),
                         "split_sizes": ds.manifest.get("split_sizes"), "fingerprint": data_fingerprint(ds.path)}
    result["machine"] = machine()
    return result


def _figure_data(result: dict, name: str, model, ds, x_te) -> None:
    """Calibration curves (every dataset) and occurrence maps (the synthetic data) of one model."""
    te = ds.test
    p = model.predict_occurrence(x_te)
    for j, e in enumerate(ds.event_names):
        keep = np.ones(len(te), bool) if te.mask is None else te.mask[:, j] == 1
        keep &= ~np.isnan(te.C[:, j])  # calibration against the true occurrence, where it is known
        if len(np.unique(te.C[keep, j])) < 2:
            continue
        obs, pred, _ = calibration_curve(te.C[keep, j], p[keep, j])
        result["figures"]["calibration"][e][name] = {
            "pred": pred.tolist(), "obs": obs.tolist(), "ece": expected_calibration_error(te.C[keep, j], p[keep, j])}
    synthetic = ds.feature_names == ["x1", "x2", "x3", "x4", "x5"] and ds.event_names == ["T1", "T2"]
    if not synthetic or te.sequences is not None:
        return
    maps = result["figures"]["maps"] = result["figures"]["maps"] or {}
    rows = np.random.default_rng(0).choice(len(te), size=min(400, len(te)), replace=False)
    for j, e in enumerate(ds.event_names):
        a, b, grid = figures.occurrence_grid(te.X, figures.MAP_AXES[e])
        fi, fj = figures.MAP_AXES[e]
        m = maps.setdefault(e, {"a": a.tolist(), "b": b.tolist(), "models": {},
                                "points": (te.X[rows, fi].tolist(), te.X[rows, fj].tolist(), te.C[rows, j].tolist())})
        m["models"][name] = figures.map_scores(name, model, grid, j).tolist()


def parse_model_runs(text: str, models) -> dict:
    """``"CET-exact=3,CET-ARM=3"`` -> {"CET-exact": 3, "CET-ARM": 3}, keeping the names in ``models``."""
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, n = item.partition("=")
        if not sep or not n.strip().isdigit():
            raise SystemExit(f"--model-runs: expected MODEL=N, got {item!r}")
        if name.strip() not in PRESETS:
            raise SystemExit(f"--model-runs: unknown model {name.strip()!r}; choose from {sorted(PRESETS)}")
        if name.strip() in models:
            out[name.strip()] = int(n)
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="python -m cet_experiments", description=__doc__.split("\n\n")[0],
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
        p.add_argument("--models", default=",".join(DEFAULT_PRESETS),
                       help=f"comma-separated, from {','.join(PRESETS)} (default: %(default)s)")
        p.add_argument("--hidden", type=int, default=100, help="hidden width (paper: 100 synthetic, 750 others)")
        p.add_argument("--max-epochs", type=int, default=None,
                       help="epoch cap (default: automatic, >= 100 epochs and >= 5,000 steps)")
        p.add_argument("--patience", type=int, default=None, help="early-stopping patience (default: automatic)")
        p.add_argument("--first-seed", type=int, default=0, help="seed of the first run; run r uses first + r "
                                                                  "(default %(default)s)")
        p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.command == "goal":
        from .goal import goal_from_folder

        try:
            print(goal_from_folder(args.report, model=args.model, oracle=args.oracle,
                                   baselines=tuple(b.strip() for b in args.baselines.split(",") if b.strip())))
        except ValueError as err:
            raise SystemExit(str(err)) from None
        return 0
    if args.command == "merge":
        from .merge import merge_folders

        try:
            merged = merge_folders(args.parts, args.out, args.title,
                                   [m.strip() for m in args.drop_first.split(",") if m.strip()])
        except ValueError as err:
            raise SystemExit(str(err)) from None
        runs = ", ".join(f"{m} {n}" for m, n in merged["config"]["model_runs"].items())
        print(f"{args.out}: merged {len(args.parts)} reports ({runs} runs)")
        return 0
    if args.command == "summary":
        from .summary import update_results_block

        changed = update_results_block(args.doc, args.results)
        print(f"{args.doc}: results block {'rewritten' if changed else 'already current'}")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.command == "synthetic":
        data = args.data
        if data is None:
            n_tr, n_va = int(0.6 * args.n), int(0.2 * args.n)
            data = synthetic.write(args.out / "data", mode=args.mode, n=args.n,
                                   split_sizes=(n_tr, n_va, args.n - n_tr - n_va))
        title = f"Synthetic data ({args.mode} mode, n = {args.n:,}): Table 3"
    else:
        data, title = args.data, f"Dataset {args.data.name}"
    ds = load_dataset(data)
    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    hidden, overrides, search = (args.hidden,), None, None
    if args.search:
        search = random_search(ds, args.search, seed=args.first_seed, max_epochs=args.search_epochs or args.max_epochs,
                               patience=args.patience)
        hidden, overrides = overrides_from(search["best"])
    chosen = (overrides or {}).get("CET-paper", {}).get("estimator", "gumbel")  # the paper's recipe: Gumbel
    if "CET-paper" in models and PRESET_OF_ESTIMATOR[chosen] in models:  # the same fits as the CET-paper row
        models = tuple(m for m in models if m != PRESET_OF_ESTIMATOR[chosen])
        print(f"CET-paper uses the {chosen} estimator: {PRESET_OF_ESTIMATOR[chosen]} is the CET-paper row", flush=True)
    result = run(ds, args.runs, models, hidden_sizes=hidden, max_epochs=args.max_epochs,
                 patience=args.patience, first_seed=args.first_seed, overrides=overrides,
                 model_runs=parse_model_runs(args.model_runs, models), reference=args.reference)
    if search is not None:
        result["search"] = search
    result["command"] = "python -m cet_experiments " + " ".join(argv)
    write_report(result, args.out, title)
    print(table_markdown(result, title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
