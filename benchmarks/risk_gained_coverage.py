"""How often does the Kaplan-Meier risk-gained interval cover the true gain?

For each case of tests/test_metrics.py's coverage test (the same cure-model samples,
``tests.test_metrics._cure_sample``, 1,000 per case, seed 0), prints the share of 95 % intervals
of :func:`cet_model.metrics.kaplan_meier_risk_gained` that cover the known gain, the mean number
of events between the two times, the ratio of the mean standard error (from the interval) to the
gains' spread over the samples, and the share a symmetric interval gain +- z sd (the same sd)
would cover. Writes benchmarks/results/risk_gained_coverage.txt.

    .venv/bin/python benchmarks/risk_gained_coverage.py
"""

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cet_model.atomic import write_text  # noqa: E402
from cet_model.metrics import kaplan_meier_risk_gained  # noqa: E402
from tests.test_metrics import _cure_sample  # noqa: E402

Z = 1.959964
CASES = [(500, 0.4, 0.2, 6.0, 8.0), (1000, 0.7, 0.1, 7.5, 10.0), (300, 0.6, 0.05, 7.0, 9.0)]  # the test's


def main() -> None:
    lines = ["n, cured, rate, start, end | covered (log scale, the function) | mean events | "
             "mean sd / spread of the gains | covered (symmetric)"]
    for n, cured, rate, start, end in CASES:
        rng = np.random.default_rng(0)
        truth = (1 - cured) * (np.exp(-rate * start) - np.exp(-rate * end))
        draws = [kaplan_meier_risk_gained(*_cure_sample(rng, n, cured, rate), start, end) for _ in range(1000)]
        covered = np.mean([r.low is not None and r.low <= truth <= r.high for r in draws])
        # the low end is never clipped: gain / low = exp(z sd / gain)
        sd = [r.gain * np.log(r.gain / r.low) / Z if r.low is not None else 0.0 for r in draws]
        symmetric = np.mean([abs(r.gain - truth) <= Z * s for r, s in zip(draws, sd, strict=True)])
        lines.append(f"{n}, {cured}, {rate}, {start}, {end} | {covered:.3f} | "
                     f"{np.mean([r.events for r in draws]):.1f} | "
                     f"{np.mean([s for r, s in zip(draws, sd, strict=True) if r.low is not None]) / np.std([r.gain for r in draws]):.2f} | "
                     f"{symmetric:.3f}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_text(ROOT / "benchmarks" / "results" / "risk_gained_coverage.txt", text)


if __name__ == "__main__":
    main()
