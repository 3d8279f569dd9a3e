"""Does a fit use a second torch thread? One preset fitted for a fixed number of epochs with each
thread count, then the same fit twice at once in two one-thread processes.

    python benchmarks/bench_fit_threads.py --data data/mimic [--model CET] [--epochs 30] [--threads 2,1]

Each fit runs in its own process (``--one N``: the fit alone with N threads, printing its
seconds), so thread settings do not carry over. No early stopping (patience above the epochs):
every variant runs the same number of epochs. If two one-thread fits side by side each take about
as long as one fit with two threads, the second thread is idle for this network
(docs/pipeline.md, "Task runners and scale-out", and "The suite's time").
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path


def one(data: Path, model: str, epochs: int, threads: int) -> float:
    import torch

    torch.set_num_threads(threads)
    from cet_model.dataset import load_dataset
    from cet_model.presets import fit_preset

    ds = load_dataset(data)
    t0 = time.perf_counter()
    fit_preset(model, ds.train, ds.val, max_epochs=epochs, patience=epochs + 1)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="dataset folder")
    ap.add_argument("--model", default="CET", help="preset (default %(default)s)")
    ap.add_argument("--epochs", type=int, default=30, help="epochs per fit (default %(default)s)")
    ap.add_argument("--threads", default="2,1", help="thread counts of the single fits (default %(default)s)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:
        print(f"{one(args.data, args.model, args.epochs, args.one):.2f}", flush=True)
        return 0

    def start(threads: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, __file__, "--data", str(args.data), "--model", args.model,
                                 "--epochs", str(args.epochs), "--one", str(threads)],
                                stdout=subprocess.PIPE, text=True)

    def seconds(proc: subprocess.Popen) -> float:
        out, _ = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"a fit failed (exit {proc.returncode})")
        return float(out.strip().splitlines()[-1])

    for threads in (int(t) for t in args.threads.split(",")):
        print(f"{args.model}, {args.epochs} epochs, alone with {threads} thread(s): {seconds(start(threads)):.1f} s",
              flush=True)
    pair = [start(1), start(1)]
    both = [seconds(p) for p in pair]
    print(f"{args.model}, {args.epochs} epochs, two one-thread fits side by side: "
          f"{both[0]:.1f} s and {both[1]:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
