"""The paper's figures as PNGs (matplotlib, Agg), from an experiment's result.

- Fig. 1 (synthetic data): predicted occurrence over the two features that drive each
  event (moons: x1, x2 for T1; circles: x3, x4 for T2; other features at 0), for the
  oracle, CET, BC and ET (ET: its score, minus the predicted median time, rescaled to 0..1).
- Fig. 2: test AUC and MRAE per task and model, mean ± std over runs.
- Fig. 3: calibration curves (observed frequency vs predicted P(ever), the first run's
  test predictions), one panel per task, each model's ECE in the legend.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from cet_model.atomic import save_figure as _save  # noqa: E402

GRID = 60
MAP_AXES = {"T1": (0, 1), "T2": (2, 3)}  # synthetic: the features behind each event


def occurrence_grid(x: np.ndarray, axes: tuple[int, int], n: int = GRID):
    """A grid over two features (their 1st..99th percentiles), the others at 0."""
    a = np.linspace(*np.percentile(x[:, axes[0]], [1, 99]), n)
    b = np.linspace(*np.percentile(x[:, axes[1]], [1, 99]), n)
    aa, bb = np.meshgrid(a, b)
    g = np.zeros((n * n, x.shape[1]))
    g[:, axes[0]], g[:, axes[1]] = aa.ravel(), bb.ravel()
    return a, b, g


def map_scores(name: str, model, grid: np.ndarray, j: int) -> np.ndarray:
    if name == "ET":
        s = -np.log(model.predict_time(grid)[:, j])
        return (s - s.min()) / max(np.ptp(s), 1e-12)
    return model.predict_occurrence(grid)[:, j]


def figure1(maps: dict, path: Path) -> Path:
    """``maps``: {event: {"a", "b", "points": (x, y, c), "models": {name: (GRID*GRID,) scores}}}."""
    events = list(maps)
    models = list(next(iter(maps.values()))["models"])
    fig, axs = plt.subplots(len(events), len(models), figsize=(2.6 * len(models), 2.6 * len(events)), squeeze=False,
                            layout="constrained")
    for r, e in enumerate(events):
        m = maps[e]
        a, b = np.asarray(m["a"]), np.asarray(m["b"])
        px, py, pc = (np.asarray(v) for v in m["points"])
        fi, fj = MAP_AXES.get(e, (0, 1))
        for c, name in enumerate(models):
            ax = axs[r, c]
            z = np.asarray(m["models"][name]).reshape(len(b), len(a))
            im = ax.pcolormesh(a, b, z, vmin=0, vmax=1, cmap="viridis", shading="auto")
            ax.scatter(px, py, c=np.where(pc == 1, "white", "black"), s=3, alpha=0.5, linewidths=0)
            ax.set_title(f"{name}: {e}" + (" (score)" if name == "ET" else ""), fontsize=9)
            ax.set_xlabel(f"x{fi + 1}", fontsize=8)
            ax.set_ylabel(f"x{fj + 1}", fontsize=8)
            ax.tick_params(labelsize=7)
    fig.colorbar(im, ax=axs, shrink=0.6, label="predicted P(ever)")
    fig.suptitle("Fig. 1: predicted occurrence (dots: test rows, white = event occurs)", fontsize=10)
    return _save(fig, path)


def figure2(result: dict, path: Path) -> Path:
    models = list(result["models"])
    tasks = list(next(iter(result["models"].values()))["tasks"])
    if len(tasks) <= 4:  # side by side
        fig, axs = plt.subplots(1, 2, figsize=(max(8, 2.2 * len(tasks) + 3), 3.6), layout="constrained")
    else:  # many tasks (MIMIC, Reddit): one panel per row
        fig, axs = plt.subplots(2, 1, figsize=(max(8, 1.3 * len(tasks) + 2), 7), layout="constrained")
    width = 0.8 / len(models)
    for ax, metric, label in ((axs[0], "auc", "test AUC (vs true c)"), (axs[1], "mrae", "test MRAE (lower is better)")):
        lowest = 1.0
        for i, name in enumerate(models):
            vals = [np.asarray(result["models"][name]["tasks"][t].get(metric, []), float) for t in tasks]
            if all(v.size == 0 for v in vals):
                continue
            mean = [np.nanmean(v) if v.size and not np.isnan(v).all() else np.nan for v in vals]
            std = [np.nanstd(v) if v.size and not np.isnan(v).all() else 0.0 for v in vals]
            ax.bar(np.arange(len(tasks)) + i * width, mean, width, yerr=std, label=name, capsize=2, color=f"C{i}")
            lowest = np.nanmin([lowest, *mean])
        ax.set_xticks(np.arange(len(tasks)) + 0.4 - width / 2, tasks, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(label)
        if metric == "auc":
            ax.axhline(0.5, color="grey", lw=0.8, ls="--")
            ax.set_ylim(0.3 if lowest >= 0.3 else 0.0, 1.0)  # tiny test splits can rank below 0.3
    axs[0].legend(fontsize=7, ncol=2)
    config = result["config"]
    fewer = any(n != config["runs"] for n in config.get("model_runs", {}).values())
    fig.suptitle(f"Fig. 2: mean ± std over {config['runs']} runs" + (" (fewer for some rows, see the table)"
                                                                      if fewer else ""), fontsize=10)
    return _save(fig, path)


def figure3(calibration: dict, path: Path) -> Path:
    """``calibration``: {task: {model: {"pred": [...], "obs": [...], "ece": float}}}."""
    tasks = list(calibration)
    cols = min(5, len(tasks))
    rows = int(np.ceil(len(tasks) / cols))
    fig, axs = plt.subplots(rows, cols, figsize=(2.8 * cols, 2.9 * rows), squeeze=False, layout="constrained")
    for k, task in enumerate(tasks):
        ax = axs[k // cols, k % cols]
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
        for name, cur in calibration[task].items():
            ece = cur.get("ece")
            ax.plot(cur["pred"], cur["obs"], marker="o", ms=2.5, lw=1,
                    label=f"{name} ECE {ece:.2f}" if ece is not None and not np.isnan(ece) else name)
        ax.set_title(task, fontsize=9)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    for k in range(len(tasks), rows * cols):
        axs[k // cols, k % cols].axis("off")
    fig.supxlabel("predicted P(ever)", fontsize=9)
    fig.supylabel("observed frequency", fontsize=9)
    fig.suptitle("Fig. 3: calibration on the test split (first run)", fontsize=10)
    return _save(fig, path)
