"""Named model presets (the rows of every table) and one fit of a preset on a dataset's splits.

The production flow (``flows/train.py``) and the experiment harness (``cet_experiments``) both
fit through ``fit_preset`` and score through ``cet_model.evaluation.evaluate``.

Presets (``PRESETS``):

- ``CET``: the product default, ``CETModel()`` -- the exact log marginal likelihood (observed
  cells pinned, censored cells summed), a time head conditioned on the occurrences of all M
  events, occurrence logits started at each event's observed share, Adam lr 1e-3, automatic
  budget, early stopping per head (the occurrence head trained on alone after the joint stop).
- ``CET-paper``: the paper's model as the original code trained it (Gumbel-Softmax, tau 0.3,
  100 samples, penalty -log eps - log p with eps = 0.7, Adam lr 3e-4, logits started near 0,
  one joint early stop): what produced Tables 3-5.
- ``CET-bound``: eq. 8 exactly as printed (penalty -log eps, log eps = -2), otherwise as CET-paper.
- ``CET-unconditioned``: the default with a time head on x alone (``condition_on_occurrence=False``).
- ``CET-marginal``: the default with the marginal likelihood summed over every pattern of every
  row (no importance sampling: the reference for the per-row budget).
- ``CET-uniform-init``: the default with the occurrence logits started near 0, p = 0.5: the
  ablation of the start.
- ``ET``: same AFT head, no occurrence; its AUC is scored as in the paper, by the rank of the
  predicted median time (an earlier time = a higher score).
- ``BC``: the occurrence encoder trained as a classifier of s. AUC and ECE only.
- ``Oracle``: the same classifier trained on the true occurrence c (the paper's Figure 1).
- ``CET-Gumbel``, ``CET-ARM``, ``CET-exact``: the paper's objective with each estimator.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .dataset import Split
from .estimators import MAX_EXACT_EVENTS
from .evaluation import model_inputs
from .models import BCModel, CETModel, ETModel
from .recipe import Recipe

PAPER_CET = dict(objective="paper", lr=3e-4)  # its recipe: recipe.RECIPES["paper"]
# name: (estimator class, its parameters); a class ``with_recipe`` is a recipe variant (experiments only)
PRESETS: dict[str, tuple[type, dict]] = {
    "CET": (CETModel, {}),
    "CET-paper": (CETModel, PAPER_CET),
    "CET-bound": (CETModel, dict(PAPER_CET, objective="bound")),
    "CET-unconditioned": (CETModel, dict(condition_on_occurrence=False)),
    "CET-marginal": (CETModel.with_recipe(max_patterns=2**MAX_EXACT_EVENTS), {}),
    "CET-uniform-init": (CETModel.with_recipe(occurrence_init="uniform"), {}),
    "ET": (ETModel, {}),
    "BC": (BCModel, {}),
    "Oracle": (BCModel, {}),
    "CET-Gumbel": (CETModel, PAPER_CET),
    "CET-exact": (CETModel.with_recipe(estimator="exact"), PAPER_CET),
    "CET-ARM": (CETModel.with_recipe(estimator="arm"), PAPER_CET),
}
PRESET_OF_ESTIMATOR = {"gumbel": "CET-Gumbel", "arm": "CET-ARM", "exact": "CET-exact"}
# What a version trains where the truth is known: the product default, the baselines and the Oracle.
# CET-paper trails CET on every real cohort at several times its fit time (docs/decisions.md), so it
# joins the paper's comparison (experiment reports, cet_experiments) and any run that names it.
DEFAULT_PRESETS = ("CET", "ET", "BC", "Oracle")
RECIPE_FIELDS = frozenset(f.name for f in dataclasses.fields(Recipe))
COMMENT_WIDTH = 100  # per-comment layer width when the dataset has sequences (Reddit)


def check_presets(names) -> tuple[str, ...]:
    """The names as a tuple; an unknown one is a ValueError listing the presets."""
    names = tuple(names)
    unknown = [m for m in names if m not in PRESETS]
    if unknown:
        raise ValueError(f"unknown models {unknown}; choose from {sorted(PRESETS)}")
    return names


def unknown_occurrence(split: Split) -> int:
    """How many cells of ``split`` (those the mask uses) have no known true occurrence (C NaN).

    >>> c = np.array([[1.0, np.nan], [0.0, np.nan]])
    >>> unknown_occurrence(Split(np.arange(2), np.zeros((2, 1)), c, c, c, c))
    2
    """
    unknown = np.isnan(split.C)
    if split.mask is not None:
        unknown &= split.mask == 1
    return int(unknown.sum())


def presets_for_truth(names, train: Split, val: Split | None) -> tuple[tuple[str, ...], dict[str, str]]:
    """The presets of ``names`` that can be trained on these splits, and {left-out preset: why}.

    The Oracle learns the true occurrence, so it is left out where a training or validation
    cell does not have it (data censored by follow-up alone); every other preset learns from
    the observed times and indicators and is always kept.
    """
    unknown = unknown_occurrence(train) + (unknown_occurrence(val) if val is not None else 0)
    if "Oracle" not in names or unknown == 0:
        return tuple(names), {}
    why = (f"the true occurrence is not known for {unknown} training and validation cells, and the Oracle "
           "learns it")
    return tuple(n for n in names if n != "Oracle"), {"Oracle": why}


def comment_encoder_for(split: Split, width: int = COMMENT_WIDTH) -> dict | None:
    """The ``comment_encoder`` parameter for a dataset with sequences (None without)."""
    if split.sequences is None:
        return None
    _, length, dim = split.sequences.shape
    return {"n_aux": split.X.shape[1], "length": length, "dim": dim, "width": width}


def fit_preset(name: str, train: Split, val: Split | None, *, seed: int = 0, hidden_sizes=(100,),
               max_epochs: int | None = None, patience: int | None = None, params: dict | None = None,
               x_train: np.ndarray | None = None, x_val: np.ndarray | None = None, on_epoch=None, **model_params):
    """Fit preset ``name`` on ``train`` with early stopping on ``val`` (None: as the model stops
    given no validation data, ``Recipe.holdout``); returns the fitted model.

    ``params`` overrides the preset's parameters (e.g. a search's choice), ``model_params``
    adds others (e.g. ``device``); fields of ``cet_model.recipe.Recipe`` among them change the
    model's recipe (``with_recipe``). The Oracle learns the true occurrence c, the others the
    observed indicators s. ``x_train``/``x_val``: the model inputs when already computed.
    """
    cls, preset = PRESETS[check_presets([name])[0]]
    kwargs = dict(preset, **(params or {}), **model_params)
    hidden_sizes = kwargs.pop("hidden_sizes", hidden_sizes)  # a variant's or a search's width wins
    patience = kwargs.pop("patience", patience)  # and its patience
    changes = {k: kwargs.pop(k) for k in list(kwargs) if k in RECIPE_FIELDS}
    if changes:  # a recipe variant (an experiment's ablation or search)
        cls = cls.with_recipe(**changes)
    kwargs.setdefault("comment_encoder", comment_encoder_for(train))
    model = cls(hidden_sizes=hidden_sizes, max_epochs=max_epochs, patience=patience, seed=seed, **kwargs)
    x_train = model_inputs(train) if x_train is None else x_train
    left_out = presets_for_truth([name], train, val)[1]
    if left_out:
        raise ValueError(f"Oracle: {left_out['Oracle']}; leave it out on such data")
    # (a cell the mask leaves out may have no truth: it is not learned from, so any 0/1 does)
    y_train = np.nan_to_num(train.C) if name == "Oracle" else train.S
    if val is None:
        return model.fit(x_train, train.T, y_train, mask=train.mask, on_epoch=on_epoch)
    x_val = model_inputs(val) if x_val is None else x_val
    y_val = np.nan_to_num(val.C) if name == "Oracle" else val.S
    return model.fit(x_train, train.T, y_train, x_val, val.T, y_val, mask=train.mask, mask_val=val.mask,
                     on_epoch=on_epoch)
