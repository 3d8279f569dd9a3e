"""A table of one's own at scale: the product's commands on a generated cohort, wall and peak memory.

    python benchmarks/large_table.py [--rows 300000] [--features 12] [--seed 0] [--aft] [--work DIR] [--out FILE]
    python benchmarks/large_table.py --rows 1000000 --features 50 --aft   # issue 74's size (about 20 min)

Writes a parquet table as a user would bring one (``--rows`` subjects, ``--features`` numeric
features and a 5-level text column, two events censored by follow-up: event ``a`` occurs with probability
sigmoid(x0 - 0.5), ``b`` with sigmoid(x2 - 1.5), their log-normal times move with x1 and x3,
follow-up uniform on 0.5-80.5 days, times to 0.01 day), then runs, each in its own process under
``/usr/bin/time``-like accounting (``os.wait4``: the child's own peak memory): ``flows.table`` (build,
``--categorical site``) and ``flows.train evaluate --models CET,ET,BC`` (the default CET and ET, and BC,
named; the Cox reference fitted beside them, as on any data without the truth). Records per stage the
wall seconds and the peak memory (the largest process's, and all its processes' together: the fit workers run side by
side), and the seconds each model's fit took from the train log, in
``benchmarks/results/large_table.json`` (or ``--out``). With ``--aft``, then lifelines'
``LogNormalAFTFitter`` on the same training rows and features, one fit per event, timed in the
same run (the yardstick of CET's fit time). It is what found the Cox reference holding every test
row's step curve at once (docs/benchmarks.md, "A large table").
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import machine  # noqa: E402


def cohort(n: int, seed: int, features: int = 12) -> pl.DataFrame:
    """The generated table: ``x0``.. (``features`` of them, at least 4), ``site``,
    ``time_a``/``seen_a``, ``time_b``/``seen_b``."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, features))
    follow_up = rng.uniform(0.0, 80.0, n) + 0.5
    cols = {f"x{i}": x[:, i] for i in range(features)}
    cols["site"] = rng.choice(list("ABCDE"), n)
    for e, (occ, shift, timing, log_m) in {"a": (0, -0.5, 1, 3.0), "b": (2, -1.5, 3, 3.5)}.items():
        happens = rng.random(n) < 1.0 / (1.0 + np.exp(-(x[:, occ] + shift)))
        t = np.exp(log_m + 0.5 * x[:, timing] + 0.5 * rng.standard_normal(n))
        seen = happens & (t <= follow_up)
        cols[f"time_{e}"] = np.maximum(np.round(np.where(seen, t, follow_up), 2), 0.01)
        cols[f"seen_{e}"] = seen.astype(np.int64)
    return pl.DataFrame(cols)


def run(cmd: list[str], env: dict, log: Path) -> dict:
    """Run one command to completion; its wall seconds, the largest peak resident memory of one of
    its processes (``peak_rss_mib``: ``os.wait4``'s, the child or a process it waited for) and the
    peak of the memory of all its processes at once (``peak_total_pss_mib``: the proportional set
    sizes of the child and every descendant, summed, sampled every 0.5 s; the fit workers and the
    temporary Prefect server included, shared pages counted once)."""
    t0 = time.perf_counter()
    with open(log, "a") as f:
        child = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT)
        peak, at_peak, done = [0], [{}], threading.Event()

        def sample():
            while not done.wait(0.5):
                each = tree_pss_kib(child.pid)
                if sum(each.values()) > peak[0]:
                    peak[0], at_peak[0] = sum(each.values()), each

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(child.pid, 0)  # this child's own resource use
        done.set()
        sampler.join()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise subprocess.CalledProcessError(child.returncode, cmd)
    return {
        "seconds": round(time.perf_counter() - t0, 1),
        "peak_rss_mib": round(usage.ru_maxrss / 1024),  # KiB on Linux
        "peak_total_pss_mib": round(peak[0] / 1024),
        "at_the_peak_mib": {k: round(v / 1024) for k, v in sorted(at_peak[0].items(), key=lambda kv: -kv[1])},
    }


def tree_pss_kib(root: int) -> dict[str, int]:
    """The proportional set size (KiB) of process ``root`` and of each of its descendants (Linux
    /proc), by "pid command"; a process that ends while being read counts nothing."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state
    tree, grew = {root}, True
    while grew:
        more = {p for p, parent in parents.items() if parent in tree} - tree
        tree |= more
        grew = bool(more)
    out = {}
    for pid in sorted(tree):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [Path(argv[0].decode(errors="replace")).name] + [a.decode(errors="replace")[:40] for a in argv[1:4]]
        out[f"{pid} {' '.join(w for w in words if w)}"] = sum(
            int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:"))
    return out


def lognormal_aft_seconds(data: Path) -> dict[str, float]:
    """Seconds of lifelines' LogNormalAFTFitter on the built dataset's training rows, per event."""
    import pandas as pd
    from lifelines import LogNormalAFTFitter

    from cet_model.dataset import load_dataset

    ds = load_dataset(data)
    tr = ds.train
    frame = pd.DataFrame(tr.X, columns=ds.feature_names)
    seconds = {}
    for j, e in enumerate(ds.event_names):
        df = frame.assign(_t=tr.T[:, j], _s=tr.S[:, j])
        t0 = time.perf_counter()
        LogNormalAFTFitter().fit(df, duration_col="_t", event_col="_s")
        seconds[e] = round(time.perf_counter() - t0, 1)
    return seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--features", type=int, default=12, help="numeric features (at least 4)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--aft", action="store_true", help="also time lifelines' LogNormalAFT fits of the same events")
    ap.add_argument("--work", help="folder for the table, data, models and log (default: a temporary one)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "large_table.json"))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(args.work or scratch)
        work.mkdir(parents=True, exist_ok=True)
        table = work / "cohort.parquet"
        if args.features < 4:
            ap.error("--features: at least 4 (the events depend on x0..x3)")
        cohort(args.rows, args.seed, args.features).write_parquet(table)
        env = dict(
            os.environ,
            CET_DATA_DIR=str(work / "data"),
            CET_MODELS_DIR=str(work / "models"),
            PREFECT_HOME=str(work / "prefect"),
        )
        log, py = work / "log.txt", sys.executable
        stages = {
            "build": run(
                [
                    py,
                    "-m",
                    "flows.table",
                    "--table",
                    str(table),
                    "--name",
                    "large",
                    "--event",
                    "a=time_a,seen_a",
                    "--event",
                    "b=time_b,seen_b",
                    "--time-unit",
                    "days",
                    "--categorical",
                    "site",
                ],
                env,
                log,
            ),
            "train_evaluate": run(
                [py, "-m", "flows.train", "evaluate", "--dataset", "large", "--models", "CET,ET,BC"], env, log
            ),
        }
        text = log.read_text()
        fits = {m: float(s) for m, s in re.findall(r"large (CET|ET|BC|Cox \(reference\)): .*?([\d.]+)s,", text)}
        intervals = re.search(r"test intervals .* in ([\d.]+)s", text)
        sizes = json.loads((work / "data" / "large" / "manifest.json").read_text())["split_sizes"]
        aft = lognormal_aft_seconds(work / "data" / "large") if args.aft else None
    record = {
        "command": " ".join(["python", "benchmarks/large_table.py", *(argv if argv is not None else sys.argv[1:])]),
        "machine": machine(),
        "rows": args.rows,
        "features": args.features,
        "split_sizes": sizes,
        "stages": stages,
        "fit_seconds": fits,
        "bootstrap_seconds": float(intervals.group(1)) if intervals else None,
    }
    if aft is not None:
        record["lognormal_aft_seconds"] = aft
        record["cet_over_aft"] = round(fits["CET"] / sum(aft.values()), 2) if "CET" in fits else None
    write_text(args.out, json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
