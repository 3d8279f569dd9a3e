"""Events that compete (one status column codes them: the first ends the follow-up of all) through
``flows.table`` and ``flows.train evaluate``: the report adds the Aalen-Johansen share beside
Kaplan-Meier's net risk and says why they differ; the model card names the risks as net ones.
Real data: lifelines' rossi, its arrests split into two kinds by a status column."""

import json
import re

import numpy as np
import polars as pl
import pytest

from cet_model.dataset import load_dataset
from cet_model.metrics import net_benefit
from cet_model.models import load_model
from cet_model.nonparametric import aalen_johansen_risk, kaplan_meier_risk
from flows import predict as predict_flow
from flows import table as table_flow
from flows import train as train_flow
from flows.lib.modeling.cohort_table import event_rows
from flows.lib.modeling.dataset_report import incidence_horizons
from flows.lib.modeling.decision_curves import THRESHOLDS, useful_thresholds
from flows.lib.modeling.version_facts import version_horizons


@pytest.fixture
def status_csv(tmp_path, monkeypatch):
    from lifelines.datasets import load_rossi

    monkeypatch.delenv("PREFECT_API_URL", raising=False)  # no server: each command runs in its own process
    for name, value in {"DATA_DIR": tmp_path / "data", "MODELS_DIR": tmp_path / "models",
                        "REPORTS_DIR": tmp_path / "reports", "MAX_EPOCHS": 3, "PATIENCE": 3, "HIDDEN": 8}.items():
        monkeypatch.setenv(f"CET_{name}", str(value))
    frame = pl.from_pandas(load_rossi()).with_row_index("i")
    status = pl.when(pl.col("arrest") == 0).then(0).when(pl.col("i") % 3 == 0).then(2).otherwise(1)
    frame.with_columns(status=status).drop("i", "arrest").write_csv(tmp_path / "s.csv")
    return tmp_path / "s.csv"


def test_competing_events_get_the_aalen_johansen_share_and_a_net_risk_limitation(status_csv, tmp_path, capsys):
    assert table_flow.main(["--table", str(status_csv), "--name", "s", "--event", "arrest=week,status:1",
                            "--event", "violation=week,status:2", "--time-unit", "weeks"]) == 0
    capsys.readouterr()
    assert train_flow.main(["evaluate", "--dataset", "s", "--models", "CET"]) == 0
    assert "  arrest and violation compete (one follow-up, never two seen on a row): P(ever) and the risks above " \
           "are net ones" in capsys.readouterr().out
    version = tmp_path / "models" / "s" / "v0001"
    assert json.loads((version / "data.json").read_text())["competing"] == [["arrest", "violation"]]
    report = (tmp_path / "reports" / "s" / "report.md").read_text()
    assert "arrest and violation compete: one follow-up time, never two seen on a row" in report
    assert "| event | horizon | Kaplan-Meier | CET | Aalen-Johansen | CET crude |" in report
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", report)
    assert linked == ["survival.png", "cumulative-incidence.png", "calibration-horizon.png", "decision-curve.png",
                      "p-ever.png"], linked
    for png in linked:
        assert (tmp_path / "reports" / "s" / png).read_bytes()[:4] == b"\x89PNG"
    ds = load_dataset(tmp_path / "data" / "s")
    te, kind = ds.test, (ds.test.S[:, 0] > 0.5) * 1 + (ds.test.S[:, 1] > 0.5) * 2
    cet = load_model(version / "CET")
    for j, event in enumerate(ds.event_names):
        horizons = incidence_horizons(ds.train.T[:, j])
        cet_crude = cet.predict_cumulative_incidence(te.X, horizons, j, competing=[1 - j]).mean(0)
        cet_net = 1.0 - cet.predict_survival(te.X, horizons, event=j).mean(0)
        for k, h in enumerate(horizons):
            row = re.search(rf"^\| {event} \| {h:g} \| (\S+) \| (\S+) \| (\S+) \| (\S+) \|$", report, flags=re.M)
            assert row, (event, h, report)
            km, net, crude, model_crude = (float(row[i]) for i in (1, 2, 3, 4))
            assert km == pytest.approx(kaplan_meier_risk(te.T[:, j], te.S[:, j], h), abs=6e-4)
            assert crude == pytest.approx(aalen_johansen_risk(te.T[:, j], kind, j + 1, h), abs=6e-4)
            assert net == pytest.approx(cet_net[k], abs=6e-4) and model_crude == pytest.approx(cet_crude[k], abs=6e-4)
            assert crude <= km and model_crude <= net + 1e-3
        assert np.any([aalen_johansen_risk(te.T[:, j], kind, j + 1, h) < kaplan_meier_risk(te.T[:, j], te.S[:, j], h)
                       for h in horizons])  # the other kind does come first on these rows
    # the cohort first: each event by split (violation's small counts withheld) and the features
    cohort = report[report.index("## The cohort"):report.index("## Test metrics")]
    for row in event_rows(ds, "weeks")[1:]:
        assert "| " + " | ".join(row) + " |" in cohort
    assert "| violation | 21 (8.1 %) | < 10 | < 10 | 52 | 52 |" in cohort and "| prio | " in cohort
    # decision curves: the outcome is the event being first (Aalen-Johansen), CET's line its crude risk
    assert "| event | by | observed by then | CET crude: worth using at |" in report
    for j, (event, h) in enumerate(version_horizons(version, ds.train, ds.event_names).items()):
        crude = cet.predict_cumulative_incidence(te.X, [h], j, competing=[1 - j])[:, 0]
        worth = useful_thresholds(THRESHOLDS, net_benefit(te.T[:, j], kind, crude, h, THRESHOLDS, of=j + 1),
                                  net_benefit(te.T[:, j], kind, np.ones(len(te)), h, THRESHOLDS, of=j + 1))
        first = aalen_johansen_risk(te.T[:, j], kind, j + 1, h)
        assert f"| {event} | {h:.3g} | {first:.3f} (first) | {worth} |" in report, (event, h, worth)
    card = (version / "model_card.md").read_text()
    assert "after checking the report's calibration against Kaplan-Meier and its decision curves" in card
    assert "- arrest and violation compete (one follow-up, never two seen on a row): P(ever) and every risk by a " \
           "horizon are net" in card
    # scoring new rows by horizons: the crude risk of each competing event beside its net one
    new = pl.read_csv(status_csv).with_row_index("id").head(6).drop("week", "status")
    new.write_csv(tmp_path / "new.csv")
    assert predict_flow.main(["--dataset", "s", "--features", str(tmp_path / "new.csv"), "--horizons", "26,52",
                              "--out", str(tmp_path / "scores.csv")]) == 0
    scores = pl.read_csv(tmp_path / "scores.csv")
    x = new.drop("id").to_numpy().astype(float)
    for j, event in enumerate(ds.event_names):
        crude = cet.predict_cumulative_incidence(x, [26.0, 52.0], j, competing=[1 - j])
        np.testing.assert_allclose(scores.select(f"crude_26_{event}", f"crude_52_{event}").to_numpy(), crude,
                                   atol=1e-6)
        assert (scores[f"crude_52_{event}"] <= scores[f"risk_52_{event}"] + 1e-4).all()


def test_events_with_their_own_follow_up_get_no_aalen_johansen_column(status_csv, tmp_path, capsys):
    frame = pl.read_csv(status_csv)
    frame.with_columns(later=pl.col("week") + 10, seen=(pl.col("status") > 0).cast(pl.Int8)).write_csv(
        tmp_path / "own.csv")
    assert table_flow.main(["--table", str(tmp_path / "own.csv"), "--name", "own", "--event", "arrest=week,status:1",
                            "--event", "any=later,seen", "--time-unit", "weeks"]) == 0
    capsys.readouterr()
    assert train_flow.main(["evaluate", "--dataset", "own", "--models", "CET"]) == 0
    assert "compete" not in capsys.readouterr().out
    assert json.loads((tmp_path / "models" / "own" / "v0001" / "data.json").read_text())["competing"] == []
    report = (tmp_path / "reports" / "own" / "report.md").read_text()
    assert "| event | horizon | Kaplan-Meier | CET |\n" in report and "Aalen-Johansen" not in report
    assert "cumulative-incidence.png" not in report
    ds, cet = load_dataset(tmp_path / "data" / "own"), load_model(tmp_path / "models" / "own" / "v0001" / "CET")
    te = ds.test
    for j, (event, h) in enumerate(version_horizons(tmp_path / "models" / "own" / "v0001", ds.train,
                                                    ds.event_names).items()):
        risk = 1.0 - cet.predict_survival(te.X, [h], event=j)[:, 0]
        worth = useful_thresholds(THRESHOLDS, net_benefit(te.T[:, j], te.S[:, j], risk, h, THRESHOLDS),
                                  net_benefit(te.T[:, j], te.S[:, j], np.ones(len(te)), h, THRESHOLDS))
        observed = kaplan_meier_risk(te.T[:, j], te.S[:, j], h)
        assert f"| {event} | {h:.3g} | {observed:.3f} | {worth} |" in report, (event, h, worth)
    assert not (tmp_path / "reports" / "own" / "cumulative-incidence.png").exists()
    assert "compete" not in (tmp_path / "models" / "own" / "v0001" / "model_card.md").read_text()
    frame.with_row_index("id").head(4).drop("week", "status").write_csv(tmp_path / "new.csv")
    assert predict_flow.main(["--dataset", "own", "--features", str(tmp_path / "new.csv"), "--horizons", "26",
                              "--out", str(tmp_path / "scores.csv")]) == 0
    assert not [c for c in pl.read_csv(tmp_path / "scores.csv").columns if c.startswith("crude_")]
