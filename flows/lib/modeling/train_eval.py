"""Train CET, ET and BC on one dataset folder and register the result as a model version.

Plain functions; ``flows/train.py`` wires them. A version whose stage key (dataset
fingerprint + training parameters + code version) already exists is reused, not retrained.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from cet_model import threads as cet_threads
from cet_model.atomic import writing
from cet_model.bootstrap import bootstrap_intervals
from cet_model.choices import PAPER_PRESETS, REFERENCE_CHOICES
from cet_model.dataset import ROW_NUMBERS, load_dataset
from cet_model.evaluation import (
    evaluate,
    machine,
    model_inputs,
    ranking_inputs,
    rmst_horizons,
)
from cet_model.models import CETModel, resolve_device
from cet_model.nonparametric import competing_groups
from cet_model.presets import (
    DEFAULT_PRESETS,
    check_presets,
    comment_encoder_for,
    fit_preset,
    presets_for_truth,
)
from cet_model.reference import REFERENCE, cox_reference, wants_reference
from cet_model.summary import resamples_text
from flows.lib.infra import registry, stage_cache
from flows.lib.infra.crash import crash_point
from flows.lib.infra.evaluation_record import Evaluation
from flows.lib.infra.keys import key_digest
from flows.lib.modeling import side_by_side
from flows.lib.modeling.model_card import model_card
from flows.lib.modeling.promotion import ROW_IDS, TRAIN_GROUPS, TRAIN_IDS, id_hashes, task_means
from flows.lib.modeling.version_facts import (
    beyond_follow_up,
    calibration_by_horizon,
    calibration_horizons,
    feature_moments,
    feature_ranges,
    item_labels,
    observed_events,
    training_follow_up,
)

log = logging.getLogger("flows.train")

CODE = ("cet_model", "flows.lib.modeling.train_eval", "flows.lib.modeling.promotion",
        "flows.lib.modeling.version_facts", "flows.lib.modeling.side_by_side", "flows.lib.infra.registry")


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


# the default on data censored by follow-up alone: BC, a classifier of the observed indicator, is scored only
# against the true occurrence, so there it would train for nothing (named in --models, it trains)
WITHOUT_TRUTH_PRESETS = ("CET", "ET")


def default_presets(train, val, test) -> tuple[str, ...]:
    """The presets trained when none are named: on data with the true occurrence, where AUC against
    it is scored, the product default, the baselines and the Oracle (CET, ET, BC, Oracle); on data
    censored by follow-up alone CET and ET, with the Cox reference beside them (BC has no figure
    there). CET-paper, the paper's objective, trains when named (``models``) and in the paper-format
    experiment report."""
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
        # events that end each other's follow-up (one status column): their risks are net ones
        "competing": [[ds.event_names[j] for j in g] for g in competing_groups(tr.T, tr.S, tr.mask)],
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
