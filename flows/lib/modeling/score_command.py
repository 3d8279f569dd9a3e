"""``python -m flows.predict --features FILE`` in the command's own process: the checks of a
features file against the model version, and the scoring itself when no Prefect server is
configured, so that Prefect is never loaded for it. PyTorch and the model load inside the
functions, once the options hold (``flows.predict`` answers ``--help`` and usage errors first)."""

from __future__ import annotations

import argparse
from pathlib import Path

from flows.lib.infra.settings import Settings


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


def scored_here(args: argparse.Namespace) -> bool:
    """Whether ``python -m flows.predict`` scores in its own process, without Prefect: a features
    file, with no Prefect server configured (``PREFECT_API_URL`` unset) to record a flow run."""
    return bool(args.features) and not Settings().prefect_api_url


def score_here(ap: argparse.ArgumentParser, args: argparse.Namespace, version: Path) -> int:
    """Score ``args.features`` with ``version`` in this process, as the flow's task would; prints
    the output's path. Loads PyTorch and the model, never Prefect."""
    from flows.lib import commands
    from flows.lib.flow_params import PredictParams
    from flows.lib.infra.cli import apply_log_level
    from flows.lib.infra.locks import output_lock
    from flows.lib.modeling import predict as predict_lib

    apply_log_level(args)
    check_features(ap, args, version)
    try:
        params = commands.params(args, PredictParams, version=version.name)
    except ValueError as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))
    s = Settings()
    with output_lock(params.out, s.lock_wait, "predict"):
        path = predict_lib.score(params.features, str(version), params.out, list(params.quantiles),
                                 params.sequences, s.device, list(params.horizons), params.rmst)
    print(path)
    return 0
