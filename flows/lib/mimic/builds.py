"""The MIMIC build's steps in their order (``build``): run by the flow's tasks (``flows.mimic``) or,
for a command with no Prefect server configured, by plain functions in this process
(``build_here``), which stage the tables in threads as the flow's task runner does.

The source is ``mimic_dir`` (default: the CET_MIMIC_DIR setting), or the open demo fetched from
``download_demo_url``, or else a generated stand-in of ``standin_scale`` (default
CET_MIMIC_STANDIN_SCALE) times the full release, whose generator the entry point gives as a step
(real builds never import stand-in code). Skipped when the output already holds a build of the
same inputs, parameters and code.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from flows.lib.flow_params import MimicBuildParams, recipe
from flows.lib.infra import stage_cache
from flows.lib.infra.download import with_retries
from flows.lib.infra.folders import check_output_folder, work_dir_for
from flows.lib.infra.locks import output_lock
from flows.lib.infra.runners import in_threads
from flows.lib.infra.settings import Settings
from flows.lib.mimic import build as mimic_build
from flows.lib.mimic import download as mimic_download
from flows.lib.mimic import staging as mimic_staging
from flows.lib.mimic.schema import TABLES

STAGE = "build-mimic-features"
CODE = ["flows.lib.mimic", "flows.lib.infra.sql_runner", "sql/mimic", "cet_model.censoring", "cet_model.dataset"]
STANDIN_CODE = ["flows.lib.standin.mimic", "flows.lib.standin.mimic_cohort", "flows.lib.standin.mimic_items",
                "flows.lib.standin.mimic_rows", "flows.lib.standin.gz_csv"]  # their change rebuilds a stand-in build
log = logging.getLogger("flows.mimic")


@dataclass(frozen=True)
class Steps:
    """The build's steps: the flow's tasks, or ``here_steps``' plain functions."""

    check: Callable  # (stage, out, inputs, params, code) -> (key, current): stage_cache.check_stage
    download: Callable  # (url, dest) -> the demo's folder
    generate: Callable  # (dest, scale, seed) -> the stand-in's folder
    stage: Callable  # (mimic_dir, tables, work) -> each table's staged parquet, in the tables' order
    build: Callable  # (staged parquets, out, work, params) -> the dataset folder
    record: Callable  # (stage, out, key, recipe, source) -> out: stage_cache.record_stage


def build(params: MimicBuildParams, s: Settings, steps: Steps) -> str:
    """MIMIC-III v1.4 tables -> typed parquet -> SQL -> a dataset folder in the contract; returns it."""
    out = params.out or str(s.dataset_dir("mimic"))
    work = work_dir_for(out, params.work_dir)
    mimic_dir, download_demo_url, standin_seed = params.mimic_dir, params.download_demo_url, params.standin_seed
    if not mimic_dir and not download_demo_url and s.mimic_dir:
        mimic_dir = str(s.mimic_dir)
    standin_scale = params.standin_scale if params.standin_scale is not None else s.mimic_standin_scale
    check_output_folder(out, {"--mimic-dir": mimic_dir}, params.work_dir)
    build_params = params.build_params()
    source = ({"mimic_dir": "given"} if mimic_dir else {"demo_url": download_demo_url} if download_demo_url
              else {"standin_scale": standin_scale, "standin_seed": standin_seed})
    with output_lock(out, s.lock_wait, STAGE):
        key, current = steps.check(STAGE, out, {"mimic": mimic_dir} if mimic_dir else {},
                                   asdict(build_params) | source,
                                   CODE + ([] if mimic_dir or download_demo_url else STANDIN_CODE))
        if current:
            return out
        built_from = ({"kind": "standin" if stage_cache.generated_standin(mimic_dir) else "tables",
                       "from": str(Path(mimic_dir).resolve())} if mimic_dir
                      else {"kind": "demo", "from": download_demo_url} if download_demo_url else {"kind": "standin"})
        if not mimic_dir and not download_demo_url:
            stage_cache.refuse_standin_over_real(STAGE, out, work, "MIMIC-III tables",
                                                 "no --mimic-dir or mimic_dir, CET_MIMIC_DIR unset")
        if download_demo_url:
            mimic_dir = steps.download(download_demo_url, str(Path(work) / "download"))
        if not mimic_dir:
            mimic_dir = steps.generate(str(Path(work) / f"standin-{standin_scale:g}-seed{standin_seed}"),
                                       standin_scale, standin_seed)
        staged = steps.stage(mimic_dir, list(TABLES), work)
        path = steps.build(staged, out, work, build_params)
        return steps.record(STAGE, path, key, recipe(params, ("mimic_dir", "work_dir")), built_from)


def download_demo(url: str, dest: str) -> str:
    """The open demo fetched and verified into ``dest``."""
    mimic_download.fetch_verified_folder(url, Path(dest), progress=False)
    return dest


def stage_table(mimic_dir: str, table: str, work_dir: str, logger=log) -> str:
    """One table staged to ``work_dir/staged`` (reused when its source is unchanged)."""
    staged = mimic_staging.stage_table(Path(mimic_dir), table, Path(work_dir) / "staged")
    logger.info("%s: %d rows (%s)", table, staged.rows, "converted" if staged.converted else "reused")
    return str(staged.parquet)


def build_dataset(staged_parquets: list[str], out: str, work_dir: str, params: mimic_build.MimicParams,
                  logger=log) -> str:
    """The dataset folder from the staged tables."""
    staged = {s.table: s for s in map(mimic_staging.read_staged, map(Path, staged_parquets))}
    path = mimic_build.build_staged(staged, Path(out), Path(work_dir), params)
    logger.info("dataset written to %s", path)
    return str(path)


def here_steps(generate: Callable) -> Steps:
    """The steps as plain functions in this process, logging to ``flows.mimic``; ``generate`` the
    stand-in's (dest, scale, seed) -> folder."""
    return Steps(check=lambda stage, out, inputs, params, code: stage_cache.check_stage(stage, out, inputs, params,
                                                                                          code, log),
                 download=lambda url, dest: with_retries(download_demo, url, dest, logger=log),
                 generate=generate,
                 stage=lambda mimic_dir, tables, work: in_threads(stage_table, mimic_dir, tables, work, name="stage"),
                 build=build_dataset, record=stage_cache.record_stage)


def build_here(params: MimicBuildParams, generate: Callable) -> str:
    """The build as the flow runs it, in this process and without Prefect (no server is configured
    to record a flow run)."""
    return build(params, Settings(), here_steps(generate))


def command_params(ap: argparse.ArgumentParser, args: argparse.Namespace) -> MimicBuildParams:
    """``flows.mimic build``'s parameters from its parsed options, checked before anything runs: the
    tables given, the output folder, and a stand-in that would replace a build from real data are
    usage errors naming what is wrong."""
    from flows.lib import commands
    from flows.lib.infra.cli import require_path

    require_path(ap, "--mimic-dir", args.mimic_dir, "dir")
    if args.mimic_dir:  # the tables checked before any flow starts: a usage error naming what is wrong
        try:
            mimic_staging.check_tables(Path(args.mimic_dir), list(TABLES))
        except (FileNotFoundError, ValueError) as exc:
            ap.error(f"--mimic-dir {exc}")
    try:
        params = commands.params(args, MimicBuildParams)
        out = params.out or str(Settings().dataset_dir("mimic"))
        check_output_folder(out, {"--mimic-dir": params.mimic_dir or Settings().mimic_dir}, params.work_dir)
        if not params.mimic_dir and not params.download_demo_url and not Settings().mimic_dir:
            stage_cache.refuse_standin_over_real(STAGE, out, work_dir_for(out, params.work_dir),
                                                 "MIMIC-III tables", "no --mimic-dir, CET_MIMIC_DIR unset")
    except ValueError as exc:  # pydantic's ValidationError names the field; the guard names the folder
        ap.error(str(exc))
    return params
