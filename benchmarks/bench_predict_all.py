"""Scoring many rows: ``CETModel.predict_all`` (one pass of the time head) against the separate
prediction calls (one pass each), in one run.

    python benchmarks/bench_predict_all.py [--rows 20000] [--events 10] [--rounds 3]

A default CET with MIMIC's shape (M = 10 events, 60 features, one hidden layer of 100; 2^9 patterns
per event > 100 draws: the Monte Carlo mixture) is fitted briefly on generated rows: a prediction's
cost does not depend on how well the model fits. Then ``--rows`` rows are scored as
``flows.predict`` scores them with ``--horizons`` and ``--rmst``: P(ever), the time quantiles 0.1,
0.5 and 0.9, the risk by two horizons, the restricted means by them, and the risk by the end of
each event's training follow-up (separately: one ``predict_survival`` call at every event's end;
``predict_all``: each event's curve at its own end, ``risk_by``). The separate calls and
``predict_all`` alternate for ``--rounds`` rounds; the best of each, their ratio, whether the
values are equal bit for bit, and the largest difference of the risk by the ends (the separate
call's curves are made non-increasing across all the ends: rounding). One CPU thread
(``--threads``). Writes ``benchmarks/results/predict_all.json``.

With ``--competing K`` the first K events compete (as a status column of several kinds codes them)
and each round also times ``predict_all`` with their crude risks by the horizons (``crude``, as
``flows.predict --horizons`` scores a version whose events compete): its best against the plain
``predict_all``'s.

    python benchmarks/bench_predict_all.py --events 2 --features 10 --competing 2 \
        --out benchmarks/results/predict_all_competing.json
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
RESULTS = Path(__file__).parent / "results"
QUANTILES, HORIZONS = (0.1, 0.5, 0.9), (1.0, 3.0)


def separate(model, x, ends):
    """The values the way one call per column group computes them; the risk by each event's end of
    follow-up from one ``predict_survival`` call at every end."""
    ends_grid = sorted(set(ends))
    at_ends = model.predict_survival(x, ends_grid)
    return {"occurrence": model.predict_occurrence(x), "time": {q: model.predict_time(x, q) for q in QUANTILES},
            "survival": model.predict_survival(x, HORIZONS), "rmst": {h: model.predict_rmst(x, h) for h in HORIZONS},
            "risk_by": np.stack([1.0 - at_ends[:, ends_grid.index(e), j] for j, e in enumerate(ends)], 1)}


def equal(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    return bool(np.array_equal(a, b))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--events", type=int, default=10)
    ap.add_argument("--features", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--competing", type=int, default=0, help="the first K events compete: also time their crude risks")
    ap.add_argument("--out", type=Path, default=RESULTS / "predict_all.json")
    args = ap.parse_args(argv)
    import torch

    from cet_model import CETModel
    from cet_model.host import machine

    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    n_fit, m, d = 2_000, args.events, args.features
    x_fit = rng.standard_normal((n_fit, d))
    t = rng.lognormal(0.0, 1.0, (n_fit, m))
    s = (rng.random((n_fit, m)) < 0.4).astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a budget of 3 epochs ends while the loss still improves
        model = CETModel(max_epochs=3, seed=0).fit(x_fit, t, s)
    x = rng.standard_normal((args.rows, d))
    ends = [float(v) for v in np.quantile(t, 0.9, axis=0)]  # one per event, as a version records them
    group = list(range(min(args.competing, m)))
    crude = {j: [k for k in group if k != j] for j in group} if len(group) > 1 else None
    times = {"separate": [], "predict_all": [], **({"predict_all_crude": []} if crude else {})}
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        a = separate(model, x, ends)
        times["separate"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        b = model.predict_all(x, QUANTILES, HORIZONS, HORIZONS, risk_by=ends)
        times["predict_all"].append(time.perf_counter() - t0)
        if crude:
            t0 = time.perf_counter()
            model.predict_all(x, QUANTILES, HORIZONS, HORIZONS, risk_by=ends, crude=crude)
            times["predict_all_crude"].append(time.perf_counter() - t0)
    best = {k: min(v) for k, v in times.items()}
    record = {"command": "python benchmarks/bench_predict_all.py " + " ".join(argv or sys.argv[1:]),
              "rows": args.rows, "events": m, "features": d, "hidden": 100, "draws": int(model.recipe_.n_samples),
              "threads": args.threads, "seconds": times, "best_s": best,
              "speedup": best["separate"] / best["predict_all"],
              "bitwise_equal": equal({k: v for k, v in a.items() if k != "risk_by"},
                                     {k: v for k, v in b.items() if k != "risk_by"}),
              "risk_by_max_abs_diff": float(np.abs(a["risk_by"] - b["risk_by"]).max()), "competing": len(group),
              "crude_over_plain": best["predict_all_crude"] / best["predict_all"] if crude else None,
              "machine": machine()}
    print(f"{args.rows} rows, {m} events, {args.threads} thread(s): separate calls {best['separate']:.2f} s, "
          f"predict_all {best['predict_all']:.2f} s ({record['speedup']:.2f}x); equal bit for bit: "
          f"{record['bitwise_equal']}; risk by the ends: largest difference {record['risk_by_max_abs_diff']:.1e}")
    if crude:
        print(f"with the crude risks of {len(group)} competing events: predict_all {best['predict_all_crude']:.2f} s "
              f"({record['crude_over_plain']:.2f}x the plain predict_all)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
