"""The models' parameters, listed once: frozen dataclasses that check themselves.

``CETModel``, ``ETModel`` and ``BCModel`` take exactly these fields as keyword arguments
(their ``__init__`` signatures are generated from them, so scikit-learn's ``get_params``,
``set_params`` and ``clone`` see the same list) and validate them when ``fit`` starts.

    >>> CETParams().objective, CETParams().hidden_sizes
    ('marginal', (100,))
    >>> CETParams(hidden_sizes=[64, 32]).hidden_sizes      # any sequence of widths
    (64, 32)
    >>> CETParams(dropout=1.5)
    Traceback (most recent call last):
    ...
    ValueError: dropout must be in [0, 1), got 1.5
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass

import numpy as np

from .comments import check_spec
from .objectives import resolve


@dataclass(frozen=True)
class ModelParams:
    """What CET, ET and BC share: the layers, the training budget and where it runs.

    Attributes:
        hidden_sizes: hidden layer widths of the occurrence head and the time head; ``()`` gives
            linear models.
        dropout: dropout rate of the hidden layers, in [0, 1).
        lr: Adam's learning rate.
        batch_size: rows per optimizer step; ``None`` is full batch.
        max_epochs, patience: the epoch budget and early stopping's patience; ``None`` sizes both
            to the data (at least 100 epochs and 5,000 optimizer steps, the patience stretched
            alike; ``cet_model.train``).
        comment_encoder: ``{"n_aux", "length", "dim", "width"}`` to read X as [aux | L comment
            embeddings of size D, flattened] (``cet_model.comments``), or None.
        device: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda[:n]"``.
        seed: weights, noise and shuffling.
        verbose: a progress bar per training stage.

    How the network is trained beyond these (the objective's estimator, the starts, the
    stages, the optimizer) is the model's recipe, ``cet_model.recipe.Recipe``.
    """

    hidden_sizes: tuple[int, ...] = (100,)
    dropout: float = 0.5
    lr: float = 1e-3
    batch_size: int | None = 400
    max_epochs: int | None = None
    patience: int | None = None
    comment_encoder: dict | None = None
    device: str = "auto"
    seed: int = 0
    verbose: bool = False

    def __post_init__(self):
        try:
            sizes = tuple(int(h) for h in self.hidden_sizes)
        except (TypeError, ValueError):
            raise ValueError(f"hidden_sizes must be a sequence of positive ints, got {self.hidden_sizes!r}") from None
        if any(h <= 0 for h in sizes):
            raise ValueError(f"hidden_sizes must be positive, got {self.hidden_sizes}")
        object.__setattr__(self, "hidden_sizes", sizes)
        if not 0.0 <= float(self.dropout) < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if not float(self.lr) > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.batch_size is not None and int(self.batch_size) < 1:
            raise ValueError(f"batch_size must be >= 1 or None (full batch), got {self.batch_size}")
        for name in ("max_epochs", "patience"):
            v = getattr(self, name)
            if v is not None and int(v) < 1:
                raise ValueError(f"{name} must be >= 1 or None (automatic), got {v}")
        object.__setattr__(self, "comment_encoder", check_spec(self.comment_encoder))


@dataclass(frozen=True)
class CETParams(ModelParams):
    """CET's own parameters on top of :class:`ModelParams`.

    Attributes:
        objective: ``"marginal"`` (default: the exact log marginal likelihood), ``"paper"`` (the
            original code's objective, which produced the paper's tables, with its recipe) or
            ``"bound"`` (eq. 8 as printed). See :mod:`cet_model.objectives`.
        condition_on_occurrence: the time head reads the occurrences of all M events beside x
            (the default, the paper's model), or x only (one mixture-cure log-normal model per
            event on shared inputs, whose likelihood factorises over the events: several times
            faster). docs/decisions.md ("Recipe decisions") has the evidence.
    """

    objective: str = "marginal"
    condition_on_occurrence: bool = True

    def __post_init__(self):
        super().__post_init__()
        resolve(self.objective)  # refuses an unknown objective, listing them
        if not isinstance(self.condition_on_occurrence, (bool, np.bool_)):  # "false" from a config is truthy
            raise ValueError(f"condition_on_occurrence must be True or False, got {self.condition_on_occurrence!r}")


BCParams = ModelParams  # BC and the oracle: the shared parameters only


def keyword_init(params_class):
    """An ``__init__`` taking exactly ``params_class``'s fields as keywords, stored as given
    (scikit-learn's rule: validation happens in ``fit``). Its signature lists the fields, so
    ``get_params`` and ``clone`` see them."""
    fields = dataclasses.fields(params_class)
    names = {f.name for f in fields}

    def __init__(self, **params):
        unknown = sorted(set(params) - names)
        if unknown:
            from .recipe import Recipe

            recipe = [k for k in unknown if k in {f.name for f in dataclasses.fields(Recipe)}]
            hint = (f"; {recipe} belong to the training recipe: {type(self).__name__}.with_recipe("
                    + ", ".join(f"{k}=..." for k in recipe) + ")(...) (cet_model.recipe)") if recipe else ""
            raise TypeError(f"{type(self).__name__}() got unexpected parameters {unknown}; "
                            f"see {params_class.__module__}.{params_class.__name__}{hint}")
        for f in fields:
            setattr(self, f.name, params.get(f.name, f.default))

    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default) for f in fields])
    __init__.__doc__ = f"Keyword arguments: the fields of {params_class.__name__}."
    return __init__
