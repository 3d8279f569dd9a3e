"""Prefect flow ``build-synthetic``: the paper's synthetic data (moons + circles) as a dataset folder.

    python -m flows.synthetic [--out DIR] [--mode reference|independent] [--n 40000] [--seed 0]

With no Prefect server configured (``PREFECT_API_URL`` unset) the command builds in its own
process, without loading Prefect (``flows.lib.standin.synthetic_build`` holds the build's steps for
both); with a server, as a flow run.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early
    from flows.lib.infra.cli import run_here, without_server

    _ap, _args = parse_early("synthetic")
    if without_server():  # no Prefect server configured: built in this process, Prefect not loaded at all
        from flows.lib.standin import synthetic_build

        run_here(_ap, _args, lambda: synthetic_build.build_here(synthetic_build.command_params(_ap, _args)))

import sys

from prefect import flow, task
from prefect.logging import get_run_logger

from flows.common import check_cache, record_stage
from flows.lib import commands
from flows.lib.flow_params import SyntheticParams
from flows.lib.infra.cli import apply_log_level, run_build, without_server
from flows.lib.infra.run_names import run_name
from flows.lib.infra.runners import thread_runner
from flows.lib.infra.served import confine
from flows.lib.infra.settings import Settings
from flows.lib.standin import synthetic_build


@task(name="generate-synthetic", task_run_name="generate-synthetic-{mode}")
def generate(out: str, mode: str, n: int, seed: int) -> str:
    return synthetic_build.generate(out, mode, n, seed, get_run_logger())


@flow(name="build-synthetic", flow_run_name=run_name("synthetic"), task_runner=thread_runner())
def build_synthetic(params: SyntheticParams = SyntheticParams()) -> str:
    """The paper's synthetic dataset (Section 5.1): 60/20/20 split, uniform censoring on (0, 3)."""
    s = Settings()
    confine(params, s)
    return synthetic_build.build(params, s, check_cache, generate, record_stage)


def main(argv=None) -> int:
    ap = commands.synthetic()
    args = ap.parse_args(argv)
    apply_log_level(args)
    params = synthetic_build.command_params(ap, args)
    return run_build(ap, build_synthetic, params, params.out or str(Settings().dataset_dir("synthetic")),
                     here=lambda: synthetic_build.build_here(params))


if __name__ == "__main__":
    sys.exit(main())
