"""Settings for the flows, read from the environment and ``.env`` (environment wins).

Every field maps to ``CET_<NAME>`` (``CET_DATA_DIR``, ``CET_TASK_RUNNER``, ...); ``.env.example``
documents them all, and Prefect's own ``PREFECT_API_URL``, which Prefect reads and
``configured_api_url`` finds where Prefect does. Flows read settings when they run (inside the
served process too), so a deployment triggered without parameters uses them; explicit flow
parameters win.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from flows.lib.choices import EMBEDDING_MODEL, EVIDENCE, MIMIC_STANDIN_SCALE, REDDIT_STANDIN_USERS

DATASET_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"  # a dataset's name: models/<name>/, $CET_DATA_DIR/<name>


def check_device(value: str, name: str) -> str:
    """``value`` if it is auto, cpu, or a CUDA device this machine has; else a ValueError that
    starts with ``name``. Checked where the flows run: a worker without the GPU asked for stops
    before any task, not in the training task."""
    if value in ("auto", "cpu"):
        return value
    if not value.startswith("cuda"):
        raise ValueError(f"{name}: {value!r} is not auto, cpu or cuda[:N]")
    from cet_model.models import resolve_device

    try:
        resolve_device(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {value!r} " + str(exc).removeprefix(f"device={value!r} ")) from None
    return value


DEFAULT_RETRAIN_CRON = "0 3 * * 1"  # Mondays at 03:00


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CET_", env_file=".env", extra="ignore")

    # where things are written
    data_dir: Path = Path("data")
    reports_dir: Path = Path("reports")
    models_dir: Path = Path("models")

    # sources: unset means a generated stand-in in the real format
    mimic_dir: Path | None = None
    mimic_standin_scale: float = Field(
        default=MIMIC_STANDIN_SCALE, gt=0, le=1
    )  # ~2,900 admissions, ~16M chart rows: under a minute to make and build
    reddit_dumps: str | None = None  # a folder or a base URL of RC_/RS_ dumps
    source_roots: str | None = None  # more folders a served run may read or write (os.pathsep-separated)
    reddit_standin_users: int = Field(default=REDDIT_STANDIN_USERS, ge=10)
    reddit_standin_text: Literal["phrases", "realistic"] = (
        "phrases"  # realistic: real length, few repeats (slow to embed)
    )
    synthetic_mode: Literal["reference", "independent"] = "reference"
    synthetic_n: int = Field(default=40_000, ge=100)

    # embeddings and torch
    embedding_model: str = EMBEDDING_MODEL
    embedding_cache: Path | None = None
    embed_block: int = Field(default=50_000, gt=0)  # texts per saved embedding block (a crash loses one)
    device: str = "auto"
    pseudonym_key: SecretStr | None = None

    # training, registry and schedule
    hidden: int = Field(default=100, gt=0)
    max_epochs: int | None = Field(default=None, gt=0)  # None: automatic (>= 100 epochs and >= 5,000 steps)
    patience: int | None = Field(default=None, gt=0)  # None: automatic (10 epochs, stretched with the budget)
    seed: int = Field(default=0, ge=0)
    threads: int | None = Field(default=None, gt=0)  # CPU threads per fit; None: cet_model.threads chooses
    # a version's fits side by side in this many processes; None: one a CPU (a GPU: 1); 1: one after another
    train_workers: int | None = Field(default=None, gt=0)  # flows.lib.modeling.side_by_side.plan
    promote_metric: str = "val_auc"
    promote_tolerance: float = Field(default=0.0, ge=0)
    promote_evidence: Literal[EVIDENCE] = "point"  # type: ignore[valid-type]  # registry.Rule
    retrain_dataset: str | None = Field(None, pattern=DATASET_NAME)  # synthetic, mimic, reddit or a table's name
    retrain_cron: str = DEFAULT_RETRAIN_CRON
    retrain_timezone: str = "UTC"

    # orchestration
    task_runner: str = "threads"  # threads | dask | dask://HOST:PORT (an existing scheduler)
    dask_workers: int = Field(default=2, ge=1)
    lock_wait: float = Field(default=3600.0, ge=0)  # seconds a run waits for another run writing the same output

    def __init__(self, **values):
        try:
            super().__init__(**values)
        except ValidationError as exc:  # name the variable a user sets, not the field
            lines = []
            for err in exc.errors():
                field = str(err["loc"][0]) if err["loc"] else "?"
                var = f"CET_{field.upper()}"
                msg = err["msg"].removeprefix("Value error, ")
                lines.append(msg if msg.startswith(var) else f"{var}: {msg} (got {err.get('input')!r})")
            raise ValueError("bad setting: " + "; ".join(lines)) from None

    @field_validator("task_runner")
    @classmethod
    def _runner(cls, v: str) -> str:
        if v in ("threads", "dask") or v.startswith(("dask://", "tcp://")):
            return v
        raise ValueError(f"CET_TASK_RUNNER: {v!r} is not threads, dask or dask://HOST:PORT")

    @field_validator("mimic_dir")
    @classmethod
    def _mimic_dir(cls, v: Path | None) -> Path | None:
        if v is not None and not Path(v).is_dir():
            raise ValueError(f"CET_MIMIC_DIR: {str(v)!r} is not an existing folder")
        return v

    @field_validator("retrain_cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        if v == DEFAULT_RETRAIN_CRON:  # valid (tests/test_settings.py): Settings() loads no Prefect for it
            return v
        from prefect.client.schemas.schedules import CronSchedule

        try:
            CronSchedule(cron=v)
        except ValueError:
            raise ValueError(f"CET_RETRAIN_CRON: {v!r} is not a cron expression (e.g. '0 3 * * 1')") from None
        return v

    @field_validator("retrain_timezone")
    @classmethod
    def _timezone(cls, v: str) -> str:
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(v)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"CET_RETRAIN_TIMEZONE: {v!r} is not an IANA time zone (e.g. 'UTC', "
                             "'Europe/Paris')") from None
        return v

    @field_validator("device")
    @classmethod
    def _device(cls, v: str) -> str:
        return check_device(v, "CET_DEVICE")

    @field_validator("promote_metric")
    @classmethod
    def _metric(cls, v: str) -> str:
        from flows.lib.infra.registry import METRIC_DIRECTION

        if v not in METRIC_DIRECTION:
            raise ValueError(f"CET_PROMOTE_METRIC: {v!r} is not one of {sorted(METRIC_DIRECTION)}")
        return v

    def dataset_dir(self, name: str) -> Path:
        return self.data_dir / name

    def dataset_name(self, given: str | None, data: str | Path | None = None) -> str:
        """``given``, else the name in the manifest of the folder ``data`` (when one is given), else
        ``CET_RETRAIN_DATASET``; none is an error listing the datasets there are: a command never
        trains, scores or registers under a name the user did not give."""
        name = given or (_manifest_name(data) if data else None) or self.retrain_dataset
        if name:
            return name
        built = sorted(p.name for p in self.data_dir.glob("*/manifest.json") for p in [p.parent])
        models = sorted(p.name for p in self.models_dir.glob("*") if p.is_dir() and not p.name.startswith("."))
        found = "; ".join(part for part in (
            f"datasets in {self.data_dir}: {', '.join(built)}" if built else "",
            f"models in {self.models_dir}: {', '.join(models)}" if models else "") if part)
        raise ValueError("no dataset named: pass --dataset NAME (or set CET_RETRAIN_DATASET); "
                         + (found or f"none built yet in {self.data_dir} (python -m flows.synthetic, "
                                     "python -m flows.mimic build, python -m flows.table)"))


def _manifest_name(folder) -> str | None:
    """The dataset name a folder's manifest.json records, when it is a valid name (else None)."""
    try:
        name = json.loads((Path(folder) / "manifest.json").read_text()).get("name")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) and re.fullmatch(DATASET_NAME, name) else None


def configured_api_url(environ=None, cwd=None) -> str | None:
    """The Prefect API URL that Prefect itself would use, or None (a run would start a temporary
    server). Read where Prefect reads it, first found wins, without loading Prefect: the
    environment, ``.env``, ``prefect.toml`` (``[api] url``) and ``pyproject.toml``
    (``[tool.prefect.api] url``) in ``cwd``, then the active profile (``PREFECT_PROFILE``, or
    ``active`` in ``$PREFECT_PROFILES_PATH``, by default ``$PREFECT_HOME/profiles.toml``). A file
    that cannot be read counts as not setting it.

    >>> import tempfile
    >>> home = tempfile.mkdtemp()
    >>> _ = (Path(home) / "profiles.toml").write_text('active = "local"\\n[profiles.local]\\n'
    ...                                               'PREFECT_API_URL = "http://127.0.0.1:4200/api"\\n')
    >>> configured_api_url({"PREFECT_HOME": home}, cwd=home)
    'http://127.0.0.1:4200/api'
    >>> configured_api_url({"PREFECT_HOME": home, "PREFECT_PROFILE": "ephemeral"}, cwd=home) is None
    True
    """
    import os
    import tomllib

    from dotenv import dotenv_values

    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else Path(cwd)

    def toml(path: Path) -> dict:
        try:
            return tomllib.loads(path.read_text())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            return {}

    def dotenv(path: Path) -> dict:
        try:
            return dotenv_values(path) if path.is_file() else {}
        except (OSError, UnicodeDecodeError):
            return {}

    home = Path(environ.get("PREFECT_HOME") or "~/.prefect").expanduser()
    profiles_path = Path(str(environ.get("PREFECT_PROFILES_PATH") or home / "profiles.toml")
                         .replace("$PREFECT_HOME", str(home))).expanduser()
    profiles = toml(profiles_path)
    active = environ.get("PREFECT_PROFILE") or profiles.get("active") or "ephemeral"
    candidates = [
        environ.get("PREFECT_API_URL"),
        dotenv(cwd / ".env").get("PREFECT_API_URL"),
        (toml(cwd / "prefect.toml").get("api") or {}).get("url"),
        ((toml(cwd / "pyproject.toml").get("tool") or {}).get("prefect", {}).get("api") or {}).get("url"),
        (profiles.get("profiles") or {}).get(active, {}).get("PREFECT_API_URL"),
    ]
    for value in candidates:
        if value is not None:
            return str(value).strip() or None
    return None
