"""Prefect flow ``build-synthetic``: the paper's synthetic data (moons + circles) as a dataset folder.

    python -m flows.synthetic [--out DIR] [--mode reference|independent] [--n 40000] [--seed 0]
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early

    parse_early("synthetic")

import sys

from prefect import flow, task
from prefect.logging import get_run_logger

from flows.common import check_cache, record_stage
from flows.lib import commands
from flows.lib.flow_params import SyntheticParams, recipe
from flows.lib.infra.cli import apply_log_level, run_build
from flows.lib.infra.folders import check_output_folder
from flows.lib.infra.locks import output_lock
from flows.lib.infra.run_names import run_name
from flows.lib.infra.runners import thread_runner
from flows.lib.infra.served import confine
from flows.lib.infra.settings import Settings
from flows.lib.standin import synthetic

CODE = ["flows.lib.standin.synthetic", "cet_model.censoring", "cet_model.dataset"]


@task(name="generate-synthetic", task_run_name="generate-synthetic-{mode}")
def generate(out: str, mode: str, n: int, seed: int) -> str:
    sizes = (n * 6 // 10, n * 2 // 10, n - n * 6 // 10 - n * 2 // 10)
    path = synthetic.write(out, mode=mode, n=n, seed=seed, split_sizes=sizes)
    get_run_logger().info("synthetic (%s, n=%d, seed %d) written to %s", mode, n, seed, path)
    return str(path)


@flow(name="build-synthetic", flow_run_name=run_name("synthetic"), task_runner=thread_runner())
def build_synthetic(params: SyntheticParams = SyntheticParams()) -> str:
    """The paper's synthetic dataset (Section 5.1): 60/20/20 split, uniform censoring on (0, 3)."""
    s = Settings()
    confine(params, s)
    out = params.out or str(s.dataset_dir("synthetic"))
    mode, n, seed = params.mode or s.synthetic_mode, params.n or s.synthetic_n, params.seed
    check_output_folder(out, {})
    with output_lock(out, s.lock_wait, "build-synthetic"):
        key, current = check_cache("build-synthetic", out, {}, {"mode": mode, "n": n, "seed": seed}, CODE)
        if current:
            return out
        path = generate(out, mode, n, seed)
        return record_stage("build-synthetic", path, key, recipe(params), {"kind": "standin"})


def main(argv=None) -> int:
    ap = commands.synthetic()
    args = ap.parse_args(argv)
    apply_log_level(args)
    try:
        params = commands.params(args, SyntheticParams)
        check_output_folder(params.out or str(Settings().dataset_dir("synthetic")), {})
    except ValueError as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))
    return run_build(ap, build_synthetic, params, params.out or str(Settings().dataset_dir("synthetic")))


if __name__ == "__main__":
    sys.exit(main())
