"""CET's validation AUC under a few training settings, on one dataset folder (never the test split).

    python benchmarks/validation_probe.py --data data/experiments/mimic-standin [--seed 0] \
        "dict()" "dict(lr=3e-4)" "dict(hidden=(300,))" "dict(batch_size=128)" "dict(dropout=0.2)"

Each argument is a dict of CETModel keyword overrides (``hidden`` sets the hidden sizes); one fit
per setting, seed 0 unless ``--seed``, the automatic training budget, early stopping on the validation objective.
Prints the validation AUC against the true occurrence (mean over tasks), the epochs run, the best
epoch and the seconds. Used to check whether the default CET's gap to the oracle on the MIMIC
stand-in is a training-budget defect (README, "What the tables show").
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


def parse(text: str) -> dict:
    """'dict(lr=3e-4)' or '{"lr": 3e-4}' -> a dict, without eval."""
    node = ast.parse(text, mode="eval").body
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict" and not node.args:
        return {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    return dict(ast.literal_eval(node))


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
    for label in args.settings:
        over = parse(label)
        hidden = tuple(over.pop("hidden", (100,)))
        t0 = time.perf_counter()
        model = fit_preset("CET", tr, va, seed=args.seed, hidden_sizes=hidden, max_epochs=over.pop("max_epochs", None),
                           patience=over.pop("patience", None), params=over, x_train=x_tr, x_val=x_va)
        scores = evaluate("CET", model, va, ds.event_names, x_va)
        h = model.history_
        print(f"{label}: val AUC {np.nanmean([r['auc'] for r in scores.values()]):.4f}, epochs {len(h.train_loss)}, "
              f"best {h.best_epoch + 1}, {time.perf_counter() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
