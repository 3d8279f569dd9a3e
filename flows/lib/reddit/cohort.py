"""The paper's Reddit cohort in two passes over monthly dumps, one month per call.

Pass 1 (``scan_submissions``, RS files): each author's first submission time to each of the
nine subreddits (matched case-insensitively), up to ``end_utc``. Pass 2 (``scan_comments``,
RC files): for authors with such a submission, their comments before their first submission
to any of the nine and up to ``end_utc``; per month at most the first 20 per author are kept
(the union's first 20 are among them), so memory stays bounded. ``combine_*`` merge months.

Skipped and counted, never silently: ``[deleted]`` and missing authors, AutoModerator,
rows without a subreddit, ``[deleted]``/``[removed]`` bodies (no text to embed), rows whose
created_utc is not a number. Authors are pseudonymised with a keyed hash (HMAC-SHA256) as
soon as a row is read: no username reaches a file. Per-month outputs are written atomically.

Speed: most lines of a month are neither a target submission nor a candidate's comment, and
decoding them is what costs. So each line is first looked at as bytes
(``pushshift.FieldFilter``): the raw ``"subreddit":"..."`` of a submission, the raw
``"author":"..."`` of a comment, with one decision cached per distinct value. Only lines that
may matter are parsed (a field that is missing, repeated by a nested object or escaped always
is), and everything is then checked on the parsed object as before. Each distinct author is
pseudonymised once per file (a bounded cache): a raw name lives in memory during the scan,
never on disk or in logs.
"""

from __future__ import annotations

import hmac
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl

from cet_model.atomic import MARKER, claim_files, remove_dead_leftovers, writing
from flows.lib.infra import keys
from flows.lib.infra.crash import crash_point
from flows.lib.reddit.pushshift import FieldFilter, ReadStats, created_utc, iter_records
from flows.lib.reddit.subreddits import SUBREDDITS

TARGETS = {s.lower(): s for s in SUBREDDITS}
SKIP_AUTHORS = {"[deleted]", "automoderator"}
GONE_BODIES = {"[deleted]", "[removed]"}
N_COMMENTS = 20
TARGET_BYTES = {s.lower().encode() for s in SUBREDDITS}
SKIP_AUTHOR_BYTES = {a.encode() for a in SKIP_AUTHORS}
NO_LIMIT = 2**62  # a time after every dump: no end, no first submission
CACHE_LIMIT = 1 << 20  # distinct authors kept per file before the pseudonym cache starts over


class Pseudonyms:
    """``pseudonym`` with a bounded per-file cache keyed by the raw UTF-8 name."""

    def __init__(self, key: bytes):
        self.key, self.cache = key, {}

    def of_bytes(self, raw: bytes) -> str:
        user = self.cache.get(raw)
        if user is None:
            if len(self.cache) >= CACHE_LIMIT:
                self.cache.clear()
            user = self.cache[raw] = pseudonym(raw, self.key)
        return user

    def __call__(self, author: str) -> str:
        return self.of_bytes(author.encode("utf-8"))


def pseudonym(author: str | bytes, key: bytes) -> str:
    """A stable keyed hash of a username (HMAC-SHA256 of its UTF-8 bytes, 20 hex characters)."""
    raw = author if isinstance(author, bytes) else author.encode("utf-8")
    return hmac.digest(key, raw, "sha256").hex()[:20]


def _created(obj: dict, skipped: Counter, stats: ReadStats) -> int | None:
    """created_utc as an int, or None when missing or unreadable: counted in ``skipped`` and as
    a malformed line in ``stats``, so a file with too many fails under max_error_rate, naming them."""
    t = created_utc(obj)
    if t is None:
        skipped["bad_created_utc"] += 1
        stats.malformed += 1
        if len(stats.examples) < 5:
            stats.examples.append(stats.lines)
    return t


def _author(obj: dict, skipped: Counter) -> str | None:
    a = obj.get("author")
    if not isinstance(a, str) or not a:
        skipped["missing_author"] += 1
        return None
    if a.lower() in SKIP_AUTHORS:
        skipped["deleted_or_bot_author"] += 1
        return None
    return a


def _write(frame: pl.DataFrame, out: Path, crash: str | None = None) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_leftovers(out.parent, f".{out.name}.tmp-*")
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    with writing(out, tmp):
        frame.write_parquet(tmp)
    if crash:
        crash_point(crash)
    os.replace(tmp, out)


SCAN_PARTS = ("rs", "rc")  # per-month scan results in a work folder, and "first.parquet"
SCAN_KIND = "reddit-scan"  # the kind of marker (``cet_model.atomic.claim_files``) the scan leaves in its folders
_SCAN_PART = re.compile(r"\d{4}-\d{2}\.parquet")  # the month files the scan writes


def _default_work(folder: Path) -> bool:
    """A work folder CET named itself (``.<dataset>-work`` beside the dataset, ``flows.common.work_dir_for``),
    whose scan files from before the marker count as CET's."""
    return folder.name.startswith(".") and folder.name.endswith("-work")


def claim_scan_parts(work: Path, rs_parts, rc_parts) -> None:
    """Before a scan writes into ``work``: record ``first.parquet`` and the month files (``rs/<YYYY-MM>.parquet``,
    ``rc/<YYYY-MM>.parquet``) in each folder's marker, and refuse (FileExistsError naming the file) a file of one
    of those names that CET did not write there. A work folder a user names may hold their own files: the scan
    neither replaces nor, when it cleans up (``remove_scan_parts``), deletes them."""
    work = Path(work)
    claims = [(work, ["first.parquet"], _default_work)] + [
        (work / name, [Path(p).name for p in parts], lambda f: _default_work(f.parent))
        for name, parts in (("rs", rs_parts), ("rc", rc_parts)) if parts]
    for record in (False, True):  # every name is checked before any is recorded
        for folder, names, legacy in claims:
            claim_files(folder, names, kind=SCAN_KIND, legacy=legacy, what="work folder", record=record)


def _claimed(folder: Path) -> list[str]:
    """The files the scan's marker in ``folder`` lists (none without a marker of the scan's kind)."""
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return []
    if not (isinstance(marker, dict) and marker.get("written_by") == "cet" and marker.get("kind") == SCAN_KIND):
        return []
    return [str(e) for e in marker.get("entries", []) if isinstance(e, str)]


def remove_scan_parts(work: Path) -> int:
    """Remove the scan results from ``work`` once their use is done: they hold what finds an author
    in the public archive (comment ids and bodies, exact submission times) beside each pseudonym.
    Only the files the scan claimed (``claim_scan_parts``) and their temporaries are removed, then
    the scan's markers; any other file there stays. A later build scans the dumps again. Returns the
    number of files removed."""
    work, n = Path(work), 0
    for folder in (*(work / part for part in SCAN_PARTS), work):
        if not folder.is_dir() or folder.is_symlink():
            continue
        names = [e for e in _claimed(folder) if e == "first.parquet" or _SCAN_PART.fullmatch(e)]
        for name in names:
            for p in [folder / name, *folder.glob(f".{name}.tmp-*")]:
                if p.is_file() and not p.is_symlink():
                    p.unlink()
                    n += 1
        if names:
            (folder / MARKER).unlink(missing_ok=True)
        if folder != work and not any(folder.iterdir()):
            folder.rmdir()
    return n


@contextmanager
def scan_parts_removed_on_failure(work: Path) -> Iterator[None]:
    """Around the steps that write and read the scan results in ``work``: when one fails or is
    interrupted, they are removed (``remove_scan_parts``) before the error goes on, so what finds
    an author is not left on disk by a build that did not end. A later build scans the dumps
    again: they were never reused."""
    try:
        yield
    except BaseException:
        remove_scan_parts(work)
        raise


def target_subreddit(raw: bytes) -> bool:
    """Is this raw ``subreddit`` value one of the nine (any case)?"""
    return raw.lower() in TARGET_BYTES


def scan_submissions(path: Path, out: Path, key: bytes, end_utc: int, max_error_rate: float = 0.01,
                     read_size: int | None = None, prefilter: bool = True) -> dict:
    """First submission time per (author, target subreddit) in one RS file -> ``out`` parquet.
    ``prefilter=False`` parses every line (the reference the fast path is tested against)."""
    stats = ReadStats(str(path))
    skipped: Counter = Counter()
    first: dict[tuple[str, str], int] = {}
    pseudonym_of = Pseudonyms(key)
    select = FieldFilter("subreddit", target_subreddit, skipped) if prefilter else None
    for obj in iter_records(path, stats, max_error_rate, read_size, select=select):
        sub = obj.get("subreddit")
        if not isinstance(sub, str):
            skipped["missing_subreddit"] += 1
            continue
        target = TARGETS.get(sub.lower())
        if target is None:
            continue
        author = _author(obj, skipped)
        if author is None:
            continue
        t = _created(obj, skipped, stats)
        if t is None:
            continue
        if t > end_utc:
            skipped["after_end"] += 1
            continue
        k = (pseudonym_of(author), target)
        if k not in first or t < first[k]:
            first[k] = t
    frame = pl.DataFrame({"user": [k[0] for k in first], "subreddit": [k[1] for k in first],
                          "first_utc": list(first.values())},
                         schema={"user": pl.String, "subreddit": pl.String, "first_utc": pl.Int64})
    _write(frame, out)
    return {"file": Path(path).name, "lines": stats.lines, "malformed": stats.malformed,
            "target_rows": len(first), "skipped": dict(skipped)}


def combine_submissions(parts: list[Path], out: Path) -> pl.DataFrame:
    """Across months: the first time per (user, subreddit), and per user the first to any."""
    frame = (pl.concat([pl.read_parquet(p) for p in parts]) if parts else
             pl.DataFrame(schema={"user": pl.String, "subreddit": pl.String, "first_utc": pl.Int64}))
    first = frame.group_by("user", "subreddit").agg(pl.col("first_utc").min()).sort("user", "subreddit")
    _write(first, out)
    return first


def first_any(first: pl.DataFrame) -> dict[str, int]:
    return dict(first.group_by("user").agg(pl.col("first_utc").min()).iter_rows())


class EveryAuthor(dict):
    """``scan_comments``' candidates when every author counts (scoring new users): ``in`` is
    always true, and an author's limit is their first target submission (the dict's values,
    from ``first_any``) or else none."""

    def __contains__(self, user) -> bool:
        return True

    def get(self, user, default=None):
        return super().get(user, NO_LIMIT)


def scan_comments(path: Path, out: Path, key: bytes, candidates: dict[str, int], end_utc: int,
                  max_error_rate: float = 0.01, read_size: int | None = None, prefilter: bool = True) -> dict:
    """Comments of candidate users before their first target submission -> ``out`` parquet
    (user, created_utc, id, body), at most the first 20 per user of this month.
    ``prefilter=False`` parses every line (the reference the fast path is tested against)."""
    stats = ReadStats(str(path))
    skipped: Counter = Counter()
    kept: dict[str, list[tuple[int, int, str, str]]] = {}
    pseudonym_of = Pseudonyms(key)

    def candidate_author(raw: bytes) -> bool | str:
        if not raw:
            return True  # parsed, and counted as a missing author
        if raw.lower() in SKIP_AUTHOR_BYTES:
            return "deleted_or_bot_author"
        return pseudonym_of.of_bytes(raw) in candidates

    # comment objects carry no nested object with an author field: the first one is the comment's
    select = FieldFilter("author", candidate_author, skipped, nested=False) if prefilter else None
    for obj in iter_records(path, stats, max_error_rate, read_size, select=select):
        author = _author(obj, skipped)
        if author is None:
            continue
        user = pseudonym_of(author)
        limit = candidates.get(user)
        if limit is None:
            continue
        t = _created(obj, skipped, stats)
        if t is None:
            continue
        if t >= limit or t > end_utc:
            continue
        body = obj.get("body")
        if not isinstance(body, str) or body in GONE_BODIES:
            skipped["deleted_or_removed_body"] += 1
            continue
        cid = obj.get("id") if isinstance(obj.get("id"), str) else ""
        rows = kept.setdefault(user, [])
        rows.append((t, _id_order(cid), cid, body))
        if len(rows) > 4 * N_COMMENTS:
            rows.sort()
            del rows[N_COMMENTS:]
    users, times, ids, bodies = [], [], [], []
    for user, rows in kept.items():
        rows.sort()
        for t, _, cid, body in rows[:N_COMMENTS]:
            users.append(user)
            times.append(t)
            ids.append(cid)
            bodies.append(body)
    frame = pl.DataFrame({"user": users, "created_utc": times, "id": ids, "body": bodies},
                         schema={"user": pl.String, "created_utc": pl.Int64, "id": pl.String, "body": pl.String})
    _write(frame, out, crash="scan")
    return {"file": Path(path).name, "lines": stats.lines, "malformed": stats.malformed,
            "candidate_comments": len(users), "skipped": dict(skipped)}


def _id_order(cid: str) -> int:
    try:
        return int(cid, 36)
    except ValueError:
        return -1


def combine_comments(parts: list[Path]) -> pl.DataFrame:
    """Each user's first 20 comments across months (by time, then base-36 id); only users with 20."""
    if not parts:
        return pl.DataFrame(schema={"user": pl.String, "created_utc": pl.Int64, "id": pl.String, "body": pl.String})
    frame = pl.concat([pl.read_parquet(p) for p in parts])
    frame = frame.with_columns(order=pl.col("id").map_elements(_id_order, return_dtype=pl.Int64))
    frame = frame.sort("user", "created_utc", "order").with_columns(rank=pl.int_range(pl.len()).over("user"))
    frame = frame.filter(pl.col("rank") < N_COMMENTS)
    full = frame.group_by("user").agg(pl.len().alias("n")).filter(pl.col("n") == N_COMMENTS)["user"]
    return frame.filter(pl.col("user").is_in(full.implode())).drop("order").sort("user", "rank")


PSEUDONYM_KEY = "cet-pseudonym-key"  # the purpose its fingerprints are salted with


def key_digest(key: bytes) -> str:
    """A fingerprint of the pseudonymisation key for manifests (never the key itself; a slow KDF)."""
    return keys.key_digest(key, PSEUDONYM_KEY)
