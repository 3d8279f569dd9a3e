"""Markdown tables of an experiment's result, in the paper's layout.

    >>> fmt([0.81, 0.83])
    '0.82 ± 0.01'
"""

from __future__ import annotations

import numpy as np

from cet_model.choices import CI_RMST, METRICS
from cet_model.reference import REFERENCE
from cet_model.summary import average_over_tasks, mean_std
from flows.lib.modeling.render import markdown

HEADERS = {"auc": "AUC", "mrae": "MRAE", "ci": "CI", "ece": "ECE", "uno_c": "Uno's C", "ibs": "IBS",
           CI_RMST: "C (RMST)"}


def columns(result: dict) -> tuple[str, ...]:
    """The paper's columns (METRICS), then C (RMST) where some model has it: on data without the
    true occurrence (AUC and ECE empty) it is how the models' survival ranking compares. Results
    recorded before the harness scored it keep the paper's columns.

    >>> columns({"models": {"CET": {"tasks": {"T1": {"auc": [0.8]}}}}})
    ('auc', 'mrae', 'ci', 'ece', 'uno_c', 'ibs')
    >>> columns({"models": {"CET": {"tasks": {"T1": {"ci_rmst": [0.7]}}}}})[-1]
    'ci_rmst'
    """
    has_rmst = any(np.isfinite(v).any() for entry in result["models"].values()
                   for task in entry["tasks"].values() for v in [np.asarray(task.get(CI_RMST, []), float)])
    return (*METRICS, CI_RMST) if has_rmst else METRICS


def fmt(values) -> str:
    """'mean ± std' over runs (two decimals; scientific beyond 1,000); '' when undefined."""
    mean, std = mean_std(values)
    if np.isnan(mean):
        return ""
    if abs(mean) >= 1e3:
        return f"{mean:.1e} ± {std:.1e}"
    return f"{mean:.2f} ± {std:.2f}"


def table_markdown(result: dict, title: str) -> str:
    """The paper's table layout: model, task, then every metric (mean ± std over runs)."""
    config = result.get("config", {})
    runs = config.get("runs", "?")
    fewer = {m: n for m, n in config.get("model_runs", {}).items() if n != runs and m != REFERENCE}
    note = ("" if not fewer else " Fewer runs for " + ", ".join(f"{m} ({n})" for m, n in fewer.items()) + ".")
    note += "".join(f" {m} left out: {why}." for m, why in result.get("skipped", {}).items())
    if REFERENCE in result["models"]:
        note += (f" {REFERENCE}: a Cox proportional hazards model per event on the standardised training "
                 "features, fitted once (it has no seed); its CI and Uno's C rank its linear predictor.")
    shown = columns(result)
    rmst = (" C (RMST): Harrell's C of the restricted mean event-free time up to the 0.9 quantile of the "
            "training follow-up (the population's, who never has the event included)." if CI_RMST in shown else "")
    lines = [f"# {title}", "", f"Mean ± std over {runs} runs on the test split.{note} "
             "AUC against the true occurrence c; ET's AUC from the rank of its predicted median time. "
             "MRAE, Harrell's CI and Uno's C of predicted median times; ECE of P(ever); IBS: integrated "
             f"Brier score of the population survival curves (lower is better).{rmst}",
             ""]
    table = [["Model", "Task", *(HEADERS[m] for m in shown)]]
    for name, entry in result["models"].items():
        tasks = dict(entry["tasks"])
        rows = list(tasks.items()) + [("Avg", {m: average_over_tasks(tasks, m) for m in shown})]
        table += [[name, task, *(fmt(vals.get(m, [])) for m in shown)] for task, vals in rows]
    lines.append(markdown(table))
    m = result.get("machine", {})
    lines += ["", f"Machine: {m.get('processor')}, {m.get('cpu_count')} cores, torch {m.get('torch')}, "
              f"CUDA: {m.get('cuda')}."]
    return "\n".join(lines) + "\n"


def average_table(result: dict) -> str:
    """One row per model: the per-run average over tasks, then mean ± std over runs."""
    shown = columns(result)
    table = [["Model", *(HEADERS[m] for m in shown), "runs", "s / fit"]]
    for name, entry in result["models"].items():
        secs = entry.get("seconds", [])
        table.append([name, *(fmt(average_over_tasks(entry["tasks"], m)) for m in shown), str(len(secs)),
                      f"{sum(secs) / len(secs):.1f}" if secs else ""])
    return markdown(table)
