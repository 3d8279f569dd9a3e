"""Does the default CET trail the linear AFT on any real data set cut to whas500's size? Validation split only.

    python benchmarks/survset_size_probe.py [--datasets actg,rott2,flchain,support2] [--draws 10] \
        [--n-train 276 --n-stop 92] [--sizes small,full] [--model ET] [--cet "dict(hidden_sizes=())"] \
        [--out benchmarks/results/survset_size_probe.json]

The SurvSet benchmark (``bench_survset.py``) misses its goal on one set only: on whas500 (276
training rows) the default CET's Harrell's C is 0.012 below lifelines' LogNormalAFT, while on the
four sets with 690 to 5,462 training rows it is level with it or above. Is that whas500, or is it
any data set at 276 rows? For each of those four sets (same loading and preprocessing as
``bench_survset.py``) and each draw ``r``:

- ``small``: ``--n-train`` rows for fitting and ``--n-stop`` other rows for CET's early stopping,
  both drawn at random from the training split (whas500's 276 and 92 by default);
- ``full``: the whole training split, 80 % for fitting and 20 % for early stopping (a random
  partition per draw).

At each size the default CET (seed ``r``; ``--cet`` changes its settings, ``--model ET`` fits
ET instead: the same time head without the occurrence head) and the AFT are fitted on the same rows (the AFT does
not use the early-stopping rows) and scored, as the benchmark scores them, on the data set's
validation split: Harrell's C from the restricted mean survival time (each row of the record also
keeps Uno's C and the integrated Brier score). The test split is not read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_survset import fit_cet, fit_lifelines, load, score  # noqa: E402
from early_stopping_probe import write_record  # noqa: E402
from validation_probe import parse  # noqa: E402

from cet_model.models import CETModel, ETModel  # noqa: E402

SIZES = ("small", "full")


def draw_parts(parts: dict, size: str, r: int, n_train: int, n_stop: int) -> dict:
    """Fitting rows, early-stopping rows and scoring rows (the validation split) for one draw.

    >>> x = np.arange(10.0)[:, None]; t = s = np.ones(10)
    >>> p = draw_parts({"train": (x, t, s), "val": (x[:2], t[:2], s[:2])}, "small", 0, 3, 2)
    >>> [len(p[k][0]) for k in ("train", "val", "test")], set(p["train"][0][:, 0]) & set(p["val"][0][:, 0])
    ([3, 2, 2], set())
    """
    X, t, s = parts["train"]
    order = np.random.default_rng([r, 276]).permutation(len(t))
    if size == "small":
        if n_train + n_stop > len(t):
            raise ValueError(f"{n_train} + {n_stop} rows asked of a training split of {len(t)}")
        fit, stop = order[:n_train], order[n_train:n_train + n_stop]
    else:
        cut = int(0.8 * len(t))
        fit, stop = order[:cut], order[cut:]
    return {"train": (X[fit], t[fit], s[fit]), "val": (X[stop], t[stop], s[stop]), "test": parts["val"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="actg,rott2,flchain,support2", help="SurvSet names (default %(default)s)")
    ap.add_argument("--draws", type=int, default=10, help="draws (and CET seeds) per size (default %(default)s)")
    ap.add_argument("--n-train", type=int, default=276, help="fitting rows of the small size (default %(default)s)")
    ap.add_argument("--n-stop", type=int, default=92, help="early-stopping rows of the small size (default %(default)s)")
    ap.add_argument("--sizes", default="small,full", help="which sizes (default %(default)s)")
    ap.add_argument("--model", choices=("CET", "ET"), default="CET", help="the network fitted (default %(default)s)")
    ap.add_argument("--cet", default="dict()", help="CETModel settings, e.g. 'dict(hidden_sizes=())' (default: none)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    args = ap.parse_args(argv)
    sizes = args.sizes.split(",")
    if not set(sizes) <= set(SIZES):
        ap.error(f"--sizes must be among {','.join(SIZES)}, got {args.sizes}")
    cet_settings = parse(args.cet)
    model_class = {"CET": CETModel, "ET": ETModel}[args.model]
    rows, summary = [], []
    for name in args.datasets.split(","):
        parts, names, facts = load(name)
        for size in sizes:
            diffs = []
            for r in range(args.draws):
                part = draw_parts(parts, size, r, args.n_train, args.n_stop)
                cet_scores = score("CET", fit_cet(part, model_class, seed=r, **cet_settings)[0], part, 0.0)
                aft_scores = score("LogNormalAFT", fit_lifelines(part, "aft", names)[0], part, 0.0)
                cet, aft = cet_scores["harrell_c"], aft_scores["harrell_c"]
                diffs.append(cet - aft)
                rows.append({"dataset": name, "size": size, "draw": r, "n_fit": len(part["train"][1]),
                             "cet_c": round(cet, 4), "aft_c": round(aft, 4),
                             "cet_uno_c": round(cet_scores["uno_c"], 4), "aft_uno_c": round(aft_scores["uno_c"], 4),
                             "cet_ibs": round(cet_scores["ibs"], 4), "aft_ibs": round(aft_scores["ibs"], 4)})
            d = np.array(diffs)
            summary.append({"dataset": name, "size": size, "n_fit": len(part["train"][1]),
                            "cet_minus_aft_mean": round(float(d.mean()), 4),
                            "cet_minus_aft_sd": round(float(d.std(ddof=1)), 4) if d.size > 1 else 0.0,
                            "draws_below_aft_by_more_than_0.005": int((d < -0.005).sum())})
            print(f"{name:<9} {size:<5} ({len(part['train'][1]):>5} fitting rows): {args.model} - AFT {d.mean():+.4f} "
                  f"(sd {summary[-1]['cet_minus_aft_sd']:.4f}; {summary[-1]['draws_below_aft_by_more_than_0.005']} "
                  f"of {d.size} draws below by more than 0.005)", flush=True)
    if args.out:
        write_record(args.out, "survset_size_probe.py", argv, "SurvSet", model=args.model, cet_settings=cet_settings, rows=rows,
                     mean=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
