"""Serve every flow as a Prefect deployment named ``<flow>/<flow>``.

    export PREFECT_SERVER_API_AUTH_STRING=$(python -c "import secrets; print(secrets.token_hex(32))")
    export PREFECT_API_AUTH_STRING=$PREFECT_SERVER_API_AUTH_STRING PREFECT_API_URL=http://127.0.0.1:4200/api
    prefect server start --host 127.0.0.1 --port 4200 --analytics-off &      # once
    python -m flows.serve                                                     # from the repo root
    prefect deployment run build-mimic-features/build-mimic-features --watch

Serving refuses a Prefect API that answers without credentials (anyone who reaches it could start
runs as you, with any parameters), unless ``--single-user`` says no one else uses the machine.
A served run may only name files and folders inside the configured folders (``CET_DATA_DIR``,
``CET_MODELS_DIR``, ``CET_REPORTS_DIR``, the configured sources and ``CET_SOURCE_ROOTS``).

``retrain`` runs on the CET_RETRAIN_CRON schedule (timezone CET_RETRAIN_TIMEZONE) when
CET_RETRAIN_DATASET names its dataset (unset: no schedule, and a run needs its dataset). Schedules
stay active when this process stops (``pause_on_shutdown=False``), so a restarted or
supervised serve process picks them up again. If the Prefect API goes away while serving
(a server restart, a network blip longer than Prefect's three polls), this process logs it,
waits until the API answers again and serves again, instead of exiting. Runs execute in subprocesses that load
the flows by module path, so this works from any folder where ``cet`` is installed;
the flows read their settings (``.env``) from the folder the serve process started in.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early

    parse_early("serve")

import logging
import sys
import time

import httpx
from prefect import serve
from prefect.client.schemas.objects import ConcurrencyLimitConfig
from prefect.deployments.runner import EntrypointType
from prefect.schedules import Cron
from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL

from flows.full_pipeline import full_pipeline
from flows.lib import commands
from flows.lib.infra.cli import api_outage, apply_log_level
from flows.lib.infra.served import check_api_locked
from flows.lib.infra.settings import Settings
from flows.mimic import build_mimic_features
from flows.predict import predict
from flows.reddit import build_reddit_features
from flows.synthetic import build_synthetic
from flows.table import build_table_dataset
from flows.train import retrain, train_evaluate

log = logging.getLogger("cet.serve")

FLOWS = (build_synthetic, build_mimic_features, build_reddit_features, build_table_dataset, train_evaluate, retrain,
         predict, full_pipeline)
# one run of a deployment at a time; a run that would start beside it is cancelled, not queued
# (prefect.yaml's ``one_at_a_time``: a scheduled retrain never starts beside a manual one)
ONE_AT_A_TIME = {"limit": 1, "collision_strategy": "CANCEL_NEW"}
OVERLAPPING = ("predict",)  # reads a promoted model and writes the output it was given: runs may overlap


def deployments(settings: Settings | None = None) -> list:
    s = settings or Settings()
    out = []
    for f in FLOWS:
        scheduled = f.name == "retrain" and s.retrain_dataset is not None  # no dataset named: nothing to retrain
        schedules = [Cron(s.retrain_cron, timezone=s.retrain_timezone)] if scheduled else None
        out.append(f.to_deployment(name=f.name, schedules=schedules, tags=["cet"],
                                   concurrency_limit=None if f.name in OVERLAPPING else ConcurrencyLimitConfig(
                                       **ONE_AT_A_TIME),
                                   entrypoint_type=EntrypointType.MODULE_PATH,
                                   description=(f.description or "").split("\n\n")[0]))
    return out


def wait_for_api(url: str, poll_seconds: float) -> None:
    """Block until ``GET <url>/health`` answers 2xx."""
    while True:
        try:
            if httpx.get(f"{url.rstrip('/')}/health", timeout=5).is_success:
                return
        except httpx.TransportError:
            pass
        time.sleep(poll_seconds)


def main(argv=None) -> int:
    ap = commands.serve()
    args = ap.parse_args(argv)
    apply_log_level(args)
    log.setLevel(logging.INFO)  # Prefect has configured logging already (basicConfig would do nothing)
    auth = PREFECT_API_AUTH_STRING.value()  # a SecretStr, or the text itself in some Prefect versions
    auth = auth.get_secret_value() if hasattr(auth, "get_secret_value") else auth
    try:
        log.info("%s", check_api_locked(PREFECT_API_URL.value(), auth, args.single_user))
    except ValueError as exc:
        ap.error(str(exc))
    outages = 0
    while True:
        try:
            serve(*deployments(), pause_on_shutdown=False, limit=args.limit)
            return 0
        except Exception as exc:
            if not api_outage(exc) or (args.max_outages and outages >= args.max_outages):
                raise
            outages += 1
            url = PREFECT_API_URL.value() or "(PREFECT_API_URL unset)"
            log.warning("The Prefect API at %s is unreachable (outage %d: %s); serving again once it "
                        "answers. Deployments and schedules are kept by the server.", url, outages,
                        type(exc).__name__)
            wait_for_api(url, args.retry_seconds)
            log.info("The Prefect API at %s answers again; serving the deployments again.", url)


if __name__ == "__main__":
    sys.exit(main())
