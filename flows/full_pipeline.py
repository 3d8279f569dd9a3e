"""Prefect flow ``full-pipeline``: every dataset built, every model trained, one report.

    python -m flows.full_pipeline [--datasets synthetic,mimic,reddit] [--max-epochs N] ...

With no options and no configuration it runs on the embedded defaults: the paper's
synthetic data, a generated MIMIC-III stand-in (scale CET_MIMIC_STANDIN_SCALE) and
generated Pushshift stand-in dumps (CET_REDDIT_STANDIN_USERS users), or the real sources
when CET_MIMIC_DIR / CET_REDDIT_DUMPS are set. It writes the datasets under
CET_DATA_DIR, the model versions under CET_MODELS_DIR and ``report.md`` with PNG figures
under CET_REPORTS_DIR. Stages whose inputs, parameters and code are unchanged are
skipped, so a second run takes seconds.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early

    parse_early("full_pipeline")

import sys
import time

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.logging import get_run_logger

from flows.lib import commands
from flows.lib.flow_params import FullPipelineParams, TrainEvaluateParams
from flows.lib.infra.cli import apply_log_level, flow_command
from flows.lib.infra.run_names import run_name
from flows.lib.infra.runners import thread_runner, with_runner
from flows.lib.infra.settings import Settings
from flows.lib.modeling import report as report_lib
from flows.train import build_flow, train_evaluate


@task(name="write-report", task_run_name="write-report")
def write_report(entries: list[dict], reports_dir: str) -> str:
    path = report_lib.write_report(entries, reports_dir)
    # the figures travel inside the artifact (data URIs): the UI cannot follow links to local files
    create_markdown_artifact(report_lib.inline_figures(path.read_text(), path.parent), key="cet-pipeline-report",
                             description=f"the pipeline report (also {path}, figures beside it)")
    get_run_logger().info("report written to %s", path)
    return str(path)


@task(name="build-dataset", task_run_name="build-{name}")
def build_dataset(name: str) -> str:
    """Dataset ``name``'s build flow (skipped when unchanged); a folder built before is rebuilt as
    it was built."""
    s = Settings()
    build, recorded = build_flow(name)
    build = with_runner(build, s.task_runner, s.dask_workers)
    return build(recorded) if recorded is not None else build()


@flow(name="full-pipeline", flow_run_name=run_name("pipeline"), task_runner=thread_runner())
def full_pipeline(params: FullPipelineParams = FullPipelineParams()) -> str:
    """Build each dataset (skipped when unchanged), train-evaluate it, then write the report. The
    next dataset builds while one trains (unless ``sequential``): a version's fits leave CPU time
    over (the longest fit runs alone at the end), and a build is mostly reading, SQL and embedding."""
    s = Settings()
    entries = []
    names = list(params.datasets)
    report_lib.claim_report(s.reports_dir, names, record=False)  # a user's file there: refused before any work
    building = None  # the next dataset's build, under way while this one trains
    for i, name in enumerate(names):
        path = (building or build_dataset.submit(name)).result()
        building = build_dataset.submit(names[i + 1]) if i + 1 < len(names) and not params.sequential else None
        entries.append(train_evaluate(TrainEvaluateParams(dataset=name, data=path, max_epochs=params.max_epochs,
                                                          hidden=params.hidden, seed=params.seed)))
    return write_report(entries, str(s.reports_dir))


def main(argv=None) -> int:
    ap = commands.full_pipeline()
    args = ap.parse_args(argv)
    apply_log_level(args)
    t0 = time.perf_counter()
    try:
        params = commands.params(args, FullPipelineParams)
        report_lib.claim_report(Settings().reports_dir, params.datasets, record=False)
    except ValueError as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))
    except FileExistsError as exc:
        raise SystemExit(f"full-pipeline: {exc}") from None
    with flow_command(ap):
        path = full_pipeline(params)
    print(f"report: {path} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
