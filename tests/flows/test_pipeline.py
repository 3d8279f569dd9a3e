"""train-evaluate, retrain, predict and full-pipeline under the session's Prefect harness.

Settings come from CET_* environment variables pointing into a temporary folder, as a user
would set them in .env.
"""

import json
import re
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from prefect.client.orchestration import get_client

from flows import predict as predict_flow
from flows.full_pipeline import full_pipeline
from flows.lib.flow_params import RetrainParams, SyntheticParams, TrainEvaluateParams
from flows.lib.infra import registry
from flows.lib.modeling import train_eval, version_text
from flows.synthetic import build_synthetic
from flows.train import retrain, train_evaluate


@pytest.fixture
def cet_env(tmp_path, monkeypatch):
    for name, value in {"DATA_DIR": tmp_path / "data", "MODELS_DIR": tmp_path / "models",
                        "REPORTS_DIR": tmp_path / "reports", "SYNTHETIC_N": 1000, "MAX_EPOCHS": 3,
                        "PATIENCE": 3, "HIDDEN": 16, "RETRAIN_DATASET": "synthetic",
                        "MIMIC_STANDIN_SCALE": 0.001, "REDDIT_STANDIN_USERS": 200}.items():
        monkeypatch.setenv(f"CET_{name}", str(value))
    return tmp_path


def test_train_evaluate_registers_promotes_and_reuses(cet_env):
    data = build_synthetic()
    assert data == str(cet_env / "data" / "synthetic")
    first = train_evaluate(TrainEvaluateParams(dataset="synthetic"))
    assert first["version"].endswith("v0001") and not first["reused"]
    assert (
        first["decision"]["promoted"]
        and first["decision"]["reason"] == "the first version: nothing was promoted before"
    )
    v1 = cet_env / "models" / "synthetic" / "v0001"
    assert {p.name for p in v1.iterdir()} >= {"CET", "ET", "BC", "metrics.json", "params.json", "data.json",
                                              "decision.json"}
    data_info = json.loads((v1 / "data.json").read_text())
    assert data_info["feature_names"] == ["x1", "x2", "x3", "x4", "x5"] and len(data_info["fingerprint"]) == 64
    assert 0.0 <= json.loads((v1 / "metrics.json").read_text())["summary"]["CET"]["val_auc"] <= 1.0
    again = train_evaluate(TrainEvaluateParams(dataset="synthetic"))
    assert again["reused"] and again["version"] == first["version"]
    assert registry.versions(cet_env / "models", "synthetic") == ["v0001"]
    with get_client(sync_client=True) as client:
        art = client.read_latest_artifacts()
    keys = {a.key for a in art}
    assert {"metrics-synthetic", "calibration-synthetic", "intervals-synthetic"} <= keys
    table = json.loads(next(a for a in art if a.key == "intervals-synthetic").data)
    assert {(r["what"], r["metric"]) for r in table} >= {("CET", "auc"), ("CET - BC", "auc"), ("CET - ET", "ci")}
    assert all(r["low"] <= r["estimate"] <= r["high"] for r in table if not r["what"].startswith("CET - "))
    rows = version_text.calibration_rows(v1)
    assert {(r["model"], r["event"]) for r in rows} == {
        (m, e) for m in ("CET", "ET") for e in data_info["event_names"]
    }
    assert all(0.0 <= r["test_abs_diff"] <= 1.0 and r["horizon"] > 0 for r in rows)
    # the dataset's report: with the truth, its AUC and calibration figures too; the card says the data
    report = (cet_env / "reports" / "synthetic" / "report.md").read_text()
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", report)
    assert linked == ["survival.png", "calibration-horizon.png", "decision-curve.png", "p-ever.png", "auc.png",
                      "calibration.png"], linked
    assert all((cet_env / "reports" / "synthetic" / png).is_file() for png in linked)
    assert first["report"] == str(cet_env / "reports" / "synthetic" / "report.md")
    card = (v1 / "model_card.md").read_text()
    assert "built from synthetic (the paper's)" in card and f"fingerprint `{data_info['fingerprint']}`" in card
    assert "| CET | " in card and "No true occurrence" not in card


def test_retrain_promotes_or_keeps_by_the_rule(cet_env, monkeypatch):
    build_synthetic()
    train_evaluate(TrainEvaluateParams(dataset="synthetic"))
    promoted = retrain(RetrainParams(dataset="synthetic", seed=1, promote_tolerance=1.0))  # any val AUC within 1.0
    assert promoted["version"].endswith("v0002") and promoted["decision"]["promoted"]
    assert registry.promoted(cet_env / "models", "synthetic").name == "v0002"
    # make the promoted version unbeatable: the next candidate must be kept out
    metrics_path = cet_env / "models" / "synthetic" / "v0002" / "metrics.json"
    m = json.loads(metrics_path.read_text())
    m["summary"]["CET"]["val_auc"] = 1.0
    metrics_path.write_text(json.dumps(m))
    kept = retrain(RetrainParams(dataset="synthetic", seed=2, promote_tolerance=0.0))
    assert kept["version"].endswith("v0003") and not kept["decision"]["promoted"]
    assert "worse, kept v0002" in kept["decision"]["reason"]
    assert registry.promoted(cet_env / "models", "synthetic").name == "v0002"
    history = (cet_env / "models" / "synthetic" / "history.jsonl").read_text().splitlines()
    assert [json.loads(h)["promoted"] for h in history] == [True, True, False]
    # new data: the promoted v0002 is rescored on the new version's validation rows, where it
    # cannot keep its recorded 1.0, and the rule compares the two there
    monkeypatch.setenv("CET_SYNTHETIC_N", "1200")
    moved = retrain(RetrainParams(dataset="synthetic", seed=2, promote_tolerance=0.0))
    d = moved["decision"]
    assert moved["version"].endswith("v0004") and d["previous_recorded_value"] == 1.0
    assert d["previous_value"] < 1.0 and "for v0002 on v0004's validation rows" in d["reason"]
    assert d["comparison"].startswith("v0002 was trained on other data: both rescored on v0004's")
    assert (v4 := cet_env / "models" / "synthetic" / "v0004" / "train_ids.npy").is_file() and len(np.load(v4)) == 720
    # the hashes' key is kept with the data, never in the models folder
    assert (cet_env / "data" / "row-ids.key").is_file() and not list((cet_env / "models").rglob("*.key"))
    # a dataset built with a parameter given (not left to its setting) is rebuilt with it by retrain
    build_synthetic(SyntheticParams(n=800))
    again = retrain(RetrainParams(dataset="synthetic", seed=2, promote_tolerance=0.0))
    assert len(np.load(cet_env / "models" / "synthetic" / again["version"].rsplit("/", 1)[-1] / "train_ids.npy")) == 480


def test_predict_cli_scores_with_the_promoted_model(cet_env, capsys):
    data = build_synthetic()
    train_evaluate(TrainEvaluateParams(dataset="synthetic"))
    features = pl.read_parquet(f"{data}/features.parquet").filter(pl.col("split") == "test")
    src = cet_env / "new.parquet"
    features.drop("split").write_parquet(src)
    out = cet_env / "scores.parquet"
    assert predict_flow.main(["--dataset", "synthetic", "--features", str(src), "--out", str(out),
                              "--quantiles", "0.25,0.5,0.75"]) == 0
    scores = pl.read_parquet(out)
    assert scores["id"].to_list() == features["id"].to_list()
    for e in ("T1", "T2"):
        p = scores[f"p_{e}"].to_numpy()
        assert ((p > 0) & (p < 1)).all()
        q = np.column_stack([scores[f"t_q{k}_{e}"].to_numpy() for k in (25, 50, 75)])
        assert (q > 0).all() and (np.diff(q, axis=1) > 0).all()
    with pytest.raises(ValueError, match="same column name twice"):
        predict_flow.main(["--dataset", "synthetic", "--features", str(src), "--out", str(out),
                           "--quantiles", "0.12,0.124"])
    assert pl.read_parquet(out)["t_q25_T1"].len() == len(features)  # the earlier output is untouched
    features.drop(["split", "x3"]).write_parquet(src)
    capsys.readouterr()
    with pytest.raises(SystemExit):  # a usage error from the file's header, before any flow (and its traceback)
        predict_flow.main(["--dataset", "synthetic", "--features", str(src), "--out", str(out)])
    assert re.search(r"error: --features \S+new.parquet: missing columns \['x3'\] \(synthetic v0001 "
                     r"needs an id and its features\)", capsys.readouterr().err)
    with pytest.raises(SystemExit):
        predict_flow.main(["--dataset", "nothing-trained", "--features", str(src), "--out", str(out)])
    assert "no promoted model" in capsys.readouterr().err



def test_predict_scores_a_file_without_a_prefect_server(cet_env):
    """With no PREFECT_API_URL, scoring a features file starts no temporary server: the command
    scores in its own process, the same scores as the flow run."""
    import os
    import subprocess
    import sys

    data = build_synthetic()
    train_evaluate(TrainEvaluateParams(dataset="synthetic"))
    src = cet_env / "few.parquet"
    pl.read_parquet(f"{data}/features.parquet").filter(pl.col("split") == "test").head(4).drop("split").write_parquet(
        src
    )
    assert (
        predict_flow.main(["--dataset", "synthetic", "--features", str(src), "--out", str(cet_env / "flow.parquet")])
        == 0
    )
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "flows.predict", "--dataset", "synthetic",
                          "--features", str(src), "--out", str(cet_env / "local.parquet")], capture_output=True,
                         text=True, env=env, cwd=cet_env, timeout=120)
    seconds = time.perf_counter() - t0
    assert out.returncode == 0, out.stderr[-2000:]
    assert "temporary server" not in out.stdout + out.stderr
    assert not re.search(r"\|\s+prefect$", out.stderr, flags=re.M)  # Prefect is not even imported
    assert re.search(r"\| INFO +\| flows\.predict - scored 4 rows of few\.parquet", out.stderr)  # its log still shows
    assert pl.read_parquet(cet_env / "local.parquet").equals(pl.read_parquet(cet_env / "flow.parquet"))
    assert seconds < 30, seconds  # about 5 s on a 2-core machine: imports, the model, four rows


@pytest.mark.filterwarnings("ignore:S. no observed time:UserWarning")  # a tiny fixture: events no row saw
def test_predict_cli_scores_raw_mimic_tables_like_the_training_rows(cet_env, capsys, monkeypatch):
    """predict --mimic-dir on the raw tables the training build read: the same admissions and the
    same scores as predict --features on the build's own rows, as a flow run and, with no Prefect
    server configured, in the command's own process."""
    from flows.lib.flow_params import MimicBuildParams
    from flows.mimic import build_mimic_features

    data = build_mimic_features(MimicBuildParams())
    train_evaluate(TrainEvaluateParams(dataset="mimic"))
    raw = next((cet_env / "data" / ".mimic-work").glob("standin-*"))
    out_raw, out_rows = cet_env / "raw.parquet", cet_env / "rows.parquet"
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName
    from prefect.settings import PREFECT_API_URL

    def predict_runs() -> int:
        with get_client(sync_client=True) as client:
            return len(client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["predict"]))))

    before = predict_runs()
    with monkeypatch.context() as served:  # the test harness's server named as a user names theirs: a flow run
        served.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
        assert predict_flow.main(["--dataset", "mimic", "--mimic-dir", str(raw), "--out", str(out_raw)]) == 0
    assert predict_runs() == before + 1
    assert predict_flow.main(["--dataset", "mimic", "--features", f"{data}/features.parquet",
                              "--out", str(out_rows)]) == 0
    a, b = pl.read_parquet(out_rows).sort("id"), pl.read_parquet(out_raw).sort("id")
    assert a["id"].to_list() == b["id"].to_list() and a.height > 50
    for c in a.columns[1:]:
        np.testing.assert_allclose(b[c].to_numpy(), a[c].to_numpy(), atol=1e-5, rtol=1e-5)
    # the patients' rows staged in the work folder CET named are gone; one the user names keeps them for a rerun
    assert not (cet_env / ".raw.parquet-work").exists()
    work = cet_env / "work"
    for out, work_dir in (("kept.parquet", ["--work-dir", str(work)]), ("here.parquet", [])):
        assert predict_flow.main(["--dataset", "mimic", "--mimic-dir", str(raw), "--out", str(cet_env / out),
                                  *work_dir]) == 0
        assert pl.read_parquet(cet_env / out).equals(pl.read_parquet(out_raw))
    assert (work / "staged" / "CHARTEVENTS.parquet").is_file()
    assert not (cet_env / ".here.parquet-work").exists()
    assert predict_runs() == before + 1  # no PREFECT_API_URL: scored in the command's own process, no flow run
    # a folder without one of the four tables, or with a table whose header is not MIMIC's: a usage
    # error before any flow starts (it was a failed flow's tracebacks)
    partial = cet_env / "partial"
    partial.mkdir()
    for table in ("ADMISSIONS", "CHARTEVENTS", "OUTPUTEVENTS"):
        (partial / f"{table}.csv.gz").symlink_to(next(raw.glob(f"{table}.csv*")))
    for content, message in ((None, r"MIMIC table LABEVENTS not found in \S+partial"),
                             (b"x\n1\n", r"\S+partial/LABEVENTS\.csv: table LABEVENTS is "
                                         r"missing column\(s\) \['ROW_ID'")):
        if content is not None:
            (partial / "LABEVENTS.csv").write_bytes(content)
        with pytest.raises(SystemExit) as exit_:
            predict_flow.main(["--dataset", "mimic", "--mimic-dir", str(partial), "--out", str(cet_env / "p.parquet")])
        assert exit_.value.code == 2 and re.search(rf"error: --mimic-dir {message}", capsys.readouterr().err)
    assert not (cet_env / "p.parquet").exists() and not (cet_env / ".p.parquet-work").exists()


@pytest.mark.filterwarnings("ignore:S. no observed time:UserWarning")  # a tiny fixture: events no row saw
@pytest.mark.slow
def test_full_pipeline_writes_the_report_and_skips_everything_the_second_time(cet_env, monkeypatch, capfd):
    monkeypatch.setenv("CET_PSEUDONYM_KEY", KEY_MARKER)
    monkeypatch.chdir(cet_env)
    monkeypatch.setenv("CET_DATA_DIR", "data")  # relative, as the main job's default
    monkeypatch.delenv("CET_TRAIN_WORKERS", raising=False)  # the product's default: fits side by side
    report = full_pipeline()
    assert_no_private_markers(cet_env, capfd.readouterr())
    from cet_model.base import resolve_device
    from flows.lib.modeling import side_by_side

    fitted = json.loads((cet_env / "models" / "synthetic" / "v0001" / "params.json").read_text())["fit_processes"]
    # the default plan: side by side wherever there are CPUs for it (one after another on a GPU)
    assert fitted["workers"] == side_by_side.plan(None, 4, resolve_device("auto").type)[0]
    reports = cet_env / "reports"
    assert report == str(reports / "report.md")
    text = (reports / "report.md").read_text()
    # the report leads with the headline: per dataset the default CET, ET, BC and the oracle
    first_section = min(text.index(f"## {n}") for n in ("synthetic", "mimic", "reddit"))
    assert text.index("## Headline") < first_section
    headline = text[text.index("## Headline"):first_section]
    for name in ("synthetic", "mimic", "reddit"):
        shown = re.findall(rf"^\| {name} \| ([^|]+) \| ([^|]+) \|", headline, flags=re.M)
        assert [m.strip() for _, m in shown] == ["**CET**", "ET", "BC", "Oracle"], (name, shown)
        # what the data are, from the build stamp: the stand-ins say so, in the table and their sections
        kind = "synthetic (the paper's)" if name == "synthetic" else "generated stand-in"
        assert {k.strip() for k, _ in shown} == {kind}, (name, shown)
        section_head = text[text.index(f"## {name}"):][:600]
        assert ("A generated stand-in, not real data" in section_head) == (name != "synthetic"), name
        # AUC with its interval; each dataset's section: CET minus each model with its own
        cet_auc = re.search(rf"^\| {name} \| [^|]+ \| \*\*CET\*\* \| ([^|]+) \|", headline,
                            flags=re.M).group(1).strip()
        assert re.fullmatch(r"0\.\d{3} \[0\.\d{3}, (0\.\d{3}|1\.000)\]", cet_auc), cet_auc
        section = text[text.index(f"## {name}"):]
        assert re.search(r"^\| BC \| [+-]\d\.\d{3} \[[+-]\d\.\d{3}, [+-]\d\.\d{3}\] \|", section, flags=re.M)
        # how much of CET's P(ever) lies past the follow-up, beside the truth the stand-ins know
        section = section.split("\n## ")[0]
        events = json.loads((cet_env / "data" / name / "manifest.json").read_text())["event_names"]
        rows = re.findall(r"^\| (\S+) \| [\d.e+]+ \| (0\.\d{3}) \| 0\.\d{3} \| [01]\.\d{3} / [01]\.\d{3} \| "
                          r"\+0\.\d{3}(?: \[0\.\d{3}, [01]\.\d{3}\])?, \d+ events? \| \d+ % \| "
                          r""  # with interval, events
                          r"(0\.\d{3}) / (0\.\d{3}) \|$",  # the true share by the follow-up's end / ever
                          section, flags=re.M)
        assert "CET's P(ever) past the follow-up, test split" in section and [r[0] for r in rows] == events, section
        assert all(float(r[2]) <= float(r[3]) for r in rows), rows
        assert (reports / f"{name}-calibration.png").read_bytes()[:4] == b"\x89PNG"
        assert registry.versions(cet_env / "models", name) == ["v0001"]
    # the Prefect UI cannot follow links to local files: the artifact carries the PNGs themselves
    import base64
    with get_client(sync_client=True) as client:
        art = next(a for a in client.read_latest_artifacts() if a.key == "cet-pipeline-report")
        # runs named by what they do: each train-evaluate subflow by its dataset, tasks by table and month
        flow_names = {r.name for r in client.read_flow_runs()}
        task_names = {r.name for r in client.read_task_runs(limit=200)}
    for name in ("synthetic", "mimic", "reddit"):
        assert any(re.fullmatch(rf"train-{name}-\d{{8}}-\d{{6}}", n) for n in flow_names), (name, sorted(flow_names))
    assert "stage-CHARTEVENTS" in task_names and any(re.fullmatch(r"scan-RC_\d{4}-\d{2}", n) for n in task_names), \
        sorted(task_names)
    assert {"judge-synthetic", "report-mimic", "generate-synthetic-reference"} <= task_names, sorted(task_names)
    uris = re.findall(r"!\[[^\]]*\]\(data:image/png;base64,([A-Za-z0-9+/=]+)\)", art.data)
    assert len(uris) == 6 and ".png)" not in art.data
    assert base64.b64decode(uris[1]) == (reports / "synthetic-calibration.png").read_bytes()
    # the report's figures are the dataset reports' own, copied: the very bytes a drawing of them gives
    from flows.lib.modeling import report as report_lib
    entries = [{"name": n, "dataset": str(cet_env / "data" / n), "version": str(cet_env / "models" / n / "v0001")}
               for n in ("synthetic", "mimic", "reddit")]
    report_lib.write_report(entries, cet_env / "drawn")  # no dataset report given: every figure drawn
    for name in ("synthetic", "mimic", "reddit"):
        for kind, own in (("auc", "auc.png"), ("calibration", "calibration.png")):
            copied = (reports / f"{name}-{kind}.png").read_bytes()
            assert copied == (reports / name / own).read_bytes(), (name, kind)
            assert copied == (cet_env / "drawn" / f"{name}-{kind}.png").read_bytes(), (name, kind)
    # a figure its dataset report does not link (left from before) is never copied: it is drawn
    import shutil
    stale = shutil.copytree(reports / "synthetic", cet_env / "stale" / "synthetic")
    (stale / "report.md").write_text((stale / "report.md").read_text().replace("(auc.png)", ""))
    (stale / "auc.png").write_bytes(b"an old figure")
    report_lib.write_report([dict(entries[0], report=str(stale / "report.md"))], cet_env / "stale-out")
    assert (cet_env / "stale-out" / "synthetic-auc.png").read_bytes() == (reports / "synthetic-auc.png").read_bytes()
    stamps = {p: p.stat().st_mtime_ns for p in (cet_env / "data").glob("*/.stage.json")}
    assert len(stamps) == 3
    # what the first run wrote for each dataset: its model version and its report with the figures
    written = {p: p.stat().st_mtime_ns for folder in ("models", "reports/synthetic", "reports/mimic", "reports/reddit")
               for p in (cet_env / folder).rglob("*") if p.is_file() and p.suffix != ".lock"}
    assert len(written) > 30
    from datetime import UTC, datetime

    from prefect.client.schemas.filters import LogFilter, LogFilterTimestamp

    started = datetime.now(UTC)
    full_pipeline()
    with get_client(sync_client=True) as client:
        logs = "\n".join(e.message for e in every_log(client, LogFilter(timestamp=LogFilterTimestamp(after_=started))))
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # no stage re-ran
    # nothing trained or drawn again: each version reused, each report kept, no file of theirs rewritten
    # (work counted, not timed: a wall clock beside other tests on two cores says little)
    for name in ("synthetic", "mimic", "reddit"):
        assert re.search(rf"^{name}: reused \S+/models/{name}/v0001$", logs, flags=re.M), name
        assert f"{name}: report of v0001 unchanged" in logs, name
        assert registry.versions(cet_env / "models", name) == ["v0001"]
    assert {p: p.stat().st_mtime_ns for p in written} == written
    assert (reports / "report.md").read_text() == text  # the same report (a rebuild's recipe records out as given)


def every_log(client, log_filter=None) -> list:
    """Every log record the server holds (under ``log_filter``), a page of 200 (the API's largest) at a time,
    after this process's log worker has sent what it still holds: a flow's last lines are sent in the
    background, and a read right after the flow ended could miss them. On a busy machine sending them can take
    a while: the wait is long, and a send that did not end fails here, not as a line missing further on."""
    from prefect.logging.handlers import APILogWorker

    _, pending = APILogWorker.drain_all(timeout=180)
    assert not pending, "this process's log records did not reach the server within 180 s"
    logs = []
    while page := client.read_logs(log_filter, limit=200, offset=len(logs)):
        logs += page
    return logs


KEY_MARKER = "pseudonym-key-MARKER-7f3a-0b9c4d2e81f6a3b5c7d9e0f1"


def assert_no_private_markers(root, captured) -> None:
    """No stand-in username or MIMIC admission id in logs, Prefect artifacts, reports, model folders
    or the Reddit dataset; the pseudonymisation key nowhere at all (files, logs, artifacts, output)."""
    import re

    truths = {p.parent.name: pl.read_parquet(p) for p in root.rglob("standin_truth.parquet")}
    names = [u for t in truths.values() if "username" in t.columns for u in t["username"].to_list() if len(u) >= 6]
    hadm = [str(h) for t in truths.values() if "hadm_id" in t.columns for h in t["hadm_id"].to_list()]
    assert len(names) > 50 and len(hadm) > 50, (len(names), len(hadm))
    with get_client(sync_client=True) as client:
        logs = "\n".join(entry.message for entry in every_log(client))
        arts = "\n".join(f"{a.key} {a.description} {a.data}" for a in client.read_artifacts(limit=200))
    texts = {"prefect logs": logs, "prefect artifacts": arts, "stdout": captured.out, "stderr": captured.err}
    for folder in ("reports", "models", "data/reddit"):
        for path in (root / folder).rglob("*"):
            if path.is_file():
                texts[str(path.relative_to(root))] = path.read_bytes().decode("latin-1")
    assert len(logs) > 1000 and arts, "nothing captured: the check would prove nothing"
    name_re = re.compile("|".join(map(re.escape, names)))
    # a run's name ends in its start, -YYYYMMDD-HHMMSS: a time of day from 10:00 on is a six-digit number
    # like an id, and one can match a stand-in HADM_ID by chance: the stamp is not read as one
    hadm_re = re.compile(r"(?<![\d.])(?<!\d{8}-)(?:" + "|".join(hadm) + r")(?!\d)")
    for where, text in texts.items():
        assert KEY_MARKER not in text, f"pseudonymisation key in {where}"
        if where.startswith("data/reddit") or where in ("prefect logs", "prefect artifacts") or \
                where.startswith(("reports", "models")):
            hit = name_re.search(text)
            assert hit is None, f"Reddit username {hit.group()!r} in {where}"
        if not where.startswith("data/"):
            hit = hadm_re.search(text)
            assert hit is None, (f"MIMIC HADM_ID {hit.group()} in {where}: "
                                 f"{text[max(0, hit.start() - 300):hit.end() + 80]!r}")
    for path in root.rglob("*"):  # the key in no file at all, sources and caches included
        if path.is_file() and path.stat().st_size < 50_000_000:
            assert KEY_MARKER.encode() not in path.read_bytes(), f"pseudonymisation key in {path}"


def test_train_evaluate_writes_the_experiment_report_and_its_artifact(cet_env):
    build_synthetic()
    result = train_evaluate(TrainEvaluateParams(dataset="synthetic", runs=2, search=1, max_epochs=2))
    out = cet_env / "reports" / "synthetic"
    assert result["experiment"] == str(out)
    for name in ("table.md", "metrics.json", "fig1_occurrence_maps.png", "fig2_auc_mrae.png", "fig3_calibration.png"):
        assert (out / name).is_file(), name
    metrics = json.loads((out / "metrics.json").read_text())
    assert (
        set(metrics["models"]) == {"CET", "CET-paper", "ET", "BC", "Oracle"} and len(metrics["search"]["trials"]) == 1
    )
    with get_client(sync_client=True) as client:
        keys = {a.key for a in client.read_latest_artifacts()}
    assert "experiment-synthetic" in keys


def test_a_failing_run_is_reported_failed_never_completed(cet_env):
    """A broken input makes train-evaluate fail: the run's state on the server is FAILED with the
    cause, and no model version is registered or promoted."""
    data = build_synthetic()
    events = f"{data}/events.parquet"
    pl.read_parquet(events).drop("c_T2").write_parquet(events)  # damaged after the build
    state = train_evaluate(TrainEvaluateParams(dataset="synthetic"), return_state=True)
    assert state.is_failed()
    with pytest.raises(ValueError, match=r"events.parquet: missing columns \['c_T2'\]"):
        state.result()
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
    assert run.state.type.value == "FAILED" and "c_T2" in (run.state.message or "")
    assert re.fullmatch(r"train-synthetic-\d{8}-\d{6}", run.name), run.name  # named by what it does
    assert registry.versions(cet_env / "models", "synthetic") == []
    assert registry.promoted(cet_env / "models", "synthetic") is None


def test_a_failed_training_says_so_on_its_progress_artifact(cet_env):
    """Training that fails leaves its progress artifact saying so, not standing at its last percentage."""
    from prefect import flow

    from flows.train import train_models

    data = build_synthetic()
    bad = train_eval.TrainParams(models=("CET",), hidden=8, max_epochs=2, overrides={"CET": {"dropout": 2.0}})

    @flow(name="train-models-alone")
    def train_alone():  # the task as train-evaluate runs it, with a model that cannot be fitted
        return train_models(data, str(cet_env / "models"), "synthetic", bad)

    state = train_alone(return_state=True)
    assert state.is_failed()
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(state.state_details.flow_run_id)
        progress = [a for a in client.read_artifacts() if a.type == "progress" and a.flow_run_id == run.id]
    assert [a.description for a in progress] == ["training on synthetic failed (ValueError) at 0 %"], progress


def test_a_build_waits_for_or_refuses_a_concurrent_one(cet_env, monkeypatch):
    """The flow holds the output's lock: with CET_LOCK_WAIT=0 a run into a folder another process
    is writing is refused before any work; with a wait it goes on once the other has finished."""
    from flows.lib.flow_params import SyntheticParams
    from flows.lib.infra.locks import OutputLocked
    from tests.test_locks import hold

    out = cet_env / "data" / "synthetic"
    proc = hold(out, 60)
    monkeypatch.setenv("CET_LOCK_WAIT", "0")
    try:
        with pytest.raises(OutputLocked, match="another run is writing it"):
            build_synthetic(SyntheticParams(n=1000))
        assert not out.exists()
    finally:
        proc.kill()
        proc.wait()
    monkeypatch.setenv("CET_LOCK_WAIT", "60")
    proc = hold(out, 2)
    assert build_synthetic(SyntheticParams(n=1000)) == str(out)
    proc.wait()
    assert (out / "manifest.json").is_file()


@pytest.mark.slow
def test_two_builds_started_together_build_once(tmp_path):
    """Two real CLI runs of the same MIMIC build into one folder at once: exactly one builds, the
    other waits for it (or starts after it) and skips; the folder is whole."""
    import os
    import subprocess
    import sys

    from cet_model.dataset import load_dataset

    out = tmp_path / "mimic"
    procs = []
    for i in range(2):
        env = {**os.environ, "PREFECT_HOME": str(tmp_path / f"home{i}"), "CET_MIMIC_STANDIN_SCALE": "0.002"}
        env.pop("PREFECT_API_URL", None)
        procs.append(subprocess.Popen([sys.executable, "-m", "flows.mimic", "build", "--out", str(out)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], logs
    ran = ["inputs changed or no result yet: running" in log for log in logs]
    skipped = ["unchanged: skipping" in log for log in logs]
    assert sorted(ran) == [False, True] and sorted(skipped) == [False, True], logs
    assert load_dataset(out).train.X.shape[0] > 0


def test_train_evaluate_on_data_without_truth_promotes_by_harrells_c(cet_env, capsys):
    """Real follow-up data (lifelines' rossi) carry no true occurrence: the flow leaves the Oracle
    out and says so, promotes by val_ci_rmst (Harrell's C of the restricted mean event-free time)
    instead of the default val_auc (which no version could
    win), and refuses val_auc chosen explicitly, or a search for the report, before training."""
    from lifelines.datasets import load_rossi

    from flows import table as table_flow

    load_rossi().to_csv(cet_env / "rossi.csv", index=False)  # as a user has it: a CSV file
    assert table_flow.main(["--table", str(cet_env / "rossi.csv"), "--name", "rossi", "--event", "arrest=week,arrest",
                            "--time-unit", "weeks", "--features", "fin,age,prio"]) == 0
    data = cet_env / "data" / "rossi"  # $CET_DATA_DIR/<name>, where --dataset rossi looks
    with pytest.raises(ValueError, match="promotion metric: val_auc is scored against the true occurrence, which 86 "
                                         "validation cells"):
        train_evaluate(TrainEvaluateParams(dataset="rossi", data=str(data), promote_metric="val_auc"))
    with pytest.raises(ValueError, match="search: the random search tunes on validation AUC"):
        train_evaluate(TrainEvaluateParams(dataset="rossi", data=str(data), runs=1, search=2))
    from flows import train as train_flow

    capsys.readouterr()
    for argv, said in ((["--promote-metric", "val_auc"], "error: promotion metric: val_auc is scored against"),
                       (["--runs", "1", "--search", "2"], "error: search: the random search tunes")):
        with pytest.raises(SystemExit) as usage:  # the command line: a usage error, with or without a server
            train_flow.main(["evaluate", "--dataset", "rossi", *argv])
        assert usage.value.code == 2 and said in capsys.readouterr().err
    assert registry.versions(cet_env / "models", "rossi") == []
    first = train_evaluate(TrainEvaluateParams(dataset="rossi"))
    second = train_evaluate(TrainEvaluateParams(dataset="rossi", seed=1, promote_tolerance=1.0, reference="none"))
    for result in (first, second):
        assert (result["decision"]["metric"] == "val_ci_rmst"
                and "promoted by val_ci_rmst (Harrell's C of the restricted mean" in result["decision"]["note"])
    assert second["decision"]["promoted"] and np.isfinite(second["decision"]["candidate_value"])
    metrics = json.loads((cet_env / "models" / "rossi" / "v0002" / "metrics.json").read_text())
    # no truth: the product default and ET (BC and the Oracle, scored against the truth, only where it is)
    assert sorted(metrics["test"]) == ["CET", "ET"] and metrics["skipped"] == {}
    first_metrics = json.loads((cet_env / "models" / "rossi" / "v0001" / "metrics.json").read_text())
    assert "Cox (reference)" in first_metrics["test"]  # no truth: the classical reference by default (v0002: none)
    assert metrics["summary"]["CET"]["test_auc"] is None and 0 < metrics["summary"]["CET"]["test_ci"] < 1
    assert 0 < metrics["summary"]["CET"]["test_ci_rmst"] < 1 and 0 < metrics["summary"]["ET"]["val_ci_rmst"] < 1
    # new subjects, features in the same raw units (age in years): scored by the promoted model,
    # which scales them as in training
    new = pl.from_pandas(load_rossi()).head(5).with_row_index("id").select("id", "fin", "age", "prio")
    new.write_parquet(cet_env / "new.parquet")
    assert predict_flow.main(["--dataset", "rossi", "--features", str(cet_env / "new.parquet"),
                              "--out", str(cet_env / "scores.parquet")]) == 0
    from cet_model import load_model

    cet = load_model(cet_env / "models" / "rossi" / "v0002" / "CET", device="cpu")
    assert cet.feature_scaling_ is not None  # age's mean is ~25: scaled inside the model
    np.testing.assert_allclose(pl.read_parquet(cet_env / "scores.parquet")["p_arrest"].to_numpy(),
                               cet.predict_occurrence(new.select("fin", "age", "prio").to_numpy())[:, 0], rtol=1e-6)
    new.write_csv(cet_env / "new.csv")  # the same rows as a CSV file
    assert predict_flow.main(["--dataset", "rossi", "--features", str(cet_env / "new.csv"),
                              "--out", str(cet_env / "scores-csv.parquet")]) == 0
    assert pl.read_parquet(cet_env / "scores-csv.parquet").equals(pl.read_parquet(cet_env / "scores.parquet"))
    # files that cannot be scored: usage errors before any flow starts, naming file, column, row and line
    bad = {"text.csv": new.with_columns(pl.when(pl.col("id") == 2).then(pl.lit("n/a")).otherwise(
               pl.col("age").cast(pl.String)).alias("age")),
           "gap.csv": new.with_columns(pl.when(pl.col("id") == 3).then(None).otherwise(pl.col("age")).alias("age")),
           "twice.csv": new.with_columns(pl.when(pl.col("id") == 4).then(1).otherwise(pl.col("id")).alias("id"))}
    for name, frame in bad.items():
        frame.write_csv(cet_env / name)
    (cet_env / "semi.csv").write_text(new.write_csv(separator=";"))
    (cet_env / "latin.csv").write_bytes(new.write_csv().replace("fin,", "f\u00een,").encode("latin-1"))
    expected = {
        "text.csv": r"column 'age' has type String, expected numbers \(row 2 \(line 4\) is text that is not a number\)",
        "gap.csv": r"column 'age' row 3 \(line 5\): missing or non-finite value \(1 such rows\) \(this model's "
        r"dataset was built without imputation",
        "twice.csv": r"column 'id' row 4 \(line 6\) repeats row 1's id \(2 rows share an id\)",
        "semi.csv": r"the first line reads as one column holding 3 ';': the file seems separated by ';'",
        "latin.csv": r"line 1 is not UTF-8 text \(Latin-1 or Windows-1252",
    }
    for name, message in expected.items():
        with pytest.raises(SystemExit) as exit_:
            predict_flow.main(
                ["--dataset", "rossi", "--features", str(cet_env / name), "--out", str(cet_env / f"{name}.parquet")]
            )
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and re.search(rf"error: --features \S+{name}: {message}", err), (name, err)
        assert not (cet_env / f"{name}.parquet").exists()
