"""Fetch Pushshift dumps from a base URL: list, filter by month, download, verify.

The listing comes from the checksum list when the mirror has one (``sha256sums.txt`` by
default; every file it names is then verified), otherwise from the hrefs of the base URL's
HTML index. A base URL without dumps of its own may be the archives' ``reddit/`` folder: its
``comments/`` and ``submissions/`` sub-listings are read the same way. Every name from a remote listing goes through
``safe_name`` and must look like a
dump (``RC_/RS_YYYY-MM.zst|bz2|xz``): nothing can land outside the destination folder.
Downloads stream, resume with Range, retry, time out and are renamed into place only when
complete (``flows.lib.infra.download``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from pathlib import Path

import requests

from flows.lib.infra.download import download, get_text, parse_sha256sums, safe_name, sha256_file
from flows.lib.reddit.pushshift import DumpFile, select

log = logging.getLogger("flows.reddit.download")
HREF = re.compile(r"""href\s*=\s*["']([^"'#?]+)["']""", re.IGNORECASE)
SUB_LISTINGS = ("comments", "submissions")  # the archives' reddit/comments/ and reddit/submissions/


def remote_listing(base_url: str, session: requests.Session | None = None, checksums: str | None = "sha256sums.txt",
                   timeout=(10.0, 60.0), sub_listings: bool = True, retries: int = 5,
                   backoff: float = 0.5) -> tuple[list[str], dict[str, str]]:
    """(dump names, {name: sha256}) at ``base_url``; the dict is empty without a checksum list.
    Dumps found in a sub-listing are named ``comments/RC_...`` or ``submissions/RS_...``. Each
    request is retried as a download is (``get_text``); a listing that cannot be read is a
    ``DownloadError`` naming its URL."""
    base = base_url if base_url.endswith("/") else base_url + "/"
    session = session or requests.Session()
    kw = {"session": session, "timeout": timeout, "retries": retries, "backoff": backoff}
    sums: dict[str, str] = {}
    if checksums:
        text = get_text(base + checksums, missing_ok=True, **kw)
        if text is None:
            log.warning("%s%s not found: dumps will not be verified", base, checksums)
        else:
            sums = parse_sha256sums(text)
    if sums:
        names = list(sums)
    else:
        text = get_text(base, missing_ok=not sub_listings, **kw)
        if text is None:  # a sub-listing that is not there
            return [], {}
        names = [h.rsplit("/", 1)[-1] for h in HREF.findall(text)]
    dumps, rejected = [], []
    for n in names:
        try:
            name = safe_name(n)
        except ValueError:
            rejected.append(n)
            continue
        if DumpFile.parse(name):
            dumps.append(name)
    if rejected:
        log.warning("ignored %d unsafe name(s) in the listing of %s", len(rejected), base)
    sums = {k: v for k, v in sums.items() if k in set(dumps)}
    if not dumps and sub_listings:
        for sub in SUB_LISTINGS:
            sub_names, sub_sums = remote_listing(base + sub + "/", session, checksums, timeout, sub_listings=False,
                                                 retries=retries, backoff=backoff)
            dumps += [f"{sub}/{n}" for n in sub_names]
            sums |= {f"{sub}/{k}": v for k, v in sub_sums.items()}
    return sorted(set(dumps)), sums


def plan(
    base_url: str, start: str | None, comment_end: str, submission_end: str, **kwargs
) -> list[tuple[str, str | None]]:
    """[(name, sha256 or None)] of the RS and RC dumps to fetch for these months."""
    names, sums = remote_listing(base_url, **kwargs)
    files = [replace(f, path=rel) for rel in names if (f := DumpFile.parse(rel.rsplit("/", 1)[-1]))]
    chosen = select(files, "RS", start, submission_end) + select(files, "RC", start, comment_end)
    if not chosen:
        raise FileNotFoundError(f"{base_url}: no RC_/RS_YYYY-MM dumps for the configured months")
    return [(f.path, sums.get(f.path)) for f in chosen]


def fetch(base_url: str, name: str, dest_dir: Path, sha256: str | None, session=None, **kwargs) -> Path:
    """One dump into ``dest_dir`` (skipped when present and, if a checksum is known, verified).
    ``name``: a listed name, possibly under a sub-listing (``comments/RC_2017-11.zst``)."""
    sub, _, leaf = name.rpartition("/")
    if sub and sub not in SUB_LISTINGS:
        raise ValueError(f"unsafe file name from a remote listing: {name!r}")
    leaf = safe_name(leaf)
    name = f"{sub}/{leaf}" if sub else leaf
    dest = Path(dest_dir) / leaf
    if dest.is_file() and (sha256 is None or sha256_file(dest) == sha256):
        log.info("%s: present%s", name, " and verified" if sha256 else "")
        return dest
    base = base_url if base_url.endswith("/") else base_url + "/"
    return download(base + name, dest, sha256=sha256, session=session, **kwargs)
