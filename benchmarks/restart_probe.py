"""Would a second start help the fits that early stopping keeps near their random start? Validation splits only.

    python benchmarks/restart_probe.py [--datasets veteran,pbc,whas500,GBSG2,actg,rott2] [--draws 10] \
        [--out benchmarks/results/restart_probe.json]

Since 2026-11-28 a joint stage that keeps one of its first ``EARLY_KEEP`` (5) epochs after running at
least ten times as many warns ("close to their random start"): on veteran's 64 fitting rows such
fits rank the rows by their random initial weights (docs/results.md, "How large is that floor?").
The remedy a user would expect from scikit-learn (``n_init``) is a second start: refit from other
initial weights and keep the fit with the better validation objective. Before building it into
the library this measures, per SurvSet set and draw (the ``full`` partition of
``survset_size_probe.py``: 80 % of the training split fitting, 20 % early stopping, scored on the
validation split; CET seed = draw):

- how many default fits meet the warning's condition (``trigger``), and how many keep an early
  epoch at all;
- for those, a refit with seed ``draw + 1000``: the validation objective of both (on the
  early-stopping rows, the only thing a rule may read) and Harrell's C of the kept one on the
  validation split, against the linear log-normal AFT.

Prints the mean CET − AFT validation C per set with and without the rule. The test split is not read.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_survset import fit_cet, fit_lifelines, load, score  # noqa: E402
from early_stopping_probe import write_record  # noqa: E402
from survset_size_probe import draw_parts  # noqa: E402

from cet_model.train import EARLY_KEEP  # noqa: E402

RESTART_SEED = 1000


def near_start(model) -> bool:
    """The condition of the library's warning: the joint stage stopped early on a validation
    objective and kept one of its first EARLY_KEEP epochs after running at least 10x as many."""
    h = model.history_
    return bool(h.stopped_early and h.best_epoch < EARLY_KEEP and len(h.val_loss) >= 10 * EARLY_KEEP)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="veteran,pbc,whas500,GBSG2,actg,rott2", help="SurvSet names (default %(default)s)")
    ap.add_argument("--draws", type=int, default=10, help="draws (and CET seeds) per set (default %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    args = ap.parse_args(argv)
    rows, summary = [], []
    for name in args.datasets.split(","):
        parts, names, _ = load(name)
        plain, ruled, triggers, early = [], [], 0, 0
        for r in range(args.draws):
            part = draw_parts(parts, "full", r, 0, 0)
            Xs, ts, ss = part["val"]
            aft = score("LogNormalAFT", fit_lifelines(part, "aft", names)[0], part, 0.0)["harrell_c"]
            surv, _, model = fit_cet(part, seed=r)
            c = score("CET", surv, part, 0.0)["harrell_c"]
            row = {"dataset": name, "draw": r, "n_fit": len(part["train"][1]), "aft_c": round(aft, 4),
                   "cet_c": round(c, 4), "best_epoch": model.history_.best_epoch + 1,
                   "joint_epochs": len(model.history_.val_loss), "trigger": near_start(model),
                   "val_objective": round(float(model.score(Xs, ts[:, None], ss[:, None])), 5)}
            early += model.history_.best_epoch < EARLY_KEEP
            kept = c
            if row["trigger"]:
                triggers += 1
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    surv2, _, model2 = fit_cet(part, seed=r + RESTART_SEED)
                c2 = score("CET", surv2, part, 0.0)["harrell_c"]
                obj2 = float(model2.score(Xs, ts[:, None], ss[:, None]))
                row.update(restart_c=round(c2, 4), restart_val_objective=round(obj2, 5),
                           restart_best_epoch=model2.history_.best_epoch + 1,
                           restart_trigger=near_start(model2))
                kept = c2 if obj2 > row["val_objective"] else c
            row["kept_c"] = round(kept, 4)
            plain.append(c - aft)
            ruled.append(kept - aft)
            rows.append(row)
            print(f"{name:<9} draw {r}: CET - AFT {c - aft:+.4f}, best epoch {row['best_epoch']} of "
                  f"{row['joint_epochs']}" + (f"; restart {row['restart_c'] - aft:+.4f} (objective "
                                               f"{row['val_objective']:.4f} -> {row['restart_val_objective']:.4f}), kept "
                                               f"{kept - aft:+.4f}" if row["trigger"] else ""), flush=True)
        summary.append({"dataset": name, "draws": args.draws, "triggers": triggers, "early_best_epoch": int(early),
                        "cet_minus_aft_mean": round(float(np.mean(plain)), 4),
                        "with_restart_mean": round(float(np.mean(ruled)), 4)})
        print(f"{name:<9} CET - AFT {np.mean(plain):+.4f} default, {np.mean(ruled):+.4f} with the restart "
              f"({triggers} of {args.draws} fits restarted; {early} kept an epoch under {EARLY_KEEP})", flush=True)
    if args.out:
        write_record(args.out, "restart_probe.py", argv, "SurvSet", rows=rows, mean=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
