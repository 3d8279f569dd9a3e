import re
from pathlib import Path

import pytest

from flows.lib.infra.settings import Settings

REPO = Path(__file__).resolve().parents[1]


def test_env_example_documents_every_setting():
    text = (REPO / ".env.example").read_text()
    documented = set(re.findall(r"^#?\s*(CET_[A-Z_]+)=", text, flags=re.M))
    fields = {f"CET_{name.upper()}" for name in Settings.model_fields}
    assert fields <= documented, fields - documented
    assert "PREFECT_API_URL=" in text
    assert ".env" in (REPO / ".gitignore").read_text().splitlines()


def test_env_example_values_parse(monkeypatch):
    for line in (REPO / ".env.example").read_text().splitlines():
        if line.startswith("CET_"):
            k, v = line.split("=", 1)
            monkeypatch.setenv(k, v)
    s = Settings()
    assert s.retrain_cron == "0 3 * * 1" and s.task_runner == "threads" and s.promote_metric == "val_auc"


def test_dotenv_is_read_and_the_environment_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("CET_DATA_DIR=/srv/cet-data\nCET_MAX_EPOCHS=7\nCET_PSEUDONYM_KEY=s3cret\n")
    monkeypatch.setenv("CET_MAX_EPOCHS", "9")
    s = Settings()
    assert s.data_dir == Path("/srv/cet-data") and s.max_epochs == 9
    assert "s3cret" not in repr(s) and s.pseudonym_key.get_secret_value() == "s3cret"



def test_the_default_retrain_schedule_is_a_cron_prefect_accepts():
    """Settings() skips the check of the default schedule (it would import Prefect, a second, in every
    command); this is that check."""
    from prefect.client.schemas.schedules import CronSchedule

    from flows.lib.infra.settings import DEFAULT_RETRAIN_CRON

    assert Settings().retrain_cron == DEFAULT_RETRAIN_CRON
    assert CronSchedule(cron=DEFAULT_RETRAIN_CRON).cron == DEFAULT_RETRAIN_CRON


@pytest.mark.bad_input
@pytest.mark.parametrize(
    "name,value,message",
    [
        ("CET_TASK_RUNNER", "ray", "CET_TASK_RUNNER"),
        ("CET_DEVICE", "tpu", "CET_DEVICE"),
        ("CET_DEVICE", "cuda:99", "CET_DEVICE: 'cuda:99' but (no CUDA device|this machine has)"),
        ("CET_DEVICE", "cuda:x", r"CET_DEVICE: 'cuda:x' is not 'auto', 'cpu' or 'cuda\[:N\]'"),
        ("CET_PROMOTE_METRIC", "auc", "CET_PROMOTE_METRIC"),
        ("CET_MAX_EPOCHS", "many", "CET_MAX_EPOCHS"),
        ("CET_MAX_EPOCHS", "0", "CET_MAX_EPOCHS"),
        ("CET_HIDDEN", "-3", "CET_HIDDEN"),
        ("CET_RETRAIN_CRON", "bogus", "CET_RETRAIN_CRON"),
        ("CET_RETRAIN_TIMEZONE", "Mars/Olympus", "CET_RETRAIN_TIMEZONE"),
        ("CET_MIMIC_STANDIN_SCALE", "50", "CET_MIMIC_STANDIN_SCALE"),
        ("CET_DASK_WORKERS", "0", "CET_DASK_WORKERS"),
        ("CET_MIMIC_DIR", "/no/such/folder", "CET_MIMIC_DIR"),
        ("CET_REDDIT_STANDIN_USERS", "0", "CET_REDDIT_STANDIN_USERS"),
        ("CET_PROMOTE_TOLERANCE", "-1", "CET_PROMOTE_TOLERANCE"),
        ("CET_RETRAIN_DATASET", "../cohort", "CET_RETRAIN_DATASET"),
    ],
)
def test_bad_settings_name_the_variable(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message):
        Settings()


def test_a_dataset_is_named_or_read_from_its_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CET_RETRAIN_DATASET", raising=False)
    monkeypatch.setenv("CET_DATA_DIR", str(tmp_path / "nothing"))
    s = Settings()
    assert s.retrain_dataset is None and s.dataset_name("trial7") == "trial7"
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "manifest.json").write_text('{"name": "cohort-a"}')
    assert s.dataset_name(None, tmp_path / "ds") == "cohort-a"
    (tmp_path / "ds" / "manifest.json").write_text('{"name": "../elsewhere"}')  # never a path out of models/
    with pytest.raises(ValueError, match="no dataset named.*none built yet"):
        s.dataset_name(None, tmp_path / "ds")
    monkeypatch.setenv("CET_RETRAIN_DATASET", "mimic")
    assert Settings().dataset_name(None) == "mimic"


def test_the_prefect_api_url_is_found_where_prefect_finds_it(tmp_path, monkeypatch):
    """``configured_api_url`` (which decides whether a command runs without Prefect) reads each
    place Prefect reads the API URL from, in Prefect's order: checked against Prefect's own
    settings in every case."""
    from prefect.settings.models.root import Settings as PrefectSettings

    from flows.lib.infra.settings import configured_api_url

    home, cwd = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    for var in ("PREFECT_API_URL", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(home))
    profile = 'active = "{}"\n[profiles.local]\nPREFECT_API_URL = "http://127.0.0.1:4200/api"\n[profiles.bare]\n'
    places = [  # set one after another: each later one is read before the ones above it
        (None, None),
        (home / "profiles.toml", profile.format("bare")),
        (home / "profiles.toml", profile.format("local")),
        (cwd / "pyproject.toml", '[tool.prefect.api]\nurl = "http://127.0.0.1:4201/api"\n'),
        (cwd / "prefect.toml", '[api]\nurl = "http://127.0.0.1:4202/api"\n'),
        (cwd / ".env", "PREFECT_API_URL=http://127.0.0.1:4203/api\n"),
    ]
    seen = []
    for path, text in places:
        if path is not None:
            path.write_text(text)
        seen.append(configured_api_url())
        assert seen[-1] == PrefectSettings().api.url, (path, text)
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:4204/api")
    assert configured_api_url() == PrefectSettings().api.url == "http://127.0.0.1:4204/api"
    assert seen == [None, None, *(f"http://127.0.0.1:{p}/api" for p in range(4200, 4204))]
    monkeypatch.delenv("PREFECT_API_URL")
    for name in (".env", "prefect.toml", "pyproject.toml"):
        (cwd / name).unlink()
    monkeypatch.setenv("PREFECT_PROFILE", "bare")  # the profile named in the environment wins over the file's
    assert configured_api_url() is None and PrefectSettings().api.url is None
