import json
import re
from pathlib import Path

import numpy as np
import pytest

from cet_experiments import experiments, summary
from cet_model.atomic import MARKER
from cet_model.dataset import load_dataset
from cet_model.evaluation import cpu_model, evaluate, machine
from cet_model.presets import PRESET_OF_ESTIMATOR, fit_preset
from cet_model.reference import REFERENCE, cox_reference
from flows.lib.experiment.search import PAPER_POINT
from flows.lib.experiment.tables import average_table
from flows.lib.standin import synthetic


@pytest.fixture(scope="module")
def tiny_dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "syn"
    return load_dataset(synthetic.write(path, "independent", n=600, split_sizes=(360, 120, 120)))


@pytest.mark.slow
def test_report_writes_table_and_metrics_that_agree(tmp_path, tiny_dataset):
    result = experiments.run(tiny_dataset, runs=2, hidden_sizes=(8,), max_epochs=2, patience=2, progress=False)
    experiments.write_report(result, tmp_path, "tiny")
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    table = (tmp_path / "table.md").read_text()
    assert set(metrics["models"]) == {"CET", "CET-paper", "ET", "BC", "Oracle"}
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
    # no temporaries left; the marker lists what the report wrote
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [MARKER]
    assert set(json.loads((tmp_path / MARKER).read_text())["entries"]) == {
        p.name for p in tmp_path.iterdir() if p.name != MARKER}


def test_fixed_seed_reproduces_the_table(tiny_dataset):
    kw = dict(runs=1, models=("CET", "ET"), hidden_sizes=(8,), max_epochs=2, patience=2, progress=False)
    a = experiments.run(tiny_dataset, **kw)
    b = experiments.run(tiny_dataset, **kw)
    assert experiments.table_markdown(a, "t") == experiments.table_markdown(b, "t")


def test_data_without_the_truth_get_c_rmst_in_the_table_and_one_warning(tmp_path, caplog):
    """A user's table (lifelines' rossi, censored by follow-up alone): AUC and ECE are empty, so the
    tables show C (RMST), the survival ranking the product compares such data by, and the missing
    truth is said once, not per model and run."""
    import logging

    from lifelines.datasets import load_rossi

    from flows.lib.ingest import write_follow_up_dataset

    ds = load_dataset(write_follow_up_dataset(tmp_path / "rossi", load_rossi(), ["fin", "age", "prio"],
                                              {"arrest": ("week", "arrest")}, name="rossi", time_unit="weeks"))
    with caplog.at_level(logging.INFO):
        result = experiments.run(ds, runs=2, models=("CET", "ET", "BC"), hidden_sizes=(4,), max_epochs=2,
                                 patience=2, progress=False)
    assert "the true occurrence is known for no test row" in caplog.text
    assert "the true occurrence is not known for arrest" not in caplog.text  # evaluate's per-run warning
    table = experiments.table_markdown(result, "rossi").splitlines()
    head = next(line for line in table if line.startswith("| Model |"))
    assert head.split("|")[-2].strip() == "C (RMST)"
    values = result["models"]["CET"]["tasks"]["arrest"]["ci_rmst"]
    row = next(line for line in table if line.startswith("| CET | Avg |"))
    assert row.split("|")[-2].strip() == f"{np.mean(values):.2f} ± {np.std(values):.2f}"
    assert next(line for line in table if line.startswith("| BC | Avg |")).split("|")[-2].strip() == ""
    assert "C (RMST)" in average_table(result).splitlines()[0]
    # the classical yardstick, fitted once: the same figures as cox_reference on the same split
    cox = result["models"][REFERENCE]
    want = cox_reference(ds.train, {"test": ds.test}, ds.event_names)[0]["test"]["arrest"]
    assert {k: v for k, v in cox["tasks"]["arrest"].items()} == {k: [pytest.approx(v)] for k, v in want.items()}
    assert result["config"]["model_runs"][REFERENCE] == 1 and "Fewer runs" not in "\n".join(table)
    row = next(line for line in table if line.startswith(f"| {REFERENCE} | Avg |"))
    assert row.split("|")[-2].strip() == f"{want['ci_rmst']:.2f} ± 0.00"
    # parts with it merge (one fit per part); none leaves it out
    from cet_experiments.merge import merge_results

    later = experiments.run(ds, runs=1, first_seed=2, models=("CET",), hidden_sizes=(4,), max_epochs=2, patience=2,
                            progress=False)
    assert merge_results([result, later])["config"]["seeds"][REFERENCE] == [0, 2]
    none = experiments.run(ds, runs=1, models=("CET",), hidden_sizes=(4,), max_epochs=2, patience=2, progress=False,
                           reference="none")
    assert REFERENCE not in none["models"]


def test_cli_on_an_existing_dataset(tmp_path, tiny_dataset, capsys):
    rc = experiments.main(["dataset", "--data", str(tiny_dataset.path), "--runs", "1", "--models", "ET,BC",
                           "--hidden", "4", "--max-epochs", "1", "--out", str(tmp_path / "r")])
    assert rc == 0
    assert (tmp_path / "r" / "table.md").is_file() and "| ET | Avg |" in capsys.readouterr().out
    with pytest.raises(ValueError, match="unknown models"):
        experiments.run(tiny_dataset, runs=1, models=("XGB",))
    (tmp_path / "empty").mkdir()  # not a dataset: an error naming it, no traceback, no report folder
    with pytest.raises(SystemExit, match=r"--data .*empty: .*manifest\.json: missing; not a dataset folder"):
        experiments.main(["dataset", "--data", str(tmp_path / "empty"), "--out", str(tmp_path / "r2")])
    assert not (tmp_path / "r2").exists()


@pytest.mark.slow
def test_report_command_writes_every_table_and_figure(tmp_path, tiny_dataset, capsys):
    out = tmp_path / "rep"
    rc = experiments.main(["dataset", "--data", str(tiny_dataset.path), "--runs", "2", "--hidden", "8",
                           "--models", "CET,CET-paper,ET,BC,Oracle,CET-exact,CET-ARM", "--max-epochs", "2",
                           "--search", "2", "--search-epochs", "1", "--out", str(out)])
    assert rc == 0
    for name in ("table.md", "metrics.json", "fig1_occurrence_maps.png", "fig2_auc_mrae.png", "fig3_calibration.png"):
        assert (out / name).stat().st_size > 0, name
    for png in out.glob("*.png"):
        assert png.read_bytes()[:4] == b"\x89PNG"
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["search"]["trials"]) == 2 and set(metrics["search"]["best"]) >= {"estimator", "hidden"}
    assert metrics["config"]["hidden_sizes"] == [metrics["search"]["best"]["hidden"]]
    # the paper's columns, then C (RMST), which this report records (older ones do not: tables.columns)
    assert set(metrics["models"]["CET"]["tasks"]["T1"]) == {"auc", "mrae", "ci", "ece", "uno_c", "ibs", "ci_rmst"}
    assert "| IBS | C (RMST) |" in (out / "table.md").read_text()
    assert set(metrics["models"]["Oracle"]["tasks"]["T1"]) == {"auc", "ece"}
    table = (out / "table.md").read_text()
    assert {k: metrics["search"]["trials"][0][k] for k in PAPER_POINT} == PAPER_POINT  # trial 0: the paper's
    chosen = PRESET_OF_ESTIMATOR[metrics["search"]["best"]["estimator"]]  # its fits are the CET-paper row
    for model in ("CET", "CET-paper", "ET", "BC", "Oracle", "CET-exact", "CET-ARM"):
        assert (f"| {model} | Avg |" in table) == (model != chosen), model
    # Uno's C and IBS cells equal metrics.json
    row = next(line for line in table.splitlines() if line.startswith("| ET | T1 |")).split("|")
    for col, metric in ((7, "uno_c"), (8, "ibs")):
        mean = float(re.findall(r"-?\d+\.\d+", row[col])[0])
        assert mean == pytest.approx(np.mean(metrics["models"]["ET"]["tasks"]["T1"][metric]), abs=0.005)
    assert "maps" not in metrics["figures"] and metrics["figures"]["calibration"]["T1"]["CET"]["pred"]


def test_oracle_learns_the_true_occurrence(tmp_path):
    ds = load_dataset(synthetic.write(tmp_path / "clean", "independent", n=1500, noise=0.2,
                                      split_sizes=(900, 300, 300)))
    tr, va, te = ds.train, ds.val, ds.test
    kw = dict(seed=0, hidden_sizes=(32,), max_epochs=150, patience=150, lr=1e-2, dropout=0.0)
    auc = {n: evaluate(n, fit_preset(n, tr, va, **kw), te, ds.event_names)["T1"]["auc"] for n in ("Oracle", "BC")}
    # trained on c rather than the censored s, the oracle ranks the true occurrence better
    assert auc["Oracle"] > 0.9 and auc["Oracle"] > auc["BC"], auc


def test_search_draws_stay_in_the_paper_ranges():
    from flows.lib.experiment.search import SPACE, draw

    rng = np.random.default_rng(0)
    points = [draw(rng) for _ in range(300)]
    assert {p["estimator"] for p in points} == set(SPACE["estimator"])
    assert all(30 <= p["n_samples"] <= 200 and 100 <= p["hidden"] <= 1000 for p in points)
    assert all(-4 <= p["log_epsilon"] <= 0 and 0 < p["temperature"] <= 1 for p in points)
    with pytest.raises(ValueError, match="budget"):
        from flows.lib.experiment.search import random_search
        random_search(None, 0)


def test_uno_c_and_brier_match_scikit_survival_conventions():
    from cet_model.metrics import brier_times, integrated_brier_score, uno_c

    rng = np.random.default_rng(1)
    t = rng.exponential(1.0, 400)
    s = (rng.random(400) < 0.7).astype(int)
    assert uno_c(t, s, t, s, t) > 0.99  # predicting the times themselves: concordant
    assert uno_c(t, s, t, s, -t) < 0.01
    times = brier_times(t)
    perfect = (t[:, None] > times[None, :]).astype(float)
    flat = np.full_like(perfect, 0.5)
    assert integrated_brier_score(t, s, t, s, perfect, times) < integrated_brier_score(t, s, t, s, flat, times)


def test_model_runs_gives_costly_rows_fewer_runs(tmp_path, tiny_dataset, capsys):
    out = tmp_path / "few"
    experiments.main(["dataset", "--data", str(tiny_dataset.path), "--runs", "3", "--models", "ET,BC",
                      "--model-runs", "BC=1", "--hidden", "4", "--max-epochs", "1", "--out", str(out)])
    said = capsys.readouterr().out  # after each run, the time the rest will take
    assert re.search(r"^1 of 3 runs in \d+ s; about \d+ s left \(near \d\d:\d\d\)$", said, flags=re.M), said
    assert re.search(r"^2 of 3 runs in ", said, flags=re.M) and "3 of 3" not in said
    metrics = json.loads((out / "metrics.json").read_text())
    assert len(metrics["models"]["ET"]["tasks"]["T1"]["auc"]) == 3
    assert len(metrics["models"]["BC"]["tasks"]["T1"]["auc"]) == 1
    assert "Fewer runs for BC (1)" in (out / "table.md").read_text()
    for bad in ("BC", "XGB=2", "BC=two"):
        with pytest.raises(SystemExit, match="--model-runs"):
            experiments.parse_model_runs(bad, ("BC",))


def test_results_block_is_generated_from_metrics(tmp_path, tiny_dataset):
    results = tmp_path / "results"
    result = experiments.run(tiny_dataset, runs=2, models=("ET", "BC"), hidden_sizes=(4,), max_epochs=1,
                             patience=1, progress=False)
    experiments.write_report(result, results / "synthetic-reference", "t")
    readme = tmp_path / "results.md"
    readme.write_text(f"intro\n{summary.START}\nstale\n{summary.END}\noutro\n")
    assert experiments.main(["summary", "--results", str(results), "--doc", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "stale" not in text
    row = next(line for line in text.splitlines() if line.startswith("| ET | ") and "±" in line).split("|")
    want = np.mean([np.mean(v["auc"]) for v in result["models"]["ET"]["tasks"].values()])
    assert float(row[2].split("±")[0]) == pytest.approx(want, abs=0.005)
    assert "| ET | Avg |" in text  # the per-task table is folded in too
    assert not summary.update_results_block(readme, results)  # idempotent
    readme.write_text("no markers")
    with pytest.raises(ValueError, match="markers"):
        summary.update_results_block(readme, results)


def test_committed_results_page_shows_the_committed_results():
    """docs/results.md's tables are the committed docs/results/*/metrics.json, not hand-copied."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "results.md").read_text()
    assert summary.block(root / "docs" / "results") in text


def test_merge_of_disjoint_seeds_equals_one_run(tmp_path, tiny_dataset, capsys):
    common = ["dataset", "--data", str(tiny_dataset.path), "--models", "CET,BC", "--hidden", "4",
              "--max-epochs", "2", "--patience", "2", "--threads", "1"]
    assert experiments.main([*common, "--runs", "3", "--out", str(tmp_path / "whole")]) == 0
    assert experiments.main([*common, "--runs", "2", "--first-seed", "1", "--out", str(tmp_path / "b")]) == 0
    assert experiments.main([*common, "--runs", "1", "--out", str(tmp_path / "a")]) == 0
    # parts given out of seed order: runs are ordered by seed
    assert experiments.main(["merge", str(tmp_path / "b"), str(tmp_path / "a"), "--out", str(tmp_path / "m")]) == 0
    whole = json.loads((tmp_path / "whole" / "metrics.json").read_text())
    merged = json.loads((tmp_path / "m" / "metrics.json").read_text())
    for name in ("CET", "BC"):
        assert merged["models"][name]["tasks"] == whole["models"][name]["tasks"]
        assert merged["config"]["seeds"][name] == [0, 1, 2]
    assert merged["figures"]["calibration"] == whole["figures"]["calibration"]  # from seed 0, as in one run
    strip = [line for line in (tmp_path / "whole" / "table.md").read_text().splitlines() if line.startswith("|")]
    assert [line for line in (tmp_path / "m" / "table.md").read_text().splitlines() if line.startswith("|")] == strip
    assert "merged 2 reports (CET 3, BC 3 runs)" in capsys.readouterr().out
    # a seed twice is refused, naming both folders, and nothing is written
    with pytest.raises(SystemExit, match=r"CET seed 1 is in both .*whole.* and .*b"):
        experiments.main(["merge", str(tmp_path / "whole"), str(tmp_path / "b"), "--out", str(tmp_path / "bad")])
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow  # spawns two processes that import torch (about 12 s)
def test_runs_split_between_processes_give_the_figures_of_one(tmp_path, tiny_dataset, capsys):
    """``--jobs 2``: seeds 0-1 and 2 in two spawned processes, merged in seed order; every figure,
    table line and seed as one process gives them, a costly row's fewer runs and the seedless Cox
    reference (fitted once) included."""
    common = ["dataset", "--data", str(tiny_dataset.path), "--models", "CET,BC", "--hidden", "4", "--max-epochs", "2",
              "--patience", "2", "--threads", "1", "--runs", "3", "--model-runs", "BC=2", "--reference", "cox"]
    assert experiments.main([*common, "--out", str(tmp_path / "one")]) == 0
    capsys.readouterr()
    assert experiments.main([*common, "--jobs", "2", "--out", str(tmp_path / "two")]) == 0
    assert "3 runs in 2 processes of 1 thread(s) each: seeds 0-1, 2-2" in capsys.readouterr().out
    one, two = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in ("one", "two"))
    assert set(two["models"]) == set(one["models"]) == {"CET", "BC", REFERENCE}
    for name in one["models"]:
        assert two["models"][name]["tasks"] == one["models"][name]["tasks"], name
    assert two["config"]["seeds"] == {"CET": [0, 1, 2], "BC": [0, 1], REFERENCE: [0]}
    assert two["figures"] == one["figures"]
    lines = [[line for line in (tmp_path / d / "table.md").read_text().splitlines() if line.startswith("|")]
             for d in ("one", "two")]
    assert lines[0] == lines[1]


def test_merge_leaves_out_a_metric_that_a_part_did_not_record(tmp_path, tiny_dataset, caplog):
    """A part run before the harness scored C (RMST) and one run after: the merged report does not
    show a mean over the later runs alone as if it were over all of them."""
    from cet_experiments.merge import merge_results

    kw = dict(models=("CET",), hidden_sizes=(4,), max_epochs=2, patience=2, progress=False)
    old, new = experiments.run(tiny_dataset, runs=1, **kw), experiments.run(tiny_dataset, runs=1, first_seed=1, **kw)
    for task in old["models"]["CET"]["tasks"].values():
        del task["ci_rmst"]
    merged = merge_results([old, new])
    assert "merge: CET's ci_rmst left out: recorded in 1 of its 2 runs" in caplog.text
    assert all("ci_rmst" not in task and len(task["auc"]) == 2 for task in merged["models"]["CET"]["tasks"].values())
    assert "C (RMST)" not in experiments.table_markdown(merged, "t")
    both = merge_results([new, experiments.run(tiny_dataset, runs=1, **kw)])
    assert all(len(task["ci_rmst"]) == 2 for task in both["models"]["CET"]["tasks"].values())


def test_merge_refuses_rows_of_a_changed_default_and_drop_first_replaces_them(tmp_path, tiny_dataset, capsys):
    common = ["dataset", "--data", str(tiny_dataset.path), "--models", "CET,BC", "--hidden", "4",
              "--max-epochs", "2", "--patience", "2", "--threads", "1"]
    assert experiments.main([*common, "--runs", "1", "--out", str(tmp_path / "old")]) == 0
    assert experiments.main([*common, "--runs", "1", "--first-seed", "1", "--out", str(tmp_path / "new")]) == 0
    old = json.loads((tmp_path / "old" / "metrics.json").read_text())
    assert old["config"]["resolved"]["CET"]["occurrence_init"] == "observed"  # defaults are recorded
    assert "seed" not in old["config"]["resolved"]["CET"]
    # the old report as if written before a default changed: same preset, other full settings
    old["config"]["resolved"]["CET"]["occurrence_init"] = "uniform"
    (tmp_path / "old" / "metrics.json").write_text(json.dumps(old))
    with pytest.raises(SystemExit, match=r"train CET with different settings \(occurrence_init\)"):
        experiments.main(["merge", str(tmp_path / "old"), str(tmp_path / "new"), "--out", str(tmp_path / "bad")])
    assert not (tmp_path / "bad").exists()
    # dropping the stale rows keeps the first part's other models and takes CET from the rerun
    assert experiments.main(["merge", str(tmp_path / "old"), str(tmp_path / "new"), "--drop-first", "CET",
                             "--out", str(tmp_path / "m")]) == 0
    merged = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert merged["config"]["seeds"] == {"BC": [0, 1], "CET": [1]}
    assert list(merged["models"]) == list(merged["config"]["seeds"]) == ["CET", "BC"]  # the rows keep their order
    assert merged["config"]["resolved"]["CET"]["occurrence_init"] == "observed"
    assert "--drop-first CET" in merged["command"]
    with pytest.raises(SystemExit, match="has no ET to drop"):
        experiments.main(["merge", str(tmp_path / "old"), str(tmp_path / "new"), "--drop-first", "ET",
                          "--out", str(tmp_path / "bad")])


def test_merge_compares_the_data_not_the_folder(tmp_path, tiny_dataset):
    """Parts run on the same data in two folders merge (a synthetic part writes its data under its
    own --out); parts run on different data under one folder do not; reports from before the
    fingerprint fall back to comparing paths."""
    import shutil

    import polars as pl

    from cet_experiments.merge import merge_results

    kw = dict(models=("BC",), hidden_sizes=(4,), max_epochs=2, patience=2, progress=False)
    copy = tmp_path / "copy"
    shutil.copytree(tiny_dataset.path, copy)
    a = experiments.run(tiny_dataset, runs=1, **kw)
    b = experiments.run(load_dataset(copy), runs=1, first_seed=1, **kw)
    assert a["dataset"]["path"] != b["dataset"]["path"]
    merged = merge_results([a, b])
    assert merged["dataset"]["fingerprint"] == experiments.data_fingerprint(tiny_dataset.path)
    assert merged["config"]["seeds"]["BC"] == [0, 1]
    features = pl.read_parquet(copy / "features.parquet")
    feature = tiny_dataset.feature_names[0]
    features.with_columns(pl.col(feature) + 1.0).write_parquet(copy / "features.parquet")
    c = experiments.run(load_dataset(copy), runs=1, first_seed=2, **kw)
    assert c["dataset"]["path"] == b["dataset"]["path"]
    with pytest.raises(ValueError, match="part 2 and part 1 differ in dataset fingerprint"):
        merge_results([b, c])
    for old in (a, b):
        del old["dataset"]["fingerprint"]
    with pytest.raises(ValueError, match="differ in dataset path"):
        merge_results([a, b])


def test_reports_name_the_cpu_model(tmp_path):
    """Reports record the CPU's model name: two x86_64 machines can run one fit to different floats
    (the Reddit stand-in table's ET), and 'processor' alone cannot tell them apart."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9B14\n\n"
                    "processor\t: 1\nmodel name\t: AMD EPYC 9B14\n")
    assert cpu_model(str(info)) == "AMD EPYC 9B14"
    info.write_text("processor\t: 0\nmodel name\t: \n")          # an empty name is not a name
    assert cpu_model(str(info)) != ""
    assert "cpu_model" in machine()
    if (proc := Path("/proc/cpuinfo")).exists() and "model name" in proc.read_text():
        assert machine()["cpu_model"] == cpu_model("/proc/cpuinfo") and machine()["cpu_model"]


def _goal_report(cet, bc, et, oracle, ece_cet=0.04, ece_bc=0.17) -> dict:
    row = lambda aucs, ece: {"tasks": {"T1": {"auc": aucs, "ece": [ece] * len(aucs)},  # noqa: E731
                                       "T2": {"auc": aucs, "ece": [ece] * len(aucs)}}}
    return {"models": {"CET": row(cet, ece_cet), "BC": row(bc, ece_bc), "ET": row(et, 0.05),
                       "Oracle": row(oracle, 0.01)},
            "config": {"seeds": {"CET": [3, 4], "BC": [3, 4], "ET": [3, 4], "Oracle": [3, 4]}},
            "dataset": {"name": "toy", "split_sizes": {"train": 5222}}}


def test_goal_command_prints_the_share_per_run_and_the_verdict(tmp_path, capsys):
    from cet_experiments.goal import goal_rows

    # half the gap on the means, but below the better baseline in one run: missed
    r = _goal_report(cet=[0.90, 0.715], bc=[0.70, 0.72], et=[0.60, 0.60], oracle=[0.90, 0.90])
    runs, over = goal_rows(r)
    assert [x["seed"] for x in runs] == [3, 4] and over["below_in"] == 1
    assert over["share"] == pytest.approx((0.8075 - 0.71) / (0.90 - 0.71)) and over["share"] > 0.5
    assert not over["met"]
    # the better baseline is taken per run and on the means (ET here), and ECE worse than BC's misses
    r = _goal_report(cet=[0.80, 0.80], bc=[0.60, 0.60], et=[0.70, 0.70], oracle=[0.85, 0.85], ece_cet=0.2)
    runs, over = goal_rows(r)
    assert {x["better"] for x in runs} == {"ET"} and over["share"] == pytest.approx(2 / 3) and not over["met"]
    r = _goal_report(cet=[0.80, 0.80], bc=[0.60, 0.60], et=[0.70, 0.70], oracle=[0.85, 0.85])
    assert goal_rows(r)[1]["met"]

    (tmp_path / "rep").mkdir()
    (tmp_path / "rep" / "metrics.json").write_text(json.dumps(r))
    assert experiments.main(["goal", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out
    assert "toy (5,222 training rows), 2 runs: CET closes 66.7 % of the gap between ET and Oracle" in out
    assert out.rstrip().endswith("met") and "missed" not in out
    with pytest.raises(SystemExit, match="no such report"):
        experiments.main(["goal", str(tmp_path / "nothing")])
    with pytest.raises(SystemExit, match="no 'Truth' row"):
        experiments.main(["goal", str(tmp_path / "rep"), "--oracle", "Truth"])
    with pytest.raises(SystemExit, match="ECE with BC's: name BC among the baselines"):
        experiments.main(["goal", str(tmp_path / "rep"), "--baselines", "ET"])
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metrics.json").write_text('{"models": ')
    with pytest.raises(SystemExit, match=r"bad/metrics.json: not a report's JSON"):
        experiments.main(["goal", str(tmp_path / "bad")])
    (tmp_path / "bad" / "metrics.json").write_text("[]")
    with pytest.raises(SystemExit, match=r"bad/metrics.json: no 'models' table"):
        experiments.main(["goal", str(tmp_path / "bad")])


def test_a_variants_patience_and_width_win_over_the_arguments(tmp_path):
    ds = load_dataset(synthetic.write(tmp_path / "d", "independent", n=300, noise=0.2, split_sizes=(150, 75, 75)))
    model = fit_preset("ET", ds.train, ds.val, seed=0, hidden_sizes=(8,), max_epochs=3, patience=2,
                       params={"patience": 1, "hidden_sizes": (4,)}, device="cpu")
    assert (model.patience, model.hidden_sizes_) == (1, (4,))
