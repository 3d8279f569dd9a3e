"""Read Pushshift monthly dumps: names, streaming decompression, NDJSON records.

- Names: ``RC_YYYY-MM`` (comments) and ``RS_YYYY-MM`` (submissions) with ``.zst``, ``.bz2``
  or ``.xz``, found recursively under one or more roots: the archives' layout
  (``reddit/comments/RC_...``, ``reddit/submissions/RS_...``), month folders or a flat folder.
- zstd is read with ``max_window_size=2**31``: real dumps declare a 2 GiB window, which
  default decoders refuse.
- Raw bytes are split on ``b"\\n"`` *before* decoding (0x0A never occurs inside a UTF-8
  multi-byte sequence, so no character is ever cut at a read boundary); a last line without a
  newline is kept; leading NUL bytes are stripped; lines are parsed with orjson.
- Malformed lines (bad JSON, not an object) are counted per file; above ``max_error_rate``
  the file fails with an error naming it. A corrupt or truncated stream fails naming the file.
- Memory is bounded whatever the input: zstd is fed ``ZSTD_STEP`` compressed bytes at a time,
  and no zstd block turns a byte into more than 32 KiB, so one step decompresses to at most
  64 MiB even for a file built to explode; a line longer than ``MAX_LINE`` is skipped (counted in
  ``ReadStats.too_long``, its line number kept) instead of being held whole.
"""

from __future__ import annotations

import bz2
import logging
import lzma
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import orjson
import zstandard
from tqdm.auto import tqdm

from flows.lib.infra import interrupts
from flows.lib.infra.cli import duration_text
from flows.lib.infra.errors import InputError

NAME = re.compile(r"^(RC|RS)_(\d{4})-(\d{2})\.(zst|bz2|xz)$")
ZSTD_MAX_WINDOW = 2**31
READ_SIZE = 1 << 24  # 16 MiB
ZSTD_RAW_READ = 1 << 20  # compressed bytes read from the file at a time
ZSTD_STEP = 1 << 11  # compressed bytes per decompression call: at most 2 KiB x 32 Ki = 64 MiB out
LOG_EVERY = 60.0  # seconds between the log lines of a file's progress (no terminal, no bar)
MAX_LINE = 1 << 20  # a longer line is no Reddit record (the longest body is 40,000 characters): skipped


log = logging.getLogger("flows.reddit.pushshift")
COMPRESSION_PREFERENCE = ("zst", "xz", "bz2")  # when a month exists in several compressions


class DumpError(InputError):
    """A dump that cannot be read (corrupt, truncated, too many malformed lines)."""


@dataclass(frozen=True, order=True)
class DumpFile:
    month: str  # 'YYYY-MM'
    kind: str  # 'RC' comments or 'RS' submissions
    name: str
    path: str = field(default="", compare=False)  # where it was found (local dumps)

    @property
    def compression(self) -> str:
        return self.name.rsplit(".", 1)[1]

    @classmethod
    def parse(cls, name: str) -> DumpFile | None:
        m = NAME.match(name)
        return cls(f"{m[2]}-{m[3]}", m[1], name) if m else None


def list_dumps(names, kind: str | None = None, start: str | None = None, end: str | None = None) -> list[DumpFile]:
    """The dump files among ``names`` (of ``kind``, months in [start, end]), one per (kind, month).

    When a month exists in several compressions, ``.zst`` is preferred, then ``.xz``, ``.bz2``.
    """
    return select(filter(None, map(DumpFile.parse, names)), kind, start, end)


def select(dumps: Iterable[DumpFile], kind: str | None = None, start: str | None = None,
           end: str | None = None) -> list[DumpFile]:
    """One file per (kind, month) of ``kind`` with the month in [start, end], by
    ``COMPRESSION_PREFERENCE``; sorted by month, then kind."""
    best: dict[tuple[str, str], DumpFile] = {}
    rank = {c: i for i, c in enumerate(COMPRESSION_PREFERENCE)}
    for f in dumps:
        if (kind and f.kind != kind) or (start and f.month < start) or (end and f.month > end):
            continue
        key = (f.kind, f.month)
        if key not in best or rank[f.compression] < rank[best[key].compression]:
            best[key] = f
    return sorted(best.values())


def find_dumps(roots) -> list[DumpFile]:
    """Every dump under ``roots`` (a folder or several), searched recursively; hidden folders
    (work folders) are skipped. The same month in several compressions is kept for ``select``
    to choose from; the same file name found twice in different places is an error naming both
    paths (which copy is meant cannot be guessed).

    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> for rel in ("comments/RC_2017-11.zst", "submissions/RS_2017-11.zst", "submissions/RS_2017-11.bz2"):
    ...     (root / rel).parent.mkdir(exist_ok=True); (root / rel).touch()
    >>> [f.name for f in select(find_dumps(root))]
    ['RC_2017-11.zst', 'RS_2017-11.zst']
    """
    roots = [roots] if isinstance(roots, str | Path) else list(roots)
    found: dict[str, DumpFile] = {}
    for root in map(Path, roots):
        if not root.is_dir():
            raise FileNotFoundError(f"dumps folder {root} does not exist")
        for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                f = DumpFile.parse(name)
                if f is None:
                    continue
                f = replace(f, path=str(Path(dirpath) / name))
                other = found.get(name)
                if other is not None and Path(other.path).resolve() != Path(f.path).resolve():
                    raise DumpError(f"{name} found twice: {other.path} and {f.path}; remove one copy or give "
                                    "roots that hold it once")
                found[name] = f
    return sorted(found.values())


def _zstd_chunks(path: Path, read_size: int, bar=None):
    """Decompressed pieces of a (multi-frame) zstd file. A frame cut short is an error: the
    library's stream reader would end quietly there (silent truncation)."""
    dctx = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW)
    dobj, fed = dctx.decompressobj(), False
    pieces, held = [], 0
    with open(path, "rb") as fh:
        while block := fh.read(read_size):
            if bar is not None:
                bar.update(len(block))
            view = memoryview(block)
            for at in range(0, len(view), ZSTD_STEP):
                raw = view[at:at + ZSTD_STEP]
                while raw:
                    fed = True
                    out = dobj.decompress(raw)
                    if out:
                        pieces.append(out)
                        held += len(out)
                    if dobj.eof:  # a frame ended; what follows belongs to the next one
                        raw, dobj, fed = dobj.unused_data, dctx.decompressobj(), False
                    else:
                        raw = b""
                if held >= read_size:  # pieces gathered to about the read size: fewer, larger splits
                    whole, pieces, held = _joined(pieces), [], 0
                    yield whole
    if pieces:
        yield _joined(pieces)
    if fed and not dobj.eof:
        raise EOFError("the last zstd frame is incomplete (truncated file)")


def _joined(pieces: list[bytes]) -> bytes:
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _stream_chunks(path: Path, read_size: int, bar=None):
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".zst":
        yield from _zstd_chunks(path, min(read_size, ZSTD_RAW_READ), bar)
        return
    if suffix not in (".bz2", ".xz"):
        raise DumpError(f"{path}: unknown compression {suffix!r} (expected .zst, .bz2 or .xz)")
    with open(path, "rb") as raw, (bz2.open(raw, "rb") if suffix == ".bz2" else lzma.open(raw, "rb")) as fh:
        done = 0
        while chunk := fh.read(read_size):
            if bar is not None:
                bar.update(raw.tell() - done)
                done = raw.tell()
            yield chunk


class _Progress:
    """tqdm's bar over the compressed bytes on a terminal; without one (a served run, a log file), a log line
    every ``LOG_EVERY`` seconds: the share read and the time left."""

    def __init__(self, path, progress: bool | None):
        self.name, self.total = Path(path).name, Path(path).stat().st_size
        self.bar = tqdm(total=self.total, unit="B", unit_scale=True, desc=self.name, leave=False,
                        disable=None if progress is None else not progress)
        self.done, self.started = 0, time.perf_counter()
        self.said = self.started

    def update(self, n: int) -> None:
        self.bar.update(n)
        self.done += n
        now = time.perf_counter()
        if self.bar.disable and now - self.said >= LOG_EVERY and 0 < self.done < self.total:
            self.said, elapsed = now, now - self.started
            log.info("%s: %d%% read in %s; about %s left", self.name, 100 * self.done // self.total,
                     duration_text(elapsed), duration_text(elapsed / self.done * (self.total - self.done)))

    def close(self) -> None:
        self.bar.close()


def iter_line_batches(path: Path, read_size: int = READ_SIZE, progress: bool | None = None,
                      stats: ReadStats | None = None, max_line: int = MAX_LINE) -> Iterator[list[bytes]]:
    """The lines of the decompressed dump as bytes (no newline), one list per decompressed
    piece; the last line is kept even without '\\n'. Loops over a list cost less per line than
    a generator does, which matters at a billion lines. A line longer than ``max_line`` bytes
    comes as ``b""`` (its number kept) and is counted in ``stats.too_long``; it is never held whole.

    ``progress``: a bar over the compressed bytes read (None: only when stderr is a terminal,
    so logs and tests stay clean); without the bar, a log line a minute (``LOG_EVERY``) on a
    multi-GB month, which would otherwise be silent for minutes."""
    rest, skipping = b"", False  # skipping: inside a line already longer than max_line
    bar, reading = _Progress(path, progress), f"reading {Path(path).name}"
    try:
        for chunk in _stream_chunks(path, read_size, bar):
            interrupts.check(reading)  # Ctrl-C while a flow's task thread scans (interrupts)
            if skipping:
                cut = chunk.find(b"\n")
                if cut < 0:
                    continue
                chunk, skipping = chunk[cut + 1:], False
                if stats is not None:
                    stats.too_long += 1
                yield [b""]
            if b"\n" not in chunk:  # a piece inside one line: no split, and a line too long is dropped now
                if len(rest) + len(chunk) > max_line:
                    rest, skipping = b"", True
                else:
                    rest += chunk
                continue
            parts = (rest + chunk).split(b"\n")
            rest = parts.pop()
            if len(rest) > max_line:
                rest, skipping = b"", True
            if parts:
                if max(map(len, parts)) > max_line:  # a whole long line inside one piece
                    if stats is not None:
                        stats.too_long += sum(len(p) > max_line for p in parts)
                    parts = [b"" if len(p) > max_line else p for p in parts]
                yield parts
    except (zstandard.ZstdError, OSError, EOFError, lzma.LZMAError) as exc:
        raise DumpError(f"{path}: cannot be decompressed ({type(exc).__name__}: {exc}); "
                        "the file is corrupt or truncated") from None
    finally:
        bar.close()
    if skipping and stats is not None:
        stats.too_long += 1
        yield [b""]
    if rest:
        yield [rest]


def iter_lines(path: Path, read_size: int = READ_SIZE, progress: bool | None = None) -> Iterator[bytes]:
    """Every line of the decompressed dump as bytes (see ``iter_line_batches``)."""
    for batch in iter_line_batches(path, read_size, progress):
        yield from batch


@dataclass
class ReadStats:
    file: str
    lines: int = 0
    blank: int = 0
    malformed: int = 0
    examples: list[int] = field(default_factory=list)  # line numbers of the first malformed lines
    too_long: int = 0  # lines over MAX_LINE bytes, skipped unread (also counted as blank)

    @property
    def error_rate(self) -> float:
        return self.malformed / max(1, self.lines - self.blank)


@dataclass
class FieldFilter:
    """Which lines are worth parsing, decided from the raw bytes of one top-level string field.

    ``decide(raw) -> True`` (parse it), ``False`` (skip it) or a reason (skip it, counted in
    ``skipped[reason]``). Decisions are cached per distinct value (bounded). A line where the
    field is missing or holds an escape is parsed, and with ``nested`` a line where the field
    appears more than once (a nested object may come first: a crosspost's parent submission
    has its own ``subreddit``): the filter only ever skips lines that surely do not matter.
    ``nested=False`` saves a search of the rest of each line where no nested object can carry
    the field (comments have none with an ``author``).
    """

    field: str
    decide: Callable[[bytes], bool | str]
    skipped: Counter = field(default_factory=Counter)
    nested: bool = True
    cache_limit: int = 1 << 20


def iter_records(path: Path, stats: ReadStats | None = None, max_error_rate: float = 0.01,
                 read_size: int | None = None, min_lines_for_rate: int = 1000,
                 select: FieldFilter | None = None) -> Iterator[dict]:
    """Parsed JSON objects of a dump. Malformed lines are counted in ``stats``; the file fails
    when their share exceeds ``max_error_rate`` (checked at the end, and along the way once
    ``min_lines_for_rate`` lines were read).

    ``select``: a :class:`FieldFilter`. Lines it skips are not decoded -- most lines of a scan,
    and the decoding is what costs. They are still checked for the shape of a JSON object
    (``{...}``): a line cut short is malformed whether or not it would have been selected; a line
    with the shape but broken inside is only caught when it is selected.
    """
    stats = stats if stats is not None else ReadStats(str(path))
    loads = orjson.loads

    def parse(line: bytes):
        """The object of a line, or None (blank: counted; malformed: counted, maybe failing).
        ``stats.lines`` is this line's number."""
        if line[:1] == b"\0":
            line = line.lstrip(b"\0")
        if not line.strip():
            stats.blank += 1
            return None
        try:
            obj = loads(line)
        except orjson.JSONDecodeError:
            obj = None
        if not isinstance(obj, dict):
            stats.malformed += 1
            if len(stats.examples) < 5:
                stats.examples.append(stats.lines)
            if stats.lines >= min_lines_for_rate and stats.error_rate > max_error_rate:
                _fail(path, stats, max_error_rate)
            return None
        return obj

    batches = iter_line_batches(path, read_size or READ_SIZE, stats=stats)
    if select is None:
        yield from _every_line(batches, stats, parse)
    else:
        yield from _selected_lines(batches, stats, parse, select)
    if stats.too_long:
        log.warning("%s: %d line(s) longer than %d MiB skipped unread (no Reddit record is that long)", path,
                    stats.too_long, MAX_LINE >> 20)
    if stats.malformed and stats.error_rate > max_error_rate:
        _fail(path, stats, max_error_rate)


def _every_line(batches, stats: ReadStats, parse) -> Iterator[dict]:
    lines = stats.lines
    for batch in batches:
        for line in batch:
            lines += 1
            stats.lines = lines
            obj = parse(line)
            if obj is not None:
                yield obj
    stats.lines = lines


def _selected_lines(batches, stats: ReadStats, parse, select: FieldFilter) -> Iterator[dict]:
    """The objects of the lines ``select`` does not skip; a skipped line is never decoded."""
    lines = stats.lines
    marker = b'"' + select.field.encode() + b'":"'
    width, decide, skipped, nested, cache = len(marker), select.decide, select.skipped, select.nested, {}
    for batch in batches:
        for line in batch:
            lines += 1
            # the hot path: a line shaped {...} whose field decides it is not wanted (ints
            # compare faster than one-byte slices; 123 = "{", 125 = "}")
            if line and line[0] == 123 and line[-1] == 125:
                i = line.find(marker)
                if i >= 0:
                    j = line.find(b'"', i + width)
                    if j >= 0 and not (nested and line.find(marker, j) >= 0):
                        raw = line[i + width:j]
                        verdict = cache.get(raw)
                        if verdict is None:
                            if len(cache) >= select.cache_limit:
                                cache.clear()
                            verdict = cache[raw] = True if b"\\" in raw else decide(raw)
                        if verdict is not True:
                            if verdict is not False:
                                skipped[verdict] += 1
                            continue
            stats.lines = lines
            obj = parse(line)
            if obj is not None:
                yield obj
    stats.lines = lines


def _fail(path, stats: ReadStats, limit: float):
    raise DumpError(f"{path}: {stats.malformed} malformed line(s) of {stats.lines - stats.blank} "
                    f"({stats.error_rate:.2%} > max_error_rate {limit:.2%}); first at line(s) {stats.examples}")


def created_utc(obj: dict) -> int | None:
    """``created_utc`` as an int (it is a string in some years); None when missing or invalid."""
    v = obj.get("created_utc")
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v:
        return int(v)
    if isinstance(v, str):
        try:
            return int(float(v)) if "." in v else int(v)
        except ValueError:
            return None
    return None
