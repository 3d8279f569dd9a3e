"""Scoring, as ``python -m flows.predict`` and its flow run it: the checks of a features file
against the model version, one scorer per kind of source (a features file, raw MIMIC-III tables,
Pushshift dumps), and the command's own scoring when no Prefect server is configured, so that
Prefect is never loaded for it. PyTorch and the model load inside the functions, once the
options hold (``flows.predict`` answers ``--help`` and usage errors first)."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from pathlib import Path

from flows.lib.infra.folders import work_dir_for
from flows.lib.infra.settings import Settings

log = logging.getLogger("flows.predict")


def check_inputs(ap: argparse.ArgumentParser, args: argparse.Namespace, version: Path) -> None:
    """The command's source checked before anything is written or any run starts: raw MIMIC
    tables that are missing or not MIMIC's, a features file the version cannot score (exits
    through ``ap.error``: a usage error, not a failed run's traceback)."""
    if args.mimic_dir:
        from flows.lib.mimic.featurize import SCORING_TABLES
        from flows.lib.mimic.staging import check_tables

        try:
            check_tables(Path(args.mimic_dir), SCORING_TABLES)
        except (FileNotFoundError, ValueError) as exc:
            ap.error(f"--mimic-dir {exc}")
    if args.features:
        check_features(ap, args, version)


def check_features(ap: argparse.ArgumentParser, args: argparse.Namespace, version: Path) -> None:
    """A features file that ``version`` cannot score is a usage error, before anything is written:
    a missing column, a value or an id that is not usable (exits through ``ap.error``)."""
    from flows.lib.modeling import predict as predict_lib  # the model's stack only once the options hold

    try:
        missing = predict_lib.missing_for_version(args.features, version)
    except ValueError as exc:
        ap.error(f"--features {exc}")
    if missing:
        ap.error(f"--features {args.features}: missing columns {missing[:10]}{' ...' if len(missing) > 10 else ''}"
                 f" ({Settings().dataset_name(args.dataset)} {version.name} needs an id and its features)")
    try:  # its values and ids too
        predict_lib.check_for_version(args.features, version)
    except ValueError as exc:
        ap.error(f"--features {exc}")


def score_here(ap: argparse.ArgumentParser, args: argparse.Namespace, version: Path) -> int:
    """Score the command's source (checked by ``check_inputs``) with ``version`` in this process, as
    the flow's tasks would; prints the output's path. Loads PyTorch and the model, never Prefect."""
    from flows.lib import commands
    from flows.lib.flow_params import PredictParams
    from flows.lib.infra.cli import apply_log_level

    apply_log_level(args)
    try:
        params = commands.params(args, PredictParams, version=version.name)
    except ValueError as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))
    print(run_scoring(params, str(version), Settings(), features_scores, mimic_scores, dumps_scores))
    return 0


def run_scoring(params, version: str, s: Settings, features: Callable, mimic: Callable, dumps: Callable) -> str:
    """Score ``params``' source with ``version`` under the output's lock, through the scorer of its
    kind: the flow passes its tasks, the command the plain functions below (the same arguments).
    A work folder CET names itself keeps neither the patients' staged rows nor the comments'
    vectors once scoring ends; a ``--work-dir`` the user names keeps them for a rerun."""
    from flows.lib.infra.locks import output_lock

    qs, hs = list(params.quantiles), list(params.horizons)
    work = work_dir_for(params.out, params.work_dir)
    with output_lock(params.out, s.lock_wait, "predict"):
        if params.mimic_dir:
            return mimic(params.mimic_dir, version, params.out, work, qs, s.device, hs, params.rmst,
                         keep_staged=params.work_dir is not None)
        if params.dumps:
            return dumps(params.dumps, version, params.out, work, qs, s.device, hs, params.rmst,
                         keep_embeddings=params.work_dir is not None)
        return features(params.features, version, params.out, qs, params.sequences, s.device, hs, params.rmst)


def features_scores(features: str, version: str, out: str, quantiles: list[float], sequences: str | None,
                    device: str, horizons: list[float], rmst: bool = False, logger=log) -> str:
    """A features file scored (``predict.score``); returns the output's path."""
    from flows.lib.modeling import predict as predict_lib

    path = predict_lib.score(features, version, out, quantiles, sequences, device, horizons, rmst)
    logger.info("scores written to %s (model %s)", path, version)
    return str(path)


def mimic_scores(mimic_dir: str, version: str, out: str, work_dir: str, quantiles: list[float], device: str,
                 horizons: list[float], rmst: bool = False, keep_staged: bool = True, logger=log) -> str:
    """Raw MIMIC-III tables scored (``predict.score_mimic_raw``); returns the output's path."""
    from flows.lib.modeling import predict as predict_lib

    path, counts = predict_lib.score_mimic_raw(mimic_dir, version, out, work_dir, quantiles, device, horizons, rmst,
                                               keep_staged)
    logger.info("scored %d of %d admissions (%d without chart or lab rows left out) -> %s (model %s)",
                counts["scored"], counts["admissions"], counts["left_out_no_chart_or_lab_rows"], path, version)
    return str(path)


def scoring_key(version: str, work_dir: str) -> bytes:
    """The pseudonymisation key, read where the scoring runs (never a Prefect parameter):
    CET_PSEUDONYM_KEY, else the key the training build generated beside its dataset, else a new
    one in ``work_dir`` (ids then differ from the training dataset's)."""
    from flows.lib.reddit import build as reddit_build

    secret = Settings().pseudonym_key
    if secret:
        return secret.get_secret_value().encode("utf-8")
    trained_on = json.loads((Path(version) / "data.json").read_text()).get("path")
    if trained_on:
        beside = Path(work_dir_for(trained_on, None)) / "pseudonym.key"
        if beside.is_file():
            return beside.read_bytes().strip()
    return reddit_build.pseudonym_key(None, Path(work_dir))


def dumps_scores(dumps: str | list[str], version: str, out: str, work_dir: str, quantiles: list[float],
                 device: str, horizons: list[float], rmst: bool = False, keep_embeddings: bool = True,
                 logger=log) -> str:
    """Raw Pushshift dumps scored (``predict.score_reddit_raw``); returns the output's path."""
    from flows.lib.modeling import predict as predict_lib

    key = scoring_key(version, work_dir)
    cache = Settings().embedding_cache  # vectors the builds cached are reused (CET_EMBEDDING_CACHE)
    path, counts = predict_lib.score_reddit_raw(dumps, version, out, work_dir, key, quantiles, device,
                                                embedding_cache=cache, horizons=horizons, rmst=rmst,
                                                keep_embeddings=keep_embeddings)
    logger.info("scored %d users (%d authors with fewer than 20 usable comments left out; skipped rows %s) -> %s "
                "(model %s)", counts["scored"], counts["left_out_fewer_than_20_comments"], counts["skipped_rows"],
                path, version)
    return str(path)
