"""Does CET's share of the BC-to-oracle gap grow with the training set? Validation split only.

    python benchmarks/size_probe.py --data data/experiments/mimic-standin-0.6 [--fractions 0.25,0.5,1] \
        [--seeds 0,1,2] [--out benchmarks/results/size_probe_mimic.json]

The model issue asks the default CET to close half of the gap between the better baseline (BC)
and the oracle (BC's network trained on the true occurrence) on stand-ins with at least 5,000
training rows. Censoring hides which censored cells will ever have their event; the marginal
likelihood recovers that from the timing, which it has to learn from the same rows, while the
oracle is told. If what keeps CET short is finite data, its share of the gap should grow with
the training set; if it is the censoring itself (what no amount of rows can reveal), it should not.

Per seed this draws one random order of the training rows, and for each fraction ``f`` fits BC,
the Oracle and the default CET (``PRESETS``, automatic budget) on the first ``f`` of them: the
smaller sets are nested in the larger ones. All are stopped early on, and scored on, the whole
validation split (AUC of P(ever) against the true occurrence, mean over events). The test split
is not read.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from early_stopping_probe import gap_share, validation_inputs, write_record  # noqa: E402

from cet_model.dataset import Split  # noqa: E402
from cet_model.evaluation import evaluate, fit_preset, model_inputs  # noqa: E402


def first_rows(split: Split, order: np.ndarray, fraction: float) -> Split:
    """The rows ``order[:round(fraction * n)]`` of ``split`` (at least one), in file order, as a new Split.

    >>> s = Split(np.arange(4), np.zeros((4, 1)), *(np.ones((4, 2)) for _ in range(4)))
    >>> first_rows(s, np.array([3, 1, 0, 2]), 0.5).ids
    array([1, 3])
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction {fraction} is not in (0, 1]")
    return split.take(np.sort(order[:max(1, round(fraction * len(split)))]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="dataset folder (with the truth recorded)")
    ap.add_argument("--fractions", default="0.25,0.5,1", help="training fractions (default %(default)s)")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    args = ap.parse_args(argv)
    fractions = [float(f) for f in args.fractions.split(",")]
    if not all(0 < f <= 1 for f in fractions):
        ap.error(f"--fractions must lie in (0, 1], got {args.fractions}")
    ds, tr, va, _, x_va = validation_inputs(args.data)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        order = np.random.default_rng([seed, 2026]).permutation(len(tr))
        for fraction in fractions:
            sub = first_rows(tr, order, fraction)
            x_sub = model_inputs(sub)
            auc, seconds = {}, {}
            for name in ("BC", "Oracle", "CET"):
                t0 = time.perf_counter()
                model = fit_preset(name, sub, va, seed=seed, x_train=x_sub, x_val=x_va)
                seconds[name] = round(time.perf_counter() - t0, 1)
                scores = evaluate(name, model, va, ds.event_names, x_va).values()
                auc[name] = float(np.nanmean([r["auc"] for r in scores]))
            share = gap_share(auc["CET"], auc["BC"], auc["Oracle"])
            rows.append({"seed": seed, "fraction": fraction, "n_train": len(sub),
                         **{f"val_auc_{k.lower()}": round(v, 4) for k, v in auc.items()},
                         "gap_share": round(share, 3), "seconds": seconds})
            print(f"seed {seed}, {len(sub):>6,} training rows: BC {auc['BC']:.4f}, oracle {auc['Oracle']:.4f}, "
                  f"CET {auc['CET']:.4f} ({share:.0%} of the gap); CET fit {seconds['CET']:.0f}s", flush=True)
    summary = []
    for fraction in fractions:
        sel = [r for r in rows if r["fraction"] == fraction]
        mean = {k: round(float(np.mean([r[k] for r in sel])), 4)
                for k in ("n_train", "val_auc_bc", "val_auc_oracle", "val_auc_cet", "gap_share")}
        summary.append({"fraction": fraction, **mean})
        print(f"fraction {fraction:g} ({mean['n_train']:,.0f} rows): BC {mean['val_auc_bc']:.4f}, "
              f"oracle {mean['val_auc_oracle']:.4f}, CET {mean['val_auc_cet']:.4f}, "
              f"gap share {mean['gap_share']:.3f}", flush=True)
    if args.out:
        write_record(args.out, "size_probe.py", argv, args.data, rows=rows, mean=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
