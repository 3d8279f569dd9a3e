"""What a model version's records say, as text and table rows: the summary ``flows.train``
prints, the per-event and interval tables, the notes on P(ever) beyond the follow-up, and the
rows the flows publish as Prefect artifacts, and the subgroup table. Reads a version folder's records
only: its evaluation (``flows.lib.infra.evaluation_record.Evaluation``), ``params.json``, ``data.json``
and ``subgroups.json``; loads no model code, so that ``python -m flows.train show`` answers at once."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cet_model.choices import BEYOND_SHARE, CI_RMST, FOLLOWED_ROWS, METRICS, REFERENCE, RISING_SHARE
from cet_model.summary import average_over_tasks, bounds_text, difference_text, mean_std, resamples_text
from flows.lib.infra.evaluation_record import Evaluation
from flows.lib.modeling import render

VERSION_METRICS = (*METRICS, CI_RMST)  # what a version records per model, split and task
SUBGROUPS_FILE = "subgroups.json"  # a version's metrics by subgroup (flows.lib.modeling.subgroups writes it)
SUBGROUPS_MIN_ROWS = 20  # fewer test rows in a group: its size only, no metric


def metric_rows(version: Path) -> list[dict]:
    """The test metrics of a version as table rows (model, task, then VERSION_METRICS)."""
    metrics = Evaluation.read(version)
    rows = []
    for model, tasks in metrics.test.items():
        for task, row in tasks.items():
            rows.append({"model": model, "task": task, **{m: _round(row.get(m)) for m in VERSION_METRICS}})
        summ = metrics.summary[model]
        rows.append({"model": model, "task": "Avg", **{m: _round(summ.get(f"test_{m}")) for m in VERSION_METRICS}})
    return rows


SUMMARY_COLUMNS = {"auc": "AUC", "ci": "Harrell's C", CI_RMST: "C (RMST)", "uno_c": "Uno's C", "ibs": "IBS",
                   "mrae": "MRAE", "ece": "ECE"}


def summary_lines(version: Path) -> list[str]:
    """What ``python -m flows.train evaluate`` prints after its decision: per model, the test
    split's averages over events (columns no model has left out; AUC and Harrell's C with their
    paired bootstrap interval, ``intervals``), the calibration by the median follow-up (mean
    absolute difference from Kaplan-Meier) and the AUC at it (``calibration_rows``), then CET minus
    each other model with its interval."""
    rows = [r for r in metric_rows(version) if r["task"] == "Avg"]
    by_horizon = {"test_abs_diff": {}, "test_auc_at_h": {}}  # per model, the events' values
    for r in calibration_rows(version):
        for key, values in by_horizon.items():
            if r.get(key) is not None:
                values.setdefault(r["model"], []).append(r[key])
    by_horizon = {k: v for k, v in by_horizon.items() if v}
    record = intervals(version)
    columns = [k for k in SUMMARY_COLUMNS if any(r.get(k) is not None for r in rows)]
    names = {"test_abs_diff": "risk vs KM", "test_auc_at_h": "AUC at h"}
    head = ["model", *(SUMMARY_COLUMNS[k] for k in columns), *(names[k] for k in by_horizon)]
    table = [head]
    for r in rows:
        cells = [r["model"]]
        for k in columns:
            given = (record.get("metrics", {}).get(k) or {}).get(r["model"]) if record else None
            cells.append("-" if r.get(k) is None else f"{r[k]:.3f}" + bounds_text(given))
        for key, values in by_horizon.items():
            given = ((record.get("metrics", {}).get("auc_h") or {}).get(r["model"])
                     if record and key == "test_auc_at_h" else None)
            cells.append(
                "-" if not values.get(r["model"]) else f"{np.mean(values[r['model']]):.3f}" + bounds_text(given)
            )
        table.append(cells)
    params = (
        json.loads((Path(version) / "params.json").read_text()) if (Path(version) / "params.json").is_file() else {}
    )
    unit = (json.loads((Path(version) / "data.json").read_text()).get("time_unit") or ""
            if (Path(version) / "data.json").is_file() else "")
    h = (f"h = {params['horizon']:g} {unit}".rstrip() if params.get("horizon") is not None
         else "h: each event's median training follow-up")
    note = (f" ({h}; risk vs KM: predicted risk by h against Kaplan-Meier, mean abs. difference; AUC at h: "
            "cumulative/dynamic AUC of that risk)" if by_horizon else "")
    lines = [f"test split, averages over events{note}:", *render.text(table)]
    blank = [cells[0] for cells in table[1:] if all(c == "-" for c in cells[1:])]
    classifiers = [m for m in blank if m == "BC"]  # BC on data without the truth: say why its row is empty
    if classifiers:
        lines.append(f"  {', '.join(classifiers)}: no figure on these data: scored only against the true occurrence, "
                     "which they do not have")
    others = [m for m in blank if m != "BC"]  # e.g. the Cox reference where no test row observed the event
    if others:
        lines.append(f"  {', '.join(others)}: no figure on these data: each of its measures needs the event observed "
                     "in some test rows")
    chance = (record.get("metrics", {}).get(CI_RMST) or {}) if record and "auc" not in columns else {}
    if chance and all(v.get("low") is not None and v["low"] <= 0.5 for v in chance.values()):
        lines.append(f"  no model's C (RMST) interval lies above 0.5 ({', '.join(chance)}): on these {record['rows']} "
                     "test rows none is shown to rank better than chance")
    if any(r["model"] == REFERENCE for r in rows) and "ci" in columns:
        lines.append(f"  Harrell's and Uno's C rank CET's time given that the event happens, {REFERENCE}'s risk: "
                     "C (RMST) ranks every model by the event-free time, the like-for-like column")
    diff = difference_table(record, {**SUMMARY_COLUMNS, "auc_h": "AUC at h"}, empty="-")
    if diff:
        lines += [f"[ ]: {record['level']:.0%} paired bootstrap interval ({resamples_text(record)}, the same for "
                  "every model); CET minus each model:", *render.text(diff)]
    return lines + per_event_lines(version) + beyond_lines(version) + rising_lines(version) + competing_lines(version)


def competing_lines(version: Path) -> list[str]:
    """A line per group of events that compete (``data.json``'s ``competing``): their risks are net
    ones, and where their crude ones are. [] without a group, or for an older version.

    >>> import tempfile
    >>> version = Path(tempfile.mkdtemp())
    >>> _ = (version / "data.json").write_text(json.dumps({"competing": [["relapse", "death"]]}))
    >>> print("\\n".join(competing_lines(version)))
      relapse and death compete (one follow-up, never two seen on a row): P(ever) and the risks above are net ones;
      their crude risks, the share with each first, are in the report (Aalen-Johansen, CET crude) and in flows.predict
      --horizons (crude_<h>_<event>)
    """
    data = Path(version) / "data.json"
    groups = (json.loads(data.read_text()).get("competing") or []) if data.is_file() else []
    return [f"  {' and '.join(g)} compete (one follow-up, never two seen on a row): P(ever) and the risks above are "
            "net ones; their crude risks, the share with each first, are in the report (Aalen-Johansen, CET crude) "
            "and in flows.predict --horizons (crude_<h>_<event>)" for g in groups]


def beyond_lines(version: Path) -> list[str]:
    """Lines naming the events for which CET (the default; else the first CET model recorded)
    places at least ``BEYOND_SHARE`` of its test rows' mean P(ever) after the training follow-up
    (the last time at least 10 training rows were still followed; ``metrics.json``'s
    ``beyond_follow_up``, :func:`beyond_follow_up`): there P(ever) rests on the log-normal tail,
    not on data. [] when none does, or for an older version that does not record it.

    >>> import tempfile
    >>> version = Path(tempfile.mkdtemp())
    >>> _ = (version / "data.json").write_text(json.dumps({"time_unit": "weeks"}))
    >>> _ = (version / "metrics.json").write_text(json.dumps({"beyond_follow_up": {"test": {"CET": {
    ...     "arrest": {"follow_up": 52.0, "p_ever": 0.435, "by_follow_up": 0.247, "beyond": 0.188,
    ...                "share_beyond": 0.432, "km_by_follow_up": 0.259, "km_split_by_follow_up": 0.276}}}}}))
    >>> print("\\n".join(beyond_lines(version)))
      CET places part of P(ever) after the training follow-up (the last time at least 10 training rows were still
      followed), where it rests on the log-normal tail, not on data (a risk by a horizon within the follow-up,
      flows.predict --horizons, does not):
        arrest: P(ever) 0.435 on average over the test rows, 0.247 by 52 weeks (Kaplan-Meier 0.276 on the test rows,
        0.259 on the training rows): 43 % after
    >>> _ = (version / "metrics.json").write_text(json.dumps({"beyond_follow_up": {"test": {"CET": {   # a stand-in
    ...     "T1": {"follow_up": 3.0, "p_ever": 0.519, "by_follow_up": 0.370, "beyond": 0.149,
    ...            "share_beyond": 0.287, "km_by_follow_up": 0.394, "true_share": 0.501,
    ...            "true_by_follow_up": 0.374}}}}}))
    >>> print(beyond_lines(version)[1])
        T1: P(ever) 0.519 on average over the test rows, 0.370 by 3 weeks (Kaplan-Meier 0.394 on the training rows): 29
        % after; the true occurrence in the test rows: 0.501, 0.374 by then
    """
    record = beyond_record(version)
    if not record:
        return []
    model = "CET" if "CET" in record else next(iter(record))
    data = Path(version) / "data.json"
    unit = (json.loads(data.read_text()).get("time_unit") or "") if data.is_file() else ""
    far = {e: r for e, r in record[model].items() if (r.get("share_beyond") or 0.0) >= BEYOND_SHARE}
    if not far:
        return []
    return [f"  {model} places part of P(ever) after the training follow-up (the last time at least {FOLLOWED_ROWS} "
            "training rows were still followed), where it rests on the log-normal tail, not on data (a risk by a "
            "horizon within the follow-up, flows.predict --horizons, does not):",
            *(f"    {e}: P(ever) {r['p_ever']:.3f} on average over the test rows, {r['by_follow_up']:.3f} by "
              f"{r['follow_up']:g} {unit}".rstrip() + f" (Kaplan-Meier {_km_text(r)}): "
              f"{100 * r['share_beyond']:.0f} % after"
              + (f"; the true occurrence in the test rows: {r['true_share']:.3f}" if "true_share" in r else "")
              + (f", {r['true_by_follow_up']:.3f} by then" if "true_by_follow_up" in r else "")
              for e, r in far.items())]


def rising_lines(version: Path) -> list[str]:
    """Lines naming the events whose training Kaplan-Meier risk still rises at the end of the
    follow-up (its last quarter adds ``RISING_SHARE`` or more of the risk by the end;
    ``km_last_quarter`` of the ``beyond_follow_up`` record): there the data do not show how many
    will ever have the event, and CET's P(ever) rests on the fitted tail whatever share of it the
    model places after the end (on the stand-ins CET places too little there).
    [] when none does, or for a version without the figure.

    >>> import tempfile
    >>> version = Path(tempfile.mkdtemp())
    >>> _ = (version / "metrics.json").write_text(json.dumps({"beyond_follow_up": {"test": {"CET": {
    ...     "a": {"km_by_follow_up": 0.30, "km_last_quarter": 0.06,       # a fifth of it in the last quarter
    ...           "km_last_quarter_ci": [0.041, 0.088], "km_last_quarter_events": 31},
    ...     "b": {"km_by_follow_up": 0.30, "km_last_quarter": 0.01}}}}}))  # levelled off
    >>> print("\\n".join(rising_lines(version)))
      the training rows' Kaplan-Meier risk still rises at the end of the follow-up for 1 of the 2 events (the last
      quarter adds 10% or more of the risk by the end, 95 % interval and events in it): how many will ever have them is
      not in the data, and CET's P(ever) rests on the fitted tail, whatever share of it the model places after the end:
        a: +0.060 [0.041, 0.088], 31 events in the last quarter, of 0.300 by the end
    """
    record = beyond_record(version)
    if not record:
        return []
    model = "CET" if "CET" in record else next(iter(record))
    rising = {e: r for e, r in record[model].items()
              if r.get("km_last_quarter") is not None and r["km_by_follow_up"] > 0
              and r["km_last_quarter"] >= RISING_SHARE * r["km_by_follow_up"]}
    if not rising:
        return []
    which = "the event" if len(record[model]) == 1 else f"{len(rising)} of the {len(record[model])} events"
    return [f"  the training rows' Kaplan-Meier risk still rises at the end of the follow-up for {which} "
            f"(the last quarter adds {RISING_SHARE:.0%} or more of the risk by the end"
            + (", 95 % interval and events in it" if any("km_last_quarter_ci" in r for r in rising.values()) else "")
            + "): "
            f"how many will ever have them is not in the data, and {model}'s P(ever) rests on the fitted tail, "
            "whatever share of it the model places after the end:",
            *(f"    {e}: {quarter_text(r)} in the last quarter, of {r['km_by_follow_up']:.3f} by the end"
              for e, r in rising.items())]


def quarter_text(record: dict) -> str:
    """The Kaplan-Meier risk gained over the follow-up's last quarter of a ``beyond_follow_up``
    record, with its 95 % interval and the events it rests on where the record has them (versions
    trained by older code do not).

    >>> quarter_text({"km_last_quarter": 0.085, "km_last_quarter_ci": [0.05, 0.13], "km_last_quarter_events": 40})
    '+0.085 [0.050, 0.130], 40 events'
    >>> quarter_text({"km_last_quarter": 0.0, "km_last_quarter_ci": [None, None], "km_last_quarter_events": 0})
    '+0.000, 0 events'
    >>> quarter_text({"km_last_quarter": 0.085})
    '+0.085'
    """
    low, high = record.get("km_last_quarter_ci") or (None, None)
    events = record.get("km_last_quarter_events")
    return (f"+{record['km_last_quarter']:.3f}" + bounds_text({"low": low, "high": high})
            + ("" if events is None else f", {events} event" + ("" if events == 1 else "s")))


def beyond_record(version: Path) -> dict:
    """A version's record of P(ever) past the follow-up on its test rows, {model: {event: ...}}
    (:func:`beyond_follow_up`), or {} for an older version without the record."""
    path = Path(version) / "metrics.json"
    return (Evaluation.read(version).beyond_follow_up.get("test") or {}) if path.is_file() else {}


def _km_text(record: dict) -> str:
    """The Kaplan-Meier risks by the follow-up's end of a ``beyond_follow_up`` record, as text.

    >>> _km_text({"km_by_follow_up": 0.259, "km_split_by_follow_up": 0.241}), _km_text({"km_by_follow_up": 0.259})
    ('0.241 on the test rows, 0.259 on the training rows', '0.259 on the training rows')
    """
    split = record.get("km_split_by_follow_up")
    return (f"{split:.3f} on the test rows, " if split is not None else "") + \
        f"{record['km_by_follow_up']:.3f} on the training rows"


FEW_OBSERVED = 10  # an event observed in fewer test rows is said under the per-event table


def per_event_lines(version: Path) -> list[str]:
    """With more than one event, the test split per event: each model's AUC against the true
    occurrence where the data have it, else its C (RMST), beside the number of test rows where
    the event was observed (what the figure rests on), and a line naming the events observed in
    fewer than ``FEW_OBSERVED``; for one event, that line alone (or []). The average can hide a rare event: actg's
    deaths
    (26 in 1,151 subjects) beside its AIDS diagnoses (96).

    >>> import tempfile
    >>> version = Path(tempfile.mkdtemp())
    >>> _ = (version / "metrics.json").write_text(json.dumps({
    ...     "test": {"CET": {"aids": {"ci_rmst": 0.777}, "death": {"ci_rmst": 0.877}}},
    ...     "observed": {"test": {"aids": 18, "death": 2}}}))
    >>> print("\\n".join(per_event_lines(version)))
    test split, per event: C (RMST) (observed: test rows with the event observed):
      event  observed  CET
      aids   18        0.777
      death  2         0.877
      observed in fewer than 10 test rows: death (2): a figure and its interval rest on that many cases
    >>> _ = (version / "metrics.json").write_text(json.dumps({
    ...     "test": {"CET": {"arrest": {"mrae": 0.07}}}, "observed": {"test": {"arrest": 0}}}))
    >>> print("\\n".join(per_event_lines(version)))
      observed in fewer than 10 test rows: arrest (0): a figure and its interval rest on that many cases; with none, no
      concordance (Harrell's C, C (RMST), the AUC at h) can be computed
    """
    metrics = Evaluation.read(version)
    test, events = metrics.test, metrics.events()
    observed = metrics.observed.get("test") or {}
    few = [f"{e} ({observed[e]})" for e in events if isinstance(observed.get(e), int) and observed[e] < FEW_OBSERVED]
    few_line = (f"  observed in fewer than {FEW_OBSERVED} test rows: {', '.join(few)}: a figure and its interval rest "
                "on that many cases" + ("; with none, no concordance (Harrell's C, C (RMST), the AUC at h) can be "
                                        "computed" if any(observed[e] == 0 for e in events if e in observed) else ""))
    if len(events) < 2:
        return [few_line] if few else []
    key = (
        "auc" if any((rows.get(e) or {}).get("auc") is not None for rows in test.values() for e in events) else CI_RMST
    )
    models = [m for m, rows in test.items() if any((rows.get(e) or {}).get(key) is not None for e in events)]
    if not models:
        return []
    record = metrics.intervals.get("test") or {}
    bounds = (record.get("by_event") or {}).get(key) or {}  # older versions have none
    table = [["event", *(["observed"] if observed else []), *models]]
    for j, e in enumerate(events):
        cells = []
        for m in models:
            v, given = (test[m].get(e) or {}).get(key), bounds.get(m) or []
            cells.append("-" if v is None else f"{v:.3f}" + bounds_text(given[j] if j < len(given) else None))
        table.append([e, *([str(observed.get(e, "-"))] if observed else []), *cells])
    title = {"auc": "AUC against the true occurrence", CI_RMST: "C (RMST)"}[key]
    notes = [text for text, shown in (("observed: test rows with the event observed", observed),
                                      (f"[ ]: {record.get('level', 0.95):.0%} paired bootstrap interval, the same "
                                       "resamples", bounds)) if shown]
    lines = [f"test split, per event: {title}" + (f" ({'; '.join(notes)})" if notes else "") + ":", *render.text(table)]
    return lines + ([few_line] if few else [])


def difference_table(record: dict, titles: dict[str, str], empty: str = "") -> list[list[str]]:
    """CET minus each other model from an ``intervals`` record, as a header and rows of cells: the
    metrics of ``titles`` ({metric: column title}, in that order) that have differences, the models
    in the order the record lists them, ``empty`` where a model lacks a metric; [] when none."""
    differences = (record or {}).get("differences") or {}
    metrics = [k for k in titles if differences.get(k)]
    models = list(dict.fromkeys(m for k in metrics for m in differences[k]))
    if not metrics:
        return []
    return [["CET minus", *(titles[k] for k in metrics)],
            *([m, *(difference_text(differences[k][m]) if m in differences[k] else empty for k in metrics)]
              for m in models)]


def intervals(version: Path) -> dict:
    """A version's paired bootstrap intervals of the test AUC and Harrell's C
    (``cet_model.bootstrap.bootstrap_intervals``); {} for a version trained before they were recorded."""
    return Evaluation.read(version).intervals.get("test") or {}


def interval_rows(version: Path) -> list[dict]:
    """The intervals as table rows: what (a model, or "CET - <model>"), event ("average" for the
    average over events; each event's own interval where there are several), metric, estimate,
    low, high."""
    record, rows = intervals(version), []
    events = Evaluation.read(version).events()
    for kind, prefix in (("metrics", ""), ("differences", "CET - ")):
        for metric, models in (record.get(kind) or {}).items():
            for model, v in models.items():
                rows.append({"what": prefix + model, "event": "average", "metric": metric,
                             **{k: _round(v.get(k)) for k in ("estimate", "low", "high")}})
    for metric, models in ((record.get("by_event") or {}).items() if len(events) > 1 else ()):
        for model, per_event in models.items():
            for event, v in zip(events, per_event, strict=False):
                if v is not None:
                    rows.append({"what": model, "event": event, "metric": metric,
                                 **{k: _round(v.get(k)) for k in ("estimate", "low", "high")}})
    return rows


def calibration_rows(version: Path) -> list[dict]:
    """A version's calibration by a horizon as table rows: model, event, horizon, and per split the
    mean absolute difference between predicted risk and Kaplan-Meier risk over the risk groups
    (``calibration_by_horizon``), and the cumulative/dynamic AUC of the risk at the horizon (None for a
    version trained before it was recorded). Empty for a version trained before calibration was recorded."""
    record = Evaluation.read(version).calibration
    rows = []
    for model, events in (record.get("test") or {}).items():
        for event, test in events.items():
            val = ((record.get("val") or {}).get(model) or {}).get(event) or {}
            rows.append({"model": model, "event": event, "horizon": test["horizon"],
                         "val_abs_diff": _round(val.get("ece")), "test_abs_diff": _round(test.get("ece")),
                         "test_groups": len(test["groups"]), "val_auc_at_h": _round(val.get("auc")),
                         "test_auc_at_h": _round(test.get("auc"))})
    return rows


def _round(v):
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else round(float(v), 4)


def experiment_rows(out) -> list[dict]:
    """metrics.json of an experiment as table rows: mean and std per model and task."""
    result = json.loads((Path(out) / "metrics.json").read_text())
    rows = []
    for model, entry in result["models"].items():
        tasks = dict(entry["tasks"])
        for task, vals in [*tasks.items(), ("Avg", {m: average_over_tasks(tasks, m) for m in VERSION_METRICS})]:
            row = {"model": model, "task": task}
            for m in VERSION_METRICS:  # the paper's columns and C (RMST)
                mean, std = mean_std(vals.get(m, []))
                row[m] = None if np.isnan(mean) else f"{mean:.3f} ± {std:.3f}"
            rows.append(row)
    return rows


def read_subgroups(path) -> list[dict]:
    """The rows of a ``subgroups.json``."""
    return json.loads(Path(path).read_text())["rows"]


def subgroup_lines(path) -> list[str]:
    """The subgroup table as ``flows.train evaluate`` prints it."""
    rows = read_subgroups(path)
    keys = [
        k for k in ("auc", "ece", "ci", "ci_rmst", "risk_vs_km", "auc_at_h") if any(r.get(k) is not None for r in rows)
    ]
    names = {"auc": "AUC", "ece": "ECE", "ci": "Harrell's C", "ci_rmst": "C (RMST)", "risk_vs_km": "risk vs KM",
             "auc_at_h": "AUC at h"}
    table = [["group", "rows", "events", *(names[k] for k in keys)]]
    for r in rows:
        table.append([r["group"], str(r["rows"]), "-" if r["events"] is None else str(r["events"]),
                      *("-" if r.get(k) is None else f"{r[k]:.3f}" + _bounds(r.get(f"{k}_interval")) for k in keys)])
    return [f"CET by subgroup, test split (no metric under {SUBGROUPS_MIN_ROWS} rows; [ ]: 95% bootstrap interval over "
            "the group's rows):", *render.text(table)]


def _bounds(interval) -> str:
    return bounds_text(None if interval is None else {"low": interval[0], "high": interval[1]})
