"""Repeated-seed experiments and tables in the paper's layout.

    python -m cet_model.experiments synthetic --mode reference --runs 10 --out DIR

trains every model on the same dataset once per seed, evaluates on the test split and
writes ``DIR/metrics.json`` and ``DIR/table.md`` (mean +- std over runs, plus the average
over tasks). Models:

- ``CET``: the product default, ``CETModel()`` -- the exact log marginal likelihood (observed
  cells pinned, censored cells summed), conditioned decoder, Adam lr 1e-3, automatic budget.
- ``CET-paper``: the paper's model as the original code trained it (Gumbel-Softmax, tau 0.3,
  100 samples, penalty -log eps - log p with eps = 0.7, Adam lr 3e-4): what produced Tables 3-5.
- ``CET-bound``: eq. 8 exactly as printed (penalty -log eps, log eps = -2), otherwise as CET-paper.
- ``CET-marginal``: the marginal likelihood summed over every pattern of every row (no
  importance sampling: the reference for the default's per-row budget).
- ``CET-unconditioned``: the default with a decoder on x alone (``condition_on_occurrence=False``):
  what conditioning times on the occurrences buys.
- ``ET``: same AFT head, no occurrence. Its AUC is scored as in the paper, by the rank
  of the predicted median time (an earlier time = a higher score).
- ``BC``: the occurrence encoder trained as a classifier of s. AUC only.
- ``Oracle``: the same classifier trained on the true occurrence c (the paper's Figure 1):
  what the features allow at best with this network.
- ``CET-Gumbel``, ``CET-ARM`` and ``CET-exact``: the paper's objective with each estimator
  (Gumbel-Softmax, ARM, exact enumeration of the 2^M patterns). After a search they share
  the chosen samples, log eps and temperature, so only the estimator differs from ``CET-paper``.

Predicted times are medians (q = 0.5), for CET given that the event occurs. MRAE uses
t_max = the largest observed test time of that event, as the reference code did. Beyond the
paper: Uno's C of the predicted times and the integrated Brier score of the population
survival curves (CET: 1 - p + p S(t | c = 1); ET: S(t)), both from scikit-survival with
censoring weights from the training split.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

from .atomic import write_text
from .comments import flatten_inputs
from .dataset import Dataset, load_dataset
from .estimators import MAX_EXACT_EVENTS
from .metrics import (
    brier_times,
    concordance_index,
    expected_calibration_error,
    integrated_brier_score,
    mrae,
    occurrence_auc,
    uno_c,
)
from .models import BCModel, CETModel, ETModel

log = logging.getLogger("cet_model.experiments")

PAPER_CET = dict(objective="paper", estimator="gumbel", n_samples=100, temperature=0.3,
                 log_epsilon=math.log(0.7), lr=3e-4)
MODEL_SPECS = {
    "CET": (CETModel, {}),
    "CET-paper": (CETModel, PAPER_CET),
    "CET-bound": (CETModel, dict(PAPER_CET, objective="bound", log_epsilon=-2.0)),
    "CET-marginal": (CETModel, dict(max_patterns=2**MAX_EXACT_EVENTS)),
    "CET-unconditioned": (CETModel, dict(condition_on_occurrence=False)),
    "ET": (ETModel, {}),
    "BC": (BCModel, {}),
    "Oracle": (BCModel, {}),
    "CET-Gumbel": (CETModel, PAPER_CET),
    "CET-exact": (CETModel, dict(PAPER_CET, estimator="exact")),
    "CET-ARM": (CETModel, dict(PAPER_CET, estimator="arm")),
}
ESTIMATOR_VARIANTS = {"gumbel": "CET-Gumbel", "arm": "CET-ARM", "exact": "CET-exact"}
DEFAULT_MODELS = ("CET", "CET-paper", "ET", "BC", "Oracle")
TIME_METRICS = ("auc", "mrae", "ci", "ece", "uno_c", "ibs")
COMMENT_WIDTH = 100  # per-comment layer width when the dataset has sequences (Reddit)


def inputs(split) -> np.ndarray:
    """The model input: X, or [X | comment embeddings flattened] when the split has sequences."""
    return split.X if split.sequences is None else flatten_inputs(split.X, split.sequences)


def comment_spec(split, width: int = COMMENT_WIDTH) -> dict | None:
    """The comment encoder for a dataset with sequences.npy (None without)."""
    if split.sequences is None:
        return None
    _, length, dim = split.sequences.shape
    return {"n_aux": split.X.shape[1], "length": length, "dim": dim, "width": width}


def fit(name: str, split_tr, split_va, x_tr, x_va, seed: int, hidden_sizes=(100,), max_epochs=None, patience=None,
        comment_encoder=None, overrides: dict | None = None, on_epoch=None, **extra):
    """Fit one model of MODEL_SPECS (the oracle learns the true occurrence c, not s); ``extra``
    goes to the model (e.g. ``device``), ``on_epoch`` to ``fit``."""
    cls, kwargs = MODEL_SPECS[name]
    kwargs = dict(kwargs, **(overrides or {}), **extra)
    model = cls(hidden_sizes=hidden_sizes, max_epochs=max_epochs, patience=patience, seed=seed,
                comment_encoder=comment_encoder, **kwargs)
    target_tr, target_va = (split_tr.C, split_va.C) if name == "Oracle" else (split_tr.S, split_va.S)
    return model.fit(x_tr, split_tr.T, target_tr, x_va, split_va.T, target_va, mask=split_tr.mask,
                     mask_val=split_va.mask, on_epoch=on_epoch)


def evaluate(name: str, model, split, event_names, x=None, train=None) -> dict:
    """Per-task metrics of one fitted model on one split (``x``: its model input, if computed).
    With ``train`` (the training split) time models also get Uno's C and the integrated Brier score."""
    x = inputs(split) if x is None else x
    p = model.predict_occurrence(x)
    timed = hasattr(model, "predict_time")
    t_hat = model.predict_time(x) if timed else None
    tasks = {}
    for j, e in enumerate(event_names):
        keep = np.ones(len(split), bool) if split.mask is None else split.mask[:, j] == 1  # masked cells are not scored
        if not keep.any():
            tasks[e] = {k: float("nan") for k in (TIME_METRICS if timed else ("auc", "ece"))}
            continue
        c, t, s = split.C[keep, j], split.T[keep, j], split.S[keep, j]
        score = -t_hat[keep, j] if name == "ET" else p[keep, j]
        row = {"auc": occurrence_auc(c, score), "ece": expected_calibration_error(c, p[keep, j])}
        if timed:
            row["mrae"] = mrae(t, t_hat[keep, j], s, t.max())
            row["ci"] = _safe_ci(t, t_hat[keep, j], s)
            if train is not None:
                keep_tr = np.ones(len(train), bool) if train.mask is None else train.mask[:, j] == 1
                t_tr, s_tr = train.T[keep_tr, j], train.S[keep_tr, j]
                row["uno_c"] = uno_c(t_tr, s_tr, t, s, t_hat[keep, j])
                times = brier_times(t)
                surv = model.predict_survival(x[keep], times)[:, :, j] if len(times) >= 2 else None
                row["ibs"] = integrated_brier_score(t_tr, s_tr, t, s, surv, times) if surv is not None else float("nan")
        tasks[e] = row
    return tasks


def _safe_ci(t, t_hat, s) -> float:
    try:
        return concordance_index(t, t_hat, s)
    except ZeroDivisionError:
        return float("nan")


def run(ds: Dataset, runs: int, models=DEFAULT_MODELS, hidden_sizes=(100,), max_epochs=None,
        patience=None, first_seed=0, overrides: dict | None = None, progress: bool = True,
        model_runs: dict | None = None) -> dict:
    """Fit each model ``runs`` times (seeds first_seed, first_seed + 1, ...) and evaluate;
    ``model_runs`` gives some models fewer (or more) runs, e.g. {"CET-exact": 3}."""
    unknown = [m for m in models if m not in MODEL_SPECS]
    if unknown:
        raise ValueError(f"unknown models {unknown}; choose from {sorted(MODEL_SPECS)}")
    tr, va, te = ds.train, ds.val, ds.test
    x_tr, x_va, x_te, spec = inputs(tr), inputs(va), inputs(te), comment_spec(tr)
    result = {"models": {m: {"tasks": {e: {} for e in ds.event_names}, "seconds": []} for m in models},
              "figures": {"calibration": {e: {} for e in ds.event_names}, "maps": None}}
    model_runs = {m: (model_runs or {}).get(m, runs) for m in models}
    for r in range(max(model_runs.values(), default=0)):
        seed = first_seed + r
        for name in models:
            if r >= model_runs[name]:
                continue
            t0 = time.perf_counter()
            model = fit(name, tr, va, x_tr, x_va, seed, hidden_sizes, max_epochs, patience, spec,
                        (overrides or {}).get(name, {}))
            secs = time.perf_counter() - t0
            scores = evaluate(name, model, te, ds.event_names, x_te, train=tr)
            if r == 0:
                _figure_data(result, name, model, ds, x_te)
            entry = result["models"][name]
            entry["seconds"].append(secs)
            entry.setdefault("epochs", []).append(len(model.history_.train_loss))
            for e, row in scores.items():
                for k, v in row.items():
                    entry["tasks"][e].setdefault(k, []).append(v)
            if progress:
                aucs = " ".join(f"{e}={row['auc']:.3f}" for e, row in scores.items())
                print(f"run {r + 1}/{model_runs[name]} {name:<13} {secs:6.1f}s  AUC {aucs}", flush=True)
    result["config"] = {"runs": runs, "model_runs": model_runs, "first_seed": first_seed, "hidden_sizes": list(hidden_sizes),
                        "max_epochs": max_epochs, "patience": patience,
                        "models": {m: MODEL_SPECS[m][1] | (overrides or {}).get(m, {}) for m in models}}
    result["dataset"] = {"path": str(ds.path), "name": ds.manifest.get("name"),
                         "split_sizes": ds.manifest.get("split_sizes")}
    result["machine"] = machine()
    return result


def _figure_data(result: dict, name: str, model, ds, x_te) -> None:
    """Calibration curves (every dataset) and occurrence maps (the synthetic data) of one model."""
    from .figures import MAP_AXES, map_scores, occurrence_grid
    from .metrics import calibration_curve

    te = ds.test
    p = model.predict_occurrence(x_te)
    for j, e in enumerate(ds.event_names):
        keep = np.ones(len(te), bool) if te.mask is None else te.mask[:, j] == 1
        if len(np.unique(te.C[keep, j])) < 2:
            continue
        obs, pred, _ = calibration_curve(te.C[keep, j], p[keep, j])
        result["figures"]["calibration"][e][name] = {
            "pred": pred.tolist(), "obs": obs.tolist(), "ece": expected_calibration_error(te.C[keep, j], p[keep, j])}
    synthetic = ds.feature_names == ["x1", "x2", "x3", "x4", "x5"] and ds.event_names == ["T1", "T2"]
    if not synthetic or te.sequences is not None:
        return
    maps = result["figures"]["maps"] = result["figures"]["maps"] or {}
    rows = np.random.default_rng(0).choice(len(te), size=min(400, len(te)), replace=False)
    for j, e in enumerate(ds.event_names):
        a, b, grid = occurrence_grid(te.X, MAP_AXES[e])
        fi, fj = MAP_AXES[e]
        m = maps.setdefault(e, {"a": a.tolist(), "b": b.tolist(), "models": {},
                                "points": (te.X[rows, fi].tolist(), te.X[rows, fj].tolist(), te.C[rows, j].tolist())})
        m["models"][name] = map_scores(name, model, grid, j).tolist()


def machine() -> dict:
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def summarize(values) -> tuple[float, float]:
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0 or np.isnan(arr).all():
        return float("nan"), float("nan")
    return float(np.nanmean(arr)), float(np.nanstd(arr))


def average_over_tasks(tasks: dict, metric: str) -> list[float]:
    """Per-run mean over tasks (the paper's Avg row)."""
    per_task = [v[metric] for v in tasks.values() if metric in v]
    if not per_task:
        return []
    return np.nanmean(np.asarray(per_task, dtype=np.float64), axis=0).tolist()


def _fmt(values) -> str:
    mean, std = summarize(values)
    if np.isnan(mean):
        return ""
    if abs(mean) >= 1e3:
        return f"{mean:.1e} ± {std:.1e}"
    return f"{mean:.2f} ± {std:.2f}"


def table_markdown(result: dict, title: str) -> str:
    """The paper's table layout: model, task, AUC, MRAE, CI (mean ± std over runs)."""
    config = result.get("config", {})
    runs = config.get("runs", "?")
    fewer = {m: n for m, n in config.get("model_runs", {}).items() if n != runs}
    note = ("" if not fewer else " Fewer runs for " + ", ".join(f"{m} ({n})" for m, n in fewer.items()) + ".")
    lines = [f"# {title}", "", f"Mean ± std over {runs} runs on the test split.{note} "
             "AUC against the true occurrence c; ET's AUC from the rank of its predicted median time. "
             "MRAE, Harrell's CI and Uno's C of predicted median times; ECE of P(ever); IBS: integrated "
             "Brier score of the population survival curves (lower is better).",
             "", "| Model | Task | AUC | MRAE | CI | ECE | Uno's C | IBS |", "|---|---|---|---|---|---|---|---|"]
    for name, entry in result["models"].items():
        tasks = dict(entry["tasks"])
        rows = list(tasks.items()) + [("Avg", {m: average_over_tasks(tasks, m) for m in TIME_METRICS})]
        for task, vals in rows:
            cells = [_fmt(vals.get(m, [])) for m in TIME_METRICS]
            lines.append(f"| {name} | {task} | " + " | ".join(cells) + " |")
    m = result.get("machine", {})
    lines += ["", f"Machine: {m.get('processor')}, {m.get('cpu_count')} cores, torch {m.get('torch')}, "
              f"CUDA: {m.get('cuda')}."]
    return "\n".join(lines) + "\n"


def write_figures(result: dict, out: Path) -> list[Path]:
    """fig2 (and fig3, and fig1 on the synthetic data) as PNGs in ``out``."""
    from . import figures

    fig = result.get("figures") or {}
    paths = [figures.figure2(result, out / "fig2_auc_mrae.png")]
    if any(fig.get("calibration", {}).values()):
        paths.append(figures.figure3({k: v for k, v in fig["calibration"].items() if v}, out / "fig3_calibration.png"))
    if fig.get("maps"):
        paths.append(figures.figure1(fig["maps"], out / "fig1_occurrence_maps.png"))
    return paths


def write_report(result: dict, out: Path, title: str) -> None:
    """Write metrics.json, table.md and the figures atomically (temporary names, then rename).
    The occurrence-map grids are drawn, not stored in metrics.json."""
    out.mkdir(parents=True, exist_ok=True)
    write_figures(result, out)
    stored = dict(result, figures={"calibration": (result.get("figures") or {}).get("calibration")})
    write_text(out / "metrics.json", json.dumps(stored, indent=2))
    write_text(out / "table.md", table_markdown(result, title))


def parse_model_runs(text: str, models) -> dict:
    """``"CET-exact=3,CET-ARM=3"`` -> {"CET-exact": 3, "CET-ARM": 3}, keeping the names in ``models``."""
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, n = item.partition("=")
        if not sep or not n.strip().isdigit():
            raise SystemExit(f"--model-runs: expected MODEL=N, got {item!r}")
        if name.strip() not in MODEL_SPECS:
            raise SystemExit(f"--model-runs: unknown model {name.strip()!r}; choose from {sorted(MODEL_SPECS)}")
        if name.strip() in models:
            out[name.strip()] = int(n)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cet_model.experiments", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    syn = sub.add_parser("synthetic", help="the paper's synthetic data (Table 3)")
    syn.add_argument("--mode", choices=("reference", "independent"), default="reference")
    syn.add_argument("--data", type=Path, help="an existing synthetic dataset folder (default: generate one)")
    syn.add_argument("--n", type=int, default=40_000, help="rows to generate, split 60/20/20 (default: the paper's 40,000)")
    ds_cmd = sub.add_parser("dataset", help="any dataset folder in the contract")
    ds_cmd.add_argument("--data", type=Path, required=True)
    for p in (syn, ds_cmd):
        p.add_argument("--runs", type=int, default=10, help="seeds per model (default 10)")
        p.add_argument("--out", type=Path, required=True, help="folder for metrics.json and table.md")
        p.add_argument("--models", default=",".join(DEFAULT_MODELS),
                       help=f"comma-separated, from {','.join(MODEL_SPECS)} (default: %(default)s)")
        p.add_argument("--hidden", type=int, default=100, help="hidden width (paper: 100 synthetic, 750 others)")
        p.add_argument("--max-epochs", type=int, default=None,
                       help="epoch cap (default: automatic, >= 100 epochs and >= 5,000 steps)")
        p.add_argument("--patience", type=int, default=None, help="early-stopping patience (default: automatic)")
        p.add_argument("--first-seed", type=int, default=0)
        p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
        p.add_argument("--search", type=int, default=0, metavar="BUDGET",
                       help="random-search trials for CET-paper before the runs (0: the paper's settings)")
        p.add_argument("--search-epochs", type=int, default=None, help="epoch cap per trial (default: --max-epochs)")
        p.add_argument("--model-runs", default="", metavar="MODEL=N,...",
                       help="fewer runs for costly rows, e.g. CET-exact=3,CET-marginal=3 (default: --runs each)")
    summ = sub.add_parser("summary", help="rewrite the README's results block from the report folders")
    summ.add_argument("--results", type=Path, default=Path("docs/results"))
    summ.add_argument("--readme", type=Path, default=Path("README.md"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.command == "summary":
        from .summary import update_readme

        changed = update_readme(args.readme, args.results)
        print(f"{args.readme}: results block {'rewritten' if changed else 'already current'}")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.command == "synthetic":
        data = args.data
        if data is None:
            from . import synthetic
            n_tr, n_va = int(0.6 * args.n), int(0.2 * args.n)
            data = synthetic.write(args.out / "data", mode=args.mode, n=args.n,
                                   split_sizes=(n_tr, n_va, args.n - n_tr - n_va))
        title = f"Synthetic data ({args.mode} mode, n = {args.n:,}): Table 3"
    else:
        data, title = args.data, f"Dataset {args.data.name}"
    ds = load_dataset(data)
    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    hidden, overrides, search = (args.hidden,), None, None
    if args.search:
        from .search import overrides_from, random_search

        search = random_search(ds, args.search, seed=args.first_seed, max_epochs=args.search_epochs or args.max_epochs,
                               patience=args.patience)
        hidden, overrides = overrides_from(search["best"])
    chosen = (overrides or {}).get("CET-paper", PAPER_CET)["estimator"]
    if "CET-paper" in models and ESTIMATOR_VARIANTS[chosen] in models:  # the same fits as the CET-paper row
        models = tuple(m for m in models if m != ESTIMATOR_VARIANTS[chosen])
        print(f"CET-paper uses the {chosen} estimator: {ESTIMATOR_VARIANTS[chosen]} is the CET-paper row", flush=True)
    result = run(ds, args.runs, models, hidden_sizes=hidden, max_epochs=args.max_epochs,
                 patience=args.patience, first_seed=args.first_seed, overrides=overrides,
                 model_runs=parse_model_runs(args.model_runs, models))
    if search is not None:
        result["search"] = search
    result["command"] = "python -m cet_model.experiments " + " ".join(argv if argv is not None else sys.argv[1:])
    write_report(result, args.out, title)
    print(table_markdown(result, title))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
