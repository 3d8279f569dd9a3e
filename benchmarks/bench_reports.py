"""What a version costs after its fits: CET's scoring and the reports, on a main job's output.

    python benchmarks/bench_reports.py --root DIR [--rounds 3]

``DIR`` holds a main job's ``data/`` and ``models/`` (``bash scripts/run-main.sh`` run there, or
``python -m flows.full_pipeline`` with DIR as the working folder). For each dataset with a
``v0001``, in one process of one thread: CET's predictions on the test rows as scoring asks for
them (P(ever), the median time, the RMST at the training follow-up's median, the survival at
three times), CET's evaluation as a train-evaluate runs it (the metrics of the validation and test
rows and the test rows' bootstrap inputs: ``evaluate``, ``ranking_inputs``), the dataset report
(``write_dataset_report``), and then the pipeline report of all
of them twice: given the dataset reports (their figures copied) and without (every figure drawn).
Each figure is the best of ``--rounds`` rounds. Everything is written to a temporary folder;
``results/reports.json`` keeps the latest figures and the machine. Run it with ``PYTHONPATH`` set
to another checkout to time that code on the same output.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = Path(__file__).parent / "results" / "reports.json"


def best(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def one_dataset(root: Path, name: str, out: Path, rounds: int) -> tuple[dict, dict]:
    """(the pipeline report's entry, the seconds) of dataset ``name``: CET's predictions on its test
    rows and its dataset report, written to ``out``."""
    import numpy as np

    from cet_model.dataset import load_dataset
    from cet_model.evaluation import evaluate, model_inputs, ranking_inputs, rmst_horizons
    from cet_model.models import load_model
    from flows.lib.modeling import dataset_report
    from flows.lib.modeling.version_facts import calibration_horizons

    version, data = root / "models" / name / "v0001", root / "data" / name
    ds = load_dataset(data)
    x = model_inputs(ds.test)
    cet = load_model(version / "CET")
    horizon = float(np.median(ds.train.T))
    grid = np.quantile(ds.train.T, [0.25, 0.5, 0.75])

    def predictions():
        cet.predict_occurrence(x)
        cet.predict_time(x)
        cet.predict_rmst(x, horizon)
        cet.predict_survival(x, grid)
    scoring = best(predictions, rounds)
    horizons = calibration_horizons(ds.train, ds.event_names)
    by_event = [horizons.get(e, np.nan) for e in ds.event_names]

    def evaluation():  # what a train-evaluate's metrics and intervals read of CET (flows/lib/modeling/train_eval.py)
        for split in (ds.val, ds.test):
            evaluate("CET", cet, split, ds.event_names, model_inputs(split), train=ds.train)
        ranking_inputs("CET", cet, x, by_event, rmst_horizons(ds.train))
    evaluated = best(evaluation, rounds)
    drawn = best(lambda: dataset_report.write_dataset_report(version, data, out, name), rounds)
    entry = {"name": name, "dataset": str(data), "version": str(version), "report": str(out / "report.md")}
    return entry, {"test_rows": len(ds.test), "val_rows": len(ds.val), "events": len(ds.event_names),
                   "cet_predictions_s": round(scoring, 3), "cet_evaluation_s": round(evaluated, 3),
                   "dataset_report_s": round(drawn, 3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, required=True, help="a main job's folder: data/ and models/")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-record", action="store_true", help=f"print only; leave {OUT.name} as it is")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)
    import cet_model
    from cet_model.host import machine
    from flows.lib.modeling import report

    root = args.root.resolve()
    names = [n for n in ("synthetic", "mimic", "reddit") if (root / "models" / n / "v0001").is_dir()]
    if not names:
        ap.error(f"{root}: no models/<dataset>/v0001 of a main job")
    record = {"command": "python benchmarks/bench_reports.py " + " ".join(argv or sys.argv[1:]),
              "code": str(Path(cet_model.__file__).resolve().parents[1]), "machine": machine(), "datasets": {}}
    with tempfile.TemporaryDirectory(prefix="cet-bench-reports-") as tmp:
        tmp = Path(tmp)
        entries = []
        for name in names:
            entry, figures = one_dataset(root, name, tmp / "reports" / name, args.rounds)
            entries.append(entry)
            record["datasets"][name] = figures
            print(f"{name} ({record['code']}): CET's predictions {figures['cet_predictions_s']:.2f} s, its "
                  f"evaluation {figures['cet_evaluation_s']:.2f} s, dataset report {figures['dataset_report_s']:.2f} s",
                  flush=True)
        given = best(lambda: report.write_report(entries, tmp / "reports"), args.rounds)
        bare = [{k: v for k, v in e.items() if k != "report"} for e in entries]
        alone = best(lambda: report.write_report(bare, tmp / "alone"), args.rounds)
    record["pipeline_report_s"] = {"dataset_reports_given": round(given, 3), "figures_drawn": round(alone, 3)}
    print(f"pipeline report: {given:.2f} s given the dataset reports, {alone:.2f} s drawing every figure")
    if not args.no_record:
        OUT.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
