import json

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
    assert registry.decide(tmp_path, "d", v2, registry.Rule())["promoted"]  # incumbent undefined
    v3 = _version(tmp_path, "d", None)
    assert not registry.decide(tmp_path, "d", v3, registry.Rule())["promoted"]


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
