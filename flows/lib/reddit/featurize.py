"""New Pushshift dumps -> model inputs for every user in them, as the training build made them.

The user set differs from training's: there, a user enters the cohort because they later
submitted to one of the nine subreddits; here, every author with 20 usable comments is scored
(the question is whether, and when, they will). Everything else is the training build's: the
first 20 comments (``[deleted]``/``[removed]`` bodies and bot or deleted authors skipped and
counted), cut at a first submission to one of the nine when the dumps hold RS files (a user
whose first such submission comes before their 20th comment had an event before the time
origin, as no training user did: they fall short of 20 comments and are counted as left out),
the same embedding model, the same two aux features scaled with the **training**
means and sds. Users appear only as keyed hashes (the training build's key gives the same ids).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import polars as pl

from flows.lib.reddit import cohort as reddit_cohort
from flows.lib.reddit.build import aux_features, dump_roots, user_summary
from flows.lib.reddit.build import scan as scan_dumps
from flows.lib.reddit.cohort import NO_LIMIT
from flows.lib.reddit.embed import drop_cache, embed
from flows.lib.reddit.pushshift import find_dumps, select

log = logging.getLogger("flows.reddit.featurize")


def check_record(record: dict | None, where) -> dict:
    if not record or record.get("source") != "reddit":
        raise ValueError(f"{where}: no Reddit featurisation record (a model trained on a Reddit build made before "
                         "raw scoring existed, or on another source); rebuild the dataset and retrain")
    for k in ("feature_scaling", "embedding_model"):
        if k not in record:
            raise ValueError(f"{where}: featurisation record lacks {k!r}")
    return record


def featurize(dumps, record: dict, feature_names: list[str], work_dir, key: bytes, device: str = "auto",
              batch_size: int | None = None, embedding_cache=None,
              keep_embeddings: bool = True) -> tuple[pl.DataFrame, np.ndarray, dict]:
    """Every user of the RC dumps under ``dumps`` with 20 usable comments.

    Returns (frame with ``id`` = pseudonym and ``feature_names``, in pseudonym order;
    sequences (n, 20, D) float32 row-aligned with it; counts). The comments are embedded through
    the cache ``embedding_cache``, else ``work_dir/embeddings``; ``keep_embeddings=False`` removes
    that work-folder cache (vectors of the comment bodies) when done, failed or not, else a rerun
    embeds nothing again. A cache the caller names always stays.
    """
    cache = Path(embedding_cache) if embedding_cache else Path(work_dir) / "embeddings"
    try:
        return _featurize(dumps, record, feature_names, work_dir, key, device, batch_size, cache)
    finally:
        if not keep_embeddings and not embedding_cache:
            drop_cache(cache)
            try:
                Path(work_dir).rmdir()  # only when empty: a pseudonymisation key kept there stays
            except OSError:
                pass


def _featurize(dumps, record: dict, feature_names: list[str], work_dir, key: bytes, device: str,
               batch_size: int | None, cache: Path) -> tuple[pl.DataFrame, np.ndarray, dict]:
    record = check_record(record, dumps)
    work = Path(work_dir)
    found = find_dumps(dump_roots(dumps))
    rc, rs = select(found, "RC"), select(found, "RS")
    if not rc:
        raise FileNotFoundError(f"{dumps}: no RC_YYYY-MM comment dumps (.zst, .bz2 or .xz) found, searched "
                                "recursively")
    first, parts, scan = scan_dumps(rs, rc, work, key, NO_LIMIT, NO_LIMIT, float(record.get("max_error_rate", 0.01)),
                                    every_author=True)
    with reddit_cohort.scan_parts_removed_on_failure(work):
        seen = pl.concat([pl.read_parquet(p, columns=["user"]) for p in parts])["user"].n_unique()
        comments = reddit_cohort.combine_comments(parts)
    reddit_cohort.remove_scan_parts(work)  # comment ids and bodies, submission times: held in memory only now
    per_user = user_summary(comments)
    n = per_user.height
    counts = {"authors_with_usable_comments": int(seen), "scored": n,
              "left_out_fewer_than_20_comments": int(seen) - n,
              "with_a_target_submission_in_the_dumps": int(first["user"].n_unique()),
              "rs_files": len(rs), "rc_files": len(rc),
              "skipped_rows": _sum_skipped(scan), "malformed_lines": sum(s["malformed"] for s in scan)}
    if n == 0:
        return pl.DataFrame(schema={"id": pl.String, **{c: pl.Float64 for c in feature_names}}), \
            np.zeros((0, reddit_cohort.N_COMMENTS, 0), np.float32), counts
    vectors, _ = embed(comments["body"].to_list(), cache, record["embedding_model"], device, batch_size, key=key)
    seqs = vectors.reshape(n, reddit_cohort.N_COMMENTS, -1).astype(np.float32, copy=False)
    raw = aux_features(per_user)
    scaling = record["feature_scaling"]
    missing = [c for c in feature_names if c not in raw or c not in scaling]
    if missing:
        raise ValueError(f"features {missing} are not made by this build or have no training scaling")
    feats = {c: (raw[c] - scaling[c]["mean"]) / scaling[c]["sd"] for c in feature_names}
    log.info("featurised %d users (%d authors had fewer than 20 usable comments)", n,
             counts["left_out_fewer_than_20_comments"])
    return pl.DataFrame({"id": per_user["user"], **feats}), seqs, counts


def _sum_skipped(scan: list[dict]) -> dict:
    total: dict[str, int] = {}
    for s in scan:
        for k, v in s["skipped"].items():
            total[k] = total.get(k, 0) + int(v)
    return dict(sorted(total.items()))
