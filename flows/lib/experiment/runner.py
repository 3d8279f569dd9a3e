"""Repeated-seed runs of the models on one dataset (``run``): the same ``fit_preset`` and
``evaluate`` calls the production flow makes, once per seed, with the data for the figures."""

from __future__ import annotations

import logging
import time

import numpy as np

from cet_model.choices import PAPER_PRESETS
from cet_model.dataset import Dataset
from cet_model.evaluation import evaluate, machine, model_inputs
from cet_model.metrics import calibration_curve, expected_calibration_error
from cet_model.presets import PRESETS, check_presets, fit_preset, presets_for_truth
from cet_model.reference import COX_PENALIZER, REFERENCE, cox_reference, wants_reference
from flows.lib.infra.cli import time_left

from . import figures
from .records import data_fingerprint, resolved_params

log = logging.getLogger(__name__)


def run(ds: Dataset, runs: int, models=PAPER_PRESETS, hidden_sizes=(100,), max_epochs=None,
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
    started, total_runs = time.perf_counter(), max(model_runs.values(), default=0)
    for r in range(total_runs):
        seed = first_seed + r
        if r and progress:  # an estimate from the runs so far, model by model (costly rows may run fewer)
            left = sum(float(np.mean(result["models"][m]["seconds"])) * (model_runs[m] - r)
                       for m in models if r < model_runs[m] and result["models"][m]["seconds"])
            print(time_left(r, total_runs, time.perf_counter() - started, left, "runs"), flush=True)
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
