"""The models' hyper-parameters, listed once: frozen dataclasses that check themselves.

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
from .objectives import log_epsilon_for, resolve

DTYPES = ("float32", "float64")
OPTIMIZERS = ("adam", "lbfgs")
OCCURRENCE_INITS = ("uniform", "observed", "km")
SIGMAS = ("auto", "net", "constant")


@dataclass(frozen=True)
class ModelParams:
    """What CET, ET and BC share: layers, training and where it runs.

    Attributes:
        hidden_sizes: hidden layer widths of the encoder and the time decoder; ``()`` gives
            linear models.
        sigma: the time head's log sigma: ``"net"`` (from the decoder: one per row and event),
            ``"constant"`` (one per event, as a classical AFT has) or ``"auto"`` (the default:
            ``"constant"`` when the model is fitted on fewer than ``models.AUTO_SIGMA_ROWS`` =
            1,000 training rows, ``"net"`` otherwise; the fitted model's ``sigma_`` says which).
            docs/results.md ("One sigma on small data") has the evidence.
        dropout: dropout rate of the hidden layers, in [0, 1).
        lr, batch_size, optimizer: Adam (default) or L-BFGS settings; ``batch_size=None`` is full batch.
            L-BFGS (full batch, no early stopping) needs ``dropout=0``: its line search needs the same
            objective at every evaluation.
        weight_decay: decoupled weight decay (AdamW) on every parameter, biases included; 0 (default)
            is plain Adam. Refused with L-BFGS.
        max_epochs, patience: ``None`` sizes the budget to the data (>= 100 epochs and >= 5,000
            optimizer steps; patience stretched alike, see ``cet_model.train``).
        device: ``"auto"`` (CUDA when present), ``"cpu"`` or ``"cuda[:n]"``.
        seed: weights, noise and shuffling.
        dtype: ``"float32"`` or ``"float64"``.
        verbose: log every epoch.
        comment_encoder: ``{"n_aux", "length", "dim", "width"}`` to read X as [aux | L comment
            embeddings of size D, flattened] (``cet_model.comments``), or None.
        standardize: centre and scale features by their training mean and standard deviation
            inside the model (kept with its weights, applied at every prediction): ``True``
            (every column), ``False`` (none), or ``"auto"`` (the default: the columns whose
            training mean or standard deviation exceeds ``models.AUTO_STANDARDIZE`` = 3 in
            absolute value, i.e. raw units such as age in years; 0/1 and unit-scale columns, and
            features that are all on a unit scale as every build in this project writes them,
            are used exactly as given). With comment embeddings only the aux features are scaled.
    """

    hidden_sizes: tuple[int, ...] = (100,)
    sigma: str = "auto"
    dropout: float = 0.5
    lr: float = 1e-3
    batch_size: int = 400
    max_epochs: int | None = None
    patience: int | None = None
    optimizer: str = "adam"
    weight_decay: float = 0.0
    device: str = "auto"
    seed: int = 0
    dtype: str = "float32"
    verbose: bool = False
    comment_encoder: dict | None = None
    standardize: bool | str = "auto"

    def __post_init__(self):
        try:
            sizes = tuple(int(h) for h in self.hidden_sizes)
        except (TypeError, ValueError):
            raise ValueError(f"hidden_sizes must be a sequence of positive ints, got {self.hidden_sizes!r}") from None
        if any(h <= 0 for h in sizes):
            raise ValueError(f"hidden_sizes must be positive, got {self.hidden_sizes}")
        object.__setattr__(self, "hidden_sizes", sizes)
        if self.sigma not in SIGMAS:
            raise ValueError(f"sigma must be one of {list(SIGMAS)}, got {self.sigma!r}")
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
        if not float(self.weight_decay) >= 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if float(self.weight_decay) > 0 and self.optimizer == "lbfgs":
            raise ValueError("weight_decay applies to Adam only; optimizer='lbfgs' takes weight_decay=0")
        if float(self.dropout) > 0 and self.optimizer == "lbfgs":  # a new mask at every evaluation: the line
            # search compares losses of different networks and stops early, silently (tests/test_models.py)
            raise ValueError(f"optimizer='lbfgs' needs dropout=0 (got {self.dropout}): its line search needs the "
                             "same objective at every evaluation, and dropout draws a new mask each time")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {list(DTYPES)}, got {self.dtype!r}")
        object.__setattr__(self, "comment_encoder", check_spec(self.comment_encoder))
        if not (self.standardize == "auto" or isinstance(self.standardize, (bool, np.bool_))):
            raise ValueError(f"standardize must be True, False or 'auto', got {self.standardize!r}")


def _check_input_dropout(params) -> None:
    """The occurrence encoder's input dropout: a rate in [0, 1), none with L-BFGS (as ``dropout``)."""
    try:
        rate = float(params.input_dropout)
    except (TypeError, ValueError):
        raise ValueError(f"input_dropout must be a number in [0, 1), got {params.input_dropout!r}") from None
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"input_dropout must be in [0, 1), got {params.input_dropout}")
    if rate > 0 and params.optimizer == "lbfgs":
        raise ValueError(f"optimizer='lbfgs' needs input_dropout=0 (got {params.input_dropout}): its line search "
                         "needs the same objective at every evaluation")


@dataclass(frozen=True)
class CETParams(ModelParams):
    """CET's own hyper-parameters on top of :class:`ModelParams`.

    Attributes:
        objective: ``"marginal"`` (default: the exact log marginal likelihood), ``"paper"``
            (the original code's objective, which produced the paper's tables) or ``"bound"``
            (eq. 8 as printed). See :mod:`cet_model.objectives`.
        estimator: ``"auto"`` (the objective's default) or one the objective accepts:
            ``marginal``: ``exact``, ``importance``; ``paper`` and ``bound``: ``gumbel``,
            ``arm``, ``exact`` (all 2^M patterns, M <= ``estimators.MAX_EXACT_EVENTS``).
        condition_on_occurrence: the time decoder sees [x, c] (the paper's model) or x only
            (the marginal likelihood then factorises over events: O(M) for any M).
        n_samples: samples per row for gumbel and arm, and Monte Carlo draws in predictions.
        temperature: Gumbel-Softmax temperature.
        log_epsilon: log of the penalty eps of ``paper`` and ``bound``; None takes the
            objective's default (log 0.7 and -2).
        max_patterns: per-row budget of the exact marginal sum (2^censored cells); rows beyond
            it use the importance-weighted bound with ``importance_samples`` draws.
        occurrence_init: where the occurrence logits start: ``"observed"`` (the default: each
            event's bias at the logit of its observed share in the training data, a lower bound
            on P(c = 1)), ``"km"`` (at the logit of the Kaplan-Meier plateau 1 - S_KM(max t), the
            classical nonparametric estimate of the share that ever has the event; see
            :func:`cet_model.metrics.kaplan_meier_plateau`) or ``"uniform"`` (PyTorch's default
            layer initialisation, p near 0.5, as the original code started; the default before
            2026-11-24). docs/results.md ("Where the occurrence logits start") has the evidence.
        encoder_stage: after early stopping, train the occurrence encoder alone (time decoder
            frozen at its chosen weights) until the validation objective stops improving again,
            with half the joint stage's patience (``models.ENCODER_STAGE_PATIENCE``, since
            2026-11-25). The default since 2026-11-24; ``False`` stops both heads together, as
            the original code did. Runs only when ``fit`` gets validation data and the joint stage stopped
            early. docs/results.md ("When training stops") has the evidence.
        shared_first_layer: the time decoder's first linear map of x is also read by the
            occurrence encoder, beside a first layer of its own (``networks.OccurrenceEncoder``):
            the observed event times then shape features the occurrence head reads, a multi-task
            remedy for few training rows. Needs a hidden layer. ``False`` (the default) keeps the
            heads apart, as the original code did. With the encoder stage the shared layer keeps
            training there (the time head's first layer with it). docs/results.md ("One first
            layer for both heads") has the evidence.
        input_dropout: dropout rate on the occurrence encoder's inputs (the features, before its
            first layer; the time decoder reads them undropped), in [0, 1); 0 (the default) adds
            none. BC and the oracle take the same option. docs/results.md ("Dropout on the
            encoder's inputs") has the evidence.
        block_em: ``True``: the time head starts at each event's intercept-only mixture-cure
            maximum likelihood (:func:`cet_model.metrics.mixture_cure_fit`: mu and sigma of the
            times of those who ever have the event) instead of the mean log time of every row
            (censored ones counted as if they were event times: early where censoring hides late
            events); the encoder stages run at ``models.BLOCK_EM_STAGE_LR`` = 0.3 of the learning
            rate; and after the encoder stage one round of block EM: the time head fitted again
            alone from that start against the frozen occurrence encoder, then the encoder stage
            again, the round's weights kept only where they lower the validation objective.
            ``False``: none of the three (the default before 2026-12-01). ``"auto"`` (the default):
            ``True`` for the marginal objective with a decoder that reads the occurrences and
            more than one event (a conditioned decoder, where the two heads trade against each
            other), without a shared first layer; ``False`` otherwise (every single-event fit, an
            unconditioned decoder, ``paper`` and ``bound`` as the original code ran them). The
            fitted ``block_em_`` says which. Needs ``encoder_stage=True`` and no shared first
            layer. docs/results.md ("Block EM from the cure fit") has the evidence.
    """

    objective: str = "marginal"
    estimator: str = "auto"
    condition_on_occurrence: bool = True
    n_samples: int = 100
    temperature: float = 0.3
    log_epsilon: float | None = None
    max_patterns: int = 64
    importance_samples: int = 32
    occurrence_init: str = "observed"
    encoder_stage: bool = True
    shared_first_layer: bool = False
    input_dropout: float = 0.0
    block_em: bool | str = "auto"

    def __post_init__(self):
        super().__post_init__()
        _check_input_dropout(self)
        _, estimator = resolve(self.objective, self.estimator)  # refuses an unknown objective or an unsupported pair
        if self.optimizer == "lbfgs" and estimator in ("gumbel", "arm"):
            raise ValueError(f"optimizer='lbfgs' needs an objective without sampling; estimator {estimator!r} "
                             "draws new samples at every evaluation: use estimator='exact' or optimizer='adam'")
        log_epsilon_for(self.objective, self.log_epsilon)
        if int(self.n_samples) < 1 or not float(self.temperature) > 0:
            raise ValueError(f"n_samples must be >= 1 and temperature > 0, got {self.n_samples} and "
                             f"{self.temperature}")
        if self.occurrence_init not in OCCURRENCE_INITS:
            raise ValueError(f"occurrence_init must be one of {list(OCCURRENCE_INITS)}, got {self.occurrence_init!r}")
        for name in ("condition_on_occurrence", "encoder_stage", "shared_first_layer"):  # "false" from a config is truthy
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if not (self.block_em == "auto" or isinstance(self.block_em, (bool, np.bool_))):
            raise ValueError(f"block_em must be True, False or 'auto', got {self.block_em!r}")
        if self.block_em != "auto" and bool(self.block_em) and (self.shared_first_layer or not self.encoder_stage):
            raise ValueError("block_em=True needs encoder_stage=True and shared_first_layer=False (its round refits "
                             f"the time head alone, then runs the encoder stage); got encoder_stage="
                             f"{self.encoder_stage}, shared_first_layer={self.shared_first_layer}")
        if self.shared_first_layer and not self.hidden_sizes:
            raise ValueError("shared_first_layer=True needs a hidden layer: hidden_sizes=() has no first layer to share")
        if int(self.max_patterns) < 1 or int(self.importance_samples) < 1:
            raise ValueError(f"max_patterns and importance_samples must be >= 1, got {self.max_patterns} "
                             f"and {self.importance_samples}")

    @property
    def resolved(self) -> tuple[str, str]:
        """(objective, estimator) with ``"auto"`` replaced by the objective's default."""
        return resolve(self.objective, self.estimator)


@dataclass(frozen=True)
class BCParams(ModelParams):
    """BC's own setting on top of :class:`ModelParams` (the oracle, a BC fitted on the true
    occurrence, shares it).

    Attributes:
        occurrence_init: where the output logits start: ``"observed"`` (the default, as CET's:
            each event's bias at the logit of the share of positive labels in the training data)
            or ``"uniform"`` (PyTorch's default initialisation, p near 0.5; BC's start before
            2026-11-24). With CET started at the observed share, BC starts there too, so that the
            comparison is not decided by the start (``benchmarks/bc_init_probe.py``).
        input_dropout: dropout rate on the encoder's inputs, as CET's (``CETParams.input_dropout``).
    """

    occurrence_init: str = "observed"
    input_dropout: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        _check_input_dropout(self)
        if self.occurrence_init not in ("observed", "uniform"):
            raise ValueError(f"occurrence_init must be one of ['observed', 'uniform'], got {self.occurrence_init!r}")


def keyword_init(params_class):
    """An ``__init__`` taking exactly ``params_class``'s fields as keywords, stored as given
    (scikit-learn's rule: validation happens in ``fit``). Its signature lists the fields, so
    ``get_params`` and ``clone`` see them."""
    fields = dataclasses.fields(params_class)
    names = {f.name for f in fields}

    def __init__(self, **params):
        unknown = sorted(set(params) - names)
        if unknown:
            raise TypeError(f"{type(self).__name__}() got unexpected parameters {unknown}; "
                            f"see {params_class.__module__}.{params_class.__name__}")
        for f in fields:
            setattr(self, f.name, params.get(f.name, f.default))

    __init__.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default) for f in fields])
    __init__.__doc__ = f"Keyword arguments: the fields of {params_class.__name__}."
    return __init__
