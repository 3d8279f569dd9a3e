"""Prefect flow ``build-reddit-features`` and its CLI.

    python -m flows.reddit build --out DIR                        # on a generated stand-in (default)
    python -m flows.reddit build --dumps URL_OR_DIR --out DIR     # real or mirrored Pushshift dumps
    python -m flows.reddit generate --users 1000 --out DIR        # stand-in dumps in the real format

Tasks wire the plain functions in ``flows/lib``: downloads, the submission scan and the
comment scan are each mapped over months; then embeddings and the dataset. Paths, not
objects, pass between tasks.
"""

from __future__ import annotations

if __name__ == "__main__":  # options first: --help and usage errors answer before Prefect and PyTorch load
    from flows.lib.commands import parse_early

    parse_early("reddit")

import sys
from pathlib import Path

from prefect import flow, task
from prefect.logging import get_run_logger

from flows.common import check_cache, record_stage
from flows.lib import commands
from flows.lib.flow_params import RedditBuildParams, recipe
from flows.lib.infra import stage_cache
from flows.lib.infra.cli import apply_log_level, require_path, run_build
from flows.lib.infra.folders import check_output_folder, work_dir_for
from flows.lib.infra.keys import check_key
from flows.lib.infra.locks import output_lock
from flows.lib.infra.run_names import file_task_name, run_name
from flows.lib.infra.runners import thread_runner
from flows.lib.infra.served import confine
from flows.lib.infra.settings import Settings
from flows.lib.infra.stage_cache import refuse_standin_over_real
from flows.lib.reddit import build as reddit_build
from flows.lib.reddit import cohort as reddit_cohort
from flows.lib.reddit import download as reddit_download
from flows.lib.standin import reddit as reddit_standin

DEFAULT_USERS = Settings.model_fields["reddit_standin_users"].default


def _key(work: str) -> bytes:
    """The pseudonymisation key (CET_PSEUDONYM_KEY, from the environment or .env), read inside
    each task: it never travels as a Prefect parameter (parameters are stored by the server)."""
    secret = Settings().pseudonym_key
    return reddit_build.pseudonym_key(secret.get_secret_value() if secret else None, Path(work))


@task(name="generate-reddit-standin", task_run_name="generate-reddit-standin-{n_users}")
def generate_standin(dest: str, n_users: int, seed: int, start: str, comment_end: str, submission_end: str,
                     text: str = "phrases") -> str:
    months = reddit_standin.Months(start, comment_end, submission_end)
    return str(reddit_standin.ensure(Path(dest), n_users, seed, months, text))


@task(name="download-reddit-dump", task_run_name="download-{name}", retries=2, retry_delay_seconds=[5, 30])
def download_dump(base_url: str, name: str, dest: str, sha256: str | None) -> str:
    return str(reddit_download.fetch(base_url, name, Path(dest), sha256, progress=True))


@task(name="scan-submissions", task_run_name=file_task_name("scan"))
def scan_rs(path: str, out: str, work: str, end_utc: int, max_error_rate: float) -> dict:
    stats = reddit_cohort.scan_submissions(Path(path), Path(out), _key(work), end_utc, max_error_rate)
    get_run_logger().info("%s: %d lines, %d malformed, skipped %s", stats["file"], stats["lines"],
                          stats["malformed"], stats["skipped"])
    return stats


@task(name="combine-submissions", task_run_name="combine-submissions")
def combine_rs(parts: list[str], out: str) -> str:
    reddit_cohort.combine_submissions([Path(p) for p in parts], Path(out))
    return out


@task(name="scan-comments", task_run_name=file_task_name("scan"))
def scan_rc(path: str, out: str, work: str, first_path: str, end_utc: int, max_error_rate: float) -> dict:
    import polars as pl

    candidates = reddit_cohort.first_any(pl.read_parquet(first_path))
    stats = reddit_cohort.scan_comments(Path(path), Path(out), _key(work), candidates, end_utc, max_error_rate)
    get_run_logger().info("%s: %d lines, %d malformed, skipped %s", stats["file"], stats["lines"],
                          stats["malformed"], stats["skipped"])
    return stats


@task(name="embed-and-build-reddit-dataset", task_run_name="embed-and-build-reddit-dataset")
def finish(files: list[str], first_path: str, parts: list[str], out: str, work: str,
           params: reddit_build.RedditParams, scan_stats: list[dict]) -> str:
    import polars as pl

    path = reddit_build.finish(files, pl.read_parquet(first_path), [Path(x) for x in parts],
                               Path(out), Path(work), params, _key(work), scan_stats)
    get_run_logger().info("dataset written to %s", path)
    return str(path)


CODE = ["flows.lib.reddit", "flows.lib.infra.download", "cet_model.censoring", "cet_model.dataset"]
STANDIN_CODE = ["flows.lib.standin.reddit", "flows.lib.standin.reddit_text"]


@task(name="reddit-stage-key", task_run_name="reddit-stage-key")
def source_key(work: str) -> str:
    """Which key pseudonymises (its digest, never the key): another key means other user ids."""
    return reddit_cohort.key_digest(_key(work))


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
    request = params
    out = request.out or str(s.dataset_dir("reddit"))
    work = Path(work_dir_for(out, request.work_dir))
    dumps = request.dumps or s.reddit_dumps
    check_output_folder(out, {"--dumps": dumps, "--embedding-cache": request.embedding_cache}, request.work_dir)
    standin_users, standin_seed = request.standin_users or s.reddit_standin_users, request.standin_seed
    standin_text = request.standin_text or s.reddit_standin_text
    start, comment_end, submission_end = request.start, request.comment_end, request.submission_end
    max_error_rate = request.max_error_rate
    embedding_cache = request.embedding_cache or (str(s.embedding_cache) if s.embedding_cache else None)
    with output_lock(out, s.lock_wait, "build-reddit-features"):
        key_id = source_key(str(work))  # creates the key file once, before tasks run in parallel
        params = reddit_build.RedditParams(start=start, comment_end=comment_end, submission_end=submission_end,
                                           split_seed=request.split_seed, censor_seed=request.censor_seed,
                                           split_method=request.split_method,
                                           max_error_rate=max_error_rate, model=request.model or s.embedding_model,
                                           device=request.device or s.device, embedding_cache=embedding_cache,
                                           embed_block=s.embed_block)
        remote = isinstance(dumps, str) and dumps.startswith(("http://", "https://"))
        source = {"dumps_url": dumps} if remote else {} if dumps else {"standin_users": standin_users,
                                                                        "standin_seed": standin_seed}
        text_suffix = "" if standin_text == "phrases" else f"-{standin_text}"
        if not dumps and text_suffix:  # only a non-default text enters the key: earlier builds stay current
            source["standin_text"] = standin_text
        roots = (
            {} if remote or not dumps else {f"dumps_{i}": str(r) for i, r in enumerate(reddit_build.dump_roots(dumps))}
        )
        key, current = check_cache("build-reddit-features", out, roots,
                                   params.key_params() | {"key_id": key_id} | source,
                                   CODE + ([] if dumps else STANDIN_CODE))
        if current:
            return out
        given = ([] if remote or not dumps
                 else [Path(d).resolve() for d in ([dumps] if isinstance(dumps, str) else dumps)])
        generated = bool(given) and all(stage_cache.generated_standin(d) for d in given)
        built_from = ({"kind": "url", "from": dumps} if remote else
                      {"kind": "standin" if generated else "dumps", "from": [str(d) for d in given]} if dumps
                      else {"kind": "standin"})
        if dumps is None:
            refuse_standin_over_real("build-reddit-features", out, str(work), "Pushshift dumps",
                                     "no --dumps or dumps, CET_REDDIT_DUMPS unset")
            months = reddit_standin.Months()
            dumps = generate_standin(str(work / f"standin-{standin_users}-seed{standin_seed}{text_suffix}"),
                                     standin_users, standin_seed, start or months.start, comment_end, submission_end,
                                     standin_text)
        elif remote:
            wanted = reddit_download.plan(dumps, start, comment_end, submission_end)
            local = work / "dumps"
            fetched = download_dump.map(dumps, [n for n, _ in wanted], str(local), [h for _, h in wanted])
            fetched.wait()
            for f in fetched:
                f.result()
            dumps = str(local)
        rs, rc = reddit_build.local_dumps(dumps, params)
        rs_parts = [str(work / "rs" / f"{f.month}.parquet") for f in rs]
        rc_parts = [str(work / "rc" / f"{f.month}.parquet") for f in rc]
        reddit_cohort.claim_scan_parts(work, rs_parts, rc_parts)  # before the tasks write in parallel
        rs_stats = scan_rs.map([f.path for f in rs], rs_parts, str(work), params.end_utc("RS"), max_error_rate)
        first_path = combine_rs(rs_parts, str(work / "first.parquet"), wait_for=[rs_stats])
        rc_stats = scan_rc.map([f.path for f in rc], rc_parts, str(work), first_path,
                               params.end_utc("RC"), max_error_rate)
        stats = [s.result() for s in rs_stats] + [s.result() for s in rc_stats]
        path = finish([f.path for f in rs + rc], first_path, rc_parts, out, str(work), params, stats)
        return record_stage("build-reddit-features", path, key,
                            recipe(request, ("dumps", "work_dir", "embedding_cache")), built_from)


def main(argv=None) -> int:
    ap = commands.reddit()
    args = ap.parse_args(argv)
    apply_log_level(args)
    if args.command == "generate":
        try:
            path = reddit_standin.generate(
                args.out,
                n_users=args.users,
                seed=args.seed,
                months=reddit_standin.Months(args.start, args.comment_end, args.submission_end),
                malformed_rate=args.malformed_rate,
                overwrite=args.force,
                text=args.text,
            )
        except (ValueError, FileExistsError) as exc:
            ap.error(str(exc))
        print(path)
        return 0
    for d in args.dumps or []:
        require_path(ap, "--dumps", d, "dir")
    try:
        params = commands.params(args, RedditBuildParams)
        check_output_folder(
            params.out or str(Settings().dataset_dir("reddit")),
            {"--dumps": params.dumps or Settings().reddit_dumps},
            params.work_dir,
        )
        if Settings().pseudonym_key is not None:  # a weak key: refused now, before any dump is read
            check_key(Settings().pseudonym_key.get_secret_value())
        if not params.dumps and not Settings().reddit_dumps:
            out = params.out or str(Settings().dataset_dir("reddit"))
            refuse_standin_over_real(
                "build-reddit-features",
                out,
                work_dir_for(out, params.work_dir),
                "Pushshift dumps",
                "no --dumps, CET_REDDIT_DUMPS unset",
            )
        if args.dumps and not any("://" in d for d in args.dumps):  # local folders: the months' dumps are there
            reddit_build.local_dumps(params.dumps, params)
    except (ValueError, FileNotFoundError) as exc:  # pydantic's ValidationError names the field; the guard
        ap.error(str(exc))  # names the folder
    return run_build(ap, build_reddit_features, params, params.out or str(Settings().dataset_dir("reddit")))


if __name__ == "__main__":
    sys.exit(main())
