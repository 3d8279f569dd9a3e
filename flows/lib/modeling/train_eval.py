"""Train CET, ET and BC on one dataset folder and register the result as a model version.

Plain functions; ``flows/train.py`` wires them. A version whose stage key (dataset
fingerprint + training parameters + code version) already exists is reused, not retrained.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from cet_model import threads as cet_threads
from cet_model.atomic import writing
from cet_model.bootstrap import bootstrap_intervals, difference_text, resamples_text
from cet_model.choices import PAPER_PRESETS, REFERENCE_CHOICES
from cet_model.dataset import ROW_NUMBERS, load_dataset
from cet_model.evaluation import (
    CI_RMST,
    average_over_tasks,
    evaluate,
    followed_until,
    machine,
    model_inputs,
    occurrence_beyond_follow_up,
    ranking_inputs,
    risk_gained_last_quarter,
    rmst_horizons,
)
from cet_model.metrics import horizon_auc, horizon_calibration
from cet_model.models import CETModel, resolve_device
from cet_model.nonparametric import kaplan_meier_risk
from cet_model.presets import (
    DEFAULT_PRESETS,
    check_presets,
    comment_encoder_for,
    fit_preset,
    presets_for_truth,
    unknown_occurrence,
)
from cet_model.reference import REFERENCE, cox_reference, wants_reference
from flows.lib.infra import registry, stage_cache
from flows.lib.infra.crash import crash_point
from flows.lib.infra.evaluation_record import Evaluation
from flows.lib.infra.keys import kept_key, key_digest, key_matches
from flows.lib.modeling import side_by_side
from flows.lib.modeling.model_card import model_card
from flows.lib.modeling.version_text import FEW_OBSERVED, VERSION_METRICS

log = logging.getLogger("flows.train")

CODE = ("cet_model", "flows.lib.modeling.train_eval", "flows.lib.modeling.side_by_side", "flows.lib.infra.registry")


def check_models(models) -> None:
    """The presets a version trains: known names (an unknown one is refused listing the presets),
    CET among them (the promotion rule judges it and predict scores with it)."""
    check_presets(models)
    if "CET" not in models:
        raise ValueError(f"models {list(models)} must include CET: the promotion rule judges it and predict scores "
                         "with it")


@dataclass(frozen=True)
class TrainParams:
    """What ``train_version`` runs with, every value resolved: the flow's ``TrainEvaluateParams``
    (declared, described and checked there) with the settings filled in by ``flows.train``, plus
    what no command line sets (the device, per-model overrides)."""

    models: tuple[str, ...] | None = None  # None: the data decide (``default_presets``)
    hidden: int = 100
    max_epochs: int | None = None  # None: automatic (cet_model.train.TrainConfig.budget)
    patience: int | None = None
    seed: int = 0
    device: str = "auto"
    workers: int | None = 1  # fits side by side in this many processes (None: automatic, side_by_side.plan)
    overrides: dict = field(default_factory=dict)  # per-model keyword overrides, e.g. {"CET": {"n_samples": 20}}
    horizon: float | None = None  # calibration and AUC at h for every event at this time (None: median follow-up)
    reference: str = "auto"  # the classical Cox reference: auto (data without the truth), cox (any features), none

    def __post_init__(self):
        if self.models is not None:
            check_models(self.models)
        if self.reference not in REFERENCE_CHOICES:
            raise ValueError(f"reference must be one of {REFERENCE_CHOICES}, got {self.reference!r}")
        if self.horizon is not None and not self.horizon > 0:
            raise ValueError(f"horizon must be a time > 0, got {self.horizon}")

    def key_params(self) -> dict:
        """What changes the trained weights or what a version records (the horizon); the device and
        the worker processes do not enter the key."""
        d = asdict(self)
        d.pop("device")
        d.pop("workers")
        d["models"] = "auto" if self.models is None else list(self.models)
        return d


WITHOUT_TRUTH_PRESETS = ("CET", "ET", "BC")  # the default on data censored by follow-up alone


def default_presets(train, val, test) -> tuple[str, ...]:
    """The presets trained when none are named: the product default and the baselines (CET, ET,
    BC), with the Oracle on data with the true occurrence, where AUC against it is scored (the Cox
    reference beside them on data censored by follow-up alone). CET-paper, the paper's objective,
    trains when named (``models``) and in the paper-format experiment report."""
    no_truth = bool(np.isnan(val.C).all() and np.isnan(test.C).all())
    return WITHOUT_TRUTH_PRESETS if no_truth else DEFAULT_PRESETS


class FitProgress:
    """Percent of a dataset's fits done, for a progress artifact, and whether to send it now.

    Each model has an equal share. A fitted model (``fitted``) counts whole. How long one runs is
    decided by early stopping, so it is not known in advance: after e epochs it counts e / (e + 100)
    of its share (half after 100 epochs, 90 % after 900). Fits side by side advance together. The
    figure never goes back and never reaches 100 before ``finish``. An update is due at a model's
    first epoch or when ``interval`` seconds have passed since the last one: each update is a call
    to the Prefect API, and a small dataset's fits run thousands of epochs of a few milliseconds.

    >>> times = iter([0.0, 0.5, 2.5, 2.6]).__next__
    >>> progress = FitProgress(("CET", "ET"), interval=2.0, clock=times)
    >>> progress.epoch("CET", 0), progress.epoch("CET", 1), progress.epoch("CET", 99)
    (0.5, None, 25.0)
    >>> progress.fitted("CET")
    >>> progress.epoch("ET", 0)
    50.5
    >>> progress.finish()
    100.0
    >>> progress = FitProgress(("CET", "BC", "Oracle"), clock=lambda: 0.0)
    >>> progress.fitting(("CET", "BC"))   # the oracle left out: two shares of 50, not three of 33
    >>> progress.epoch("BC", 0), progress.epoch("CET", 99)  # side by side
    (0.5, 25.5)
    """

    def __init__(self, models: tuple[str, ...], interval: float = 2.0, clock=time.monotonic):
        self.models, self.interval, self.clock = tuple(models), float(interval), clock
        self.fraction: dict[str, float] = {}
        self.percent, self.sent_at = 0.0, None

    def fitting(self, models) -> None:
        """The models that will be fitted after all (a preset left out has no share)."""
        self.models = tuple(models)

    def fitted(self, model: str) -> None:
        """``model``'s fit has ended: it counts whole."""
        self.fraction[model] = 1.0
        self._update()

    def epoch(self, model: str, epoch: int) -> float | None:
        """``model`` has finished epoch ``epoch`` (0-based): the percent to send, or None if not due."""
        first = model not in self.fraction
        if self.fraction.get(model, 0.0) < 1.0:
            done = epoch + 1
            self.fraction[model] = done / (done + 100)
        self._update()
        now = self.clock()
        if first or self.sent_at is None or now - self.sent_at >= self.interval:
            self.sent_at = now
            return self.percent
        return None

    def _update(self) -> None:
        share = 100.0 / len(self.models)
        value = share * sum(self.fraction.get(m, 0.0) for m in self.models)
        self.percent = min(max(self.percent, round(value, 1)), 99.9)

    def finish(self) -> float:
        """Every fit is done."""
        self.percent = 100.0
        return self.percent


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


def train_version(dataset_dir, models_root, name: str, params: TrainParams = TrainParams(),
                  progress=None, on_models=None, id_key: bytes | None = None, on_fitted=None) -> tuple[Path, bool]:
    """Train (or reuse) a version of ``name``'s models; returns (version folder, reused).
    ``progress(model, epoch, history)`` after every epoch (fits side by side: their first two
    epochs, then at most one a half second, and the last); ``on_fitted(model)`` when a fit has
    ended; ``on_models(models)`` once, with the presets that will be fitted (those left out for
    want of the truth are not among them).
    ``id_key`` (``row_key``): the version also keeps its training rows' ids as keyed hashes
    (``TRAIN_IDS``), and their split groups' where the data have them (``TRAIN_GROUPS``), for
    ``promoted_on_candidate_rows``."""
    dataset_dir = Path(dataset_dir)
    key = stage_cache.stage_key({"dataset": dataset_dir}, params.key_params(), stage_cache.code_version(*CODE))
    found = registry.find_version(models_root, name, key)
    if found is not None:
        log.info("%s: data, parameters and code unchanged: reusing %s", name, found.name)
        return found, True
    ds = load_dataset(dataset_dir)
    tr, va, te = ds.train, ds.val, ds.test
    x_tr, x_va, x_te, spec = model_inputs(tr), model_inputs(va), model_inputs(te), comment_encoder_for(tr)
    named = params.models if params.models is not None else default_presets(tr, va, te)
    models, skipped = presets_for_truth(named, tr, va)
    for model_name, why in skipped.items():
        log.warning("%s: %s left out: %s", name, model_name, why)
    no_truth = bool(np.isnan(va.C).all() and np.isnan(te.C).all())  # censored by follow-up alone: said once
    if no_truth:
        log.info("%s: the true occurrence is known for no validation or test row (censoring by follow-up): AUC "
                 "and ECE are left empty; the models are compared by Harrell's C of the restricted mean event-free "
                 "time (C (RMST))", name)
    if on_models is not None:
        on_models(models)
    tmp = registry.staging_dir(models_root, name)
    try:
        metrics = Evaluation(skipped=skipped, observed={"val": observed_events(va, ds.event_names),
                                                        "test": observed_events(te, ds.event_names)})
        horizons = calibration_horizons(tr, ds.event_names, params.horizon)
        if params.horizon is not None:
            _warn_horizon_beyond_follow_up(name, tr, ds.event_names, params.horizon)
        run = _Run(name, ds, params, metrics, horizons, (x_tr, x_va, x_te), no_truth, progress)
        workers, n_threads = side_by_side.plan(params.workers, len(models), resolve_device(params.device).type)
        if workers > 1:
            log.info("%s: fitting %s side by side in %d processes of %d CPU thread%s", name, ", ".join(models),
                     workers, n_threads, "" if n_threads == 1 else "s")
            fits = run.fit_side_by_side(models, dataset_dir, tmp, workers, n_threads)
        else:
            n, why = cet_threads.choose()
            log.info("%s: fitting %s one after another, each with %d CPU thread%s (%s; CET_THREADS sets it)", name,
                     ", ".join(models), n, "" if n == 1 else "s", why)
            fits = run.fit_here(models, tmp)
        try:
            for model_name, model in fits:
                if on_fitted is not None:
                    on_fitted(model_name)
                run.score(model_name, model)
        finally:
            fits.close()  # a failed score stops the fits still under way
        wanted = wants_reference(params.reference, no_truth)  # auto: where no Oracle can be trained
        if wanted and spec is not None:
            log.log(logging.WARNING if params.reference == "cox" else logging.INFO,
                    "%s: %s left out: the model input has comment embeddings", name, REFERENCE)
        if wanted and spec is None:  # the classical model as the yardstick
            run.add_reference()
        t0 = time.perf_counter()
        metrics.intervals = {"test": bootstrap_intervals(te, run.ranking, seed=params.seed, train=tr,
                                                            horizons=run.by_event_horizon)}
        log.info("%s: test intervals (paired bootstrap, %s) in %.1fs", name,
                 resamples_text(metrics.intervals["test"]), time.perf_counter() - t0)
        records = {
            "metrics.json": metrics.to_json(),
            "params.json": {**asdict(params), "stage_key": key, "machine": machine(),
                            "fit_processes": {"workers": workers, "threads": n_threads if workers > 1 else None}},
            "data.json": _data_record(dataset_dir, ds, spec, id_key),
        }
        _write_version_files(tmp, Path(models_root) / name / "<new version>", records,
                             stage_cache.built_from(dataset_dir), name, tr, id_key)
        version = registry.commit(models_root, name, tmp)
    except BaseException:
        registry.discard(tmp)
        raise
    log.info("%s: registered %s", name, version)
    return version, False


def _warn_horizon_beyond_follow_up(name: str, tr, event_names, horizon: float) -> None:
    beyond = {e: v["longest"] for e, v in training_follow_up(tr, event_names).items()
              if v["longest"] is not None and v["longest"] < horizon}
    if beyond:
        log.warning("%s: horizon %g is beyond the longest training follow-up of %s: there the risk vs Kaplan-"
                    "Meier uses the curve's last value and the AUC at h has no controls", name, horizon,
                    ", ".join(f"{e} ({v:g})" for e, v in beyond.items()))


class _Run:
    """One ``train_version``: fits each preset and records its figures into ``metrics``, and keeps
    the test predictions the paired bootstrap resamples (``ranking``)."""

    def __init__(self, name, ds, params, metrics, horizons, inputs, no_truth, progress):
        self.name, self.ds, self.params, self.metrics, self.horizons = name, ds, params, metrics, horizons
        self.x_tr, self.x_va, self.x_te = inputs
        self.no_truth, self.progress = no_truth, progress
        self.by_event_horizon = [horizons.get(e, np.nan) for e in ds.event_names]
        self.ranking = {}

    def _fit_kwargs(self, model_name: str) -> dict:
        params = self.params
        return dict(seed=params.seed, hidden_sizes=(params.hidden,), max_epochs=params.max_epochs,
                    patience=params.patience, params=params.overrides.get(model_name, {}), device=params.device)

    def _record_fit(self, model_name: str, model, seconds: float, encoder_epochs: int) -> None:
        self.metrics.seconds[model_name] = seconds
        self.metrics.epochs[model_name] = len(model.history_.train_loss)
        self.metrics.encoder_epochs[model_name] = encoder_epochs

    def fit_here(self, models, staging: Path):
        """Each preset fitted in this process, one after another, saved to ``staging``; yields
        (name, model) as each is done."""
        tr, va = self.ds.train, self.ds.val
        for model_name in models:
            t0 = time.perf_counter()

            def on_epoch(epoch, hist, m=model_name):
                if epoch == 1:
                    crash_point("train")
                if self.progress is not None:
                    self.progress(m, epoch, hist)
            model = fit_preset(model_name, tr, va, x_train=self.x_tr, x_val=self.x_va, on_epoch=on_epoch,
                               **self._fit_kwargs(model_name))
            stage = getattr(model, "encoder_history_", None)  # CET's encoder-only stage, when it ran
            self._record_fit(model_name, model, time.perf_counter() - t0, 0 if stage is None else len(stage.train_loss))
            model.save(staging / model_name)
            yield model_name, model

    def fit_side_by_side(self, models, dataset_dir, staging: Path, workers: int, n_threads: int):
        """The presets fitted in ``workers`` processes at once (``side_by_side``); yields (name,
        model) in the order of ``models``."""
        fits = side_by_side.fit_side_by_side(models, dataset_dir, staging, {m: self._fit_kwargs(m) for m in models},
                                             workers, n_threads, self.progress,
                                             on_first_epochs=lambda: crash_point("train"))
        for model_name, model, seconds, encoder_epochs in fits:
            self._record_fit(model_name, model, seconds, encoder_epochs)
            yield model_name, model

    def score(self, model_name: str, model) -> None:
        """Every figure of one fitted model on the validation and test rows, and its log line."""
        ds, metrics, tr, te = self.ds, self.metrics, self.ds.train, self.ds.test
        splits = (("val", ds.val, self.x_va), ("test", te, self.x_te))
        t0 = time.perf_counter()
        log.info("%s %s: scoring the %d validation and %d test rows", self.name, model_name, len(ds.val), len(te))
        for split_name, split, x in splits:
            getattr(metrics, split_name)[model_name] = evaluate(model_name, model, split, ds.event_names, x, train=tr,
                                                       label=f"{self.name} {split_name}",
                                                       warn_no_truth=not self.no_truth)
        self.ranking[model_name] = ranking_inputs(model_name, model, self.x_te, self.by_event_horizon,
                                                  rmst_horizons(tr))
        metrics.summary[model_name] = {
            f"{s}_{m}": v for s in ("val", "test") for m, v in task_means(getattr(metrics, s)[model_name]).items()}
        if hasattr(model, "predict_survival"):  # time models: calibration by a horizon, no truth needed
            for split_name, split, x in splits:
                metrics.calibration[split_name][model_name] = calibration_by_horizon(
                    model, split, x, ds.event_names, self.horizons, train=tr)
        if isinstance(model, CETModel):  # how much of its P(ever) lies past the training follow-up
            metrics.beyond_follow_up["test"][model_name] = beyond_follow_up(model, self.x_te, tr,
                                                                               ds.event_names, te)
        summary = metrics.summary[model_name]
        shown = next((f"{label} {summary[key]:.3f}" for key, label in (
            ("val_auc", "val AUC"), ("val_ci_rmst", "val C (RMST)"), ("val_ci", "val C"))
                      if np.isfinite(summary.get(key, np.nan))), "no validation score")
        calibrated = metrics.calibration["val"].get(model_name)
        if calibrated:
            shown += (f", validation risk by the median follow-up vs Kaplan-Meier by risk group: mean abs. "
                      f"difference {np.mean([r['ece'] for r in calibrated.values()]):.3f}")
        log.info("%s %s: %d epochs (+%d encoder-only), %.1fs, scored in %.1fs, %s", self.name, model_name,
                 metrics.epochs[model_name], metrics.encoder_epochs[model_name],
                 metrics.seconds[model_name], time.perf_counter() - t0, shown)

    def add_reference(self) -> None:
        """The Cox reference per event, scored on the same rows."""
        ds, metrics = self.ds, self.metrics
        t0 = time.perf_counter()
        scores, inputs = cox_reference(ds.train, {"val": ds.val, "test": ds.test}, ds.event_names)
        for split_name in ("val", "test"):
            getattr(metrics, split_name)[REFERENCE] = scores[split_name]
        metrics.summary[REFERENCE] = {
            f"{s}_{m}": v for s in ("val", "test") for m, v in task_means(scores[s]).items()}
        metrics.seconds[REFERENCE] = time.perf_counter() - t0
        self.ranking[REFERENCE] = inputs["test"]
        c = metrics.summary[REFERENCE].get("val_ci_rmst", np.nan)
        log.info("%s %s: Cox proportional hazards per event on the standardised features, %.1fs, val C (RMST) %s",
                 self.name, REFERENCE, metrics.seconds[REFERENCE],
                 "undefined" if not np.isfinite(c) else f"{c:.3f}")


def _data_record(dataset_dir: Path, ds, spec, id_key) -> dict:
    """``data.json``: what the version was trained on, and what predict needs to score new rows."""
    tr = ds.train
    return {
        "path": str(dataset_dir.resolve()), "fingerprint": stage_cache.fingerprint(dataset_dir),
        "name": ds.manifest.get("name"), "feature_names": ds.feature_names, "event_names": ds.event_names,
        "time_unit": ds.manifest.get("time_unit"), "split_sizes": ds.manifest.get("split_sizes"),
        "sequences": None if spec is None else {"length": spec["length"], "dim": spec["dim"]},
        # how the build turned raw records into these features: lets predict score new raw data
        "featurization": ds.manifest.get("featurization"),
        # how far the training data reach: predict warns of a horizon or feature values beyond them
        "follow_up": training_follow_up(tr, ds.event_names),
        "feature_ranges": feature_ranges(tr.X, ds.feature_names),
        "feature_moments": feature_moments(tr.X, ds.feature_names),
        # D_ITEMS / D_LABITEMS labels of a MIMIC build's items (metadata, no row): warnings name them
        "item_labels": item_labels(ds.manifest),
        "train_ids_key": None if id_key is None else key_digest(id_key, ROW_IDS),
        "split_by": ds.manifest.get("split_by") if tr.groups is not None else None,
        "ids_are_row_numbers": ds.manifest.get("ids") == ROW_NUMBERS,
        # the table's own name for the id column: new rows to score may carry it instead of "id"
        "id_column": ds.manifest.get("id_column")}


def _write_version_files(tmp: Path, shown_as: Path, records: dict, built_from, name: str, tr, id_key) -> None:
    """The version's JSON records, its model card and, with ``id_key``, its training rows' keyed
    id hashes, into the staging folder ``tmp`` (errors name ``shown_as``)."""
    for file_name, record in records.items():
        with writing(shown_as / file_name):
            (tmp / file_name).write_text(json.dumps(record, indent=2, default=list))
    card = model_card(Evaluation.read(tmp), records["params.json"],
                      records["data.json"], built_from, name)
    with writing(shown_as / "model_card.md"):
        (tmp / "model_card.md").write_text(card)
    if id_key is not None:  # which rows, for promoted_on_candidate_rows
        with writing(shown_as / TRAIN_IDS):
            np.save(tmp / TRAIN_IDS, np.sort(id_hashes(tr.ids, id_key)), allow_pickle=False)
        if tr.groups is not None:  # and of which groups (patients), for the same
            with writing(shown_as / TRAIN_GROUPS):
                np.save(tmp / TRAIN_GROUPS, np.unique(id_hashes(tr.groups, id_key)), allow_pickle=False)


def calibration_horizons(split, event_names, horizon: float | None = None) -> dict[str, float]:
    """Per event, the horizon at which ``train-evaluate`` checks calibration and the AUC at h:
    ``horizon`` when given (``--horizon``, one time for every event), else the median follow-up
    time of the training rows (cells the mask leaves out not counted), so that half of them are
    still followed there. Events no training row follows are left out.

    >>> from types import SimpleNamespace
    >>> calibration_horizons(SimpleNamespace(T=np.array([[5.0], [9.0], [7.0]]), mask=None), ["a"])
    {'a': 7.0}
    >>> calibration_horizons(SimpleNamespace(T=np.array([[5.0], [9.0], [7.0]]), mask=None), ["a"], 6)
    {'a': 6.0}
    """
    keep = np.ones(split.T.shape, bool) if split.mask is None else split.mask > 0.5
    return {e: float(np.median(split.T[keep[:, j], j]) if horizon is None else horizon)
            for j, e in enumerate(event_names) if keep[:, j].any()}


def version_horizons(version: Path, split, event_names) -> dict[str, float]:
    """The horizons a version's calibration used (recorded per event in ``metrics.json``), or for a
    version without that record, ``calibration_horizons`` of the training split."""
    record = Evaluation.read(version).calibration.get("test") or {}
    events = record.get("CET") or next(iter(record.values()), {})
    return {e: float(r["horizon"]) for e, r in events.items()} or calibration_horizons(split, event_names)


def calibration_by_horizon(model, split, x, event_names, horizons: dict[str, float], train=None) -> dict[str, dict]:
    """Per event, :func:`cet_model.metrics.horizon_calibration` of ``model``'s risk by the event's
    horizon (P(the event by h) = 1 - S(h), from ``predict_survival``) on ``split``'s followed rows:
    groups by predicted risk, each against its Kaplan-Meier risk. Needs no true occurrence, so it
    is the calibration check on data censored by follow-up. With ``train`` (the training split,
    for the censoring weights) each event's record also holds ``auc``: the cumulative/dynamic AUC
    of that risk at the horizon (:func:`cet_model.metrics.horizon_auc`), its discrimination on
    such data. Events without a horizon (no training row followed) are left out."""
    out = {}
    names = [e for e in event_names if e in horizons]
    if not names or len(split) == 0:
        return out
    grid = sorted({horizons[e] for e in names})
    survival = model.predict_survival(x, grid)  # (n, H, M)
    for e in names:
        j, k = event_names.index(e), grid.index(horizons[e])
        keep = np.ones(len(split), bool) if split.mask is None else split.mask[:, j] == 1
        if keep.any():
            risk = 1.0 - survival[keep, k, j]
            out[e] = horizon_calibration(split.T[keep, j], split.S[keep, j], risk, horizons[e])
            if train is not None:
                followed = np.ones(len(train), bool) if train.mask is None else train.mask[:, j] == 1
                out[e]["auc"] = horizon_auc(train.T[followed, j], train.S[followed, j], split.T[keep, j],
                                            split.S[keep, j], risk, horizons[e])
    return out


MIN_ROWS_FOR_RANGES = (
    200  # fewer training rows: no feature ranges recorded (a percentile would be nearly one row's value)
)


def feature_ranges(x, feature_names) -> dict[str, list[float]] | None:
    """Per feature, the 1st and 99th percentiles of the training rows ``x`` (n, d), which
    ``flows.predict`` uses to flag new values far outside them (a unit mistake, a data error).
    Aggregates over many rows, never one row's value: None with fewer than
    ``MIN_ROWS_FOR_RANGES`` rows.

    >>> x = np.column_stack([np.arange(1000.0), np.zeros(1000)])
    >>> feature_ranges(x, ["age", "flag"])
    {'age': [9.99, 989.01], 'flag': [0.0, 0.0]}
    >>> feature_ranges(x[:50], ["age", "flag"]) is None
    True
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] < MIN_ROWS_FOR_RANGES:
        return None
    low, high = np.quantile(x, [0.01, 0.99], axis=0)
    return {name: [round(float(a), 6), round(float(b), 6)] for name, a, b in zip(feature_names, low, high, strict=True)}


def item_labels(manifest: dict) -> dict[str, str]:
    """{``chart_211``: "Heart Rate", ...}: the labels of a MIMIC build's feature items (its
    manifest's ``items``, from D_ITEMS and D_LABITEMS); empty for other datasets. Recorded in a version's
    ``data.json`` (``item_labels``), so that ``flows.predict`` can name an item in its warnings.

    >>> item_labels({"items": [{"source": "lab", "itemid": 50912, "label": "Creatinine"}]})
    {'lab_50912': 'Creatinine'}
    """
    return {f"{r['source']}_{r['itemid']}": r["label"] for r in manifest.get("items") or ()
            if isinstance(r, dict) and r.get("label") and "source" in r and "itemid" in r}


def feature_moments(x, feature_names) -> dict[str, list[float]] | None:
    """Per feature, the mean and standard deviation of the training rows ``x`` (n, d), which
    ``flows.predict`` compares a batch of new rows with (``shifted_from_training``): aggregates
    over many rows, None with fewer than ``MIN_ROWS_FOR_RANGES`` rows.

    >>> feature_moments(np.column_stack([np.arange(1000.0), np.ones(1000)]), ["age", "flag"])
    {'age': [499.5, 288.819436], 'flag': [1.0, 0.0]}
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] < MIN_ROWS_FOR_RANGES:
        return None
    mean, sd = x.mean(axis=0), x.std(axis=0, ddof=1)
    return {name: [round(float(m), 6), round(float(v), 6)] for name, m, v in zip(feature_names, mean, sd, strict=True)}


def training_follow_up(split, event_names) -> dict[str, dict]:
    """Per event, the longest follow-up time of the training rows (``longest``, observed or
    censored; cells the mask leaves out not counted) and the longest time at which the event was
    seen (``longest_observed``; None when it never was), in the dataset's time unit. Beyond
    ``longest`` a risk by a horizon rests on the fitted log-normal's tail alone. ``followed_until``:
    the last time at least ``FOLLOWED_ROWS`` (10) training rows were still followed
    (:func:`cet_model.evaluation.followed_until`), the follow-up's end for P(ever).

    >>> from types import SimpleNamespace
    >>> tr = SimpleNamespace(T=np.array([[5.0, 2.0], [9.0, 4.0]]), S=np.array([[1.0, 0.0], [0.0, 0.0]]), mask=None)
    >>> training_follow_up(tr, ["a", "b"])["a"]
    {'longest': 9.0, 'longest_observed': 5.0, 'followed_until': 5.0}
    """
    keep = np.ones(split.T.shape, bool) if split.mask is None else split.mask > 0.5
    out = {}
    for j, e in enumerate(event_names):
        t, seen = split.T[keep[:, j], j], split.S[keep[:, j], j] > 0.5
        out[e] = {"longest": float(t.max()) if len(t) else None,
                  "longest_observed": float(t[seen].max()) if seen.any() else None,
                  "followed_until": followed_until(t) if len(t) else None}
    return out


def beyond_follow_up(model, x, train, event_names, split=None) -> dict[str, dict]:
    """Per event, :func:`cet_model.evaluation.occurrence_beyond_follow_up` of a CET ``model`` on the
    rows ``x`` at the end of the event's training follow-up (``followed_until``: the last time at
    least 10 training rows were still followed), with ``km_by_follow_up``: the training rows'
    Kaplan-Meier risk by that time (what the data say there) and ``km_last_quarter``: the part of
    it gained over the follow-up's last quarter (still rising at the end: the data do not show how
    many ever will), with ``km_last_quarter_ci`` (its 95 % interval, Greenwood's variance) and
    ``km_last_quarter_events`` (the events it rests on), and, with ``split`` (the rows of
    ``x``), ``km_split_by_follow_up``: its own rows' (what the mean risk of those rows compares
    with), and where it knows the true occurrence (a stand-in) ``true_share``: the share of its rows
    that have the event, which P(ever) estimates, and ``true_by_follow_up``: the share that have it
    by the follow-up's end (what the risk by it estimates; the rest is what the tail should hold).
    Events no training row follows are left out."""
    follow = training_follow_up(train, event_names)
    until = {e: v["followed_until"] for e, v in follow.items() if v["followed_until"] is not None}
    out = occurrence_beyond_follow_up(model, x, until, event_names, mask=None if split is None else split.mask)
    keep = np.ones(train.T.shape, bool) if train.mask is None else train.mask > 0.5
    for e, record in out.items():
        j = event_names.index(e)
        record["km_by_follow_up"] = kaplan_meier_risk(train.T[keep[:, j], j], train.S[keep[:, j], j],
                                                      horizon=record["follow_up"])
        quarter = risk_gained_last_quarter(train.T[keep[:, j], j], train.S[keep[:, j], j], record["follow_up"])
        record["km_last_quarter"] = quarter.gain
        record["km_last_quarter_ci"] = [quarter.low, quarter.high]  # 95 %; None, None without an event
        record["km_last_quarter_events"] = quarter.events
        if split is None:
            continue
        kept = np.ones(len(split), bool) if split.mask is None else split.mask[:, j] > 0.5  # some: e is in out
        record["km_split_by_follow_up"] = kaplan_meier_risk(split.T[kept, j], split.S[kept, j],
                                                            horizon=record["follow_up"])
        if np.isfinite(split.C[kept, j]).all():  # every scored row's truth (P(ever) is averaged over them all)
            occurs = split.C[kept, j] > 0.5
            record["true_share"] = float(occurs.mean())
            t_true = split.T_true[kept, j][occurs]
            if np.isfinite(t_true).all():  # and when each of them has it
                record["true_by_follow_up"] = float((t_true <= record["follow_up"]).sum() / len(occurs))
    return out


def observed_events(split, event_names: list[str]) -> dict[str, int]:
    """Per event, how many of a split's rows have it observed (s = 1, masked cells left out): what a
    metric of that event rests on.

    >>> from types import SimpleNamespace
    >>> split = SimpleNamespace(S=np.array([[1.0, 0.0], [1.0, 1.0]]), mask=np.array([[1, 1], [0, 1]]))
    >>> observed_events(split, ["a", "b"])
    {'a': 1, 'b': 1}
    """
    seen = split.S > 0.5 if split.mask is None else (split.S > 0.5) & (split.mask > 0.5)
    return {e: int(seen[:, j].sum()) for j, e in enumerate(event_names)}


def experiment(dataset_dir, out, runs: int, search: int = 0, models=PAPER_PRESETS,
               hidden: int = 100,
               max_epochs: int | None = None, patience: int | None = None, seed: int = 0,
               title: str | None = None, reference: str = "auto") -> Path:
    """The paper-format report of one dataset: optional random search for CET, then ``runs``
    seeds of every model (and the Cox reference where ``reference`` asks for it: ``flows.lib.experiment.runner.run``);
    writes ``out/table.md``, ``metrics.json`` and the figures."""
    from flows.lib.experiment.report import write_report
    from flows.lib.experiment.runner import run
    from flows.lib.experiment.search import overrides_from, random_search

    ds = load_dataset(dataset_dir)
    sizes, overrides, found = (hidden,), None, None
    if search:
        found = random_search(ds, search, seed=seed, max_epochs=max_epochs, patience=patience, progress=False)
        sizes, overrides = overrides_from(found["best"])
    result = run(ds, runs, tuple(models), hidden_sizes=sizes, max_epochs=max_epochs, patience=patience,
                             first_seed=seed, overrides=overrides, progress=False, reference=reference)
    if found is not None:
        result["search"] = found
    write_report(result, Path(out), title or f"{ds.manifest.get('name', Path(dataset_dir).name)}")
    return Path(out)
