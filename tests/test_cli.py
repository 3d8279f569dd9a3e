"""One convention for every command line: help on every option, --version, --log-level."""

import argparse
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

FLOW_CLIS = ["flows.mimic", "flows.reddit", "flows.synthetic", "flows.table", "flows.train", "flows.predict",
             "flows.full_pipeline", "flows.serve"]


def parsers_of(module_name: str, monkeypatch) -> list[argparse.ArgumentParser]:
    """The parsers a CLI builds (captured at parse time, nothing runs)."""
    captured = []

    def capture(self, args=None, namespace=None):
        captured.append(self)
        raise SystemExit(0)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    with pytest.raises(SystemExit):
        importlib.import_module(module_name).main([])
    return captured


def options_without_help(parser: argparse.ArgumentParser, name: str) -> list[str]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, sp in action.choices.items():
                out += options_without_help(sp, f"{name} {sub}")
        elif action.option_strings and not action.help and action.dest != "help":
            out.append(f"{name} {action.option_strings[0]}")
    return out


@pytest.mark.parametrize("module_name", FLOW_CLIS + ["cet_experiments.experiments"])
def test_every_option_has_help(module_name, monkeypatch):
    parsers = parsers_of(module_name, monkeypatch)
    assert parsers
    assert [o for p in parsers for o in options_without_help(p, module_name)] == []


@pytest.mark.parametrize("module_name", FLOW_CLIS)
def test_version_and_log_level_everywhere(module_name, monkeypatch):
    (parser,) = parsers_of(module_name, monkeypatch)
    flags = {s for a in parser._actions for s in a.option_strings}
    assert {"--version", "--log-level"} <= flags


def test_the_log_level_setting_is_checked_and_read_from_dot_env(tmp_path, monkeypatch, capsys):
    """``CET_LOG_LEVEL`` in the environment, else in ``.env``, sets the default of ``--log-level``;
    a bad value is a usage error naming the setting, not a traceback from ``logging``."""
    from flows.lib.infra.cli import command_parser

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CET_LOG_LEVEL", "verbose")
    with pytest.raises(SystemExit) as stop:
        command_parser("python -m flows.example", "An example.").parse_args([])
    assert stop.value.code == 2
    assert ("error: argument --log-level: 'verbose' (from --log-level, or else CET_LOG_LEVEL in the environment or "
            ".env): expected one of DEBUG, INFO, WARNING, ERROR") in capsys.readouterr().err
    assert command_parser("p", "d").parse_args(["--log-level", "debug"]).log_level == "DEBUG"  # the option wins
    monkeypatch.delenv("CET_LOG_LEVEL")
    assert command_parser("p", "d").parse_args([]).log_level == "INFO"
    (tmp_path / ".env").write_text("CET_DATA_DIR=d\nCET_LOG_LEVEL=warning\n")
    assert command_parser("p", "d").parse_args([]).log_level == "WARNING"
    monkeypatch.setenv("CET_LOG_LEVEL", "error")  # the environment wins over .env, as for every setting
    assert command_parser("p", "d").parse_args([]).log_level == "ERROR"


def test_version_prints_the_package_version(capsys):
    """In-process (a subprocess paid Prefect's import, 6 s, for the same parser); the ``python -m``
    entry points themselves run in the slow tests (the main job, the wheel)."""
    from flows.lib.infra.cli import package_version

    with pytest.raises(SystemExit) as stop:
        importlib.import_module("flows.synthetic").main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"python -m flows.synthetic (cet {package_version()})"


@pytest.mark.bad_input
@pytest.mark.parametrize(("module_name", "argv", "message"), [
    ("flows.train", ["evaluate", "--dataset", "x", "--data", "{missing}"], "--data {missing}: no such folder"),
    ("flows.train", ["evaluate", "--dataset", "x", "--data", "{empty}"],
     "--data {empty}: missing manifest.json, features.parquet, events.parquet; not a dataset folder"),
    ("flows.mimic", ["build", "--mimic-dir", "{file}", "--out", "{empty}/out"], "--mimic-dir {file}: not a folder"),
    ("flows.reddit", ["build", "--dumps", "{empty}", "{missing}", "--out", "{empty}/out"],
     "--dumps {missing}: no such folder"),
    ("flows.predict", ["--features", "{missing}", "--out", "{empty}/s.parquet"], "--features {missing}: no such file"),
    ("flows.predict", ["--dumps", "{file}", "--out", "{empty}/s.parquet"], "--dumps {file}: not a folder"),
    ("flows.train", ["evaluate", "--dataset", "mimic"], "no dataset at {empty}/mimic (the default folder for "
     "--dataset mimic): build it first (python -m flows.mimic build) or give its folder with --data"),
    ("flows.train", ["evaluate", "--dataset", "trial7"],
     "no dataset at {empty}/trial7 (the default folder for --dataset trial7): give its folder with --data"),
])
def test_paths_are_checked_before_any_flow_starts(module_name, argv, message, tmp_path, capsys, monkeypatch):
    """A mistyped path is a usage error (exit 2, the flag and the path named) before Prefect starts."""
    monkeypatch.setenv("CET_DATA_DIR", str(tmp_path / "empty"))  # where datasets are looked for by name
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    where = {k: str(tmp_path / k) for k in ("missing", "empty", "file")}
    with pytest.raises(SystemExit) as exit_info:
        importlib.import_module(module_name).main([a.format(**where) for a in argv])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith("error: " + message.format(**where))


def test_a_bad_parameter_is_a_usage_error_not_a_traceback(capsys):
    from flows import synthetic

    with pytest.raises(SystemExit) as exit_info:
        synthetic.main(["--n", "-5"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == ("python -m flows.synthetic: error: --n: Input should be greater than or equal to "
                                    "100, got -5")
    # a rule over several values, and an option whose flag is not its field's name: said without pydantic's dump
    from flows.lib import commands, flow_params

    ap = commands.predict()
    with pytest.raises(ValueError, match=r"^quantiles must be a non-empty list of numbers in \(0, 1\), got \[1\.5\]$"):
        commands.params(ap.parse_args(["--out", "s.csv", "--quantiles", "1.5"]), flow_params.PredictParams)
    with pytest.raises(ValueError, match=r"^--model-version: Input should be a valid string, got 7$"):
        commands.params(ap.parse_args(["--out", "s.csv"]), flow_params.PredictParams, version=7)


@pytest.mark.bad_input
@pytest.mark.parametrize(("module_name", "argv"), [
    ("flows.train", ["evaluate"]), ("flows.train", ["retrain"]), ("flows.train", ["versions"]),
    ("flows.predict", ["--features", "{file}", "--out", "{out}"]),
])
def test_no_dataset_named_is_an_error_listing_those_there_are(module_name, argv, tmp_path, capsys, monkeypatch):
    """No command trains, scores or registers under a dataset the user did not name."""
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.delenv("CET_RETRAIN_DATASET", raising=False)
    monkeypatch.setenv("CET_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CET_MODELS_DIR", str(tmp_path / "models"))
    (tmp_path / "data" / "cohort-a").mkdir(parents=True)
    (tmp_path / "data" / "cohort-a" / "manifest.json").write_text("{}")
    (tmp_path / "models" / "trial7").mkdir(parents=True)
    (tmp_path / "rows.csv").write_text("id,age\n1,50\n")
    where = {"file": str(tmp_path / "rows.csv"), "out": str(tmp_path / "scores.parquet")}
    with pytest.raises(SystemExit) as exit_info:
        importlib.import_module(module_name).main([a.format(**where) for a in argv])
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no dataset named: pass --dataset NAME (or set CET_RETRAIN_DATASET)" in last
    assert f"datasets in {tmp_path / 'data'}: cohort-a" in last and f"models in {tmp_path / 'models'}: trial7" in last
    assert not (tmp_path / "models" / "mimic").exists() and not (tmp_path / "scores.parquet").exists()


REPO = Path(__file__).resolve().parents[1]
HEAVY = ("prefect", "torch", "polars", "sklearn", "duckdb", "pandas")


@pytest.mark.parametrize("command", ["synthetic", "mimic build", "reddit generate", "table", "train evaluate",
                                     "train explain", "predict", "serve", "full_pipeline"])
def test_help_answers_before_prefect_and_torch_load(command, monkeypatch):
    """``--help`` is the parser's own help, printed before any heavy library is imported (well under
    a second: the flow modules import Prefect, PyTorch and polars only after their options parse)."""
    from flows.lib import commands

    module, *sub = command.split()
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", f"flows.{module}", *sub, "--help"],
                         capture_output=True, text=True, cwd=REPO, env={**os.environ, "COLUMNS": "100"}, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    ap = getattr(commands, module)()
    if sub:
        ap = next(a for a in ap._subparsers._group_actions[0].choices.values() if a.prog.endswith(sub[0]))
    monkeypatch.setenv("COLUMNS", "100")
    assert out.stdout == ap.format_help()


@pytest.mark.parametrize("sub", [[], ["real"], ["synthetic"], ["merge"]])
def test_the_harness_help_answers_before_torch_and_pandas_load(sub, monkeypatch):
    """``python -m cet_experiments [real] --help`` parses from names alone (cet_experiments.cli)."""
    from cet_experiments import cli

    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "cet_experiments", *sub, "--help"],
                         capture_output=True, text=True, cwd=REPO, env={**os.environ, "COLUMNS": "100"}, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    monkeypatch.setenv("COLUMNS", "100")
    ap = cli.real_parser() if sub == ["real"] else cli.experiments_parser()
    if sub and sub != ["real"]:
        ap = ap._subparsers._group_actions[0].choices[sub[0]]
    assert out.stdout == ap.format_help()
    assert "CET/holdout-20" in cli.real_parser().format_help() and "lymph_node" in cli.real_parser().format_help()


def test_the_names_a_command_line_offers_are_the_presets():
    from cet_model.choices import PAPER_PRESETS, PRESET_NAMES
    from cet_model.presets import PRESETS

    assert tuple(PRESETS) == PRESET_NAMES and set(PAPER_PRESETS) <= set(PRESETS)


def test_a_usage_error_answers_before_prefect_and_torch_load():
    argv = ["--table", "t.csv", "--name", "c", "--event", "d=days,died", "--time-unit", "days", "--no-such-option"]
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "flows.table", *argv],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 2 and "unrecognized arguments: --no-such-option" in out.stderr
    assert " prefect" not in out.stderr and " torch" not in out.stderr


@pytest.mark.parametrize(("argv", "said"), [
    (["--out", "s.txt"], "give a file name ending in .parquet or .csv"),
    (["--out", "s.csv"], "--features {missing}: no such file"),
    (["--out", "s.csv", "--features", "{table}", "--rmst"], "--rmst needs --horizons"),
    (["--out", "s.csv", "--features", "{table}", "--model-version", "v0009"], "v0009"),
])
def test_predicts_usage_errors_answer_before_prefect_and_torch_load(argv, said, tmp_path):
    """A wrong output name, a missing input, ``--rmst`` without horizons and an unknown model
    version are usage errors raised before the flow module's imports (``scores_file.check_command``)."""
    (tmp_path / "t.csv").write_text("id,x\n1,0.5\n")
    (tmp_path / "models" / "cohort").mkdir(parents=True)
    names = {"missing": str(tmp_path / "none.csv"), "table": str(tmp_path / "t.csv")}
    argv = [a.format(**names) for a in argv]
    if "--features" not in argv and "s.csv" in argv:
        argv += ["--features", names["missing"]]
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "flows.predict", "--dataset", "cohort", *argv],
                         capture_output=True, text=True, cwd=tmp_path, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO), "CET_MODELS_DIR": str(tmp_path / "models"),
                              "CET_DATA_DIR": str(tmp_path / "data")})
    assert out.returncode == 2, out.stderr[-2000:]
    assert said.format(**names) in out.stderr, out.stderr[-2000:]
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


FLOW_OPTIONS = [("synthetic", None, "SyntheticParams"), ("mimic", "build", "MimicBuildParams"),
                ("reddit", "build", "RedditBuildParams"), ("table", None, "TableBuildParams"),
                ("train", "evaluate", "TrainEvaluateParams"), ("train", "retrain", "RetrainParams"),
                ("predict", None, "PredictParams"), ("full_pipeline", None, "FullPipelineParams")]


def flow_parser(command: str, sub: str | None) -> argparse.ArgumentParser:
    from flows.lib import commands

    ap = getattr(commands, command)()
    return ap._subparsers._group_actions[0].choices[sub] if sub else ap


@pytest.mark.parametrize(("command", "sub", "model"), FLOW_OPTIONS)
def test_a_flows_options_are_its_parameter_fields_declared_once(command, sub, model):
    """Each option of a command that starts a flow is made from a field of the flow's parameter
    model: the same name, the field's description as its help, nothing declared beside it; and
    parsing no options gives the model's own defaults."""
    from flows.lib import commands, flow_params

    cls = getattr(flow_params, model)
    ap = flow_parser(command, sub)
    shared = {"-h", "--version", "--log-level"}
    options = {a.dest: a for a in ap._actions if a.option_strings and not shared & set(a.option_strings)}
    assert set(options) == set(cls.model_fields)
    for name, field in cls.model_fields.items():
        assert options[name].help.replace("%%", "%").startswith(field.description), name
    required = [a for a in options.values() if a.required]
    if not required:
        assert commands.params(ap.parse_args([]), cls) == cls()


def test_options_parse_into_the_flows_parameters(tmp_path):
    from flows.lib import commands, flow_params

    ap = flow_parser("predict", None)
    args = ap.parse_args(["--features", "f.parquet", "--out", "s.parquet", "--quantiles", "0.2, 0.8",
                          "--horizons", "7,30", "--rmst", "--model-version", "v0003"])
    assert commands.params(args, flow_params.PredictParams) == flow_params.PredictParams(
        features="f.parquet", out="s.parquet", quantiles=[0.2, 0.8], horizons=[7.0, 30.0], rmst=True, version="v0003")
    one, two = (ap.parse_args(["--dumps", *d, "--out", "s.parquet"]) for d in (["a"], ["a", "b"]))
    assert commands.params(one, flow_params.PredictParams).dumps == "a"  # one folder: the field's single form
    assert commands.params(two, flow_params.PredictParams).dumps == ["a", "b"]
    table = flow_parser("table", None).parse_args(["--table", "t.csv", "--name", "c", "--event", "death=days,died",
                                                   "--event", "relapse = t_rel , rel", "--time-unit", "days",
                                                   "--categorical", "sex,site"])
    params = commands.params(table, flow_params.TableBuildParams, events=commands.events(table.events))
    assert params.events == {"death": ("days", "died"), "relapse": ("t_rel", "rel")}
    assert params.categorical == ["sex", "site"] and params.features is None
    alone = flow_parser("table", None).parse_args(["--table", "t.csv", "--name", "c", "--event", "d=t,s",
                                                   "--time-unit", "days", "--categorical", "site"])
    assert commands.params(alone, flow_params.TableBuildParams, events={"d": ("t", "s")}).categorical == ["site"]
    with pytest.raises(ValueError, match="an event name is given twice"):
        commands.events([("d", ("a", "b")), ("d", ("c", "e"))])


@pytest.mark.parametrize(("module_name", "argv", "message"), [
    ("flows.predict", ["--features", "f.parquet", "--out", "s.parquet", "--quantiles", "0.1,half"],
     "argument --quantiles: '0.1,half' is not a comma-separated list of floats"),
    ("flows.reddit", ["build", "--comment-end", "2017-13", "--out", "ds"], "--comment-end: String should match pattern "
     "'^\\d{4}-(0[1-9]|1[0-2])$', got '2017-13'"),
    ("flows.full_pipeline", ["--datasets", "synthetic,cohort"],
     "--datasets: Input should be 'synthetic', 'mimic' or 'reddit', got 'cohort'"),
])
def test_a_bad_option_is_a_usage_error_naming_it(module_name, argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        importlib.import_module(module_name).main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
