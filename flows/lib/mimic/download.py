"""Fetch the open MIMIC-III demo (or any folder published with a SHA256SUMS.txt) and verify it.

The PhysioNet demo lists its uncompressed ``NAME.csv`` files in ``SHA256SUMS.txt``; every
listed file is downloaded with :func:`flows.lib.infra.download.download` and checked against its
hash. Files already present with the right hash are not fetched again.
"""

from __future__ import annotations

import logging
from pathlib import Path

import requests

from flows.lib.infra.download import download, parse_sha256sums, sha256_file

log = logging.getLogger("flows.mimic.download")


def fetch_verified_folder(base_url: str, dest: Path, *, only=None, session=None, **kwargs) -> list[Path]:
    """Download ``SHA256SUMS.txt`` and the files it lists (or the subset ``only``) into ``dest``."""
    base = base_url if base_url.endswith("/") else base_url + "/"
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    session = session or requests.Session()
    sums_path = download(base + "SHA256SUMS.txt", dest / "SHA256SUMS.txt", session=session, **kwargs)
    sums = parse_sha256sums(sums_path.read_text())
    names = sorted(sums) if only is None else [n for n in sorted(sums) if n in set(only)]
    missing = sorted(set(only or ()) - set(sums))
    if missing:
        raise ValueError(f"{base}SHA256SUMS.txt does not list {missing}")
    out = []
    for name in names:
        path = dest / name
        if path.is_file() and sha256_file(path) == sums[name]:
            log.info("%s: present and verified", name)
        else:
            download(base + name, path, sha256=sums[name], session=session, **kwargs)
        out.append(path)
    return out
