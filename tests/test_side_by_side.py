"""A version's fits side by side in worker processes (flows.lib.modeling.side_by_side): the same
models as the fits one after another with the same CPU threads, the same things said, a failed fit
stopped and reported, and a script without a main guard not started again by the workers."""

import json
import logging
import multiprocessing
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from flows.lib.mimic.build import MimicParams, build
from flows.lib.modeling import side_by_side
from flows.lib.modeling.train_eval import TrainParams, train_version
from tests.mimic_fixture import write_fixture

MODELS = ("CET", "ET", "BC")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mimic_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sbs")
    raw = write_fixture(tmp / "mimic", n_admissions=40)
    return build(raw, tmp / "ds", tmp / "work", MimicParams(n_chart=2, n_lab=1, n_output=1))


def _run(ds_dir, root, workers, caplog, overrides=None):
    params = TrainParams(models=MODELS, hidden=8, max_epochs=25, patience=3, workers=workers,
                         overrides=overrides or {"CET": {"lr": 0.05}})
    calls = []
    caplog.clear()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO, logger="cet_model"):
        warnings.simplefilter("always")
        version, _ = train_version(ds_dir, root, "mimic", params, progress=lambda m, e, h: calls.append((m, e)))
    said = sorted({(w.category.__name__, str(w.message)) for w in caught})
    logged = sorted(r.getMessage() for r in caplog.records if r.name == "cet_model" and "budget ends" not in
                    r.getMessage())  # the estimated end names a clock time
    return version, said, logged, calls


@pytest.mark.slow  # spawns fit workers: CI runs it, the quick loop leaves it out
def test_fits_side_by_side_equal_the_fits_here_and_say_the_same(mimic_dir, tmp_path, caplog):
    workers, n_threads = side_by_side.plan(2, len(MODELS), "cpu", cpus=2, environ={}, current=2)
    assert (workers, n_threads) == (2, 1)
    torch.set_num_threads(n_threads)  # the workers' threads: the same sums in the same order
    here, said_here, logged_here, calls_here = _run(mimic_dir, tmp_path / "here", 1, caplog)
    apart, said_apart, logged_apart, calls_apart = _run(mimic_dir, tmp_path / "apart", 2, caplog)
    for model in MODELS:
        a, b = load_file(here / model / "weights.safetensors"), load_file(apart / model / "weights.safetensors")
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a), model
    ma, mb = (json.loads((v / "metrics.json").read_text()) for v in (here, apart))
    assert ma["epochs"] == mb["epochs"] and ma["encoder_epochs"] == mb["encoder_epochs"]
    assert ma["test"] == mb["test"] and ma["val"] == mb["val"] and ma["intervals"] == mb["intervals"]
    # what the fits warned and logged in the workers is warned and logged here, once
    assert said_apart == said_here and any(c == "ConvergenceWarning" for c, _ in said_here)
    assert logged_apart == logged_here and any(m.startswith("CET/marginal") for m in logged_here)
    # progress hears of the first epochs and the last of each fit, and of nothing a fit did not do
    assert set(calls_apart) <= set(calls_here)
    for model in MODELS:
        epochs = [e for m, e in calls_here if m == model]
        assert (model, 0) in calls_apart and (model, max(epochs)) in calls_apart
    assert json.loads((apart / "params.json").read_text())["fit_processes"] == {"workers": 2, "threads": 1}
    assert json.loads((here / "params.json").read_text())["fit_processes"] == {"workers": 1, "threads": None}
    assert multiprocessing.active_children() == []  # the workers are gone


@pytest.mark.slow  # spawns fit workers: CI runs it, the quick loop leaves it out
def test_a_failed_fit_in_a_worker_fails_the_version_and_leaves_nothing(mimic_dir, tmp_path, caplog):
    with pytest.raises(ValueError, match="lr"):
        _run(mimic_dir, tmp_path / "models", 2, caplog, overrides={"BC": {"lr": -1.0}})
    assert multiprocessing.active_children() == []
    assert not any((tmp_path / "models").rglob("weights.safetensors"))  # the staged fits were discarded


def test_the_plan_follows_the_cpus_the_thread_setting_and_the_device():
    assert side_by_side.plan(None, 4, "cpu", cpus=2, environ={}, current=2) == (2, 1)
    assert side_by_side.plan(None, 3, "cpu", cpus=16, environ={}, current=16) == (3, 5)
    assert side_by_side.plan(None, 3, "cpu", cpus=16, environ={"OMP_NUM_THREADS": "1"}, current=1) == (3, 1)
    assert side_by_side.plan(None, 4, "cpu", cpus=2, environ={"CET_THREADS": "2"}) == (1, 2)
    assert side_by_side.plan(None, 4, "cuda", cpus=16, environ={})[0] == 1
    assert side_by_side.plan(1, 4, "cpu", cpus=16, environ={})[0] == 1
    with pytest.raises(ValueError, match="CET_TRAIN_WORKERS"):
        side_by_side.plan(0, 4, "cpu", cpus=2, environ={})


@pytest.mark.slow
def test_a_script_without_a_main_guard_is_not_run_again_by_the_workers(mimic_dir, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        from pathlib import Path
        from flows.lib.modeling.train_eval import TrainParams, train_version
        marks = Path({str(tmp_path / "marks")!r})
        marks.mkdir(exist_ok=True)
        (marks / str(__import__("os").getpid())).touch()  # each run of this script leaves one
        train_version({str(mimic_dir)!r}, {str(tmp_path / "models")!r}, "mimic",
                      TrainParams(models=("CET", "ET"), hidden=8, max_epochs=5, patience=2, workers=2))
        print("done")
    """))
    out = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "done"
    assert len(list((tmp_path / "marks").iterdir())) == 1
    params = json.loads(next((tmp_path / "models").rglob("params.json")).read_text())
    assert params["fit_processes"] == {"workers": 2, "threads": 1}
