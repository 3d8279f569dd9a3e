"""The main job's time from a fresh clone: run it, record it, and render the table docs/pipeline.md shows.

    python benchmarks/main_job_times.py run [--rev HEAD] [--note TEXT] [-- ARGS]  # a fresh clone, set-up, main job
    python benchmarks/main_job_times.py table                          # the markdown table of the runs

``run`` clones this repository at ``--rev`` into a temporary folder, runs ``bash
scripts/run-main.sh`` there (the set-up, then the main job on the embedded defaults) and appends
the run to benchmarks/results/main_job_runs.json: the commit, the pipeline's own clock (its
``report: ... (N s)`` line), the wall seconds with the set-up, and the machine. ``table`` groups
the recorded runs by the models a version trains by default (and the main job's arguments) and
gives each group's min, median and max; docs/pipeline.md shows its output (tests/test_docs.py
checks that it is current).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = Path(__file__).parent / "results" / "main_job_runs.json"
CLOCK = re.compile(r"^report: .* \((\d+) s\)$", re.M)


def load(path: Path = RUNS) -> dict:
    return json.loads(path.read_text())


def _seconds(n: float) -> str:
    return f"{n:,.0f} s"


def table(record: dict) -> str:
    """The markdown table: one row a group of runs (the default models a version trained)."""
    rows = ["| default models | runs | min | median | max |", "|---|---|---|---|---|"]
    for group in record["earlier"]:  # summaries of runs recorded before this file
        rows.append(f"| {group['models']} | {group['runs']} | {_seconds(group['min'])} | "
                    f"{_seconds(group['median'])} | {_seconds(group['max'])} |")
    by_models: dict[str, list[float]] = {}
    for run in record["runs"]:
        label = run["models"] + (f" (`{' '.join(run['args'])}`)" if run.get("args") else "")
        by_models.setdefault(label, []).append(run["pipeline_s"])
    for models, secs in by_models.items():
        rows.append(f"| {models} | {len(secs)} | {_seconds(min(secs))} | {_seconds(statistics.median(secs))} | "
                    f"{_seconds(max(secs))} |")
    return "\n".join(rows) + "\n"


def run(rev: str, note: str | None, args: list[str]) -> dict:
    """One fresh-clone main job at ``rev``; returns its record."""
    sys.path.insert(0, str(ROOT))
    from cet_model.evaluation import machine

    commit = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="cet-main-job-") as tmp:
        clone = Path(tmp) / "main"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", commit], cwd=clone, check=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CET_", "PREFECT_"))}
        t0 = time.perf_counter()
        out = subprocess.run(["bash", "scripts/run-main.sh", *args], cwd=clone, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        (Path(tmp) / "main-job.log").write_text(out.stdout + out.stderr)
        found = CLOCK.search(out.stdout)
        if out.returncode != 0 or found is None:
            sys.stderr.write((out.stdout + out.stderr)[-3000:])
            raise SystemExit(f"the main job at {commit} failed (exit {out.returncode})")
        models = subprocess.run([str(clone / ".venv" / "bin" / "python"), "-c",
                                 "from cet_model.presets import DEFAULT_PRESETS; print(', '.join(DEFAULT_PRESETS))"],
                                cwd=clone, capture_output=True, text=True, check=True).stdout.strip()
        headline = headline_auc(clone / "models")
    return {"commit": commit, "models": models, "args": args, "pipeline_s": int(found.group(1)),
            "wall_s": round(wall), "headline_test_auc": headline, "machine": machine(), "note": note}


def headline_auc(models_root: Path) -> dict:
    """Each dataset's first version: every model's test AUC, the report's headline."""
    out = {}
    for metrics in sorted(models_root.glob("*/v0001/metrics.json")):
        summary = json.loads(metrics.read_text())["summary"]
        out[metrics.parts[-3]] = {m: round(v["test_auc"], 3) for m, v in summary.items()
                                  if isinstance(v.get("test_auc"), float)}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="a fresh clone's main job, recorded")
    r.add_argument("--rev", default="HEAD")
    r.add_argument("--note", help="what else ran on the machine, or why this run")
    r.add_argument("args", nargs="*", help="arguments of the main job (after --)")
    sub.add_parser("table", help="print the table of recorded runs")
    args = ap.parse_args(argv)
    if args.command == "table":
        sys.stdout.write(table(load()))
        return 0
    record = run(args.rev, args.note, args.args)
    print(json.dumps(record, indent=2))
    sys.path.insert(0, str(ROOT))
    from cet_model.atomic import write_text

    runs = load()
    runs["runs"].append(record)
    write_text(RUNS, json.dumps(runs, indent=2) + "\n")
    sys.stdout.write(table(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
