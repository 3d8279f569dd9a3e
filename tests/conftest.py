import os

import numpy as np
import pytest
import torch

# Two threads per test process; one per worker when pytest-xdist runs several (``-n 2``), since
# OpenMP threads that outnumber the cores spin against each other and make fits ten times slower.
THREADS = 1 if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 else 2
# A version's fits one after another in the process that trains it, here and in the commands the
# tests start (they inherit the environment): at test sizes a spawned fit worker's start-up
# (importing torch) is most of a fit, and pytest-xdist already keeps every core busy. The product's
# default, fits side by side, runs in tests/test_side_by_side.py and the full-pipeline test.
os.environ.setdefault("CET_TRAIN_WORKERS", "1")


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(THREADS)


@pytest.fixture(autouse=True)
def _reports_in_tmp(tmp_path, monkeypatch):
    """Reports a test's flows write land in its temporary folder, never in the checkout's reports/
    (a test that names its own CET_REPORTS_DIR sets it after this)."""
    monkeypatch.setenv("CET_REPORTS_DIR", str(tmp_path / "reports"))


@pytest.fixture
def small_survival():
    """A small seeded multi-event data set: X (n, 3), T, S, C (n, 2)."""
    rng = np.random.default_rng(0)
    n = 300
    x = rng.standard_normal((n, 3))
    c = (rng.random((n, 2)) < 1 / (1 + np.exp(-2 * x[:, :2]))).astype(float)
    t_true = np.exp(0.3 * x[:, 2:3] + 0.5 * rng.standard_normal((n, 2)))
    cens = 3.0 * (1 - rng.random((n, 2)))
    s = ((c == 1) & (t_true < cens)).astype(float)
    t = np.where(s == 1, t_true, cens)
    return x, t, s, c


def pytest_collection_modifyitems(config, items):
    """Tests that start a Prefect server (tests/flows/, tests/serve/) are slow: the quick loop
    (``pytest -m "not slow"``) leaves them to CI, which runs everything."""
    for item in items:
        parts = item.path.parts
        if "tests" in parts and parts[parts.index("tests") + 1] in ("flows", "serve"):
            item.add_marker(pytest.mark.slow)


def build(cls, **settings):
    """``cls`` with ``settings``: its constructor's parameters, and fields of the training recipe
    (``cet_model.recipe.Recipe``) as a recipe variant (``cls.with_recipe``), as the experiment
    harness builds its presets."""
    import dataclasses

    from cet_model.recipe import Recipe

    fields = {f.name for f in dataclasses.fields(Recipe)}
    changes = {k: settings.pop(k) for k in list(settings) if k in fields}
    return (cls.with_recipe(**changes) if changes else cls)(**settings)
