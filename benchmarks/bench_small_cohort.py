"""A small cohort end to end, as a user runs it: lifelines' lymph_node (686 patients, recurrence and
death) through ``flows.table`` and ``flows.train evaluate``, then one default ``CETModel().fit`` and
one ``ETModel().fit`` (the simplest network here) against lifelines' CoxPH fits of the same events,
in one run.

    python benchmarks/bench_small_cohort.py        # about 2 minutes on 2 cores

Everything is written to a temporary folder (its own CET_DATA_DIR, CET_MODELS_DIR and
CET_REPORTS_DIR); ``results/small_cohort.json`` keeps the latest figures and the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVENTS = {"recurrence": ("rectime", "censrec"), "death": ("survtime", "censdead")}


def command(args: list[str], env: dict) -> float:
    """Seconds of ``python -m <args>``; its output goes to the terminal."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", *args], env=env, cwd=Path(env["CET_DATA_DIR"]).parent, check=True)
    return time.perf_counter() - t0


def fits(table) -> dict:
    """Seconds of a default CETModel().fit and ETModel().fit on the table's two events and of a lifelines
    CoxPH fit per event."""
    import numpy as np
    from lifelines import CoxPHFitter

    from cet_model import CETModel, ETModel

    features = [c for c in table.columns if c not in {c for pair in EVENTS.values() for c in pair}]
    x = table[features].to_numpy(float)
    t = np.column_stack([table[tc].to_numpy(float) for tc, _ in EVENTS.values()])
    s = np.column_stack([table[sc].to_numpy(float) for _, sc in EVENTS.values()])
    t0 = time.perf_counter()
    model = CETModel().fit(x, t, s)
    cet = time.perf_counter() - t0
    stage = model.encoder_history_
    t0 = time.perf_counter()
    et_model = ETModel().fit(x, t, s)  # the simplest network of the three: the floor of a network fit here
    et = time.perf_counter() - t0
    cox = {}
    for event, (tc, sc) in EVENTS.items():
        frame = table[features + [tc, sc]]
        t0 = time.perf_counter()
        CoxPHFitter().fit(frame, duration_col=tc, event_col=sc)
        cox[event] = time.perf_counter() - t0
    return {"cet_fit_s": cet, "cet_epochs": len(model.history_.train_loss),
            "cet_encoder_stage_epochs": 0 if stage is None else len(stage.train_loss),
            "cet_rows_held_out": model.n_held_out_, "et_fit_s": et, "et_epochs": len(et_model.history_.train_loss),
            "coxph_fit_s": cox, "cet_over_coxph_per_event": cet / max(cox.values()),
            "et_over_coxph_per_event": et / max(cox.values())}


def main() -> int:
    from cet_experiments.cohorts import COHORTS
    from cet_model.host import machine

    table = COHORTS["lymph_node"].table()
    with tempfile.TemporaryDirectory(prefix="cet-small-cohort-") as tmp:
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"} | {
            "CET_DATA_DIR": str(root / "data"), "CET_MODELS_DIR": str(root / "models"),
            "CET_REPORTS_DIR": str(root / "reports"), "PYTHONPATH": str(REPO)}
        (root / "data").mkdir()
        table.to_csv(root / "lymph.csv", index=False)
        events = [a for e, (tc, sc) in EVENTS.items() for a in ("--event", f"{e}={tc},{sc}")]
        build = command(["flows.table", "--table", str(root / "lymph.csv"), "--name", "lymph", *events,
                         "--time-unit", "days", "--split-method", "stratified"], env)
        evaluate = command(["flows.train", "evaluate", "--dataset", "lymph"], env)
        metrics = json.loads(next((root / "models" / "lymph").glob("v*/metrics.json")).read_text())
    result = {"command": "python benchmarks/bench_small_cohort.py", "rows": len(table), "events": list(EVENTS),
              "table_build_s": build, "evaluate_s": evaluate, "evaluate_fit_s": metrics["seconds"],
              **fits(table), "machine": machine()}
    out = REPO / "benchmarks" / "results" / "small_cohort.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
