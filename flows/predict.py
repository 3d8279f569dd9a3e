"""Prefect flow ``predict`` and its CLI: score new data with the promoted CET model.

    python -m flows.predict --dataset mimic --mimic-dir RAW --out scores.parquet     # raw MIMIC-III tables
    python -m flows.predict --dataset reddit --dumps DIR --out scores.parquet        # raw Pushshift dumps
    python -m flows.predict --dataset mimic --features new.parquet --out scores.parquet \\
        [--model-version v0003] [--quantiles 0.1,0.5,0.9] [--horizons 7,30] [--sequences seq.npy]
    python -m flows.predict --dataset cohort --features new.csv --out scores.csv       # CSV in, CSV out

Raw sources are featurised with the **training build's** items, imputation medians and
scaling (recorded in the model version), nothing refitted on the new data; MIMIC rows are keyed
by HADM_ID, Reddit users by pseudonym. A features parquet (or ``.csv``) must already be
prepared like the training dataset's (without ids when its table had none: the rows are then
numbered in the file's order). The output has ``id``, then per event ``p_<event>`` (P(the event ever
happens)) and ``t_qNN_<event>`` (quantiles of its time given that it happens, in the dataset's
unit) and, with ``--horizons 7,30``, ``risk_<h>_<event>`` (P(the event happens by time h), the
horizon in the dataset's unit), and with ``--rmst`` also ``rmst_<h>_<event>`` (the restricted mean
event-free time up to h: the score C (RMST) ranks by). Rows that cannot be scored (an admission without chart or lab
rows, a user with fewer
than 20 usable comments) are counted in the log, never dropped silently. A features file is scored
in the command itself when ``PREFECT_API_URL`` is unset, without loading Prefect; raw sources,
and every source with a Prefect server configured, run as a flow run.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early
    from flows.lib.infra.cli import log_to_terminal
    from flows.lib.modeling.score_command import score_here, scored_here
    from flows.lib.modeling.scores_file import check_command

    _ap, _args = parse_early("predict")
    _version = check_command(_ap, _args)
    if scored_here(_args):  # a file scored in this process: Prefect is not loaded at all
        log_to_terminal()
        raise SystemExit(score_here(_ap, _args, _version))

import json
import sys
from pathlib import Path

from prefect import flow, task
from prefect.logging import get_run_logger

from flows.common import work_dir_for
from flows.lib import commands
from flows.lib.flow_params import PredictParams
from flows.lib.infra import registry
from flows.lib.infra.cli import apply_log_level
from flows.lib.infra.locks import output_lock
from flows.lib.infra.run_names import file_task_name, run_name
from flows.lib.infra.runners import thread_runner
from flows.lib.infra.served import confine
from flows.lib.infra.settings import Settings
from flows.lib.modeling import predict as predict_lib
from flows.lib.modeling.score_command import check_features, score_here, scored_here
from flows.lib.modeling.scores_file import check_command, check_scores_out
from flows.lib.reddit import build as reddit_build


@task(name="score-features", task_run_name=file_task_name("score", "features"))
def score(features: str, version: str, out: str, quantiles: list[float], sequences: str | None, device: str,
          horizons: list[float], rmst: bool = False) -> str:
    path = predict_lib.score(features, version, out, quantiles, sequences, device, horizons, rmst)
    get_run_logger().info("scores written to %s (model %s)", path, version)
    return str(path)


@task(name="score-mimic-raw", task_run_name="score-mimic-raw")
def score_mimic(mimic_dir: str, version: str, out: str, work_dir: str, quantiles: list[float], device: str,
                horizons: list[float], rmst: bool = False, keep_staged: bool = True) -> str:
    path, counts = predict_lib.score_mimic_raw(mimic_dir, version, out, work_dir, quantiles, device, horizons, rmst,
                                               keep_staged)
    get_run_logger().info("scored %d of %d admissions (%d without chart or lab rows left out) -> %s (model %s)",
                          counts["scored"], counts["admissions"], counts["left_out_no_chart_or_lab_rows"], path,
                          version)
    return str(path)


def scoring_key(version: str, work_dir: str) -> bytes:
    """The pseudonymisation key, read inside the task (never a Prefect parameter): CET_PSEUDONYM_KEY,
    else the key the training build generated beside its dataset, else a new one in ``work_dir``
    (ids then differ from the training dataset's)."""
    secret = Settings().pseudonym_key
    if secret:
        return secret.get_secret_value().encode("utf-8")
    trained_on = json.loads((Path(version) / "data.json").read_text()).get("path")
    if trained_on:
        beside = Path(work_dir_for(trained_on, None)) / "pseudonym.key"
        if beside.is_file():
            return beside.read_bytes().strip()
    return reddit_build.pseudonym_key(None, Path(work_dir))


@task(name="score-reddit-raw", task_run_name="score-reddit-dumps")
def score_reddit(dumps: str | list[str], version: str, out: str, work_dir: str, quantiles: list[float],
                 device: str, horizons: list[float], rmst: bool = False, keep_embeddings: bool = True) -> str:
    key = scoring_key(version, work_dir)
    cache = Settings().embedding_cache  # vectors the builds cached are reused (CET_EMBEDDING_CACHE)
    path, counts = predict_lib.score_reddit_raw(dumps, version, out, work_dir, key, quantiles, device,
                                                embedding_cache=cache, horizons=horizons, rmst=rmst,
                                                keep_embeddings=keep_embeddings)
    get_run_logger().info("scored %d users (%d authors with fewer than 20 usable comments left out; skipped rows "
                          "%s) -> %s (model %s)", counts["scored"], counts["left_out_fewer_than_20_comments"],
                          counts["skipped_rows"], path, version)
    return str(path)


@flow(name="predict", flow_run_name=run_name("predict"), task_runner=thread_runner())
def predict(params: PredictParams) -> str:
    """Score ``params``' source with the dataset's promoted model (or ``params.version``)."""
    s = Settings()
    confine(params, s)
    version = str(registry.resolve_version(s.models_dir, s.dataset_name(params.dataset), params.version))
    qs, hs = list(params.quantiles), list(params.horizons)
    check_scores_out(params, s)
    work = work_dir_for(params.out, params.work_dir)
    with output_lock(params.out, s.lock_wait, "predict"):
        if params.mimic_dir:
            # the patients' rows staged in a work folder CET named itself do not stay beside the scores
            return score_mimic(params.mimic_dir, version, params.out, work, qs, s.device, hs, params.rmst,
                               keep_staged=params.work_dir is not None)
        if params.dumps:  # and the vectors of the users' comments
            return score_reddit(params.dumps, version, params.out, work, qs, s.device, hs, params.rmst,
                                keep_embeddings=params.work_dir is not None)
        return score(params.features, version, params.out, qs, params.sequences, s.device, hs, params.rmst)


def main(argv=None) -> int:
    ap = commands.predict()
    args = ap.parse_args(argv)
    apply_log_level(args)
    version = check_command(ap, args)  # the output, the inputs and the version, before anything is read
    if args.mimic_dir:  # a table missing or unreadable: a usage error now, not a failed flow's traceback
        from flows.lib.mimic.featurize import SCORING_TABLES
        from flows.lib.mimic.staging import check_tables

        try:
            check_tables(Path(args.mimic_dir), SCORING_TABLES)
        except (FileNotFoundError, ValueError) as exc:
            ap.error(f"--mimic-dir {exc}")
    if scored_here(args):  # a file scored here: no Prefect server started for it
        return score_here(ap, args, version)
    if args.features:  # a file that cannot be scored: a usage error now, not a failed flow's traceback
        check_features(ap, args, version)
    try:
        params = commands.params(args, PredictParams, version=version.name)
    except ValueError as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))
    print(predict(params))
    return 0


if __name__ == "__main__":
    sys.exit(main())
