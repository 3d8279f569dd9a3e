"""Which version to promote: the metric it is judged by, and the promoted version and a candidate
scored on the same rows.

A version records the keyed hashes of its training rows' ids (``TRAIN_IDS``, and of their split
groups, ``TRAIN_GROUPS``), so that a later candidate trained on new data is compared with the
promoted version on validation rows the promoted version was not trained on
(``promoted_on_candidate_rows``). ``flows/train.py`` wires these; ``flows.lib.infra.registry``
applies the promotion rule.
"""

from __future__ import annotations

import hmac
import json
from pathlib import Path

import numpy as np

from cet_model.bootstrap import bootstrap_intervals
from cet_model.dataset import load_dataset
from cet_model.evaluation import CI_RMST, evaluate, model_inputs, ranking_inputs, rmst_horizons
from cet_model.presets import unknown_occurrence
from cet_model.summary import average_over_tasks, difference_text
from flows.lib.infra import registry
from flows.lib.infra.keys import kept_key, key_matches
from flows.lib.modeling.version_text import FEW_OBSERVED, VERSION_METRICS

TRUTH_METRICS = ("val_auc", "val_ece")  # promotion metrics scored against the true occurrence


def promotion_metric(dataset_dir, metric: str, explicit: bool, search: int = 0) -> tuple[str, str | None]:
    """The metric to promote by on this dataset, and why when it is not ``metric``.

    AUC and ECE are scored against the true occurrence; on data where the validation split does
    not have it (censored by follow-up alone) they are undefined, and no version would ever win.
    The default metric then gives way to ``val_ci_rmst`` (Harrell's C of the restricted mean
    event-free time, from the observed times: who has the event later or never), and
    one chosen ``explicit``-ly is refused before anything is trained, as is a random ``search``
    for the experiment report (it tunes on validation AUC).
    """
    if metric not in TRUTH_METRICS and not search:
        return metric, None
    unknown = unknown_occurrence(load_dataset(dataset_dir).val)
    if not unknown:
        return metric, None
    if search:
        raise ValueError(f"search: the random search tunes on validation AUC against the true occurrence, which "
                         f"{unknown} validation cells of {dataset_dir} do not have; run without --search")
    if metric not in TRUTH_METRICS:
        return metric, None
    why = (f"{metric} is scored against the true occurrence, which {unknown} validation cells of {dataset_dir} "
           "do not have")
    if explicit:
        raise ValueError(f"promotion metric: {why}; promote by val_ci_rmst, val_ci or val_mrae instead")
    return "val_ci_rmst", f"{why}: promoted by val_ci_rmst (Harrell's C of the restricted mean event-free time) instead"


TRAIN_IDS = "train_ids.npy"  # in a version: the sorted keyed 64-bit hashes of its training rows' ids
TRAIN_GROUPS = "train_groups.npy"  # and of their split groups (a patient's subject_id), where the data have them
ROW_IDS = "cet-row-ids"  # the purpose its key's fingerprint (data.json train_ids_key) is taken for


def row_key(settings) -> bytes:
    """The key of the training-row hashes: ``CET_PSEUDONYM_KEY``, else a random one kept in the
    data folder (``row-ids.key``, mode 600), never in the models folder: a version's hashes do not
    tell which subjects it was trained on to anyone who has the models but not the key."""
    secret = settings.pseudonym_key
    return kept_key(secret.get_secret_value() if secret else None, Path(settings.data_dir) / "row-ids.key",
                    "key for the training-row hashes")


def id_hashes(ids, key: bytes) -> np.ndarray:
    """Keyed 64-bit hashes (HMAC-SHA256) of row ids as text, (n,) uint64: which rows a version was
    trained on, to leave them out when it is scored on other data.

    >>> a, b = id_hashes([7, 8], b"k"), id_hashes(["7"], b"k")
    >>> bool(a[0] == b[0]), a.dtype.name, bool(id_hashes([7], b"other")[0] == a[0])
    (True, 'uint64', False)
    """
    return np.array([int.from_bytes(hmac.new(key, str(i).encode(), "sha256").digest()[:8], "little") for i in ids],
                    dtype=np.uint64)


def _load_hashes(path: Path, what: str) -> np.ndarray:
    try:
        seen = np.load(path, allow_pickle=False)
        if seen.ndim != 1 or seen.dtype != np.uint64:
            raise ValueError(f"a {seen.dtype} array of shape {seen.shape}, not uint64 hashes")
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{path}: not a readable record of {what} hashes ({exc}); remove it, and the promotion "
                         "rule compares the recorded values") from None
    return seen


def promoted_on_candidate_rows(models_root, name: str, candidate: Path, dataset_dir, metric: str, key: bytes,
                               model: str = "CET", device: str = "cpu") -> dict | None:
    """The promoted version and the candidate scored on the same rows: the candidate's validation
    rows that the promoted version was not trained on, so that the promotion rule compares like
    with like.

    A version records its metrics on the validation split of the data it was trained on. When a
    retrain brings new data (a new dataset fingerprint), the two recorded values come from
    different rows, and a shift in the data moves both: new data that are harder to predict would
    keep an old model that is worse on them. And since a rebuild splits its subjects afresh, some of
    the new validation rows may be rows the promoted model was trained on (``TRAIN_IDS``, hashed
    with ``key``); they are left out, and where both datasets split by a group (``split_by``, e.g. a
    patient's ``subject_id``: ``TRAIN_GROUPS``) so are the rows of every group the promoted model
    was trained on: a patient's new admission is not unseen if earlier ones were in its training
    rows. Returns None when there is nothing to compare (no promoted
    version, the candidate itself, rule ``always``); otherwise {"value": the promoted model's
    metric on those rows, "candidate_value": the candidate's, "rows", "of": how many of the
    candidate's validation rows, "version", "recorded": the promoted version's own recorded value,
    "difference": for AUC and C, candidate minus promoted with its paired bootstrap interval,
    "by_group": rows left out only because their group was in the promoted model's training rows
    (None when groups are not matched), "note"}. On the same data the recorded values are already on the same rows: the
    values are
    None (the rule compares the recorded ones) and only the difference is computed, or None is
    returned for a metric without one. When the promoted model cannot score the rows (other
    feature or event names or comment inputs, no record of its training rows or one made with
    another key, none left), the values are None and the note says that the recorded values are
    compared.
    """
    current = registry.promoted(models_root, name)
    candidate = Path(candidate)
    if current is None or metric == "always" or current.resolve() == candidate.resolve():
        return None
    old, new = (json.loads((Path(v) / "data.json").read_text()) for v in (current, candidate))
    recorded = registry.metric_value(current, metric, model)
    out = {"value": None, "candidate_value": None, "version": current.name, "recorded": recorded}
    if old.get("fingerprint") == new.get("fingerprint"):
        if metric not in ("val_auc", "val_ci", "val_ci_rmst"):
            return None
        cand = load_dataset(dataset_dir)
        va = cand.val
        values, difference = _score_pair(current, candidate, va, new["event_names"], metric, model, device, name,
                                         rmst_horizons(cand.train))
        if np.isnan(recorded):  # undefined there, or a version from before this metric was recorded: both scored here
            why = (f"whose {metric} is undefined there" if registry.metric_recorded(current, metric, model)
                   else f"which did not record {metric}")
            out |= {"value": values[0], "candidate_value": values[1], "rows": len(va), "of": len(va),
                    "note": f"the same data as {current.name}, {why}: both scored on the "
                            f"{len(va)} validation rows"
                            + (f"; candidate minus {current.name} {_difference_note(difference)}" if difference else "")
                            + _few_cases(va, new["event_names"], metric)}
            return out | ({"difference": difference} if difference else {})
        if difference is None:
            return None
        return out | {"rows": len(va), "of": len(va), "difference": difference,
                      "note": f"the same data as {current.name}: the recorded values are compared; candidate minus "
                              f"{current.name} on the {len(va)} validation rows {_difference_note(difference)}"
                              + _few_cases(va, new["event_names"], metric)}
    fallback = "the values each recorded on its own validation split are compared"
    differ = [k.replace("_", " ") for k in ("feature_names", "event_names", "sequences") if old.get(k) != new.get(k)]
    if differ:
        return out | {"note": f"{current.name} was trained on other data with other {' and '.join(differ)}, so it "
                              f"cannot score {candidate.name}'s validation rows: {fallback}"}
    if not (current / TRAIN_IDS).is_file():
        return out | {"note": f"{current.name} was trained on other data and does not record which rows (a version "
                              f"from before {TRAIN_IDS}), so its training rows cannot be left out: {fallback}"}
    if not key_matches(old.get("train_ids_key"), key, ROW_IDS):
        return out | {"note": f"{current.name} was trained on other data and its training rows were hashed with "
                              f"another key than this one (CET_PSEUDONYM_KEY, or row-ids.key in the data folder), so "
                              f"they cannot be left out: {fallback}"}
    cand = load_dataset(dataset_dir)
    va = cand.val
    seen = _load_hashes(current / TRAIN_IDS, "training-row")
    new_rows = ~np.isin(id_hashes(va.ids, key), seen)
    unit, by_group, unmatched = old.get("split_by"), None, ""
    if (current / TRAIN_GROUPS).is_file():
        if va.groups is not None and unit is not None and new.get("split_by") == unit:
            seen_groups = _load_hashes(current / TRAIN_GROUPS, f"training {unit}")
            new_groups = ~np.isin(id_hashes(va.groups, key), seen_groups)
            by_group = int((new_rows & ~new_groups).sum())
            new_rows &= new_groups
        else:
            unmatched = (f"; {current.name}'s data were split by {unit} and {candidate.name}'s "
                         + (f"by {new['split_by']}" if new.get("split_by") else "by row")
                         + f", so only its training rows, not their {unit}s, are left out")
    elif va.groups is not None:
        unmatched = (f"; {current.name} does not record its training {new.get('split_by')}s (a version from before "
                     f"{TRAIN_GROUPS}), so only its training rows are left out")
    if old.get("ids_are_row_numbers") or new.get("ids_are_row_numbers"):
        unmatched += ("; the ids are the table's row numbers, so rows are matched by their place in the table: "
                      "right if rows were only added at its end, wrong if it was "
                      "reordered (build it with --id-column)")
    unseen = np.flatnonzero(new_rows)
    out |= {"rows": int(unseen.size), "of": len(va), "by_group": by_group}
    if unseen.size == 0:
        return out | {"note": f"{current.name} was trained on every validation row of {candidate.name}"
                              + (f" or on another row of its {unit}" if by_group else "") + f": {fallback}{unmatched}"}
    (out["value"], out["candidate_value"]), difference = _score_pair(
        current, candidate, va.take(unseen), new["event_names"], metric, model, device, name,
        rmst_horizons(cand.train))
    spread = ""
    if difference is not None:
        out["difference"] = difference
        spread = f"; candidate minus {current.name} {_difference_note(difference)}"
    where = (f"{candidate.name}'s {len(va)} validation rows" if unseen.size == len(va) else
             f"the {unseen.size} of {candidate.name}'s {len(va)} validation rows that {current.name} was not trained on"
             + (f", {by_group} more left out as other rows of its training {unit}s" if by_group else ""))
    return out | {"note": f"{current.name} was trained on other data: both rescored on {where} ({metric} "
                          f"{out['candidate_value']:.4f} vs {out['value']:.4f}{spread}; {current.name} recorded "
                          f"{recorded:.4f} on its own validation split{unmatched})"
                          + _few_cases(va.take(unseen), new["event_names"], metric)}


def _few_cases(rows, event_names, metric: str) -> str:
    """For a concordance (``val_ci``, ``val_ci_rmst``): the events observed in fewer than
    ``FEW_OBSERVED`` of the compared rows, which a promotion decided by it rests on; "" otherwise.

    >>> from types import SimpleNamespace
    >>> rows = SimpleNamespace(S=np.array([[1.0, 1.0]] * 3 + [[0.0, 1.0]] * 20), mask=None)
    >>> _few_cases(rows, ["arrest", "visit"], "val_ci_rmst")
    '; arrest observed in 3 of these rows: the comparison rests on that many cases'
    >>> _few_cases(rows, ["arrest", "visit"], "val_auc")
    ''
    """
    if metric not in ("val_ci", "val_ci_rmst"):
        return ""
    seen = rows.S if rows.mask is None else rows.S * rows.mask
    few = [f"{e} observed in {int(n)}" for e, n in zip(event_names, seen.sum(axis=0), strict=True) if n < FEW_OBSERVED]
    return f"; {', '.join(few)} of these rows: the comparison rests on that many cases" if few else ""


def _score_pair(current: Path, candidate: Path, rows, event_names, metric: str, model: str, device: str,
                name: str, rmst_at) -> tuple[tuple[float, float], dict | None]:
    """((promoted's metric, candidate's metric), candidate minus promoted with its paired bootstrap
    interval, or None for a metric the bootstrap does not cover) on ``rows``; restricted means
    (``val_ci_rmst``) up to ``rmst_at`` ((M,), the candidate's training horizons) for both."""
    from cet_model.models import load_model

    x, short = model_inputs(rows), metric.removeprefix("val_")
    values, ranking = [], {}
    for field_name, version in (("promoted", current), ("candidate", candidate)):
        fitted = load_model(version / model, device=device)
        tasks = evaluate(model, fitted, rows, event_names, x, label=f"{name} {version.name} on {candidate.name}'s "
                         "validation rows", warn_no_truth=False, rmst_at=rmst_at)
        values.append(task_means(tasks)[short])
        ranking[field_name] = ranking_inputs(model, fitted, x, rmst_at=rmst_at)
    if short not in ("auc", "ci", CI_RMST):
        return tuple(values), None
    record = bootstrap_intervals(rows, ranking, reference="candidate")
    d = record["differences"].get(short, {}).get("promoted")
    if d is None or d.get("low") is None or not np.isfinite(d["low"]):
        return tuple(values), None
    return tuple(values), d | {"level": record["level"], "resamples": record["resamples"]}


def _difference_note(d: dict) -> str:
    return f"{difference_text(d)}, {d['level']:.0%} paired bootstrap interval"


def task_means(tasks: dict) -> dict:
    """{metric: mean over tasks} of one fit's per-task metrics {task: {metric: value}}."""
    out = {}
    for m in VERSION_METRICS:
        vals = average_over_tasks({e: {k: [v] for k, v in row.items()} for e, row in tasks.items()}, m)
        out[m] = float(vals[0]) if vals else float("nan")
    return out
