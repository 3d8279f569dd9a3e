"""Does ``flows.train explain`` find the inputs the MIMIC stand-in's generator planted?

    python benchmarks/importance_planted.py [--scale 0.05] [--seed 0] [--work DIR]

Runs the product's own commands, as a user would, on a generated MIMIC-III stand-in: ``flows.mimic
generate`` → ``flows.mimic build`` → ``flows.train evaluate --models CET`` (defaults) →
``flows.train explain --out importance.csv`` (the validation split, 5 shuffles). The generator
records which latent factors drive each event's occurrence, and which feature items carry each
factor (``standin.json``: ``events.<e>.occurrence.factors``, ``factors.<k>``). Per event, the
items of its occurrence factors are the planted inputs of *whether*; the probe reports where
explain's AUC importance for that event ranks them among all the items (precision at k, k = the
number of planted items), and over all events the share of the planted items among the top k of
the mean over events. The items of its timing factors (``events.<e>.timing.factors``) are the
planted inputs of *when*, judged the same way by C (timing) importance (the event's time is
also moved by its driver event's occurrence, whose items are reported beside). Writes
``benchmarks/results/importance_planted.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import machine  # noqa: E402


def planted_items(standin: dict, head: str = "occurrence") -> dict[str, set[str]]:
    """{event: the items (``lab_51221``, ``chart_211``) of the factors that drive its ``head``
    ("occurrence" or "timing")}."""
    out = {}
    for event, plan in standin["events"].items():
        items = set()
        for k in plan[head]["factors"]:
            f = standin["factors"][str(k)]
            items.add(f"lab_{f['lab']}")
            items.update(f"chart_{c}" for c in f["chart"])
        out[event] = items
    return out


def judge(importance: pl.DataFrame, planted: dict[str, set[str]], score: str = "auc") -> dict:
    auc = importance.filter(pl.col("score") == score)
    n_inputs = auc["input"].n_unique()
    per_event = {}
    for event, items in planted.items():
        rows = auc.filter(pl.col("event") == event).sort("importance", descending=True, nulls_last=True)
        order = rows["input"].to_list()
        present = [i for i in items if i in order]  # a planted chart item may not be among the built features
        ranks = sorted(order.index(i) + 1 for i in present)
        k = len(present)
        per_event[event] = {"planted": sorted(present), "ranks": ranks,
                            "precision_at_k": sum(r <= k for r in ranks) / k if k else None,
                            "top": order[:k]}
    all_items = set().union(*planted.values())
    mean = auc.group_by("input").agg(pl.col("importance").mean()).sort("importance", descending=True)
    order = mean["input"].to_list()
    present = [i for i in all_items if i in order]
    k = len(present)
    return {"inputs": n_inputs, "per_event": per_event,
            "mean_precision_at_k": float(np.mean([v["precision_at_k"] for v in per_event.values()
                                                  if v["precision_at_k"] is not None])),
            "overall": {"planted": sorted(present), "k": k,
                        "precision_at_k": sum(i in all_items for i in order[:k]) / k,
                        "largest_unplanted": float(mean.filter(~pl.col("input").is_in(list(all_items)))
                                                   ["importance"].max())}}


def run(cmd: list[str], env: dict, log: Path) -> float:
    t0 = time.perf_counter()
    with open(log, "a") as f:
        subprocess.run(cmd, env=env, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, check=True)
    return round(time.perf_counter() - t0, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", help="working folder (default: a temporary one, removed)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "importance_planted.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, CET_DATA_DIR=str(work / "data"), CET_MODELS_DIR=str(work / "models"),
                   PREFECT_HOME=str(work / "prefect"))
        py, log = sys.executable, work / "commands.log"
        seconds = {
            "generate": run([py, "-m", "flows.mimic", "generate", "--scale", str(args.scale), "--seed",
                             str(args.seed), "--out", str(work / "raw"), "--compresslevel", "1"], env, log),
            "build": run([py, "-m", "flows.mimic", "build", "--mimic-dir", str(work / "raw"), "--out",
                          str(work / "data" / "mimic")], env, log),
            "train": run([py, "-m", "flows.train", "evaluate", "--dataset", "mimic", "--models", "CET"], env, log),
            "explain": run([py, "-m", "flows.train", "explain", "--dataset", "mimic", "--out",
                            str(work / "importance.csv")], env, log),
        }
        standin = json.loads((work / "raw" / "standin.json").read_text())
        manifest = json.loads((work / "data" / "mimic" / "manifest.json").read_text())
        importance = pl.read_csv(work / "importance.csv")
        result = judge(importance, planted_items(standin))
        timing = judge(importance, planted_items(standin, "timing"), "ci_timing")
        occurrence_of = planted_items(standin)
        observed = {e: int(importance.filter((pl.col("event") == e) & (pl.col("score") == "ci_timing"))
                           ["observed"][0]) for e in standin["events"]}
        for e, v in timing["per_event"].items():
            v["observed"] = observed[e]
            v["baseline"] = float(importance.filter((pl.col("event") == e) & (pl.col("score") == "ci_timing"))
                                  ["baseline"][0])
            driver = standin["events"][e]["timing"]["driver_event"]
            order = (importance.filter((pl.col("event") == e) & (pl.col("score") == "ci_timing"))
                     .sort("importance", descending=True)["input"].to_list())
            v["driver_occurrence_ranks"] = sorted(order.index(i) + 1 for i in occurrence_of[driver] if i in order)
    out = {"scale": args.scale, "seed": args.seed, "split_sizes": manifest["split_sizes"], "seconds": seconds,
           "machine": machine(), **result, "timing": timing}
    write_text(Path(args.out), json.dumps(out, indent=2) + "\n")
    print(f"{result['inputs']} inputs; per event, the planted items among the top k: mean precision "
          f"{result['mean_precision_at_k']:.2f}")
    for event, v in result["per_event"].items():
        print(f"  {event:13s} planted {v['planted']} at ranks {v['ranks']} (precision@{len(v['ranks'])} "
              f"{v['precision_at_k']:.2f})")
    o = result["overall"]
    print(f"over events: {o['precision_at_k']:.2f} of the top {o['k']} are planted; the largest unplanted mean "
          f"importance {o['largest_unplanted']:+.4f}")
    print("when (C (timing) importance; the event's own timing items, and its driver's occurrence items):")
    for event, v in timing["per_event"].items():
        print(f"  {event:13s} {v['observed']:4d} observed, C (timing) {v['baseline']:.3f}: timing items at ranks "
              f"{v['ranks']} (precision@{len(v['ranks'])} {v['precision_at_k']:.2f}); driver's occurrence items at "
              f"{v['driver_occurrence_ranks']}")
    print(f"seconds {seconds}")


if __name__ == "__main__":
    main()
