"""Prefect flows ``train-evaluate`` and ``retrain``, and their CLI.

    python -m flows.train evaluate --dataset mimic [--data DIR]   # train, register, judge
    python -m flows.train retrain [--dataset mimic]               # rebuild if changed, then the same
    python -m flows.train versions [--dataset mimic]              # the registry: versions and decisions
    python -m flows.train promote --dataset mimic --model-version v0002 --reason "rollback: ..."
    python -m flows.train show --dataset mimic [--model-version v0002]  # a version's test metrics again
    python -m flows.train explain --dataset mimic [--out importance.csv]  # which inputs CET relies on

``--dataset`` is a name everywhere (as in ``flows.predict`` and ``flows.full_pipeline``): the
models go to ``models/<name>/``, the folder is ``$CET_DATA_DIR/<name>`` unless ``--data`` says.

train-evaluate fits CET and its baselines on a dataset folder, evaluates them on the validation
and test splits, registers the models as ``models/<name>/<version>/`` and applies the
promotion rule (CET_PROMOTE_METRIC, CET_PROMOTE_TOLERANCE, CET_PROMOTE_EVIDENCE). retrain first runs the
dataset's build flow (skipped when its inputs are unchanged), then train-evaluate; it is
the deployment served on the CET_RETRAIN_CRON schedule. With no Prefect server configured
(``PREFECT_API_URL`` unset), ``evaluate`` and ``retrain`` run their steps in the command itself,
without loading Prefect (``flows.lib.modeling.evaluate``, ``flows.lib.retrain``); with a server, as
flow runs.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    import sys

    from flows.lib.commands import parse_early

    _ap, _args = parse_early("train")
    from flows.lib.infra.cli import without_server
    from flows.lib.modeling import registry_commands  # light: no Prefect, no PyTorch

    if _args.command in registry_commands.COMMANDS:  # the registry's commands run no flow
        sys.exit(registry_commands.main())
    if _args.command in ("evaluate", "retrain") and without_server():  # no server configured: run here,
        from flows.lib import retrain as _retrain  # Prefect not loaded
        from flows.lib.infra.cli import apply_log_level, interruptible, log_to_terminal
        from flows.lib.modeling import evaluate

        apply_log_level(_args)
        log_to_terminal()
        with interruptible(_ap):
            sys.exit((evaluate.evaluate_command if _args.command == "evaluate" else _retrain.retrain_command)(
                _ap, _args))

import sys
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import (
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.logging import get_run_logger

from cet_model.summary import resamples_text
from flows.lib import commands
from flows.lib import retrain as retrain_steps
from flows.lib.flow_params import (
    RetrainParams,
    TrainEvaluateParams,
)
from flows.lib.infra.cli import apply_log_level, flow_command, interruptible, without_server
from flows.lib.infra.run_names import file_task_name, run_name
from flows.lib.infra.runners import thread_runner
from flows.lib.infra.served import confine
from flows.lib.infra.settings import Settings
from flows.lib.modeling import evaluate, registry_commands, train_eval, version_text


@task(name="train-models", task_run_name="train-{name}")
def train_models(dataset_dir: str, models_root: str, name: str, p: train_eval.TrainParams) -> tuple[str, bool]:
    artifact = create_progress_artifact(0.0, description=f"training {', '.join(p.models or ('the default models',))} "
                                                     f"on {name}")
    percent = train_eval.FitProgress(p.models or train_eval.DEFAULT_PRESETS)  # at most one API call every 2 s
    logger = get_run_logger()
    try:
        version, reused = evaluate.train_models(dataset_dir, models_root, name, p, logger, percent,
                                                lambda due: update_progress_artifact(artifact, due))
    except BaseException as exc:  # failed or cancelled: the progress artifact says so instead of standing still
        ended = "cancelled" if not isinstance(exc, Exception) else f"failed ({type(exc).__name__})"
        try:
            update_progress_artifact(artifact, percent.percent, description=f"training on {name} {ended} at "
                                                                             f"{percent.percent:.0f} %")
        except Exception:  # noqa: BLE001 - the API may be what failed; the run's own state says the rest
            pass
        raise
    logger.info("%s: %s %s", name, "reused" if reused else "registered", version)  # in the task run's own log
    return version, reused


@task(name="choose-promotion-metric", task_run_name=file_task_name("choose-metric", "dataset_dir"))
def choose_metric(dataset_dir: str, metric: str, explicit: bool, search: int) -> tuple[str, str | None]:
    return evaluate.choose_metric(dataset_dir, metric, explicit, search, get_run_logger())


@task(name="rescore-promoted-version", task_run_name="rescore-promoted-{name}")
def rescore_promoted(models_root: str, name: str, version: str, dataset_dir: str, metric: str,
                     device: str) -> dict | None:
    """The promoted version and the candidate on the same validation rows (``evaluate.rescore_promoted``)."""
    return evaluate.rescore_promoted(models_root, name, version, dataset_dir, metric, device, get_run_logger())


@task(name="apply-promotion-rule", task_run_name="judge-{name}")
def judge(models_root: str, name: str, version: str, metric: str, tolerance: float, note: str | None = None,
          rescored: dict | None = None, evidence: str = "point") -> dict:
    return evaluate.judge(models_root, name, version, metric, tolerance, note, rescored, evidence, get_run_logger())


@task(name="publish-metrics", task_run_name="publish-metrics-{name}")
def publish_metrics(name: str, version: str) -> None:
    rows = version_text.metric_rows(Path(version))
    create_table_artifact(rows, key=f"metrics-{artifact_key(name)}",
                          description=f"{name}, model version {Path(version).name}: test metrics")
    create_table_artifact(version_text.calibration_rows(Path(version)), key=f"calibration-{artifact_key(name)}",
                          description=f"{name}, model version {Path(version).name}: predicted risk by each event's "
                                      "horizon (the median training follow-up) against the Kaplan-Meier risk of "
                                      "groups of rows by predicted risk; mean absolute difference per split")
    record = version_text.intervals(Path(version))
    if record:
        create_table_artifact(version_text.interval_rows(Path(version)), key=f"intervals-{artifact_key(name)}",
                              description=f"{name}, model version {Path(version).name}: test AUC, Harrell's C and "
                                          "AUC at each event's horizon (averages over events) with "
                                          f"{record['level']:.0%} paired bootstrap "
                                          f"intervals ({resamples_text(record)}), and CET "
                                          "minus each model")


@task(name="subgroup-metrics", task_run_name="subgroups-{name}")
def subgroup_metrics(name: str, version: str, dataset_dir: str, columns: list[str]) -> str:
    path = evaluate.subgroup_metrics(name, version, dataset_dir, columns)
    create_table_artifact(version_text.read_subgroups(Path(path)), key=f"subgroups-{artifact_key(name)}",
                          description=f"{name}, model version {Path(version).name}: CET's test metrics per subgroup")
    return path


@task(name="dataset-report", task_run_name="report-{name}")
def dataset_report(name: str, version: str, dataset_dir: str, out: str, device: str, reused: bool) -> str:
    return evaluate.dataset_report(name, version, dataset_dir, out, device, reused, get_run_logger())


@task(name="experiment-report", task_run_name="experiment-report-{name}")
def experiment_report(dataset_dir: str, out: str, runs: int, search: int, hidden: int, max_epochs: int,
                      patience: int, seed: int, name: str, reference: str = "auto") -> str:
    path = evaluate.experiment_report(dataset_dir, out, runs, search, hidden, max_epochs, patience, seed, name,
                                      reference, get_run_logger())
    create_table_artifact(version_text.experiment_rows(path), key=f"experiment-{artifact_key(name)}",
                          description=f"{name}: mean ± std over {runs} runs (test split)")
    return path


def artifact_key(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-") or "dataset"


STEPS = evaluate.Steps(choose_metric, train_models, publish_metrics, rescore_promoted, judge, subgroup_metrics,
                       dataset_report, experiment_report)


@flow(name="train-evaluate", flow_run_name=run_name("train"), task_runner=thread_runner())
def train_evaluate(params: TrainEvaluateParams = TrainEvaluateParams()) -> dict:
    """Dataset folder -> CET (the default), ET, BC (and the oracle with the truth) -> metrics, a
    registered version and a promotion decision (on CET).

    ``dataset``: the name (default: CET_RETRAIN_DATASET); ``data``: the folder (default:
    CET_DATA_DIR/<dataset>).
    Unset training parameters come from the settings (CET_HIDDEN, CET_MAX_EPOCHS, ...).
    ``runs`` > 0 also writes the paper-format report (``search`` random-search trials for CET,
    then ``runs`` seeds of CET, CET-paper, ET, BC and the oracle, and the Cox reference where
    ``reference`` asks for it) to CET_REPORTS_DIR/<name>/.
    """
    s = Settings()
    confine(params, s)
    return evaluate.train_evaluate(params, s, STEPS)


def build_flow(name: str):
    """The build flow of dataset ``name`` and the parameters to call it with: those recorded by the
    build that made its folder (the stamp's recipe: the same source, options and seeds), or None
    where there is none yet (the flow's defaults, i.e. its configured source). A name other than
    synthetic, mimic or reddit must be a table built by build-table-dataset (``retrain.rebuild_of``)."""
    rebuild = retrain_steps.rebuild_of(name)
    if rebuild.kind == "synthetic":
        from flows.synthetic import build_synthetic as build
    elif rebuild.kind == "mimic":
        from flows.mimic import build_mimic_features as build
    elif rebuild.kind == "reddit":
        from flows.reddit import build_reddit_features as build
    else:
        from flows.table import build_table_dataset as build
    return build, rebuild.params


@flow(name="retrain", flow_run_name=run_name("retrain"), task_runner=thread_runner())
def retrain(params: RetrainParams = RetrainParams()) -> dict:
    """Rebuild ``dataset`` (synthetic, mimic, reddit, or a table built by build-table-dataset, from the
    same file; default CET_RETRAIN_DATASET) from its configured source when its inputs changed,
    train a new version and apply the promotion rule."""
    name = Settings().dataset_name(params.dataset)
    build, recorded = build_flow(name)
    path = build(recorded) if recorded is not None else build()
    return train_evaluate(retrain_steps.evaluate_params(name, path, params))


def main(argv=None) -> int:
    ap = commands.train()
    args = ap.parse_args(argv)
    apply_log_level(args)
    if args.command in registry_commands.COMMANDS:
        return registry_commands.registry_command(ap, args)
    if args.command == "evaluate":
        params = evaluate.command_params(ap, args)
        if without_server():  # no Prefect server configured: run here, no temporary server started for it
            with interruptible(ap):
                return evaluate.evaluate_command(ap, args, params)
    else:
        params = retrain_steps.command_params(ap, args)
        if without_server():  # no Prefect server configured: rebuilt and run here, no temporary server for it
            with interruptible(ap):
                return retrain_steps.retrain_command(ap, args, params)
    with flow_command(ap):
        result = train_evaluate(params) if args.command == "evaluate" else retrain(params)
    registry_commands.print_version(Path(result["version"]), result["decision"], result.get("subgroups"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
