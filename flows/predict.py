"""Prefect flow ``predict`` and its CLI: score new data with the promoted CET model.

    python -m flows.predict --dataset mimic --mimic-dir RAW --out scores.parquet     # raw MIMIC-III tables
    python -m flows.predict --dataset reddit --dumps DIR --out scores.parquet        # raw Pushshift dumps
    python -m flows.predict --dataset mimic --features new.parquet --out scores.parquet \\
        [--model-version v0003] [--quantiles 0.1,0.5,0.9] [--horizons 7,30] [--sequences seq.npy]
    python -m flows.predict --dataset cohort --features new.csv --out scores.csv       # CSV in, CSV out

Raw sources are featurised with the **training build's** items, imputation medians and
scaling (recorded in the model version), nothing refitted on the new data; MIMIC rows are keyed
by HADM_ID, Reddit users by pseudonym. A features table (parquet, ``.csv``, ``.tsv``, ``.dta``) must already be
prepared like the training dataset's (without ids when its table had none: the rows are then
numbered in the file's order). The output has ``id``, then per event ``p_<event>`` (P(the event ever
happens)) and ``t_qNN_<event>`` (quantiles of its time given that it happens, in the dataset's
unit) and, with ``--horizons 7,30``, ``risk_<h>_<event>`` (P(the event happens by time h), the
horizon in the dataset's unit), and with ``--rmst`` also ``rmst_<h>_<event>`` (the restricted mean
event-free time up to h: the score C (RMST) ranks by). Where the events compete (a status column of
several kinds), horizons also give ``crude_<h>_<event>``: the risk by h before every competing event.
Rows that cannot be scored (an admission without chart or lab rows, a user with fewer than 20 usable
comments) are counted in the log, never dropped silently.
With ``PREFECT_API_URL`` unset every source is scored in the command itself, without loading
Prefect (a temporary server would keep no record of the run); with a Prefect server configured,
as a flow run.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early
    from flows.lib.infra.cli import interruptible, log_to_terminal, without_server
    from flows.lib.modeling.score_command import check_inputs, score_here
    from flows.lib.modeling.scores_file import check_command

    _ap, _args = parse_early("predict")
    _version = check_command(_ap, _args)
    if without_server():  # no Prefect server configured: scored in this process, Prefect not loaded at all
        log_to_terminal()
        with interruptible(_ap):  # reading a large file to check it can take a while too
            check_inputs(_ap, _args, _version)
            raise SystemExit(score_here(_ap, _args, _version))

import sys

from prefect import flow, task
from prefect.logging import get_run_logger

from flows.lib import commands
from flows.lib.flow_params import PredictParams
from flows.lib.infra import registry
from flows.lib.infra.cli import apply_log_level, flow_command, interruptible, without_server
from flows.lib.infra.run_names import file_task_name, run_name
from flows.lib.infra.runners import thread_runner
from flows.lib.infra.served import confine
from flows.lib.infra.settings import Settings
from flows.lib.modeling import score_command
from flows.lib.modeling.score_command import check_inputs, score_here
from flows.lib.modeling.scores_file import check_command, check_scores_out


@task(name="score-features", task_run_name=file_task_name("score", "features"))
def score(features: str, version: str, out: str, quantiles: list[float], sequences: str | None, device: str,
          horizons: list[float], rmst: bool = False) -> str:
    return score_command.features_scores(features, version, out, quantiles, sequences, device, horizons, rmst,
                                         get_run_logger())


@task(name="score-mimic-raw", task_run_name="score-mimic-raw")
def score_mimic(mimic_dir: str, version: str, out: str, work_dir: str, quantiles: list[float], device: str,
                horizons: list[float], rmst: bool = False, keep_staged: bool = True) -> str:
    return score_command.mimic_scores(mimic_dir, version, out, work_dir, quantiles, device, horizons, rmst,
                                      keep_staged, get_run_logger())


@task(name="score-reddit-raw", task_run_name="score-reddit-dumps")
def score_reddit(dumps: str | list[str], version: str, out: str, work_dir: str, quantiles: list[float],
                 device: str, horizons: list[float], rmst: bool = False, keep_embeddings: bool = True) -> str:
    return score_command.dumps_scores(dumps, version, out, work_dir, quantiles, device, horizons, rmst,
                                      keep_embeddings, get_run_logger())


@flow(name="predict", flow_run_name=run_name("predict"), task_runner=thread_runner())
def predict(params: PredictParams) -> str:
    """Score ``params``' source with the dataset's promoted model (or ``params.version``)."""
    s = Settings()
    confine(params, s)
    version = str(registry.resolve_version(s.models_dir, s.dataset_name(params.dataset), params.version))
    check_scores_out(params, s)
    return score_command.run_scoring(params, version, s, score, score_mimic, score_reddit)


def main(argv=None) -> int:
    ap = commands.predict()
    args = ap.parse_args(argv)
    apply_log_level(args)
    version = check_command(ap, args)  # the output, the inputs and the version, before anything is read
    check_inputs(ap, args, version)  # a table or a file that cannot be scored: a usage error, not a failed run
    if without_server():  # no Prefect server configured: scored here, no temporary server started for it
        with interruptible(ap):
            return score_here(ap, args, version)
    try:
        params = commands.params(args, PredictParams, version=version.name)
    except ValueError as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))
    with flow_command(ap):
        print(predict(params))
    return 0


if __name__ == "__main__":
    sys.exit(main())
