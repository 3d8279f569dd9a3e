"""Does tests/test_importance.py's planted-driver test need the default training budget?

Fits its planted data (tests/test_importance.py::_planted) once with the default budget and
once with 150 epochs, and prints, for each, the fit's seconds and every figure the test checks
(AUC drop of event 0 per input, C (RMST) and C (timing) drops of event 1, event 1's largest AUC
drop). Writes benchmarks/results/short_fit_importance.txt.

    .venv/bin/python benchmarks/short_fit_importance.py
"""

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cet_model import CETModel  # noqa: E402
from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import rmst_horizons  # noqa: E402
from cet_model.importance import feature_groups, permutation_importance  # noqa: E402
from tests.test_importance import _planted  # noqa: E402


def main() -> None:
    train, val = _planted(1500, 0), _planted(600, 1)
    lines = []
    for label, kw in (("default budget", {}), ("max_epochs=150", {"max_epochs": 150})):
        t0 = time.perf_counter()
        model = CETModel(hidden_sizes=(16,), seed=0, **kw).fit(train.X, train.T, train.S, val.X, val.T, val.S)
        seconds = time.perf_counter() - t0
        out = permutation_importance("CET", model, val, feature_groups([f"x{i}" for i in range(5)]), repeats=3,
                                     rmst_at=rmst_horizons(train))
        g = {x["name"]: x for x in out["groups"]}
        lines.append(
            f"{label}: fit {seconds:.1f} s; event 0 AUC drop "
            + " ".join(f"{k} {v['auc']['mean'][0]:+.3f}" for k, v in g.items())
            + "; event 1 C (RMST) drop " + " ".join(f"{k} {v['ci_rmst']['mean'][1]:+.3f}" for k, v in g.items())
            + "; event 1 C (timing) drop " + " ".join(f"{k} {v['ci_timing']['mean'][1]:+.3f}" for k, v in g.items())
            + f"; event 1 largest |AUC drop| {max(abs(v['auc']['mean'][1]) for v in g.values()):.3f}")
    text = "\n".join(lines) + "\n"
    print(text, end="")
    write_text(ROOT / "benchmarks" / "results" / "short_fit_importance.txt", text)


if __name__ == "__main__":
    main()
