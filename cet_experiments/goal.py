"""The model issue's occurrence goal, read from a report's metrics.json.

    python -m cet_experiments goal docs/results/mimic-standin [--model CET] [--baselines ET,BC] [--oracle Oracle]

The goal (issue 14, "Evidence"): CET − max(ET, BC) ≥ ½ (Oracle − max(ET, BC)) in test AUC averaged
over tasks, CET never below the better baseline, and CET's ECE not worse than BC's. This prints,
per run (models paired by seed) and over the runs' means, the better baseline, the share of the
gap between it and the oracle that the model closes, and the ECE of the model and of the baselines,
so that every table's goal figure comes from one command.

>>> round(share_of_gap(0.80, 0.76, 0.84), 3)
0.5
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cet_model.summary import average_over_tasks


def share_of_gap(model: float, baseline: float, oracle: float) -> float:
    """(model − baseline) / (oracle − baseline): 1 at the oracle, 0 at the baseline, < 0 below it."""
    return (model - baseline) / (oracle - baseline)


def _per_seed(result: dict, name: str, metric: str) -> dict[int, float]:
    if name not in result["models"]:
        raise ValueError(f"the report has no {name!r} row; it has {sorted(result['models'])}")
    values = average_over_tasks(result["models"][name]["tasks"], metric)
    seeds = result.get("config", {}).get("seeds", {}).get(name, list(range(len(values))))
    if len(seeds) != len(values):
        raise ValueError(f"{name}: {len(values)} runs but {len(seeds)} seeds recorded")
    return dict(zip(seeds, values, strict=True))


def goal_rows(result: dict, model: str = "CET", baselines: tuple[str, ...] = ("ET", "BC"),
              oracle: str = "Oracle") -> tuple[list[dict], dict]:
    """Per seed that every named row has: AUC of each row, the better baseline, the share, ECE;
    then the same over the runs' means (the better baseline is the one with the higher mean).

    >>> t = lambda aucs, eces: {"tasks": {"T": {"auc": aucs, "ece": eces}}}
    >>> r = {"models": {"CET": t([0.80, 0.81], [0.04, 0.05]), "BC": t([0.76, 0.77], [0.2, 0.2]),
    ...                 "ET": t([0.70, 0.70], [0.05, 0.05]), "Oracle": t([0.84, 0.83], [0.01, 0.01])}}
    >>> runs, over = goal_rows(r)
    >>> [(x["seed"], x["better"], round(x["share"], 3)) for x in runs]
    [(0, 'BC', 0.5), (1, 'BC', 0.667)]
    >>> over["better"], round(over["share"], 3), over["met"]
    ('BC', 0.571, True)
    """
    names = (model, *baselines, oracle)
    if "BC" not in baselines:
        raise ValueError(f"the goal compares {model}'s ECE with BC's: name BC among the baselines (got "
                         f"{list(baselines)})")
    auc = {n: _per_seed(result, n, "auc") for n in names}
    ece = {n: _per_seed(result, n, "ece") for n in (model, *baselines)}
    seeds = sorted(set.intersection(*(set(v) for v in auc.values())))
    if not seeds:
        raise ValueError(f"no seed was run for every one of {', '.join(names)}")

    def row(values: dict, eces: dict, **extra) -> dict:
        better = max(baselines, key=lambda b: values[b])
        share = share_of_gap(values[model], values[better], values[oracle])
        return {**extra, "auc": values, "ece": eces, "better": better, "share": share,
                "lead": values[model] - values[better]}

    runs = [row({n: auc[n][s] for n in names}, {n: ece[n][s] for n in ece}, seed=s) for s in seeds]
    mean = {n: float(np.mean([auc[n][s] for s in seeds])) for n in names}
    mean_ece = {n: float(np.mean([ece[n][s] for s in seeds])) for n in ece}
    over = row(mean, mean_ece, runs=len(seeds))
    over["below_in"] = sum(r["lead"] < 0 for r in runs)
    over["met"] = bool(over["share"] >= 0.5 and over["below_in"] == 0 and mean_ece[model] <= mean_ece["BC"])
    return runs, over


def goal_text(result: dict, model: str = "CET", baselines: tuple[str, ...] = ("ET", "BC"),
              oracle: str = "Oracle") -> str:
    """The lines ``python -m cet_experiments goal`` prints."""
    runs, over = goal_rows(result, model, baselines, oracle)
    names = (model, *baselines, oracle)
    head = "seed  " + "  ".join(f"{n:>8}" for n in names) + "  better  share   lead  " + \
        "  ".join(f"ECE {n:<5}" for n in (model, *baselines))
    lines = [head]
    for r in runs:
        lines.append(f"{r['seed']:>4}  " + "  ".join(f"{r['auc'][n]:8.4f}" for n in names)
                     + f"  {r['better']:>6}  {100 * r['share']:4.1f} %  {r['lead']:+.4f}  "
                     + "  ".join(f"{r['ece'][n]:9.4f}" for n in (model, *baselines)))
    shares = [r["share"] for r in runs]
    lines.append("mean  " + "  ".join(f"{over['auc'][n]:8.4f}" for n in names)
                 + f"  {over['better']:>6}  {100 * over['share']:4.1f} %  {over['lead']:+.4f}  "
                 + "  ".join(f"{over['ece'][n]:9.4f}" for n in (model, *baselines)))
    ds = result.get("dataset", {})
    n_train = ds.get("split_sizes", {}).get("train")
    lines += ["", f"{ds.get('name', '?')} ({f'{n_train:,}' if isinstance(n_train, int) else '?'} training rows), "
              f"{over['runs']} runs: {model} closes {100 * over['share']:.1f} % of the gap between "
              f"{over['better']} and {oracle} (runs {100 * min(shares):.0f}–{100 * max(shares):.0f} %), "
              f"below the better baseline in {over['below_in']} run(s); "
              f"goal (≥ 50 %, never below, ECE ≤ BC's): {'met' if over['met'] else 'missed'}"]
    return "\n".join(lines)


def goal_from_folder(folder: Path, **kwargs) -> str:
    path = Path(folder) / "metrics.json"
    if not path.is_file():
        raise ValueError(f"{path}: no such report (a folder written by `python -m cet_experiments dataset`)")
    try:
        result = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not a report's JSON ({err})") from None
    if not isinstance(result, dict) or not isinstance(result.get("models"), dict):
        raise ValueError(f"{path}: no 'models' table (a folder written by `python -m cet_experiments dataset`)")
    return goal_text(result, **kwargs)
