"""The runnable examples in the model library's docstrings (objectives, losses, estimators,
training budget, models) run and print what they say."""

import doctest

import pytest

from cet_model import estimators, losses, models, objectives, train


@pytest.mark.parametrize("module", [objectives, losses, estimators, train, models], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
