"""Prefect flow ``build-mimic-features`` and its CLI.

    python -m flows.mimic build --out DIR                  # on a small generated stand-in (the default)
    python -m flows.mimic build --mimic-dir DIR --out DIR [--work-dir DIR]
    python -m flows.mimic build --download-demo [URL] --out DIR
    python -m flows.mimic generate --scale 0.1 --out DIR   # a stand-in in the full release's layout

Tasks only wire the plain functions in ``flows/lib`` (the steps in their order:
``flows.lib.mimic.builds``); each table is staged by its own mapped task (retries are for I/O
only: the download). Paths, not objects, pass between tasks. With no Prefect server configured
(``PREFECT_API_URL`` unset) ``build`` runs in the command's own process without loading Prefect, its
tables staged in threads (a temporary server would keep no record of the run); ``generate`` always.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early
    from flows.lib.infra.cli import run_here, without_server

    _ap, _args = parse_early("mimic")
    if _args.command == "generate" or without_server():  # nothing to record: this process, Prefect not loaded
        from flows.lib.mimic import builds
        from flows.lib.standin import mimic as mimic_standin

        run_here(_ap, _args, (lambda: mimic_standin.generate_command(_ap, _args)) if _args.command == "generate"
                 else lambda: builds.build_here(builds.command_params(_ap, _args), mimic_standin.ensure_logged))

import sys

from prefect import flow, task
from prefect.logging import get_run_logger

from flows.common import check_cache, mapped, record_stage
from flows.lib import commands
from flows.lib.flow_params import MimicBuildParams
from flows.lib.infra.cli import apply_log_level, run_build, without_server
from flows.lib.infra.download import RETRY_DELAYS, worth_retrying
from flows.lib.infra.run_names import run_name
from flows.lib.infra.runners import thread_runner
from flows.lib.infra.served import confine
from flows.lib.infra.settings import Settings
from flows.lib.mimic import build as mimic_build
from flows.lib.mimic import builds
from flows.lib.standin import mimic as mimic_standin


@task(name="download-mimic-demo", task_run_name="download-mimic-demo", retries=len(RETRY_DELAYS),
      retry_delay_seconds=list(RETRY_DELAYS), retry_condition_fn=worth_retrying)
def download_demo(url: str, dest: str) -> str:
    return builds.download_demo(url, dest)


@task(name="generate-mimic-standin", task_run_name="generate-mimic-standin-{scale}")
def generate_standin(dest: str, scale: float, seed: int) -> str:
    return mimic_standin.ensure_logged(dest, scale, seed, get_run_logger())


@task(name="stage-mimic-table", task_run_name="stage-{table}")
def stage(mimic_dir: str, table: str, work_dir: str) -> str:
    return builds.stage_table(mimic_dir, table, work_dir, get_run_logger())


@task(name="build-mimic-dataset", task_run_name="build-mimic-dataset")
def build_dataset(staged_parquets: list[str], out: str, work_dir: str, params: mimic_build.MimicParams) -> str:
    return builds.build_dataset(staged_parquets, out, work_dir, params, get_run_logger())


STEPS = builds.Steps(check=check_cache, download=download_demo, generate=generate_standin, stage=mapped(stage),
                     build=build_dataset, record=record_stage)


@flow(name="build-mimic-features", flow_run_name=run_name("mimic"), task_runner=thread_runner())
def build_mimic_features(params: MimicBuildParams = MimicBuildParams()) -> str:
    """MIMIC-III v1.4 tables -> typed parquet -> SQL -> a dataset folder in the contract.

    The source is ``mimic_dir`` (default: the CET_MIMIC_DIR setting), or the open demo
    fetched from ``download_demo_url``, or else a generated stand-in of ``standin_scale``
    (default CET_MIMIC_STANDIN_SCALE) times the full release. Skipped when the output
    already holds a build of the same inputs, parameters and code.
    """
    s = Settings()
    confine(params, s)
    return builds.build(params, s, STEPS)


def main(argv=None) -> int:
    ap = commands.mimic()
    args = ap.parse_args(argv)
    apply_log_level(args)
    if args.command == "generate":
        print(mimic_standin.generate_command(ap, args))
        return 0
    params = builds.command_params(ap, args)
    return run_build(ap, build_mimic_features, params, params.out or str(Settings().dataset_dir("mimic")),
                     here=lambda: builds.build_here(params, mimic_standin.ensure_logged))


if __name__ == "__main__":
    sys.exit(main())
