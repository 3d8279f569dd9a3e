"""Pushshift stand-in dumps: monthly RC_/RS_ ``.zst`` files in the real format, with planted truth.

    generate(out_dir, n_users=1000)

Format: one compact JSON object per line, every line ``\\n``-terminated, zstd frames with a
2 GiB window (window_log 31, long-distance matching, checksum, no content size; level 3),
which default decoders refuse exactly as they refuse the real dumps. Field sets and quirks
follow the year (``_comment``/``_submission``): created_utc is a string in RC 2007-11 ...
2015-11 and RS 2014-01 ... 2015-11; ``name``/``ups``/``downs`` in old comment months;
``edited`` is false or an edit time; a rare null score in RC 2017-10/11; RS rows without
``author`` (2011-2013) or without ``subreddit`` (promoted posts, 2014-2017); ``[deleted]``
authors and ``[deleted]``/``[removed]`` bodies; AutoModerator; multi-byte UTF-8 text.

Planted structure: each user has interests over the nine subreddits (Dirichlet). Interests
shape the comment text (topical phrases), whether the user ever submits to each of the nine
(sigmoid of the interest) and how soon after their 20th valid comment (log-normal delay,
shorter with more interest). Some users submit to one of the nine before their 20th comment
and some comment too little: the cohort rule must drop them. ``standin_truth.parquet`` holds,
per user, the interests, the cohort flag, the 20th comment's time and per subreddit the
occurrence and first submission time *as they appear in the files*.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import zstandard
from tqdm.auto import tqdm

from flows.lib.infra.download import sha256_file
from flows.lib.infra.folders import publish, refuse_non_empty, temporary_sibling
from flows.lib.reddit.months import month_bounds, month_range
from flows.lib.reddit.subreddits import SUBREDDITS
from flows.lib.standin.reddit_text import (
    ADJECTIVES,
    GENERAL_PHRASES,
    GENERAL_SUBREDDITS,
    NOUNS,
    TEXT_STYLES,
    TOPIC_PHRASES,
    TOPIC_SUBREDDITS,
    realistic_texts,
)

log = logging.getLogger("flows.reddit.standin")
GENERATOR_VERSION = 3  # 2: timing by activity, driver subreddits; 3: the 2017 comment field set
K = len(SUBREDDITS)
ROWS_PER_BLOCK = 200_000
BASE_RATE = np.array([0.07, 0.09, 0.14, 0.2, 0.3, 0.25, 0.08, 0.06, 0.25])  # paper Table 2-like
MEDIAN_DELAY_DAYS = np.array([120, 100, 200, 90, 150, 250, 110, 60, 220], dtype=float)
# the subreddit whose planted occurrence makes a first post in subreddit k come sooner
DRIVER_OF = {"ADHD": "Anxiety", "Anxiety": "depression", "books": "LifeProTips", "depression": "Anxiety",
             "Fitness": "LifeProTips", "LifeProTips": "books", "mentalhealth": "depression",
             "SuicideWatch": "depression", "worldnews": "books"}
COUPLING_SHIFT = -0.8  # log-delay shift when the driver occurs (x 0.45 in time)
ACTIVITY_WEIGHT = 1.0  # log-delay per log comment rate
DRIVER = np.array([SUBREDDITS.index(DRIVER_OF[s]) for s in SUBREDDITS])
SUBREDDIT_IDS = {
    s: f"t5_{_i + 2 * 36**4:x}"
    for _i, s in enumerate(SUBREDDITS + GENERAL_SUBREDDITS + sorted({t for ts in TOPIC_SUBREDDITS for t in ts}))
}


@dataclass(frozen=True)
class Months:
    start: str = "2015-01"  # first month of both kinds
    comment_end: str = "2017-11"  # the paper counts comments up to Nov 2017
    submission_end: str = "2020-01"  # and submissions up to Jan 2020

    def all(self) -> list[str]:
        return month_range(self.start, max(self.comment_end, self.submission_end))


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    s = ""
    while True:
        n, r = divmod(n, 36)
        s = digits[r] + s
        if n == 0:
            return s


def compressor() -> zstandard.ZstdCompressor:
    """The real dumps' framing: a 2 GiB window, long-distance matching, checksum, no content size.

    The long-distance matcher's hash table is 2^20 entries (8 MiB) instead of zstd's default for a
    2^31 window (2^24, 128 MiB, zeroed page by page for every file): the frames decode the same and
    carry the same header, and generation takes a sixth of the time at 150 users (docs/datasets.md).
    """
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=31, enable_ldm=True, ldm_hash_log=20,
                                                            write_checksum=True, write_content_size=False)
    return zstandard.ZstdCompressor(compression_params=params)


@dataclass
class Users:
    names: list[str]
    interest: np.ndarray  # (U, K)
    rate: np.ndarray  # comments per month
    start: np.ndarray  # epoch seconds of the first activity
    occur: np.ndarray  # (U, K) planted: will submit
    delay_days: np.ndarray  # (U, K) after the 20th valid comment
    early: np.ndarray  # (U,) epoch of a submission to one of the nine before the 20th comment, or 0
    early_sub: np.ndarray  # which of the nine


def make_users(n: int, months: Months, seed: int) -> Users:
    rng = np.random.default_rng([seed, 1])
    names = sorted(
        {f"{rng.choice(ADJECTIVES)}_{rng.choice(NOUNS)}{rng.integers(0, 10**6)}" for _ in range(int(n * 1.2) + 10)}
    )
    names = list(rng.permutation(names)[:n])
    interest = rng.dirichlet(np.full(K, 0.35), n)
    rate = np.exp(rng.normal(np.log(8), 0.7, n))
    t0, _ = month_bounds(months.start)
    _, t1 = month_bounds(months.comment_end)
    start = t0 + (rng.random(n) * 0.6 * (t1 - t0)).astype(np.int64)
    logit = np.log(BASE_RATE / (1 - BASE_RATE)) + 6.0 * (interest - 1 / K)
    occur = rng.random((n, K)) < 1 / (1 + np.exp(-logit))
    # timing: active users (more comments a month, visible as shorter gaps between their comments)
    # act sooner, interest matters less than for occurrence; and a user who will also post in the
    # driver subreddit of k posts in k sooner (the dependence the paper's model is for)
    log_delay = (np.log(MEDIAN_DELAY_DAYS) - ACTIVITY_WEIGHT * (np.log(rate) - np.log(8))[:, None]
                 - 1.5 * (interest - 1 / K) + COUPLING_SHIFT * occur[:, DRIVER])
    delay = np.exp(log_delay + 0.6 * rng.standard_normal((n, K)))
    early_user = rng.random(n) < 0.08
    early = np.where(early_user, start + (rng.random(n) * 20 * 86400).astype(np.int64), 0)
    early_sub = rng.integers(0, K, n)
    return Users(names, interest, rate, start, occur, np.maximum(delay, 0.05), early, early_sub)


def _comment(month: str, author: str, body: str, ts: int, cid: int, sub: str, rng) -> dict:
    created = str(ts) if "2007-11" <= month <= "2015-11" else ts
    score = int(rng.integers(-5, 50))
    if month in ("2017-10", "2017-11") and rng.random() < 0.001:
        score = None
    edited = False if rng.random() < 0.97 else ts + int(rng.integers(60, 86400))
    obj = {"author": author, "author_flair_css_class": None, "author_flair_text": None, "body": body,
           "controversiality": int(rng.random() < 0.02), "created_utc": created, "distinguished": None,
           "edited": edited, "gilded": 0, "id": _base36(cid), "link_id": f"t3_{_base36(cid // 7 + 1000)}",
           "parent_id": f"t3_{_base36(cid // 7 + 1000)}", "retrieved_on": ts + 86400 * 30, "score": score,
           "stickied": False, "subreddit": sub, "subreddit_id": SUBREDDIT_IDS.get(sub, "t5_2qh1i")}
    if month <= "2015-07":
        obj.update(name=f"t1_{_base36(cid)}", ups=score, downs=0, archived=False, score_hidden=False)
    if month >= "2017-01":  # the fields real comments carry from 2017 (no random draws: earlier rows unchanged)
        link = _base36(cid // 7 + 1000)
        obj.update(can_gild=True, collapsed=False, collapsed_reason=None, is_submitter=False, no_follow=True,
                   permalink=f"/r/{sub}/comments/{link}/{_slug(body)}/{_base36(cid)}/", send_replies=True,
                   subreddit_name_prefixed=f"r/{sub}", subreddit_type="public")
    return obj


@functools.lru_cache(maxsize=1 << 16)  # bodies repeat (phrase combinations): most calls are hits
def _slug(text: str) -> str:
    """The title slug of a permalink: lower-case words joined by '_', at most 50 characters."""
    words = "".join(c.lower() if c.isalnum() else " " for c in text).split()
    return "_".join(words)[:50] or "comment"


def _submission(month: str, author: str | None, title: str, selftext: str, ts: int, sid: int, sub: str | None) -> dict:
    created = str(ts) if "2014-01" <= month <= "2015-11" else ts
    sid36 = _base36(sid)
    obj = {"archived": False, "author": author, "author_flair_css_class": None, "author_flair_text": None,
           "created_utc": created, "distinguished": None, "domain": f"self.{sub}" if sub else "example.com",
           "edited": False, "gilded": 0, "hide_score": False, "id": sid36, "is_self": bool(selftext),
           "link_flair_css_class": None, "link_flair_text": None, "locked": False, "media": None,
           "num_comments": 3, "over_18": False, "permalink": f"/r/{sub}/comments/{sid36}/",
           "quarantine": False, "retrieved_on": ts + 86400 * 30, "score": 1, "selftext": selftext,
           "stickied": False, "subreddit": sub, "subreddit_id": SUBREDDIT_IDS.get(sub) if sub else None,
           "thumbnail": "self", "title": title, "url": f"https://www.reddit.com/r/{sub}/comments/{sid36}/"}
    if month >= "2018-01":
        obj.update(author_fullname=f"t2_{sid36}", is_video=False, pinned=False, subreddit_type="public",
                   whitelist_status="all_ads")
    if author is None:
        del obj["author"]
    if sub is None:
        del obj["subreddit"]
        obj["subreddit_id"] = None
    return obj


def _topics(interest: np.ndarray, rng, p_topical: float = 0.6) -> np.ndarray:
    """Per comment: a topic drawn from the author's interests (60 %), or -1 for general chatter."""
    cum = np.cumsum(interest, axis=1)
    topic = (rng.random(len(interest))[:, None] > cum).sum(axis=1).clip(0, K - 1)
    return np.where(rng.random(len(interest)) < p_topical, topic, -1)


def _texts(topic: np.ndarray, rng) -> list[str]:
    """Two or three distinct phrases of each comment's topic (general chatter for -1)."""
    n = topic.size
    n_phr = rng.integers(2, 4, n)
    pick_t = np.argsort(rng.random((n, len(TOPIC_PHRASES[0]))), axis=1)[:, :3]
    pick_g = np.argsort(rng.random((n, len(GENERAL_PHRASES))), axis=1)[:, :3]
    out = []
    for i in range(n):
        tp = topic[i]
        src, idx = (TOPIC_PHRASES[tp], pick_t[i]) if tp >= 0 else (GENERAL_PHRASES, pick_g[i])
        out.append(". ".join(src[j] for j in idx[:n_phr[i]]) + ".")
    return out


def _text(rng, topic: int | None) -> str:
    phrases = TOPIC_PHRASES[topic] if topic is not None else GENERAL_PHRASES
    k = int(rng.integers(2, 4))
    return ". ".join(phrases[i] for i in rng.choice(len(phrases), k, replace=False)) + "."


class _ZstWriter:
    def __init__(self, path: Path):
        self.path, self.tmp = path, path.with_name(f".{path.name}.tmp-{os.getpid()}")
        self._fh = open(self.tmp, "wb")
        self._w = compressor().stream_writer(self._fh, closefd=False)
        self.lines = 0

    def write(self, line: bytes) -> None:
        self._w.write(line + b"\n")
        self.lines += 1

    def close(self) -> None:
        self._w.flush(zstandard.FLUSH_FRAME)
        self._w.close()
        self._fh.close()
        os.replace(self.tmp, self.path)


def ensure(out_dir, n_users: int, seed: int, months: Months, text: str = "phrases") -> Path:
    """The stand-in at ``out_dir``, generated only if it is not there with these parameters."""
    out = Path(out_dir)
    try:
        m = json.loads((out / "standin.json").read_text())
    except (OSError, json.JSONDecodeError):
        m = {}
    if (m.get("version"), m.get("n_users"), m.get("seed"), m.get("months"), m.get("text", "phrases")) == (
            GENERATOR_VERSION, n_users, seed, months.__dict__, text):
        log.info("Reddit stand-in reused at %s", out)
        return out
    return generate(out, n_users=n_users, seed=seed, months=months, progress=False, overwrite=True, text=text)


def ensure_for_build(dest: str, n_users: int, seed: int, start: str | None, comment_end: str, submission_end: str,
                     text: str = "phrases") -> str:
    """The Reddit build's stand-in step: ``ensure`` from the build's months (``start`` None: the
    stand-in's first month)."""
    months = Months(start or Months().start, comment_end, submission_end)
    return str(ensure(Path(dest), n_users, seed, months, text))


def generate_command(ap, args) -> str:
    """``python -m flows.reddit generate``: stand-in dumps in the real format; returns their folder
    (a bad option or a folder in the way is a usage error)."""
    try:
        return str(generate(args.out, n_users=args.users, seed=args.seed,
                            months=Months(args.start, args.comment_end, args.submission_end),
                            malformed_rate=args.malformed_rate, overwrite=args.force, text=args.text))
    except (ValueError, FileExistsError) as exc:
        ap.error(str(exc))


def generate(out_dir, n_users: int = 1000, seed: int = 0, months: Months | None = None,
             malformed_rate: float = 0.0, progress: bool = True, overwrite: bool = False,
             text: str = "phrases") -> Path:
    """Write RC_/RS_ monthly dumps plus ``sha256sums.txt``, ``standin.json`` and the truth.

    ``text``: the cohort's comment bodies. ``"phrases"`` (default): two or three topical
    phrases, short and often repeated (cheap to embed; what the main job and the tests use).
    ``"realistic"``: real comment length with a long tail and almost no repeats
    (``reddit_text.realistic_texts``), for measuring the embedding stage as it would run on
    the real archive; it costs several times more to embed.
    """
    months = months or Months()
    if text not in TEXT_STYLES:
        raise ValueError(f"text must be one of {list(TEXT_STYLES)}, got {text!r}")
    if n_users < 1:
        raise ValueError(f"n_users must be >= 1, got {n_users}")
    if not months.start <= months.comment_end <= months.submission_end:
        raise ValueError(f"need start <= comment_end <= submission_end, got {months}")
    out = refuse_non_empty(Path(out_dir), overwrite)
    started = time.perf_counter()
    users = make_users(n_users, months, seed)
    all_months = months.all()
    _, comment_end_ts = month_bounds(months.comment_end)
    _, sub_end_ts = month_bounds(months.submission_end)

    state = _State(users, sub_end_ts, text, malformed_rate)
    tmp = temporary_sibling(out)
    try:
        for mi, month in enumerate(tqdm(all_months, desc="Reddit stand-in", unit="month", disable=not progress)):
            rng = np.random.default_rng([seed, 2, mi])
            if month <= months.comment_end:
                state.comment_month(tmp / f"RC_{month}.zst", month, rng)
            if month <= months.submission_end:
                state.submission_month(tmp / f"RS_{month}.zst", month, mi, rng)
        pending, valid_count, before_early, t20, first_sub, stats = (
            state.pending, state.valid_count, state.before_early, state.t20, state.first_sub, state.stats)
        if pending:
            raise RuntimeError(f"internal: submissions left for months {sorted(pending)}")

        in_cohort = _cohort(users, valid_count, before_early, t20, first_sub, comment_end_ts)
        truth = {
            "username": users.names,
            "in_cohort": in_cohort,
            "t20_utc": pl.Series(np.where(t20 > 0, t20, 0)).replace(0, None),
        }
        truth.update({f"interest_{s}": users.interest[:, k] for k, s in enumerate(SUBREDDITS)})
        for k, s in enumerate(SUBREDDITS):
            truth[f"c_{s}"] = (first_sub[:, k] > 0).astype(np.int8)
            truth[f"first_utc_{s}"] = pl.Series(first_sub[:, k]).replace(0, None)
        pl.DataFrame(truth).write_parquet(tmp / "standin_truth.parquet")
        files = sorted(p.name for p in tmp.glob("R[CS]_*.zst"))
        sums = {f: sha256_file(tmp / f) for f in files}
        (tmp / "sha256sums.txt").write_text("".join(f"{sums[f]}  {f}\n" for f in files))
        manifest = {
            "generator": "flows.lib.standin.reddit",
            "version": GENERATOR_VERSION,
            "n_users": n_users,
            "text": text,
            "seed": seed,
            "months": months.__dict__,
            "files": len(files),
            "lines": stats,
            "cohort_users": int(in_cohort.sum()),
            "prevalence_in_cohort": {
                s: round(float((first_sub[in_cohort, k] > 0).mean()), 4) if in_cohort.any() else None
                for k, s in enumerate(SUBREDDITS)
            },
            "structure": {
                "interest": "Dirichlet(0.35) over the nine",
                "occurrence_logit": "logit(base) + 6 (interest - 1/9)",
                "delay_days": "exp(log median - 1.0 (log rate - log 8) - 1.5 (interest - 1/9) "
                "- 0.8 c_driver + 0.6 eps) after the 20th valid comment",
                "driver": DRIVER_OF,
                "base_rate": dict(zip(SUBREDDITS, BASE_RATE.tolist(), strict=True)),
                "median_delay_days": dict(zip(SUBREDDITS, MEDIAN_DELAY_DAYS.tolist(), strict=True)),
            },
            "seconds": round(time.perf_counter() - started, 1),
        }
        (tmp / "standin.json").write_text(json.dumps(manifest, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    publish(tmp, out)
    return out


class _State:
    """What the stand-in's months share while they are written: each user's valid comments so
    far (and before an early submission), the time of the 20th, the first submission to each of
    the nine, the event submissions still to write, the line counts and the next ids."""

    def __init__(self, users: Users, sub_end_ts: int, text: str, malformed_rate: float):
        n = len(users.names)
        self.users, self.n, self.sub_end_ts, self.text, self.malformed_rate = users, n, sub_end_ts, text, malformed_rate
        self.valid_count = np.zeros(n, np.int64)  # valid comments so far
        self.before_early = np.zeros(n, np.int64)  # valid comments before the early submission
        self.t20 = np.zeros(n, np.int64)
        self.first_sub = np.zeros((n, K), np.int64)  # epoch of the first submission to each of the nine (0 = none)
        self.pending: dict[str, list] = {}  # month -> [(ts, user, k)] event submissions
        for u in np.flatnonzero(users.early > 0):
            m = _month_of(int(users.early[u]))
            self.pending.setdefault(m, []).append((int(users.early[u]), int(u), int(users.early_sub[u])))
        self.stats = {"comments": 0, "submissions": 0, "malformed": 0, "deleted_author": 0}
        self.cid, self.sid = 36**5, 36**4

    def comment_month(self, path: Path, month: str, rng) -> None:
        """One RC_ dump: the users' comments (with the events their 20th valid comment sets off)
        and the background of other authors."""
        users = self.users
        w = _ZstWriter(path)
        m0, m1 = month_bounds(month)
        active = np.flatnonzero(users.start < m1)
        frac = np.clip((m1 - np.maximum(users.start[active], m0)) / (m1 - m0), 0, 1)
        counts = rng.poisson(users.rate[active] * frac)
        who = np.repeat(active, counts)
        lo = np.maximum(users.start[who], m0)
        ts = lo + (rng.random(who.size) * (m1 - lo)).astype(np.int64)
        order = np.lexsort((ts, who))
        who, ts = who[order], ts[order]
        removed = rng.random(who.size) < 0.02  # author kept, body removed by a moderator
        valid = ~removed
        self._count_valid(who, ts, valid)
        # rows are made and written in blocks (each sorted by time): memory stays bounded at any scale
        for lo in range(0, who.size, ROWS_PER_BLOCK):
            blk = slice(lo, lo + ROWS_PER_BLOCK)
            topic = _topics(users.interest[who[blk]], rng)
            bodies = _texts(topic, rng) if self.text == "phrases" else realistic_texts(topic, rng)
            rows = []
            for i, (u, t) in enumerate(zip(who[blk].tolist(), ts[blk].tolist(), strict=True)):
                tp = topic[i]
                sub = TOPIC_SUBREDDITS[tp][i % 3] if tp >= 0 else GENERAL_SUBREDDITS[i % len(GENERAL_SUBREDDITS)]
                body = "[removed]" if removed[lo + i] else bodies[i]
                rows.append((t, _comment(month, users.names[u], body, t, self.cid, sub, rng)))
                self.cid += 1
            _write_rows(w, rows, rng, self.malformed_rate, self.stats)
        self._background(w, month, max(1, who.size // 15), rng)
        self.stats["comments"] += w.lines
        w.close()

    def _count_valid(self, who, ts, valid) -> None:
        """The running count of valid comments per user (rows sorted by user, then time): a 20th
        schedules the user's event submissions."""
        users = self.users
        group_start = np.r_[True, who[1:] != who[:-1]] if who.size else np.zeros(0, bool)
        cum = np.cumsum(valid)
        base = np.maximum.accumulate(np.where(group_start, np.r_[0, cum[:-1]] if cum.size else cum, 0))
        running = self.valid_count[who] + cum - base
        hit = valid & (running == 20)
        for u, t in zip(who[hit].tolist(), ts[hit].tolist(), strict=True):
            self.t20[u] = t
            for k in np.flatnonzero(users.occur[u]):
                ft = t + int(users.delay_days[u, k] * 86400)
                if ft < self.sub_end_ts:
                    self.pending.setdefault(_month_of(ft), []).append((ft, u, int(k)))
        self.valid_count += np.bincount(who[valid], minlength=self.n)
        early_rows = valid & (users.early[who] > 0) & (ts < users.early[who])
        self.before_early += np.bincount(who[early_rows], minlength=self.n)

    def _background(self, w: _ZstWriter, month: str, count: int, rng) -> None:
        """Deleted authors, AutoModerator, light users with few comments."""
        m0, m1 = month_bounds(month)
        rows = []
        for _ in range(count):
            t = int(m0 + rng.random() * (m1 - m0))
            kind = rng.random()
            author = ("[deleted]" if kind < 0.7
                      else "AutoModerator" if kind < 0.85 else f"lurker_{rng.integers(0, 10**5)}")
            body = ("[deleted]" if rng.random() < 0.5 else "[removed]") if author == "[deleted]" else _text(rng, None)
            self.stats["deleted_author"] += author == "[deleted]"
            rows.append((t, _comment(month, author, body, t, self.cid, GENERAL_SUBREDDITS[0], rng)))
            self.cid += 1
            if len(rows) >= ROWS_PER_BLOCK:
                _write_rows(w, rows, rng, self.malformed_rate, self.stats)
                rows = []
        _write_rows(w, rows, rng, self.malformed_rate, self.stats)

    def submission_month(self, path: Path, month: str, mi: int, rng) -> None:
        """One RS_ dump: the event submissions due this month, later and other posts, and one
        submission to the nine by a [deleted] author (never an event)."""
        users, first_sub = self.users, self.first_sub
        w = _ZstWriter(path)
        m0, m1 = month_bounds(month)
        rows = []
        for ft, u, k in self.pending.pop(month, []):
            if first_sub[u, k] == 0 or ft < first_sub[u, k]:
                first_sub[u, k] = ft
            title = _text(rng, k).split(".")[0]
            rows.append((ft, _submission(month, users.names[u], title, _text(rng, k), ft, self.sid, SUBREDDITS[k]
                                         if rng.random() < 0.8 else SUBREDDITS[k].lower())))
            self.sid += 1
        for _ in range(max(3, self.n // 20)):  # later submissions to the nine by users who posted there, and others
            rows.append(self._other_submission(month, m0, m1, rng))
        t = int(m0 + rng.random() * (m1 - m0))
        rows.append((t, _submission(month, "[deleted]", "gone", "[deleted]", t, self.sid, SUBREDDITS[mi % K])))
        self.sid += 1
        _write_rows(w, rows, rng, self.malformed_rate, self.stats)
        self.stats["submissions"] += w.lines
        w.close()

    def _other_submission(self, month: str, m0: int, m1: int, rng) -> tuple:
        t = int(m0 + rng.random() * (m1 - m0))
        u = int(rng.integers(0, self.n))
        ks = np.flatnonzero((self.first_sub[u] > 0) & (self.first_sub[u] < t))
        sub = SUBREDDITS[int(rng.choice(ks))] if ks.size and rng.random() < 0.5 else \
            GENERAL_SUBREDDITS[int(rng.integers(0, len(GENERAL_SUBREDDITS)))]
        author: str | None = self.users.names[u]
        if rng.random() < 0.05:
            author = "[deleted]"
        if "2011-01" <= month <= "2013-12" and rng.random() < 0.001:
            author = None
        subname: str | None = sub
        if "2014-01" <= month <= "2017-12" and rng.random() < 0.001:
            subname = None  # a promoted post
        selftext = ["", "[deleted]", "[removed]", _text(rng, None)][int(rng.integers(0, 4))]
        row = (t, _submission(month, author, _text(rng, None)[:60], selftext, t, self.sid, subname))
        self.sid += 1
        return row


def _cohort(users: Users, valid_count, before_early, t20, first_sub, comment_end_ts) -> np.ndarray:
    """The paper's rule on the truth: >= 20 valid comments before the first submission to any of the nine."""
    any_event = (first_sub > 0).any(axis=1)
    has20 = (t20 > 0) & (t20 < comment_end_ts)
    firsts = np.where(first_sub > 0, first_sub, np.iinfo(np.int64).max).min(axis=1)
    early_first = (users.early > 0) & (users.early <= firsts)
    return any_event & has20 & ~early_first | (early_first & (before_early >= 20) & has20)


def _write_rows(w: _ZstWriter, rows: list, rng, malformed_rate: float, stats: dict) -> None:
    rows.sort(key=lambda r: r[0])
    # pre-2023 dumps are not guaranteed time-sorted: swap a few neighbours
    for i in range(0, len(rows) - 1, 50):
        rows[i], rows[i + 1] = rows[i + 1], rows[i]
    for _, obj in rows:
        w.write(orjson.dumps(obj))
        if malformed_rate and rng.random() < malformed_rate:
            w.write(b'{"author": "broken", "body": "truncated li')
            stats["malformed"] += 1


def _month_of(ts: int) -> str:
    t = time.gmtime(ts)
    return f"{t.tm_year:04d}-{t.tm_mon:02d}"
