"""Secret keys kept on disk: made once (mode 600), then reused; and their fingerprints."""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
from pathlib import Path

log = logging.getLogger("flows")


def kept_key(value: str | None, path: Path, what: str) -> bytes:
    """``value`` (a setting) when given, else the random key kept in ``path``, made the first time
    (written under a temporary name, mode 600, then renamed). ``what`` names it in the warning."""
    if value:
        return value.encode("utf-8")
    path = Path(path)
    if path.is_file():
        return path.read_bytes().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_hex(32).encode()
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
    os.replace(tmp, path)
    log.warning("no %s set (CET_PSEUDONYM_KEY); generated one in %s", what, path)
    return key


def key_digest(key: bytes, purpose: str) -> str:
    """A fingerprint of ``key`` for records (never the key itself), by ``purpose``, so that one
    key used for two purposes gives two unrelated fingerprints.

    >>> key_digest(b"k", "cet-row-ids") != key_digest(b"k", "cet-pseudonym-key")
    True
    """
    return hashlib.sha256(purpose.encode() + b":" + key).hexdigest()[:12]
