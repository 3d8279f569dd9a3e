"""Features in their own units: what the models' default scaling (``standardize="auto"``) does on real data. Validation split only.

    python benchmarks/raw_units_probe.py [--datasets veteran,pbc,...] [--seeds 3] \
        [--out benchmarks/results/raw_units_probe.json]

A user's table has age in years and lab values in their units; every build in this project
z-scores its features, so no table shows what a raw table does to the networks. For each
SurvSet data set of ``bench_survset.py`` (same split and preprocessing, but with
``load(name, scale=False)``: numeric columns in their own units, gaps filled with the training
median; factors one-hot) and each seed ``r``: the training split is cut 80 / 20 into fitting
and early-stopping rows (``survset_size_probe.draw_parts``, draw ``r``), and four fits of the
default CET (seed ``r``) are scored as the benchmark scores them (Harrell's C from the
restricted mean survival time) on the data set's validation split:

- ``z-scored``: the benchmark's features (numerics z-scored by the training statistics),
  ``standardize=False``: what every table in the docs fits;
- ``raw, auto``: the raw features, ``standardize="auto"`` (the default: the columns in raw
  units are scaled inside the model, 0/1 and unit-scale columns kept as given);
- ``raw, every column``: the raw features, ``standardize=True`` (every column scaled, the
  one-hot ones too);
- ``raw, as given``: the raw features, ``standardize=False`` (the models before the default);
- ``raw, non-binary`` (``--variants``, added 2026-11-26): every column that is neither 0/1 nor
  already standardised (|mean| <= 0.1 and |sd - 1| <= 0.1 on the fitting rows) z-scored by
  hand before a fit with ``standardize=False``: a count such as prior convictions (0-18, sd 2.9)
  is scaled, which the ``auto`` threshold of 3 leaves as given.

A fit whose training loss turns non-finite is counted as failed. The test split is not read.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_survset import DATASETS, fit_cet, load, score  # noqa: E402
from early_stopping_probe import write_record  # noqa: E402
from survset_size_probe import draw_parts  # noqa: E402

from cet_model.models import feature_scaling  # noqa: E402

VARIANTS = ("z-scored", "raw, auto", "raw, every column", "raw, as given", "raw, non-binary")


def non_binary_scaled(part: dict) -> dict:
    """``part`` with every column that is not 0/1 and not already standardised on the fitting
    rows (``train``) z-scored by their mean and standard deviation (the other splits too)."""
    x = part["train"][0]
    shift, scale = x.mean(0), x.std(0)
    binary = np.isin(x, (0.0, 1.0)).all(0)
    standard = (np.abs(shift) <= 0.1) & (np.abs(scale - 1.0) <= 0.1)
    keep = binary | standard | (scale == 0)
    shift, scale = np.where(keep, 0.0, shift), np.where(keep, 1.0, scale)
    return {k: ((X - shift) / scale, *rest) for k, (X, *rest) in part.items()}


def fit_and_score(part, seed: int, standardize) -> float | None:
    """Harrell's C on the scoring rows, or None when the fit diverged."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            surv = fit_cet(part, seed=seed, standardize=standardize)[0]
            return float(score("CET", surv, part, 0.0)["harrell_c"])
    except FloatingPointError:
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=",".join(DATASETS), help="SurvSet names (default %(default)s)")
    ap.add_argument("--seeds", type=int, default=3, help="draws and CET seeds per data set (default %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    ap.add_argument("--variants", default=";".join(VARIANTS[:4]), help="which fits, separated by ';' (default "
                                                                      "%(default)s; also 'raw, non-binary')")
    args = ap.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(";") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"--variants: unknown {unknown}; one of {VARIANTS}")
    rows, summary = [], []
    for name in args.datasets.split(","):
        scaled, names, _ = load(name)
        raw, _, _ = load(name, scale=False)
        x_raw = raw["train"][0]
        auto = feature_scaling(x_raw) is not None
        widest = float(np.abs(x_raw).max()) if x_raw.size else 0.0
        per = {v: [] for v in variants}
        for r in range(args.seeds):
            for variant, parts, standardize in (("z-scored", scaled, False), ("raw, auto", raw, "auto"),
                                                ("raw, every column", raw, True), ("raw, as given", raw, False),
                                                ("raw, non-binary", raw, False)):
                if variant not in variants:
                    continue
                part = draw_parts(parts, "full", r, 0, 0)
                c = fit_and_score(non_binary_scaled(part) if variant == "raw, non-binary" else part, r, standardize)
                per[variant].append(c)
                rows.append({"dataset": name, "seed": r, "variant": variant, "harrell_c": c})
        entry = {"dataset": name, "features": len(names), "auto_scales": auto, "largest_abs_raw_value": widest}
        for v in variants:
            ok = [c for c in per[v] if c is not None]
            entry[v] = {"mean_c": round(float(np.mean(ok)), 4) if ok else None, "failed": len(per[v]) - len(ok)}
        summary.append(entry)
        print(f"{name:<9} auto scales: {auto!s:<5} | " + " | ".join(
            f"{v}: {entry[v]['mean_c'] if entry[v]['mean_c'] is not None else 'n/a'}"
            + (f" ({entry[v]['failed']} failed)" if entry[v]["failed"] else "") for v in variants), flush=True)
    if args.out:
        write_record(args.out, "raw_units_probe.py", argv, "SurvSet", seeds=args.seeds, rows=rows, mean=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
