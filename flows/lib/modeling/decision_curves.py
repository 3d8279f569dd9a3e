"""Decision curves for a dataset's report: would acting on a model's risk by a horizon do more good
than treating every patient, or none?

Per event, at the horizon the version's calibration uses (its median training follow-up), the net
benefit (:func:`cet_model.metrics.net_benefit`) of treating the test rows whose predicted risk by
then is at least each threshold, for every time model and for treating all. Where events compete,
the outcome is the Aalen-Johansen share whose first event is this one, and CET's line is its crude
risk (``predict_cumulative_incidence``). Only aggregates are drawn: no row reaches the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cet_model.metrics import net_benefit
from cet_model.nonparametric import aalen_johansen_risk, kaplan_meier_risk
from flows.lib.modeling.report_panels import close_figure, first_kinds, inputs_of, kept, panels

THRESHOLDS = np.round(np.arange(0.005, 0.999, 0.005), 3)  # the risks at which a reader might act
TREAT_ALL = "treat all"

def note(competing: bool) -> str:
    """What the report's decision curve section says, naming Aalen-Johansen only where events compete."""
    outcome = ("Kaplan-Meier's estimate, Aalen-Johansen's for events that compete (against CET's crude risk)"
               if competing else "Kaplan-Meier's estimate")
    return ("Would acting on a model's risk by the horizon do more good than treating every patient, or none? Each "
            "line is the net benefit (Vickers and Elkin 2006; for follow-up data, Vickers et al. 2008) of treating the "
            "test rows whose predicted risk by the event's horizon (its median training follow-up) is at least a "
            "threshold p: the share treated who have the event by then, less the share treated needlessly weighed "
            "p / (1 - p), as a clinician who would treat at risk p weighs them. Who has the event by then is "
            f"{outcome}. A model earns its use at the thresholds where its line lies above both treat all and treat "
            "none (0), here by at least one net true positive per 1,000 rows. The table gives the range of such "
            "thresholds where it gains the most, and how many other ranges there are; on a small test split the "
            "lines are jagged, and the figure shows them whole.")


@dataclass
class DecisionCurve:
    """One event's decision curves: net benefit at ``THRESHOLDS`` per model and for treating all."""

    event: str
    horizon: float
    observed: float  # the share with the event by the horizon (Kaplan-Meier, or Aalen-Johansen)
    crude: bool  # the event competes: the outcome is its being first
    rows: int
    curves: dict[str, np.ndarray]
    top_risk: float  # the highest 99th percentile of the models' risks: the figure's right edge


def decision_curves(split, x, events, models: dict, horizons: dict[str, float],
                    competing: list[list[int]] = ()) -> list[DecisionCurve]:
    """Per event with a horizon and a followed row of ``split``: every time model's net benefit at
    ``THRESHOLDS`` by the horizon, and treating all's. ``models`` maps a name to a fitted model;
    ``competing`` holds the groups of events that compete (``competing_groups``)."""
    if not models:  # treating all against treating none says nothing of a model
        return []
    group_of = {j: g for g in competing for j in g}
    out = []
    for j, e in enumerate(events):
        if e not in horizons:
            continue
        h, group = float(horizons[e]), group_of.get(j)
        if group is None:
            rows, of = kept(split, j), None
            s = split.S[rows, j]
        else:
            (rows, s), of = first_kinds(split, group), group.index(j) + 1
        if not rows.any():
            continue
        t = split.T[rows, j]
        risks = {}
        for name, model in models.items():
            if group is not None and name == "CET":
                crude = model.predict_cumulative_incidence(inputs_of(x, rows), [h], j,
                                                           competing=[i for i in group if i != j])
                risks["CET crude"] = crude[:, 0]
            else:
                label = name if group is None else f"{name} (net risk)"
                risks[label] = 1.0 - model.predict_survival(inputs_of(x, rows), [h], event=j)[:, 0]
        curves = {name: net_benefit(t, s, r, h, THRESHOLDS, of=of) for name, r in risks.items()}
        curves[TREAT_ALL] = net_benefit(t, s, np.ones(len(t)), h, THRESHOLDS, of=of)
        observed = kaplan_meier_risk(t, s, h) if of is None else aalen_johansen_risk(t, s, of, h)
        top = max((float(np.quantile(r, 0.99)) for r in risks.values()), default=observed)
        out.append(DecisionCurve(e, h, observed, group is not None, int(rows.sum()), curves, top))
    return out


MARGIN = 0.001  # above both by at least one net true positive per 1,000 rows: not a tie in the noise


def useful_thresholds(thresholds, curve, treat_all) -> str:
    """The thresholds where ``curve`` lies above both treating all and treating none by at least
    ``MARGIN``: the run of them where it gains the most over both (summed), as a range, and how many
    other runs there are (a small test split's curves are jagged; the figure shows them whole).

    >>> p = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    >>> useful_thresholds(p, np.array([.5, .3, .2, .1, 0, 0]), np.array([.5, .2, .1, -.1, -.3, -.6]))
    '0.2-0.4'
    >>> useful_thresholds(p, np.array([.1, 0, .002, .002, np.nan, .0005]), np.array([0.0] * 6))
    '0.1 (+1 other range)'
    >>> useful_thresholds(p, np.zeros(6), np.zeros(6))
    'none'
    """
    gain = np.nan_to_num(np.asarray(curve, float), nan=-np.inf) - np.maximum(np.asarray(treat_all, float), 0.0)
    better = gain >= MARGIN
    runs, start = [], None
    for k, b in enumerate([*better, False]):
        if b and start is None:
            start = k
        elif not b and start is not None:
            runs.append((start, k - 1))
            start = None
    if not runs:
        return "none"
    first, last = max(runs, key=lambda r: gain[r[0]:r[1] + 1].sum())  # the first of the largest gains
    text = f"{thresholds[first]:g}" + ("" if last == first else f"-{thresholds[last]:g}")
    others = len(runs) - 1
    return text + (f" (+{others} other range{'s' if others > 1 else ''})" if others else "")


def decision_rows(curves: list[DecisionCurve]) -> list[list[str]]:
    """The report's table: per event, its horizon, the share with it by then, and per model the
    range of thresholds where the model gains the most over both (``useful_thresholds``)."""
    names = list(dict.fromkeys(n for c in curves for n in c.curves if n != TREAT_ALL))
    rows = [["event", "by", "observed by then", *(f"{n}: worth using at" for n in names)]]
    for c in curves:
        rows.append([c.event, f"{c.horizon:.3g}", f"{c.observed:.3f}" + (" (first)" if c.crude else ""),
                     *(useful_thresholds(THRESHOLDS, c.curves[n], c.curves[TREAT_ALL]) if n in c.curves else ""
                       for n in names)])
    return rows


def decision_figure(curves: list[DecisionCurve], path: Path, title: str, unit: str | None = None) -> Path:
    """Per event: net benefit against the threshold for each model, treating all and treating none,
    from 0 to a little past the models' highest risks."""
    fig, axes = panels(len(curves))
    for c, ax in zip(curves, axes, strict=True):
        for name, nb in c.curves.items():
            style = {"color": "grey", "lw": 1.0} if name == TREAT_ALL else {"lw": 1.3}
            ax.plot(THRESHOLDS, nb, label=name, **style)
        ax.axhline(0.0, color="black", lw=0.8, label="treat none")
        right = float(min(1.0, max(0.1, 1.25 * c.top_risk, 1.25 * c.observed)))
        ax.set_xlim(0.0, right)
        ax.set_ylim(-0.25 * max(c.observed, 0.02), 1.15 * max(c.observed, 0.01))
        by = f"{c.horizon:.3g}{f' {unit}' if unit else ''}"
        ax.set_title(f"{c.event} by {by} (n={c.rows}" + (", first event)" if c.crude else ")"), fontsize=9)
        ax.set_xlabel("threshold risk p", fontsize=8)
    return close_figure(fig, axes, "net benefit", title, path)
