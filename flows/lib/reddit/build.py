"""Pushshift dumps -> the paper's Reddit dataset (first 20 comments, 9 subreddit events).

Plain functions; ``flows/reddit.py`` maps the per-month scans as Prefect tasks. Steps: pass 1
over RS files (first submission per user and subreddit), pass 2 over RC files (each cohort
user's first 20 comments before their first submission to any of the nine), embeddings of
the 20 comments (sentence-transformers, cached), aux features, events, split by user,
training-only scaling, the shared censoring, the dataset contract with ``sequences.npy``.

Decisions: time is measured from the 20th comment, in **days** (the paper used months; days
keep resolution and the unit is in the manifest); c = the user submitted to that subreddit
within the data (up to ``submission_end``); comments whose body is ``[deleted]``/``[removed]``
do not count among the 20 (no text); aux features are log(1 + mean hours between the 20
comments) and the mean comment length in characters, standardised with training statistics.
Users appear only as keyed hashes.
"""

from __future__ import annotations

import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import polars as pl

from cet_model.censoring import censor_by_median
from cet_model.comments import RowView
from cet_model.dataset import SPLIT_METHODS, assign_splits, event_columns, write_dataset
from flows.lib.infra.download import sha256_file
from flows.lib.infra.keys import kept_key
from flows.lib.reddit import cohort as reddit_cohort
from flows.lib.reddit.embed import DEFAULT_MODEL, embed
from flows.lib.reddit.months import month_bounds
from flows.lib.reddit.pushshift import DumpFile, find_dumps, select
from flows.lib.reddit.subreddits import SUBREDDITS

log = logging.getLogger("flows.reddit.build")


@dataclass(frozen=True)
class RedditParams:
    start: str | None = None  # first month read (None: all there are)
    comment_end: str = "2017-11"
    submission_end: str = "2020-01"
    split_seed: int = 0
    censor_seed: int = 0
    censor_factor: float = 2.0
    split_fractions: tuple[float, float, float] = (0.6, 0.2, 0.2)
    split_method: str = "random"  # or "hash": a user keeps its split when users are added
    max_error_rate: float = 0.01
    model: str = DEFAULT_MODEL
    device: str = "auto"
    batch_size: int | None = None
    embed_block: int = 50_000  # texts embedded and saved per block: a crash loses at most one block
    embedding_cache: str | None = None  # default: <work dir>/embeddings; share it across runs to reuse vectors

    def __post_init__(self):
        if self.split_method not in SPLIT_METHODS:
            raise ValueError(f"split_method must be one of {SPLIT_METHODS}, got {self.split_method!r}")

    def key_params(self) -> dict:
        """What changes the dataset, for the stage key: not the device, the batch size or where
        embeddings are cached (the vectors are the same)."""
        skip = {"device", "batch_size", "embedding_cache"}
        return {k: v for k, v in asdict(self).items() if k not in skip}

    def end_utc(self, kind: str) -> int:
        return month_bounds(self.comment_end if kind == "RC" else self.submission_end)[1] - 1


def pseudonym_key(value: str | None, work_dir: Path) -> bytes:
    """The key from settings, or a random one kept (mode 600) in the work folder and reused."""
    return kept_key(value, Path(work_dir) / "pseudonym.key", "pseudonymisation key")


def dump_roots(dumps) -> list[Path]:
    """One folder or several (a list, or one string with ``os.pathsep`` between folders)."""
    if isinstance(dumps, str | Path):
        dumps = str(dumps).split(os.pathsep)
    return [Path(d) for d in dumps if str(d)]


def local_dumps(dumps, params: RedditParams) -> tuple[list[DumpFile], list[DumpFile]]:
    """The RS and RC files under one or more folders (searched recursively) within the
    configured months (``params``: ``start``, ``submission_end``, ``comment_end``), one per month
    (``pushshift.select``)."""
    roots = dump_roots(dumps)
    found = find_dumps(roots)
    rs = select(found, "RS", params.start, params.submission_end)
    rc = select(found, "RC", params.start, params.comment_end)
    if not rs or not rc:
        where = ", ".join(map(str, roots))
        outside = len(found) - len(rs) - len(rc)
        months = sorted({f.month for f in found})
        raise FileNotFoundError(f"{where}: need RS_YYYY-MM and RC_YYYY-MM dumps (.zst, .bz2 or .xz) from "
                                f"{params.start or 'the first month'} up to {params.submission_end} (RS) / "
                                f"{params.comment_end} (RC), searched recursively; found {len(rs)} RS and {len(rc)} RC"
                                + (f" in those months, and {outside} other file(s) of months {months[0]} to "
                                   f"{months[-1]} (--start, --comment-end, --submission-end choose the months)"
                                   if outside else ""))
    return rs, rc


def user_summary(comments: pl.DataFrame) -> pl.DataFrame:
    """One row per user of ``comments`` (20 per user, sorted by user and rank), in order:
    first and 20th comment times, mean body length, first comment id."""
    return comments.group_by("user", maintain_order=True).agg(
        pl.col("created_utc").first().alias("t1"), pl.col("created_utc").last().alias("t20"),
        pl.col("body").str.len_chars().mean().alias("mean_length"), pl.col("id").first().alias("first_id"))


def aux_features(per_user: pl.DataFrame) -> dict[str, np.ndarray]:
    """The two unscaled aux features of ``user_summary`` rows: log(1 + mean hours between the
    20 comments) and the mean comment length in characters."""
    gap = np.log1p((per_user["t20"] - per_user["t1"]).to_numpy() / 19 / 3600)
    return {"log1p_mean_gap_hours": gap, "mean_length_chars": per_user["mean_length"].to_numpy().astype(float)}


def assemble(comments: pl.DataFrame, first: pl.DataFrame, vectors: np.ndarray, out: Path, params: RedditParams,
             extra_manifest: dict) -> Path:
    """Cohort comments (user, rank, created_utc, body; 20 per user, sorted) + first submissions +
    their embeddings (row-aligned with ``comments``) -> the dataset folder."""
    if comments.height == 0:
        raise ValueError("empty cohort: no user has 20 comments before a first submission to the nine subreddits")
    per_user = user_summary(comments)
    n = per_user.height
    seqs = vectors.reshape(n, reddit_cohort.N_COMMENTS, -1).astype(np.float32, copy=False)  # a view
    # Rows in the order of each user's first comment id, not of the pseudonyms: row order, split and
    # censoring draws then do not depend on the pseudonymisation key (a fresh random key per cold
    # build used to give a different split, hence different results, from the same seeds).
    order = np.argsort(per_user["first_id"].to_numpy().astype(str), kind="stable")
    # the reordered rows are a view, written to sequences.npy by blocks: vectors are held once
    per_user, seqs = per_user[order], RowView(seqs, order)
    users = per_user["user"].to_numpy().astype(str)
    split = assign_splits(per_user["first_id"].to_numpy().astype(str), params.split_seed, params.split_fractions,
                        params.split_method)
    train = split == "train"
    raw = aux_features(per_user)
    scaling, feats = {}, {}
    for name, v in raw.items():
        mu, sd = float(v[train].mean()), float(v[train].std(ddof=1)) if train.sum() > 1 else 1.0
        sd = sd if sd > 0 else 1.0
        scaling[name] = {"mean": mu, "sd": sd}
        feats[name] = (v - mu) / sd
    wide = first.pivot(on="subreddit", index="user", values="first_utc")
    ev = per_user.select("user", "t20").join(wide, on="user", how="left")
    t_true = np.full((n, len(SUBREDDITS)), np.nan)
    for j, s in enumerate(SUBREDDITS):
        if s in ev.columns:
            t_true[:, j] = (ev[s].cast(pl.Float64) - ev["t20"].cast(pl.Float64)).to_numpy() / 86400.0
    c = np.isfinite(t_true).astype(np.int8)
    if (t_true[c == 1] <= 0).any():
        raise AssertionError("internal: a first submission precedes the 20th comment")
    t, s, cens = censor_by_median(t_true, c, train, factor=params.censor_factor, seed=params.censor_seed,
                                  event_names=SUBREDDITS, fallback=True)
    features = pl.DataFrame({"id": users, "split": split, **feats})
    events = pl.DataFrame({"id": users, "split": split})
    for j, e in enumerate(SUBREDDITS):
        tc, sc, cc, ttc = event_columns(e)
        events = events.with_columns(pl.Series(tc, t[:, j]), pl.Series(sc, s[:, j]), pl.Series(cc, c[:, j]),
                                     pl.Series(ttc, t_true[:, j]).fill_nan(None))
    manifest = {
        "name": "reddit", "feature_names": list(feats), "event_names": SUBREDDITS, "time_unit": "days",
        "time_origin": "the 20th comment", "censoring": cens,
        "seeds": {"split": params.split_seed, "censoring": params.censor_seed},
        "split_method": params.split_method,
        "params": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(params).items()},
        "feature_scaling": scaling, "sequences": {"shape": list(seqs.shape), "model": params.model},
        "featurization": {"source": "reddit", "feature_scaling": scaling, "embedding_model": params.model,
                          "comment_end": params.comment_end, "submission_end": params.submission_end,
                          "max_error_rate": params.max_error_rate,
                          "pseudonym_key_id": extra_manifest.get("pseudonym_key_id")},
        "events": {e: int(c[:, j].sum()) for j, e in enumerate(SUBREDDITS)},
        "cohort": {"users": n}, **extra_manifest,
    }
    return write_dataset(out, features, events, manifest, sequences=seqs)


def scan(rs, rc, work: Path, secret: bytes, rs_end: int, rc_end: int, max_error_rate: float,
         read_size: int | None = None, every_author: bool = False) -> tuple[pl.DataFrame, list[Path], list[dict]]:
    """Both passes in one process: RS files -> first target submissions (``work/first.parquet``),
    then RC files -> each candidate's first comments (``work/rc/<month>.parquet``). Candidates are
    the users with a target submission, or with ``every_author`` every author (scoring), each
    cut at their first target submission if any. Returns (first, comment parts, scan stats)."""
    parts = [work / "rc" / f"{f.month}.parquet" for f in rc]
    reddit_cohort.claim_scan_parts(work, [f"{f.month}.parquet" for f in rs], parts)
    with reddit_cohort.scan_parts_removed_on_failure(work):
        stats = [reddit_cohort.scan_submissions(Path(f.path), work / "rs" / f"{f.month}.parquet", secret, rs_end,
                                                max_error_rate, read_size) for f in rs]
        first = reddit_cohort.combine_submissions([work / "rs" / f"{f.month}.parquet" for f in rs],
                                                  work / "first.parquet")
        limits = reddit_cohort.first_any(first)
        candidates = reddit_cohort.EveryAuthor(limits) if every_author else limits
        stats += [reddit_cohort.scan_comments(Path(f.path), part, secret, candidates, rc_end, max_error_rate,
                                              read_size) for f, part in zip(rc, parts, strict=True)]
    return first, parts, stats


def build(dumps, out, work_dir, params: RedditParams = RedditParams(), key: str | None = None,
          read_size: int | None = None) -> Path:
    """The whole build in one process (the flow runs the same steps as mapped tasks).
    ``dumps``: one folder or several (``dump_roots``)."""
    out, work = Path(out), Path(work_dir)
    secret = pseudonym_key(key, work)
    rs, rc = local_dumps(dumps, params)
    first, parts, stats = scan(rs, rc, work, secret, params.end_utc("RS"), params.end_utc("RC"),
                               params.max_error_rate, read_size)
    with reddit_cohort.scan_parts_removed_on_failure(work):
        return finish([f.path for f in rs + rc], first, parts, out, work, params, secret, stats)


def finish(files: list[str], first: pl.DataFrame, comment_parts: list[Path], out: Path, work: Path,
           params: RedditParams, secret: bytes, scan_stats: list[dict]) -> Path:
    comments = reddit_cohort.combine_comments(comment_parts)
    cache = Path(params.embedding_cache) if params.embedding_cache else work / "embeddings"
    vectors, emb_stats = embed(comments["body"].to_list(), cache, params.model, params.device, params.batch_size,
                               shard_size=params.embed_block, key=secret)
    # how this run got its vectors (cache or model) is logged, not stored: the dataset is the same
    # bytes however often the build was interrupted and resumed
    log.info("embeddings: %d texts, %d unique, %d from the cache, %d embedded now", emb_stats["texts"],
             emb_stats["unique"], emb_stats["cached"], emb_stats["embedded"])
    cohort_first = first.filter(pl.col("user").is_in(comments["user"].unique().implode()))
    extra = {
        "source_fingerprints": {Path(f).name: sha256_file(Path(f)) for f in sorted(files, key=lambda p: Path(p).name)},
        "scan": scan_stats,
        "embedding": {"texts": emb_stats["texts"], "unique": emb_stats["unique"]},
        "pseudonym_key_id": reddit_cohort.key_digest(secret),
        "cohort_funnel": {
            "users_with_a_target_submission": int(first["user"].n_unique()),
            "users_with_20_comments_before_it": int(comments["user"].n_unique()),
        },
    }
    path = assemble(comments, cohort_first, vectors, out, params, extra)
    reddit_cohort.remove_scan_parts(work)  # comment ids, bodies, exact submission times: not kept once built
    return path
