"""CET's validation AUC under a few training settings, on one dataset folder (never the test split).

    python benchmarks/validation_probe.py --data data/experiments/mimic-standin [--seed 0] \
        "dict()" "dict(lr=3e-4)" "dict(hidden=(300,))" "dict(batch_size=128)" "dict(dropout=0.2)"

Each argument is a dict of CETModel keyword overrides (``hidden`` sets the hidden sizes); one fit
per setting, seed 0 unless ``--seed``, the automatic training budget, early stopping on the validation objective.
Prints, on the validation split: the AUC against the true occurrence, ECE, MRAE and Harrell's C
(means over tasks); where the dataset records the truth, Harrell's C over the cells whose event
truly occurs, the time head's error there (median |log t_hat - log t_true|) and MRAE split by the
true occurrence (c = 1 / c = 0 cells; on the latter the predicted time given occurrence has no true
counterpart); the epochs run, the best epoch and the seconds. First it prints how many training rows
the default marginal objective sums exactly and how many by its importance-weighted bound. Used to check whether the default
CET's gap to the oracle on the MIMIC stand-in is a training-budget defect (README, "What the
tables show"), and what ``occurrence_init`` changes (docs/results.md, MIMIC section).
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cet_model.dataset import load_dataset  # noqa: E402
from cet_model.evaluation import evaluate, fit_preset, model_inputs  # noqa: E402
from cet_model.metrics import concordance_index, mrae  # noqa: E402
from cet_model.params import CETParams  # noqa: E402


def parse(text: str) -> dict:
    """'dict(lr=3e-4)' or '{"lr": 3e-4}' -> a dict, without eval."""
    node = ast.parse(text, mode="eval").body
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict" and not node.args:
        return {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    return dict(ast.literal_eval(node))


def free_cells_line(s: np.ndarray, mask: np.ndarray | None, max_patterns: int = CETParams.max_patterns) -> str:
    """How the marginal objective treats the training rows: each row sums over its free cells
    (censored or masked), exactly when 2^k <= ``max_patterns``, else by the importance-weighted bound.

    >>> free_cells_line(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]), None, max_patterns=2)
    'training rows by free cells k = 0..2: [1, 1, 1]; 2^k > 2 (importance-weighted): 1 of 3 (33.3 %)'
    """
    free = s < 0.5 if mask is None else (s < 0.5) | (mask < 0.5)
    k = free.sum(1)
    beyond = int((2.0 ** k > max_patterns).sum())
    return (f"training rows by free cells k = 0..{s.shape[1]}: {np.bincount(k, minlength=s.shape[1] + 1).tolist()}; "
            f"2^k > {max_patterns} (importance-weighted): {beyond} of {len(k)} ({100 * beyond / len(k):.1f} %)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    ap.add_argument("settings", nargs="+", help="CETModel overrides, e.g. 'dict(lr=3e-4)'")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    ds = load_dataset(args.data)
    tr, va = ds.train, ds.val
    x_tr, x_va = model_inputs(tr), model_inputs(va)
    print(free_cells_line(tr.S, tr.mask), flush=True)
    for label in args.settings:
        over = parse(label)
        hidden = tuple(over.pop("hidden", (100,)))
        t0 = time.perf_counter()
        model = fit_preset("CET", tr, va, seed=args.seed, hidden_sizes=hidden, max_epochs=over.pop("max_epochs", None),
                           patience=over.pop("patience", None), params=over, x_train=x_tr, x_val=x_va)
        scores = evaluate("CET", model, va, ds.event_names, x_va)
        h = model.history_

        def mean(k, scores=scores):
            return np.nanmean([r[k] for r in scores.values()])
        truth = np.isfinite(va.T_true) & (va.C == 1)
        if va.mask is not None:
            truth &= va.mask == 1
        log_err = (np.median(np.abs(np.log(model.predict_time(x_va)[truth]) - np.log(va.T_true[truth])))
                   if truth.any() else float("nan"))
        t_hat = model.predict_time(x_va)
        c_occurring = []  # Harrell's C over the cells whose event truly occurs
        for j in range(len(ds.event_names)):
            cell = (va.C[:, j] == 1) & (np.ones(len(va), bool) if va.mask is None else va.mask[:, j] == 1)
            if cell.sum() > 1 and va.S[cell, j].any():
                c_occurring.append(concordance_index(va.T[cell, j], t_hat[cell, j], va.S[cell, j]))
        by_c = []
        for occurs in (1, 0):
            err = []
            for j in range(len(ds.event_names)):
                keep = np.ones(len(va), bool) if va.mask is None else va.mask[:, j] == 1
                cell = keep & (va.C[:, j] == occurs)
                if cell.any():  # the scale is the task's, as in evaluate()
                    err.append(mrae(va.T[cell, j], t_hat[cell, j], va.S[cell, j], va.T[keep, j].max()) * cell.sum() / keep.sum())
            by_c.append(np.sum(err) / len(ds.event_names) if err else float("nan"))
        print(f"{label}: val AUC {mean('auc'):.4f}, ECE {mean('ece'):.4f}, MRAE {mean('mrae'):.4f} "
              f"(c=1 part {by_c[0]:.4f} + c=0 part {by_c[1]:.4f}), "
              f"C {mean('ci'):.4f} (on c=1 cells {np.mean(c_occurring) if c_occurring else float('nan'):.4f}), |log t err| {log_err:.3f}, epochs {len(h.train_loss)}, "
              f"best {h.best_epoch + 1}, {time.perf_counter() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
