"""Streaming downloads over HTTP with requests: resume, retry, verify, rename into place.

- The body streams to ``NAME.part``; an interrupted transfer resumes with ``Range`` when the
  server honours it (206), and starts over when it does not (200).
- Connection errors, timeouts, 5xx and 429 are retried with exponential backoff; other 4xx
  fail at once (``PermanentDownloadError``), and a download step is not tried again for them.
- A body shorter than the announced length is never accepted (it is resumed or retried).
- With ``sha256`` the finished file is verified; a mismatch deletes it and fetches it again
  once from scratch, then fails: a bad file is never kept.
- Only a complete, verified file is renamed to its final name (atomic on one filesystem).
- Names that come from a remote listing go through :func:`safe_name` first.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from pathlib import Path

import requests
import urllib3
from tqdm.auto import tqdm

log = logging.getLogger("flows.download")
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")


RETRY_DELAYS = (5, 30)  # seconds before each retry of a whole download step, as the flows' download tasks retry


def with_retries(fn, *args, logger: logging.Logger = log):
    """``fn(*args)``, tried again after each of ``RETRY_DELAYS`` on an error: a download step run
    without Prefect, retried as its flow task is (``retries=len(RETRY_DELAYS)``,
    ``retry_condition_fn=worth_retrying``). An answer no retry changes
    (``PermanentDownloadError``, e.g. HTTP 404) ends it at once."""
    for delay in (*RETRY_DELAYS, None):
        try:
            return fn(*args)
        except PermanentDownloadError:
            raise
        except Exception as exc:  # noqa: BLE001 (as a flow task's retries: any error of a download)
            if delay is None:
                raise
            logger.warning("%s failed (%s); trying again in %d s", getattr(fn, "__name__", "download"), exc, delay)
            time.sleep(delay)


def worth_retrying(task, task_run, state) -> bool:
    """A download task's ``retry_condition_fn`` (Prefect): retry a failed run unless it failed with
    an answer no retry changes (``PermanentDownloadError``), as :func:`with_retries` does."""
    try:
        state.result()
    except PermanentDownloadError:
        return False
    except Exception:  # noqa: BLE001 (any other failure: retried, as before)
        return True
    return True


class DownloadError(RuntimeError):
    """A download that cannot succeed (after retries, or a checksum that keeps failing)."""


class PermanentDownloadError(DownloadError):
    """A download the server refused with a status no retry changes (a 4xx other than 429)."""


class _Retry(Exception):
    pass


def safe_name(name: str) -> str:
    """A plain file name from a remote listing, or ValueError: no paths, no '..', no oddities."""
    if not isinstance(name, str) or not _SAFE.match(name) or ".." in name:
        raise ValueError(f"unsafe file name from a remote listing: {name!r}")
    return name


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def download(url: str, dest: Path, *, sha256: str | None = None, session: requests.Session | None = None,
             timeout: tuple[float, float] = (10.0, 60.0), retries: int = 5, backoff: float = 0.5,
             chunk_size: int = 1 << 20, progress: bool = True) -> Path:
    """Fetch ``url`` to ``dest``; returns ``dest``. See the module docstring for the guarantees."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    session = session or requests.Session()
    checksum_failures = 0
    attempt = 0
    while True:
        try:
            _fetch_once(url, part, session, timeout, chunk_size, progress)
        except _Retry as exc:
            attempt += 1
            _wait_to_retry(url, exc, attempt, retries, backoff)
            continue
        if sha256 is not None:
            got = sha256_file(part)
            if got != sha256.lower():
                part.unlink()
                checksum_failures += 1
                if checksum_failures > 1:
                    raise DownloadError(f"{url}: sha256 {got} does not match the expected {sha256} "
                                        f"(twice); nothing was kept")
                log.warning("%s: checksum mismatch, fetching it again from scratch", url)
                continue
        os.replace(part, dest)
        return dest


def _wait_to_retry(url: str, reason, attempt: int, retries: int, backoff: float) -> None:
    """Before try ``attempt`` + 1 of ``url``: wait ``backoff`` * 2^(attempt - 1) seconds, or raise
    ``DownloadError`` naming the URL and ``reason`` once ``retries`` retries are spent."""
    if attempt > retries:
        raise DownloadError(f"{url}: failed after {retries} retries ({reason})") from None
    delay = backoff * 2 ** (attempt - 1)
    log.warning("%s: %s; retry %d/%d in %.1fs", url, reason, attempt, retries, delay)
    time.sleep(delay)


def get_text(url: str, *, session: requests.Session | None = None, timeout: tuple[float, float] = (10.0, 60.0),
             retries: int = 5, backoff: float = 0.5, missing_ok: bool = False) -> str | None:
    """The body of ``url`` as text (a listing, a checksum list), retried as :func:`download` retries:
    connection errors, timeouts, 5xx and 429 with exponential backoff, then ``DownloadError``
    naming the URL. Another status is a ``DownloadError`` at once, but a 404 with ``missing_ok``
    returns None."""
    session = session or requests.Session()
    attempt = 0
    while True:
        try:
            r = session.get(url, timeout=timeout)
        except (requests.ConnectionError, requests.Timeout, urllib3.exceptions.HTTPError) as exc:
            reason = type(exc).__name__
        else:
            if r.status_code == 200:
                return r.text
            if r.status_code == 404 and missing_ok:
                return None
            if r.status_code < 500 and r.status_code != 429:
                raise PermanentDownloadError(f"{url}: HTTP {r.status_code}")
            reason = f"HTTP {r.status_code}"
        attempt += 1
        _wait_to_retry(url, reason, attempt, retries, backoff)


def _fetch_once(url, part: Path, session, timeout, chunk_size, progress) -> None:
    offset = part.stat().st_size if part.exists() else 0
    headers = {"Accept-Encoding": "identity"}  # the bytes as stored: checksums and ranges refer to them
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        with session.get(url, headers=headers, stream=True, timeout=timeout) as r:
            if r.status_code == 416 and offset:  # nothing left to send: the part may be complete
                total = _total_from_content_range(r.headers.get("Content-Range"))
                if total == offset:
                    return
                part.unlink()
                raise _Retry("range not satisfiable; starting over")
            if r.status_code >= 500 or r.status_code == 429:
                raise _Retry(f"HTTP {r.status_code}")
            if r.status_code not in (200, 206):
                raise PermanentDownloadError(f"{url}: HTTP {r.status_code}")
            if r.status_code == 206:
                start = _start_from_content_range(r.headers.get("Content-Range"))
                if start != offset:
                    part.unlink(missing_ok=True)
                    raise _Retry(f"server resumed at byte {start}, not {offset}")
                total = _total_from_content_range(r.headers.get("Content-Range"))
                mode = "ab"
            else:  # 200: the whole body (a server without Range support starts over)
                offset, mode = 0, "wb"
                length = r.headers.get("Content-Length")
                total = int(length) if length is not None else None
            with open(part, mode) as fh, tqdm(total=total, initial=offset, unit="B", unit_scale=True,
                                              desc=part.name.removesuffix(".part"), disable=not progress,
                                              leave=False) as bar:
                # read1: whatever has arrived (up to chunk_size), so a dropped connection loses
                # nothing already received and the resume starts exactly there
                while block := r.raw.read1(chunk_size):
                    fh.write(block)
                    bar.update(len(block))
    except (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError,
            urllib3.exceptions.HTTPError) as exc:
        raise _Retry(type(exc).__name__) from None
    size = part.stat().st_size
    if total is not None and size != total:
        raise _Retry(f"truncated: {size} of {total} bytes")


def _start_from_content_range(value: str | None) -> int:
    m = re.match(r"bytes (\d+)-\d+/(\d+|\*)", value or "")
    if not m:
        raise _Retry(f"bad Content-Range {value!r}")
    return int(m.group(1))


def _total_from_content_range(value: str | None) -> int | None:
    m = re.match(r"bytes (?:\d+-\d+|\*)/(\d+)", value or "")
    return int(m.group(1)) if m else None


def parse_sha256sums(text: str) -> dict[str, str]:
    """``sha256sum`` output (``HASH  NAME`` or ``HASH *NAME``) -> {safe name: hash}."""
    out = {}
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or not re.fullmatch(r"[0-9a-fA-F]{64}", parts[0]):
            raise ValueError(f"SHA256SUMS line {i}: not 'HASH  NAME'")
        out[safe_name(parts[1].strip().lstrip("*"))] = parts[0].lower()
    return out
