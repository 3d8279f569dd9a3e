"""What the served API may do (docs/reliability.md, "The served API").

``python -m flows.serve`` runs the flows for whoever can reach the Prefect API, so the API must
ask for credentials, and a run it starts may only touch the folders this installation is
configured with:

- ``check_api_locked``: serving refuses a Prefect server that answers without credentials
  (``PREFECT_SERVER_API_AUTH_STRING`` on the server, ``PREFECT_API_AUTH_STRING`` for its
  clients), unless told the machine has a single user (``--single-user``).
- ``confine``: a run started by a deployment may name files and folders only inside
  ``CET_DATA_DIR``, ``CET_MODELS_DIR``, ``CET_REPORTS_DIR``, the configured sources
  (``CET_MIMIC_DIR``, ``CET_REDDIT_DUMPS``, ``CET_EMBEDDING_CACHE``) and ``CET_SOURCE_ROOTS``
  (folders separated by ``os.pathsep``). A command run by hand names what its user hands it.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import httpx

from flows.lib.infra.keys import check_key
from flows.lib.infra.settings import Settings


def started_by_deployment() -> bool:
    """Whether this flow run was started through a deployment (the served API or its schedule):
    its parameters came from whoever called the API. A subflow's come from this project's code."""
    from prefect.runtime import deployment

    return deployment.id is not None


def allowed_roots(s: Settings) -> list[Path]:
    roots = [s.data_dir, s.models_dir, s.reports_dir, s.mimic_dir, s.embedding_cache]
    if s.reddit_dumps and not s.reddit_dumps.startswith(("http://", "https://")):
        roots.append(s.reddit_dumps)
    roots += [p for p in (s.source_roots or "").split(os.pathsep) if p.strip()]
    return [Path(os.path.realpath(os.path.expanduser(str(r)))) for r in roots if r is not None]


def _is_path(field: str, value: str) -> bool:
    if value.startswith(("http://", "https://")):
        return False
    # a model may be a name (resolved by sentence-transformers) or a folder
    return field != "model" or os.sep in value or Path(value).exists()


def confine(params, s: Settings | None = None, force: bool = False) -> None:
    """ValueError naming the parameter when a run started by a deployment (or ``force``) names a
    path outside ``allowed_roots``; links are followed first. ``params``: a ``FlowParams``."""
    if not (force or started_by_deployment()):
        return
    roots = allowed_roots(s or Settings())
    for field in type(params).PATHS:
        value = getattr(params, field)
        for v in value if isinstance(value, list) else [value]:
            if v is None or not _is_path(field, str(v)):
                continue
            real = Path(os.path.realpath(os.path.expanduser(str(v))))
            if not any(real == r or r in real.parents for r in roots):
                raise ValueError(f"parameter {field!r}: {v} lies outside the folders a served run may use "
                                 f"({', '.join(map(str, roots)) or 'none configured'}); add its folder to "
                                 "CET_SOURCE_ROOTS where the flows are served, or run the command by hand")


def _unauthenticated_answer(url: str) -> int | None:
    """The status of a read that needs no parameters, sent without credentials (None: no answer)."""
    try:
        return httpx.post(f"{url.rstrip('/')}/flows/filter", json={"limit": 1}, timeout=10).status_code
    except httpx.TransportError:
        return None


def check_api_locked(url: str | None, auth: str | None, single_user: bool) -> str:
    """Refuse (ValueError) to serve on an API anyone can use; returns what was checked, for the log."""
    if not url:
        raise ValueError("PREFECT_API_URL is unset: start a Prefect server (prefect server start, with "
                         "PREFECT_SERVER_API_AUTH_STRING set) and point PREFECT_API_URL at it")
    if single_user:
        return (f"{url}: serving without checking for credentials (--single-user: no other user or untrusted process "
                "on this machine can reach the API)")
    if not auth:
        raise ValueError("PREFECT_API_AUTH_STRING is unset: anyone who reaches the API could start runs as you. Start "
                         "the server with PREFECT_SERVER_API_AUTH_STRING and give clients the same string as "
                         "PREFECT_API_AUTH_STRING (python -c \"import secrets; print(secrets.token_hex(32))\"), or "
                         "pass --single-user on a machine no one else uses")
    check_key(auth, "PREFECT_API_AUTH_STRING")
    status = _unauthenticated_answer(url)
    if status is None:
        raise ValueError(f"{url}: the Prefect API does not answer")
    if status != 401:
        raise ValueError(f"{url}: the Prefect API answered a request without credentials (HTTP {status}): anyone who "
                         "reaches it could start runs as you. Restart the server with PREFECT_SERVER_API_AUTH_STRING "
                         "set, or pass --single-user on a machine no one else uses")
    token = base64.b64encode(auth.encode()).decode()
    answer = httpx.post(f"{url.rstrip('/')}/flows/filter", json={"limit": 1}, timeout=10,
                        headers={"Authorization": f"Basic {token}"})
    if answer.status_code == 401:
        raise ValueError(f"{url}: the Prefect API refused PREFECT_API_AUTH_STRING: give the string the server was "
                         "started with")
    return f"{url}: the API asks for credentials, and PREFECT_API_AUTH_STRING is accepted"
