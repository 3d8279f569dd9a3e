"""Would the main job train faster with its fits in parallel processes, one torch thread each?

    python benchmarks/bench_train_threads.py --data data/synthetic [--epochs 8] [--out
    benchmarks/results/train_threads.json]

On a dataset folder (the main job's synthetic data by default), fits each model preset for a
fixed number of epochs (early stopping off) and times, on this machine:

- each preset alone with 1 and with 2 torch threads;
- ``CET-paper`` and the other presets as two processes side by side, one thread each (the
  schedule a process pool would use: the 100-sample Gumbel fit on one core, the rest on the
  other), against all of them in sequence with 2 threads (what ``train_version`` does today).

Each timing is its own child process (``torch.set_num_threads`` is per process).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"
PRESETS = ("CET", "CET-paper", "ET", "BC", "Oracle")


def child(threads: int, presets: str, data: str, epochs: int) -> None:
    import torch

    torch.set_num_threads(threads)
    sys.path.insert(0, str(ROOT))
    from cet_model.dataset import load_dataset
    from cet_model.presets import fit_preset

    ds = load_dataset(data)
    t0 = time.perf_counter()
    for name in presets.split(","):
        fit_preset(name, ds.train, ds.val, max_epochs=epochs, patience=epochs)
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def spawn(threads: int, presets: list[str], data: str, epochs: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--child", str(threads), ",".join(presets),
                             "--data", data, "--epochs", str(epochs)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def seconds(proc: subprocess.Popen) -> float:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"child exited with {proc.returncode}")
    return round(json.loads(out.strip().splitlines()[-1])["seconds"], 2)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="data/synthetic", help="dataset folder (default %(default)s)")
    ap.add_argument("--epochs", type=int, default=8, help="epochs per fit (default %(default)s)")
    ap.add_argument("--out", type=Path, default=RESULTS / "train_threads.json")
    ap.add_argument("--child", nargs=2, metavar=("THREADS", "PRESETS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(int(args.child[0]), args.child[1], args.data, args.epochs)
        return 0
    from cet_model.atomic import write_text
    from cet_model.evaluation import machine

    res: dict = {"data": args.data, "epochs": args.epochs, "alone": {}}
    for name in PRESETS:
        res["alone"][name] = {f"{t}_threads": seconds(spawn(t, [name], args.data, args.epochs)) for t in (2, 1)}
        print(name, res["alone"][name], flush=True)
    rest = [p for p in PRESETS if p != "CET-paper"]
    res["sequential_2_threads"] = seconds(spawn(2, list(PRESETS), args.data, args.epochs))
    a, b = spawn(1, ["CET-paper"], args.data, args.epochs), spawn(1, rest, args.data, args.epochs)
    side = {"CET-paper": seconds(a), "rest": seconds(b)}
    side["slower_of_the_two"] = max(side.values())  # timed inside each child, as the sequential run is
    res["side_by_side_1_thread"] = side
    res["parallel_over_sequential"] = round(side["slower_of_the_two"] / res["sequential_2_threads"], 3)
    res["machine"] = machine()
    res["command"] = "python benchmarks/bench_train_threads.py " + " ".join(argv if argv is not None else sys.argv[1:])
    write_text(args.out, json.dumps(res, indent=2))  # appears whole
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
