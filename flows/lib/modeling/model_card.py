"""The model card a registered version keeps beside its weights (``model_card.md``): the data and
their fingerprint, what they were built from, the metrics with their intervals, intended use,
limitations and the command that trains it again. Written from the version's own records."""

from __future__ import annotations

from flows.lib.infra.evaluation_record import Evaluation
from flows.lib.modeling.render import cell, markdown, split_text


def model_card(metrics: Evaluation, params: dict, data: dict, built: str, name: str) -> str:
    """The model card of a version from its records (its evaluation, ``params.json``,
    ``data.json``) and what its data were built from."""
    summary = metrics.summary
    keys = (("test_auc", "AUC"), ("test_ci_rmst", "C (RMST)"), ("test_ci", "Harrell's C"), ("test_ece", "ECE"),
            ("test_ibs", "IBS"))
    trained = list(summary)
    scored = [m for m in trained if any((summary[m] or {}).get(k) is not None for k, _ in keys)]
    shown = [(k, label) for k, label in keys if any(summary[m].get(k) is not None for m in scored)]
    table = markdown([["model", *(label for _, label in shown)],
                      *([m, *(cell(summary[m].get(k)) for k, _ in shown)] for m in scored)])
    record = metrics.intervals.get("test") or {}
    labels = {"auc": "AUC", "ci": "Harrell's C", "ci_rmst": "C (RMST)", "auc_h": "AUC at the horizon"}
    differences = [f"- CET − {model}, {labels.get(metric, metric)}: {v['estimate']:+.3f} "
                   f"[{v['low']:+.3f}, {v['high']:+.3f}]"
                   for metric, models in (record.get("differences") or {}).items() for model, v in models.items()
                   if v and v.get("low") is not None]
    command = ["python -m flows.train evaluate", f"--dataset {name}"]
    if params.get("models"):
        command.append("--models " + ",".join(params["models"]))
    for key, flag in (("hidden", "--hidden"), ("seed", "--seed"), ("max_epochs", "--max-epochs"),
                      ("patience", "--patience"), ("horizon", "--horizon")):
        if params.get(key) is not None:
            command.append(f"{flag} {params[key]}")
    no_truth = not any((summary[m] or {}).get("test_auc") is not None for m in trained)
    limitations = [
        "- Trained on observational data: P(ever) and the time model describe these rows, "
        "not the effect of any treatment.",
        "- P(ever) beyond the training follow-up rests on the fitted tail: no data show how many have an event "
        "after the longest follow-up.",
    ]
    if built == "generated stand-in":
        limitations.insert(0, "- **Trained on a generated stand-in, not real data**: for checking the software only.")
    for group in data.get("competing") or ():
        limitations.append(f"- {' and '.join(group)} compete (one follow-up, never two seen on a row): P(ever) and "
                           "every risk by a horizon are net, had no other kind come first. The share whose first event "
                           "is each kind is lower: the report's Aalen-Johansen column, and CET's own per row "
                           "(`CETModel.predict_cumulative_incidence`).")
    if no_truth:
        limitations.append("- No true occurrence in these data: AUC and ECE are not scored; the models are compared "
                           "by C (RMST) and calibration against Kaplan-Meier.")
    follow = data.get("follow_up") or {}
    lines = [
        f"# Model card: {name}",
        "",
        "## Model",
        "",
        "CET (conditional event time): per event, P(the event ever happens | x) and a log-normal time given "
        f"that it happens. Trained beside: {', '.join(m for m in trained if m != 'CET') or 'none'}.",
        "",
        "## Data",
        "",
        f"- `{data.get('path')}`, built from {built}; fingerprint `{data.get('fingerprint')}`.",
        f"- Events: {', '.join(data.get('event_names') or [])}; time in {data.get('time_unit')}; "
        f"{split_text(data.get('split_sizes') or {})}.",
        *(f"- {e}: longest training follow-up {v.get('longest'):g} {data.get('time_unit') or ''}".rstrip()
          for e, v in follow.items() if isinstance(v, dict) and isinstance(v.get("longest"), int | float)),
        "",
        "## Test metrics (average over events)",
        "",
        table,
        "",
        *(["95 % paired bootstrap intervals of the test rows:", "", *differences, ""] if differences else []),
        "## Intended use",
        "",
        "Ranking and calibrated risk of these events for rows drawn like the training data, after "
        "checking the report's calibration against Kaplan-Meier and its decision curves: the risk thresholds, "
        "if any, at which acting on a model's risk does more good than treating every row or none. Not for "
        "individual decisions without clinical or domain review.",
        "",
        "## Limitations",
        "",
        *limitations,
        "",
        "## Training command",
        "",
        "```",
        " ".join(command),
        "```",
        "",
    ]
    return "\n".join(lines)
