"""Harrell's C at n = 10^6 (goal <= 2 s), and against lifelines at n = 2 x 10^5, one run.

    python benchmarks/bench_cindex.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from lifelines.utils import concordance_index as lifelines_ci

from cet_model.evaluation import machine
from cet_model.metrics import concordance_index


def data(n, seed=0):
    rng = np.random.default_rng(seed)
    t = np.round(rng.exponential(size=n), 3)  # with tied times
    return t, np.round(t + rng.normal(size=n), 2), rng.random(n) < 0.5  # and tied predictions


def timed(fn, *args, repeats=3):
    best, value = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best, value


def main():
    res = {}
    t_ours, c = timed(concordance_index, *data(10**6))
    res["n_1e6"] = {"ours_s": t_ours, "c": c}
    args = data(2 * 10**5)
    t_ours, c_ours = timed(concordance_index, *args)
    t_ll, c_ll = timed(lifelines_ci, *args, repeats=1)
    res["n_2e5"] = {"ours_s": t_ours, "lifelines_s": t_ll, "speedup": t_ll / t_ours,
                    "abs_diff": abs(c_ours - c_ll)}
    res["machine"] = machine()
    out = Path(__file__).parent / "results" / "cindex.json"
    out.write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
