"""Serve every flow as a Prefect deployment named ``<flow>/<flow>``.

    prefect server start --host 127.0.0.1 --port 4200 --analytics-off &      # once
    export PREFECT_API_URL=http://127.0.0.1:4200/api
    python -m flows.serve                                                     # from the repo root
    prefect deployment run build-mimic-features/build-mimic-features --watch

``retrain`` runs on the CET_RETRAIN_CRON schedule (timezone CET_RETRAIN_TIMEZONE). Schedules
stay active when this process stops (``pause_on_shutdown=False``), so a restarted or
supervised serve process picks them up again. Runs execute in subprocesses that load
the flows by module path, so this works from any folder where ``cet`` is installed;
the flows read their settings (``.env``) from the folder the serve process started in.
"""

from __future__ import annotations

import argparse
import sys

from prefect import serve
from prefect.deployments.runner import EntrypointType
from prefect.schedules import Cron

from flows.full_pipeline import full_pipeline
from flows.mimic import build_mimic_features
from flows.predict import predict
from flows.reddit import build_reddit_features
from flows.settings import Settings
from flows.synthetic import build_synthetic
from flows.train import retrain, train_evaluate

FLOWS = (build_synthetic, build_mimic_features, build_reddit_features, train_evaluate, retrain, predict,
         full_pipeline)


def deployments(settings: Settings | None = None) -> list:
    s = settings or Settings()
    out = []
    for f in FLOWS:
        schedules = [Cron(s.retrain_cron, timezone=s.retrain_timezone)] if f.name == "retrain" else None
        out.append(f.to_deployment(name=f.name, schedules=schedules, tags=["cet"],
                                   entrypoint_type=EntrypointType.MODULE_PATH,
                                   description=(f.description or "").split("\n\n")[0]))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m flows.serve", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=2, help="flow runs at once (default %(default)s; 2 cores)")
    args = ap.parse_args(argv)
    serve(*deployments(), pause_on_shutdown=False, limit=args.limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
