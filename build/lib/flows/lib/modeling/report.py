"""The pipeline's markdown report and its PNG figures.

Per dataset: a bar chart of test AUC per event and model, and CET's calibration curve
(observed occurrence frequency vs predicted P(ever), test split). ``report.md`` links the
figures and holds the metric tables. Only aggregates are drawn: no row of any dataset
reaches the report.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from cet_model.atomic import save_figure as _save  # noqa: E402
from cet_model.atomic import write_text  # noqa: E402
from cet_model.dataset import load_dataset  # noqa: E402
from cet_model.evaluation import model_inputs  # noqa: E402
from cet_model.metrics import calibration_curve  # noqa: E402
from cet_model.models import load_model  # noqa: E402
from flows.lib.infra.crash import crash_point  # noqa: E402
from flows.lib.modeling.train_eval import metric_rows  # noqa: E402


def auc_figure(version: Path, title: str, path: Path) -> Path:
    metrics = json.loads((version / "metrics.json").read_text())["test"]
    models = list(metrics)
    tasks = list(next(iter(metrics.values())))
    fig, ax = plt.subplots(figsize=(max(5, 0.8 * len(tasks) + 2), 3.2))
    width = 0.8 / len(models)
    for i, m in enumerate(models):
        vals = [metrics[m][t].get("auc") for t in tasks]
        ax.bar(np.arange(len(tasks)) + i * width, [np.nan if v is None else v for v in vals], width, label=m)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(tasks)) + 0.4 - width / 2, tasks, rotation=30, ha="right")
    ax.set_ylim(0.3, 1.0)
    ax.set_ylabel("test AUC (vs true occurrence)")
    ax.set_title(title)
    ax.legend(fontsize=8, ncol=len(models))
    _save(fig, path)
    return path


def calibration_figure(version: Path, dataset_dir: Path, title: str, path: Path, device: str = "cpu") -> Path:
    ds = load_dataset(dataset_dir)
    te = ds.test
    p = load_model(version / "CET", device=device).predict_occurrence(model_inputs(te))
    fig, ax = plt.subplots(figsize=(4, 4))
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
    for j, e in enumerate(ds.event_names):
        keep = np.ones(len(te), bool) if te.mask is None else te.mask[:, j] == 1
        if len(np.unique(te.C[keep, j])) < 2:
            continue
        obs, pred, _ = calibration_curve(te.C[keep, j], p[keep, j], n_bins=10)
        ax.plot(pred, obs, marker="o", ms=3, lw=1, label=e)
    ax.set_xlabel("predicted P(ever)")
    ax.set_ylabel("observed frequency")
    ax.set_title(title)
    if len(ds.event_names) <= 10:
        ax.legend(fontsize=7)
    _save(fig, path)
    return path


def _table(rows: list[dict]) -> str:
    cols = ["model", "task", "auc", "mrae", "ci", "ece", "uno_c", "ibs"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join("" if r[c] is None else (f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]))
                                       for c in cols) + " |")
    return "\n".join(lines)


HEADLINE_MODELS = ("CET", "CET-paper", "ET", "BC", "Oracle")


def headline_table(entries: list[dict]) -> str:
    """One row per dataset and model (the average over tasks, test split): CET (the default),
    CET-paper, ET, BC and the oracle where the dataset holds the true occurrence."""
    cols = [("auc", "AUC"), ("mrae", "MRAE"), ("ci", "Harrell's C"), ("ece", "ECE"), ("ibs", "IBS")]
    lines = ["| dataset | model | " + " | ".join(h for _, h in cols) + " |", "|---" * (len(cols) + 2) + "|"]
    for e in entries:
        rows = {r["model"]: r for r in metric_rows(Path(e["version"])) if r["task"] == "Avg"}
        for model in HEADLINE_MODELS:
            if model not in rows:
                continue
            cells = ["" if rows[model][c] is None else f"{rows[model][c]:.3f}" for c, _ in cols]
            name = f"**{model}**" if model == "CET" else model
            lines.append(f"| {e['name']} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_report(entries: list[dict], out_dir, device: str = "cpu") -> Path:
    """``entries``: {"name", "dataset", "version", "decision"} per dataset. Writes
    ``out_dir/report.md`` and ``out_dir/<name>-auc.png``, ``<name>-calibration.png``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    parts = ["# CET pipeline report", "",
             "Test-split metrics of one training run per dataset: AUC of P(ever) against the true "
             "occurrence c (ET: by the rank of its predicted median time), MRAE and Harrell's C of "
             "predicted median times, ECE of P(ever), Uno's C and the integrated Brier score (IBS) of "
             "the population survival curves. Figures are PNGs next to this file.", "",
             "## Headline", "", "Average over tasks, test split. **CET** is the product default (exact "
             "marginal likelihood); CET-paper is the paper's model as its original code trained it.", "",
             headline_table(entries), ""]
    for e in entries:
        name, version, dataset = e["name"], Path(e["version"]), Path(e["dataset"])
        auc_png = auc_figure(version, f"{name}: test AUC", out_dir / f"{name}-auc.png")
        cal_png = calibration_figure(version, dataset, f"{name}: CET calibration", out_dir / f"{name}-calibration.png",
                                     device)
        decision = e.get("decision") or {}
        parts += [f"## {name}", "", f"Dataset `{dataset}`; model version `{version}`"
                  # the state, not this run's decision event: a rerun after a crash says the same
                  + ((" (the promoted version)" if decision.get("promoted") else
                      f" (not promoted: {decision.get('reason')})") if decision else "") + ".", "",
                  _table(metric_rows(version)), "",
                  f"![{name} AUC]({auc_png.name}) ![{name} calibration]({cal_png.name})", ""]
    crash_point("report")
    return write_text(out_dir / "report.md", "\n".join(parts))
