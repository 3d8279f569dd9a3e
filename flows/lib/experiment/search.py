"""Random search over CET-paper's hyper-parameters in the paper's ranges, tuned on validation AUC.

Each trial fits CET-paper (the original code's objective) once (seed ``seed + trial``) and scores the mean over tasks
of the
validation AUC against the true occurrence c. Trial 0 is the paper's own setting
(``PAPER_POINT``), so a small budget cannot end below the paper's choice on validation; the
others are draws from ``SPACE``. The best point is then fixed for the repeated runs
(``flows.lib.experiment.runner.run(..., overrides=...)``).
"""

from __future__ import annotations

import math
import time

import numpy as np

from cet_model.evaluation import evaluate, model_inputs
from cet_model.presets import PRESET_OF_ESTIMATOR, fit_preset, unknown_occurrence

PAPER_POINT = {"estimator": "gumbel", "n_samples": 100, "log_epsilon": math.log(0.7), "hidden": 100,
               "temperature": 0.3}
SPACE = {"estimator": ("gumbel", "arm", "exact"), "n_samples": (30, 200), "log_epsilon": (-4.0, 0.0),
         "hidden": (100, 1000), "temperature": (0.0, 1.0)}


def draw(rng: np.random.Generator) -> dict:
    """One point: estimator uniform, samples and hidden width log-uniform (integers), log eps
    and temperature uniform (temperature kept away from 0)."""
    lo, hi = SPACE["n_samples"]
    hlo, hhi = SPACE["hidden"]
    return {"estimator": str(rng.choice(SPACE["estimator"])),
            "n_samples": int(round(math.exp(rng.uniform(math.log(lo), math.log(hi))))),
            "log_epsilon": float(rng.uniform(*SPACE["log_epsilon"])),
            "hidden": int(round(math.exp(rng.uniform(math.log(hlo), math.log(hhi))))),
            "temperature": float(rng.uniform(0.05, SPACE["temperature"][1]))}


def random_search(ds, budget: int, seed: int = 0, max_epochs: int | None = 100, patience: int | None = 10,
                  progress: bool = True) -> dict:
    """``budget`` trials; returns {"trials": [...], "best": point, "best_val_auc": float}."""
    if budget < 1:
        raise ValueError(f"search budget must be >= 1, got {budget}")
    rng = np.random.default_rng([seed, 7])
    tr, va = ds.train, ds.val
    unknown = unknown_occurrence(va)
    if unknown:
        raise ValueError(f"{ds.path}: the search tunes on validation AUC against the true occurrence, which is not "
                         f"known for {unknown} validation cells; run without a search")
    x_tr, x_va = model_inputs(tr), model_inputs(va)
    trials = []
    for i in range(budget):
        point = dict(PAPER_POINT) if i == 0 else draw(rng)  # the paper's setting is always a candidate
        cet_kwargs = {k: point[k] for k in ("estimator", "n_samples", "log_epsilon", "temperature")}
        t0 = time.perf_counter()
        model = fit_preset("CET-paper", tr, va, seed=seed + i, hidden_sizes=(point["hidden"],), max_epochs=max_epochs,
                           patience=patience, params=cet_kwargs, x_train=x_tr, x_val=x_va)
        scores = evaluate("CET-paper", model, va, ds.event_names, x_va)
        val_auc = float(np.nanmean([row["auc"] for row in scores.values()]))
        trials.append({**point, "val_auc": val_auc, "seconds": time.perf_counter() - t0,
                       "epochs": len(model.history_.train_loss)})
        if progress:
            print(f"search {i + 1}/{budget}: {point} val AUC {val_auc:.3f}", flush=True)
    best = max(trials, key=lambda t: -math.inf if math.isnan(t["val_auc"]) else t["val_auc"])
    return {"space": {k: list(v) for k, v in SPACE.items()}, "budget": budget, "seed": seed, "trials": trials,
            "best": {k: best[k] for k in SPACE}, "best_val_auc": best["val_auc"]}


def overrides_from(best: dict) -> tuple[tuple[int, ...], dict]:
    """(hidden sizes for every model, keyword overrides) from a search's best point: CET-paper gets
    the whole point; CET-Gumbel, CET-ARM and CET-exact the same point with their own estimator."""
    cet = {k: best[k] for k in ("estimator", "n_samples", "log_epsilon", "temperature")}
    out = {"CET-paper": cet}
    for estimator, name in PRESET_OF_ESTIMATOR.items():
        out[name] = dict(cet, estimator=estimator)
    return (int(best["hidden"]),), out
