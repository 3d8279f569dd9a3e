"""Prefect flow ``build-reddit-features`` and its CLI.

    python -m flows.reddit build --out DIR                        # on a generated stand-in (default)
    python -m flows.reddit build --dumps URL_OR_DIR --out DIR     # real or mirrored Pushshift dumps
    python -m flows.reddit generate --users 1000 --out DIR        # stand-in dumps in the real format

Tasks only wire the plain functions in ``flows/lib`` (the steps in their order:
``flows.lib.reddit.builds``): downloads, the submission scan and the comment scan are each mapped
over months; then embeddings and the dataset. Paths, not objects, pass between tasks. With no
Prefect server configured (``PREFECT_API_URL`` unset) ``build`` runs in the command's own process
without loading Prefect, its months scanned in threads (a temporary server would keep no record of
the run); ``generate`` always.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early
    from flows.lib.infra.cli import run_here, without_server

    _ap, _args = parse_early("reddit")
    if _args.command == "generate" or without_server():  # nothing to record: this process, Prefect not loaded
        from flows.lib.reddit import builds
        from flows.lib.standin import reddit as reddit_standin

        run_here(_ap, _args, (lambda: reddit_standin.generate_command(_ap, _args)) if _args.command == "generate"
                 else lambda: builds.build_here(builds.command_params(_ap, _args), reddit_standin.ensure_for_build))

import sys

from prefect import flow, task
from prefect.logging import get_run_logger

from flows.common import check_cache, mapped, record_stage
from flows.lib import commands
from flows.lib.flow_params import RedditBuildParams
from flows.lib.infra.cli import apply_log_level, run_build, without_server
from flows.lib.infra.download import RETRY_DELAYS, worth_retrying
from flows.lib.infra.run_names import file_task_name, run_name
from flows.lib.infra.runners import thread_runner
from flows.lib.infra.served import confine
from flows.lib.infra.settings import Settings
from flows.lib.reddit import build as reddit_build
from flows.lib.reddit import builds
from flows.lib.standin import reddit as reddit_standin


@task(name="generate-reddit-standin", task_run_name="generate-reddit-standin-{n_users}")
def generate_standin(dest: str, n_users: int, seed: int, start: str | None, comment_end: str, submission_end: str,
                     text: str = "phrases") -> str:
    return reddit_standin.ensure_for_build(dest, n_users, seed, start, comment_end, submission_end, text)


@task(name="download-reddit-dump", task_run_name="download-{name}", retries=len(RETRY_DELAYS),
      retry_delay_seconds=list(RETRY_DELAYS), retry_condition_fn=worth_retrying)
def download_dump(base_url: str, name: str, dest: str, sha256: str | None) -> str:
    return builds.download_dump(base_url, name, dest, sha256)


@task(name="scan-submissions", task_run_name=file_task_name("scan"))
def scan_rs(path: str, out: str, work: str, end_utc: int, max_error_rate: float) -> dict:
    return builds.scan_submissions(path, out, work, end_utc, max_error_rate, get_run_logger())


@task(name="combine-submissions", task_run_name="combine-submissions")
def combine_rs(parts: list[str], out: str) -> str:
    return builds.combine(parts, out)


@task(name="scan-comments", task_run_name=file_task_name("scan"))
def scan_rc(path: str, out: str, work: str, first_path: str, end_utc: int, max_error_rate: float) -> dict:
    return builds.scan_comments(path, out, work, first_path, end_utc, max_error_rate, get_run_logger())


@task(name="embed-and-build-reddit-dataset", task_run_name="embed-and-build-reddit-dataset")
def finish(files: list[str], first_path: str, parts: list[str], out: str, work: str,
           params: reddit_build.RedditParams, scan_stats: list[dict]) -> str:
    return builds.finish(files, first_path, parts, out, work, params, scan_stats, get_run_logger())


@task(name="reddit-stage-key", task_run_name="reddit-stage-key")
def source_key(work: str) -> str:
    """Which key pseudonymises (its digest, never the key): another key means other user ids."""
    return builds.key_id(work)


STEPS = builds.Steps(key_id=source_key, check=check_cache, generate=generate_standin, download=mapped(download_dump),
                     scan_submissions=mapped(scan_rs), combine=combine_rs, scan_comments=mapped(scan_rc),
                     finish=finish, record=record_stage)


@flow(name="build-reddit-features", flow_run_name=run_name("reddit"), task_runner=thread_runner())
def build_reddit_features(params: RedditBuildParams = RedditBuildParams()) -> str:
    """Pushshift dumps (folders searched recursively, or a base URL; default: CET_REDDIT_DUMPS,
    else a generated stand-in) -> the Reddit dataset. Skipped when the output holds a build of the same
    inputs, parameters, key and code.

    Usernames are pseudonymised with the key in CET_PSEUDONYM_KEY, or one generated once in
    the work folder (never a flow parameter, so it is never stored by Prefect).
    """
    s = Settings()
    confine(params, s)
    return builds.build(params, s, STEPS)


def main(argv=None) -> int:
    ap = commands.reddit()
    args = ap.parse_args(argv)
    apply_log_level(args)
    if args.command == "generate":
        print(reddit_standin.generate_command(ap, args))
        return 0
    params = builds.command_params(ap, args)
    return run_build(ap, build_reddit_features, params, params.out or str(Settings().dataset_dir("reddit")),
                     here=lambda: builds.build_here(params, reddit_standin.ensure_for_build))


if __name__ == "__main__":
    sys.exit(main())
