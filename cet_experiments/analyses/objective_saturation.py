"""Why eq. 8 as printed loses to BC on the planted stand-ins: its occurrence head saturates.

    python cet_experiments/analyses/objective_saturation.py --data data/experiments/mimic-standin [--seed 0]

Fits, once each on the same split and seed: CET-bound (eq. 8; Gumbel-Softmax and the exact
estimator, so sampling noise is ruled out), CET-paper (the original code's objective, whose
-log p term counters the saturation), the default CET (exact marginal likelihood), BC and the
oracle. (The JSON files in docs/results/analyses/ come from a run before the objective registry,
when ``CET`` meant eq. 8 and ``CET-marginal`` the marginal likelihood.) Records per model the test AUC against the true
c (mean over tasks), the
share of test predictions p(c|x) outside [0.01, 0.99], the ECE, and over the true negatives
the median p and the mean of p (1 - p). The paper's bound is linear in p, so its gradient
w.r.t. a cell's logit is p (1 - p) x (a constant): it vanishes once p saturates, even when p is
wrong, while a log loss (BC, the marginal likelihood) keeps a gradient of about p. Writes
docs/results/analyses/objective_saturation_<dataset>.json (``--out`` another file).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MODELS = {
    "CET-bound (eq. 8, Gumbel)": ("CET-bound", {}),
    "CET-bound (eq. 8, exact)": ("CET-bound", {"estimator": "exact"}),
    "CET-paper (original code)": ("CET-paper", {}),
    "CET (marginal, default)": ("CET", {}),
    "BC": ("BC", {}),
    "Oracle": ("Oracle", {}),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import numpy as np  # the libraries load once the options parse: --help answers at once

    from cet_model.atomic import write_text
    from cet_model.dataset import load_dataset
    from cet_model.evaluation import machine, model_inputs
    from cet_model.metrics import expected_calibration_error, occurrence_auc
    from cet_model.presets import fit_preset

    ds = load_dataset(args.data)
    tr, va, te = ds.train, ds.val, ds.test
    x_tr, x_va, x_te = model_inputs(tr), model_inputs(va), model_inputs(te)
    rows = {}
    for label, (name, overrides) in MODELS.items():
        t0 = time.perf_counter()
        model = fit_preset(name, tr, va, seed=args.seed, hidden_sizes=(args.hidden,), params=overrides,
                           x_train=x_tr, x_val=x_va)
        p = model.predict_occurrence(x_te)
        keep = np.ones_like(p, bool) if te.mask is None else te.mask == 1
        aucs = [occurrence_auc(te.C[keep[:, j], j], p[keep[:, j], j]) for j in range(p.shape[1])
                if len(np.unique(te.C[keep[:, j], j])) == 2]
        eces = [expected_calibration_error(te.C[keep[:, j], j], p[keep[:, j], j]) for j in range(p.shape[1])]
        pk = p[keep]
        rows[label] = {"auc": float(np.mean(aucs)), "ece": float(np.mean(eces)),
                       "saturated_share": float(np.mean((pk < 0.01) | (pk > 0.99))),
                       "median_p_of_true_negatives": float(np.median(p[keep & (te.C == 0)])),
                       "mean_p1mp_of_true_negatives": float(np.mean((p * (1 - p))[keep & (te.C == 0)])),
                       "epochs": len(model.history_.train_loss), "seconds": round(time.perf_counter() - t0, 1)}
        print(
            f"{label:<22} AUC {rows[label]['auc']:.3f}  saturated {rows[label]['saturated_share']:.2f}  "
            f"ECE {rows[label]['ece']:.2f}  median p | c=0 {rows[label]['median_p_of_true_negatives']:.2f}",
            flush=True,
        )
    name = ds.manifest.get("name") or args.data.name
    out = args.out or ROOT / "docs" / "results" / "analyses" / f"objective_saturation_{args.data.name}.json"
    write_text(
        out,
        json.dumps(
            {
                "dataset": str(args.data),
                "name": name,
                "split_sizes": ds.manifest.get("split_sizes"),
                "seed": args.seed,
                "hidden": args.hidden,
                "models": rows,
                "machine": machine(),
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
