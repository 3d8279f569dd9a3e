"""The Pushshift reader: long-window zstd, chunk boundaries, quirks, malformed lines, bad files."""

import bz2
import lzma
import os

import orjson
import pytest
import zstandard

from flows.lib.reddit.pushshift import (
    DumpError,
    ReadStats,
    created_utc,
    iter_lines,
    iter_records,
    list_dumps,
)
from flows.lib.standin.reddit import compressor


def _write_zst(path, data: bytes):
    with open(path, "wb") as fh, compressor().stream_writer(fh, closefd=False) as w:
        w.write(data)
    return path


ROWS = [{"author": "a", "body": "naïve café 😀 東京", "created_utc": "1262304001", "id": "x1"},
        {"author": "b", "body": "plain", "created_utc": 1262304002, "id": "x2"}]


def test_long_window_frames_need_the_large_window(tmp_path):
    path = _write_zst(tmp_path / "RC_2010-01.zst", b"".join(orjson.dumps(r) + b"\n" for r in ROWS) * 50)
    with open(path, "rb") as fh, pytest.raises(zstandard.ZstdError, match="too much memory"):
        zstandard.ZstdDecompressor().stream_reader(fh).read()  # what a default decoder does
    assert [r["id"] for r in iter_records(path)] == ["x1", "x2"] * 50


@pytest.mark.parametrize("read_size", [1, 3, 7, 64])
def test_multibyte_characters_across_read_boundaries(tmp_path, read_size):
    data = b"".join(orjson.dumps(r) + b"\n" for r in ROWS * 20)
    path = _write_zst(tmp_path / "RC_2010-01.zst", data)
    # with these read sizes many reads end inside a multi-byte character
    assert list(iter_records(path, read_size=read_size)) == ROWS * 20


def test_last_line_without_newline_nul_prefix_and_blank_lines(tmp_path):
    data = b"\0\0" + orjson.dumps(ROWS[0]) + b"\n\n" + orjson.dumps(ROWS[1])  # no final newline
    path = _write_zst(tmp_path / "RS_2010-01.zst", data)
    stats = ReadStats(str(path))
    assert list(iter_records(path, stats)) == ROWS
    assert (stats.lines, stats.blank, stats.malformed) == (3, 1, 0)


def test_created_utc_in_every_shape():
    assert created_utc({"created_utc": "1262304001"}) == 1262304001
    assert created_utc({"created_utc": 1262304001}) == 1262304001
    assert created_utc({"created_utc": 1262304001.0}) == 1262304001
    assert created_utc({"created_utc": "1262304001.0"}) == 1262304001
    assert created_utc({"created_utc": "yesterday"}) is None
    assert created_utc({"created_utc": True}) is None and created_utc({}) is None


@pytest.mark.bad_input
def test_malformed_lines_are_counted_and_fail_above_the_rate(tmp_path):
    good = b"".join(orjson.dumps(r) + b"\n" for r in ROWS * 100)
    bad = b'{"author": "x", "bo\n[1, 2]\n"just a string"\n'
    path = _write_zst(tmp_path / "RC_2010-02.zst", good + bad)
    stats = ReadStats(str(path))
    assert len(list(iter_records(path, stats, max_error_rate=0.05))) == 200
    assert stats.malformed == 3 and stats.examples == [201, 202, 203]
    with pytest.raises(DumpError, match=r"RC_2010-02.zst: 3 malformed line\(s\) of 203"):
        list(iter_records(path, max_error_rate=0.01))


@pytest.mark.bad_input
def test_truncated_or_corrupt_dump_fails_naming_the_file(tmp_path):
    path = _write_zst(tmp_path / "RC_2010-03.zst", b"".join(orjson.dumps(r) + b"\n" for r in ROWS * 500))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DumpError, match="RC_2010-03.zst: cannot be decompressed"):
        list(iter_lines(path))
    html = tmp_path / "RC_2010-04.zst"
    html.write_bytes(b"<html><body>502 Bad Gateway</body></html>")  # an error page saved as a dump
    with pytest.raises(DumpError, match="RC_2010-04.zst"):
        list(iter_lines(html))


def test_older_bz2_and_xz_dumps(tmp_path):
    data = b"".join(orjson.dumps(r) + b"\n" for r in ROWS)
    (tmp_path / "RC_2011-01.bz2").write_bytes(bz2.compress(data))
    (tmp_path / "RC_2018-01.xz").write_bytes(lzma.compress(data))
    assert list(iter_records(tmp_path / "RC_2011-01.bz2")) == ROWS
    assert list(iter_records(tmp_path / "RC_2018-01.xz")) == ROWS


def test_dump_names_and_month_filters():
    names = ["RC_2017-11.bz2", "RC_2017-11.zst", "RC_2017-12.xz", "RS_2020-01.zst", "RS_2020-02.zst",
             "notes.txt", "RC_2017-1.zst", "../RC_2017-10.zst"]
    assert [f.name for f in list_dumps(names, "RC", end="2017-11")] == ["RC_2017-11.zst"]
    assert [f.name for f in list_dumps(names, "RS", "2020-01", "2020-01")] == ["RS_2020-01.zst"]
    assert [f.name for f in list_dumps(names)] == [
        "RC_2017-11.zst",
        "RC_2017-12.xz",
        "RS_2020-01.zst",
        "RS_2020-02.zst",
    ]


@pytest.mark.parametrize("suffix", ["zst", "bz2", "xz"])
def test_progress_counts_every_compressed_byte(tmp_path, capsys, suffix):
    from flows.lib.reddit.pushshift import _stream_chunks

    data = b"".join(orjson.dumps(r) + b"\n" for r in ROWS) * 2000
    path = tmp_path / f"RC_2016-01.{suffix}"
    if suffix == "zst":
        _write_zst(path, data)
    else:
        path.write_bytes(bz2.compress(data) if suffix == "bz2" else lzma.compress(data))

    class Counter:
        n = 0

        def update(self, k):
            self.n += k

    bar = Counter()
    assert b"".join(_stream_chunks(path, 4096, bar)) == data
    assert bar.n == path.stat().st_size  # the bar ends at the file's size
    assert sum(1 for _ in iter_lines(path, read_size=4096, progress=True)) == 4000
    assert path.name in capsys.readouterr().err  # shown when asked for
    assert sum(1 for _ in iter_lines(path)) == 4000
    assert path.name not in capsys.readouterr().err  # by default only on a terminal; tests have none


def test_without_a_terminal_a_long_file_logs_its_progress(tmp_path, monkeypatch, caplog):
    from flows.lib.reddit import pushshift

    rows = [{"author": "a", "body": os.urandom(24).hex(), "created_utc": 1262304001 + i} for i in range(2000)]
    path = _write_zst(tmp_path / "RC_2016-01.zst", b"".join(orjson.dumps(r) + b"\n" for r in rows))
    assert path.stat().st_size > 10 * 4096  # bodies that do not compress: the file is read in many pieces
    with caplog.at_level("INFO", logger="flows.reddit.pushshift"):
        assert sum(1 for _ in iter_lines(path, read_size=4096)) == 2000
        said = [r.getMessage() for r in caplog.records]
        assert said == []  # a file read within a minute says nothing
        monkeypatch.setattr(pushshift, "LOG_EVERY", 0.0)  # as if every piece took a minute
        assert sum(1 for _ in iter_lines(path, read_size=4096)) == 2000
    said = [r.getMessage() for r in caplog.records]
    assert len(said) > 2 and all(line.startswith("RC_2016-01.zst: ") and " left" in line for line in said)
    shares = [int(line.split(": ")[1].split("%")[0]) for line in said]
    assert shares == sorted(shares) and shares[-1] < 100


BOMB = """
import resource, sys
import zstandard
from flows.lib.reddit.pushshift import ReadStats, iter_records
path = sys.argv[1]
with open(path, "wb") as fh, zstandard.ZstdCompressor(level=3).stream_writer(fh) as w:
    block = b"x" * (1 << 20)
    for _ in range(512):  # 512 MiB in one frame, no newline: a few KB compressed
        w.write(block)
    w.write(b'\\n{"author": "a", "created_utc": 1}\\n')
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
stats = ReadStats(path)
records = list(iter_records(path, stats))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
print(len(records), stats.too_long, stats.lines, after - before)
"""


def test_a_file_built_to_explode_is_read_in_bounded_memory(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, "-c", BOMB, str(tmp_path / "RC_2010-01.zst")], capture_output=True,
                         text=True, timeout=300, env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr
    records, too_long, lines, grew = map(int, run.stdout.split())
    assert (tmp_path / "RC_2010-01.zst").stat().st_size < 1 << 20
    assert (records, too_long, lines) == (1, 1, 2)  # the long line skipped and counted, the next one read
    assert grew <= 256, f"peak memory grew by {grew} MiB reading it"


def test_a_line_over_the_cap_is_skipped_counted_and_keeps_the_line_numbers(tmp_path):
    from flows.lib.reddit.pushshift import iter_line_batches

    long = b'{"author": "' + b"y" * (3 << 20) + b'"}'
    rows = [orjson.dumps({"author": f"u{i}", "created_utc": i}) for i in range(3)]
    path = _write_zst(tmp_path / "RC_2010-01.zst", b"\n".join([rows[0], long, rows[1], b"{broken", rows[2]]) + b"\n")
    stats = ReadStats(str(path))
    got = list(iter_records(path, stats, max_error_rate=0.5))
    assert [r["author"] for r in got] == ["u0", "u1", "u2"]
    assert (stats.too_long, stats.lines, stats.examples) == (1, 5, [4])  # the broken line is still line 4
    small = ReadStats(str(path))  # a cap below a normal line: each counted, none held
    lines = [x for batch in iter_line_batches(path, read_size=4096, stats=small, max_line=10) for x in batch]
    assert len(lines) == 5 and small.too_long == 4 and lines[3] == b"{broken"
