"""The real-data benchmark's tables and the model issue's goals, from cohort records
(``cet_experiments.real`` writes them: ``DIR/<cohort>/metrics.json``).

Protocol a's goals: CET's AUC of P(ever) >= max(ET, BC) and its ECE <= min(ET, BC) + 0.01, means
over events and seeds (``paper_goal``). Protocol b's, per event: each of CET's six C's no more than
0.005 below the better of CoxPH and LogNormalAFT, its IBS no more than 0.005 above the better
(``natural_goal``). ``tables_markdown`` renders both protocols, the goals with the seeds' spread,
and the recipe variants against the default (``ablation_markdown``).
"""

from __future__ import annotations

import json
import math

import numpy as np

from .rows import CLASSICAL_ROWS, NATURAL_ROWS, PAPER_ROWS

RANKINGS = ("median", "rmst", "risk")  # what the C's of protocol b rank
GOAL_TOLERANCE = {"auc": 0.0, "ece": 0.01, "c": 0.005, "ibs": 0.005}  # the model issue's goals


def _mean(values) -> float:
    values = [v for v in values if not math.isnan(v)]
    return float(np.mean(values)) if values else math.nan


def event_mean(record: dict, protocol: str, row: str, metric: str, event: str | None = None) -> float:
    """A row's metric, the mean over seeds (and over events when ``event`` is None)."""
    entry = record[protocol].get(row)
    if entry is None or entry.get("diverged"):
        return math.nan
    tasks = entry["tasks"] if event is None else {event: entry["tasks"][event]}
    return _mean([_mean(v[metric]) for v in tasks.values() if metric in v])


def paper_goal(record: dict, model: str = "CET") -> dict:
    """Protocol a's goals: AUC >= max(ET, BC), ECE <= min(ET, BC) + 0.01 (means over events, seeds)."""
    auc = {r: event_mean(record, "a", r, "auc") for r in (model, "ET", "BC")}
    ece = {r: event_mean(record, "a", r, "ece") for r in (model, "ET", "BC")}
    auc_margin = auc[model] - max(auc["ET"], auc["BC"])
    ece_margin = min(ece["ET"], ece["BC"]) + GOAL_TOLERANCE["ece"] - ece[model]
    return {"auc_margin": auc_margin, "ece_margin": ece_margin,
            "met": bool(auc_margin >= -1e-12 and ece_margin >= -1e-12)}


def seed_margins(record: dict, metric: str = "auc", model: str = "CET") -> list[float]:
    """Protocol a's goal margin seed by seed: each seed's ``model`` against the same seed's fit of
    the baseline that is better on average (ET or BC), so that the margins' mean is the goal's
    margin and their range is the spread of the seeds. Empty when a row diverged or lacks a seed.

    >>> rec = {"a": {r: {"tasks": {"e": {"auc": v}}} for r, v in
    ...              {"CET": [0.70, 0.66], "ET": [0.60, 0.60], "BC": [0.65, 0.69]}.items()}}
    >>> [round(m, 3) for m in seed_margins(rec)]      # against BC, the better on average
    [0.05, -0.03]
    >>> for r, v in {"CET": [0.10, 0.20], "ET": [0.12, 0.12], "BC": [0.30, 0.30]}.items():
    ...     rec["a"][r]["tasks"]["e"]["ece"] = v
    >>> [round(m, 3) for m in seed_margins(rec, "ece")]  # ET's ECE + 0.01 - CET's
    [0.03, -0.07]
    """
    rows = (model, "ET", "BC")
    if any(record["a"].get(r) is None or record["a"][r].get("diverged") for r in rows):
        return []
    per_seed = {}
    for r in rows:
        lists = [v[metric] for v in record["a"][r]["tasks"].values() if metric in v]
        if not lists or len({len(v) for v in lists}) != 1:
            return []
        per_seed[r] = np.nanmean(np.array(lists, dtype=float), axis=0)
    means = {r: float(np.mean(per_seed[r])) for r in ("ET", "BC")}
    if len({len(v) for v in per_seed.values()}) != 1 or any(math.isnan(v) for v in means.values()):
        return []
    if metric == "auc":
        return [float(v) for v in per_seed[model] - per_seed[max(means, key=means.get)]]
    return [float(v) for v in per_seed[min(means, key=means.get)] + GOAL_TOLERANCE[metric] - per_seed[model]]


C_METRICS = tuple(f"{kind}_{r}" for kind in ("harrell", "uno") for r in RANKINGS)
B_LABELS = dict(zip(C_METRICS, ("Harrell median", "Harrell RMST", "Harrell risk", "Uno median", "Uno RMST",
                                 "Uno risk"), strict=True)) | {"ibs": "IBS"}  # the tables' column heads


def natural_goal(record: dict, model: str = "CET") -> dict:
    """Protocol b's goals per event: each C of ``model`` no more than 0.005 below the better of
    CoxPH and LogNormalAFT, its IBS no more than 0.005 above the better; {event: {metric: margin}}
    (negative: missed by that much) and the worst margin."""
    out, worst = {}, math.inf
    for e in record["events"]:
        margins = {}
        for metric in C_METRICS:
            best = max(event_mean(record, "b", r, metric, e) for r in ("CoxPH", "LogNormalAFT"))
            margins[metric] = event_mean(record, "b", model, metric, e) - best + GOAL_TOLERANCE["c"]
        best = min(event_mean(record, "b", r, "ibs", e) for r in ("CoxPH", "LogNormalAFT"))
        margins["ibs"] = best + GOAL_TOLERANCE["ibs"] - event_mean(record, "b", model, "ibs", e)
        defined = [v for v in margins.values() if not math.isnan(v)]
        worst = min(worst, *defined) if defined else worst
        out[e] = margins
    return {"events": out, "worst": worst, "met": bool(worst >= -1e-12) if worst < math.inf else None}


def _f(v: float, digits: int = 3) -> str:
    return "—" if v is None or math.isnan(v) else f"{v:.{digits}f}"


def natural_seed_margins(record: dict, event: str, metric: str, model: str = "CET") -> list[float]:
    """Protocol b's margin of one event and metric, seed by seed: each seed's ``model`` against the
    better classical fit (fitted once); their mean is the goal's margin. Empty when the row diverged.

    >>> rec = {"b": {"CET": {"tasks": {"e": {"ibs": [0.20, 0.24]}}}, "CoxPH": {"tasks": {"e": {"ibs": [0.21]}}},
    ...              "LogNormalAFT": {"tasks": {"e": {"ibs": [0.22]}}}}}
    >>> [round(m, 3) for m in natural_seed_margins(rec, "e", "ibs")]   # 0.21 + 0.005 - CET's
    [0.015, -0.025]
    """
    entry = record["b"].get(model)
    if entry is None or entry.get("diverged"):
        return []
    values = entry["tasks"].get(event, {}).get(metric) or []
    if metric == "ibs":
        best = min(event_mean(record, "b", r, "ibs", event) for r in ("CoxPH", "LogNormalAFT"))
        return [best + GOAL_TOLERANCE["ibs"] - v for v in values]
    best = max(event_mean(record, "b", r, metric, event) for r in ("CoxPH", "LogNormalAFT"))
    return [v - best + GOAL_TOLERANCE["c"] for v in values]


def _verdict(margin: float, seeds=()) -> str:
    if math.isnan(margin):
        return "—"
    spread = f" ({_signed(min(seeds))} to {_signed(max(seeds))})" if len(seeds) > 1 else ""
    return f"{_signed(margin)} {'met' if margin >= -1e-12 else '**missed**'}{spread}"


def _share(by_event: dict | None) -> str:
    values = [v for v in (by_event or {}).values() if v is not None and not math.isnan(v)]
    return f"{np.mean(values):.0%}" if values else "—"


def _signed(v: float) -> str:
    """A margin to three decimals with its own sign: a miss by less than 0.0005 reads -0.000, not +0.000.

    >>> _signed(-6.8e-05), _signed(0.0), _signed(-0.0), _signed(0.0126), _signed(math.nan)
    ('-0.000', '+0.000', '+0.000', '+0.013', '—')
    """
    return "—" if math.isnan(v) else f"{v + 0.0:+.3f}"


def tables_markdown(records: list[dict], against=("CET",)) -> str:
    """The benchmark's tables from cohort records, protocol a first, with the goals judged; recipe
    variants against the rows of ``against`` (``ablation_markdown``)."""
    records = sorted(records, key=lambda r: r["split_sizes"].get("train", 0))
    a_rows = [r for r in PAPER_ROWS if any(r in rec["a"] for rec in records)]
    extra_a = sorted({r for rec in records for r in rec["a"]} - set(a_rows))
    lines = ["## Protocol a: the truth is what the full follow-up saw (test AUC and ECE of P(ever))", "",
             "Mean over events, then over seeds. Goal: CET's AUC >= max(ET, BC); its ECE <= min(ET, BC) + 0.01. The "
             "last column is the ECE of CET's risk by the longest training time of each event (ET's P(ever) is that "
             "risk): a truth seen within the follow-up cannot count the events a cure model places after it. "
             "\"Past the bound\": the share of the truth's events after the added censoring's upper bound, "
             "which the models can only extrapolate (training rows, mean over events). In brackets after a "
             "goal's margin: the lowest and the highest margin of one seed (each seed's CET against the same "
             "seed's fit of the baseline that is better on average; their mean is the margin).", "",
             "| cohort | training rows | events (share seen) | " + " | ".join(a_rows) + " | AUC goal | ECE CET / ET "
                                                                                        "/ BC | ECE goal "
             "| CET's ECE by the follow-up's end | past the bound |",
             "|---" * (8 + len(a_rows)) + "|"]
    for rec in records:
        goal = paper_goal(rec)
        shares = ", ".join(f"{e} {rec['shares'][e]:.0%}" for e in rec["events"])
        aucs = " | ".join(_f(event_mean(rec, "a", r, "auc")) for r in a_rows)
        eces = " / ".join(_f(event_mean(rec, "a", r, "ece")) for r in ("CET", "ET", "BC"))
        lines.append(f"| {rec['cohort']} | {rec['split_sizes']['train']:,} | {shares} | {aucs} | "
                     f"{_verdict(goal['auc_margin'], seed_margins(rec))} | {eces} | "
                     f"{_verdict(goal['ece_margin'], seed_margins(rec, 'ece'))} | "
                     f"{_f(event_mean(rec, 'a', 'CET', 'ece_followed'))} | {_share(rec.get('past_bound'))} |")
    lines += [
        "",
        "Per event (AUC; ECE in brackets):",
        "",
        "| cohort | event | share | " + " | ".join(a_rows + extra_a) + " |",
        "|---" * (3 + len(a_rows) + len(extra_a)) + "|",
    ]
    for rec in records:
        for e in rec["events"]:
            cells = " | ".join(f"{_f(event_mean(rec, 'a', r, 'auc', e))} ({_f(event_mean(rec, 'a', r, 'ece', e))})"
                               if r in rec["a"] else "" for r in a_rows + extra_a)
            lines.append(f"| {rec['cohort']} | {e} | {rec['shares'][e]:.0%} | {cells} |")
    b_rows = [r for r in (*NATURAL_ROWS, *CLASSICAL_ROWS) if any(r in rec["b"] for rec in records)]
    b_rows += sorted({r for rec in records for r in rec["b"]} - set(b_rows))
    heads = [B_LABELS[m] for m in C_METRICS]
    lines += ["", "## Protocol b: the data as recorded (per-event survival metrics on the test rows)", "",
              "Goal: per event, each of CET's six C's no more than 0.005 below the better of CoxPH and "
              "LogNormalAFT, and its IBS no more than 0.005 above the better. Margins "
              "(negative: missed by that much); where the goal is missed, the worst margin's lowest and highest "
              "value for one seed of CET (the classical models are fitted once):", "",
              "| cohort | event | " + " | ".join(heads) + " | IBS | met |", "|---" * 10 + "|"]
    for rec in records:
        goal = natural_goal(rec)
        for e, margins in goal["events"].items():
            cells = " | ".join(_signed(margins[m]) for m in (*C_METRICS, "ibs"))
            defined = [v for v in margins.values() if not math.isnan(v)]
            ok = "—" if not defined else "yes" if min(defined) >= -1e-12 else "**no**"
            if ok == "**no**":  # the worst margin, seed by seed: a miss within CET's seeds or beyond them
                worst = min((m for m in margins if not math.isnan(margins[m])), key=margins.get)
                seeds = natural_seed_margins(rec, e, worst)
                if len(seeds) > 1:
                    ok += f" ({B_LABELS[worst]} {_signed(min(seeds))} to {_signed(max(seeds))})"
            lines.append(f"| {rec['cohort']} | {e} | {cells} | {ok} |")
    lines += ["", "Means over events (networks: over seeds too); log-likelihood per row and event on the test rows; "
              "calibration: the mean gap to Kaplan-Meier of the risk by the training "
              "median, in groups of predicted risk:", "",
              "| cohort | model | " + " | ".join(heads) + " | IBS | calibration | log-lik | fit s |", "|---" * 12 + "|"]
    for rec in records:
        for r in b_rows:
            if r not in rec["b"]:
                continue
            cells = " | ".join(_f(event_mean(rec, "b", r, m)) for m in (*C_METRICS, "ibs", "calibration"))
            lines.append(f"| {rec['cohort']} | {r} | {cells} | {_f(_mean(rec['b'][r].get('loglik', [math.nan])))} | "
                         f"{_f(_mean(rec['b'][r]['seconds']), 1)} |")
    fit_rows = [r for r in a_rows + extra_a]
    lines += ["", "Fit seconds (protocol a, mean over seeds):", "",
              "| cohort | " + " | ".join(fit_rows) + " |", "|---" * (1 + len(fit_rows)) + "|"]
    for rec in records:
        lines.append(f"| {rec['cohort']} | " + " | ".join(_f(_mean(rec["a"][r]["seconds"]), 1) if r in rec["a"] else ""
                                                          for r in fit_rows) + " |")
    diverged = [f"{r} on {rec['cohort']} (protocol {p}, seeds {', '.join(map(str, entry['diverged']))})"
                for rec in records for p in ("a", "b") for r, entry in rec[p].items() if entry.get("diverged")]
    if diverged:
        lines += ["", "Diverged (the training loss became non-finite; the row has no figure there): "
                  + "; ".join(diverged) + "."]
    lines.append(ablation_markdown(records, against))
    lines += ["", machines_line(records)]
    return "\n".join(lines) + "\n"


def machines_line(records) -> str:
    """Where the rows ran: one machine, or each machine with its rows (a record's ``machines``,
    else its ``machine`` for every row), since fit seconds compare only within one machine.

    >>> machines_line([{"a": {"CET": 1}, "b": {}, "machine": {"cpu_model": "X"}}])
    'Machine: cpu_model X.'
    >>> where = {"CET": {"cpu_model": "Y"}, "ET": {"cpu_model": "X"}}
    >>> machines_line([{"a": {"CET": 1, "ET": 1}, "b": {}, "machines": where}])
    'Machines: cpu_model X (ET); cpu_model Y (CET).'
    """
    rows_on: dict[str, list[str]] = {}
    for rec in records:
        where = rec.get("machines") or {r: rec.get("machine", {}) for p in ("a", "b") for r in rec[p]}
        for row, host in where.items():
            names = rows_on.setdefault(json.dumps(host or {}, sort_keys=True), [])
            if row not in names:
                names.append(row)
    if len(rows_on) <= 1:
        return "Machine: " + "; ".join(_machine_text(json.loads(m)) for m in rows_on) + "."
    return "Machines: " + "; ".join(f"{_machine_text(json.loads(m))} ({', '.join(rows)})"
                                    for m, rows in sorted(rows_on.items())) + "."


ABLATION_METRICS = (("a", "auc", "AUC", 1), ("a", "ece", "ECE", -1), ("b", "harrell_rmst", "Harrell RMST", 1),
                    ("b", "uno_risk", "Uno risk", 1), ("b", "ibs", "IBS", -1), ("b", "calibration", "calibration", -1))


def ablation_markdown(records: list[dict], against=("CET",)) -> str:
    """Each recipe variant against the row of ``against`` with the same preset (``CET`` for the
    ``CET/...`` variants; ``ET/no-validation`` for ``ET/holdout-20``), on the cohorts that have
    both: per metric the mean over cohorts of (variant - reference) (each cohort's figure a mean
    over its events and seeds), the cohorts where the variant is better, and the fit time's ratio.
    Empty without such pairs."""
    present = {r for rec in records for p in ("a", "b") for r in rec[p]}
    # a variant is "<preset>/<change>": in the list, or in records made when it was (its code since removed)
    variants = sorted(r for r in present if "/" in r)
    pairs = [(v, ref) for ref in against for v in variants
             if v != ref and v.split("/")[0] == ref.split("/")[0]]
    if not pairs:
        return ""
    heads = [label for _, _, label, _ in ABLATION_METRICS]
    lines = ["", f"## Recipe variants against {', '.join(against)}", "",
             "Per metric: the mean over cohorts of variant minus reference (each cohort: the mean over events and "
             "seeds), and in brackets the cohorts where the variant is better / where both ran (a mean over "
             "cohorts can rest on one; the counts do not). Time: the mean ratio of fit seconds (protocol a). "
             "Goals a: on the cohorts where ET and BC ran too, those where the variant meets protocol a's AUC "
             "goal and its ECE goal, then the reference's, of how many.", "",
             "| variant | against | " + " | ".join(heads) + " | log-lik | time | goals a |",
             "|---" * (5 + len(heads)) + "|"]
    for v, reference in pairs:
        cells = []
        for protocol, metric, _, sign in ABLATION_METRICS:
            deltas = [event_mean(rec, protocol, v, metric) - event_mean(rec, protocol, reference, metric)
                      for rec in records if v in rec[protocol] and reference in rec[protocol]]
            deltas = [d for d in deltas if not math.isnan(d)]
            better = sum(sign * d > 0 for d in deltas)
            cells.append(f"{_signed(float(np.mean(deltas)))} ({better}/{len(deltas)})" if deltas else "—")
        ll = [_mean(rec["b"][v]["loglik"]) - _mean(rec["b"][reference]["loglik"]) for rec in records
              if v in rec["b"] and reference in rec["b"]
              and not (rec["b"][v].get("diverged") or rec["b"][reference].get("diverged"))]
        ratio = [_mean(rec["a"][v]["seconds"]) / _mean(rec["a"][reference]["seconds"]) for rec in records
                 if v in rec["a"] and reference in rec["a"]
                 and not (rec["a"][v].get("diverged") or rec["a"][reference].get("diverged"))]
        ll = [d for d in ll if not math.isnan(d)]
        ll_text = f"{_signed(float(np.mean(ll)))} ({sum(d > 0 for d in ll)}/{len(ll)})" if ll else "—"
        lines.append(f"| {v} | {reference} | " + " | ".join(cells) + f" | {ll_text} | "
                     f"{f'{np.mean(ratio):.2f}x' if ratio else '—'} | {goal_counts(records, v, reference)} |")
    return "\n".join(lines) + "\n"


def goal_counts(records: list[dict], variant: str, reference: str) -> str:
    """Protocol a's goals met by ``variant`` and by ``reference``, on the cohorts where both and ET
    and BC have figures: "AUC, ECE (the reference's AUC, ECE) of n", or "—" without such cohorts.

    >>> def rec(cet, other):
    ...     entry = lambda auc, ece: {"tasks": {"e": {"auc": [auc], "ece": [ece]}}}
    ...     return {"a": {"CET": entry(*cet), "CET/x": entry(*other), "ET": entry(0.70, 0.10),
    ...                   "BC": entry(0.72, 0.20)}}
    >>> goal_counts([rec((0.71, 0.12), (0.73, 0.10)), rec((0.75, 0.05), (0.74, 0.15))], "CET/x", "CET")
    '2, 1 (1, 1) of 2'
    """
    rows = (variant, reference, "ET", "BC")
    usable = [rec for rec in records if all(not math.isnan(event_mean(rec, "a", r, "auc")) for r in rows)]
    if not usable:
        return "—"
    counts = []
    for row in (variant, reference):
        goals = [paper_goal(rec, row) for rec in usable]
        counts.append((sum(g["auc_margin"] >= -1e-12 for g in goals), sum(g["ece_margin"] >= -1e-12 for g in goals)))
    (auc, ece), (ref_auc, ref_ece) = counts
    return f"{auc}, {ece} ({ref_auc}, {ref_ece}) of {len(usable)}"


def _machine_text(m: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in m.items() if isinstance(v, str | int | float))
