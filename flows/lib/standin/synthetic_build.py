"""The synthetic build's steps in their order (``build``): run by the flow's tasks
(``flows.synthetic``) or, for a command with no Prefect server configured, by plain functions in
this process (``build_here``). Skipped when the output holds a build of the same mode, size, seed
and code."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

from flows.lib.flow_params import SyntheticParams, recipe
from flows.lib.infra import stage_cache
from flows.lib.infra.folders import check_output_folder
from flows.lib.infra.locks import output_lock
from flows.lib.infra.settings import Settings
from flows.lib.standin import synthetic

STAGE = "build-synthetic"
CODE = ["flows.lib.standin.synthetic", "flows.lib.standin.synthetic_build", "cet_model.censoring",
        "cet_model.dataset"]  # their change rebuilds it
log = logging.getLogger("flows.synthetic")


def build(params: SyntheticParams, s: Settings, check: Callable, generate_step: Callable, record: Callable) -> str:
    """The paper's synthetic dataset (Section 5.1) in its folder, under the folder's lock; returns
    the folder. The steps: ``check`` (``stage_cache.check_stage``'s arguments less the logger),
    ``generate_step`` (``generate``'s less the logger) and ``record`` (``stage_cache.record_stage``'s)."""
    out = params.out or str(s.dataset_dir("synthetic"))
    mode, n, seed = params.mode or s.synthetic_mode, params.n or s.synthetic_n, params.seed
    check_output_folder(out, {})
    with output_lock(out, s.lock_wait, STAGE):
        key, current = check(STAGE, out, {}, {"mode": mode, "n": n, "seed": seed}, CODE)
        if current:
            return out
        path = generate_step(out, mode, n, seed)
        return record(STAGE, path, key, recipe(params), {"kind": "standin"})


def generate(out: str, mode: str, n: int, seed: int, logger=log) -> str:
    """``n`` rows of ``mode`` with the paper's 60/20/20 split, written to ``out``."""
    sizes = (n * 6 // 10, n * 2 // 10, n - n * 6 // 10 - n * 2 // 10)
    path = synthetic.write(out, mode=mode, n=n, seed=seed, split_sizes=sizes)
    logger.info("synthetic (%s, n=%d, seed %d) written to %s", mode, n, seed, path)
    return str(path)


def build_here(params: SyntheticParams) -> str:
    """The build as the flow runs it, in this process and without Prefect (no server is configured
    to record a flow run)."""
    def check(stage, out, inputs, options, code):
        return stage_cache.check_stage(stage, out, inputs, options, code, log)

    return build(params, Settings(), check, generate, stage_cache.record_stage)


def command_params(ap: argparse.ArgumentParser, args: argparse.Namespace) -> SyntheticParams:
    """``flows.synthetic``'s parameters from its parsed options, the output folder checked: a bad
    value or a folder CET did not write is a usage error."""
    from flows.lib import commands

    try:
        params = commands.params(args, SyntheticParams)
        check_output_folder(params.out or str(Settings().dataset_dir("synthetic")), {})
    except ValueError as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))
    return params
