"""Does averaging several default CET fits close the SurvSet gap? (A probe; nothing in the product uses it.)

    python benchmarks/survset_ensemble_probe.py [--datasets whas500,veteran,pbc,GBSG2] [--seeds 10] [--size 5]

For each data set, on ``bench_survset.py``'s split and preprocessing: ``--seeds`` default CET fits
(seeds 0..N-1), each scored alone, and ensembles of ``--size`` consecutive seeds (0-4, 5-9, ...)
scored by the mean of their survival curves, against lifelines' LogNormalAFT; Harrell's C of the
restricted mean survival time, as the benchmark ranks. The validation split is reported first: a
rule would be decided on it (the test split is shown, not used to decide). Writes
``benchmarks/results/survset_ensemble_probe.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_survset import fit_cet, fit_lifelines, load, score  # noqa: E402

from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import machine  # noqa: E402


def probe(name: str, seeds: int, size: int) -> dict:
    parts, names, _ = load(name)
    on = {split: dict(parts, test=parts[split]) for split in ("val", "test")}  # score() scores "test"
    fits = [fit_cet(parts, seed=seed)[0] for seed in range(seeds)]
    aft, _ = fit_lifelines(parts, "aft", names)
    out = {"dataset": name}
    for split, p in on.items():
        single = [score("CET", f, p, 0)["harrell_c"] for f in fits]
        groups = [fits[k:k + size] for k in range(0, seeds - size + 1, size)]
        ensembles = [score("CET-ensemble", lambda x, g, fs=fs: np.mean([f(x, g) for f in fs], axis=0), p, 0)["harrell_c"]
                     for fs in groups]
        aft_c = score("LogNormalAFT", aft, p, 0)["harrell_c"]
        out[split] = {"single_mean": float(np.mean(single)), "ensembles": [float(c) for c in ensembles],
                      "ensemble_mean": float(np.mean(ensembles)), "aft": float(aft_c),
                      "single_minus_aft": float(np.mean(single) - aft_c),
                      "ensemble_minus_aft": float(np.mean(ensembles) - aft_c)}
        print(f"{name:9s} {split:4s} single {np.mean(single):.3f}  ensemble of {size} {np.mean(ensembles):.3f} "
              f"({', '.join(f'{c:.3f}' for c in ensembles)})  AFT {aft_c:.3f}", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="whas500,veteran,pbc,GBSG2")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--size", type=int, default=5, help="fits per ensemble (default %(default)s)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "survset_ensemble_probe.json")
    args = ap.parse_args(argv)
    if args.size > args.seeds:
        ap.error(f"--size {args.size} is more than --seeds {args.seeds}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = [probe(name, args.seeds, args.size) for name in args.datasets.split(",")]
    res = {"command": "python benchmarks/survset_ensemble_probe.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "machine": machine(), "results": results}
    write_text(args.out, json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
