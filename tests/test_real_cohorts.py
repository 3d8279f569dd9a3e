"""The real-data benchmark (cet_experiments.cohorts, cet_experiments.real): every loader against
its published counts, protocol a against a hand computation, protocol b's metrics against
independent ones, and the command end to end on a table of one's own."""

import json
import logging
import math
import re

import numpy as np
import polars as pl
import pytest
from scipy.stats import norm

from cet_experiments import cohorts, real, real_tables
from cet_experiments.cli import quiet_library
from cet_experiments.rows import VARIANTS
from cet_model import CETModel, ETModel
from cet_model.dataset import Dataset, Split, load_dataset
from cet_model.metrics import concordance_index, occurrence_auc
from flows.lib.ingest import write_follow_up_dataset
from tests.conftest import build


@pytest.mark.parametrize("name", list(cohorts.ALL))
def test_each_cohort_has_its_published_rows_and_events(name):
    cohort = cohorts.ALL[name]
    table = cohort.table()
    counts = {"rows": len(table), **{e: int(table[s].sum()) for e, (_, s) in cohort.events.items()}}
    assert counts == cohort.published
    for e, (t, s) in cohort.events.items():
        times = table[t].to_numpy(float)
        assert (times[~np.isnan(times)] > 0).all(), e  # log-normal times
        assert set(np.unique(table[s])) <= {0, 1}
        assert (table[s][np.isnan(times)] == 0).all()  # a cell left out has no event seen
    features = [c for c in table.columns if c not in {x for pair in cohort.events.values() for x in pair}]
    assert features and set(cohort.categorical) <= set(features)


def test_outcome_dates_are_not_features():
    """lymph_node's recurrence and death dates would give the outcomes away."""
    table = cohorts.COHORTS["lymph_node"].table()
    assert not {"recdate", "deathdate", "diagdateb"} & set(table.columns)


def test_nafld_leaves_out_a_comorbidity_present_at_entry():
    table = cohorts.COHORTS["nafld"].table()
    for event in cohorts.NAFLD_EVENTS:
        prevalent = table[f"{event}_at_entry"] == 1
        assert table[f"t_{event}"][prevalent].isna().all()
        assert table[f"t_{event}"][~prevalent].notna().all()
        seen = table[f"s_{event}"] == 1
        assert (table[f"t_{event}"][seen] <= table["t_death"][seen]).all()  # seen within the follow-up


def test_single_event_sets_leave_out_their_leaked_outcomes():
    """flchain's cause-of-death chapter and support2's status two months on tell the outcome."""
    assert "fac_chapter" not in cohorts.SINGLE_EVENT["flchain"].table().columns
    assert "fac_sfdm2" not in cohorts.SINGLE_EVENT["support2"].table().columns
    assert "fac_sfdm2" not in cohorts.SINGLE_EVENT["support2"].categorical
    assert all(len(c.events) == 1 for c in cohorts.SINGLE_EVENT.values())
    assert not set(cohorts.SINGLE_EVENT) & set(cohorts.COHORTS)


def test_cohort_names_expand_groups_and_refuse_unknown_names():
    assert cohorts.cohort_names("multi") == list(cohorts.COHORTS)
    assert cohorts.cohort_names("pbc, multi,pbc") == ["pbc", *cohorts.COHORTS]
    with pytest.raises(ValueError, match="unknown cohort 'nope'.*single"):
        cohorts.cohort_names("aids,nope")


def test_a_single_event_set_becomes_a_dataset_folder_with_one_event(tmp_path):
    ds = load_dataset(cohorts.write_cohort("flchain", tmp_path / "flchain"))
    assert ds.event_names == ["death"]
    assert sum(len(s) for s in ds.splits.values()) == 7874
    assert any(name.startswith("fac_mgus=") for name in ds.feature_names)


def test_a_cohort_becomes_a_dataset_folder_as_a_users_table_does(tmp_path):
    ds = load_dataset(cohorts.write_cohort("myeloid", tmp_path / "myeloid"))
    assert ds.event_names == ["response", "transplant", "relapse", "death"]
    assert sum(len(s) for s in ds.splits.values()) == 646
    assert np.isnan(ds.train.C).all()  # follow-up data: no truth until protocol a makes one
    assert any(name.startswith("flt3=") for name in ds.feature_names)  # one column per level


def _split(t, s, ids, mask=None):
    n = len(t)
    t, s = np.asarray(t, float)[:, None], np.asarray(s, float)[:, None]
    return Split(ids=np.asarray(ids), X=np.zeros((n, 1)), T=t, S=s, C=np.full((n, 1), np.nan),
                 T_true=np.full((n, 1), np.nan), mask=None if mask is None else np.asarray(mask, float)[:, None])


def test_protocol_a_is_the_papers_censoring_on_top_of_what_follow_up_saw():
    """By hand: the truth is s, its time t; then C ~ U(0, 2 x the training median of the true
    times], drawn in the order train, val, test from one seeded generator; a row's event is seen
    when it happened before its censoring time."""
    train = _split([2.0, 4.0, 6.0, 8.0, 3.0], [1, 1, 0, 1, 0], [0, 1, 2, 3, 4], mask=[1, 1, 1, 1, 0])
    val, test = _split([5.0, 1.0], [1, 0], [5, 6]), _split([7.0, 9.0], [1, 1], [7, 8])
    ds = Dataset(None, {"name": "hand"}, ["x"], ["e"], {"train": train, "val": val, "test": test})
    a = real.with_truth(ds, seed=3)
    c = np.array([1, 1, 0, 1, np.nan, 1, 0, 1, 1])
    t_true = np.array([2, 4, np.nan, 8, np.nan, 5, np.nan, 7, 9])
    upper = 2 * np.median([2.0, 4.0, 8.0])  # the training rows the mask keeps whose event was seen
    cens = upper * (1 - np.random.default_rng(3).random((9, 1)))[:, 0]
    seen = (c == 1) & (np.nan_to_num(t_true, nan=np.inf) < cens)
    got = {k: np.concatenate([getattr(a.splits[s], k)[:, 0] for s in ("train", "val", "test")])
           for k in ("C", "T_true", "T", "S")}
    np.testing.assert_array_equal(got["C"], c)
    np.testing.assert_array_equal(got["T_true"], t_true)
    np.testing.assert_array_equal(got["S"], np.where(np.arange(9) == 4, 0, seen))
    want_t = np.where(seen, t_true, cens)
    want_t[4] = 3.0  # the masked cell keeps its time, never used
    np.testing.assert_allclose(got["T"], want_t)
    assert a.manifest["censoring"]["upper"] == [upper]
    # the truth's training events past that bound (8.0 of 2, 4 and 8; the masked row left out)
    assert upper == 8.0 and real.past_bound(a) == {"e": 0.0}
    a.manifest["censoring"]["upper"] = [3.0]
    assert real.past_bound(a) == {"e": pytest.approx(2 / 3)}


def test_protocol_a_scores_p_ever_against_the_truth_by_hand():
    """AUC: the share of (event, no event) pairs of the truth that P(ever) orders right (ties
    half), computed pair by pair; the goal compares the means over events and seeds."""
    c = np.array([1, 0, 1, 0, 1, 0])
    p = np.array([0.9, 0.2, 0.4, 0.4, 0.3, 0.8])
    pairs = [(i, k) for i in np.flatnonzero(c == 1) for k in np.flatnonzero(c == 0)]
    hand = sum(1.0 if p[i] > p[k] else 0.5 if p[i] == p[k] else 0.0 for i, k in pairs) / len(pairs)
    assert occurrence_auc(c, p) == pytest.approx(hand)
    record = {"a": {r: {"tasks": {"e1": {"auc": [a, a], "ece": [e, e]}, "e2": {"auc": [b, b], "ece": [e, e]}}}
                    for r, a, b, e in (("CET", 0.70, 0.60, 0.05), ("ET", 0.66, 0.62, 0.03), ("BC", 0.69, 0.60, 0.10))}}
    goal = real_tables.paper_goal(record)
    assert goal["auc_margin"] == pytest.approx(0.65 - 0.645)  # mean over events: 0.65 against max(0.64, 0.645)
    assert goal["ece_margin"] == pytest.approx(0.03 + 0.01 - 0.05) and not goal["met"]  # ECE 0.01 too high
    for task in record["a"]["CET"]["tasks"].values():
        task["ece"] = [0.035, 0.035]
    assert real_tables.paper_goal(record)["met"]


def test_protocol_b_metrics_of_a_known_log_normal_model():
    """Curves of a known log-normal model: the restricted mean by the trapezoid rule against its
    closed form, the C's against the concordance of each ranking, the risk at the training median."""
    rng = np.random.default_rng(0)
    n = 400
    mu, sigma = rng.normal(1.0, 0.5, n), 0.6
    t = np.exp(mu + sigma * rng.standard_normal(n))
    cens = rng.uniform(1, 8, n)
    s, t = (t < cens).astype(float), np.minimum(t, cens)
    train = _split(t[:200], s[:200], np.arange(200))
    test = _split(t[200:], s[200:], np.arange(200, 400))
    m = mu[200:]
    curves = real.Curves(np.exp(m), lambda at: norm.sf((np.log(np.maximum(at, 1e-300))[None, :] - m[:, None]) / sigma))
    out = real.natural_scores(curves, train, test, 0)
    h_rmst, h_risk = real.horizons(train, 0)
    assert h_rmst == pytest.approx(np.quantile(t[:200], 0.9))
    assert h_risk == pytest.approx(np.median(t[:200][s[:200] == 1]))
    # E[min(T, h)] = exp(mu + s^2/2) Phi((log h - mu - s^2) / s) + h (1 - Phi((log h - mu) / s))
    lh = np.log(h_rmst)
    rmst = np.exp(m + sigma**2 / 2) * norm.cdf((lh - m - sigma**2) / sigma) + h_rmst * norm.sf((lh - m) / sigma)
    risk = norm.cdf((np.log(h_risk) - m) / sigma)
    assert out["harrell_median"] == pytest.approx(concordance_index(t[200:], np.exp(m), s[200:]))
    assert out["harrell_rmst"] == pytest.approx(concordance_index(t[200:], rmst, s[200:]), abs=1e-3)
    assert out["harrell_risk"] == pytest.approx(concordance_index(t[200:], -risk, s[200:]))
    assert 0.5 < out["uno_median"] < 1 and 0 < out["ibs"] < 0.25 and 0 <= out["calibration"] < 0.1


def test_the_aft_rows_log_likelihood_is_lifelines_own():
    from lifelines import LogNormalAFTFitter

    rng = np.random.default_rng(1)
    n = 300
    x = rng.standard_normal((n, 2))
    t = np.exp(0.5 + x @ [0.4, -0.3] + 0.7 * rng.standard_normal(n))
    s = (rng.random(n) < 0.7).astype(float)
    sp = Split(
        ids=np.arange(n), X=x, T=t[:, None], S=s[:, None], C=np.full((n, 1), np.nan), T_true=np.full((n, 1), np.nan)
    )
    curves, loglik = real.classical_fits("LogNormalAFT", sp, sp)
    import pandas as pd

    z = (x - x.mean(0)) / x.std(0)
    frame = pd.DataFrame(z, columns=["x0", "x1"]).assign(_t=t, _s=s)
    aft = LogNormalAFTFitter(penalizer=real.RIDGE).fit(frame, "_t", "_s")
    assert loglik == pytest.approx(aft.score(frame, scoring_method="log_likelihood"), rel=1e-6)
    np.testing.assert_allclose(curves[0].median, aft.predict_median(frame).to_numpy(), rtol=1e-6)


def test_score_samples_is_the_per_row_score_and_the_marginal_likelihood_of_any_objective(small_survival):
    x, t, s, _ = small_survival
    for model in (CETModel(hidden_sizes=(8,), max_epochs=3, device="cpu"), ETModel(hidden_sizes=(8,), max_epochs=3)):
        model.fit(x, t, s)
        rows = model.score_samples(x, t, s)
        assert rows.shape == (len(x),) and rows.mean() == pytest.approx(model.objective_score(x, t, s), abs=1e-6)
    paper = build(CETModel, hidden_sizes=(8,), max_epochs=3, objective="paper", estimator="gumbel").fit(x, t, s)
    marginal = CETModel.with_recipe(sigma="net")(hidden_sizes=(8,), max_epochs=1).fit(x, t, s)
    marginal.net_.load_state_dict(paper.net_.state_dict())
    assert paper.score_samples(x, t, s).mean() == pytest.approx(marginal.objective_score(x, t, s), abs=1e-6)
    assert paper.objective_score(x, t, s) != pytest.approx(
        marginal.objective_score(x, t, s), abs=1e-3
    )  # the paper's objective


@pytest.mark.slow
def _own_table(tmp_path):
    rng = np.random.default_rng(0)
    n = 240
    age = rng.normal(60, 10, n)
    c = rng.random((n, 2)) < 1 / (1 + np.exp(-(age[:, None] - 60) / 10))
    t = np.exp(rng.normal(2, 0.5, (n, 2)))
    follow = rng.uniform(2, 20, (n, 2))
    seen = c & (t < follow)
    table = pl.DataFrame({"age": age, "t_a": np.where(seen[:, 0], t[:, 0], follow[:, 0]), "s_a": seen[:, 0].astype(int),
                          "t_b": np.where(seen[:, 1], t[:, 1], follow[:, 1]), "s_b": seen[:, 1].astype(int)})
    return write_follow_up_dataset(tmp_path / "mine", table, ["age"], {"a": ("t_a", "s_a"), "b": ("t_b", "s_b")},
                                   name="mine", time_unit="days", split_method="stratified")


def test_the_command_on_a_table_of_ones_own(tmp_path, capsys, caplog, monkeypatch):
    """``--data``: the two protocols on a user's dataset folder, by default CET against the baselines
    (no CET-paper), every row and metric filled, with what will run and, after the first seed, how
    long the rest will take; not the model library's line per fit, which ``CET_LOG_LEVEL=INFO`` asks
    for."""
    monkeypatch.delenv("CET_LOG_LEVEL", raising=False)
    monkeypatch.setattr(logging.getLogger("cet_model"), "level", logging.INFO)  # as importing flows leaves it
    caplog.set_level(logging.DEBUG)
    folder = _own_table(tmp_path)
    out = tmp_path / "bench"
    assert real.main(["--out", str(out), "--data", str(folder), "--seeds", "2", "--max-epochs", "5"]) == 0
    said = capsys.readouterr().out
    assert "mine: 144 training rows, 2 events; 2 seeds of CET, ET, BC, Oracle, then CoxPH" in said
    assert not [r for r in caplog.records if r.name == "cet_model" and r.levelno < logging.WARNING]
    monkeypatch.setenv("CET_LOG_LEVEL", "info")
    quiet_library()
    assert logging.getLogger("cet_model").getEffectiveLevel() == logging.INFO
    assert re.search(r"mine: 1 of 2 seeds in \d+ s; about \d+ s left for the networks \(near \d\d:\d\d\), then "
                     r"the classical models", said), said
    record = json.loads((out / "mine" / "metrics.json").read_text())
    assert set(record["a"]) == {"CET", "ET", "BC", "Oracle"} and "source" not in record
    assert set(record["b"]) == {"CET", "ET", "CoxPH", "LogNormalAFT", "RSF"}
    for row in ("CET", "ET", "CoxPH", "LogNormalAFT", "RSF"):
        for e in ("a", "b"):
            assert not math.isnan(record["b"][row]["tasks"][e]["harrell_rmst"][0])
    assert not math.isnan(record["b"]["LogNormalAFT"]["loglik"][0]) and math.isnan(record["b"]["CoxPH"]["loglik"][0])
    text = (out / "table.md").read_text()
    assert "| mine | a |" in text and "## Protocol b" in text
    # each goal's margin with its spread over the two seeds
    assert len(re.findall(r"\| [+-]\d\.\d{3} (?:met|\*\*missed\*\*) \([+-]\d\.\d{3} to [+-]\d\.\d{3}\) \|", text)) == 2


def test_own_data_that_cannot_be_benchmarked_is_refused_before_anything_is_written(tmp_path):
    """``--data`` with a folder that is not a dataset, or with an event no training row saw: an
    error naming the folder (and the event), no traceback, and no output folder."""
    out = tmp_path / "bench"
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match=r"--data .*empty: .*manifest\.json: missing; not a dataset folder"):
        real.main(["--out", str(out), "--data", str(tmp_path / "empty")])
    rng = np.random.default_rng(1)
    n = 60
    table = pl.DataFrame({"age": rng.normal(60, 10, n), "t": rng.uniform(1, 10, n), "s": rng.random(n) < 0.5,
                          "never": np.zeros(n, int)}).with_columns(pl.col("s").cast(pl.Int64))
    folder = write_follow_up_dataset(tmp_path / "quiet", table, ["age"], {"a": ("t", "s"), "b": ("t", "never")},
                                     name="quiet", time_unit="days")
    with pytest.raises(SystemExit, match=r"--data .*quiet: b observed in no training row"):
        real.main(["--out", str(out), "--data", str(folder), "--seeds", "1", "--max-epochs", "2"])
    assert not out.exists()


def test_a_row_that_diverges_is_recorded_and_the_others_run_on(tmp_path, monkeypatch):
    """A fit whose training loss becomes non-finite does not end the command: its seeds are listed,
    the row has no figure on that cohort, and every other row is scored."""
    monkeypatch.setitem(VARIANTS, "CET/lr-1e6", {"lr": 1e6})
    out = tmp_path / "bench"
    assert real.main(["--out", str(out), "--data", str(_own_table(tmp_path)), "--seeds", "1", "--models",
                      "CET/lr-1e6,ET", "--no-classical", "--max-epochs", "3"]) == 0
    record = json.loads((out / "mine" / "metrics.json").read_text())
    for protocol in ("a", "b"):
        assert record[protocol]["CET/lr-1e6"]["diverged"] == [0] and not record[protocol]["CET/lr-1e6"]["tasks"]
        assert math.isnan(real_tables.event_mean(record, protocol, "CET/lr-1e6", "auc" if protocol == "a" else "ibs"))
        assert not math.isnan(real_tables.event_mean(record, protocol, "ET", "auc" if protocol == "a" else "ibs"))
    assert ("Diverged (the training loss became non-finite; the row has no figure there): CET/lr-1e6 on mine "
            "(protocol a, seeds 0); CET/lr-1e6 on mine (protocol b, seeds 0).") in (out / "table.md").read_text()
    with pytest.raises(SystemExit, match="--against: unknown"):
        real.main(["--out", str(out), "--tables-only", "--against", "ET/typo"])


def test_variants_are_compared_with_the_row_of_their_own_preset():
    def entry(auc, secs):
        return {"tasks": {"e": {"auc": [auc], "ece": [0.1]}}, "seconds": [secs]}

    record = {"a": {"ET/no-validation": entry(0.70, 4.0), "ET/holdout-20": entry(0.72, 1.0),
                    "CET": entry(0.75, 2.0), "CET/lr-3e-3": entry(0.74, 1.0)}, "b": {}}
    text = real_tables.ablation_markdown([record], against=("ET/no-validation", "CET"))
    assert "| ET/holdout-20 | ET/no-validation | +0.020 (1/1) |" in text and "0.25x" in text
    assert "| CET/lr-3e-3 | CET | -0.010 (0/1) |" in text and "0.50x" in text
    assert "| CET/lr-3e-3 | ET/no-validation |" not in text and "| ET/holdout-20 | CET |" not in text
    assert real_tables.ablation_markdown([record], against=("BC",)) == ""
    # protocol a's goals, counted for the variant and its reference once ET and BC ran on the cohort
    assert text.count("x | — |") == 2  # no ET and BC rows: no goal to count
    record["a"] |= {"ET": entry(0.70, 1.0), "BC": entry(0.745, 1.0)}
    record["a"]["BC"]["tasks"]["e"]["ece"] = [0.3]
    text = real_tables.ablation_markdown([record], against=("CET",))
    assert "| CET/lr-3e-3 | CET | -0.010 (0/1) |" in text and text.rstrip().endswith("| 0.50x | 0, 1 (1, 1) of 1 |")
    record["a"]["CET/gone"] = entry(0.76, 4.0)  # a variant whose code is gone: its records still compare
    assert "| CET/gone | CET | +0.010 (1/1) |" in real_tables.ablation_markdown([record], against=("CET",))


def test_a_users_folder_named_like_a_cohort_is_not_labelled_with_its_source(tmp_path):
    import shutil

    folder = shutil.copytree(_own_table(tmp_path), tmp_path / "aids")  # the name of a bundled cohort
    out = tmp_path / "bench"
    assert real.main(["--out", str(out), "--data", str(folder), "--seeds", "1", "--models", "ET",
                      "--protocols", "a", "--max-epochs", "2"]) == 0
    record = json.loads((out / "aids" / "metrics.json").read_text())
    assert "source" not in record and "note" not in record


def test_a_variant_may_change_the_networks_width_and_dropout(tmp_path):
    """A variant's ``hidden_sizes`` replaces the harness's width (it does not collide with it)."""
    ds = load_dataset(_own_table(tmp_path))
    wide = real.fit_row("CET", ds.train, ds.val, seed=0, max_epochs=1)
    narrow = real.fit_row("CET/hidden-32", ds.train, ds.val, seed=0, max_epochs=1)
    light = real.fit_row("CET/dropout-0.25", ds.train, ds.val, seed=0, max_epochs=1)
    assert (wide.hidden_sizes, narrow.hidden_sizes, light.hidden_sizes) == ((100,), (32,), (100,))
    assert (wide.dropout, light.dropout) == (0.5, 0.25)
    assert narrow.net_.encoder.net[0].out_features == 32


@pytest.mark.slow  # spawns two processes that import torch (about 8 s)
def test_cohorts_run_side_by_side_in_processes_give_the_same_records(tmp_path, capsys):
    """``--jobs 2``: two cohorts in two spawned processes, the largest first; every figure as one
    process gives it (seeded fits on one thread each), and only the command's process writes."""
    first = _own_table(tmp_path)
    rng = np.random.default_rng(1)
    n = 120
    age = rng.normal(60, 10, n)
    t = np.exp(rng.normal(2, 0.5, n))
    follow = rng.uniform(2, 20, n)
    small = write_follow_up_dataset(tmp_path / "small", pl.DataFrame(
        {"age": age, "t_a": np.minimum(t, follow), "s_a": (t < follow).astype(int)}), ["age"], {"a": ("t_a", "s_a")},
        name="small", time_unit="days", split_method="stratified")
    args = ["--data", str(small), "--data", str(first), "--seeds", "1", "--models", "CET,ET", "--no-classical",
            "--max-epochs", "2"]
    assert real.main(["--out", str(tmp_path / "one"), *args, "--jobs", "1"]) == 0
    capsys.readouterr()
    assert real.main(["--out", str(tmp_path / "two"), *args, "--jobs", "2"]) == 0
    said = capsys.readouterr().out
    assert "2 cohorts in 2 processes of 1 thread(s) each, the largest first" in said
    for name in ("mine", "small"):
        one, two = (json.loads((tmp_path / run / name / "metrics.json").read_text()) for run in ("one", "two"))
        for protocol in ("a", "b"):
            for row in one[protocol]:
                assert one[protocol][row]["tasks"] == two[protocol][row]["tasks"], (name, protocol, row)
    for name in ("mine", "small"):  # claimed by the command's process
        assert json.loads((tmp_path / "two" / name / ".cet-output.json").read_text())["entries"] == ["metrics.json"]
