"""The Reddit build on stand-in dumps: planted truth recovered, privacy, cache, comment encoder."""

import json
import shutil

import numpy as np
import polars as pl
import pytest

from cet_model.comments import flatten_inputs
from cet_model.dataset import load_dataset
from cet_model.models import BCModel, CETModel, ETModel, load_model
from flows.lib.reddit.build import RedditParams, build
from flows.lib.reddit.cohort import pseudonym
from flows.lib.reddit.subreddits import SUBREDDITS
from flows.lib.standin import reddit as reddit_standin
from flows.lib.standin.reddit import compressor

pytestmark = pytest.mark.slow  # builds a whole dataset once per module (tens of seconds)

MONTHS = reddit_standin.Months("2015-09", "2016-06", "2016-12")  # includes string created_utc months
PARAMS = RedditParams(start="2015-09", comment_end="2016-06", submission_end="2016-12")
KEY = "test-pseudonym-key-9b2f61c04e8d37a5b1c6e0f2d4a8"


@pytest.fixture(scope="session")
def reddit_dumps(tmp_path_factory):
    return reddit_standin.generate(tmp_path_factory.mktemp("dumps") / "d", n_users=200, seed=4, months=MONTHS,
                                   progress=False)


@pytest.fixture(scope="session")
def embedding_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("embeddings")


@pytest.fixture(scope="module")
def reddit_ds(reddit_dumps, embedding_cache, tmp_path_factory):
    root = tmp_path_factory.mktemp("reddit")
    params = RedditParams(**{**PARAMS.__dict__, "embedding_cache": str(embedding_cache)})
    return build(reddit_dumps, root / "ds", root / "work", params, key=KEY), root / "work"


def test_the_build_recovers_the_planted_cohort_and_events(reddit_dumps, reddit_ds):
    path, _ = reddit_ds
    ds = load_dataset(path)
    truth = pl.read_parquet(reddit_dumps / "standin_truth.parquet").with_columns(
        id=pl.col("username").map_elements(lambda u: pseudonym(u, KEY.encode()), return_dtype=pl.String))
    ev = pl.read_parquet(path / "events.parquet")
    assert set(ev["id"]) == set(truth.filter("in_cohort")["id"])  # the paper's cohort rule, exactly
    j = ev.join(truth, on="id", suffix="_truth")
    for e in SUBREDDITS:
        assert (j[f"c_{e}"] == j[f"c_{e}_truth"]).all(), e
        occ = j.filter(pl.col(f"c_{e}") == 1)
        days = (occ[f"first_utc_{e}"] - occ["t20_utc"]).cast(pl.Float64) / 86400
        np.testing.assert_allclose(occ[f"t_true_{e}"], days, rtol=0, atol=1e-9)
    assert ds.manifest["time_unit"] == "days" and ds.event_names == SUBREDDITS
    assert ds.train.sequences.shape[1:] == (20, 384)
    norms = np.linalg.norm(ds.train.sequences, axis=2)
    np.testing.assert_allclose(norms, 1.0, atol=1e-4)  # MiniLM vectors are L2-normalised
    for split in (ds.train, ds.val, ds.test):
        assert ((split.S == 1) <= (split.C == 1)).all() and (split.C.sum(1) >= 1).all()  # everyone has an event


def test_quirks_are_skipped_and_counted(reddit_ds):
    path, _ = reddit_ds
    m = json.loads((path / "manifest.json").read_text())
    skipped = {}
    for s in m["scan"]:
        for k, v in s["skipped"].items():
            skipped[k] = skipped.get(k, 0) + v
    assert skipped["deleted_or_bot_author"] > 0 and skipped["deleted_or_removed_body"] > 0
    assert sum(s["lines"] for s in m["scan"]) > 10_000


def test_no_username_or_key_in_any_output(reddit_dumps, reddit_ds):
    path, work = reddit_ds
    names = pl.read_parquet(reddit_dumps / "standin_truth.parquet")["username"].to_list()
    blobs = []
    for folder in (path, work):
        for f in folder.rglob("*"):
            if f.is_file() and f.name != "pseudonym.key":
                if f.suffix == ".parquet":
                    blobs.append(pl.read_parquet(f).write_csv())
                blobs.append(f.read_bytes().decode("latin-1"))
    text = "\n".join(blobs)
    leaked = [n for n in names if n in text]
    assert not leaked, leaked[:3]
    assert KEY not in text


def test_nothing_that_finds_an_author_stays_on_disk_after_the_build(reddit_dumps, reddit_ds, embedding_cache):
    import hashlib

    from flows.lib.reddit.pushshift import iter_records

    _, work = reddit_ds
    ids, bodies = set(), set()
    for f in sorted(reddit_dumps.rglob("RC_*")):
        for r in iter_records(f, max_error_rate=1.0):
            if isinstance(r.get("id"), str) and len(r["id"]) >= 5:
                ids.add(r["id"])
            if isinstance(r.get("body"), str) and len(r["body"]) >= 30:
                bodies.add(r["body"])
    assert len(ids) > 1000 and len(bodies) > 1000
    assert not (work / "rc").exists() and not (work / "rs").exists() and not (work / "first.parquet").exists()
    files = [f for root in (work, embedding_cache) for f in root.rglob("*") if f.is_file()]
    assert any(f.suffix == ".npz" for f in files), "the cache holds the build's vectors"
    raw = b"\n".join(f.read_bytes() for f in files)
    text = raw.decode("latin-1")
    assert not [b for b in list(bodies)[:3000] if b in text], "a comment body is on disk"
    tables = "\n".join(pl.read_parquet(f).write_csv() for f in files if f.suffix == ".parquet")
    assert not [i for i in ids if i in tables], "a comment id is on disk"
    digests = [hashlib.sha256(b.encode()).digest() for b in bodies]
    assert not [d for d in digests if d in raw], "a plain hash of a comment body is on disk"


def test_rerun_embeds_nothing_new(reddit_dumps, reddit_ds, embedding_cache, tmp_path, caplog):
    params = RedditParams(**{**PARAMS.__dict__, "embedding_cache": str(embedding_cache)})
    with caplog.at_level("INFO", logger="flows.reddit.build"):
        again = build(reddit_dumps, tmp_path / "ds", tmp_path / "work", params, key=KEY)
    emb = json.loads((again / "manifest.json").read_text())["embedding"]
    assert emb["unique"] > 0
    assert f"{emb['unique']} unique, {emb['unique']} from the cache, 0 embedded now" in caplog.text
    first = load_dataset(reddit_ds[0])
    np.testing.assert_array_equal(load_dataset(again).train.sequences, first.train.sequences)


@pytest.fixture(scope="module")
def other_key_ds(reddit_dumps, embedding_cache, tmp_path_factory):
    """The same dumps built with another pseudonymisation key."""
    root = tmp_path_factory.mktemp("reddit-other-key")
    params = RedditParams(**{**PARAMS.__dict__, "embedding_cache": str(embedding_cache)})
    key = "another-pseudonym-key-3c9e1a7f5b2d8046e1f3a5c7b9d0"
    return build(reddit_dumps, root / "ds", root / "work", params, key=key)


def test_another_key_gives_other_ids(other_key_ds, reddit_ds):
    other = other_key_ds
    assert not set(pl.read_parquet(other / "events.parquet")["id"]) & set(
        pl.read_parquet(reddit_ds[0] / "events.parquet")["id"]
    )


@pytest.mark.parametrize("cls", [CETModel, ETModel, BCModel])
def test_models_read_comments_through_the_encoder(reddit_ds, cls, tmp_path):
    ds = load_dataset(reddit_ds[0])
    tr = ds.train
    spec = {"n_aux": tr.X.shape[1], "length": 20, "dim": 384, "width": 8}
    x = flatten_inputs(tr.X, tr.sequences)
    model = cls(hidden_sizes=(8,), max_epochs=2, comment_encoder=spec, seed=1).fit(x, tr.T, tr.S)
    p = model.predict_occurrence(x)
    assert p.shape == (len(tr), 9) and np.isfinite(p).all()
    again = load_model(model.save(tmp_path / "m"))
    np.testing.assert_allclose(again.predict_occurrence(x), p, rtol=1e-6)
    assert "comment_encoder" in (tmp_path / "m" / "config.json").read_text()
    with pytest.raises(ValueError, match="comment_encoder expects"):
        cls(hidden_sizes=(8,), max_epochs=1, comment_encoder=spec).fit(tr.X, tr.T, tr.S)


def test_generator_is_seeded_and_refuses_to_overwrite(tmp_path, capsys):
    from flows.reddit import main

    months = reddit_standin.Months("2016-01", "2016-02", "2016-03")
    args = [
        "generate",
        "--users",
        "30",
        "--start",
        "2016-01",
        "--comment-end",
        "2016-02",
        "--submission-end",
        "2016-03",
    ]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    assert (tmp_path / "a" / "sha256sums.txt").read_text() == (tmp_path / "b" / "sha256sums.txt").read_text()
    c = reddit_standin.generate(tmp_path / "c", n_users=30, seed=9, months=months, progress=False)
    assert (c / "sha256sums.txt").read_text() != (tmp_path / "a" / "sha256sums.txt").read_text()
    mtime = (c / "RC_2016-01.zst").stat().st_mtime_ns
    assert reddit_standin.ensure(c, 30, 9, months) == c and (c / "RC_2016-01.zst").stat().st_mtime_ns == mtime
    reddit_standin.ensure(c, 30, 10, months)  # other parameters: made again
    assert (c / "sha256sums.txt").read_text() != (tmp_path / "a" / "sha256sums.txt").read_text()
    assert json.loads((c / "standin.json").read_text())["seed"] == 10
    with pytest.raises(SystemExit):
        main([*args, "--out", str(tmp_path / "a")])
    assert "not empty" in capsys.readouterr().err


def test_malformed_lines_are_counted_then_fail_above_the_rate(tmp_path, embedding_cache):
    months = reddit_standin.Months("2015-12", "2016-03", "2016-05")
    dumps = reddit_standin.generate(tmp_path / "d", n_users=60, seed=1, months=months, malformed_rate=0.003,
                                    progress=False)
    params = RedditParams(start="2015-12", comment_end="2016-03", submission_end="2016-05",
                          embedding_cache=str(embedding_cache))
    ds = build(dumps, tmp_path / "ds", tmp_path / "w", params, key=KEY)
    scan = json.loads((ds / "manifest.json").read_text())["scan"]
    assert (
        sum(s["malformed"] for s in scan) == json.loads((dumps / "standin.json").read_text())["lines"]["malformed"] > 0
    )
    strict = RedditParams(**{**params.__dict__, "max_error_rate": 0.0})
    with pytest.raises(ValueError, match=r"R[CS]_\d{4}-\d{2}\.zst: \d+ malformed line"):
        build(dumps, tmp_path / "ds2", tmp_path / "w2", strict, key=KEY)
    assert not (tmp_path / "ds2").exists()


def test_the_dataset_does_not_depend_on_the_pseudonymisation_key(reddit_ds, other_key_ds):
    """Same dumps and seeds, another key: only the ids differ. (Rows, split and censoring once
    followed the pseudonyms, so a cold build with a fresh random key gave other results.)"""
    path, other = reddit_ds[0], other_key_ds
    for name in ("features.parquet", "events.parquet"):
        a, b = pl.read_parquet(path / name), pl.read_parquet(other / name)
        assert not a["id"].equals(b["id"])
        assert a.drop("id").equals(b.drop("id")), name
    # the other key names its own embedding cache, so its build embeds the texts again: PyTorch's thread count
    # then may differ from the first build's, and with it the float rounding of the matmuls (~1e-7)
    np.testing.assert_allclose(np.load(path / "sequences.npy"), np.load(other / "sequences.npy"), rtol=0, atol=1e-6)


def test_the_archive_layout_and_a_flat_folder_give_identical_datasets(reddit_dumps, reddit_ds, embedding_cache,
                                                                      tmp_path):
    """The public archives' layout: reddit/comments/RC_*.zst and reddit/submissions/RS_*.zst."""
    archive = tmp_path / "archive" / "reddit"
    for f in reddit_dumps.iterdir():
        if f.name.startswith(("RC_", "RS_")):
            sub = archive / ("comments" if f.name.startswith("RC_") else "submissions")
            sub.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, sub / f.name)
    params = RedditParams(**{**PARAMS.__dict__, "embedding_cache": str(embedding_cache)})
    again = build(archive.parent, tmp_path / "ds", tmp_path / "work", params, key=KEY)
    flat, _ = reddit_ds
    for name in ("features.parquet", "events.parquet", "sequences.npy"):
        assert (again / name).read_bytes() == (flat / name).read_bytes(), name
    fingerprints = [json.loads((p / "manifest.json").read_text())["source_fingerprints"] for p in (again, flat)]
    assert fingerprints[0] == fingerprints[1]
    # two roots, each holding half of the files, find the same
    half = tmp_path / "second-root" / "submissions"
    shutil.move(str(archive / "submissions"), str(half))
    third = build([archive.parent, half.parent], tmp_path / "ds3", tmp_path / "work3", params, key=KEY)
    assert (third / "events.parquet").read_bytes() == (flat / "events.parquet").read_bytes()


def test_a_month_found_twice_is_resolved_or_refused(reddit_dumps, tmp_path):
    from flows.lib.reddit.build import local_dumps
    from flows.lib.reddit.pushshift import DumpError

    name = next(f.name for f in sorted(reddit_dumps.iterdir()) if f.name.startswith("RC_"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for f in reddit_dumps.iterdir():
        if f.name.startswith(("RC_", "RS_")):
            shutil.copy2(f, tmp_path / "a" / f.name)
    (tmp_path / "b" / name.replace(".zst", ".bz2")).write_bytes(b"")  # another compression: .zst preferred
    rs, rc = local_dumps([tmp_path / "a", tmp_path / "b"], PARAMS)
    assert all(f.path.endswith(".zst") for f in rs + rc)
    shutil.copy2(tmp_path / "a" / name, tmp_path / "b" / name)  # the same file twice: which one is meant?
    with pytest.raises(DumpError, match=f"{name} found twice: .*a/{name} and .*b/{name}"):
        local_dumps([tmp_path / "a", tmp_path / "b"], PARAMS)


def test_the_prefiltered_scan_equals_parsing_every_line(tmp_path):
    """The byte-level prefilter only skips lines that cannot matter: same parquet, same counts."""
    import polars as pl

    from flows.lib.reddit import cohort

    months = reddit_standin.Months("2016-11", "2017-02", "2017-04")  # the 2017 field set included
    dumps = reddit_standin.generate(tmp_path / "d", n_users=150, seed=3, months=months, malformed_rate=0.002,
                                    progress=False)
    key = b"k"
    outs = {}
    for fast in (True, False):
        rs = sorted(dumps.glob("RS_*.zst"))
        stats = [cohort.scan_submissions(f, tmp_path / f"rs{fast}" / f.name, key, 2**40, 0.05, prefilter=fast)
                 for f in rs]
        first = cohort.combine_submissions([tmp_path / f"rs{fast}" / f.name for f in rs], tmp_path / f"f{fast}.pq")
        candidates = cohort.first_any(first)
        stats += [cohort.scan_comments(f, tmp_path / f"rc{fast}" / f.name, key, candidates, 2**40, 0.05,
                                       prefilter=fast) for f in sorted(dumps.glob("RC_*.zst"))]
        outs[fast] = (first, [pl.read_parquet(p) for p in sorted((tmp_path / f"rc{fast}").iterdir())], stats)
    assert outs[True][0].equals(outs[False][0])
    assert all(a.equals(b) for a, b in zip(outs[True][1], outs[False][1], strict=True))
    assert outs[True][2] == outs[False][2]
    assert sum(s["malformed"] for s in outs[True][2]) > 0


def test_a_nested_subreddit_cannot_hide_the_top_level_one(tmp_path):
    from collections import Counter

    from flows.lib.reddit.cohort import target_subreddit
    from flows.lib.reddit.pushshift import FieldFilter, iter_records

    lines = [b'{"author":"a","crosspost_parent_list":[{"subreddit":"pics"}],"subreddit":"Anxiety","title":"t"}',
             b'{"author":"b","subreddit":"pics","title":"t"}',
             b'{"author":"c","title":"promoted, no subreddit"}',
             b'{"author":"d","subreddit":"Anxi\\u0065ty","title":"escaped"}',
             b'{"author":"e","subreddit":"ANXIETY","title":"t"}']
    path = tmp_path / "RS_2018-01.zst"
    with open(path, "wb") as fh, compressor().stream_writer(fh, closefd=False) as w:
        w.write(b"\n".join(lines) + b"\n")
    got = [r["author"] for r in iter_records(path, select=FieldFilter("subreddit", target_subreddit, Counter()))]
    assert got == ["a", "c", "d", "e"]  # only b, surely elsewhere, is skipped unparsed


def test_new_dumps_score_every_user_like_the_training_rows(reddit_dumps, reddit_ds, embedding_cache, tmp_path,
                                                          monkeypatch):
    """predict --dumps: every author with 20 usable comments is scored; the training cohort's
    users get the scores of their dataset rows (same comments, embeddings and scaling)."""
    from flows.lib.modeling.predict import score, score_reddit_raw
    from flows.lib.modeling.train_eval import TrainParams, train_version

    ds_dir, _ = reddit_ds
    version, _ = train_version(ds_dir, tmp_path / "models", "reddit",
                               TrainParams(models=("CET",), hidden=8, max_epochs=2))
    a = pl.read_parquet(score(ds_dir / "features.parquet", version, tmp_path / "a.parquet",
                              sequences=ds_dir / "sequences.npy", horizons=(30,)))
    shards = sorted(embedding_cache.rglob("shard-*.npz"))
    b_path, counts = score_reddit_raw(reddit_dumps, version, tmp_path / "b.parquet", tmp_path / "w", KEY.encode(),
                                      embedding_cache=embedding_cache, horizons=(30,), keep_embeddings=False)
    b = pl.read_parquet(b_path)
    assert set(shards) <= set(embedding_cache.rglob("shard-*.npz"))  # a cache the caller names stays
    # the vectors of the users' comments cached in the work folder go when scoring is done (predict's
    # default work folder, beside the scores); kept, a rerun embeds nothing again
    # (as flows.predict --dumps scores them: the key from CET_PSEUDONYM_KEY, no cache named)
    from flows.lib.modeling.score_command import dumps_scores

    monkeypatch.setenv("CET_PSEUDONYM_KEY", KEY)
    monkeypatch.delenv("CET_EMBEDDING_CACHE", raising=False)
    work = tmp_path / "own-work"
    shutil.copytree(embedding_cache, work / "embeddings")
    for keep in (True, False):
        again = dumps_scores(str(reddit_dumps), str(version), str(tmp_path / f"{keep}.parquet"), str(work),
                             [0.1, 0.5, 0.9], "cpu", [30.0], keep_embeddings=keep)
        assert pl.read_parquet(again).equals(b)
        assert (work / "embeddings").exists() == keep
    assert not work.exists()  # nothing else was there
    assert counts["scored"] == b.height > a.height  # also users who never submitted to the nine
    assert counts["authors_with_usable_comments"] == counts["scored"] + counts["left_out_fewer_than_20_comments"]
    assert counts["skipped_rows"]["deleted_or_bot_author"] > 0
    j = a.join(b, on="id", suffix="_raw")
    assert j.height == a.height  # every training user is scored, under the same pseudonym
    for e in SUBREDDITS:
        np.testing.assert_allclose(j[f"p_{e}_raw"].to_numpy(), j[f"p_{e}"].to_numpy(), atol=1e-5, rtol=0)
        # risk within 30 days, from the comment sequences too: the same either way, at most P(ever)
        np.testing.assert_allclose(j[f"risk_30_{e}_raw"].to_numpy(), j[f"risk_30_{e}"].to_numpy(), atol=1e-5)
        assert (j[f"risk_30_{e}"] <= j[f"p_{e}"] + 1e-9).all()
    truth = pl.read_parquet(reddit_dumps / "standin_truth.parquet")
    assert not set(truth["username"]) & set(b["id"])  # pseudonyms only
    # a version trained before builds recorded their featurisation is refused, with what to do
    data = json.loads((version / "data.json").read_text())
    (version / "data.json").write_text(json.dumps({**data, "featurization": None}))
    with pytest.raises(ValueError, match="no Reddit featurisation record.*rebuild the dataset and retrain"):
        score_reddit_raw(reddit_dumps, version, tmp_path / "c.parquet", tmp_path / "w", KEY.encode())
    assert not (tmp_path / "c.parquet").exists()


def test_users_split_by_hash_keep_their_split_when_users_are_added():
    """``split_method="hash"`` (``--split-method hash``): a user's split depends on the seed and
    the user's key alone; an unknown method is refused by the parameters."""
    from cet_model.dataset import assign_splits as split_users  # what the build splits users with

    keys = np.array([f"t1_{i:06x}" for i in range(3000)])
    first = split_users(keys[:2000], seed=0, method="hash")
    assert (split_users(keys, seed=0, method="hash")[:2000] == first).all()
    assert (split_users(keys, seed=0)[:2000] != split_users(keys[:2000], seed=0)).any()  # random: reshuffled
    with pytest.raises(ValueError, match=r"split_method must be one of \('random', 'hash'\), got 'by-user'"):
        RedditParams(split_method="by-user")
