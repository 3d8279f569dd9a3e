"""The rows of the real-data benchmark: presets, recipe variants of the default CET, and the
classical fits. Names only (no imports), so that the command line can list them at once."""

from __future__ import annotations

PAPER_ROWS = ("CET", "CET-paper", "ET", "BC", "Oracle")  # protocol a
# --data (a dataset of one's own): CET against the baselines; CET-paper, the original objective, fits in many times
# CET's time (docs/results.md): only when --models names it
OWN_DATA_ROWS = ("CET", "ET", "BC", "Oracle")
NATURAL_ROWS = ("CET", "CET-paper", "ET")  # protocol b, the networks (every seed)
CLASSICAL_ROWS = ("CoxPH", "LogNormalAFT", "RSF")  # protocol b, per event, fitted once

# recipe variants of the default CET for the ablation: {row: CETModel parameters changed}
VARIANTS: dict[str, dict] = {
    "CET/unconditioned": {"condition_on_occurrence": False},
    "CET/no-encoder-stage": {"encoder_stage": False},
    "CET/uniform-init": {"occurrence_init": "uniform"},
    "CET/sigma-net": {"sigma": "net"},
    "CET/sigma-constant": {"sigma": "constant"},
    "CET/input-dropout": {"input_dropout": 0.2},
    # CET with the baselines' patience (10 epochs stretched on small data), and the baselines with CET's
    # (at least 200 optimizer steps)
    "CET/stretched-patience": {"patience_steps": None},
    "ET/patience-200-steps": {"patience_steps": 200},
    # half CET's wait (at least 100 steps): a small cohort's fit is hundreds of epochs and its patience window
    "CET/patience-100-steps": {"patience_steps": 100},
    "BC/patience-200-steps": {"patience_steps": 200},
    # how a fit given no validation data stops (a user's fit(X, y), a search's candidates): on the
    # training loss, or on a fifth of its training rows held out (Recipe.holdout; the rest trains)
    "CET/no-validation": {"validation": None, "holdout": 0.0},
    "CET/holdout-20": {"validation": None, "holdout": 0.2},
    # a larger step: does the default converge as well in fewer steps (a small cohort's fit time)?
    "CET/lr-3e-3": {"lr": 3e-3},
    # the network's size on small cohorts: less dropout, a narrower hidden layer
    "CET/dropout-0.25": {"dropout": 0.25},
    "CET/hidden-32": {"hidden_sizes": (32,)},
    # the linear model (hidden_sizes=()): one log sigma per event, as a classical AFT, or one per row
    "CET/linear-sigma-constant": {"hidden_sizes": (), "sigma": "constant"},
    "CET/linear-sigma-net": {"hidden_sizes": (), "sigma": "net"},
    # the linear model given no validation data: it watches its training loss (with one log sigma per row,
    # or one per event), or a fifth held out
    "CET/linear-no-validation": {"hidden_sizes": (), "validation": None, "holdout": 0.0},
    "CET/linear-no-validation-sigma-constant": {"hidden_sizes": (), "validation": None, "holdout": 0.0,
                                                "sigma": "constant"},
    "CET/linear-holdout-20": {"hidden_sizes": (), "validation": None, "holdout": 0.2},
    # AdamW's decoupled weight decay (about a tenth off the weights over a thousand steps at lr 1e-3)
    "CET/weight-decay-0.1": {"weight_decay": 0.1},
    # smaller mini-batches: more, noisier steps an epoch (the default, 400 rows, is nearly full batch on a small cohort)
    "CET/batch-128": {"batch_size": 128},
    "CET/batch-64": {"batch_size": 64},
    "ET/no-validation": {"validation": None},
    "ET/holdout-20": {"validation": None, "holdout": 0.2},
    "BC/no-validation": {"validation": None},
    "BC/holdout-20": {"validation": None, "holdout": 0.2},
}


def preset_of(row: str) -> tuple[str, dict]:
    """(the ``cet_model.presets`` preset, parameters changed) of a row name: a variant is named
    ``<preset>/<change>``.

    >>> preset_of("CET/holdout-20")
    ('CET', {'validation': None, 'holdout': 0.2})
    >>> preset_of("ET")
    ('ET', {})
    """
    if row in VARIANTS:
        return row.split("/")[0], VARIANTS[row]
    return row, {}
