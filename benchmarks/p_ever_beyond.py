"""How much of CET's P(ever) lies past the follow-up on real survival data (SurvSet, lifelines).

    python benchmarks/p_ever_beyond.py [--datasets veteran,pbc,...] [--seed 0] [--out benchmarks/results/p_ever_beyond.json]

Nobody in a cohort is followed past its longest follow-up, so the share of P(ever) that a cure
model places after it comes from the fitted log-normal tail, not from data
(``cet_model.evaluation.occurrence_beyond_follow_up``; ``flows.train evaluate`` names an event
where it is 20 % or more). This measures that share on the real data sets of
``benchmarks/bench_survset.py``, with the same split and preprocessing (``bench_survset.load``)
and the default ``CETModel()`` (M = 1, one seed): per data set, the end of the training follow-up
(``followed_until``: the last time at least 10 training rows were still followed; past it a
Kaplan-Meier curve rests on fewer, at the very end on one), the test rows' mean P(ever) and risk by
that time, the Kaplan-Meier risk by it of the training and of the test rows (what the data say
there) and the part of the training rows' gained over the follow-up's last quarter, with its 95 %
interval and the events in it (still rising at the end, "named" as ``flows.train evaluate`` names
it: the data do not show how many ever will), the share of P(ever) after it, and, for comparison, the mean risk by that time of
lifelines' LogNormalAFT and CoxPH fits (``bench_survset.fit_lifelines``) on the same test rows.
Seconds are wall-clock on this machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402
from bench_survset import DATASETS, fit_cet, fit_lifelines, load  # noqa: E402

from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import (  # noqa: E402
    BEYOND_SHARE,
    RISING_SHARE,
    followed_until,
    machine,
    occurrence_beyond_follow_up,
    risk_gained_last_quarter,
)
from cet_model.metrics import kaplan_meier_risk  # noqa: E402
from flows.lib.modeling.train_eval import quarter_text  # noqa: E402


def measure(name: str, seed: int = 0) -> dict:
    """One data set: the default CET fitted on its training rows, its P(ever) on the test rows
    against the end of the training follow-up (the last time 10 training rows were still followed)."""
    parts, names, facts = load(name)
    t0 = time.perf_counter()
    _, _, model = fit_cet(parts, seed=seed)
    seconds = time.perf_counter() - t0
    _, t_tr, s_tr = parts["train"]
    x_te, t_te, s_te = parts["test"]
    until = followed_until(t_tr)
    record = occurrence_beyond_follow_up(model, x_te, {"event": until}, ["event"])["event"]
    classical = {f"{kind}_by_follow_up": float(1.0 - fit_lifelines(parts, kind, names)[0](x_te, np.array([until]))[:, 0].mean())
                 for kind in ("aft", "cox")}  # the linear log-normal AFT and Cox's risk by the same time, same rows
    quarter = risk_gained_last_quarter(t_tr, s_tr, until)  # with its 95 % interval and the events in it
    return {"dataset": name, **facts, **record, "longest": float(t_tr.max()),
            "km_by_follow_up": kaplan_meier_risk(t_tr, s_tr, horizon=until),
            "km_last_quarter": quarter.gain, "km_last_quarter_ci": [quarter.low, quarter.high],
            "km_last_quarter_events": quarter.events,
            "km_test_by_follow_up": kaplan_meier_risk(t_te, s_te, horizon=until),
            "km_by_longest": kaplan_meier_risk(t_tr, s_tr), **classical, "fit_seconds": seconds}


def markdown(rows: list[dict], mach: dict) -> str:
    head = ("| data set | rows | events | follow-up's end | P(ever) | after it | risk by it | Kaplan-Meier by it, "
            "training / test rows | of which in its last quarter (training; 95 % interval, events) | LogNormalAFT's risk by it | "
            "Cox's |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [f"| {r['dataset']} | {r['n']:,} | {r['events']:,} | {r['follow_up']:.4g} | {r['p_ever']:.3f} | "
             f"{100 * r['share_beyond']:.0f} %{' (named)' if r['share_beyond'] >= BEYOND_SHARE else ''} | "
             f"{r['by_follow_up']:.3f} | {r['km_by_follow_up']:.3f} / {r['km_test_by_follow_up']:.3f} | "
             f"{quarter_text(r)}{' (named)' if r['km_last_quarter'] >= RISING_SHARE * r['km_by_follow_up'] else ''} | "
             f"{r['aft_by_follow_up']:.3f} | {r['cox_by_follow_up']:.3f} |" for r in rows]
    return "\n".join([head, *lines, "", f"machine: {mach['processor']}, {mach['cpu_count']} CPUs, torch {mach['torch']}"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=",".join((*DATASETS, "lifelines:rossi")),
                    help="comma-separated SurvSet names (or lifelines:rossi)")
    ap.add_argument("--seed", type=int, default=0, help="CET's seed")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "p_ever_beyond.json")
    args = ap.parse_args(argv)
    rows = []
    for name in filter(None, (n.strip() for n in args.datasets.split(","))):
        rows.append(measure(name, args.seed))
        r = rows[-1]
        print(f"{name}: P(ever) {r['p_ever']:.3f}, by {r['follow_up']:.4g} {r['by_follow_up']:.3f} (Kaplan-Meier "
              f"{r['km_by_follow_up']:.3f}): {100 * r['share_beyond']:.0f} % after; fit {r['fit_seconds']:.1f} s",
              flush=True)
    mach = machine()
    out = {"command": "python benchmarks/p_ever_beyond.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "machine": mach, "results": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out, json.dumps(out, indent=2))
    write_text(args.out.with_suffix(".md"), markdown(rows, mach))
    print(markdown(rows, mach))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
