"""Reliability §2, at random moments: ``kill -9`` of the full pipeline at N random times, each
rerun resuming from what the killed ones left, and every completed run byte-identical to an
uninterrupted one.

    python benchmarks/random_kills.py [--kills 20] [--seed 0] [--out benchmarks/results/random_kills.json]

The fixed crash points of ``tests/test_crash_consistency.py`` land inside chosen stages; here
the moment is drawn uniformly from (0, T), T the wall time of one uninterrupted run, so a kill
can fall anywhere: during start-up, between tasks, inside DuckDB, a write, a rename, training.
The same small settings as that test (synthetic n = 1,000, MIMIC stand-in 0.001, 150 Reddit
users, 3 epochs) and a real Prefect server on loopback. Rounds: start from an empty folder,
run and kill at a random moment until a run completes; check that its outputs have the sha256
of the uninterrupted run's and that no temporary of a killed run is left; repeat until N kills
landed. After every kill, each dataset folder under its real name must be complete.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.prefect_server import _free_port, _start_server, _stop  # noqa: E402
from tests.test_crash_consistency import LEFTOVER, _env, _outputs  # noqa: E402


def run(root: Path, api_url: str, kill_after: float | None, log_name: str) -> tuple[int, float]:
    """One pipeline run; SIGKILL after ``kill_after`` seconds if still running. (exit, wall)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / log_name, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "flows.full_pipeline"], cwd=root,
                                env=_env(root, api_url, None), stdout=log, stderr=subprocess.STDOUT)
        t0 = time.perf_counter()
        try:
            proc.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        return proc.returncode, time.perf_counter() - t0


def complete_datasets(root: Path) -> list[str]:
    bad = []
    for name in ("synthetic", "mimic", "reddit"):
        d = root / "data" / name
        if d.exists() and not {"manifest.json", "features.parquet", "events.parquet"} <= {p.name for p in d.iterdir()}:
            bad.append(name)
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=20, help="kills that must land in running work (default 20)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "random_kills.json")
    args = ap.parse_args(argv)
    from cet_model.evaluation import machine

    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="cet-kills-"))
    home = tmp / "prefect-home"
    home.mkdir()
    server_proc, server = _start_server(home, _free_port())
    rounds, failures = [], []
    try:
        root = tmp / "run"  # one absolute path for every run: model folders record it
        code, t_clean = run(root, server["url"], None, "clean.log")
        if code != 0:
            raise SystemExit(f"the uninterrupted run failed (exit {code}); see {root / 'clean.log'}")
        want = _outputs(root)
        shutil.rmtree(root)
        print(f"uninterrupted run: {t_clean:.1f} s, {len(want)} outputs", flush=True)
        kills = 0
        while kills < args.kills:
            moments, attempt = [], 0
            while True:
                at = round(rng.uniform(0.0, t_clean), 2)
                attempt += 1
                code, wall = run(root, server["url"], at, f"round{len(rounds)}-{attempt}.log")
                if code == -signal.SIGKILL:
                    kills += 1
                    moments.append(at)
                    bad = complete_datasets(root)
                    if bad:
                        failures.append(f"round {len(rounds)}, kill at {at} s: incomplete dataset folder(s) {bad}")
                    continue
                if code != 0:
                    failures.append(f"round {len(rounds)}: a rerun failed with exit {code} "
                                    f"({root / f'round{len(rounds)}-{attempt}.log'})")
                    break
                got = _outputs(root)
                differ = sorted(k for k in set(want) | set(got) if want.get(k) != got.get(k))
                left = [str(p.relative_to(root)) for p in root.rglob(".*") if LEFTOVER.search(p.name)]
                if differ:
                    failures.append(f"round {len(rounds)}: outputs differ from the uninterrupted run: {differ[:5]}")
                if left:
                    failures.append(f"round {len(rounds)}: temporaries left: {left[:5]}")
                rounds.append({"kills_at_s": moments, "completing_run_s": round(wall, 1),
                               "identical": not differ, "leftovers": len(left)})
                print(f"round {len(rounds)}: killed at {moments} s, then completed in {wall:.1f} s; "
                      f"identical: {not differ}", flush=True)
                break
            shutil.rmtree(root, ignore_errors=True)
            if failures:
                break
    finally:
        _stop(server_proc)
    result = {"kills": sum(len(r["kills_at_s"]) for r in rounds), "rounds": rounds,
              "uninterrupted_s": round(t_clean, 1), "outputs_compared": len(want), "failures": failures,
              "seed": args.seed, "machine": machine(), "date": time.strftime("%Y-%m-%d")}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=2))
    if not failures:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
