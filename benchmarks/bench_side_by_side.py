"""A version's fits one after another against side by side (docs/pipeline.md, "Fits side by side").

    python benchmarks/bench_side_by_side.py [--data data/synthetic] [--out FILE]

Trains the same version twice with ``train_version`` (the default presets, automatic budget), once
with ``workers=1`` (one after another in this process, PyTorch's threads) and once with the
automatic plan (one worker process a CPU), each into its own temporary models folder, in one
process one after the other. Records each run's wall seconds, its fits' seconds and the ratio.
Without ``--data`` it writes the main job's synthetic data (n = 40,000, seed 0) to a temporary
folder first. Writes benchmarks/results/side_by_side.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).parent / "results"


def run(data: Path, models_root: Path, workers: int | None) -> dict:
    from flows.lib.modeling.train_eval import TrainParams, train_version

    t0 = time.perf_counter()
    version, _ = train_version(data, models_root, "bench", TrainParams(workers=workers))
    wall = time.perf_counter() - t0
    metrics = json.loads((version / "metrics.json").read_text())
    params = json.loads((version / "params.json").read_text())
    return {"wall_s": round(wall, 1), "fit_s": {k: round(v, 1) for k, v in metrics["seconds"].items()},
            "fit_processes": params["fit_processes"],
            "test_auc": {k: round(v["test_auc"], 3) for k, v in metrics["summary"].items() if "test_auc" in v}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, help="a dataset folder (default: the synthetic data, generated)")
    ap.add_argument("--out", type=Path, default=RESULTS / "side_by_side.json")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from cet_model.atomic import write_text
    from cet_model.evaluation import machine

    with tempfile.TemporaryDirectory(prefix="cet-sbs-") as tmp:
        data = args.data
        if data is None:
            from flows.lib.standin import synthetic

            n = 40_000
            data = synthetic.write(Path(tmp) / "synthetic", mode="reference", n=n, seed=0,
                                   split_sizes=(n * 6 // 10, n * 2 // 10, n - n * 6 // 10 - n * 2 // 10))
        res = {"data": str(args.data or "synthetic reference, n = 40,000, seed 0")}
        res["one_after_another"] = run(Path(data), Path(tmp) / "one", 1)
        print("one after another:", res["one_after_another"], flush=True)
        res["side_by_side"] = run(Path(data), Path(tmp) / "side", None)
        print("side by side:", res["side_by_side"], flush=True)
    res["ratio"] = round(res["side_by_side"]["wall_s"] / res["one_after_another"]["wall_s"], 3)
    res["machine"] = machine()
    res["command"] = "python benchmarks/bench_side_by_side.py" + (f" --data {args.data}" if args.data else "")
    write_text(args.out, json.dumps(res, indent=2) + "\n")
    print(f"side by side / one after another: {res['ratio']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
