"""A report for any dataset, with or without the true occurrence, and a model card per version.

``write_dataset_report`` writes ``report.md`` and its PNG figures for one registered version on its
test split: per event the Kaplan-Meier curve against each time model's mean population survival,
predicted against observed cumulative incidence at three horizons (where events compete, with
the Aalen-Johansen share and CET's crude risk, and their curves), the calibration of P(event by
the horizon) against Kaplan-Meier by risk group, decision curves by the horizon
(``flows.lib.modeling.decision_curves``), the distribution of CET's P(ever); with the true
occurrence, the AUC and calibration figures of the main job's report too. Only aggregates are
drawn: no row reaches the report.

Each version's model card is ``flows.lib.modeling.model_card``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cet_model.atomic import save_figure, write_text
from cet_model.choices import CI_RMST
from cet_model.dataset import load_dataset
from cet_model.evaluation import model_inputs
from cet_model.models import load_model
from cet_model.nonparametric import (
    aalen_johansen_curve,
    aalen_johansen_risk,
    competing_groups,
    kaplan_meier_curve,
    kaplan_meier_plateau,
    kaplan_meier_risk,
    kaplan_meier_risk_gained,
)
from flows.lib.infra.evaluation_record import Evaluation
from flows.lib.infra.stage_cache import built_from
from flows.lib.modeling.cohort_table import MIN_CELL, event_rows, feature_rows
from flows.lib.modeling.decision_curves import decision_curves, decision_figure, decision_rows, note
from flows.lib.modeling.render import cell, markdown, split_text
from flows.lib.modeling.report import STANDIN_NOTE, auc_figure, calibration_figure
from flows.lib.modeling.report_panels import close_figure, first_kinds, inputs_of, kept, panels
from flows.lib.modeling.version_facts import item_labels, version_horizons
from flows.lib.modeling.version_text import metric_rows

TIME_MODELS = ("CET", "ET")  # the models with a survival curve drawn beside Kaplan-Meier
HORIZON_QUANTILES = (0.25, 0.5, 0.75)  # of each event's training follow-up: the cumulative incidence table
GRID = 100  # points of each mean predicted survival curve


def survival_figure(split, x, events, models: dict, path: Path, title: str, unit: str | None = None) -> Path:
    """Per event: the test rows' Kaplan-Meier curve against each model's mean predicted population
    survival (CET: 1 - p + p S(t | it happens)) on the same rows; time in ``unit``."""
    fig, axes = panels(len(events))
    for j, (e, ax) in enumerate(zip(events, axes, strict=True)):
        keep = kept(split, j)
        if not keep.any():
            ax.set_title(f"{e}: no followed rows", fontsize=9)
            continue
        times, surv = kaplan_meier_curve(split.T[keep, j], split.S[keep, j])
        ax.step(times, surv, where="post", color="black", lw=1.4, label="Kaplan-Meier")
        grid = np.linspace(0.0, float(split.T[keep, j].max()), GRID)
        for name, model in models.items():
            mean = model.predict_survival(inputs_of(x, keep), grid, event=j).mean(0)
            ax.plot(grid, mean, lw=1.2, label=f"{name} (mean predicted)")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{e} (n={int(keep.sum())}, {int(split.S[keep, j].sum())} events)", fontsize=9)
        ax.set_xlabel(f"time ({unit})" if unit else "time", fontsize=8)
    return close_figure(fig, axes, "event-free share", title, path)


def crude_figure(split, x, events, groups: list[list[int]], cet, path: Path, title: str, unit: str | None = None
                 ) -> Path:
    """Per event of a competing group: the test rows' Aalen-Johansen share whose first event is this
    one, CET's mean crude risk (``predict_cumulative_incidence``, with a ``cet`` model) and the net
    risk, 1 - Kaplan-Meier, on the rows that keep every event of the group; time in ``unit``."""
    pairs = [(j, g) for g in groups for j in g]
    fig, axes = panels(len(pairs))
    for (j, group), ax in zip(pairs, axes, strict=True):
        keep, kind = first_kinds(split, group)
        if not keep.any():
            ax.set_title(f"{events[j]}: no followed rows", fontsize=9)
            continue
        times, share = aalen_johansen_curve(split.T[keep, j], kind, group.index(j) + 1)
        ax.step(times, share, where="post", color="black", lw=1.4, label="Aalen-Johansen (first event)")
        times, surv = kaplan_meier_curve(split.T[keep, j], split.S[keep, j])
        ax.step(times, 1.0 - surv, where="post", color="grey", ls="--", lw=1, label="1 - Kaplan-Meier (net)")
        if cet is not None:
            grid = np.linspace(0.0, float(split.T[keep, j].max()), GRID)
            others = [i for i in group if i != j]
            crude = cet.predict_cumulative_incidence(inputs_of(x, keep), grid, j, competing=others).mean(0)
            ax.plot(grid, crude, color="C0", lw=1.2, label="CET crude (mean predicted)")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{events[j]} (n={int(keep.sum())}, {int(split.S[keep, j].sum())} first)", fontsize=9)
        ax.set_xlabel(f"time ({unit})" if unit else "time", fontsize=8)
    return close_figure(fig, axes, "share with the event first", title, path)


def p_ever_figure(split, p: np.ndarray, events, path: Path, title: str) -> Path:
    """Per event: the distribution of CET's P(ever) on the test rows, with the Kaplan-Meier risk by
    the end of follow-up (a floor for the share who ever have it) marked."""
    fig, axes = panels(len(events))
    for j, (e, ax) in enumerate(zip(events, axes, strict=True)):
        keep = kept(split, j)
        ax.hist(p[keep, j], bins=np.linspace(0, 1, 21), color="C0", alpha=0.8)
        if keep.any():
            km = kaplan_meier_plateau(split.T[keep, j], split.S[keep, j])
            ax.axvline(km, color="black", ls="--", lw=1, label=f"Kaplan-Meier risk by the end: {km:.2f}")
            ax.axvline(float(p[keep, j].mean()), color="C0", lw=1.2, label=f"mean P(ever): {p[keep, j].mean():.2f}")
            ax.legend(fontsize=7)
        ax.set_title(e, fontsize=9)
        ax.set_xlabel("P(ever)", fontsize=8)
    axes[0].set_ylabel("test rows", fontsize=8)
    fig.suptitle(title, fontsize=10, x=0.02, ha="left")
    save_figure(fig, path)
    return path


FLOOR_ROWS = 10  # the floor is read where at least this many rows are still followed


def p_ever_floor(split, p: np.ndarray, events) -> tuple[list[list[str]], list[str]]:
    """Per event, CET's mean P(ever) on ``split``'s rows against the share the data already show:
    the Kaplan-Meier risk by the last time at least ``FLOOR_ROWS`` of those rows are still followed
    (past it the curve rests on a handful), with its 95 % interval (Greenwood). Returns the table's
    rows and a sentence for each event whose mean P(ever) lies below the interval: fewer events
    ever than the rows show by then. Events with fewer rows, or no event by then, are left out.

    >>> from cet_model.dataset import Split
    >>> t = np.arange(1.0, 41.0); s = (t <= 30).astype(float)  # 30 of 40 by time 30, then censored
    >>> split = Split(np.arange(40), np.zeros((40, 1)), t[:, None], s[:, None], s[:, None], t[:, None])
    >>> rows, low = p_ever_floor(split, np.full((40, 1), 0.2), ["death"])
    >>> rows[0][:3], low
    (['death', '0.200', '31'], ['death (mean P(ever) 0.200, Kaplan-Meier risk 0.750 by 31, 95 % interval 0.627-0.897)'])
    """
    rows, below = [], []
    for j, e in enumerate(events):
        keep = kept(split, j)
        t, s = split.T[keep, j], split.S[keep, j]
        if len(t) < FLOOR_ROWS:
            continue
        until = float(np.sort(t)[-FLOOR_ROWS])  # FLOOR_ROWS rows are followed to this time or longer
        risk = kaplan_meier_risk_gained(t, s, 0.0, until)
        if risk.low is None:
            continue
        mean = float(p[keep, j].mean())
        rows.append([e, f"{mean:.3f}", f"{until:g}", f"{risk.gain:.3f} ({risk.low:.3f}-{risk.high:.3f})"])
        if mean < risk.low:
            below.append(f"{e} (mean P(ever) {mean:.3f}, Kaplan-Meier risk {risk.gain:.3f} by {until:g}, "
                         f"95 % interval {risk.low:.3f}-{risk.high:.3f})")
    return rows, below


def horizon_calibration_figure(calibration: dict, events, path: Path, title: str, unit: str | None = None) -> Path:
    """Per event: predicted risk by the horizon (in ``unit``) against the Kaplan-Meier risk of groups
    of rows by predicted risk (the version's ``calibration`` record, test split), one line per time model."""
    fig, axes = panels(len(events))
    for e, ax in zip(events, axes, strict=True):
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--")
        horizon = None
        for name in TIME_MODELS:
            record = (calibration.get(name) or {}).get(e)
            if not record:
                continue
            horizon = record["horizon"]
            pred = [g["predicted"] for g in record["groups"]]
            obs = [g["observed"] for g in record["groups"]]
            ax.plot(pred, obs, marker="o", ms=3, lw=1.2, label=f"{name} (mean abs. diff. {record['ece']:.3f})")
        ax.set_title(e + ("" if horizon is None else f", by {horizon:g}{f' {unit}' if unit else ''}"), fontsize=9)
        ax.set_xlabel("predicted risk", fontsize=8)
        if horizon is not None:
            ax.legend(fontsize=7)
    axes[0].set_ylabel("Kaplan-Meier risk", fontsize=8)
    fig.suptitle(title, fontsize=10, x=0.02, ha="left")
    save_figure(fig, path)
    return path


def incidence_horizons(t: np.ndarray) -> list[float]:
    """The quartiles (``HORIZON_QUANTILES``) of follow-up times ``t``, to three significant digits,
    each once: a reader's horizons (428 days, not 428.25), at which the table is also computed.

    >>> incidence_horizons(np.array([1.0, 101, 101, 232, 428.25, 1289, 2000]))  # 858.625 is the third
    [101.0, 232.0, 859.0]
    >>> incidence_horizons(np.array([0.25, 11.2341, 30.5, 99.0]))            # hours: 8.488075, 20.86705, ...
    [8.49, 20.9, 47.6]
    >>> incidence_horizons(np.array([52.0, 52, 52, 52, 30]))                  # ties: each once
    [52.0]
    """
    return sorted({float(f"{h:.3g}") for h in np.quantile(t, HORIZON_QUANTILES) if h > 0})


def incidence_rows(train, split, x, events, models: dict, competing: list[list[int]] = ()) -> list[list[str]]:
    """Per event and horizon (quartiles of its training follow-up, ``incidence_horizons``): the test
    rows' Kaplan-Meier cumulative incidence and each model's mean predicted one, 1 - S(h). With
    ``competing`` groups (``competing_groups``), the last columns: the Aalen-Johansen share whose
    first event is this one and, with CET, its mean crude cumulative incidence, on the rows that
    keep every event of its group (blank for an event in no group)."""
    rows = []
    group_of = {j: g for g in competing for j in g}
    for j, e in enumerate(events):
        keep, followed = kept(split, j), kept(train, j)
        if not keep.any() or not followed.any():
            continue
        horizons = incidence_horizons(train.T[followed, j])
        predicted = {name: 1.0 - model.predict_survival(inputs_of(x, keep), horizons, event=j).mean(0)
                     for name, model in models.items()}
        crude = _crude(split, x, models.get("CET"), group_of.get(j), j, horizons)
        for k, h in enumerate(horizons):
            observed = kaplan_meier_risk(split.T[keep, j], split.S[keep, j], h)
            rows.append([e, f"{h:g}", f"{observed:.3f}", *(f"{predicted[n][k]:.3f}" for n in models),
                         *([] if not competing else [c[k] for c in crude])])
    return rows


def _crude(split, x, cet, group: list[int] | None, j: int, horizons) -> list[list[str]]:
    """The Aalen-Johansen share of ``split``'s rows whose first event by each horizon is event ``j``
    of ``group`` and, with a ``cet`` model, its mean crude cumulative incidence on the same rows
    (blank without a group, or without a row that keeps the whole group)."""
    columns = 1 + (cet is not None)
    rows, kind = first_kinds(split, group) if group is not None else (None, None)
    if group is None or not rows.any():
        return [[""] * len(horizons)] * columns
    out = [[f"{aalen_johansen_risk(split.T[rows, j], kind, group.index(j) + 1, h):.3f}" for h in horizons]]
    if cet is not None:
        crude = cet.predict_cumulative_incidence(inputs_of(x, rows), horizons, j,
                                                 competing=[i for i in group if i != j]).mean(0)
        out.append([f"{v:.3f}" for v in crude])
    return out


def competing_note(groups: list[list[int]], events) -> str:
    """What the report says of events that compete.

    >>> competing_note([[0, 1]], ["relapse", "death"])[:52]
    'relapse and death compete: one follow-up time, never'
    """
    named = "; ".join(" and ".join(events[j] for j in g) for g in groups)
    return (f"{named} compete: one follow-up time, never two seen on a row, as a status column of several kinds gives. "
            "Kaplan-Meier (the other kinds taken for censoring) and every model give the net risk, had no other kind "
            "come first. Aalen-Johansen gives the crude share whose first event is this kind: lower, the more the "
            "other kinds come first. CET crude is CET's own crude risk (`predict_cumulative_incidence`), to be "
            "read against Aalen-Johansen.")


METRIC_LABELS = {"auc": "AUC", "mrae": "MRAE", CI_RMST: "C (RMST)", "ci": "Harrell's C", "ece": "ECE",
                 "uno_c": "Uno's C", "ibs": "IBS"}
C_NOTE = ("C (RMST) ranks every model by its restricted mean event-free time: the like-for-like C. Harrell's and "
          "Uno's C rank CET's time given that the event happens, ET's predicted time and the Cox reference's risk.")


def metrics_table(rows: list[dict]) -> str:
    """The version's test metrics per model and event, the columns and models that have a value."""
    cols = [c for c in METRIC_LABELS if any(r.get(c) is not None for r in rows)]
    kept = [r for r in rows if any(r.get(c) is not None for c in cols)]
    return markdown([["model", "event", *(METRIC_LABELS[c] for c in cols)],
                     *([r["model"], "average" if r["task"] == "Avg" else r["task"], *(cell(r.get(c)) for c in cols)]
                       for r in kept)])


def cohort_section(ds) -> list[str]:
    """The report's "Table 1" (``flows.lib.modeling.cohort_table``): each event by split with the
    follow-up, then the features on the training and test rows."""
    parts = ["## The cohort", "",
             "How often each event was seen in each split, of the rows followed for it, and how long the rows were "
             "followed: the median by reverse Kaplan-Meier (the censoring times' own curve, so early events do not "
             f"shorten it) and the longest. In these two tables a count of fewer than {MIN_CELL} rows, or one that "
             "leaves fewer aside, is not shown, nor the standardised difference that would give it away; the rest "
             "of the report shows counts of any size.", "",
             markdown(event_rows(ds, ds.manifest.get("time_unit"))), ""]
    if ds.feature_names and len(ds.train) and len(ds.test):
        features, note = feature_rows(ds, item_labels(ds.manifest))
        parts += ["Each feature on the training and test rows: a 0/1 column's count and share, another's mean "
                  "(standard deviation). The standardised difference is their gap in pooled standard deviations; "
                  "above 0.1 in size, the test rows differ noticeably from those the models learned from.", "",
                  *([note, ""] if note else []), markdown(features), ""]
    return parts


FILES = ("report.md", "survival.png", "cumulative-incidence.png", "calibration-horizon.png", "decision-curve.png",
         "p-ever.png", "auc.png", "calibration.png")


def check_ours(out_dir, name: str) -> None:
    """Refuse to replace a report.md this project did not write (its first line names the dataset's
    model version), or figures beside no report of ours: a user's files there stay as they are."""
    out_dir = Path(out_dir)
    report = out_dir / "report.md"
    if report.is_file():
        with report.open(errors="replace") as f:
            first = f.readline()
        if not first.startswith(f"# {name}: model version "):
            raise ValueError(f"{report}: not a report CET wrote for {name}; move it, or set CET_REPORTS_DIR elsewhere")
        return
    found = [f for f in FILES[1:] if (out_dir / f).exists()]
    if found:
        raise ValueError(f"{out_dir}: holds {', '.join(found)} beside no report CET wrote; move them, or set "
                         "CET_REPORTS_DIR elsewhere")


def write_dataset_report(version, dataset_dir, out_dir, name: str, device: str = "cpu") -> Path:
    """``out_dir/report.md`` and its figures for ``version`` (a registered model version) on the
    test split of ``dataset_dir``; refuses to replace files it did not write (``check_ours``)."""
    version, out_dir = Path(version), Path(out_dir)
    check_ours(out_dir, name)
    out_dir.mkdir(parents=True, exist_ok=True)
    ds = load_dataset(dataset_dir)
    tr, te, events = ds.train, ds.test, ds.event_names
    x = model_inputs(te)
    metrics = Evaluation.read(version)
    models = {m: load_model(version / m, device=device) for m in TIME_MODELS if (version / m / "config.json").is_file()}
    kind = built_from(dataset_dir)
    parts = [f"# {name}: model version {version.name}", "",
             *([STANDIN_NOTE, ""] if kind == "generated stand-in" else []),
             f"Dataset `{Path(dataset_dir)}`, built from {kind}; "
             f"{split_text({'train': len(tr), 'val': len(ds.val), 'test': len(te)})}; events {', '.join(events)} "
             f"(time in {ds.manifest.get('time_unit', 'its unit')}). "
             f"Every figure is on the test split. The model card is `{version / 'model_card.md'}`.", "",
             *cohort_section(ds),
             "## Test metrics", "", metrics_table(rows := metric_rows(version)), "",
             *([C_NOTE, ""] if any(r.get("ci") is not None for r in rows) else [])]
    unit = ds.manifest.get("time_unit")
    survival = survival_figure(te, x, events, models, out_dir / "survival.png",
                               f"{name}: Kaplan-Meier against the mean predicted survival", unit)
    parts += ["## Survival: Kaplan-Meier against the models", "",
              "The black step is what happened to the test rows; each line is a model's survival curve averaged "
              "over the same rows. A line above the step predicts too few events by then; below it, too many.", "",
              f"![{name} survival]({survival.name})", ""]
    competing = competing_groups(tr.T, tr.S, tr.mask)
    parts += ["## Cumulative incidence at three horizons", "",
              "Kaplan-Meier's share with the event by each quartile of the training follow-up, against each "
              "model's mean predicted risk by then.", "",
              *([competing_note(competing, events), ""] if competing else []),
              markdown([["event", "horizon", "Kaplan-Meier", *models,
                         *(["Aalen-Johansen", *(["CET crude"] if "CET" in models else [])] if competing else [])],
                        *incidence_rows(tr, te, x, events, models, competing)]),
              ""]
    if competing:
        figure = crude_figure(te, x, events, competing, models.get("CET"), out_dir / "cumulative-incidence.png",
                              f"{name}: the share with each competing event first", unit)
        parts += [f"![{name} cumulative incidence of competing events]({figure.name})", ""]
    calibration = metrics.calibration.get("test") or {}
    if calibration:
        figure = horizon_calibration_figure(calibration, events, out_dir / "calibration-horizon.png",
                                            f"{name}: risk by the horizon against Kaplan-Meier, by risk group", unit)
        parts += ["## Calibration by the horizon", "",
                  "Rows grouped by predicted risk by each event's horizon (its median training follow-up); each "
                  "group's mean prediction against its Kaplan-Meier risk. On the diagonal: calibrated.", "",
                  f"![{name} calibration by the horizon]({figure.name})", ""]
    curves = decision_curves(te, x, events, models, version_horizons(version, tr, events), competing)
    if curves:
        figure = decision_figure(curves, out_dir / "decision-curve.png",
                                 f"{name}: net benefit of acting on each model's risk by the horizon", unit)
        parts += ["## Decision curves", "", note(bool(competing)), "", markdown(decision_rows(curves)), "",
                  f"![{name} decision curves]({figure.name})", ""]
    if "CET" in models:
        p = models["CET"].predict_occurrence(x)
        figure = p_ever_figure(te, p, events, out_dir / "p-ever.png", f"{name}: CET's P(ever)")
        parts += ["## P(ever)", "",
                  "CET's probability that each event ever happens. The dashed line is the Kaplan-Meier risk by the "
                  "end of follow-up: the share seen so far, a floor for the share who ever have it.", "",
                  f"![{name} P(ever)]({figure.name})", ""]
        floor, below = p_ever_floor(te, p, events)
        if floor:
            parts += [f"The floor where at least {FLOOR_ROWS} test rows are still followed (the curve's end rests on "
                      "a handful), with its 95 % interval:", "",
                      markdown([["event", "mean P(ever)", "by", "Kaplan-Meier risk (95 %)"], *floor]), ""]
        if below:
            parts += ["**Below the floor:** CET predicts fewer events ever than these test rows already show: "
                      + "; ".join(below) + ". Its P(ever) for them is too low on these rows.", ""]
    if not np.isnan(te.C).all():
        auc = auc_figure(version, f"{name}: test AUC", out_dir / "auc.png")
        cal = calibration_figure(version, Path(dataset_dir), f"{name}: calibration of P(ever)",
                                 out_dir / "calibration.png", device)
        parts += ["## Against the true occurrence", "", f"![{name} AUC]({auc.name}) ![{name} calibration]({cal.name})",
                  ""]
    return write_text(out_dir / "report.md", "\n".join(parts))
