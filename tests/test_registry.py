import json
import os
import subprocess
import sys

import pytest

from flows.lib.infra import registry


def _version(root, dataset, auc, mrae=0.1):
    tmp = registry.staging_dir(root, dataset)
    (tmp / "metrics.json").write_text(json.dumps({"summary": {"CET": {"val_auc": auc, "val_mrae": mrae}}}))
    return registry.commit(root, dataset, tmp)


def test_versions_are_numbered_and_the_first_is_promoted(tmp_path):
    v1 = _version(tmp_path, "mimic", 0.70)
    v2 = _version(tmp_path, "mimic", 0.71)
    assert (v1.name, v2.name) == ("v0001", "v0002")
    assert registry.versions(tmp_path, "mimic") == ["v0001", "v0002"]
    d = registry.decide(tmp_path, "mimic", v1, registry.Rule())
    assert d["promoted"] and d["reason"] == "the first version: nothing was promoted before"
    assert registry.promoted(tmp_path, "mimic") == v1
    assert not list((tmp_path / "mimic").glob(".incoming-*"))


def test_rule_promotes_a_better_or_equal_version_and_keeps_a_worse_one(tmp_path):
    rule = registry.Rule("val_auc", 0.0)
    v1 = _version(tmp_path, "d", 0.80)
    registry.decide(tmp_path, "d", v1, rule)
    worse = _version(tmp_path, "d", 0.79)
    d = registry.decide(tmp_path, "d", worse, rule)
    assert not d["promoted"] and "worse, kept v0001" in d["reason"]
    assert registry.promoted(tmp_path, "d") == v1
    assert json.loads((worse / "decision.json").read_text())["promoted"] is False
    equal = _version(tmp_path, "d", 0.80)
    assert registry.decide(tmp_path, "d", equal, rule)["promoted"]
    assert registry.promoted(tmp_path, "d") == equal
    history = [json.loads(line) for line in (tmp_path / "d" / "history.jsonl").read_text().splitlines()]
    assert [h["promoted"] for h in history] == [True, False, True]
    assert history[1]["candidate_value"] == 0.79 and history[1]["previous_value"] == 0.80


def test_tolerance_and_lower_is_better_metrics(tmp_path):
    v1 = _version(tmp_path, "d", 0.80, mrae=0.10)
    registry.decide(tmp_path, "d", v1, registry.Rule())
    slightly_worse = _version(tmp_path, "d", 0.795, mrae=0.12)
    assert registry.decide(tmp_path, "d", slightly_worse, registry.Rule("val_auc", 0.01))["promoted"]
    lower_mrae = _version(tmp_path, "d", 0.5, mrae=0.11)
    d = registry.decide(tmp_path, "d", lower_mrae, registry.Rule("val_mrae"))
    assert d["promoted"] and "lower is better" in d["reason"]
    higher_mrae = _version(tmp_path, "d", 0.9, mrae=0.2)
    assert not registry.decide(tmp_path, "d", higher_mrae, registry.Rule("val_mrae"))["promoted"]
    assert registry.decide(tmp_path, "d", higher_mrae, registry.Rule("always"))["promoted"]


def test_undefined_metrics_never_win(tmp_path):
    v1 = _version(tmp_path, "d", None)
    registry.decide(tmp_path, "d", v1, registry.Rule())
    v2 = _version(tmp_path, "d", 0.6)
    d = registry.decide(tmp_path, "d", v2, registry.Rule())
    assert d["promoted"] and d["reason"].endswith(": undefined for v0001, promoted")  # incumbent undefined
    v3 = _version(tmp_path, "d", None)
    d = registry.decide(tmp_path, "d", v3, registry.Rule())
    assert not d["promoted"] and "worse" not in d["reason"]  # undefined is not worse: it cannot be judged
    assert d["reason"].endswith(": undefined for the candidate (no value), so the rule cannot judge it: kept v0002 "
                                "(promote by hand if it should replace it)")


@pytest.mark.bad_input
def test_bad_rules_are_refused():
    with pytest.raises(ValueError, match="promotion metric 'auc'"):
        registry.Rule("auc")
    with pytest.raises(ValueError, match="tolerance"):
        registry.Rule("val_auc", -1)


def test_a_rescored_value_replaces_the_recorded_one(tmp_path):
    """When the promoted version was trained on other data, the rule compares the candidate with
    the promoted model rescored on the candidate's validation rows, and keeps both values."""
    v1 = _version(tmp_path, "d", 0.90)
    registry.decide(tmp_path, "d", v1, registry.Rule())
    v2 = _version(tmp_path, "d", 0.80)
    rescored = {"value": 0.55, "candidate_value": 0.78, "rows": 70, "of": 100, "version": "v0001", "recorded": 0.90,
                "note": "v0001 was trained on other data"}
    d = registry.decide(tmp_path, "d", v2, registry.Rule(), rescored=rescored)
    assert d["promoted"] and (d["candidate_value"], d["previous_value"]) == (0.78, 0.55)
    assert (d["candidate_recorded_value"], d["previous_recorded_value"]) == (0.80, 0.90)
    assert "0.7800 vs 0.5500 for v0001 on 70 of v0002's 100 validation rows" in d["reason"]
    assert d["comparison"] == rescored["note"]
    v3 = _version(tmp_path, "d", 0.50)  # cannot be rescored (other features): the recorded values decide
    d = registry.decide(tmp_path, "d", v3, registry.Rule(), rescored={"value": None, "note": "other features"})
    assert not d["promoted"] and d["previous_value"] == 0.80 and "previous_recorded_value" not in d
    assert d["comparison"] == "other features" and "validation rows" not in d["reason"]


def test_evidence_rules_decide_by_the_interval_of_the_difference(tmp_path):
    """``not-worse`` promotes unless the paired interval of candidate minus promoted lies below
    -tolerance; ``better`` only when it lies above tolerance; ``point`` compares the values. Without
    an interval (MRAE, or no rescoring) the point values decide, and the reason says so."""
    v1 = _version(tmp_path, "d", 0.80)
    registry.decide(tmp_path, "d", v1, registry.Rule())
    unsure = {"value": None, "note": "the same data", "difference": {"estimate": -0.02, "low": -0.06, "high": 0.02}}
    v2 = _version(tmp_path, "d", 0.78)  # 0.02 lower, within noise
    assert not registry.decide(tmp_path, "d", v2, registry.Rule(), rescored=unsure)["promoted"]  # point: worse
    assert not registry.decide(tmp_path, "d", v2, registry.Rule(evidence="better"), rescored=unsure)["promoted"]
    d = registry.decide(tmp_path, "d", v2, registry.Rule(evidence="not-worse"), rescored=unsure)
    assert d["promoted"] and d["evidence"] == "not-worse"
    assert d["reason"] == ("val_auc 0.7800 vs 0.8000 for v0001 (higher is better, tolerance 0.0, evidence not-worse): "
                           "not shown worse (candidate minus v0001 -0.020 [-0.060, +0.020]), promoted")
    clearly = {"value": None, "note": "", "difference": {"estimate": -0.08, "low": -0.12, "high": -0.04}}
    v3 = _version(tmp_path, "d", 0.70)
    d = registry.decide(tmp_path, "d", v3, registry.Rule(evidence="not-worse"), rescored=clearly)
    assert not d["promoted"] and d["reason"].endswith("shown worse (candidate minus v0002 -0.080 [-0.120, -0.040]), "
                                                      "kept v0002")
    assert registry.decide(tmp_path, "d", v3, registry.Rule(tolerance=0.05, evidence="not-worse"),
                           rescored=clearly)["promoted"]  # within the tolerance of the interval's top
    gain = {"value": None, "note": "", "difference": {"estimate": 0.03, "low": 0.01, "high": 0.05}}
    v4 = _version(tmp_path, "d", 0.73)
    assert not registry.decide(tmp_path, "d", v4, registry.Rule(tolerance=0.02, evidence="better"),
                               rescored=gain)["promoted"]  # shown better, but not by more than 0.02
    d = registry.decide(tmp_path, "d", v4, registry.Rule(evidence="better"), rescored=gain)
    assert d["promoted"] and "shown better (candidate minus v0003 +0.030 [+0.010, +0.050]), promoted" in d["reason"]
    v5 = _version(tmp_path, "d", 0.74, mrae=0.3)  # no interval for MRAE: the point values decide
    d = registry.decide(tmp_path, "d", v5, registry.Rule("val_mrae", evidence="not-worse"))
    assert not d["promoted"] and "evidence not-worse: no interval of the difference, so the point values decide" \
        in d["reason"]
    with pytest.raises(ValueError, match=r"promotion evidence 'interval' is not one of \['point', 'not-worse', "
                                         r"'better'\]"):
        registry.Rule(evidence="interval")


def _with_cet(version):
    (version / "CET").mkdir()
    (version / "CET" / "config.json").write_text("{}")
    return version


def test_a_version_promoted_by_hand_is_recorded_and_the_rule_then_compares_with_it(tmp_path):
    """A rollback: the rule promoted v0002; a person promotes v0001 again with a reason. The
    history keeps both, the listing says by hand, and the next candidate is judged against v0001."""
    rule = registry.Rule("val_auc", 0.0)
    v1, v2 = _with_cet(_version(tmp_path, "d", 0.80)), _with_cet(_version(tmp_path, "d", 0.85))
    registry.decide(tmp_path, "d", v1, rule)
    registry.decide(tmp_path, "d", v2, rule)
    record = registry.promote_by_hand(tmp_path, "d", "v0001", " v0002 drifted in use ")
    assert registry.promoted(tmp_path, "d") == v1
    assert record["previous"] == "v0002" and record["reason"] == "promoted by hand: v0002 drifted in use"
    history = [json.loads(line) for line in (tmp_path / "d" / "history.jsonl").read_text().splitlines()]
    assert history[-1] == record and len(history) == 3
    assert json.loads((v2 / "decision.json").read_text())["promoted"] is True  # what the rule decided, kept
    rows = registry.version_rows(tmp_path, "d")
    assert [(r["version"], r["promoted"], r["by_hand"], r["val_auc"]) for r in rows] == [
        ("v0001", True, True, 0.8), ("v0002", False, False, 0.85)]
    v3 = _with_cet(_version(tmp_path, "d", 0.82))
    assert "0.8200 vs 0.8000 for v0001" in registry.decide(tmp_path, "d", v3, rule)["reason"]
    assert not registry.version_rows(tmp_path, "d")[2]["by_hand"]  # promoted by the rule again
    # already promoted: nothing written; refused: unknown version, no CET model, no reason
    assert "already the promoted version" in registry.promote_by_hand(tmp_path, "d", "v0003", "again")["reason"]
    assert len((tmp_path / "d" / "history.jsonl").read_text().splitlines()) == 4
    with pytest.raises(ValueError, match=r"no version 'v0009' of d \(versions: v0001, v0002, v0003\)"):
        registry.promote_by_hand(tmp_path, "d", "v0009", "x")
    _version(tmp_path, "d", 0.9)
    with pytest.raises(ValueError, match="v0004: no CET model"):
        registry.promote_by_hand(tmp_path, "d", "v0004", "x")
    with pytest.raises(ValueError, match="a reason is required"):
        registry.promote_by_hand(tmp_path, "d", "v0001", "  ")
    assert registry.promoted(tmp_path, "d") == v3


def test_versions_and_promote_commands(tmp_path, monkeypatch, capsys):
    """The CLI: the listing marks the promoted version; promote prints what it replaced; an
    unknown version is a usage error (exit 2) that changes nothing."""
    from flows import train as train_flow

    monkeypatch.setenv("CET_MODELS_DIR", str(tmp_path))
    rule = registry.Rule("val_auc", 0.0)
    for auc in (0.80, 0.85):
        registry.decide(tmp_path, "d", _with_cet(_version(tmp_path, "d", auc)), rule)
    assert train_flow.main(["promote", "--dataset", "d", "--model-version", "v0001", "--reason", "rollback"]) == 0
    assert capsys.readouterr().out.strip().endswith("v0001: promoted by hand: rollback (was v0002)")
    assert train_flow.main(["versions", "--dataset", "d"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{tmp_path / 'd'}: 2 versions (")
    assert lines[1].split()[:2] == ["version", "promoted"]
    assert lines[2].split()[:4] == ["v0001", "*", "by", "hand"] and "0.8000" in lines[2]
    assert lines[3].split()[0] == "v0002" and "0.8500" in lines[3] and "*" not in lines[3]
    with pytest.raises(SystemExit) as exit_:
        train_flow.main(["promote", "--dataset", "d", "--model-version", "v0007", "--reason", "x"])
    assert exit_.value.code == 2 and "no version 'v0007'" in capsys.readouterr().err
    assert registry.promoted(tmp_path, "d").name == "v0001"
    with pytest.raises(SystemExit):
        train_flow.main(["versions", "--dataset", "other"])
    assert "no model versions of other" in capsys.readouterr().err
    (tmp_path / "d" / "v0002" / "metrics.json").write_text("{not json")
    with pytest.raises(SystemExit):
        train_flow.main(["versions", "--dataset", "d"])
    assert "v0002/metrics.json: not JSON" in capsys.readouterr().err


@pytest.mark.slow  # spawns a process per command
def test_the_listing_and_promotion_commands_answer_before_prefect_and_torch_load(tmp_path):
    """``python -m flows.train versions``, ``show`` and ``promote`` read and change a models folder
    directly: they run before the flow module's imports and load no heavy library (Prefect's import
    alone takes about a second; ``show`` reads records, ``flows.lib.modeling.version_text``)."""
    heavy = {"prefect", "torch", "polars", "sklearn", "duckdb", "pandas", "scipy"}
    rule = registry.Rule("val_auc", 0.0)
    for auc in (0.80, 0.85):
        registry.decide(tmp_path, "d", _with_cet(_version(tmp_path, "d", auc)), rule)
    env = {**os.environ, "CET_MODELS_DIR": str(tmp_path), "CET_DATA_DIR": str(tmp_path / "data")}
    for argv in (["versions", "--dataset", "d"], ["show", "--dataset", "d"],
                 ["promote", "--dataset", "d", "--model-version", "v0001", "--reason", "rollback"]):
        out = subprocess.run([sys.executable, "-X", "importtime", "-m", "flows.train", *argv], capture_output=True,
                             text=True, cwd=tmp_path, env=env, timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        loaded = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
        assert not loaded & heavy, (argv[0], sorted(loaded & heavy))
        if argv[0] == "show":
            assert out.stdout.startswith(f"{tmp_path / 'd' / 'v0002'}: "), out.stdout
    assert out.stdout.strip().endswith("v0001: promoted by hand: rollback (was v0002)")
    assert registry.promoted(tmp_path, "d").name == "v0001"
