"""Permutation importance: planted drivers are found, groups are shuffled whole, and the
``python -m flows.train explain`` command on a registered version of a user's table."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from cet_model import BCModel, CETModel
from cet_model.dataset import Split
from cet_model.evaluation import rmst_horizons
from cet_model.importance import COMMENTS, feature_groups, permutation_importance, ranked
from cet_model.presets import fit_preset
from flows.lib.infra import registry
from flows.lib.ingest import write_follow_up_dataset
from flows.lib.modeling.train_eval import TrainParams, train_version


def _planted(n, seed):
    """Event 0 happens by x0 (timing noise); event 1 happens to half, at a time set by x2."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 5))
    c = np.stack([(x[:, 0] + 0.3 * rng.standard_normal(n) > 0), rng.random(n) < 0.5], axis=1).astype(float)
    t_true = np.stack([np.exp(0.3 * rng.standard_normal(n)), np.exp(0.8 * x[:, 2] + 0.2 * rng.standard_normal(n))],
                      axis=1)
    cens = rng.uniform(0.5, 6.0, (n, 2))
    s = c * (t_true <= cens)
    t = np.where(s == 1, t_true, cens)
    return Split(ids=np.arange(n), X=x, T=t, S=s, C=c, T_true=np.where(c == 1, t_true, np.nan))


@pytest.mark.slow
def test_the_planted_driver_of_each_event_ranks_first():
    """Occurrence of event 0 hangs on x0: AUC falls most when x0 is shuffled. Event 1's occurrence
    is a coin, its time is x2's: C (RMST) falls most for x2, and AUC hardly moves for any input."""
    train, val = _planted(1500, 0), _planted(600, 1)
    # 150 epochs: every figure checked below within 0.002 of the default budget's, the fit 6x faster
    # (python benchmarks/short_fit_importance.py at 6e7c368)
    model = CETModel(hidden_sizes=(16,), seed=0, max_epochs=150).fit(train.X, train.T, train.S, val.X, val.T, val.S)
    out = permutation_importance("CET", model, val, feature_groups([f"x{i}" for i in range(5)]), repeats=3,
                                 rmst_at=rmst_horizons(train))
    assert out["metrics"] == ["auc", "ci_rmst", "ci_timing"] and out["rows"] == 600 and out["repeats"] == 3
    assert out["observed"] == val.S.sum(axis=0).astype(int).tolist()
    by_name = {g["name"]: g for g in out["groups"]}
    auc0 = {k: g["auc"]["mean"][0] for k, g in by_name.items()}
    assert max(auc0, key=auc0.get) == "x0" and auc0["x0"] > 0.2
    assert all(abs(v) < 0.03 for k, v in auc0.items() if k != "x0")
    c1 = {k: g["ci_rmst"]["mean"][1] for k, g in by_name.items()}
    assert max(c1, key=c1.get) == "x2" and c1["x2"] > 0.1
    assert max(abs(g["auc"]["mean"][1]) for g in out["groups"]) < 0.05
    timing1 = {k: g["ci_timing"]["mean"][1] for k, g in by_name.items()}  # the time head alone: x2 only
    assert max(timing1, key=timing1.get) == "x2" and timing1["x2"] > 0.2
    assert all(abs(v) < 0.03 for k, v in timing1.items() if k != "x2")
    assert ranked(out)[0]["name"] == "x0"  # by AUC over the events (event 1's AUC hangs on nothing)
    again = permutation_importance("CET", model, val, feature_groups([f"x{i}" for i in range(5)]), repeats=3,
                                   rmst_at=rmst_horizons(train))
    assert again == out  # the same seed, the same shuffles


def test_a_group_is_shuffled_whole():
    """The columns of a categorical feature move together: every shuffled row is still a row
    with exactly one level (a model that saw another input would be scored on impossible rows)."""
    rng = np.random.default_rng(0)
    n = 300
    level = rng.integers(0, 3, n)
    x = np.column_stack([rng.standard_normal(n), np.eye(3)[level]])
    c = (level == 1).astype(float)[:, None]
    split = Split(ids=np.arange(n), X=x, T=np.ones((n, 1)), S=c, C=c, T_true=np.ones((n, 1)))
    seen = []

    class Watched(BCModel):  # the real model, its inputs kept
        def predict_occurrence(self, X):
            seen.append(np.asarray(X).copy())
            return super().predict_occurrence(X)

    model = Watched(hidden_sizes=(8,), seed=0, max_epochs=200).fit(x, np.ones((n, 1)), c)
    groups = feature_groups(["age", "site=a", "site=b", "site=c"], {"categorical": {"site": ["a", "b", "c"]}})
    assert groups == {"age": [0], "site": [1, 2, 3]}
    out = permutation_importance("BC", model, split, groups, repeats=2)
    assert len(seen) == 1 + 2 * 2
    for shuffled in seen[1:]:
        np.testing.assert_array_equal(shuffled[:, 1:].sum(axis=1), 1.0)
    assert sorted(map(tuple, seen[-1][:, 1:])) == sorted(map(tuple, x[:, 1:]))  # the same rows, reordered
    site = {g["name"]: g["auc"]["mean"][0] for g in out["groups"]}["site"]
    assert site > 0.3
    seen.clear()
    cut = permutation_importance("BC", model, split, groups, repeats=1, scores=("auc",), max_rows=100)
    assert (cut["rows"], cut["of_rows"], cut["metrics"]) == (100, 300, ["auc"])
    assert all(len(x_) == 100 for x_ in seen)  # the cut rows only, also when shuffled


@pytest.mark.slow  # a fit at the default budget: CI runs it, the quick loop leaves it out
def test_comment_embeddings_are_one_more_group():
    """On a Reddit-shaped split (features + comment embeddings), the embeddings are shuffled as
    one input, and an outcome written in them shows there."""
    rng = np.random.default_rng(0)

    def split(n, seed):
        r = np.random.default_rng(seed)
        seq = r.standard_normal((n, 3, 4)).astype(np.float32)
        c = (seq[:, :, 0].mean(axis=1) > 0).astype(float)[:, None]
        return Split(ids=np.arange(n), X=r.standard_normal((n, 2)), T=np.ones((n, 1)), S=c, C=c,
                     T_true=np.ones((n, 1)), sequences=seq)

    train, val = split(800, 1), split(300, 2)
    model = fit_preset("BC", train, val, hidden_sizes=(8,), device="cpu")
    out = permutation_importance("BC", model, val, feature_groups(["a", "b"]), repeats=2, seed=int(rng.integers(9)))
    names = [g["name"] for g in ranked(out)]
    assert names[0] == COMMENTS and out["groups"][-1]["columns"] is None
    assert out["groups"][-1]["auc"]["mean"][0] > 0.2
    assert len(permutation_importance("BC", model, val, feature_groups(["a", "b"]), comments=False)["groups"]) == 2


@pytest.mark.bad_input
def test_bad_groups_and_repeats_are_refused():
    split = _planted(50, 0)
    model = BCModel(hidden_sizes=(4,), max_epochs=1, seed=0).fit(split.X, split.T, split.S)
    with pytest.raises(ValueError, match="repeats must be at least 1"):
        permutation_importance("BC", model, split, {"a": [0]}, repeats=0)
    with pytest.raises(ValueError, match=r"groups \['far'\] name no column or columns outside the 5 features"):
        permutation_importance("BC", model, split, {"a": [0], "far": [7]})
    no_truth = Split(split.ids, split.X, split.T, split.S, np.full(split.C.shape, np.nan), split.T_true)
    with pytest.raises(
        ValueError,
        match=r"nothing to score: auc, ci_rmst, ci_timing are "
        r"undefined.*rows of the 50 with "
        rf"the event observed, per event: {', '.join(str(int(k)) for k in split.S.sum(0))}$",
    ):
        permutation_importance("BC", model, no_truth, {"a": [0]})
    with pytest.raises(ValueError, match=r"scores must be some of auc, ci_rmst, ci_timing, got \['c'\]"):
        permutation_importance("BC", model, split, {"a": [0]}, scores=("c",))
    with pytest.raises(ValueError, match="max_rows must be at least 2"):
        permutation_importance("BC", model, split, {"a": [0]}, max_rows=1)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # a small net; not what is tested
def test_explain_from_the_command_line_shows_its_progress(tmp_path):
    """As a user runs it: the registry's commands load no Prefect, and the progress must still reach the terminal."""
    from lifelines.datasets import load_rossi

    ds_dir = write_follow_up_dataset(tmp_path / "rossi", pl.from_pandas(load_rossi()), ["fin", "age", "prio"],
                                     {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks", seed=3)
    version, _ = train_version(ds_dir, tmp_path / "models", "rossi",
                               TrainParams(models=("CET",), hidden=8, max_epochs=50, device="cpu", reference="none"))
    registry.decide(tmp_path / "models", "rossi", version, registry.Rule())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "CET_MODELS_DIR": str(tmp_path / "models")}
    run = subprocess.run([sys.executable, "-m", "flows.train", "explain", "--dataset", "rossi", "--repeats", "1"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    # a second's work: its last line only (flows.lib.modeling.explain.line_due: every tenth once it takes 5 s)
    assert "| INFO    | flows.explain - v0001 CET: 3 of 3 groups in " in run.stderr and " left (near " not in run.stderr


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # a small net; not what is tested
def test_explain_command_on_a_registered_table(tmp_path, monkeypatch, capsys):
    """A user's table without the truth: C (RMST) per event, a categorical column as one input,
    the CSV with every input, event and score; errors named; a dataset changed since training refused."""
    from lifelines.datasets import load_rossi

    from flows import train as train_flow

    table = pl.from_pandas(load_rossi()).with_columns(
        race=pl.col("race").replace_strict({0: "other", 1: "black"}, return_dtype=pl.String))
    ds_dir = write_follow_up_dataset(tmp_path / "rossi", table, ["fin", "age", "race", "prio"],
                                     {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks", seed=3,
                                     categorical=["race"])
    # a short budget (the commands are tested), long enough for a model that ranks: after 200
    # epochs it was near chance and explain reports that instead of the table checked below
    version, _ = train_version(ds_dir, tmp_path / "models", "rossi",
                               TrainParams(models=("CET",), hidden=8, max_epochs=1000, patience=100, device="cpu",
                                           reference="none"))
    registry.decide(tmp_path / "models", "rossi", version, registry.Rule())
    monkeypatch.setenv("CET_MODELS_DIR", str(tmp_path / "models"))
    out = tmp_path / "importance.csv"
    assert train_flow.main(["explain", "--dataset", "rossi", "--repeats", "2", "--top", "3", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("v0001 CET: C (RMST), who has the event later or never, on the 86 val rows, minus its "
                               "C (RMST) with one input shuffled")
    assert lines[1].startswith("  C (RMST) as it is: arrest 0.") and "observed)" in lines[1]
    assert lines[2].split() == ["input", "columns", "arrest"]
    # the leak check's note (one input carries most of C) may follow the table; prio is the one it can name
    notes = [line for line in lines if "alone carries most of it" in line]
    assert all(line.startswith("  prio alone carries") for line in notes)
    lines = [line for line in lines if line not in notes]
    assert len(lines) == 3 + 3 + 3 and lines[6] == "  (3 of 4 inputs shown; --top, or --out for all)"
    assert lines[7] == "  also scored: C (timing) (--score ci_timing); all in --out" and lines[8] == f"wrote {out}"
    csv = pl.read_csv(out)
    assert csv.columns == ["input", "label", "features", "event", "score", "baseline", "importance", "sd", "repeats",
                           "split", "rows", "observed"]
    assert sorted(set(csv["input"])) == ["age", "fin", "prio", "race"] and len(csv) == 4 * 2
    assert set(csv.filter(pl.col("input") == "race")["features"]) == {"race=black race=other"}
    assert set(csv["score"]) == {"ci_rmst", "ci_timing"} and set(csv["rows"]) == {86}
    shown = {line.split()[0]: float(line.split()[2]) for line in lines[3:6]}
    for name, value in shown.items():
        got = csv.filter((pl.col("input") == name) & (pl.col("score") == "ci_rmst"))["importance"].item()
        assert got == pytest.approx(value, abs=5e-4)
    assert train_flow.main(["explain", "--dataset", "rossi", "--score", "ci_timing", "--max-rows", "40"]) == 0
    timing = capsys.readouterr().out.splitlines()
    assert timing[0].startswith("v0001 CET: C (timing), when, among the rows with the event observed (the time given "
                                "that it happens), on the 40 of the 86 val rows (drawn at random), minus")
    assert not any("also scored" in line for line in timing)
    with pytest.raises(SystemExit):
        train_flow.main(["explain", "--dataset", "rossi", "--score", "auc"])
    assert "nothing to score: auc is undefined on these rows" in capsys.readouterr().err
    # show: the version's decision and test metrics again, as evaluate printed them
    assert train_flow.main(["show", "--dataset", "rossi"]) == 0
    shown_lines = capsys.readouterr().out.splitlines()
    assert shown_lines[0] == f"{version}: the first version: nothing was promoted before"
    assert shown_lines[1].startswith("test split, averages over events") and shown_lines[3].split()[0] == "CET"
    with pytest.raises(SystemExit):
        train_flow.main(["show", "--dataset", "rossi", "--model-version", "v0002"])
    assert "rossi/v0002: not a registered model version" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        train_flow.main(["explain", "--dataset", "rossi", "--model", "ET"])
    assert exit_.value.code == 2 and "no ET model in this version (it has CET)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_flow.main(["explain", "--dataset", "rossi", "--model-version", "v0003"])
    assert "rossi/v0003: not a registered model version" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train_flow.main(["explain", "--dataset", "rossi", "--out", str(tmp_path)])
    assert "a folder; give a file name" in capsys.readouterr().err
    original = (ds_dir / "manifest.json").read_bytes()
    manifest = json.loads(original)
    (ds_dir / "manifest.json").write_text(json.dumps(manifest | {"name": "rossi2"}))
    with pytest.raises(SystemExit):
        train_flow.main(["explain", "--dataset", "rossi"])
    assert "is not the data v0001 was trained on (it changed since)" in capsys.readouterr().err
    (ds_dir / "manifest.json").write_bytes(original)  # restored, then moved
    ds_dir.rename(tmp_path / "moved")
    with pytest.raises(SystemExit):
        train_flow.main(["explain", "--dataset", "rossi"])
    assert "is not there any more; if it moved, give its folder with --data" in capsys.readouterr().err
    assert train_flow.main(["explain", "--dataset", "rossi", "--data", str(tmp_path / "moved"), "--repeats", "1"]) == 0


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_column_that_gives_the_outcome_away_is_named(tmp_path, monkeypatch, capsys):
    """A column recorded after follow-up starts (a later record of the re-arrest itself: known
    only at the end of follow-up) does nearly all the model's ranking; explain names it and says
    what to check."""
    from lifelines.datasets import load_rossi

    from flows import train as train_flow

    table = pl.from_pandas(load_rossi()).with_columns(early=pl.col("arrest").cast(pl.Float64))
    ds_dir = write_follow_up_dataset(tmp_path / "leaky", table, ["fin", "age", "prio", "early"],
                                     {"arrest": ("week", "arrest")}, name="leaky", time_unit="weeks", seed=3)
    version, _ = train_version(ds_dir, tmp_path / "models", "leaky",
                               TrainParams(models=("CET",), hidden=8, device="cpu", reference="none"))
    registry.decide(tmp_path / "models", "leaky", version, registry.Rule())
    monkeypatch.setenv("CET_MODELS_DIR", str(tmp_path / "models"))
    assert train_flow.main(["explain", "--dataset", "leaky", "--repeats", "2", "--score", "ci_rmst"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[3].split()[0] == "early"
    assert ("  early alone carries most of it: check that it is known when follow-up starts (a value recorded later "
            "can give the outcome away)") in lines
