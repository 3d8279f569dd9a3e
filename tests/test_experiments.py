import json
import re

import numpy as np
import pytest

from cet_model import experiments, synthetic
from cet_model.dataset import load_dataset


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "syn"
    return load_dataset(synthetic.write(path, "independent", n=600, split_sizes=(360, 120, 120)))


def test_report_writes_table_and_metrics_that_agree(tmp_path, tiny_dataset):
    result = experiments.run(tiny_dataset, runs=2, hidden_sizes=(8,), max_epochs=2, patience=2, progress=False)
    experiments.write_report(result, tmp_path, "tiny")
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    table = (tmp_path / "table.md").read_text()
    assert set(metrics["models"]) == {"CET", "ET", "BC", "CET-marginal"}
    assert set(metrics["models"]["BC"]["tasks"]["T1"]) == {"auc", "ece"}
    for name, entry in metrics["models"].items():
        for task, vals in entry["tasks"].items():
            assert len(vals["auc"]) == 2
            row = next(line for line in table.splitlines() if line.startswith(f"| {name} | {task} |"))
            auc_cell = row.split("|")[3].strip()
            mean, std = (float(v) for v in re.findall(r"-?\d+\.\d+", auc_cell))
            assert mean == pytest.approx(np.mean(vals["auc"]), abs=0.005)
            assert std == pytest.approx(np.std(vals["auc"]), abs=0.005)
        avg = next(line for line in table.splitlines() if line.startswith(f"| {name} | Avg |"))
        want = np.mean([np.mean(v["auc"]) for v in entry["tasks"].values()])
        assert float(re.findall(r"\d+\.\d+", avg.split("|")[3])[0]) == pytest.approx(want, abs=0.005)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporaries left


def test_fixed_seed_reproduces_the_table(tiny_dataset):
    kw = dict(runs=1, models=("CET", "ET"), hidden_sizes=(8,), max_epochs=2, patience=2, progress=False)
    a = experiments.run(tiny_dataset, **kw)
    b = experiments.run(tiny_dataset, **kw)
    assert experiments.table_markdown(a, "t") == experiments.table_markdown(b, "t")


def test_cli_on_an_existing_dataset(tmp_path, tiny_dataset, capsys):
    rc = experiments.main(["dataset", "--data", str(tiny_dataset.path), "--runs", "1", "--models", "ET,BC",
                           "--hidden", "4", "--max-epochs", "1", "--out", str(tmp_path / "r")])
    assert rc == 0
    assert (tmp_path / "r" / "table.md").is_file() and "| ET | Avg |" in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown models"):
        experiments.run(tiny_dataset, runs=1, models=("XGB",))
