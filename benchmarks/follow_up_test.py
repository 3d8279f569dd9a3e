"""Two tests of sufficient follow-up, Maller and Zhou's and Yuen and Musta's: how often they
reject, and what they say on real data.

    python benchmarks/follow_up_test.py [--reps 1000] [--sizes 200,1000,5000] [--datasets veteran,...]
                                        [--out benchmarks/results/follow_up_test.json]

``cet_model.metrics.maller_zhou_test`` tests H0 "the times of those who will have the event reach
past the longest follow-up" (insufficient follow-up) against "they end before it".
``cet_model.metrics.yuen_musta_test`` tests H0 "a share ``EPS`` or more of them have it after the
end" (practically insufficient) against "less than that", assuming no event after ``TAU`` and a
density that does not increase after the end. This measures, first, how often each rejects its H0
at 5 % on simulated cure-model samples where the answer is known:
a share ``P_EVER`` of the rows will have the event at a time drawn from the scenario's distribution,
and each row is censored by one of two designs: ``staggered``, at a time uniform on (0, 10)
(entry spread over the study, one study end at 10), or ``one end``, at 10 (everyone entered at
the start) unless lost to follow-up first (a fifth of the rows, at a time uniform on (0, 10)).
Each scenario says whether H0 holds:

- ``uniform(0, 5)``, ``uniform(0, 9)``: every event by 5 (or 9) < 10: sufficient (H0 false; the
  rejection rate is the power);
- ``uniform(0, 15)``: a third of the events would come after 10: insufficient (H0 true; the rate
  should be at most 5 %);
- ``log-normal(4, 0.8)``: median 4, 13 % of the events after 10: H0 true, and practically
  insufficient too;
- ``exponential(1)``: H0 true in the formal sense (the support has no end), but 0.005 % of the
  events come after 10: practically sufficient, Yuen and Musta's (arXiv:2403.16832) case against the
  formal hypothesis (their H0 false);
- ``98 % uniform(0, 5) + 2 % uniform(0, 20)``: exactly 1 % of the events after 10, spread evenly to
  20, so the density at the end is exactly Yuen and Musta's threshold: the least favourable case of
  their H0 (true), where their test's rejection rate is its level.

Second, on the real data sets of ``benchmarks/bench_survset.py`` (their training rows, the split
of ``bench_survset.load``): each test's p-value (and Maller and Zhou's window) beside the Kaplan-Meier risk gained over
the follow-up's last quarter (``cet_model.evaluation.risk_gained_last_quarter``, what the report
shows). No model is fitted. Seconds are wall-clock on this machine.
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

from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import RISING_SHARE, followed_until, machine, risk_gained_last_quarter  # noqa: E402
from cet_model.metrics import kaplan_meier_risk, maller_zhou_test, yuen_musta_test  # noqa: E402

P_EVER = 0.6  # the share that will ever have the event
STUDY_END = 10.0  # no row is followed past it
LOST = 0.2  # the "one end" design: the share lost to follow-up before STUDY_END
DESIGNS = ("staggered", "one end")
LEVEL = 0.05
EPS = 0.01  # Yuen and Musta's share allowed after the end (their default)
TAU_FACTOR = 2.0  # their tau, no event after it: twice the end of follow-up (the simulation's 20)


def _boundary(rng, n):
    """98 % uniform(0, 5), 2 % uniform(0, 20): 1 % of the events after 10, the density flat at
    0.02 / 20 from 5 to 20 (Yuen and Musta's threshold at eps = 1 %, tau = 20)."""
    return np.where(rng.random(n) < 0.98, rng.uniform(0.0, 5.0, n), rng.uniform(0.0, 20.0, n))


SCENARIOS = {  # name: (draw of the event times, H0 (insufficient follow-up) true, share of events after STUDY_END)
    "uniform(0, 5)": (lambda rng, n: rng.uniform(0.0, 5.0, n), False, 0.0),
    "uniform(0, 9)": (lambda rng, n: rng.uniform(0.0, 9.0, n), False, 0.0),
    "uniform(0, 15)": (lambda rng, n: rng.uniform(0.0, 15.0, n), True, 1.0 / 3.0),
    "log-normal(4, 0.8)": (lambda rng, n: rng.lognormal(np.log(4.0), 0.8, n), True, None),
    "exponential(1)": (lambda rng, n: rng.exponential(1.0, n), True, float(np.exp(-STUDY_END))),
    "98 % uniform(0, 5) + 2 % uniform(0, 20)": (_boundary, True, 0.01),
}


def share_after(name: str) -> float:
    """The share of the scenario's event times after ``STUDY_END``."""
    from scipy.stats import norm

    share = SCENARIOS[name][2]
    return float(norm.sf(np.log(STUDY_END / 4.0) / 0.8)) if share is None else share


def sample(
    name: str, design: str, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """One cure-model sample of ``n`` rows, censored by ``design`` (one of ``DESIGNS``): (times, observed)."""
    will = rng.random(n) < P_EVER
    event_time = np.where(will, SCENARIOS[name][0](rng, n), np.inf)
    censor = rng.uniform(0.0, STUDY_END, n)
    if design == "one end":
        censor = np.where(rng.random(n) < LOST, censor, STUDY_END)
    return np.minimum(event_time, censor), (event_time <= censor).astype(float)


def rejection_rates(n: int, reps: int, seed: int) -> list[dict]:
    """Per censoring design and scenario, over ``reps`` samples of ``n`` rows: the share with
    p < ``LEVEL``, the mean events in the test's window and the mean events in the sample."""
    out = []
    for d, design in enumerate(DESIGNS):
        for k, name in enumerate(SCENARIOS):
            rng = np.random.default_rng([seed, n, d, k])
            tests, events, ym, ym_count = [], [], [], []
            for _ in range(reps):
                t, s = sample(name, design, n, rng)
                tests.append(maller_zhou_test(t, s))
                ym.append(yuen_musta_test(t, s, tau=TAU_FACTOR * STUDY_END, eps=EPS))  # end: the largest time
                ym_count.append(yuen_musta_test(t, s, tau=TAU_FACTOR * STUDY_END, eps=EPS, empty="count"))
                events.append(s.sum())
            out.append(
                {
                    "design": design,
                    "scenario": name,
                    "n": n,
                    "reps": reps,
                    "h0_true": SCENARIOS[name][1],
                    "share_after_end": share_after(name),
                    "rejected": float(np.mean([r.p_value < LEVEL for r in tests])),
                    "mean_window_events": float(np.mean([r.events for r in tests])),
                    "mean_events": float(np.mean(events)),
                    "ym_h0_true": share_after(name) >= EPS,
                    "ym_rejected": float(np.mean([r.p_value < LEVEL for r in ym])),
                    "ym_no_event_after": float(np.mean([r.events_after == 0 for r in ym])),
                    "ym_mean_followed": float(np.mean([r.followed for r in ym])),
                    "ym_count_rejected": float(np.mean([r.p_value < LEVEL for r in ym_count])),
                }
            )
    return out


def real(name: str) -> dict:
    """One real data set's training rows: the test beside the last quarter's Kaplan-Meier gain."""
    from bench_survset import load

    parts, _, facts = load(name)
    _, t, s = parts["train"]
    test = maller_zhou_test(t, s)
    ym = yuen_musta_test(t, s, tau=TAU_FACTOR * float(np.max(t)), eps=EPS)
    until = followed_until(t)
    quarter = risk_gained_last_quarter(t, s, until)
    by_end = kaplan_meier_risk(t, s, horizon=until)
    return {
        "dataset": name,
        "rows": int(len(t)),
        "events": int(s.sum()),
        "p_value": test.p_value,
        "window_events": test.events,
        "last_event": test.last_event,
        "last_time": test.last_time,
        "followed_until": until,
        "km_by_follow_up": by_end,
        "km_last_quarter": quarter.gain,
        "km_last_quarter_events": quarter.events,
        "named_rising": bool(by_end > 0 and quarter.gain >= RISING_SHARE * by_end),
        "ym_p_value": ym.p_value,
        "ym_density": ym.density,
        "ym_threshold": ym.threshold,
        "ym_tau": ym.tau,
    }


def markdown(rates: list[dict], rows: list[dict], mach: dict) -> str:
    sizes = sorted({r["n"] for r in rates})
    head = (
        "| censoring | event times | events after the end | Maller–Zhou H0 (insufficient) | "
        + " | ".join(f"Maller–Zhou rejected at 5 %, n = {n:,} (events in the window)" for n in sizes)
        + f" | Yuen–Musta H0 (≥ {100 * EPS:g} % after the end) | "
        + " | ".join(f"Yuen–Musta rejected at 5 %, n = {n:,} (no event after the estimate's point)" for n in sizes)
        + " | "
        + " | ".join(f"with `empty=\"count\"`, n = {n:,}" for n in sizes)
        + " |\n"
        + "|---" * (5 + 3 * len(sizes))
        + "|"
    )
    lines = []
    for design in DESIGNS:
        for name in SCENARIOS:
            cells = {r["n"]: r for r in rates if r["scenario"] == name and r["design"] == design}
            first = next(iter(cells.values()))
            lines.append(
                f"| {design} | {name} | {100 * first['share_after_end']:.3g} % | "
                f"{'true' if first['h0_true'] else 'false'} | "
                + " | ".join(
                    f"{100 * cells[n]['rejected']:.1f} % ({cells[n]['mean_window_events']:.1f})"
                    for n in sizes
                )
                + f" | {'true' if first['ym_h0_true'] else 'false'} | "
                + " | ".join(f"{100 * cells[n]['ym_rejected']:.1f} % ({100 * cells[n]['ym_no_event_after']:.0f} %)"
                             for n in sizes)
                + " | "
                + " | ".join(f"{100 * cells[n]['ym_count_rejected']:.1f} %" for n in sizes)
                + " |"
            )
    parts = [head, *lines]
    if rows:
        parts += [
            "",
            "| data set | training rows | events | Maller–Zhou p | events in the window (2t* − t, t*] | "
            "last event / last time | Kaplan-Meier by the follow-up's end | of which in its last quarter (events) | "
            f"Yuen–Musta p (tau = {TAU_FACTOR:g} × last time) | its density estimate / threshold |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        parts += [
            f"| {r['dataset']} | {r['rows']:,} | {r['events']:,} | {r['p_value']:.2g} | {r['window_events']} | "
            f"{r['last_event']:.4g} / {r['last_time']:.4g} | {r['km_by_follow_up']:.3f} | "
            f"+{r['km_last_quarter']:.3f} ({r['km_last_quarter_events']}){' (named)' if r['named_rising'] else ''} | "
            f"{r['ym_p_value']:.2g} | {r['ym_density']:.3g} / {r['ym_threshold']:.3g} |"
            for r in rows
        ]
    parts += ["", f"machine: {mach['processor']}, {mach['cpu_count']} CPUs"]
    return "\n".join(parts)


def _sizes(text: str) -> list[int]:
    """``--sizes``: comma-separated sample sizes, each at least 2."""
    try:
        sizes = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--sizes must be comma-separated whole numbers, got {text!r}"
        ) from None
    if not sizes or min(sizes) < 2:
        raise argparse.ArgumentTypeError(
            f"--sizes must name sample sizes of at least 2, got {text!r}"
        )
    return sizes


def main(argv=None) -> int:
    from bench_survset import DATASETS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000, help="samples per scenario and size")
    ap.add_argument(
        "--sizes", type=_sizes, default=[200, 1000, 5000], help="comma-separated sample sizes"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--datasets",
        default=",".join((*DATASETS, "lifelines:rossi")),
        help="comma-separated SurvSet names (or lifelines:rossi); '' for none",
    )
    ap.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "results" / "follow_up_test.json"
    )
    args = ap.parse_args(argv)
    if args.reps < 1:
        ap.error(f"--reps must be at least 1, got {args.reps}")
    t0 = time.perf_counter()
    rates = [r for n in args.sizes for r in rejection_rates(n, args.reps, args.seed)]
    rows = [real(name) for name in filter(None, (n.strip() for n in args.datasets.split(",")))]
    mach = machine()
    out = {
        "command": "python benchmarks/follow_up_test.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": mach,
        "p_ever": P_EVER,
        "study_end": STUDY_END,
        "level": LEVEL,
        "yuen_musta": {"eps": EPS, "tau": f"{TAU_FACTOR:g} x the end of follow-up"},
        "seconds": time.perf_counter() - t0,
        "rejection": rates,
        "real": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text(args.out, json.dumps(out, indent=2))
    write_text(args.out.with_suffix(".md"), markdown(rates, rows, mach))
    print(markdown(rates, rows, mach))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
