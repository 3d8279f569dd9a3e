"""Cost of a single-event CET fit against an ET fit with the same layers, on real data.

    python benchmarks/bench_single_event_cost.py [--dataset support2] [--epochs 20]

SUPPORT (9,105 seriously ill hospitalised adults; SurvSet ``support2``), one event (death), the
preprocessing of ``bench_survset.py``. CET (the default objective: the exact marginal
likelihood) and ET are fitted for the same fixed number of epochs (no early stopping, same
batches), three times each, alternating; the figure is the ratio of median wall times. The
goal (model issue): CET at most 3x ET. For contrast, CET-paper (100 Gumbel samples, the
paper's estimator) is timed once.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_survset import load  # noqa: E402

from cet_model import CETModel, ETModel  # noqa: E402
from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import machine  # noqa: E402


def timed(make, X, t, s) -> float:
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make().fit(X, t[:, None], s[:, None])
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="support2")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "single_event_cost.json")
    args = ap.parse_args(argv)
    parts, _, facts = load(args.dataset)
    X, t, s = parts["train"]
    kw = dict(max_epochs=args.epochs, patience=args.epochs + 1, device="cpu", seed=0)
    cet, et = [], []
    for _ in range(3):
        cet.append(timed(lambda: CETModel(**kw), X, t, s))
        et.append(timed(lambda: ETModel(**kw), X, t, s))
    paper = timed(lambda: CETModel(objective="paper", lr=3e-4, **kw), X, t, s)
    out = {"command": "python benchmarks/bench_single_event_cost.py " + " ".join(argv or sys.argv[1:]),
           "dataset": args.dataset, "train_rows": len(X), "features": X.shape[1], "epochs": args.epochs,
           "cet_seconds": cet, "et_seconds": et, "cet_paper_gumbel100_seconds": paper,
           "ratio_cet_to_et": float(np.median(cet) / np.median(et)),
           "ratio_cet_paper_to_et": float(paper / np.median(et)), "goal": "ratio_cet_to_et <= 3",
           "machine": machine(), "facts": facts}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out, json.dumps(out, indent=2))
    print(f"{args.dataset}: {len(X)} training rows, {args.epochs} epochs. CET {np.median(cet):.2f} s, "
          f"ET {np.median(et):.2f} s: ratio {out['ratio_cet_to_et']:.2f} (goal <= 3). "
          f"CET-paper (Gumbel, 100 samples) {paper:.2f} s: {out['ratio_cet_paper_to_et']:.1f}x ET")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
