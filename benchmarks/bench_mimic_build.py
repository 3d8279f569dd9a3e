"""Benchmark P1: the MIMIC build on the stand-in vs the `zcat` floor, peak RSS, and the SQL alone.

    python benchmarks/bench_mimic_build.py --scales 0.05 0.1 [--data-dir data/bench]

For each scale, in one run: generate (or reuse) the stand-in; time `zcat` of the eight table
files (the floor: just decompressing them); run the build-mimic-features flow cold (fresh
work folder: staging + SQL + dataset) in a child process that first warms up Prefect's
temporary server, so the figure is the pipeline's work; record the child's peak RSS; then
time the feature SQL alone on the staged parquet. Also times the same flow as a cold CLI
(`python -m flows.mimic build`, Prefect start-up included). Goal: <= 2.0x the floor and
<= 4 GiB peak RSS, independent of scale. Writes benchmarks/results/mimic_build.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
from prefect import flow
from flows.lib.flow_params import MimicBuildParams  # noqa: E402
from flows.mimic import build_mimic_features
from flows.lib.mimic.build import MimicParams, run_sql
from flows.lib.mimic.staging import stage_all

@flow
def warm_up():
    return 1

src, out, work = sys.argv[1:4]
warm_up()
t0 = time.perf_counter()
build_mimic_features(MimicBuildParams(out=out, mimic_dir=src, work_dir=work))
flow_s = time.perf_counter() - t0
t0 = time.perf_counter()
con = run_sql(stage_all(Path(src), Path(work) / "staged"), Path(work), MimicParams())  # staged parquet reused
con.close()
sql_s = time.perf_counter() - t0
print(json.dumps({"flow_s": flow_s, "sql_s": sql_s,
                  "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
"""


def env() -> dict:
    e = dict(os.environ)
    e.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    e.setdefault("DO_NOT_TRACK", "1")
    e.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    return e


def zcat_floor(folder: Path) -> float:
    files = sorted(folder.glob("*.csv.gz"))
    t0 = time.perf_counter()
    for f in files:
        with open(os.devnull, "wb") as null:
            subprocess.run(["zcat", str(f)], stdout=null, check=True)
    return time.perf_counter() - t0


def bench(scale: float, data_dir: Path, seed: int = 0) -> dict:
    from flows.lib.standin import mimic as mimic_standin

    src = data_dir / f"mimic-standin-{scale:g}"
    t0 = time.perf_counter()
    reused = mimic_standin.existing(src, scale, seed)
    mimic_standin.ensure(src, scale, seed)
    gen_s = time.perf_counter() - t0
    man = json.loads((src / "standin.json").read_text())
    floor = min(zcat_floor(src) for _ in range(2))

    work, out = data_dir / f"work-{scale:g}", data_dir / f"ds-{scale:g}"
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    child = subprocess.run([sys.executable, "-c", CHILD, str(src), str(out), str(work)], cwd=ROOT, env=env(),
                           capture_output=True, text=True, check=True)
    res = json.loads(child.stdout.strip().splitlines()[-1])

    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "flows.mimic", "build", "--mimic-dir", str(src), "--out", str(out),
                    "--work-dir", str(work)], cwd=ROOT, env=env(), capture_output=True, check=True)
    cli_s = time.perf_counter() - t0
    return {
        "scale": scale,
        "chart_rows": man["rows"]["CHARTEVENTS"],
        "gz_bytes": sum(p.stat().st_size for p in src.glob("*.csv.gz")),
        "raw_csv_bytes": sum(man["raw_csv_bytes"].values()),
        "generate_s": None if reused else round(gen_s, 1),
        "zcat_floor_s": round(floor, 2),
        "flow_s": round(res["flow_s"], 2),
        "ratio": round(res["flow_s"] / floor, 2),
        "sql_only_s": round(res["sql_s"], 2),
        "peak_rss_gib": round(res["peak_rss_gib"], 2),
        "cli_cold_s": round(cli_s, 2),
        "cli_ratio": round(cli_s / floor, 2),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", type=float, nargs="+", default=[0.05, 0.1])
    ap.add_argument("--data-dir", type=Path, default=ROOT / "data" / "bench",
                    help="kept stand-ins and scratch: a new or empty folder, or one an earlier run made")
    args = ap.parse_args(argv)
    if shutil.which("zcat") is None:
        sys.exit("zcat is needed for the floor")
    from cet_model.evaluation import machine
    from flows.lib.infra.folders import scratch_folder

    try:
        scratch_folder(args.data_dir, "bench_mimic_build.py")  # it removes its work and dataset folders there
    except FileExistsError as exc:
        ap.error(str(exc))
    rows = []
    for s in args.scales:
        rows.append(bench(s, args.data_dir))
        print(json.dumps(rows[-1]), flush=True)
    out = ROOT / "benchmarks" / "results" / "mimic_build.json"
    out.write_text(json.dumps({"runs": rows, "machine": machine()}, indent=2) + "\n")
    print(
        f"{'scale':>6} {'chart rows':>12} {'zcat s':>7} {'flow s':>7} {'ratio':>6} {'SQL s':>6} "
        f"{'RSS GiB':>8} {'CLI s':>6}"
    )
    for r in rows:
        print(
            f"{r['scale']:>6g} {r['chart_rows']:>12,} {r['zcat_floor_s']:>7} {r['flow_s']:>7} {r['ratio']:>6} "
            f"{r['sql_only_s']:>6} {r['peak_rss_gib']:>8} {r['cli_cold_s']:>6}"
        )


if __name__ == "__main__":
    main()
