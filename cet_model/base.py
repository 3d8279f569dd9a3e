"""What CET, ET and BC share: parameters, checks, tensors, the fit, scoring and persistence.

``_Base`` is a scikit-learn estimator (and, through ``SurvivalContract``, a scikit-survival one);
each model adds its network, its loss and its predictions (``cet_model.models``,
``cet_model.baselines``).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from . import persistence
from . import rows as streaming
from .comments import CommentInputs, check_spec
from .contract import SurvivalContract, is_structured, refuse_unscorable_search, split_targets, target_summary
from .params import ModelParams, keyword_init
from .recipe import BASELINE_CHANGES, recipe_for
from .rows import DeviceRows, Rows
from .threads import fitting_threads
from .train import TrainConfig, holdout_split, train
from .validation import check_features, check_sample_weight, check_survival, column_names, unobserved_events

_DTYPES = {"float32": torch.float32, "float64": torch.float64}
AUTO_STANDARDIZE = 3.0  # feature scaling: a training column whose |mean| or sd exceeds this is standardised
AUTO_SIGMA_ROWS = 150  # sigma="auto": one log sigma per event below this many training rows, per row from it


def resolve_sigma(sigma: str, n_train: int | None) -> str:
    """The time head's form of log sigma for ``sigma`` (``"auto"``, ``"net"`` or ``"constant"``)
    fitted on ``n_train`` rows: ``"auto"`` is ``"constant"`` below ``AUTO_SIGMA_ROWS`` training
    rows, where a log sigma per row is fitted to noise, and ``"net"`` from there on
    (docs/decisions.md, "Recipe decisions").

    >>> resolve_sigma("auto", 82), resolve_sigma("auto", 276), resolve_sigma("constant", 276)
    ('constant', 'net', 'constant')
    """
    if sigma != "auto":
        return sigma
    if n_train is None:
        raise ValueError('sigma="auto" needs the number of training rows to choose the time head\'s sigma')
    return "constant" if n_train < AUTO_SIGMA_ROWS else "net"


def feature_scaling(x: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(shift, scale) per column of the training features ``x`` (n, k), or None to leave them as
    given: the columns whose training mean or standard deviation exceeds ``AUTO_STANDARDIZE`` in
    absolute value (raw units such as age in years) are standardised; a 0/1 column or one already
    on a unit scale keeps shift 0 and scale 1, so it is used exactly as given (every build in this
    project writes unit-scale features). A constant column keeps scale 1.

        >>> age_and_sex = np.array([[61.0, 0.0], [45.0, 1.0], [70.0, 1.0], [52.0, 0.0]])
        >>> shift, scale = feature_scaling(age_and_sex)
        >>> shift.tolist(), scale.round(2).tolist()
        ([57.0, 0.0], [9.41, 1.0])
        >>> feature_scaling(np.array([[0.1, 1.0], [-0.3, 0.0]])) is None
        True
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape[1] == 0 or len(x) == 0:
        return None
    shift, scale = x.mean(0), x.std(0)
    scale = np.where(scale > 0, scale, 1.0)
    wide = (np.abs(shift) > AUTO_STANDARDIZE) | (scale > AUTO_STANDARDIZE)
    if not wide.any():
        return None
    return np.where(wide, shift, 0.0), np.where(wide, scale, 1.0)  # (x - 0) / 1 is x, exactly


def resolve_device(device: str) -> torch.device:
    """'auto' -> CUDA when present, else CPU. Asking for CUDA without one, or for a device index
    the machine does not have, is a ValueError.

        >>> resolve_device("cpu")
        device(type='cpu')
    """
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ValueError(f"device={device!r} is not 'auto', 'cpu' or 'cuda[:N]'") from None
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device={device!r} is not 'auto', 'cpu' or 'cuda[:N]'")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but no CUDA device is available (torch {torch.__version__}); "
                         "use 'auto' or 'cpu'")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device={device!r} but this machine has {torch.cuda.device_count()} CUDA device(s), "
                         f"cuda:0..cuda:{torch.cuda.device_count() - 1}")
    return dev


def observed_logit(s: np.ndarray, m: np.ndarray | None = None) -> np.ndarray:
    """(M,) logit of each column's share of ones in ``s`` (n, M), masked cells left out, the
    share clipped to [1e-3, 1 - 1e-3]: where ``occurrence_init="observed"`` starts a logit.

        >>> observed_logit(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [1.0, 0.0]])).round(3)
        array([ 1.099, -1.099])
    """
    w = np.ones_like(s) if m is None else m
    return share_logit((s * w).sum(0) / np.maximum(w.sum(0), 1.0))


def share_logit(share: np.ndarray) -> np.ndarray:
    """logit of ``share`` clipped to [1e-3, 1 - 1e-3] (a start for an occurrence logit)."""
    p = np.clip(share, 1e-3, 1 - 1e-3)
    return np.log(p) - np.log1p(-p)


class _Base(SurvivalContract, BaseEstimator):
    """Shared parameters, tensors, chunking and persistence.

    Parameters are the fields of :class:`cet_model.params.ModelParams` (CET: ``CETParams``),
    stored as given (scikit-learn's rule, so ``clone`` and ``set_params`` work) and checked
    when ``fit`` starts.
    """

    _network = None
    _params_class = ModelParams
    __init__ = keyword_init(ModelParams)
    recipe_changes: dict = {}  # a harness preset's changes to the objective's recipe (``with_recipe``)
    own_recipe_changes: dict = BASELINE_CHANGES  # this class's own changes to it (CET: none)

    @classmethod
    def with_recipe(cls, **changes):
        """This estimator with its recipe changed (``cet_model.recipe.Recipe`` fields): a
        subclass, so that ``clone`` and ``set_params`` keep the change. For experiments; the
        product trains with the objective's own recipe.

            >>> from cet_model import CETModel
            >>> CETModel.with_recipe(encoder_stage=False)(seed=1).get_params()["seed"]
            1
        """
        merged = {**cls.recipe_changes, **changes}
        recipe_for("marginal", {k: v for k, v in merged.items() if k != "estimator"})  # checks the fields
        base = next(c for c in cls.__mro__ if "recipe_changes" not in c.__dict__)  # CETModel, ETModel or BCModel
        return type(base.__name__, (cls,), {"recipe_changes": merged, "__module__": cls.__module__,
                                            "__doc__": base.__doc__})

    # --- parameters -------------------------------------------------------------------------
    @property
    def _objective_name(self) -> str:
        return "marginal"  # ET and BC train with the product's recipe

    def _check_params(self) -> None:
        """Validate the parameters as given (``params_``: the checked, frozen copy) and resolve the
        recipe (``recipe_``)."""
        self.params_ = self._params_class(**self.get_params())
        self.recipe_ = recipe_for(self._objective_name, {**self.own_recipe_changes, **self.recipe_changes})
        self.hidden_sizes_ = self.params_.hidden_sizes
        self.comment_encoder_ = self.params_.comment_encoder
        if float(self.dropout) > 0 and self.recipe_.optimizer == "lbfgs":  # a new mask at every evaluation: the line
            # search compares losses of different networks and stops early, silently (tests/test_models.py)
            raise ValueError(f"optimizer='lbfgs' needs dropout=0 (got {self.dropout}): its line search needs the "
                             "same objective at every evaluation, and dropout draws a new mask each time")

    def _config(self) -> TrainConfig:
        return TrainConfig(lr=float(self.lr), batch_size=self.batch_size, max_epochs=self.max_epochs,
                           patience=self.patience, optimizer=self.recipe_.optimizer, verbose=bool(self.verbose),
                           weight_decay=float(self.recipe_.weight_decay), patience_steps=self.recipe_.patience_steps)

    # --- tensors ------------------------------------------------------------------------------
    def _setup(self, n_features: int, n_events: int, n_train: int | None = None, sigma: str | None = None) -> None:
        """Build the network for ``n_features`` and ``n_events``; its time head's sigma is
        ``sigma`` when given (a saved model's), else ``resolve_sigma`` of the parameter for
        ``n_train`` training rows (``sigma_``)."""
        self._check_params()
        self.sigma_ = resolve_sigma(self.recipe_.sigma, n_train) if sigma is None else sigma
        self.device_ = resolve_device(self.device)
        self.torch_dtype_ = _DTYPES[self.recipe_.dtype]
        self.n_features_in_, self.n_events_ = n_features, n_events
        torch.manual_seed(int(self.seed))
        check_spec(self.comment_encoder_, n_features)
        with warnings.catch_warnings():  # an intercept-only model (no features) has 0-wide weights
            warnings.filterwarnings("ignore", "Initializing zero-element tensors is a no-op", UserWarning)
            self.net_ = self._build_network(n_features, n_events)
        self.net_.to(device=self.device_, dtype=self.torch_dtype_)
        self.noise_generator_ = torch.Generator(device=self.device_).manual_seed(int(self.seed) + 1)
        self.shuffle_generator_ = torch.Generator().manual_seed(int(self.seed) + 2)

    def _build_network(self, n_features: int, n_events: int) -> torch.nn.Module:
        return self._network(n_features, n_events, self.hidden_sizes_, float(self.dropout), self.sigma_,
                             comment_encoder=self.comment_encoder_)

    def _tensor(self, a) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(a), dtype=self.torch_dtype_, device=self.device_)

    def _x_tensor(self, a) -> torch.Tensor:
        """Feature rows (k, d) as a tensor, standardised when the model does (its first columns:
        all of them, or the aux features before comment embeddings)."""
        return self._tensor(self._scaled(a))

    def _scaled(self, a) -> np.ndarray:
        scaling = getattr(self, "feature_scaling_", None)
        if scaling is None:
            return a
        shift, scale = scaling
        k = len(shift)
        a = np.array(a, dtype=np.result_type(np.asarray(a).dtype, np.float32))  # a copy; embeddings stay float32
        a[:, :k] = (a[:, :k].astype(np.float64) - shift) / scale  # in float64, rounded once on assignment
        return a

    def _fit_scaling(self, x) -> None:
        if isinstance(x, CommentInputs):
            aux = x.aux
        else:  # with comment embeddings flattened after them, the aux features only
            aux = x if self.comment_encoder_ is None else x[:, :self.comment_encoder_["n_aux"]]
        self.feature_scaling_ = feature_scaling(aux)

    def _check_fitted(self) -> None:
        if getattr(self, "net_", None) is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit() or load() first")

    def _check_columns(self, X, name: str = "X") -> None:
        """A data frame must have the training columns, in the training order. An array after a
        fit on a frame (or a frame after a fit on an array) cannot be checked: a ``UserWarning``
        says so, as scikit-learn's estimators do."""
        names = column_names(X)
        want = getattr(self, "feature_names_in_", None)
        if want is not None and names is None and not isinstance(X, CommentInputs):
            shown = ", ".join(map(str, list(want)[:5])) + (", ..." if len(want) > 5 else "")
            warnings.warn(f"{name} has no column names, but {type(self).__name__} was fitted on a frame "
                          f"with columns [{shown}]: its columns are taken to be in that order",
                          UserWarning, stacklevel=3)
        elif want is None and names is not None and hasattr(self, "n_features_in_"):
            warnings.warn(f"{name} has column names, but {type(self).__name__} was fitted without them: "
                          "they are not checked", UserWarning, stacklevel=3)
        if names is None or want is None:
            return
        want = list(want)
        if names != want:
            missing = [c for c in want if c not in names]
            extra = [c for c in names if c not in want]
            detail = []
            if missing:
                detail.append(f"missing {missing}")
            if extra:
                detail.append(f"not seen in fit {extra}")
            if not detail:
                detail.append(f"in another order than in fit (expected {want})")
            raise ValueError(f"{name}: columns do not match those seen in fit: " + "; ".join(detail))

    def _x(self, X) -> torch.Tensor:
        self._check_fitted()
        self._check_columns(X)
        return self._x_tensor(check_features(X, "X", self.n_features_in_))

    def _chunks(self, n: int, per_row: int):
        step = max(1, streaming.EVAL_ELEMENTS // max(1, per_row))
        for start in range(0, n, step):
            yield slice(start, min(n, start + step))

    def _hidden(self) -> int:
        return max(self.hidden_sizes_, default=2 * self.n_events_)

    def _init_time_bias(self, log_t: np.ndarray) -> None:
        """Start mu at the mean log time of each event, log sigma at log sd: faster, stabler fits."""
        bias = self.net_.decoder.output_bias()
        m = self.n_events_
        with torch.no_grad():
            bias[:m] = self._tensor(log_t.mean(0))
            if self.sigma_ == "net":
                bias[m:] = self._tensor(np.log(log_t.std(0) + 1e-3))
            else:
                self.net_.decoder.log_sigma.copy_(self._tensor(np.log(log_t.std(0) + 1e-3)))

    # --- fitting ------------------------------------------------------------------------------
    _max_events: int | None = None

    def fit(self, X, T, S=None, X_val=None, T_val=None, S_val=None, *, mask=None, mask_val=None, sample_weight=None,
            sample_weight_val=None, on_epoch=None):
        """Fit on n x d features X, n x M times T (> 0) and indicators S (1 = observed), or on X
        and one structured ``y`` in place of T and S (scikit-survival's ``Surv.from_arrays`` for
        one event, ``cet_model.survival_targets`` for several; ``cet_model.contract``).

        X may be an array or a pandas / polars data frame (its column names are kept in
        ``feature_names_in_`` and checked at prediction), or a ``CommentInputs`` (aux features
        and comment embeddings read from disk by rows), read one batch at a time. ``mask`` (n x M, optional): 0 drops
        that cell from the likelihood. Early stopping monitors the validation loss when
        validation data are given; without them the default recipes hold out a fifth of the
        rows (``Recipe.holdout``, at least ``MIN_HOLDOUT_ROWS``; ``n_held_out_`` says how many) and
        watch those, a linear model's (``hidden_sizes=()``) too; with fewer rows, or with L-BFGS,
        the training loss is watched. The best weights are restored.
        ``sample_weight`` (n,): each row's log-likelihood counts that many times (an integer weight
        is the row repeated; case or inverse-probability weights), in training and in the rows held
        out for early stopping; ``sample_weight_val`` weighs given validation rows the same way.
        ``on_epoch(epoch, history)`` is called after every epoch (progress reporting,
        diagnostics). With ``max_epochs=None`` the budget is at least 100 epochs and at least
        5,000 optimizer steps (small data sets get more epochs); a budget that ends while the
        monitored loss still improves raises scikit-learn's ``ConvergenceWarning``.
        """
        names = column_names(X)
        self._check_params()
        refuse_unscorable_search(T, S)
        T, S, event_names = split_targets(T, S)
        if S_val is None and is_structured(T_val):
            T_val, S_val, _ = split_targets(T_val, S_val, ("T_val", "S_val"))
        x, t, s, m = check_survival(X, T, S, max_events=self._max_events, mask=mask)
        w = check_sample_weight(sample_weight, len(x))  # refused before anything else is done
        event_names = event_names or column_names(S) or column_names(T)
        if (empty := unobserved_events(s, m, event_names)) is not None:
            warnings.warn(f"{empty}; the model can learn nothing about such an event beyond that it "
                          "was never seen", UserWarning, stacklevel=2)
        summary = target_summary(t, s, m)  # the event times and horizons of every row given
        self.n_held_out_ = 0
        split = None
        if (all(v is None for v in (X_val, T_val, S_val, mask_val)) and self.recipe_.holdout > 0
                and self.recipe_.optimizer == "adam"):  # L-BFGS fits to convergence: it would not use them
            split = holdout_split(len(x), float(self.recipe_.holdout), int(self.seed))
        if split is not None:  # no validation data: early stopping watches a share of the rows held out
            keep, held = split
            X_val, T_val, S_val, mask_val = x[held], t[held], s[held], None if m is None else m[held]
            sample_weight_val = None if w is None else w[held]
            x, t, s, m, w = x[keep], t[keep], s[keep], None if m is None else m[keep], None if w is None else w[keep]
            self.n_held_out_ = len(held)
        self._setup(x.shape[1], t.shape[1], n_train=len(x))
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.event_names_ = None if event_names is None else [str(e) for e in event_names]
        self.event_times_, self.rmst_horizon_ = summary
        self._fit_scaling(x)
        self._prepare(t, s, m)
        tr = self._tensors(x, t, s, m) + [self._weights(w, len(x), "sample_weight")]

        def batch_loss(idx):
            idx = idx.to(self.device_)
            return self._train_loss(*[a[idx] if a is not None else None for a in tr])

        val_loss, va = None, None
        given = {"X_val": X_val is not None, "T_val": T_val is not None, "S_val": S_val is not None}
        if any(given.values()) and not all(given.values()):
            raise ValueError("validation data need X_val, T_val and S_val together; got "
                             + ", ".join(k for k, v in given.items() if v) + " without "
                             + ", ".join(k for k, v in given.items() if not v))
        if X_val is not None:
            if split is None:
                self._check_columns(X_val, "X_val")
            va = self._tensors(*check_survival(X_val, T_val, S_val, names=("X_val", "T_val", "S_val"),
                                               n_features=x.shape[1], n_events=t.shape[1], mask=mask_val,
                                               mask_name="mask_val"))
            va.append(self._weights(sample_weight_val, len(va[1]), "sample_weight_val" if split is None else
                                    "sample_weight (on the rows held out for early stopping)"))
            val_loss = lambda: self._eval_loss(*va)  # noqa: E731
        with fitting_threads():  # CET_THREADS, else PyTorch's count capped at the usable CPUs (cet_model.threads)
            self.history_ = train(self.net_, batch_loss, len(x), self._config(), self.shuffle_generator_,
                                  val_loss, desc=self._desc(), on_epoch=on_epoch)
            self._after_training(batch_loss, len(x), val_loss, va, on_epoch)
        return self

    def _after_training(self, batch_loss, n_train: int, val_loss, val_tensors, on_epoch) -> None:
        """A further training stage after early stopping, if the model has one (CET's encoder stage);
        ``val_tensors``: the validation rows as ``_tensors`` gives them (None without validation data)."""

    def objective_score(self, X, T, S, mask=None) -> float:
        """The training objective (CET's; ET and BC: the log-likelihood) per row and event, on
        these rows; dropout off. Higher is better. (``score`` is Harrell's C.)"""
        tensors = self._checked_tensors(X, T, S, mask)
        self.net_.eval()
        with torch.no_grad():
            return -self._eval_loss(*tensors)

    def score_samples(self, X, T, S, mask=None) -> np.ndarray:
        """Each row's log-likelihood of its times and indicators, divided by the number of
        events, shape (n,); dropout off. CET: the log marginal likelihood (the occurrences summed
        out, exactly within ``max_patterns``), whatever objective trained the network. A cell the
        mask leaves out adds nothing. Held-out rows' mean is comparable across models of the same
        data (higher is better)."""
        tensors = self._checked_tensors(X, T, S, mask)
        self.net_.eval()
        with torch.no_grad():
            return self._row_loglik_values(*tensors) / self.n_events_

    def _checked_tensors(self, X, T, S, mask) -> list:
        self._check_fitted()
        self._check_columns(X)
        return self._tensors(*check_survival(X, T, S, n_features=self.n_features_in_, n_events=self.n_events_,
                                             mask=mask))

    def _row_loglik_values(self, x, log_t, s, mask) -> np.ndarray:
        """(n,) each row's log-likelihood summed over its events, chunk by chunk."""
        raise NotImplementedError

    def _tensors(self, x, t, s, m) -> list:
        if not isinstance(x, CommentInputs):
            rows = self._x_tensor(x)
        elif DeviceRows.fits(x, self.device_):
            rows = DeviceRows(x, self._scaled, self.torch_dtype_, self.device_)
        else:
            rows = Rows(x, self._x_tensor)
        return [rows] + [self._tensor(a) if a is not None else None for a in (np.log(t), s, m)]

    def _weights(self, weight, n: int, name: str):
        """Row weights as a tensor, mean 1 over these rows (``check_sample_weight``), or None."""
        w = check_sample_weight(weight, n, name)
        return None if w is None else self._tensor(w)

    def _prepare(self, t: np.ndarray, s: np.ndarray, m: np.ndarray | None) -> None:
        """Per-model set-up from the training times (and indicators, mask), after the network is built."""
        self._init_time_bias(np.log(t))

    def _desc(self) -> str:
        return type(self).__name__.removesuffix("Model")

    def _eval_loss(self, x, log_t, s, mask, weight=None) -> float:
        """The mean training loss over all rows (weighted by ``weight``, mean 1), chunk by chunk
        (dropout off)."""
        total = 0.0
        for sl in self._chunks(len(x), x.shape[1]):
            m = mask[sl] if mask is not None else None
            w = weight[sl] if weight is not None else None
            total += self._train_loss(x[sl], log_t[sl], s[sl], m, w).item() * (sl.stop - sl.start)
        return total / len(x)

    # --- persistence --------------------------------------------------------------------------
    def _extra_state(self) -> dict:
        return {}

    def _load_extra_state(self, extra: dict) -> None:
        pass

    def save(self, path) -> Path:
        """Write ``config.json`` and ``weights.safetensors`` (no pickle) into the folder ``path``.
        Files appear whole; a model saved there before is replaced, files of these names that CET
        did not save are refused (``cet_model.persistence``)."""
        return persistence.save(self, path)

    @classmethod
    def load(cls, path, device: str = "auto"):
        """Rebuild a saved model. Refuses folders written by another format or class."""
        return persistence.load(cls, path, device)
