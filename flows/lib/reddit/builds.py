"""The Reddit build's steps in their order (``build``): run by the flow's tasks (``flows.reddit``) or,
for a command with no Prefect server configured, by plain functions in this process
(``build_here``), which scan the months in threads as the flow's task runner maps its scans.

The source is ``dumps`` (folders searched recursively, or one base URL; default: the
CET_REDDIT_DUMPS setting), else generated stand-in dumps, whose generator the entry point gives as
a step (real builds never import stand-in code). Skipped when the output already holds a build of
the same inputs, parameters, pseudonymisation key and code.

Usernames are pseudonymised with the key in CET_PSEUDONYM_KEY, or one generated once in the work
folder: each step reads it where it is used (``secret``), so it is never a flow parameter, which
Prefect would store.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from flows.lib.flow_params import RedditBuildParams, recipe
from flows.lib.infra import stage_cache
from flows.lib.infra.download import with_retries
from flows.lib.infra.folders import check_output_folder, work_dir_for
from flows.lib.infra.locks import output_lock
from flows.lib.infra.runners import in_threads
from flows.lib.infra.settings import Settings
from flows.lib.reddit import build as reddit_build
from flows.lib.reddit import cohort as reddit_cohort
from flows.lib.reddit import download as reddit_download

STAGE = "build-reddit-features"
CODE = ["flows.lib.reddit", "flows.lib.infra.download", "cet_model.censoring", "cet_model.dataset"]
STANDIN_CODE = ["flows.lib.standin.reddit", "flows.lib.standin.reddit_text"]  # their change rebuilds a stand-in build
log = logging.getLogger("flows.reddit")


@dataclass(frozen=True)
class Steps:
    """The build's steps: the flow's tasks, or ``here_steps``' plain functions. The three mapped
    steps take lists (one item a month) beside arguments shared by every item, and return one
    result an item, in order."""

    key_id: Callable  # (work) -> the key's digest; makes the key file once, before the scans run side by side
    check: Callable  # (stage, out, inputs, params, code) -> (key, current): stage_cache.check_stage
    generate: Callable  # (dest, n_users, seed, start or None, comment_end, submission_end, text) -> stand-in folder
    download: Callable  # (base_url, names, dest, sha256s) -> each file fetched and verified (mapped)
    scan_submissions: Callable  # (paths, parts, work, end_utc, max_error_rate) -> each month's scan stats (mapped)
    combine: Callable  # (parts, out) -> the first target submissions' parquet
    scan_comments: Callable  # (paths, parts, work, first_path, end_utc, max_error_rate) -> stats (mapped)
    finish: Callable  # (files, first_path, comment parts, out, work, params, scan stats) -> the dataset folder
    record: Callable  # (stage, out, key, recipe, source) -> out: stage_cache.record_stage


def secret(work: str) -> bytes:
    """The pseudonymisation key (CET_PSEUDONYM_KEY, from the environment or .env, else the one kept in
    ``work``), read where it is used."""
    value = Settings().pseudonym_key
    return reddit_build.pseudonym_key(value.get_secret_value() if value else None, Path(work))


def key_id(work: str) -> str:
    """Which key pseudonymises (its digest, never the key): another key means other user ids."""
    return reddit_cohort.key_digest(secret(work))


def download_dump(base_url: str, name: str, dest: str, sha256: str | None) -> str:
    """One dump fetched from ``base_url`` into ``dest`` and verified against ``sha256``."""
    return str(reddit_download.fetch(base_url, name, Path(dest), sha256, progress=True))


def _logged(stats: dict, logger) -> dict:
    logger.info("%s: %d lines, %d malformed, skipped %s", stats["file"], stats["lines"], stats["malformed"],
                stats["skipped"])
    return stats


def scan_submissions(path: str, part: str, work: str, end_utc: int, max_error_rate: float, logger=log) -> dict:
    """One month's submissions -> each user's first target submissions (``part``); its stats."""
    return _logged(reddit_cohort.scan_submissions(Path(path), Path(part), secret(work), end_utc, max_error_rate),
                   logger)


def combine(parts: list[str], out: str) -> str:
    """The months' first submissions combined into ``out``."""
    reddit_cohort.combine_submissions([Path(p) for p in parts], Path(out))
    return out


def scan_comments(path: str, part: str, work: str, first_path: str, end_utc: int, max_error_rate: float,
                  logger=log) -> dict:
    """One month's comments -> the candidates' first comments (``part``); its stats."""
    import polars as pl

    candidates = reddit_cohort.first_any(pl.read_parquet(first_path))
    return _logged(reddit_cohort.scan_comments(Path(path), Path(part), secret(work), candidates, end_utc,
                                               max_error_rate), logger)


def finish(files: list[str], first_path: str, parts: list[str], out: str, work: str,
           params: reddit_build.RedditParams, scan_stats: list[dict], logger=log) -> str:
    """The comments embedded and the dataset folder written; the scan parts removed."""
    import polars as pl

    path = reddit_build.finish(files, pl.read_parquet(first_path), [Path(x) for x in parts], Path(out), Path(work),
                               params, secret(work), scan_stats)
    logger.info("dataset written to %s", path)
    return str(path)


def build(request: RedditBuildParams, s: Settings, steps: Steps) -> str:
    """Pushshift dumps -> the Reddit dataset folder; returns it."""
    out = request.out or str(s.dataset_dir("reddit"))
    work = Path(work_dir_for(out, request.work_dir))
    dumps = request.dumps or s.reddit_dumps
    check_output_folder(out, {"--dumps": dumps, "--embedding-cache": request.embedding_cache}, request.work_dir)
    standin_users, standin_seed = request.standin_users or s.reddit_standin_users, request.standin_seed
    standin_text = request.standin_text or s.reddit_standin_text
    start, comment_end, submission_end = request.start, request.comment_end, request.submission_end
    max_error_rate = request.max_error_rate
    embedding_cache = request.embedding_cache or (str(s.embedding_cache) if s.embedding_cache else None)
    with output_lock(out, s.lock_wait, STAGE):
        key_digest = steps.key_id(str(work))  # makes the key file once, before the scans run side by side
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
        key, current = steps.check(STAGE, out, roots, params.key_params() | {"key_id": key_digest} | source,
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
            stage_cache.refuse_standin_over_real(STAGE, out, str(work), "Pushshift dumps",
                                                 "no --dumps or dumps, CET_REDDIT_DUMPS unset")
            dumps = steps.generate(str(work / f"standin-{standin_users}-seed{standin_seed}{text_suffix}"),
                                   standin_users, standin_seed, start, comment_end, submission_end, standin_text)
        elif remote:
            wanted = reddit_download.plan(dumps, start, comment_end, submission_end)
            local = work / "dumps"
            steps.download(dumps, [n for n, _ in wanted], str(local), [h for _, h in wanted])
            dumps = str(local)
        rs, rc = reddit_build.local_dumps(dumps, params)
        rs_parts = [str(work / "rs" / f"{f.month}.parquet") for f in rs]
        rc_parts = [str(work / "rc" / f"{f.month}.parquet") for f in rc]
        reddit_cohort.claim_scan_parts(work, rs_parts, rc_parts)  # before the scans write side by side
        with reddit_cohort.scan_parts_removed_on_failure(work):
            rs_stats = steps.scan_submissions([f.path for f in rs], rs_parts, str(work), params.end_utc("RS"),
                                              max_error_rate)
            first_path = steps.combine(rs_parts, str(work / "first.parquet"))
            rc_stats = steps.scan_comments([f.path for f in rc], rc_parts, str(work), first_path,
                                           params.end_utc("RC"), max_error_rate)
            path = steps.finish([f.path for f in rs + rc], first_path, rc_parts, out, str(work), params,
                                list(rs_stats) + list(rc_stats))
        return steps.record(STAGE, path, key, recipe(request, ("dumps", "work_dir", "embedding_cache")), built_from)


def here_steps(generate: Callable) -> Steps:
    """The steps as plain functions in this process, logging to ``flows.reddit``; the months' scans
    and downloads in threads; ``generate`` the stand-in's step (see ``Steps``)."""
    return Steps(key_id=key_id,
                 check=lambda stage, out, inputs, params, code: stage_cache.check_stage(stage, out, inputs, params,
                                                                                          code, log),
                 generate=generate,
                 download=lambda url, names, dest, sums: in_threads(
                     lambda name, sha256: with_retries(download_dump, url, name, dest, sha256, logger=log),
                     names, sums, name="download"),
                 scan_submissions=lambda *args: in_threads(scan_submissions, *args, name="scan"),
                 combine=combine,
                 scan_comments=lambda *args: in_threads(scan_comments, *args, name="scan"),
                 finish=finish, record=stage_cache.record_stage)


def build_here(params: RedditBuildParams, generate: Callable) -> str:
    """The build as the flow runs it, in this process and without Prefect (no server is configured
    to record a flow run)."""
    return build(params, Settings(), here_steps(generate))


def command_params(ap: argparse.ArgumentParser, args: argparse.Namespace) -> RedditBuildParams:
    """``flows.reddit build``'s parameters from its parsed options, checked before anything runs: the
    dump folders and their months, the output folder, a weak pseudonymisation key, and a stand-in
    that would replace a build from real dumps are usage errors naming what is wrong."""
    from flows.lib import commands
    from flows.lib.infra.cli import require_path
    from flows.lib.infra.keys import check_key

    for d in args.dumps or []:
        require_path(ap, "--dumps", d, "dir")
    try:
        params = commands.params(args, RedditBuildParams)
        s = Settings()
        out = params.out or str(s.dataset_dir("reddit"))
        check_output_folder(out, {"--dumps": params.dumps or s.reddit_dumps}, params.work_dir)
        if s.pseudonym_key is not None:  # a weak key: refused now, before any dump is read
            check_key(s.pseudonym_key.get_secret_value())
        if not params.dumps and not s.reddit_dumps:
            stage_cache.refuse_standin_over_real(STAGE, out, work_dir_for(out, params.work_dir), "Pushshift dumps",
                                                 "no --dumps, CET_REDDIT_DUMPS unset")
        if args.dumps and not any("://" in d for d in args.dumps):  # local folders: the months' dumps are there
            reddit_build.local_dumps(params.dumps, params)
    except (ValueError, FileNotFoundError) as exc:  # pydantic's ValidationError names the field; the guard
        ap.error(str(exc))  # names the folder
    return params
