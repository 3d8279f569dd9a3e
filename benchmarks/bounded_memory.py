"""Reliability §6: the Reddit dump scan and the embedding stage at 10x the default data, and the
MIMIC build at 1/10 of the full release, each under a memory cap, with their peak RSS.

    python benchmarks/bounded_memory.py [--sources reddit,mimic] [--users 20000] [--mimic-scale 0.1]
                                        [--cap-gib 4] [--keep DIR]

Generates Pushshift stand-in dumps for ``--users`` users (the default pipeline uses 2,000),
then runs, each in a child process under ``ulimit -v`` (RLIMIT_AS, address space, stricter
than RSS: torch's reservations count too): (1) the scan of every RS_ and RC_ dump into the
per-month parquet parts, (2) the embedding of every cohort comment and the dataset assembly;
and (3) the whole MIMIC build (staging every table, the SQL, the dataset) of a stand-in of
``--mimic-scale`` (generated first, uncapped).
A stage that needed more than the cap would die with MemoryError or be killed; the run records
for each stage its exit status, wall time and peak RSS (getrusage of the child). Writes
benchmarks/results/bounded_memory.json (the sources run are replaced, the others kept).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEY = "bounded-memory-benchmark-key-4f1c9a2e7b3d5086c1e2a4f6b8d0"


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


def stage_mimic(src: Path, work: Path, out: Path) -> dict:
    from flows.lib.mimic.build import build

    path = build(src, out, work)
    manifest = json.loads((path / "manifest.json").read_text())
    return {"admissions": sum(manifest["split_sizes"].values()), "features": len(manifest["feature_names"]),
            "vm_peak_gib": vm_peak_gib()}


def vm_peak_gib() -> float | None:
    """This process's peak address space (VmPeak), for the record: RLIMIT_AS caps that, not RSS."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmPeak:"):
            return round(int(line.split()[1]) / 2**20, 2)
    return None


CGROUP_V1 = Path("/sys/fs/cgroup/memory")


def cgroup_available() -> bool:
    """A writable cgroup v1 memory controller (root in a container here; absent on many machines)."""
    try:
        probe = CGROUP_V1 / f"cet-probe-{os.getpid()}"
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


def run_capped(stage: str, cap_bytes: int, *args: str, kind: str = "rlimit") -> dict:
    """Run ``stage`` in a child under the cap: ``rlimit`` (RLIMIT_AS, address space) or ``cgroup``
    (a memory cgroup: resident memory and page cache, as a container's limit; swap too where
    the kernel accounts it)."""
    group = None
    if kind == "cgroup":
        group = CGROUP_V1 / f"cet-bounded-{os.getpid()}-{stage}"
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(cap_bytes))
        try:
            (group / "memory.memsw.limit_in_bytes").write_text(str(cap_bytes))
        except OSError:
            pass  # no swap accounting: the limit still holds for memory

    def cap():
        if kind == "rlimit":
            resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))
        else:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    t0 = time.perf_counter()
    try:
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            proc = subprocess.Popen([sys.executable, __file__, "--stage", stage, *args], preexec_fn=cap,
                                    stdout=out, stderr=err, text=True)
            _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage
            proc.returncode = os.waitstatus_to_exitcode(status)
            wall = time.perf_counter() - t0
            out.seek(0), err.seek(0)
            stdout, stderr = out.read(), err.read()
        result = {"cap_kind": kind, "exit": proc.returncode, "wall_s": round(wall, 1),
                  "peak_rss_gib": round(usage.ru_maxrss / 2**20, 2)}
        if group is not None:
            result["cgroup_peak_gib"] = round(int((group / "memory.max_usage_in_bytes").read_text()) / 2**30, 2)
            result["cgroup_limit_hits"] = int((group / "memory.failcnt").read_text())
    finally:
        if group is not None:
            group.rmdir()
    try:
        result.update(json.loads(stdout.strip().splitlines()[-1]))
    except (IndexError, json.JSONDecodeError):
        result["stderr_tail"] = stderr[-2000:]
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=20_000)
    ap.add_argument("--cap-gib", type=float, default=4.0)
    ap.add_argument("--cap-kind", choices=["rlimit", "cgroup", "both"], default="rlimit",
                    help="rlimit: RLIMIT_AS (address space, any machine); cgroup: a memory cgroup (needs a "
                         "writable /sys/fs/cgroup/memory); both (default rlimit)")
    ap.add_argument("--keep", type=Path, help="keep the dumps and builds here: a new or empty folder, or one an "
                                               "earlier run kept")
    ap.add_argument("--sources", default="reddit,mimic", help="comma-separated: reddit, mimic (default both)")
    ap.add_argument("--mimic-scale", type=float, default=0.1, help="MIMIC stand-in scale (default 1/10)")
    ap.add_argument("--stage", choices=["scan", "embed", "mimic"], help=argparse.SUPPRESS)
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
    if args.stage == "mimic":
        print(json.dumps(stage_mimic(args.dumps, args.work, args.out)))
        return 0

    from cet_model.evaluation import machine
    from flows.lib.infra.folders import scratch_folder
    from flows.lib.standin import reddit as reddit_standin

    # --keep: a folder this benchmark made (it removes its MIMIC work folder there to start cold)
    try:
        root = scratch_folder(args.keep, "bounded_memory.py") if args.keep else None
    except FileExistsError as exc:
        ap.error(str(exc))
    root = root or Path(tempfile.mkdtemp(prefix="cet-bounded-"))
    sources = {x.strip() for x in args.sources.split(",") if x.strip()}
    if not sources or sources - {"reddit", "mimic"}:
        ap.error(f"--sources: expected reddit and/or mimic, got {args.sources!r}")
    cap = int(args.cap_gib * 2**30)
    dest = ROOT / "benchmarks" / "results" / "bounded_memory.json"
    result = json.loads(dest.read_text()) if dest.is_file() else {}
    result |= {"cap": f"ulimit -v {int(cap / 1024)} (RLIMIT_AS {args.cap_gib} GiB)", "machine": machine(),
               "date": time.strftime("%Y-%m-%d")}
    ok = True
    if "reddit" in sources:
        dumps, work, out = root / "dumps", root / "work", root / "reddit"
        t0 = time.perf_counter()
        reddit_standin.ensure(dumps, args.users, 0, reddit_standin.Months())
        gen_s = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in dumps.glob("*.zst"))
        print(f"{args.users} users: {size / 2**20:.0f} MiB of zstd dumps in {gen_s:.0f} s; cap {args.cap_gib} GiB",
              flush=True)
        scan = run_capped("scan", cap, "--dumps", str(dumps), "--work", str(work))
        print("scan", scan, flush=True)
        embed = run_capped("embed", cap, "--dumps", str(dumps), "--work", str(work), "--out", str(out))
        print("embed", embed, flush=True)
        result |= {"users": args.users, "default_users": 2000, "dumps_zstd_mib": round(size / 2**20, 1),
                   "scan": scan, "embed": embed}
        ok &= scan["exit"] == 0 and embed["exit"] == 0
    if "mimic" in sources:
        from flows.lib.standin import mimic as mimic_standin

        src = root / f"mimic-{args.mimic_scale:g}"
        t0 = time.perf_counter()
        mimic_standin.ensure(src, scale=args.mimic_scale, seed=0, progress=False)
        gen_s = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in src.glob("*.csv.gz"))
        print(f"MIMIC stand-in scale {args.mimic_scale:g}: {size / 2**30:.2f} GiB of csv.gz in {gen_s:.0f} "
              "s", flush=True)
        kinds = ["rlimit", "cgroup"] if args.cap_kind == "both" else [args.cap_kind]
        if "cgroup" in kinds and not cgroup_available():
            ap.error("--cap-kind cgroup: no writable memory cgroup on this machine")
        builds = {}
        for kind in kinds:
            shutil.rmtree(root / "mimic-work", ignore_errors=True)  # each cap sees the whole build
            builds[kind] = run_capped("mimic", cap, "--dumps", str(src), "--work", str(root / "mimic-work"),
                                      "--out", str(root / "mimic"), kind=kind)
            print("mimic build", builds[kind], flush=True)
            ok &= builds[kind]["exit"] == 0
        result |= {"mimic_build": {"scale": args.mimic_scale, "csv_gz_gib": round(size / 2**30, 2), **builds}}
    dest.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
