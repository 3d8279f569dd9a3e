"""Prefect flow ``build-mimic-features`` and its CLI.

    python -m flows.mimic build --out DIR                  # on a small generated stand-in (the default)
    python -m flows.mimic build --mimic-dir DIR --out DIR [--work-dir DIR]
    python -m flows.mimic build --download-demo [URL] --out DIR
    python -m flows.mimic generate --scale 0.1 --out DIR   # a stand-in in the full release's layout

Tasks only wire the plain functions in ``flows/lib``; each table is staged by its own mapped
task (retries are for I/O only: the download). Paths, not objects, pass between tasks.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early

    parse_early("mimic")

import sys
from dataclasses import asdict
from pathlib import Path

from prefect import flow, task
from prefect.logging import get_run_logger

from flows.common import check_cache, record_stage, refuse_standin_over_real
from flows.lib import commands
from flows.lib.flow_params import MimicBuildParams, recipe
from flows.lib.infra import stage_cache
from flows.lib.infra.cli import apply_log_level, require_path, run_build
from flows.lib.infra.folders import check_output_folder, work_dir_for
from flows.lib.infra.locks import output_lock
from flows.lib.infra.run_names import run_name
from flows.lib.infra.runners import thread_runner
from flows.lib.infra.served import confine
from flows.lib.infra.settings import Settings
from flows.lib.mimic import build as mimic_build
from flows.lib.mimic import download as mimic_download
from flows.lib.mimic import staging as mimic_staging
from flows.lib.mimic.schema import TABLES
from flows.lib.standin import mimic as mimic_standin

DEFAULT_STANDIN_SCALE = Settings.model_fields["mimic_standin_scale"].default


@task(name="download-mimic-demo", task_run_name="download-mimic-demo", retries=2, retry_delay_seconds=[5, 30])
def download_demo(url: str, dest: str) -> str:
    mimic_download.fetch_verified_folder(url, Path(dest), progress=False)
    return dest


@task(name="generate-mimic-standin", task_run_name="generate-mimic-standin-{scale}")
def generate_standin(dest: str, scale: float, seed: int) -> str:
    path = mimic_standin.ensure(Path(dest), scale=scale, seed=seed, progress=False)
    get_run_logger().info("MIMIC stand-in (scale %s, seed %s) at %s", scale, seed, path)
    return str(path)


@task(name="stage-mimic-table", task_run_name="stage-{table}")
def stage(mimic_dir: str, table: str, work_dir: str) -> str:
    staged = mimic_staging.stage_table(Path(mimic_dir), table, Path(work_dir) / "staged")
    get_run_logger().info("%s: %d rows (%s)", table, staged.rows, "converted" if staged.converted else "reused")
    return str(staged.parquet)


@task(name="build-mimic-dataset", task_run_name="build-mimic-dataset")
def build_dataset(staged_parquets: list[str], out: str, work_dir: str, params: mimic_build.MimicParams) -> str:
    staged = {s.table: s for s in map(mimic_staging.read_staged, map(Path, staged_parquets))}
    path = mimic_build.build_staged(staged, Path(out), Path(work_dir), params)
    get_run_logger().info("dataset written to %s", path)
    return str(path)


CODE = ["flows.lib.mimic", "flows.lib.infra.sql_runner",
        "sql/mimic", "cet_model.censoring", "cet_model.dataset"]
STANDIN_CODE = ["flows.lib.standin.mimic", "flows.lib.standin.mimic_cohort", "flows.lib.standin.mimic_items",
                "flows.lib.standin.mimic_rows", "flows.lib.standin.gz_csv"]


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
    with output_lock(out, s.lock_wait, "build-mimic-features"):
        key, current = check_cache(
            "build-mimic-features",
            out,
            {"mimic": mimic_dir} if mimic_dir else {},
            asdict(build_params) | source,
            CODE + ([] if mimic_dir or download_demo_url else STANDIN_CODE),
        )
        if current:
            return out
        built_from = ({"kind": "standin" if stage_cache.generated_standin(mimic_dir) else "tables",
                       "from": str(Path(mimic_dir).resolve())} if mimic_dir
                      else {"kind": "demo", "from": download_demo_url} if download_demo_url else {"kind": "standin"})
        if not mimic_dir and not download_demo_url:
            refuse_standin_over_real("build-mimic-features", out, work, "MIMIC-III tables",
                                     "no --mimic-dir or mimic_dir, CET_MIMIC_DIR unset")
        if download_demo_url:
            mimic_dir = download_demo(download_demo_url, str(Path(work) / "download"))
        if not mimic_dir:
            mimic_dir = generate_standin(str(Path(work) / f"standin-{standin_scale:g}-seed{standin_seed}"),
                                         standin_scale, standin_seed)
        staged = stage.map(mimic_dir, list(TABLES), work)
        staged.wait()  # a table that failed raises its own error here, not a None at the stamp
        path = build_dataset([f.result() for f in staged], out, work, build_params)
        return record_stage("build-mimic-features", path, key, recipe(params, ("mimic_dir", "work_dir")),
                            built_from)


def main(argv=None) -> int:
    ap = commands.mimic()
    args = ap.parse_args(argv)
    apply_log_level(args)
    if args.command == "generate":
        try:
            path = mimic_standin.generate(args.out, scale=args.scale, seed=args.seed,
                                          compresslevel=args.compresslevel, overwrite=args.force)
        except (ValueError, FileExistsError) as exc:
            ap.error(str(exc))
        print(path)
        return 0
    require_path(ap, "--mimic-dir", args.mimic_dir, "dir")
    if args.mimic_dir:  # the tables checked before any flow starts: a usage error naming what is wrong
        try:
            mimic_staging.check_tables(Path(args.mimic_dir), list(TABLES))
        except (FileNotFoundError, ValueError) as exc:
            ap.error(f"--mimic-dir {exc}")
    try:
        params = commands.params(args, MimicBuildParams)
        check_output_folder(params.out or str(Settings().dataset_dir("mimic")),
                            {"--mimic-dir": params.mimic_dir or Settings().mimic_dir}, params.work_dir)
        if not params.mimic_dir and not params.download_demo_url and not Settings().mimic_dir:
            out = params.out or str(Settings().dataset_dir("mimic"))
            refuse_standin_over_real("build-mimic-features", out, work_dir_for(out, params.work_dir),
                                     "MIMIC-III tables", "no --mimic-dir, CET_MIMIC_DIR unset")
    except ValueError as exc:  # pydantic's ValidationError names the field; the guard names the folder
        ap.error(str(exc))
    return run_build(ap, build_mimic_features, params, params.out or str(Settings().dataset_dir("mimic")))


if __name__ == "__main__":
    sys.exit(main())
