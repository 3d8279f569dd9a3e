"""build-reddit-features end to end: stand-in dumps served over loopback HTTP."""

import json

import polars as pl
import pytest

from cet_model.dataset import load_dataset
from flows.lib.infra import stage_cache
from flows.lib.infra.download import sha256_file
from flows.lib.infra.stage_cache import refuse_standin_over_real
from flows.lib.reddit import download as reddit_download
from flows.lib.standin import reddit as reddit_standin
from flows.reddit import main
from tests.http_server import FileServer

MONTHS = reddit_standin.Months("2015-10", "2016-03", "2016-06")
ARGS = ["--start", "2015-10", "--comment-end", "2016-03", "--submission-end", "2016-06"]


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    return reddit_standin.generate(tmp_path_factory.mktemp("served") / "d", n_users=120, seed=2, months=MONTHS,
                                   progress=False)


def served(monkeypatch, server: bool) -> None:
    """The test harness's server named as a user names theirs (``server``: the build is a flow run), or
    none configured (the command builds in its own process)."""
    from prefect.settings import PREFECT_API_URL

    from flows.lib.infra.cli import without_server

    if server:
        monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
    else:
        monkeypatch.delenv("PREFECT_API_URL", raising=False)
    assert without_server() is not server


@pytest.mark.parametrize(("ranges", "server"), [(True, True), (False, False)], ids=["flow", "own-process"])
def test_flow_over_loopback_with_a_dropped_connection(dumps, tmp_path, monkeypatch, capsys, ranges, server):
    """Dumps fetched over loopback, one connection dropped halfway (resumed with Range, or fetched
    again whole from a server without it), by a flow run and by the command in its own process."""
    monkeypatch.setenv("CET_PSEUDONYM_KEY", "flow-test-key-5d41402abc4b2a76b9719d911017c592")
    served(monkeypatch, server)
    monkeypatch.setenv("CET_EMBEDDING_CACHE", str(dumps.parent / "embedding-cache"))  # shared by both runs
    victim = "RC_2016-02.zst"
    with FileServer(dumps) as srv:
        srv.ranges = ranges
        srv.drop_after = {victim: (dumps / victim).stat().st_size // 2}
        assert main(["build", "--dumps", srv.url, "--out", str(tmp_path / "ds"), "--work-dir", str(tmp_path / "w"),
                     *ARGS, *([] if ranges else ["--split-method", "hash"])]) == 0
    ds = load_dataset(capsys.readouterr().out.strip().splitlines()[-1])
    assert ds.manifest["split_method"] == ("random" if ranges else "hash")  # the option reaches the build
    stamp = stage_cache.recorded(ds.path, "build-reddit-features")  # how retrain rebuilds it: the same URL
    assert stamp["recipe"]["dumps"] == srv.url and stamp["source"] == {"kind": "url", "from": srv.url}
    assert stamp["recipe"]["split_method"] == ("random" if ranges else "hash")
    with pytest.raises(ValueError, match=r"holds a dataset built from Pushshift dumps \(http://127\.0\.0\.1"):
        refuse_standin_over_real("build-reddit-features", str(ds.path), str(tmp_path / "w"), "Pushshift dumps",
                                 "no dumps")
    local = tmp_path / "w" / "dumps" / victim
    sums = dict(line.split()[::-1] for line in (dumps / "sha256sums.txt").read_text().splitlines())
    assert sha256_file(local) == sums[victim]  # resumed (or restarted) to the right bytes
    tries = [r for n, r in srv.requests if n == victim]
    # the second try asks for the rest; a server without Range support sends it all again (200)
    assert tries == [None, f"bytes={(dumps / victim).stat().st_size // 2}-"]
    truth = pl.read_parquet(dumps / "standin_truth.parquet")
    assert len(ds.train) + len(ds.val) + len(ds.test) == truth["in_cohort"].sum()
    assert json.loads((ds.path / "manifest.json").read_text())["source_fingerprints"][victim] == sums[victim]


@pytest.mark.slow
def test_dumps_a_generator_wrote_are_recorded_as_a_standin_though_given_as_dumps(dumps, tmp_path, monkeypatch,
                                                                                capsys):
    """``flows.reddit generate`` then ``build --dumps``: the report and the model card must not say "your data"."""
    monkeypatch.setenv("CET_PSEUDONYM_KEY", "flow-test-key-5d41402abc4b2a76b9719d911017c592")
    monkeypatch.setenv("CET_EMBEDDING_CACHE", str(dumps.parent / "embedding-cache"))
    assert main(["build", "--dumps", str(dumps), "--out", str(tmp_path / "ds"), *ARGS]) == 0
    assert stage_cache.built_from(tmp_path / "ds") == "generated stand-in"
    assert stage_cache.recorded(tmp_path / "ds", "build-reddit-features")["source"] == {
        "kind": "standin", "from": [str(dumps.resolve())]}


def test_listing_from_an_html_index_ignores_unsafe_names(dumps, tmp_path):
    with FileServer(dumps) as srv:
        srv.extra_links = ["../../etc/RC_2016-01.zst", "/abs/RS_2016-01.zst", "RC_2016-01.zst%2F..", "RC_..zst"]
        names, sums = reddit_download.remote_listing(srv.url, checksums="missing-sums.txt")
        assert sums == {} and names == sorted(p.name for p in dumps.glob("R[CS]_*.zst"))
        names, sums = reddit_download.remote_listing(srv.url)
        assert set(sums) == set(names)
        plan = reddit_download.plan(srv.url, "2015-10", "2015-12", "2016-01")
        assert [n for n, _ in plan] == ["RS_2015-10.zst", "RS_2015-11.zst", "RS_2015-12.zst", "RS_2016-01.zst",
                                        "RC_2015-10.zst", "RC_2015-11.zst", "RC_2015-12.zst"]
        with pytest.raises(ValueError, match="unsafe file name"):
            reddit_download.fetch(srv.url, "../escape.zst", tmp_path, None)
    assert not any(tmp_path.iterdir())


def test_a_url_in_the_archive_layout_lists_its_comments_and_submissions(dumps, tmp_path):
    """The public archives serve reddit/comments/RC_* and reddit/submissions/RS_*."""
    import shutil

    root = tmp_path / "mirror" / "reddit"
    for f in dumps.glob("R[CS]_*.zst"):
        sub = root / ("comments" if f.name.startswith("RC_") else "submissions")
        sub.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, sub / f.name)
    with FileServer(root.parent) as srv:
        plan = reddit_download.plan(srv.url + "/reddit/", "2015-10", "2015-11", "2015-12")
        assert [n for n, _ in plan] == ["submissions/RS_2015-10.zst", "submissions/RS_2015-11.zst",
                                        "submissions/RS_2015-12.zst", "comments/RC_2015-10.zst",
                                        "comments/RC_2015-11.zst"]
        got = reddit_download.fetch(srv.url + "/reddit/", plan[-1][0], tmp_path / "local", None)
        assert got == tmp_path / "local" / "RC_2015-11.zst" and got.read_bytes() == (dumps / got.name).read_bytes()
        with pytest.raises(ValueError, match="unsafe file name"):
            reddit_download.fetch(srv.url, "elsewhere/RC_2015-11.zst", tmp_path / "x", None)


def test_local_dumps_outside_the_months_are_a_usage_error_before_the_flow(dumps, tmp_path, monkeypatch, capsys):
    """A folder whose dumps lie outside the months asked for (or hold none) is refused before any
    flow starts, saying what was found and which options choose the months (it was a failed
    flow's tracebacks); nothing is written."""
    import re

    monkeypatch.setenv("CET_PSEUDONYM_KEY", "flow-test-key-5d41402abc4b2a76b9719d911017c592")
    late = ["--start", "2017-01", "--comment-end", "2017-03", "--submission-end", "2017-06"]
    with pytest.raises(SystemExit) as exit_:
        main(["build", "--dumps", str(dumps), "--out", str(tmp_path / "ds"), *late])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and re.search(
        r"error: \S+d: need RS_YYYY-MM and RC_YYYY-MM dumps .* from 2017-01 up to 2017-06 \(RS\) / 2017-03 \(RC\), "
        r"searched recursively; found 0 RS and 0 RC in those months, and \d+ other file\(s\) of months 2015-10 to "
        r"2016-06 \(--start, --comment-end, --submission-end choose the months\)", err), err
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit):
        main(["build", "--dumps", str(tmp_path / "empty"), "--out", str(tmp_path / "ds"), *ARGS])
    assert "found 0 RS and 0 RC" in capsys.readouterr().err and not (tmp_path / "ds").exists()


@pytest.mark.parametrize("server", [True, False], ids=["flow", "own-process"])
def test_the_flow_refuses_a_users_file_named_like_a_scan_part_before_scanning(dumps, tmp_path, monkeypatch, capsys,
                                                                             server):
    """A work folder the user names holds their ``first.parquet``: the build stops before the scan, naming it,
    and the file is as it was."""
    monkeypatch.setenv("CET_PSEUDONYM_KEY", "flow-test-key-5d41402abc4b2a76b9719d911017c592")
    served(monkeypatch, server)
    work = tmp_path / "w"
    work.mkdir()
    (work / "first.parquet").write_bytes(b"mine")
    with pytest.raises((FileExistsError, SystemExit)) as err:
        main(["build", "--dumps", str(dumps), "--out", str(tmp_path / "ds"), "--work-dir", str(work), *ARGS])
    said = str(err.value) + capsys.readouterr().err
    assert "first.parquet: exists and was not written by CET" in said
    assert (work / "first.parquet").read_bytes() == b"mine" and not (work / "rs").exists()
    assert not (tmp_path / "ds").exists()


def test_without_a_prefect_server_the_command_builds_in_its_own_process(dumps, tmp_path, monkeypatch):
    """With no Prefect server configured, ``flows.reddit build`` builds in its own process, Prefect not
    even imported and no temporary server, its months scanned in threads: no flow run, the same dataset
    as the flow's build, and each skips a build the other made of the same dumps, options and key."""
    import re

    from tests.flows.own_process import flow_runs, run_without_server, the_flow_builds_the_same, without_server

    monkeypatch.setenv("CET_PSEUDONYM_KEY", "flow-test-key-5d41402abc4b2a76b9719d911017c592")
    monkeypatch.setenv("CET_EMBEDDING_CACHE", str(dumps.parent / "embedding-cache"))
    generated = run_without_server("flows.reddit", ["generate", "--users", "20", *ARGS, "--out", str(tmp_path / "g")],
                                   tmp_path)  # the generator never needs Prefect either
    assert generated.stdout.strip() == str(tmp_path / "g") and (tmp_path / "g" / "standin.json").is_file()
    argv = ["build", "--dumps", str(dumps), *ARGS]
    here, flown = tmp_path / "here", tmp_path / "flown"
    before = flow_runs("build-reddit-features")
    log = without_server("flows.reddit", argv, here, tmp_path)
    assert re.search(r"\| INFO +\| flows\.reddit - RC_2016-01\.zst: \d+ lines, 0 malformed", log)
    assert re.search(r"\| INFO +\| flows\.reddit - dataset written to ", log)
    assert flow_runs("build-reddit-features") == before
    the_flow_builds_the_same(main, argv, here, flown, "build-reddit-features", before, monkeypatch)


@pytest.mark.parametrize("how", ["flow", "own-process", "scan"])
def test_a_build_that_fails_leaves_no_scan_part_behind(dumps, tmp_path, monkeypatch, capsys, how):
    """A month's dump that cannot be read fails the build after the other months' scans wrote their
    parts (pseudonyms beside comment ids, bodies and exact times): none of them stays in the work
    folder, as after a build that ends. It was kept until a later build ended. The command ends with
    exit status 1 and one line naming the dump (it ended with a traceback)."""
    import shutil

    from flows.lib.reddit import build as reddit_build

    monkeypatch.setenv("CET_PSEUDONYM_KEY", "flow-test-key-5d41402abc4b2a76b9719d911017c592")
    bad = tmp_path / "dumps"
    shutil.copytree(dumps, bad)
    victim = bad / "RC_2016-02.zst"
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # a cut download
    work = tmp_path / "w"
    if how == "scan":  # the one-process scan that scoring runs
        params = reddit_build.RedditParams(start="2015-10", comment_end="2016-03", submission_end="2016-06")
        with pytest.raises(ValueError, match="RC_2016-02.zst"):
            reddit_build.build(bad, tmp_path / "ds", work, params, key="flow-test-key-5d41402abc4b2a76b9719d911017c592")
    else:
        served(monkeypatch, how == "flow")
        with pytest.raises(SystemExit) as err:
            main(["build", "--dumps", str(bad), "--out", str(tmp_path / "ds"), "--work-dir", str(work), *ARGS])
        out = capsys.readouterr().err
        assert err.value.code == 1  # and one line naming the dump, not a traceback (a flow run's log has one)
        assert out.rstrip().splitlines()[-1].startswith(f"python -m flows.reddit: {victim}: "), out[-2000:]
        assert how == "flow" or "Traceback" not in out, out[-2000:]
    assert (work / "rc").is_dir() is False and not (work / "rs").exists() and not (work / "first.parquet").exists()
    assert not (tmp_path / "ds").exists()
