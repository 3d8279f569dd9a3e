"""BC's and the oracle's validation AUC under a few settings, on one dataset folder (never the test split).

    python benchmarks/baseline_validation_probe.py --data data/experiments/mimic-standin [--seed 0] \
        [--models BC,Oracle] "dict()" "dict(input_dropout=0.4)"

``validation_probe.py`` does this for CET. A setting that changes CET's occurrence encoder (its
layers, their regularisation) is a fair default only if the baselines built from the same encoder
get it too, and the goal of the model issue compares CET with BC and the oracle: this fits each
of ``--models`` once per setting (a dict of keyword overrides of the preset, parsed without eval;
the automatic training budget; early stopping on the validation split; BC learns the observed
indicators, the oracle the true occurrence) and prints, on the validation split, the AUC against
the true occurrence and the ECE (means over tasks), the epochs and the seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from validation_probe import parse, pick  # noqa: E402

from cet_model.dataset import load_dataset  # noqa: E402
from cet_model.evaluation import evaluate, fit_preset, model_inputs  # noqa: E402

MODELS = ("BC", "Oracle")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="dataset folder (with the truth recorded)")
    ap.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    ap.add_argument("--models", default=",".join(MODELS), help="which of %(default)s")
    ap.add_argument("settings", nargs="+", help="preset overrides, e.g. 'dict(input_dropout=0.4)'")
    args = ap.parse_args(argv)
    names = pick(ap, "--models", args.models, MODELS)
    settings = [(label, parse(label)) for label in args.settings]  # every setting parsed before any fit
    warnings.simplefilter("ignore")
    ds = load_dataset(args.data)
    tr, va = ds.train, ds.val
    x_tr, x_va = model_inputs(tr), model_inputs(va)
    for name in names:
        for label, over in settings:
            t0 = time.perf_counter()
            model = fit_preset(name, tr, va, seed=args.seed, params=dict(over), x_train=x_tr, x_val=x_va)
            scores = evaluate(name, model, va, ds.event_names, x_va)
            auc = np.nanmean([r["auc"] for r in scores.values()])
            ece = np.nanmean([r["ece"] for r in scores.values()])
            print(f"{name} seed {args.seed} {label}: val AUC {auc:.4f}, ECE {ece:.4f}, "
                  f"epochs {len(model.history_.train_loss)}, {time.perf_counter() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
