"""Does early stopping on the joint objective stop CET's occurrence head too soon? Validation split only.

    python benchmarks/early_stopping_probe.py --data data/experiments/mimic-standin [--seeds 0,1,2] \
        [--out benchmarks/results/early_stopping_probe_mimic.json]

The default CET stops when the validation objective (the log marginal likelihood of times and
indicators, both heads together) has not improved for ``patience`` epochs, and keeps the best
weights. On the MIMIC stand-in the best epoch comes early (13 of 53 at seed 0) while the
occurrence head still improves against the planted truth. Per seed this fits, as the experiments
do (``PRESETS``, automatic budget):

- ``BC`` and the ``Oracle`` (the better baseline and the ceiling, for the goal arithmetic of the
  model issue: CET should close half the gap between them);
- ``CET`` with one joint stop (``encoder_stage=False``, the default until 2026-11-24),
  recording after every epoch the validation objective, the validation AUC against the true
  occurrence and the log loss of P(ever) against it. It reports the AUC at the epoch the
  objective picks and the best AUC anywhere on the trajectory: no stopping rule that follows
  this trajectory can do better than that, and choosing it needs the truth;
- the default ``CET`` (``encoder_stage=True``): the same joint stage, then the time decoder
  frozen and the occurrence encoder trained on, stopped by the same validation objective (a
  stopping rule per head, using no truth). Both the default and the joint stop alone are also
  timed without the per-epoch scoring (``joint_seconds``, ``staged_seconds``): what the stage costs.

Prints one line per fit and the share of the BC-to-oracle gap each CET variant closes on the
validation split. The truth is read from the validation split only; the test split is not read.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cet_experiments.goal import share_of_gap  # noqa: E402
from cet_model.atomic import write_text  # noqa: E402
from cet_model.dataset import load_dataset  # noqa: E402
from cet_model.evaluation import (  # noqa: E402
    PRESETS,
    comment_encoder_for,
    evaluate,
    fit_preset,
    machine,
    model_inputs,
)
from cet_model.metrics import occurrence_auc  # noqa: E402


def truth_scores(p: np.ndarray, c: np.ndarray, mask: np.ndarray | None) -> tuple[float, float]:
    """(mean AUC over events, mean log loss) of P(ever) ``p`` (n, M) against the true occurrence ``c``."""
    keep = np.ones_like(c, bool) if mask is None else mask == 1
    aucs = [occurrence_auc(c[keep[:, j], j], p[keep[:, j], j]) for j in range(c.shape[1])
            if len(np.unique(c[keep[:, j], j])) == 2]
    q = np.clip(p, 1e-6, 1 - 1e-6)
    loss = -(c * np.log(q) + (1 - c) * np.log(1 - q))[keep].mean()
    return float(np.mean(aucs)), float(loss)


def validation_inputs(data):
    """Load a dataset folder for a validation probe: (dataset, train split, validation split,
    the model inputs of each); warnings silenced, as the probes print their own lines."""
    warnings.simplefilter("ignore")
    ds = load_dataset(data)
    return ds, ds.train, ds.val, model_inputs(ds.train), model_inputs(ds.val)


def floor_and_ceiling(ds, x_tr, x_va, seed: int) -> dict[str, float]:
    """Validation AUC (mean over events) of BC and the Oracle, fitted as the experiments do: the
    better baseline and the ceiling of the half-gap arithmetic."""
    base = {}
    for name in ("BC", "Oracle"):
        model = fit_preset(name, ds.train, ds.val, seed=seed, x_train=x_tr, x_val=x_va)
        base[name] = float(np.nanmean([r["auc"] for r in evaluate(name, model, ds.val, ds.event_names, x_va).values()]))
    return base


def write_record(out: Path, script: str, argv, data, **payload) -> None:
    """Write a probe's figures to ``out`` (JSON, atomically) with the command that made them, the
    machine and the dataset folder; ``argv``: the arguments given (None: ``sys.argv[1:]``)."""
    command = f"python benchmarks/{script} " + shlex.join(argv if argv is not None else sys.argv[1:])
    record = {"command": command, "machine": machine(), "data": str(data), **payload}
    write_text(out, json.dumps(record, indent=2) + "\n")


gap_share = share_of_gap  # the share of the BC-to-oracle gap CET closes, as `cet_experiments goal` computes it


def variant_fitters(variant_class, attribute: str, variants: dict, default_class) -> list[tuple]:
    """``compare_fits``'s fitters for the default (``default_class``) and one ``variant_class``
    model per ``variants`` item (label: value), the value set as the model's ``attribute`` before
    it is fitted on the training split, stopped on the validation split."""
    def fitter(cls, value):
        def fit(kw, tr, va, x_tr, x_va):
            model = cls(**kw)
            if value is not None:
                setattr(model, attribute, value)
            return model.fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
        return fit
    return [("default", fitter(default_class, None))] + [(label, fitter(variant_class, value))
                                                         for label, value in variants.items()]


def compare_fits(inputs, seeds, fitters, out: Path | None, script: str, argv, data, extra=None, **payload) -> list[dict]:
    """Per seed: BC and the oracle, then each of ``fitters`` — ``(name, fit)`` pairs, ``fit(kw, tr,
    va, x_tr, x_va)`` returning a fitted CET given the default preset's keywords ``kw`` (the seed and
    the dataset's comment encoder included) — scored on the validation split (its objective, the AUC
    against the true occurrence, the share of BC's gap to the oracle, the joint stage's best epoch).
    ``inputs``: ``validation_inputs(data)``. ``extra(model, va, x_va)`` (optional) returns more
    figures of a fit (a dict), recorded and printed with it. Prints one line a fit, writes the rows
    (and ``payload``) to ``out`` when given, and returns them."""
    ds, tr, va, x_tr, x_va = inputs
    rows = []
    for seed in seeds:
        t0 = time.perf_counter()
        base = floor_and_ceiling(ds, x_tr, x_va, seed)
        kw = dict(seed=seed, comment_encoder=comment_encoder_for(tr), **PRESETS["CET"][1])
        fits = {}
        for name, fit in fitters:
            model = fit(kw, tr, va, x_tr, x_va)
            auc = truth_scores(model.predict_occurrence(x_va), va.C, va.mask)[0]
            fits[name] = {"val_objective": round(-model.score(x_va, va.T, va.S, mask=va.mask), 5),
                          "val_auc": round(auc, 4), "gap_share": round(gap_share(auc, base["BC"], base["Oracle"]), 3),
                          "best_epoch": model.history_.best_epoch + 1, **(extra(model, va, x_va) if extra else {})}
        rows.append({"seed": seed, "val_auc_bc": round(base["BC"], 4), "val_auc_oracle": round(base["Oracle"], 4),
                     "seconds": round(time.perf_counter() - t0, 1), "fits": fits})
        print(f"seed {seed}: BC {base['BC']:.4f}, oracle {base['Oracle']:.4f} ({rows[-1]['seconds']:.0f}s)", flush=True)
        for k, v in fits.items():
            print(f"  {k}: objective {v['val_objective']:.5f}, AUC {v['val_auc']:.4f} ({v['gap_share']:.0%}), "
                  f"best joint epoch {v['best_epoch']}"
                  + "".join(f", {key} {val}" for key, val in v.items()
                            if key not in ("val_objective", "val_auc", "gap_share", "best_epoch")), flush=True)
    if out:
        write_record(out, script, argv, data, rows=rows, **payload)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="dataset folder (with the truth recorded)")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    args = ap.parse_args(argv)
    ds, tr, va, x_tr, x_va = validation_inputs(args.data)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        base = floor_and_ceiling(ds, x_tr, x_va, seed)
        cls, preset = PRESETS["CET"]
        model = cls(seed=seed, comment_encoder=comment_encoder_for(tr), **dict(preset, encoder_stage=False))
        curve = []  # (epoch, validation objective, AUC vs truth, log loss vs truth)

        def record(epoch, hist, model=model, curve=curve):
            curve.append((epoch, hist.val_loss[-1], *truth_scores(model.predict_occurrence(x_va), va.C, va.mask)))

        t0 = time.perf_counter()
        model.fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask, on_epoch=record)
        seconds = time.perf_counter() - t0
        picked = model.history_.best_epoch
        auc_picked = truth_scores(model.predict_occurrence(x_va), va.C, va.mask)[0]
        best = max(curve, key=lambda r: r[2])
        lowest_loss = min(curve, key=lambda r: r[3])

        # the same joint fit without the per-epoch scoring, timed: the cost baseline for the stage
        plain = cls(seed=seed, comment_encoder=comment_encoder_for(tr), **dict(preset, encoder_stage=False))
        t0 = time.perf_counter()
        plain.fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
        joint_seconds = time.perf_counter() - t0
        staged = cls(seed=seed, comment_encoder=comment_encoder_for(tr), **dict(preset, encoder_stage=True))
        t0 = time.perf_counter()
        staged.fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
        staged_seconds = time.perf_counter() - t0
        stage2 = staged.encoder_history_
        auc_staged = truth_scores(staged.predict_occurrence(x_va), va.C, va.mask)[0]
        row = {
            "seed": seed, "val_auc_bc": round(base["BC"], 4), "val_auc_oracle": round(base["Oracle"], 4),
            "cet_epochs": len(curve), "cet_best_epoch": picked + 1, "cet_val_objective": round(curve[picked][1], 5),
            "cet_val_auc": round(auc_picked, 4), "cet_val_logloss_vs_truth": round(curve[picked][3], 4),
            "trajectory_best_auc": round(best[2], 4), "trajectory_best_auc_epoch": best[0] + 1,
            "trajectory_lowest_logloss_vs_truth": round(lowest_loss[3], 4),
            "trajectory_lowest_logloss_epoch": lowest_loss[0] + 1,
            "staged_val_objective": round(-staged.score(x_va, va.T, va.S, mask=va.mask), 5),
            "staged_best_epoch": None if stage2 is None else stage2.best_epoch + 1,
            "staged_val_auc": round(auc_staged, 4), "staged_epochs": None if stage2 is None else len(stage2.train_loss),
            "cet_seconds": round(seconds, 1), "joint_seconds": round(joint_seconds, 1),
            "staged_seconds": round(staged_seconds, 1),
            "staged_cost_ratio": round(staged_seconds / joint_seconds, 2),
        }
        for key in ("cet_val_auc", "trajectory_best_auc", "staged_val_auc"):
            row[f"gap_share_{key}"] = round(gap_share(row[key], base["BC"], base["Oracle"]), 3)
        rows.append(row)
        print(f"seed {seed}: BC {row['val_auc_bc']:.4f}, oracle {row['val_auc_oracle']:.4f}; CET picked epoch "
              f"{row['cet_best_epoch']} of {row['cet_epochs']}: AUC {row['cet_val_auc']:.4f} "
              f"({row['gap_share_cet_val_auc']:.0%} of the gap), log loss vs truth {row['cet_val_logloss_vs_truth']:.4f}; "
              f"best on the trajectory {row['trajectory_best_auc']:.4f} at epoch {row['trajectory_best_auc_epoch']} "
              f"({row['gap_share_trajectory_best_auc']:.0%}), lowest log loss {row['trajectory_lowest_logloss_vs_truth']:.4f} "
              f"at epoch {row['trajectory_lowest_logloss_epoch']}; encoder-only stage: objective "
              f"{row['cet_val_objective']:.5f} -> {row['staged_val_objective']:.5f}, AUC {row['staged_val_auc']:.4f} "
              f"({row['gap_share_staged_val_auc']:.0%}); fit {row['joint_seconds']:.1f}s joint stop only, "
              f"{row['staged_seconds']:.1f}s with the stage ({row['staged_cost_ratio']:.2f}x)", flush=True)
    if args.out:
        write_record(args.out, "early_stopping_probe.py", argv, args.data, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
