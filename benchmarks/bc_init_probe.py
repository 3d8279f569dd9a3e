"""Is the BC baseline held back by where its logits start? Validation split only.

    python benchmarks/bc_init_probe.py --data data/experiments/mimic-standin [--seeds 0,1]

Since 2026-11-24 CET starts each occurrence logit at the logit of the event's observed share in
the training data (``occurrence_init="observed"``). BC, a classifier of that same observed
indicator, started at PyTorch's default initialisation (p near 0.5) until this probe showed
that the start matters; it now starts where CET does. If BC's start mattered and differed, the
CET-vs-BC comparison would favour CET for a reason that is not the model. This fits BC as the
experiments do (``fit_preset("BC")``: automatic budget, early stopping on validation) with
``occurrence_init="uniform"`` (the former start) and ``"observed"`` (the default), per seed,
and prints the validation AUC against the true occurrence and ECE (means over tasks), epochs
and seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cet_model.atomic import write_text  # noqa: E402
from cet_model.dataset import load_dataset  # noqa: E402
from cet_model.evaluation import (  # noqa: E402
    evaluate,
    fit_preset,
    machine,
    model_inputs,
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="dataset folder")
    ap.add_argument("--seeds", default="0,1", help="comma-separated seeds (default %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    args = ap.parse_args(argv)
    ds = load_dataset(args.data)
    tr, va = ds.train, ds.val
    x_va = model_inputs(va)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        for start in ("uniform", "observed"):
            label = f"BC, occurrence_init={start!r}"
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = fit_preset("BC", tr, va, seed=seed, params={"occurrence_init": start})
            seconds = time.perf_counter() - t0
            res = evaluate("BC", model, va, ds.event_names, x_va, train=tr)
            auc = float(np.nanmean([r["auc"] for r in res.values()]))
            ece = float(np.nanmean([r["ece"] for r in res.values()]))
            row = {"seed": seed, "model": label, "val_auc": round(auc, 4), "val_ece": round(ece, 4),
                   "epochs": len(model.history_.train_loss), "seconds": round(seconds, 1)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        write_text(args.out, json.dumps({"data": args.data, "rows": rows, "machine": machine(),
                                        "command": "python benchmarks/bc_init_probe.py " + " ".join(
                                            argv if argv is not None else sys.argv[1:])}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
