"""``train-evaluate``'s steps as plain functions, and the order they run in (``train_evaluate``).

The flow (``flows/train.py``) passes its tasks, which call these functions with the run's logger
and add Prefect's artifacts (the progress bar, the metric tables). ``python -m flows.train
evaluate`` with no Prefect server configured passes the functions themselves (``here_steps``):
the same version, decision and reports, in the command's own process, without loading Prefect.
A temporary server would keep no record of the run, its artifacts included.
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from flows.lib.infra.settings import Settings

LOGGER = "flows.train"


@dataclass(frozen=True)
class Steps:
    """The steps of ``train_evaluate``, each called with the arguments of the function of its name."""

    choose_metric: Callable
    train_models: Callable
    publish_metrics: Callable
    rescore_promoted: Callable
    judge: Callable
    subgroup_metrics: Callable
    dataset_report: Callable
    experiment_report: Callable


def train_evaluate(params, s: Settings, steps: Steps) -> dict:
    """Dataset folder -> the models -> metrics, a registered version and a promotion decision,
    then the dataset's report (``params``: a ``TrainEvaluateParams``)."""
    from flows.lib.infra.locks import output_lock
    from flows.lib.modeling import subgroups, train_eval

    name = s.dataset_name(params.dataset, params.data)
    path = Path(params.data) if params.data else s.dataset_dir(name)
    training = train_eval.TrainParams(
        models=tuple(params.models) if params.models else None, hidden=params.hidden or s.hidden,
        max_epochs=params.max_epochs or s.max_epochs, patience=params.patience or s.patience,  # None: automatic
        seed=s.seed if params.seed is None else params.seed, device=s.device, workers=s.train_workers,
        horizon=params.horizon, reference=params.reference)
    if params.subgroups:  # refused before anything trains
        subgroups.check_dataset_columns(path, params.subgroups)
    check_reports(s.reports_dir / name, name, params.runs)  # a user's files where the reports go: likewise
    metric, note = steps.choose_metric(str(path), *metric_choice(params, s))
    with output_lock(s.models_dir / name, s.lock_wait, "train-evaluate"):  # a second run then reuses this version
        version, reused = steps.train_models(str(path), str(s.models_dir), name, training)
        steps.publish_metrics(name, version)
        rescored = steps.rescore_promoted(str(s.models_dir), name, version, str(path), metric, training.device)
        decision = steps.judge(str(s.models_dir), name, version, metric,
                               s.promote_tolerance if params.promote_tolerance is None else params.promote_tolerance,
                               note, rescored, params.promote_evidence or s.promote_evidence)
    by_group = steps.subgroup_metrics(name, version, str(path), params.subgroups) if params.subgroups else None
    summary = steps.dataset_report(name, version, str(path), str(s.reports_dir / name), training.device, reused)
    report = None
    if params.runs:
        report = steps.experiment_report(str(path), str(s.reports_dir / name), params.runs, params.search,
                                         training.hidden, training.max_epochs, training.patience, training.seed, name,
                                         training.reference)
    return {"name": name, "dataset": str(path), "version": version, "reused": reused, "decision": decision,
            "report": summary, "experiment": report, "subgroups": by_group}


def metric_choice(params, s: Settings) -> tuple[str, bool, int]:
    """``promotion.promotion_metric``'s arguments after the dataset folder: the metric asked for,
    whether it was asked for explicitly (an option or a setting), and the random search's trials."""
    explicit = params.promote_metric is not None or "promote_metric" in s.model_fields_set
    return params.promote_metric or s.promote_metric, explicit, params.search if params.runs else 0


def check_reports(out: Path, name: str, runs: int) -> None:
    """Refuse, before anything trains, a reports folder holding files of the user's where this
    dataset's report (and with ``runs``, the paper-format report) would go."""
    from cet_model.atomic import claim_files
    from flows.lib.experiment.report import REPORT_FILES, is_report_folder
    from flows.lib.modeling import dataset_report

    dataset_report.check_ours(out, name)
    if runs:
        claim_files(out, REPORT_FILES, legacy=is_report_folder, what="reports folder (CET_REPORTS_DIR)", record=False)


def command_params(ap: argparse.ArgumentParser, args: argparse.Namespace):
    """``flows.train evaluate``'s parameters (a ``TrainEvaluateParams``) from its parsed options, with
    the dataset folder, the subgroup columns and the reports folder checked: a usage error before
    anything trains."""
    from cet_model.dataset import DATASET_FILES
    from flows.lib import commands
    from flows.lib.choices import BUILDS
    from flows.lib.flow_params import TrainEvaluateParams
    from flows.lib.infra.cli import require_path
    from flows.lib.modeling import subgroups

    try:
        if args.dataset and not args.data and ("/" in args.dataset or Path(args.dataset).is_dir()):
            ap.error(f"--dataset takes a name (e.g. mimic); give the folder with --data {args.dataset}")
        require_path(ap, "--data", args.data, "dir", contains=DATASET_FILES)
        if args.data is None:  # the default folder: built by the dataset's build flow
            name = Settings().dataset_name(args.dataset)
            default = Settings().dataset_dir(name)
            if not (default / DATASET_FILES[0]).is_file():
                build = {"synthetic": "python -m flows.synthetic"}.get(name, f"python -m flows.{name} build")
                ap.error(f"no dataset at {default} (the default folder for --dataset {name}): "
                         + (f"build it first ({build}) or " if name in BUILDS else "")
                         + "give its folder with --data")
        params = commands.params(args, TrainEvaluateParams)
        if params.subgroups:  # a column the dataset lacks: a usage error before any flow starts
            folder = Path(args.data) if args.data else Settings().dataset_dir(Settings().dataset_name(args.dataset))
            subgroups.check_dataset_columns(folder, params.subgroups)
        s = Settings()
        name = s.dataset_name(params.dataset, params.data)
        check_reports(s.reports_dir / name, name, params.runs)
        from flows.lib.modeling import promotion

        # a metric or a search the data cannot score (no true occurrence): refused here, not by a failed run
        promotion.promotion_metric(Path(params.data) if params.data else s.dataset_dir(name), *metric_choice(params, s))
    except (ValueError, FileExistsError) as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))
    return params


# The steps as plain functions: the flow's tasks call them with the run's logger.

def choose_metric(dataset_dir: str, metric: str, explicit: bool, search: int, logger) -> tuple[str, str | None]:
    from flows.lib.modeling import promotion

    chosen, why = promotion.promotion_metric(dataset_dir, metric, explicit, search)
    if why:  # the default giving way on data without the truth (a user's own table): nothing to act on
        logger.info("%s", why)
    return chosen, why


def train_models(dataset_dir: str, models_root: str, name: str, p, logger, percent=None,
                 on_percent: Callable[[float], None] = lambda percent: None) -> tuple[str, bool]:
    """Fit ``p``'s models and register the version (``train_eval.train_version``), with progress on
    ``logger``: each model's epochs at most every 2 s, when ``on_percent`` gets the percent done
    (``percent``, a ``train_eval.FitProgress``, counts it: the flow reads it when a fit fails)."""
    from cet_model import threads
    from flows.lib.modeling import promotion, train_eval

    s = Settings()
    if s.threads is not None and not os.environ.get(threads.VARIABLE):  # from .env: the models read the environment
        os.environ[threads.VARIABLE] = str(s.threads)
    percent = percent or train_eval.FitProgress(p.models or train_eval.DEFAULT_PRESETS)

    def progress(model, epoch, hist):
        due = percent.epoch(model, epoch)
        if due is not None:  # the log too: a small table's fits run thousands of epochs of milliseconds
            logger.info("%s %s epoch %d: train loss %.4f, val loss %.4f", name, model, epoch + 1,
                        hist.train_loss[-1], hist.val_loss[-1])
            on_percent(due)

    version, reused = train_eval.train_version(dataset_dir, models_root, name, p, progress=progress,
                                               on_models=percent.fitting, id_key=promotion.row_key(s),
                                               on_fitted=percent.fitted)
    on_percent(percent.finish())
    return str(version), reused  # train_version said which, on the flows.train logger


def rescore_promoted(models_root: str, name: str, version: str, dataset_dir: str, metric: str, device: str,
                     logger) -> dict | None:
    """The promoted version and the candidate on the same validation rows (those the promoted
    version did not train on, when it was trained on other data), and their difference."""
    from flows.lib.modeling import promotion

    rescored = promotion.promoted_on_candidate_rows(Path(models_root), name, Path(version), dataset_dir, metric,
                                                    promotion.row_key(Settings()), device=device)
    if rescored is not None:
        logger.info("%s %s: %s", name, Path(version).name, rescored["note"])
    return rescored


def judge(models_root: str, name: str, version: str, metric: str, tolerance: float, note: str | None,
          rescored: dict | None, evidence: str, logger) -> dict:
    from flows.lib.infra import registry

    decision = registry.decide(Path(models_root), name, Path(version), registry.Rule(metric, tolerance, evidence),
                               note=note, rescored=rescored)
    logger.info("%s %s: %s", name, Path(version).name, decision["reason"])
    return decision


def subgroup_metrics(name: str, version: str, dataset_dir: str, columns: list[str]) -> str:
    from flows.lib.modeling import subgroups

    return str(subgroups.write_subgroups(version, dataset_dir, columns))


def dataset_report(name: str, version: str, dataset_dir: str, out: str, device: str, reused: bool, logger) -> str:
    from flows.lib.modeling import dataset_report as dataset_report_lib
    from flows.lib.modeling import report as report_lib

    if reused and report_lib.report_is_current(out, version, name):
        logger.info("%s: report of %s unchanged (%s)", name, Path(version).name, Path(out) / "report.md")
        return str(Path(out) / "report.md")
    path = dataset_report_lib.write_dataset_report(version, dataset_dir, out, name, device=device)
    logger.info("%s: report in %s (model card: %s)", name, path, Path(version) / "model_card.md")
    return str(path)


def experiment_report(dataset_dir: str, out: str, runs: int, search: int, hidden: int, max_epochs: int,
                      patience: int, seed: int, name: str, reference: str, logger) -> str:
    from flows.lib.modeling import train_eval

    path = train_eval.experiment(dataset_dir, out, runs, search, hidden=hidden, max_epochs=max_epochs,
                                 patience=patience, seed=seed, title=f"{name}: {runs} runs", reference=reference)
    logger.info("%s: experiment report in %s", name, path)
    return str(path)


def here_steps(logger: logging.Logger | None = None) -> Steps:
    """The steps for a run in this process without Prefect: the functions above with ``logger``
    (default the ``flows.train`` logger); the metric tables, Prefect artifacts, are left out."""
    log = logger or logging.getLogger(LOGGER)
    return Steps(
        choose_metric=lambda *a: choose_metric(*a, log),
        train_models=lambda *a: train_models(*a, log),
        publish_metrics=lambda name, version: None,
        rescore_promoted=lambda *a: rescore_promoted(*a, log),
        judge=lambda *a: judge(*a, log),
        subgroup_metrics=subgroup_metrics,
        dataset_report=lambda *a: dataset_report(*a, log),
        experiment_report=lambda *a: experiment_report(*a, log),
    )


def evaluate_here(params) -> dict:
    """``train_evaluate`` in this process, without Prefect."""
    return train_evaluate(params, Settings(), here_steps())


def evaluate_command(ap: argparse.ArgumentParser, args: argparse.Namespace, params=None) -> int:
    """``python -m flows.train evaluate`` without Prefect: the options checked (unless ``params`` are
    given, already checked), the run, then the version's decision and test metrics printed."""
    from flows.lib.modeling.registry_commands import print_version

    params = params if params is not None else command_params(ap, args)
    result = evaluate_here(params)
    print_version(Path(result["version"]), result["decision"], result.get("subgroups"))
    return 0
