"""Issue 16 §5: the Reddit build end to end at scale under a memory cap, on the thread and the
Dask task runner, and the peak memory of a CET fit whose comment embeddings are memory-mapped.

    python benchmarks/reddit_at_scale.py [--users 62000] [--cap-gib 4] [--runners threads,dask]
                                         [--fit-rows 10000,50000] [--keep DIR]

1. Generate the Pushshift stand-in dumps for ``--users`` users (``python -m flows.reddit
   generate``), then, for each runner, one run of the ``build-reddit-features`` flow on them (the
   RS and RC scans, the embedding and the dataset: the flow's own tasks); each in a child
   process inside a memory cgroup of ``--cap-gib`` (a container's limit; Dask's worker
   processes are in it too). A real Prefect
   server runs on 127.0.0.1 (outside the cap), as Dask needs. The parent samples every 0.2 s
   the summed RSS of every process in the cgroup; each stage's wall time comes from the
   server's task runs, its peak from the samples inside its window. Each runner starts from an
   empty work folder (no shared embedding cache); the two datasets must be byte-identical (one
   pseudonymisation key for both).
2. Fit: CET (the product default, 2 epochs: memory does not depend on the number of epochs) on
   the first k training users of the threads build, for k in ``--fit-rows``, in a child each:
   ``streamed`` reads the embeddings memory-mapped one batch at a time (``CommentInputs``, what
   the flows do); ``in-memory`` flattens them into one matrix first (what they did before).
   Peak RSS is the child's own (wait4 rusage).

Needs a writable cgroup v1 memory controller (/sys/fs/cgroup/memory) for the cap; without one
the build runs uncapped and the JSON says so. With ``--keep DIR`` holding dumps of the same
``--users`` from an earlier run, they are reused (and that run's generation figures kept). Writes
benchmarks/results/reddit_at_scale.json.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bounded_memory import CGROUP_V1, cgroup_available  # noqa: E402

STAGES = {  # task name -> stage
    "scan-submissions": "scan", "combine-submissions": "scan", "scan-comments": "scan",
    "embed-and-build-reddit-dataset": "embed + dataset",
}


# --- children ------------------------------------------------------------------------------------
def child_build(runner: str, dumps: str, out: str, work: str) -> dict:
    """Run the flow; return each task run's name and [start, end] in epoch seconds."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.lib.flow_params import RedditBuildParams
    from flows.lib.infra.runners import with_runner
    from flows.reddit import build_reddit_features

    flow = with_runner(build_reddit_features, runner, 2)
    state = flow(RedditBuildParams(out=out, work_dir=work, dumps=dumps, device="cpu"), return_state=True)
    if not state.is_completed():
        raise RuntimeError(f"flow ended {state.type}: {state.message}")
    runs, flt = [], FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))
    with get_client(sync_client=True) as client:
        while True:  # the API returns at most 200 at a time
            page = client.read_task_runs(flow_run_filter=flt, limit=200, offset=len(runs))
            runs += page
            if len(page) < 200:
                break
    tasks = [{"name": r.name,
              "start": r.start_time.timestamp(), "end": r.end_time.timestamp()} for r in runs
             if r.start_time and r.end_time]
    manifest = json.loads((Path(out) / "manifest.json").read_text())
    return {"tasks": tasks, "cohort_users": sum(manifest["split_sizes"].values()),
            "comments": manifest["embedding"]["texts"], "distinct_comments": manifest["embedding"]["unique"],
            "dump_lines": sum(s.get("lines", 0) for s in manifest["scan"])}


def child_fit(data: str, rows: int, mode: str) -> dict:
    import numpy as np

    from cet_model.comments import CommentInputs, flatten_inputs
    from cet_model.dataset import Split, load_dataset
    from cet_model.presets import fit_preset

    def head(split: Split, k: int) -> Split:
        return split.take(np.arange(min(k, len(split))))

    ds = load_dataset(data)
    tr, va, te = head(ds.train, rows), ds.val, ds.test

    def inputs(split):
        return (
            flatten_inputs(split.X, split.sequences) if mode == "in-memory" else CommentInputs(split.X, split.sequences)
        )
    t0 = time.perf_counter()
    x_tr, x_va, x_te = inputs(tr), inputs(va), inputs(te)
    model = fit_preset("CET", tr, va, max_epochs=2, patience=2, x_train=x_tr, x_val=x_va, device="cpu")
    p = model.predict_occurrence(x_te)
    return {"train_rows": len(tr), "val_rows": len(va), "test_rows": len(te), "fit_predict_s":
            round(time.perf_counter() - t0, 1), "sequences_file_gib":
            round(os.path.getsize(Path(data) / "sequences.npy") / 2**30, 2), "test_p_mean": float(np.mean(p))}


# --- parent --------------------------------------------------------------------------------------
def rss_of(pids) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


def run_capped(name: str, cmd: list[str], root: Path, cap: int | None, env: dict) -> tuple[dict, list, str]:
    """Run ``cmd`` in a memory cgroup of ``cap`` bytes (None: uncapped), sampling the summed RSS
    of every process in it; returns (result, samples [(epoch s, bytes)], stdout)."""
    group = None
    if cap is not None:
        group = CGROUP_V1 / f"cet-scale-{os.getpid()}-{name}"
        group.mkdir()
        (group / "memory.limit_in_bytes").write_text(str(cap))

    def enter():
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    samples: list[tuple[float, int]] = []
    log = open(root / f"{name}.log", "w")
    t0 = time.time()
    proc = subprocess.Popen(cmd, preexec_fn=enter, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
    done = threading.Event()

    def sample():
        while not done.is_set():
            pids = (group / "cgroup.procs").read_text().split() if group is not None else [str(proc.pid)]
            samples.append((time.time(), rss_of(pids)))
            time.sleep(0.2)
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, _ = proc.communicate()
    done.set()
    sampler.join()
    log.close()
    result = {"exit": proc.returncode, "wall_s": round(time.time() - t0, 1),
              "peak_rss_sum_gib": round(max(r for _, r in samples) / 2**30, 2), "t0": t0}
    if group is not None:
        result["cgroup_peak_gib"] = round(int((group / "memory.max_usage_in_bytes").read_text()) / 2**30, 2)
        result["cgroup_limit_hits"] = int((group / "memory.failcnt").read_text())
        group.rmdir()
    if proc.returncode != 0:
        result["log_tail"] = (root / f"{name}.log").read_text()[-3000:]
    return result, samples, stdout


def run_generate(users: int, root: Path, cap: int | None, env: dict) -> dict:
    result, _, _ = run_capped("generate", [sys.executable, "-m", "flows.reddit", "generate", "--users", str(users),
                                           "--out", str(root / "dumps"), "--force"], root, cap, env)
    result.pop("t0")
    result["dumps_zstd_gib"] = round(sum(p.stat().st_size for p in (root / "dumps").rglob("*.zst")) / 2**30, 2)
    return result


def run_build(runner: str, root: Path, cap: int | None, env: dict) -> dict:
    out, work = root / f"reddit-{runner}", root / f"work-{runner}"
    cmd = [sys.executable, __file__, "--stage", "build", "--runner", runner, "--dumps", str(root / "dumps"),
           "--out", str(out), "--work", str(work)]
    result, samples, stdout = run_capped(f"build-{runner}", cmd, root, cap, env)
    t0 = result.pop("t0")
    result = {"runner": runner if runner == "threads" else f"{runner} (LocalCluster, 2 worker processes)"} | result
    if result["exit"] != 0:
        return result
    info = json.loads(stdout.strip().splitlines()[-1])
    stages: dict[str, dict] = {}
    for t in info.pop("tasks"):
        stage = next((v for k, v in STAGES.items() if t["name"].startswith(k)), None)  # names end in -<hex>
        if stage is None:
            continue
        s = stages.setdefault(stage, {"start": t["start"], "end": t["end"], "tasks": 0})
        s["start"], s["end"], s["tasks"] = min(s["start"], t["start"]), max(s["end"], t["end"]), s["tasks"] + 1
    for s in stages.values():
        inside = [r for ts, r in samples if s["start"] <= ts <= s["end"]]
        s["wall_s"] = round(s["end"] - s["start"], 1)
        s["peak_rss_sum_gib"] = round(max(inside, default=0) / 2**30, 2)
        s["began_s"] = round(s.pop("start") - t0, 1)
        s.pop("end")
    result |= info | {"stages": stages, "dataset": str(out)}
    return result


def run_fit(data: Path, rows: int, mode: str, env: dict) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--stage", "fit", "--data", str(data), "--rows", str(rows),
                             "--mode", mode], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    result = {"mode": mode, "rows_asked": rows, "exit": os.waitstatus_to_exitcode(status),
              "wall_s": round(time.perf_counter() - t0, 1), "peak_rss_gib": round(usage.ru_maxrss / 2**20, 2)}
    try:
        result |= json.loads(stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        result["stderr_tail"] = stderr[-2000:]
    return result


def same_dataset(a: Path, b: Path) -> bool:
    names = ["manifest.json", "features.parquet", "events.parquet", "sequences.npy"]
    return all(filecmp.cmp(a / n, b / n, shallow=False) for n in names)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=62_000, help="generated users (62,000 "
                                                              "give about 50,000 in the cohort)")
    ap.add_argument("--cap-gib", type=float, default=4.0)
    ap.add_argument("--runners", default="threads,dask")
    ap.add_argument("--fit-rows", default="10000,50000", help="training users for the fits (capped at the split)")
    ap.add_argument("--keep", type=Path, help="keep the dumps and builds here: a new or empty folder, or one an "
                                               "earlier run kept")
    ap.add_argument("--stage", choices=["build", "fit"], help=argparse.SUPPRESS)
    ap.add_argument("--runner", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--dumps", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--rows", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.stage == "build":
        print(json.dumps(child_build(args.runner, args.dumps, args.out, args.work)))
        return 0
    if args.stage == "fit":
        print(json.dumps(child_fit(args.data, args.rows, args.mode)))
        return 0

    sys.path.insert(0, str(ROOT / "tests"))
    from prefect_server import _start_server, _stop

    from cet_model.evaluation import machine

    dest = ROOT / "benchmarks" / "results" / "reddit_at_scale.json"
    from flows.lib.infra.folders import scratch_folder

    # --keep: a folder this benchmark made (it removes its build folders there to start cold)
    try:
        root = scratch_folder(args.keep, "reddit_at_scale.py") if args.keep else None
    except FileExistsError as exc:
        ap.error(str(exc))
    root = root or Path(tempfile.mkdtemp(prefix="cet-scale-"))
    capped = cgroup_available()
    cap = int(args.cap_gib * 2**30) if capped else None
    home = root / "prefect-home"
    home.mkdir(exist_ok=True)
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server, _ = _start_server(home, port)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CET_")}
    env |= {"PREFECT_API_URL": f"http://127.0.0.1:{port}/api", "PREFECT_HOME": str(home),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1", "CET_DEVICE": "cpu",
            "CET_DATA_DIR": str(root / "data"), "CET_PSEUDONYM_KEY": "reddit-at-scale-benchmark-key"}
    result = {"users": args.users, "cap": f"memory cgroup {args.cap_gib} GiB" if capped else "none (no cgroup)",
              "machine": machine(), "date": time.strftime("%Y-%m-%d"), "builds": [], "fits": []}
    try:
        previous = json.loads(dest.read_text()) if dest.is_file() else {}
        try:
            made = json.loads((root / "dumps" / "standin.json").read_text()).get("n_users")
        except (OSError, json.JSONDecodeError):
            made = None
        if made == args.users and previous.get("users") == args.users and previous.get("generate", {}).get("exit") == 0:
            result["generate"] = previous["generate"] | {"reused_from_an_earlier_run": True}  # --keep DIR
        else:
            result["generate"] = run_generate(args.users, root, cap, env)
        print("generate", json.dumps(result["generate"]), flush=True)
        for runner in [r.strip() for r in args.runners.split(",") if r.strip()]:
            for old in (root / f"reddit-{runner}", root / f"work-{runner}"):
                shutil.rmtree(old, ignore_errors=True)  # every build starts cold
            r = run_build(runner, root, cap, env)
            print(json.dumps(r, indent=1), flush=True)
            result["builds"].append(r)
    finally:
        _stop(server)
    ok = result["generate"]["exit"] == 0 and all(b["exit"] == 0 for b in result["builds"])
    if ok and len(result["builds"]) > 1:
        result["datasets_identical"] = same_dataset(*(Path(b["dataset"]) for b in result["builds"]))
        ok &= result["datasets_identical"]
    if ok:
        data = Path(result["builds"][0]["dataset"])
        for rows in [int(x) for x in args.fit_rows.split(",") if x.strip()]:
            for mode in ("streamed", "in-memory"):
                r = run_fit(data, rows, mode, env)
                print(json.dumps(r), flush=True)
                result["fits"].append(r)
                ok &= r["exit"] == 0
    tmp = dest.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=2))
    os.replace(tmp, dest)
    print(f"wrote {dest}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
