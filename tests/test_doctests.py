"""Every runnable example in a docstring (model library, experiment harness, flows' plain
functions) runs and prints what it says; every public class and function of the model
library has a docstring."""

import doctest
import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _modules_with_examples():
    found = []
    for top in ("cet_model", "cet_experiments", "flows/lib"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if ">>>" in path.read_text():
                rel = path.relative_to(ROOT).with_suffix("")
                found.append(".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts))
    return found


EXAMPLES = _modules_with_examples()


def test_the_model_library_has_examples():
    for name in (
        "cet_model.models",
        "cet_model.base",
        "cet_model.contract",
        "cet_model.threads",
        "cet_model.objectives",
        "cet_model.losses",
        "cet_model.estimators",
        "cet_model.train",
        "cet_model.evaluation",
        "cet_model.metrics",
        "cet_model.dataset",
    ):
        assert name in EXAMPLES, f"{name}: no runnable example in its docstrings"


@pytest.mark.parametrize("name", EXAMPLES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_public_model_api_has_docstrings():
    missing = []
    for path in sorted((ROOT / "cet_model").glob("*.py")):
        if path.name.startswith("_"):
            continue
        mod = importlib.import_module(f"cet_model.{path.stem}")
        for name, obj in vars(mod).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and not inspect.getdoc(obj):
                missing.append(f"{mod.__name__}.{name}")
    assert missing == []
