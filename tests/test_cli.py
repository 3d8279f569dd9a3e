"""One convention for every command line: help on every option, --version, --log-level."""

import argparse
import importlib
import subprocess
import sys

import pytest

FLOW_CLIS = ["flows.mimic", "flows.reddit", "flows.synthetic", "flows.train", "flows.predict",
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


def test_version_prints_the_package_version():
    from flows.lib.infra.cli import package_version

    run = subprocess.run([sys.executable, "-m", "flows.synthetic", "--version"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and package_version() in run.stdout
