"""Secret keys kept on disk: made once (mode 600), then reused; their strength; their fingerprints.

A key decides pseudonyms and row hashes: anyone who has it can match them to the public
usernames or ids, so a key must be one nobody can guess. A key given (``CET_PSEUDONYM_KEY``)
must carry at least 256 bits (``KEY_BITS``): 64 hex digits, 43 base64 characters, or 40 other
printable characters with some variety, as ``secrets.token_hex(32)`` gives. Without one, a
random key is generated and kept in a mode-600 file beside the data. Fingerprints written into
manifests and registries come from a slow, salted KDF (scrypt), so a leaked fingerprint does not
speed up a search for the key.
"""

from __future__ import annotations

import hashlib
import logging
import math
import os
import secrets
import string
from pathlib import Path

log = logging.getLogger("flows")

KEY_BITS = 256
MIN_DISTINCT = 12  # distinct characters: "aaaa..." or "abab..." are not random, whatever their length
HOW_TO_MAKE = 'python -c "import secrets; print(secrets.token_hex(32))"'
_HEX, _B64 = set(string.hexdigits), set(string.ascii_letters + string.digits + "+/=-_")


def key_bits(text: str) -> float:
    """An upper bound of the bits of a key written as ``text``: its length times the bits of the
    smallest alphabet that holds it (hex, base64, printable).

    >>> key_bits("0" * 64), round(key_bits("z" * 43)), key_bits("a")
    (256.0, 258, 4.0)
    """
    alphabet = 16 if set(text) <= _HEX else 64 if set(text) <= _B64 else 95
    return len(text) * math.log2(alphabet)


def check_key(text: str, setting: str = "CET_PSEUDONYM_KEY") -> bytes:
    """``text`` as key bytes, or ValueError naming ``setting`` (never the key) when it is too weak."""
    if key_bits(text) < KEY_BITS or len(set(text)) < MIN_DISTINCT:
        raise ValueError(f"{setting}: too weak to keep pseudonyms and row hashes secret ({len(text)} characters; "
                         f"a key needs {KEY_BITS} random bits, e.g. 64 hex digits: {HOW_TO_MAKE}); or leave "
                         f"{setting} unset and CET generates one and keeps it in a mode-600 file beside the data "
                         "(the log names the file)")
    return text.encode("utf-8")


def kept_key(value: str | None, path: Path, what: str) -> bytes:
    """``value`` (a setting) when given and strong enough (``check_key``), else the random key kept
    in ``path``, made the first time (written under a temporary name, mode 600, then renamed).
    ``what`` names it in the warning."""
    if value:
        return check_key(value)
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
    # CET_PSEUDONYM_KEY, once set, serves every purpose: the advice is to keep the file, not to copy one
    # generated key into the setting (the data folder may hold another, for row hashes or pseudonyms)
    log.warning("no %s set (CET_PSEUDONYM_KEY); generated one and kept it in %s (mode 600), which later runs "
                "read: keep that file to rebuild with the same pseudonyms (a CET_PSEUDONYM_KEY set later replaces "
                "every generated key)", what, path)
    return key


def key_digest(key: bytes, purpose: str) -> str:
    """A fingerprint of ``key`` for records (never the key itself), by ``purpose``, so that one
    key used for two purposes gives two unrelated fingerprints. scrypt (2^14, 8, 1) salted by
    the purpose: each guess at a key costs what one fingerprint does (tens of milliseconds).

    >>> key_digest(b"k", "cet-row-ids") != key_digest(b"k", "cet-pseudonym-key")
    True
    >>> key_digest(b"k", "cet-row-ids")[:7]
    'scrypt:'
    """
    return "scrypt:" + hashlib.scrypt(key, salt=purpose.encode(), n=2**14, r=8, p=1, dklen=16).hex()


def key_matches(recorded: str | None, key: bytes, purpose: str) -> bool:
    """Whether the fingerprint ``recorded`` is ``key``'s (also in the fast form records had before
    they used scrypt: 12 hex digits of sha256)."""
    if not recorded:
        return False
    if recorded.startswith("scrypt:"):
        return secrets.compare_digest(recorded, key_digest(key, purpose))
    return secrets.compare_digest(recorded, hashlib.sha256(purpose.encode() + b":" + key).hexdigest()[:12])
