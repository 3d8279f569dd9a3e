"""Benchmark P6: the cold `python -m flows.full_pipeline` on the embedded defaults, then the
same command again with nothing changed.

    python benchmarks/bench_pipeline.py [--keep DIR]

Runs in a fresh temporary folder (empty data/, models/, reports/; a fresh PREFECT_HOME, so
Prefect's temporary server starts from an empty database), in a child process. Records
wall time and peak RSS of each run, the warm/cold ratio, and each model's training seconds
from the registry. Goal: cold <= 10 minutes on 2 cores; warm in seconds. Writes
benchmarks/results/pipeline.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def run_once(work: Path, env: dict) -> dict:
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    with open(work / "pipeline.log", "a") as log:
        subprocess.run([sys.executable, "-m", "flows.full_pipeline"], cwd=work, env=env, stdout=log,
                       stderr=subprocess.STDOUT, check=True)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB, max over waited children so far
    return {"wall_s": round(wall, 1), "peak_rss_gib": round(peak / 2**20, 2), "peak_grew": peak > before}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="run in this folder and keep it: a new or empty one, or one an "
                                               "earlier run kept")
    args = ap.parse_args()
    from flows.lib.infra.folders import scratch_folder

    try:
        work = scratch_folder(args.keep, "bench_pipeline.py") if args.keep else None
    except FileExistsError as exc:
        ap.error(str(exc))
    work = work or Path(tempfile.mkdtemp(prefix="cet-p6-"))
    env = dict(os.environ, PREFECT_HOME=str(work / "prefect-home"), PREFECT_SERVER_ANALYTICS_ENABLED="false",
               DO_NOT_TRACK="1", PYTHONPATH=str(ROOT))
    env.pop("PREFECT_API_URL", None)
    for k in [k for k in env if k.startswith("CET_")]:
        env.pop(k)  # the embedded defaults, whatever this shell has set
    cold = run_once(work, env)
    print(f"cold: {cold['wall_s']} s, peak RSS {cold['peak_rss_gib']} GiB", flush=True)
    warm = run_once(work, env)
    print(f"warm: {warm['wall_s']} s ({warm['wall_s'] / cold['wall_s']:.3f} of cold)", flush=True)
    training = {}
    for metrics in sorted((work / "models").glob("*/v0001/metrics.json")):
        m = json.loads(metrics.read_text())
        training[metrics.parts[-3]] = {k: round(v, 1) for k, v in m["seconds"].items()}
    from cet_model.evaluation import machine

    # ru_maxrss is a maximum over every child so far: the warm run's own peak is not separable
    result = {"cold": {k: v for k, v in cold.items() if k != "peak_grew"}, "warm": {"wall_s": warm["wall_s"]},
              "warm_over_cold": round(warm["wall_s"] / cold["wall_s"], 3), "training_seconds": training,
              "goal": "cold <= 600 s on 2 cores", "machine": machine(),
              "date": time.strftime("%Y-%m-%d")}
    out = ROOT / "benchmarks" / "results" / "pipeline.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
