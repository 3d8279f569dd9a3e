"""Reliability §6: the Reddit dump scan and the embedding stage at 10x the default data, each
under a memory cap, with their peak RSS.

    python benchmarks/bounded_memory.py [--users 20000] [--cap-gib 4] [--keep DIR]

Generates Pushshift stand-in dumps for ``--users`` users (the default pipeline uses 2,000),
then runs, each in a child process under ``ulimit -v`` (RLIMIT_AS, address space, stricter
than RSS: torch's reservations count too): (1) the scan of every RS_ and RC_ dump into the
per-month parquet parts, (2) the embedding of every cohort comment and the dataset assembly.
A stage that needed more than the cap would die with MemoryError or be killed; the run records
for each stage its exit status, wall time and peak RSS (getrusage of the child). Writes
benchmarks/results/bounded_memory.json.
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

KEY = "bounded-memory-benchmark-key"


def stage_scan(dumps: Path, work: Path) -> dict:
    from flows.lib.reddit import build as reddit_build
    from flows.lib.reddit import cohort as reddit_cohort

    params = reddit_build.RedditParams(device="cpu")
    secret = reddit_build.pseudonym_key(KEY, work)
    rs, rc = reddit_build.local_dumps(dumps, params)
    stats = [reddit_cohort.scan_submissions(Path(f.path), work / "rs" / f"{f.month}.parquet", secret,
                                            params.end_utc("RS"), params.max_error_rate) for f in rs]
    first = reddit_cohort.combine_submissions([work / "rs" / f"{f.month}.parquet" for f in rs], work / "first.parquet")
    candidates = reddit_cohort.first_any(first)
    stats += [reddit_cohort.scan_comments(Path(f.path), work / "rc" / f"{f.month}.parquet", secret, candidates,
                                          params.end_utc("RC"), params.max_error_rate) for f in rc]
    return {"files": len(rs) + len(rc), "lines": sum(s.get("lines", 0) for s in stats)}


def stage_embed(dumps: Path, work: Path, out: Path) -> dict:
    import polars as pl

    from flows.lib.reddit import build as reddit_build

    params = reddit_build.RedditParams(device="cpu")
    secret = reddit_build.pseudonym_key(KEY, work)
    rs, rc = reddit_build.local_dumps(dumps, params)
    path = reddit_build.finish([f.path for f in rs + rc], pl.read_parquet(work / "first.parquet"),
                               [work / "rc" / f"{f.month}.parquet" for f in rc], out, work, params, secret, [])
    manifest = json.loads((path / "manifest.json").read_text())
    return {"users": sum(manifest["split_sizes"].values()), "texts": manifest["embedding"]["texts"]}


def run_capped(stage: str, cap_bytes: int, *args: str) -> dict:
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))

    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, __file__, "--stage", stage, *args], preexec_fn=cap,
                                stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    result = {"exit": proc.returncode, "wall_s": round(wall, 1), "peak_rss_gib": round(usage.ru_maxrss / 2**20, 2)}
    try:
        result.update(json.loads(stdout.strip().splitlines()[-1]))
    except (IndexError, json.JSONDecodeError):
        result["stderr_tail"] = stderr[-2000:]
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=20_000)
    ap.add_argument("--cap-gib", type=float, default=4.0)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--stage", choices=["scan", "embed"], help=argparse.SUPPRESS)
    ap.add_argument("--dumps", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.stage == "scan":
        print(json.dumps(stage_scan(args.dumps, args.work)))
        return 0
    if args.stage == "embed":
        print(json.dumps(stage_embed(args.dumps, args.work, args.out)))
        return 0

    from cet_model.evaluation import machine
    from flows.lib.standin import reddit as reddit_standin

    root = args.keep or Path(tempfile.mkdtemp(prefix="cet-bounded-"))
    dumps, work, out = root / "dumps", root / "work", root / "reddit"
    t0 = time.perf_counter()
    reddit_standin.ensure(dumps, args.users, 0, reddit_standin.Months())
    gen_s = time.perf_counter() - t0
    size = sum(p.stat().st_size for p in dumps.glob("*.zst"))
    cap = int(args.cap_gib * 2**30)
    print(f"{args.users} users: {size / 2**20:.0f} MiB of zstd dumps in {gen_s:.0f} s; cap {args.cap_gib} GiB",
          flush=True)
    scan = run_capped("scan", cap, "--dumps", str(dumps), "--work", str(work))
    print("scan", scan, flush=True)
    embed = run_capped("embed", cap, "--dumps", str(dumps), "--work", str(work), "--out", str(out))
    print("embed", embed, flush=True)
    result = {"users": args.users, "default_users": 2000, "dumps_zstd_mib": round(size / 2**20, 1),
              "cap": f"ulimit -v {int(cap / 1024)} (RLIMIT_AS {args.cap_gib} GiB)", "scan": scan, "embed": embed,
              "machine": machine(), "date": time.strftime("%Y-%m-%d")}
    dest = ROOT / "benchmarks" / "results" / "bounded_memory.json"
    dest.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if scan["exit"] == 0 and embed["exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
