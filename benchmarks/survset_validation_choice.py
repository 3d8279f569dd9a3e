"""Would a validation choice between the linear CET and the default network help on small data?

    python benchmarks/survset_validation_choice.py [--datasets veteran,pbc,whas500,GBSG2,actg,rott2]
    python benchmarks/survset_validation_choice.py --alternative sigma-constant
    python benchmarks/survset_validation_choice.py --alternative observed-init

On the SurvSet data sets of ``bench_survset.py`` (same loading, split and scoring), fit the
default ``CETModel()`` and the linear one (``hidden_sizes=()``), both with early stopping on the
validation split, and report each one's validation log-likelihood (``score``, the objective per
row; higher is better) next to its test Harrell's C and the LogNormalAFT's. The rule under test
is the one a user could apply without the test split: keep whichever model has the higher
validation log-likelihood. Writes ``benchmarks/results/survset_validation_choice.json`` and
prints a markdown table; it answers why that rule is not the product default (docs/results.md,
"Real data").

``--alternative sigma-constant`` puts ``sigma="constant"`` (one log sigma per event, the classical
homoscedastic AFT and the stand-in generators' own form) in the linear model's place, writing
``survset_validation_choice_sigma-constant.{json,md}``: does real data's validation split back
the setting that helps on the MIMIC stand-in's? ``--alternative observed-init`` does the same for
``occurrence_init="observed"`` (the occurrence logit starts at the observed share).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_survset as bench  # noqa: E402

from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import machine  # noqa: E402

SMALL = ("veteran", "pbc", "whas500", "GBSG2", "actg", "rott2")
ALTERNATIVES = {"linear": {"hidden_sizes": ()}, "sigma-constant": {"sigma": "constant"},
                "observed-init": {"occurrence_init": "observed"}}


def run(name: str, alternative: str = "linear") -> dict:
    parts, names, facts = bench.load(name)
    Xv, tv, sv = parts["val"]
    row = {"dataset": name, "train_rows": facts["split_sizes"]["train"], "val_rows": facts["split_sizes"]["val"]}
    for label, kw in (("network", {}), (alternative, ALTERNATIVES[alternative])):
        surv, secs, model = bench.fit_cet(parts, **kw)
        scored = bench.score(label, surv, parts, secs)
        row[label] = {"val_loglik": float(model.score(Xv, tv[:, None], sv[:, None])),
                      "test_harrell_c": float(scored["harrell_c"])}
    surv, secs = bench.fit_lifelines(parts, "aft", names)
    aft = bench.score("LogNormalAFT", surv, parts, secs)
    row["aft_test_harrell_c"] = float(aft["harrell_c"])
    row["validation_picks"] = max(("network", alternative), key=lambda k: row[k]["val_loglik"])
    row["picked_minus_aft_c"] = row[row["validation_picks"]]["test_harrell_c"] - row["aft_test_harrell_c"]
    row["default_minus_aft_c"] = row["network"]["test_harrell_c"] - row["aft_test_harrell_c"]
    print(f"{name:<8} val loglik network {row['network']['val_loglik']:.4f} {alternative} "
          f"{row[alternative]['val_loglik']:.4f} -> {row['validation_picks']}; test C network "
          f"{row['network']['test_harrell_c']:.3f} {alternative} {row[alternative]['test_harrell_c']:.3f} "
          f"AFT {row['aft_test_harrell_c']:.3f}", flush=True)
    return row


def markdown(rows: list[dict], mach: dict, alternative: str = "linear") -> str:
    a = alternative
    lines = [f"| data set | train / val rows | val log-lik network | val log-lik {a} | validation picks | "
             f"test C network − AFT | test C {a} − AFT | picked − AFT |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        aft = r["aft_test_harrell_c"]
        lines.append(f"| {r['dataset']} | {r['train_rows']} / {r['val_rows']} | {r['network']['val_loglik']:.4f} | "
                     f"{r[a]['val_loglik']:.4f} | {r['validation_picks']} | "
                     f"{r['network']['test_harrell_c'] - aft:+.3f} | {r[a]['test_harrell_c'] - aft:+.3f} | "
                     f"{r['picked_minus_aft_c']:+.3f} |")
    lines += ["", f"Machine: {mach['processor']}, {mach['cpu_count']} cores, torch {mach['torch']}."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=",".join(SMALL), help="comma-separated SurvSet names")
    ap.add_argument("--alternative", choices=sorted(ALTERNATIVES), default="linear",
                    help="the setting compared with the default network")
    ap.add_argument("--out", type=Path, default=None,
                    help="default benchmarks/results/survset_validation_choice[_ALTERNATIVE].json")
    args = ap.parse_args(argv)
    suffix = "" if args.alternative == "linear" else f"_{args.alternative}"
    args.out = args.out or ROOT / "benchmarks" / "results" / f"survset_validation_choice{suffix}.json"
    rows = [run(n.strip(), args.alternative) for n in args.datasets.split(",") if n.strip()]
    mach = machine()
    out = {"command": "python benchmarks/survset_validation_choice.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "machine": mach, "alternative": args.alternative, "rows": rows,
           "worst_picked_minus_aft_c": min(r["picked_minus_aft_c"] for r in rows),
           "worst_default_minus_aft_c": min(r["default_minus_aft_c"] for r in rows)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out, json.dumps(out, indent=2))
    write_text(args.out.with_suffix(".md"), markdown(rows, mach, args.alternative))
    print(markdown(rows, mach, args.alternative))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
