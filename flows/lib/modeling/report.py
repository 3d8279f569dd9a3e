"""The pipeline's markdown report and its PNG figures.

Per dataset: a bar chart of test AUC per event and model, and calibration panels, one per
event, comparing CET, ET and BC (observed occurrence frequency vs predicted P(ever), test
split, with the rows in each bin). ``report.md`` links the
figures and holds the metric tables. Only aggregates are drawn: no row of any dataset
reaches the report.
"""

from __future__ import annotations

import base64
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from cet_model.atomic import claim_files, copy_file, write_text  # noqa: E402
from cet_model.atomic import save_figure as _save  # noqa: E402
from cet_model.dataset import load_dataset  # noqa: E402
from cet_model.evaluation import model_inputs  # noqa: E402
from cet_model.metrics import calibration_curve  # noqa: E402
from cet_model.models import load_model  # noqa: E402
from cet_model.reference import REFERENCE  # noqa: E402
from cet_model.summary import bounds_text, resamples_text  # noqa: E402
from flows.lib.infra import stage_cache  # noqa: E402
from flows.lib.infra.crash import crash_point  # noqa: E402
from flows.lib.infra.evaluation_record import Evaluation  # noqa: E402
from flows.lib.modeling.render import cell, markdown  # noqa: E402
from flows.lib.modeling.version_text import beyond_record, difference_table, intervals, metric_rows, quarter_text  # noqa: E402


def auc_figure(version: Path, title: str, path: Path) -> Path:
    metrics = Evaluation.read(version).test
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


CALIBRATION_MODELS = ("CET", "ET", "BC")


def calibration_figure(version: Path, dataset_dir: Path, title: str, path: Path, device: str = "cpu",
                       n_bins: int = 10) -> Path:
    """One panel per event: observed occurrence frequency vs predicted P(ever) on the test split
    for CET, ET and BC (those the version holds), with the number of test rows in each of CET's
    bins as grey bars (right axis), so a point resting on 3 rows reads as such."""
    ds = load_dataset(dataset_dir)
    te = ds.test
    x = model_inputs(te)
    models = [m for m in CALIBRATION_MODELS if (version / m / "config.json").is_file()]
    probs = {m: load_model(version / m, device=device).predict_occurrence(x) for m in models}
    events = ds.event_names
    ncols = min(5, len(events))
    nrows = -(-len(events) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.1 * ncols, 2.9 * nrows + 0.6), squeeze=False,
                             sharex=True, sharey=True)
    colors = {"CET": "C0", "ET": "C1", "BC": "C2"}
    edges = np.linspace(0, 1, n_bins + 1)
    for j, e in enumerate(events):
        ax = axes[j // ncols][j % ncols]
        keep = np.ones(len(te), bool) if te.mask is None else te.mask[:, j] == 1
        keep &= ~np.isnan(te.C[:, j])  # against the true occurrence: the rows that have it
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
        ax.set_title(f"{e} (n={int(keep.sum())}, {int(te.C[keep, j].sum())} events)", fontsize=9)
        if len(np.unique(te.C[keep, j])) < 2:
            ax.text(0.5, 0.5, "one class only" if keep.any() else "true occurrence\nnot known", ha="center",
                    va="center", fontsize=8, color="grey")
            continue
        bars = ax.twinx()
        counts = np.histogram(probs[models[0]][keep, j], bins=edges)[0] if models else np.zeros(n_bins)
        bars.bar(edges[:-1] + 0.05, counts, width=0.09, color="lightgrey", zorder=0)
        bars.set_ylim(0, max(1, counts.max()) * 3)  # bars in the lower third, behind the curves
        bars.tick_params(labelsize=7, colors="grey")
        ax.set_zorder(bars.get_zorder() + 1)
        ax.patch.set_visible(False)
        for m in models:
            obs, pred, _ = calibration_curve(te.C[keep, j], probs[m][keep, j], n_bins=n_bins)
            ax.plot(pred, obs, marker="o", ms=3, lw=1.2, color=colors[m], label=m)
    for k in range(len(events), nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("predicted P(ever)", fontsize=8)
    for row in axes:
        row[0].set_ylabel("observed frequency", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper right", ncol=len(models), fontsize=9)
    fig.suptitle(f"{title} (test split; grey bars: rows per bin of {models[0] if models else 'CET'}, right axis)",
                 fontsize=10, x=0.02, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    _save(fig, path)
    return path


_FIGURE_LINK = re.compile(r"!\[([^\]]*)\]\(([^)/\s]+\.png)\)")


def current_figures(out_dir, version, name: str) -> set[str] | None:
    """The figures ``out_dir/report.md`` links when it is the dataset report of ``version`` and every
    one of them is there; None otherwise."""
    path = Path(out_dir) / "report.md"
    try:
        text = path.read_text()
    except OSError:
        return None
    linked = {m.group(2) for m in _FIGURE_LINK.finditer(text)}
    if not text.startswith(f"# {name}: model version {Path(version).name}\n"):
        return None
    return linked if all((Path(out_dir) / png).is_file() for png in linked) else None


def report_is_current(out_dir, version, name: str) -> bool:
    """Whether ``out_dir/report.md`` is the dataset report of ``version`` with every figure it
    links: a reused version's report is not drawn again."""
    return current_figures(out_dir, version, name) is not None


def inline_figures(markdown: str, folder: Path) -> str:
    """The report with each PNG it links (a file in ``folder``) embedded as a base64 data URI:
    what the Prefect UI shows in a markdown artifact, where relative links break."""
    def embed(m: re.Match) -> str:
        png = Path(folder) / m.group(2)
        if not png.is_file():
            return m.group(0)
        return f"![{m.group(1)}](data:image/png;base64,{base64.b64encode(png.read_bytes()).decode()})"
    return _FIGURE_LINK.sub(embed, markdown)


def _table(rows: list[dict]) -> str:
    cols = ["model", "task", "auc", "mrae", "ci", "ece", "uno_c", "ibs"]
    return markdown([cols, *([cell(r[c]) for c in cols] for r in rows)])


HEADLINE_MODELS = ("CET", "CET-paper", "ET", "BC", "Oracle", REFERENCE)  # the reference: real data only


data_kind = stage_cache.built_from


def headline_table(entries: list[dict]) -> str:
    """One row per dataset and model (the average over tasks, test split): CET (the default),
    CET-paper where it was trained, ET, BC and the oracle where the dataset holds the true occurrence; AUC and
    Harrell's C with their paired bootstrap interval where the version holds it."""
    cols = [("auc", "AUC"), ("mrae", "MRAE"), ("ci", "Harrell's C"), ("ece", "ECE"), ("ibs", "IBS")]
    table = [["dataset", "data", "model", *(h for _, h in cols)]]
    for e in entries:
        kind = data_kind(e["dataset"])
        rows = {r["model"]: r for r in metric_rows(Path(e["version"])) if r["task"] == "Avg"}
        bounds = intervals(Path(e["version"])).get("metrics", {})
        for model in HEADLINE_MODELS:
            if model not in rows:
                continue
            cells = [cell(rows[model][c]) + ("" if rows[model][c] is None
                                             else bounds_text((bounds.get(c) or {}).get(model))) for c, _ in cols]
            table.append([e["name"], kind, f"**{model}**" if model == "CET" else model, *cells])
    return markdown(table)


def differences_table(version: Path) -> str:
    """CET minus each other model, test AUC and Harrell's C, with the paired bootstrap interval;
    "" for a version trained before the intervals were recorded."""
    record = intervals(version)
    table = difference_table(record, {"auc": "AUC", "ci": "Harrell's C"})
    if not table:
        return ""
    return "\n".join([f"CET minus each model, test split; [ ]: {record['level']:.0%} paired bootstrap interval "
                      f"({resamples_text(record)}, the same for every model).",
                      "", markdown(table)])


def beyond_table(version: Path) -> str:
    """Per event, how much of CET's P(ever) lies past the training follow-up (the last time at least
    10 training rows were still followed; the version's ``beyond_follow_up`` record, test split): the
    mean P(ever), the risk by that time beside the Kaplan-Meier risk there of the test and the
    training rows (and the part of the latter gained over the follow-up's last quarter, with its 95 %
    interval and the events in it: still rising at the end, the data do not show how many ever
    will), the share after it, and the true
    share where the data know it (by that time / ever, when the true times are known too); "" for a
    version without the record."""
    record = beyond_record(version).get("CET") or {}
    if not record:
        return ""
    truth = all("true_share" in r for r in record.values())
    by_it = truth and all("true_by_follow_up" in r for r in record.values())
    rising = all("km_last_quarter" in r for r in record.values())
    quarter_head = "; 95 % interval, events" if all("km_last_quarter_ci" in r for r in record.values()) else ""
    head = ["event", "follow-up's end", "P(ever)", "risk by it", "Kaplan-Meier by it, test / training rows",
            *([f"of which in its last quarter (training{quarter_head})"] if rising else []), "after it",
            *(["true share, by it / ever"] if by_it else ["true share"] if truth else [])]
    rows = [[e, f"{r['follow_up']:.4g}", f"{r['p_ever']:.3f}", f"{r['by_follow_up']:.3f}",
             ("-" if r.get("km_split_by_follow_up") is None else f"{r['km_split_by_follow_up']:.3f}")
             + f" / {r['km_by_follow_up']:.3f}",
             *([quarter_text(r)] if rising else []),
             f"{100 * r['share_beyond']:.0f} %",
             *([f"{r['true_by_follow_up']:.3f} / {r['true_share']:.3f}"] if by_it
               else [f"{r['true_share']:.3f}"] if truth else [])]
            for e, r in record.items()]
    return "\n".join(["CET's P(ever) past the follow-up, test split (means over the rows): what lies after the "
                      "follow-up's end (the last time at least 10 training rows were still followed) rests on the "
                      "log-normal tail, not on data"
                      + ("; the true share is the share of test rows that ever have the event" if truth else "") + ".",
                      "", markdown([head, *rows])])


STANDIN_NOTE = ("**A generated stand-in, not real data.** Its rows are drawn by this project in the layout of "
                "the real source, so the pipeline runs end to end without access to it; its figures check the "
                "software, not the model's worth on real patients or users (docs/results.md, real cohorts).")


REPORT_TITLE = "# CET pipeline report"


def report_files(names) -> list[str]:
    """The files the pipeline report of datasets ``names`` writes into its folder."""
    return ["report.md", *(f"{n}-{kind}.png" for n in names for kind in ("auc", "calibration"))]


def is_pipeline_report(folder) -> bool:
    """Whether ``folder`` holds a pipeline report this project wrote before report folders were marked."""
    try:
        with (Path(folder) / "report.md").open(errors="replace") as f:
            return f.readline().rstrip("\n") == REPORT_TITLE
    except OSError:
        return False


def claim_report(out_dir, names, record: bool = True) -> Path:
    """Refuse (FileExistsError naming the file) when a file the report of datasets ``names``
    writes exists in ``out_dir`` and this project did not write it; else claim them
    (``cet_model.atomic.claim_files``)."""
    return claim_files(out_dir, report_files(names), legacy=is_pipeline_report,
                       what="reports folder (CET_REPORTS_DIR)", record=record)


def write_report(entries: list[dict], out_dir, device: str = "cpu") -> Path:
    """``entries``: {"name", "dataset", "version", "decision"} per dataset, and "report" where
    train-evaluate wrote the version's dataset report. Writes ``out_dir/report.md`` and
    ``out_dir/<name>-auc.png``, ``<name>-calibration.png``: copies of the dataset report's own
    ``auc.png`` and ``calibration.png`` (the same figures) where that report is current and links
    them, else drawn here; files of these names that this project did not write there are never replaced
    (``claim_report``)."""
    out_dir = Path(out_dir)
    claim_report(out_dir, [e["name"] for e in entries])
    parts = [REPORT_TITLE, "",
             "Test-split metrics of one training run per dataset: AUC of P(ever) against the true "
             "occurrence c (ET: by the rank of its predicted median time), MRAE, Harrell's C and Uno's C "
             "of predicted median times (CET's: the median time given that the event happens, the "
             "paper's CI), ECE of P(ever), and the integrated Brier score (IBS) of the population "
             "survival curves. Figures are PNGs next to this file.", "",
             "## Headline", "", "Average over tasks, test split. **CET** is the product default (exact "
             "marginal likelihood); CET-paper, where a run names it, is the paper's model as its original code "
             "trained it. "
             "The data column says what each dataset was built from (its build stamp): a generated stand-in "
             "checks the software, not the model on real data. "
             "[ ]: 95% paired bootstrap interval (test rows resampled; each dataset's section has CET minus each "
             "model with its interval).", "",
             headline_table(entries), ""]
    for e in entries:
        name, version, dataset = e["name"], Path(e["version"]), Path(e["dataset"])
        folder = Path(e["report"]).parent if e.get("report") else None  # the dataset report of this version
        drawn = (current_figures(folder, version, name) or set()) if folder else set()
        auc_png = (copy_file(folder / "auc.png", out_dir / f"{name}-auc.png") if "auc.png" in drawn
                   else auc_figure(version, f"{name}: test AUC", out_dir / f"{name}-auc.png"))
        cal_png = (copy_file(folder / "calibration.png", out_dir / f"{name}-calibration.png")
                   if "calibration.png" in drawn
                   else calibration_figure(version, dataset, f"{name}: calibration of P(ever)",
                                           out_dir / f"{name}-calibration.png", device))
        decision = e.get("decision") or {}
        standin = data_kind(dataset) == "generated stand-in"
        parts += [f"## {name}", "", *([STANDIN_NOTE, ""] if standin else []),
                  f"Dataset `{dataset}`; model version `{version}`"
                  # the state, not this run's decision event: a rerun after a crash says the same
                  + ((" (the promoted version)" if decision.get("promoted") else
                      f" (not promoted: {decision.get('reason')})") if decision else "") + ".", "",
                  _table(metric_rows(version)), "", *([differences_table(version), ""] if intervals(version) else []),
                  *([beyond, ""] if (beyond := beyond_table(version)) else []),
                  f"![{name} AUC]({auc_png.name}) ![{name} calibration]({cal_png.name})", ""]
    crash_point("report")
    return write_text(out_dir / "report.md", "\n".join(parts))
