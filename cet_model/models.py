"""CET, ET and BC as scikit-learn estimators: fit / predict_* / save / load.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 3))
    >>> T = rng.exponential(size=(200, 2)) + 0.1          # n x M times
    >>> S = (rng.random((200, 2)) < 0.4).astype(float)   # 1 = event observed, 0 = censored
    >>> model = CETModel(hidden_sizes=(8,), max_epochs=3, device="cpu").fit(X, T, S)
    >>> model.predict_occurrence(X).shape, model.predict_time(X).shape
    ((200, 2), (200, 2))
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import warnings
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from . import losses, model_folder
from .atomic import writing
from .comments import CommentInputs, check_spec
from .contract import MAX_GRID, SurvivalContract, is_structured, split_targets, target_summary
from .estimators import MAX_EXACT_EVENTS, Estimate, all_patterns, evaluation_estimate, get_estimator
from .networks import BCNetwork, CETNetwork, ETNetwork
from .objectives import OBJECTIVES, log_epsilon_for
from .params import BCParams, CETParams, ModelParams, keyword_init
from .recipe import RECIPES, Recipe, recipe_for
from .threads import fitting_threads
from .train import TrainConfig, later_stage, train, training_only
from .validation import check_features, check_survival, column_names, unobserved_events

FORMAT, FORMAT_VERSION = model_folder.FORMAT, model_folder.FORMAT_VERSION
_DTYPES = {"float32": torch.float32, "float64": torch.float64}
_EVAL_ELEMENTS = 2**24  # rows x samples x hidden per evaluation chunk (bounds memory)
_DEVICE_SHARE = 0.5  # comment inputs are copied onto a CUDA device when they take at most this share of its free memory
ENCODER_STAGE_PATIENCE = 0.5  # CET's encoder stage: this fraction of the joint stage's patience
AUTO_STANDARDIZE = 3.0  # feature scaling: a training column whose |mean| or sd exceeds this is standardised
AUTO_SIGMA_ROWS = 150  # sigma="auto": one log sigma per event below this many training rows, per row from it
# parameters of earlier versions that a saved model may still name: they only shaped its training
# (the weights mean the same without them) and are dropped when it is loaded
FORMER_TRAINING_PARAMS = ("block_em", "standardize", "shared_first_layer")


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


class _Rows:
    """A ``CommentInputs`` indexed like a tensor: ``rows[idx]`` reads those rows (an index tensor
    or a slice) and returns them as a tensor on the model's device. Training gathers one batch at
    a time through it, evaluation one chunk, so the whole matrix is never in memory."""

    def __init__(self, source: CommentInputs, to_tensor):
        self.source, self.to_tensor = source, to_tensor
        self.shape = source.shape

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index) -> torch.Tensor:
        if isinstance(index, torch.Tensor):
            index = index.cpu().numpy()
        return self.to_tensor(self.source.rows(index))


class _DeviceRows:
    """A ``CommentInputs`` copied onto the model's device once, indexed like ``_Rows``.

    The aux features are scaled as ``_x_tensor`` scales them (float64, rounded once to float32)
    and the comment embeddings keep their stored precision (float16 stays float16, half the
    memory); ``rows[idx]`` gathers on the device and casts there, so a batch costs no host work
    and no copy. The values are those ``_Rows`` gives. Used for CUDA when the inputs take at most
    ``_DEVICE_SHARE`` of the device's free memory (``fits``); a CPU model always streams, so its
    memory stays bounded by a batch."""

    def __init__(self, source: CommentInputs, scale, dtype: torch.dtype, device: torch.device):
        n = len(source)
        self.shape, self.dtype = source.shape, dtype
        self.aux = torch.as_tensor(scale(source.aux), dtype=dtype, device=device)
        self.sequences = torch.empty((n, source.length * source.dim), dtype=self.stored_dtype(source), device=device)
        step = max(1, _EVAL_ELEMENTS // max(1, source.length * source.dim))
        for start in range(0, n, step):
            index = np.arange(start, min(n, start + step))
            block = np.asarray(source.sequences[index]).reshape(len(index), -1)
            self.sequences[start:start + len(index)] = torch.as_tensor(block).to(device)

    @staticmethod
    def stored_dtype(source: CommentInputs) -> torch.dtype:
        return torch.float16 if np.dtype(getattr(source.sequences, "dtype", np.float32)) == np.float16 else torch.float32

    @classmethod
    def fits(cls, source: CommentInputs, device: torch.device) -> bool:
        """Whether the inputs take at most ``_DEVICE_SHARE`` of the CUDA device's free memory."""
        if device.type != "cuda":
            return False
        itemsize = 2 if cls.stored_dtype(source) == torch.float16 else 4
        need = len(source) * (source.length * source.dim * itemsize + source.aux.shape[1] * 8)
        free, _ = torch.cuda.mem_get_info(device)
        return need <= _DEVICE_SHARE * free

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index) -> torch.Tensor:
        if isinstance(index, torch.Tensor):
            index = index.to(self.aux.device)
        return torch.cat([self.aux[index], self.sequences[index].to(self.dtype)], dim=1)


def _streamed(method):
    """Let a prediction method take a ``CommentInputs``: predict it chunk by chunk of
    ``_EVAL_ELEMENTS`` values and concatenate along the rows."""
    @functools.wraps(method)
    def wrapper(self, X, *args, **kwargs):
        if not isinstance(X, CommentInputs):
            return method(self, X, *args, **kwargs)
        self._check_fitted()
        parts = []
        for sl in X.chunks(_EVAL_ELEMENTS):
            try:
                parts.append(method(self, X.rows(sl), *args, **kwargs))
            except ValueError as exc:
                raise ValueError(f"rows {sl.start}..{sl.stop - 1} of X: {exc}") from None
        return np.concatenate(parts, axis=0)
    return wrapper


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

    @classmethod
    def with_recipe(cls, **changes):
        """This estimator with its recipe changed (``cet_model.recipe.Recipe`` fields): a
        subclass, so that ``clone`` and ``set_params`` keep the change. For experiments; the
        product trains with the objective's own recipe.

            >>> CETModel.with_recipe(encoder_stage=False)(seed=1).get_params()["seed"]
            1
        """
        merged = {**cls.recipe_changes, **changes}
        recipe_for("marginal", {k: v for k, v in merged.items() if k != "estimator"})  # checks the fields
        base = next(c for c in cls.__mro__ if c.__name__ in MODELS)
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
        self.recipe_ = recipe_for(self._objective_name, self.recipe_changes)
        self.hidden_sizes_ = self.params_.hidden_sizes
        self.comment_encoder_ = self.params_.comment_encoder
        if float(self.dropout) > 0 and self.recipe_.optimizer == "lbfgs":  # a new mask at every evaluation: the line
            # search compares losses of different networks and stops early, silently (tests/test_models.py)
            raise ValueError(f"optimizer='lbfgs' needs dropout=0 (got {self.dropout}): its line search needs the "
                             "same objective at every evaluation, and dropout draws a new mask each time")

    def _config(self) -> TrainConfig:
        return TrainConfig(lr=float(self.lr), batch_size=self.batch_size, max_epochs=self.max_epochs,
                           patience=self.patience, optimizer=self.recipe_.optimizer, verbose=bool(self.verbose),
                           weight_decay=float(self.recipe_.weight_decay))

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
        step = max(1, _EVAL_ELEMENTS // max(1, per_row))
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

    def fit(self, X, T, S=None, X_val=None, T_val=None, S_val=None, *, mask=None, mask_val=None, on_epoch=None):
        """Fit on n x d features X, n x M times T (> 0) and indicators S (1 = observed), or on X
        and one structured ``y`` in place of T and S (scikit-survival's ``Surv.from_arrays`` for
        one event, ``cet_model.survival_targets`` for several; ``cet_model.contract``).

        X may be an array or a pandas / polars data frame (its column names are kept in
        ``feature_names_in_`` and checked at prediction), or a ``CommentInputs`` (aux features
        and comment embeddings read from disk by rows), read one batch at a time. ``mask`` (n x M, optional): 0 drops
        that cell from the likelihood. Early stopping monitors the validation loss when
        validation data are given (else the training loss); the best weights are restored.
        ``on_epoch(epoch, history)`` is called after every epoch (progress reporting,
        diagnostics). With ``max_epochs=None`` the budget is at least 100 epochs and at least
        5,000 optimizer steps (small data sets get more epochs); a budget that ends while the
        monitored loss still improves raises scikit-learn's ``ConvergenceWarning``.
        """
        names = column_names(X)
        self._check_params()
        T, S, event_names = split_targets(T, S)
        if S_val is None and is_structured(T_val):
            T_val, S_val, _ = split_targets(T_val, S_val, ("T_val", "S_val"))
        x, t, s, m = check_survival(X, T, S, max_events=self._max_events, mask=mask)
        event_names = event_names or column_names(S) or column_names(T)
        if (empty := unobserved_events(s, m, event_names)) is not None:
            warnings.warn(f"{empty}; the model can learn nothing about such an event beyond that it "
                          "was never seen", UserWarning, stacklevel=2)
        self._setup(x.shape[1], t.shape[1], n_train=len(x))
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.event_names_ = None if event_names is None else [str(e) for e in event_names]
        self.event_times_, self.rmst_horizon_ = target_summary(t, s, m)
        self._fit_scaling(x)
        self._prepare(t, s, m)
        tr = self._tensors(x, t, s, m)

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
            self._check_columns(X_val, "X_val")
            va = self._tensors(*check_survival(X_val, T_val, S_val, names=("X_val", "T_val", "S_val"),
                                               n_features=x.shape[1], n_events=t.shape[1], mask=mask_val,
                                               mask_name="mask_val"))
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
        elif _DeviceRows.fits(x, self.device_):
            rows = _DeviceRows(x, self._scaled, self.torch_dtype_, self.device_)
        else:
            rows = _Rows(x, self._x_tensor)
        return [rows] + [self._tensor(a) if a is not None else None for a in (np.log(t), s, m)]

    def _prepare(self, t: np.ndarray, s: np.ndarray, m: np.ndarray | None) -> None:
        """Per-model set-up from the training times (and indicators, mask), after the network is built."""
        self._init_time_bias(np.log(t))

    def _desc(self) -> str:
        return type(self).__name__.removesuffix("Model")

    def _eval_loss(self, x, log_t, s, mask) -> float:
        """The mean training loss over all rows, computed chunk by chunk (dropout off)."""
        total = 0.0
        for sl in self._chunks(len(x), x.shape[1]):
            m = mask[sl] if mask is not None else None
            total += self._train_loss(x[sl], log_t[sl], s[sl], m).item() * (sl.stop - sl.start)
        return total / len(x)

    # --- persistence --------------------------------------------------------------------------
    def _extra_state(self) -> dict:
        return {}

    def _load_extra_state(self, extra: dict) -> None:
        pass

    def save(self, path) -> Path:
        """Write ``config.json`` and ``weights.safetensors`` (no pickle). Files appear whole."""
        self._check_fitted()
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        config = {"format": FORMAT, "format_version": FORMAT_VERSION, "class": type(self).__name__,
                  "params": _jsonable(self.get_params()), "recipe": dataclasses.asdict(self.recipe_),
                  "n_features": self.n_features_in_, "n_events": self.n_events_, "sigma": self.sigma_,
                  "extra": self._extra_state()}
        if hasattr(self, "feature_names_in_"):
            config["feature_names"] = [str(c) for c in self.feature_names_in_]
        if getattr(self, "event_times_", None) is not None:  # what predict and the survival functions need
            config["targets"] = {"names": self.event_names_, "rmst_horizon": self.rmst_horizon_.tolist(),
                                 "event_times": [g.tolist() for g in self.event_times_]}
        if getattr(self, "feature_scaling_", None) is not None:  # JSON floats round-trip exactly
            config["feature_scaling"] = {"shift": self.feature_scaling_[0].tolist(),
                                         "scale": self.feature_scaling_[1].tolist()}
        # a copy of each tensor: safetensors refuses tensors that share memory (a first layer shared by
        # both heads is stored under both names; the network load() builds ties them again)
        state = {k: v.detach().cpu().clone().contiguous() for k, v in self.net_.state_dict().items()}
        weights_tmp, config_tmp = path / "weights.safetensors.tmp", path / "config.json.tmp"
        with writing(path / "weights.safetensors", weights_tmp, config_tmp):
            save_file(state, weights_tmp)
            config_tmp.write_text(json.dumps(config, indent=2))
            os.replace(weights_tmp, path / "weights.safetensors")
            os.replace(config_tmp, path / "config.json")
        return path

    @classmethod
    def load(cls, path, device: str = "auto"):
        """Rebuild a saved model. Refuses folders written by another format or class."""
        config = read_model_config(path)
        if config["class"] != cls.__name__:
            raise ValueError(f"{Path(path) / 'config.json'}: holds a {config['class']}, not a {cls.__name__}")
        params = dict(config["params"], device=device)
        params["hidden_sizes"] = tuple(params["hidden_sizes"])
        cls, params = _saved_recipe(cls, config, params, path)
        unknown = sorted(set(params) - set(cls._get_param_names()))
        if unknown:
            raise ValueError(f"{Path(path) / 'config.json'}: field 'params' has unknown parameters {unknown}")
        model = cls(**params)
        # the form fitted ("auto" resolved); older files: the setting
        sigma = config.get("sigma", (config.get("recipe") or {}).get("sigma", config["params"].get("sigma")))
        if sigma not in ("net", "constant"):
            raise ValueError(f"{Path(path) / 'config.json'}: field 'sigma' must be 'net' or 'constant' (the time head's "
                             f"sigma as fitted), got {sigma!r}")
        n_features, n_events = config["n_features"], config["n_events"]
        weights = Path(path) / "weights.safetensors"
        shapes = model_folder.weight_shapes(weights)  # the header only: nothing allocated yet
        model._check_params()
        model.sigma_ = sigma
        with torch.device("meta"), warnings.catch_warnings():  # the network the config describes, without memory
            warnings.filterwarnings("ignore", "Initializing zero-element tensors is a no-op", UserWarning)
            model_folder.check_shapes(model._build_network(n_features, n_events), shapes, path)
        model._setup(n_features, n_events, sigma=sigma)
        if config.get("feature_names") is not None:
            model.feature_names_in_ = np.asarray(config["feature_names"], dtype=object)
        model.feature_scaling_ = _read_scaling(config, path, n_features)
        model.event_names_, model.event_times_, model.rmst_horizon_ = _read_targets(config, path, n_events)
        try:
            state = load_file(str(weights), device=str(model.device_))
        except Exception as exc:  # safetensors raises its own error type for a damaged file
            raise ValueError(f"{weights}: not a readable safetensors file ({type(exc).__name__}: {exc})") from None
        model_folder.check_finite(state, weights)
        try:
            model.net_.load_state_dict(state)
        except RuntimeError as exc:
            raise ValueError(f"{Path(path) / 'weights.safetensors'}: does not match config.json ({exc})") from None
        model.net_.eval()
        model._load_extra_state(config.get("extra", {}))
        return model


class CETModel(_Base):
    """Conditional event time model: Bernoulli occurrence heads + a log-normal AFT head on [x, c].

    Parameters (keywords; :class:`cet_model.params.CETParams` and ``ModelParams`` check them):

    - ``objective``: ``"marginal"`` (the exact log marginal likelihood), ``"paper"`` (the original
      code's objective and recipe) or ``"bound"`` (eq. 8 as printed).
    - ``condition_on_occurrence``: the time head reads the occurrences of all M events beside x
      (the paper's model), or x only (the default: a mixture-cure log-normal model per event on
      shared inputs).
    - ``hidden_sizes``, ``dropout``: the layers of both heads; ``()`` gives linear models.
    - ``lr``, ``batch_size``, ``max_epochs``, ``patience``: Adam and early stopping on the
      validation objective; ``None`` sizes the budget to the data (>= 100 epochs, >= 5,000 steps).
    - ``comment_encoder``: how to read comment embeddings in X (Reddit), or None.
    - ``device``, ``seed``, ``verbose``.

    Fit with n x M arrays, ``fit(X, T, S)``, or as a scikit-survival estimator, ``fit(X, y)`` with a
    structured ``y``; then ``predict_occurrence`` (P(ever)), ``predict_time``, ``predict_survival``,
    ``predict_rmst``, and scikit-survival's ``predict`` (risk), ``score`` (Harrell's C),
    ``predict_survival_function`` and ``predict_cumulative_hazard_function``
    (:mod:`cet_model.contract`). ``GridSearchCV``, ``cross_val_score`` and a ``Pipeline`` work as is.

    ``CETModel()`` is the product default. How it trains (each event's occurrence logit started at
    its observed share, the occurrence head trained on alone after the joint early stop, one log
    sigma per event below 150 training rows) is its recipe, ``recipe_`` once fitted
    (:mod:`cet_model.recipe`).

    Example:
        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> X = rng.standard_normal((300, 2))
        >>> c = rng.random(300) < 0.5                      # the event ever happens
        >>> t_event = np.exp(0.5 * rng.standard_normal(300))
        >>> cens = rng.uniform(0.1, 3.0, 300)
        >>> S = (c & (t_event < cens)).astype(float)[:, None]
        >>> T = np.where(S[:, 0] == 1, t_event, cens)[:, None]
        >>> model = CETModel(hidden_sizes=(), lr=0.05, max_epochs=300, device="cpu").fit(X, T, S)
        >>> round(float(model.predict_occurrence(X).mean()), 1), model.sigma_   # 300 rows: sigma per row
        (0.5, 'net')
    """

    _network = CETNetwork

    _params_class = CETParams
    __init__ = keyword_init(CETParams)

    @property
    def _objective_name(self) -> str:
        return self.objective

    def _check_params(self) -> None:
        super()._check_params()
        self.objective_, self.estimator_ = self.objective, self.recipe_.estimator
        self.sums_patterns_ = OBJECTIVES[self.objective_].sums_patterns
        self.log_epsilon_ = self.recipe_.log_epsilon

    def _build_network(self, n_features: int, n_events: int) -> torch.nn.Module:
        return CETNetwork(n_features, n_events, self.hidden_sizes_, float(self.dropout), self.sigma_,
                          comment_encoder=self.comment_encoder_,
                          condition_on_occurrence=bool(self.condition_on_occurrence),
                          input_dropout=float(self.recipe_.input_dropout))

    def _prepare(self, t, s, m):
        self._check_lbfgs_rows(s, m)
        super()._prepare(t, s, m)
        if self.recipe_.occurrence_init == "observed":
            with torch.no_grad():
                self.net_.encoder.net[-1].bias.copy_(self._tensor(observed_logit(s, m)))

    def _check_lbfgs_rows(self, s: np.ndarray, m: np.ndarray | None) -> None:
        """L-BFGS's line search needs the same objective at every evaluation: refuse a fit whose
        marginal objective would draw importance samples (rows with 2^free cells > max_patterns)."""
        if (self.recipe_.optimizer != "lbfgs" or not self.sums_patterns_ or not self._conditioned
                or self.n_events_ == 1):
            return
        free = (s < 0.5) if m is None else (s < 0.5) | (m < 0.5)
        sampled = int((np.exp2(free.sum(1)) > int(self.recipe_.max_patterns)).sum())
        if sampled:
            raise ValueError(f"optimizer='lbfgs' needs an objective without sampling, but {sampled} of {len(s)} "
                             f"training rows have more free (censored or masked) cells than max_patterns="
                             f"{self.recipe_.max_patterns} sums exactly (the importance-weighted bound draws samples): "
                             "raise max_patterns, set condition_on_occurrence=False, or use optimizer='adam'")

    def _after_training(self, batch_loss, n_train, val_loss, val_tensors, on_epoch) -> None:
        """The encoder stage (``recipe_.encoder_stage``): from the weights early stopping chose,
        train the occurrence encoder alone (the time decoder and any comment encoder frozen) on the
        same objective, budget and early stopping, with ``ENCODER_STAGE_PATIENCE`` (half) of the
        joint stage's patience. Both heads are then stopped by the validation objective, each at its
        own time: the time head, fitted to continuous times, overfits first, and the joint stop
        otherwise halts the occurrence head while it still improves. Runs only when validation data
        were given and the joint stage stopped early (when its budget ran out the objective was still
        improving and ``ConvergenceWarning`` has said so). Its history is ``encoder_history_`` (None
        when the stage did not run). Where the objective has its closed form (M = 1, or a decoder
        that does not read c), the frozen decoder's terms on the validation rows are computed once
        for the stage (``_frozen_decoder_val_loss``): the same monitored values (to float32 rounding
        when the rows are streamed comment embeddings and sigma is per row)."""
        self.encoder_history_ = None
        if not self.recipe_.encoder_stage or val_loss is None or not self.history_.stopped_early:
            return
        if self._closed_form:
            val_loss = self._frozen_decoder_val_loss(*val_tensors)
        offset = len(self.history_.train_loss)
        shifted = None if on_epoch is None else (lambda epoch, hist: on_epoch(offset + epoch, hist))
        with training_only(self.net_, self.net_.encoder):
            self.encoder_history_ = train(self.net_, batch_loss, n_train, self._encoder_stage_config(n_train),
                                          self.shuffle_generator_,
                                          val_loss, desc=self._desc() + "/encoder", on_epoch=shifted,
                                          start_best=min(self.history_.val_loss))

    def _encoder_stage_config(self, n_train: int) -> TrainConfig:
        """The encoder stage's training configuration: the joint stage's, with its epoch budget
        and ``ENCODER_STAGE_PATIENCE`` of its patience."""
        return later_stage(self._config(), n_train, ENCODER_STAGE_PATIENCE)

    @property
    def _conditioned(self) -> bool:
        return self.net_.decoder.c_proj is not None

    # --- likelihood ---------------------------------------------------------------------------
    def _decode(self, x, c):
        """(mu, log sigma) with shape (n, K, M) for occurrence patterns c (n, K, M)."""
        if self._conditioned:
            return self.net_.decoder(x, c)
        mu, log_sigma = self.net_.decoder(x)
        return mu.unsqueeze(1), log_sigma.unsqueeze(1)

    def _row_loglik(self, x, logits, log_t, s, mask):
        """row_loglik(c, rows=None): c (r, K, M) -> log p(t, s | c, x) summed over events, (r, K)."""
        log_p = torch.nn.functional.logsigmoid(logits)
        cell_loglik = OBJECTIVES[self.objective_].cell

        def row_loglik(c, rows=None):
            def pick(a):
                return a if rows is None or a is None else a[rows]
            mu, log_sigma = self._decode(pick(x), c)
            lt, ss = pick(log_t).unsqueeze(1), pick(s).unsqueeze(1)
            cell = cell_loglik(c, lt, ss, mu, log_sigma, self.log_epsilon_, pick(log_p).unsqueeze(1))
            mk = pick(mask)
            if mk is not None:
                cell = torch.where(mk.unsqueeze(1) > 0.5, cell, torch.zeros_like(cell))
            return cell.sum(-1)
        return row_loglik

    def _proposal(self, x, logits, log_t, s, mask):
        """q_j = p_j S_j / (1 - p_j + p_j S_j) for censored cells (p_j for masked ones), from one
        decoder pass at c = p with observed cells pinned to 1: close to the posterior of c."""
        def proposal(rows):
            with torch.no_grad():
                p = torch.sigmoid(logits[rows])
                c0 = torch.where(s[rows] > 0.5, torch.ones_like(p), p).unsqueeze(1)
                mu, log_sigma = self._decode(x[rows], c0)
                surv = torch.exp(losses.lognormal_log_survival(log_t[rows], mu[:, 0], log_sigma[:, 0]))
                q = p * surv / (1.0 - p + p * surv)
                if mask is not None:
                    q = torch.where(mask[rows] > 0.5, q, p)
                return q
        return proposal

    @property
    def _closed_form(self) -> bool:
        """The objective sums over c in closed form: the marginal likelihood with events
        independent given x (a decoder that does not read c), or with one event."""
        return self.sums_patterns_ and (not self._conditioned or self.n_events_ == 1)

    def _closed_form_decoder(self, h):
        """(mu, log sigma), each (n, M), of the closed form: at c = 1 for a conditioned decoder (M = 1),
        from x alone otherwise. ``h``: the features, (n, d)."""
        if self._conditioned:
            c = torch.ones((len(h), 1, self.n_events_), dtype=h.dtype, device=h.device)
            return tuple(a[:, 0] for a in self.net_.decoder(h, c))
        return self.net_.decoder(h)

    def _estimate(self, x, log_t, s, mask, *, train: bool, generator=None):
        x = self.net_.features(x)
        logits = self.net_.encoder(x)
        if self._closed_form:
            # closed form: the events are independent given x, or M = 1, where the decoder only
            # matters at c = 1 (c = 0 makes an observed event impossible and a censored one certain)
            mu, log_sigma = self._closed_form_decoder(x)
            cell = losses.factorised_marginal_loglik(logits, log_t, s, mu, log_sigma)
            if mask is not None:
                cell = torch.where(mask > 0.5, cell, torch.zeros_like(cell))
            value = cell.sum(-1)
            return Estimate(surrogate=value, value=value)
        row_loglik = self._row_loglik(x, logits, log_t, s, mask)
        recipe = self.recipe_
        kw = dict(n_samples=int(recipe.n_samples), temperature=float(recipe.temperature))
        if self.sums_patterns_:
            free = s < 0.5 if mask is None else (s < 0.5) | (mask < 0.5)
            kw |= dict(free=free, proposal=self._proposal(x, logits, log_t, s, mask),
                       max_patterns=int(recipe.max_patterns), n_samples=int(recipe.importance_samples))
        if train:
            est = get_estimator(self.objective_, self.estimator_)
            return est(logits, row_loglik, generator=self.noise_generator_, **kw)
        kw.pop("temperature")
        return evaluation_estimate(logits, row_loglik, objective=self.objective_, generator=generator, **kw)

    @property
    def _max_events(self):
        if not self.sums_patterns_ and self.estimator_ == "exact":
            return MAX_EXACT_EVENTS
        return None

    def _desc(self) -> str:
        return f"CET/{self.objective_}/{self.estimator_}"

    def _train_loss(self, x, log_t, s, mask):
        return -self._estimate(x, log_t, s, mask, train=True).surrogate.mean() / self.n_events_

    def _eval_loss(self, x, log_t, s, mask) -> float:
        return self._objective_value(x, log_t, s, mask)

    def _objective_value(self, x, log_t, s, mask) -> float:
        """Mean negative objective per row and event, with common random numbers across calls.
        The draws come from a CPU generator on every device: the same model gives the same value
        on a GPU and on a CPU."""
        gen = torch.Generator().manual_seed(int(self.seed) + 3)
        total = 0.0
        for sl in self._objective_chunks(len(x)):
            m = mask[sl] if mask is not None else None
            total += self._estimate(x[sl], log_t[sl], s[sl], m, train=False, generator=gen).value.sum().item()
        return -total / (len(x) * self.n_events_)

    def _row_loglik_values(self, x, log_t, s, mask) -> np.ndarray:
        gen = torch.Generator().manual_seed(int(self.seed) + 3)
        trained = (self.objective_, self.sums_patterns_, self.log_epsilon_)
        self.objective_, self.sums_patterns_, self.log_epsilon_ = "marginal", True, log_epsilon_for("marginal", None)
        try:
            parts = [self._estimate(x[sl], log_t[sl], s[sl], None if mask is None else mask[sl], train=False,
                                    generator=gen).value.cpu().numpy() for sl in self._objective_chunks(len(x))]
        finally:
            self.objective_, self.sums_patterns_, self.log_epsilon_ = trained
        return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)

    def _objective_chunks(self, n: int):
        """The row slices ``_objective_value`` evaluates one at a time (bounded memory: rows x
        patterns or samples x hidden units)."""
        if self.sums_patterns_:
            k = (max(int(self.recipe_.importance_samples) + 1, int(self.recipe_.max_patterns)) if self._conditioned
                 else 1)
        else:
            k = max(int(self.recipe_.n_samples), 2**self.n_events_ if self.n_events_ <= MAX_EXACT_EVENTS else 1)
        return self._chunks(n, self._hidden() * k)

    def _frozen_decoder_val_loss(self, x, log_t, s, mask):
        """``_objective_value`` on these rows for a closed-form objective while only the occurrence
        encoder trains (the encoder stage): the features and the decoder's log density and log
        survival of every cell are computed once, here; each call of the returned function runs
        the encoder alone. Same chunks and operations as ``_objective_value``: the same value to
        the bit, for a fraction of the time on a small fit."""
        parts = []
        with torch.no_grad():
            for sl in self._objective_chunks(len(x)):  # the same slices: the same sums, in the same order
                h = self.net_.features(x[sl])
                mu, log_sigma = self._closed_form_decoder(h)
                lt = log_t[sl]
                parts.append((h, s[sl], losses.lognormal_log_pdf(lt, mu, log_sigma),
                              losses.lognormal_log_survival(lt, mu, log_sigma), None if mask is None else mask[sl]))

        def val_loss() -> float:
            total = 0.0
            for h, ss, log_f, log_surv, mk in parts:
                cell = losses.mixture_cure_loglik(self.net_.encoder(h), ss, log_f, log_surv)
                if mk is not None:
                    cell = torch.where(mk > 0.5, cell, torch.zeros_like(cell))
                total += cell.sum(-1).sum().item()
            return -total / (len(x) * self.n_events_)
        return val_loss

    # --- predictions --------------------------------------------------------------------------
    @_streamed
    def predict_occurrence(self, X) -> np.ndarray:
        """P(event j ever occurs | x), shape (n, M)."""
        x = self._x(X)
        with torch.no_grad():
            return torch.sigmoid(self.net_.encoder(self.net_.features(x))).cpu().numpy().astype(np.float64)

    def _conditional_components(self, x, j: int, u=None):
        """Mixture for T_j given c_j = 1: weights over the other events' c, and (mu, log sigma).

        Exact enumeration of the 2^(M-1) patterns when that is <= n_samples, otherwise
        n_samples hard Monte Carlo draws from the uniforms ``u`` (n_samples, M), the same for
        every row (common random numbers), so that a row's prediction does not depend on the
        other rows scored with it, on its position or on the chunking. Shapes (n, K) each.
        """
        m = self.n_events_
        x = self.net_.features(x)
        if not self._conditioned:  # T_j does not depend on c: one component
            mu, log_sigma = self.net_.decoder(x)
            return x.new_zeros((len(x), 1)), mu[:, j:j + 1], log_sigma[:, j:j + 1]
        logits = self.net_.encoder(x)  # (n, M); never logit(sigmoid(.)): p = 1.0 in float32 gives inf, then NaN
        p = torch.sigmoid(logits)
        if 2 ** (m - 1) <= int(self.recipe_.n_samples):
            c = all_patterns(m, x)
            c = c[c[:, j] == 1].unsqueeze(0).expand(len(x), -1, -1)  # (n, 2^(M-1), M)
            others = torch.cat([logits[:, :j], logits[:, j + 1:]], dim=1).unsqueeze(1)
            log_w = losses.bernoulli_log_prob(torch.cat([c[..., :j], c[..., j + 1:]], dim=-1), others)
        else:
            k = int(self.recipe_.n_samples)
            c = (u.unsqueeze(0) < p.unsqueeze(1)).to(x.dtype)  # (n, K, M)
            c[..., j] = 1.0
            log_w = torch.full(c.shape[:2], -math.log(k), dtype=x.dtype, device=x.device)
        mu, log_sigma = self.net_.decoder(x, c)
        return log_w, mu[..., j], log_sigma[..., j]

    def _per_event(self, X, fn) -> list:
        x = self._x(X)
        m = self.n_events_
        k = min(int(self.recipe_.n_samples), 2 ** (m - 1))
        sampled = self._conditioned and 2 ** (m - 1) > int(self.recipe_.n_samples)
        out = []
        with torch.no_grad():
            for j in range(m):
                u = None
                if sampled:  # one draw per event for every row: rows are scored independently of each
                    # other, and drawn on the CPU: a model trained on a GPU predicts the same on a CPU
                    gen = torch.Generator().manual_seed(int(self.seed) + 4 + j)
                    u = torch.rand((int(self.recipe_.n_samples), m), generator=gen, dtype=x.dtype).to(x.device)
                parts = [fn(*self._conditional_components(x[sl], j, u), x[sl], j)  # no rows: one empty part
                         for sl in list(self._chunks(len(x), k * self._hidden())) or [slice(0, 0)]]
                out.append(np.concatenate(parts))
        return out

    @_streamed
    def predict_time(self, X, q: float = 0.5) -> np.ndarray:
        """The q-quantile of T_j given that event j occurs (c_j = 1), shape (n, M)."""
        _check_q(q)
        z = _ndtri(q)
        return np.stack(self._per_event(X, lambda lw, mu, ls, x, j: _mixture_quantile(lw, mu, ls, z)), 1)

    @_streamed
    def predict_survival(self, X, times) -> np.ndarray:
        """Population survival 1 - p_j + p_j S_j(t | c_j = 1), shape (n, len(times), M)."""
        log_grid = _log_times(times)
        p = self.predict_occurrence(X)

        def surv(log_w, mu, log_sigma, x, j):
            lt = torch.as_tensor(log_grid, dtype=mu.dtype, device=mu.device).view(1, -1, 1)
            log_s = losses.lognormal_log_survival(lt, mu.unsqueeze(1), log_sigma.unsqueeze(1))
            return torch.logsumexp(log_w.unsqueeze(1) + log_s, dim=2).exp().cpu().numpy()

        s_cond = np.stack(self._per_event(X, surv), axis=2)  # (n, T, M)
        return 1.0 - p[:, None, :] + p[:, None, :] * s_cond

    @_streamed
    def predict_rmst(self, X, horizon) -> np.ndarray:
        """Restricted mean event-free time up to ``horizon`` (a time, or (M,) one per event), in
        the population: the area under ``predict_survival`` from 0 to it, (1 - p_j) h_j + p_j
        E[min(T_j, h_j) | c_j = 1], in closed form; shape (n, M). Larger = later or never: the
        ranking by which a cure model's survival is judged (Harrell's C of it, ``ci_rmst`` in
        ``cet_model.evaluation``), where ``predict_time`` ranks only the times of those who have it.
        """
        log_h = _log_horizons(horizon, self.n_events_)
        p = self.predict_occurrence(X)

        def conditional(log_w, mu, log_sigma, x, j):
            return torch.logsumexp(log_w + _lognormal_log_rmst(float(log_h[j]), mu, log_sigma), dim=1).exp().cpu().numpy()

        r_cond = np.stack(self._per_event(X, conditional), axis=1).astype(np.float64)  # (n, M)
        return (1.0 - p) * np.exp(log_h) + p * r_cond

    def _curve_parts(self, X, j: int):
        p = self.predict_occurrence(X)[:, j]
        parts = self._per_event(X, lambda lw, mu, ls, x, k: torch.stack([lw, mu, ls], -1).cpu().numpy())[j]
        return p, *(parts[..., i].astype(np.float64) for i in range(3))


class ETModel(_Base):
    """The ET baseline: a log-normal AFT model on x alone (no occurrence), same layers as CET."""

    _network = ETNetwork

    def _prepare(self, t, s, m):
        self._init_time_bias(np.log(t))
        self.horizon_ = t.max(0)

    def _train_loss(self, x, log_t, s, mask):
        return -self._loglik(x, log_t, s, mask).mean() / self.n_events_

    def _loglik(self, x, log_t, s, mask):
        mu, log_sigma = self.net_.decoder(self.net_.features(x))
        cell = losses.censored_lognormal_loglik(log_t, s, mu, log_sigma)
        if mask is not None:
            cell = torch.where(mask > 0.5, cell, torch.zeros_like(cell))
        return cell.sum(-1)

    def _row_loglik_values(self, x, log_t, s, mask) -> np.ndarray:
        parts = [self._loglik(x[sl], log_t[sl], s[sl], None if mask is None else mask[sl]).cpu().numpy()
                 for sl in self._chunks(len(x), x.shape[1])]
        return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)

    def _params(self, X):
        """(mu, log sigma), each (n, M), detached (with ``sigma="constant"`` log sigma is the
        parameter itself, which ``no_grad`` does not detach)."""
        with torch.no_grad():
            return tuple(a.detach() for a in self.net_.decoder(self.net_.features(self._x(X))))

    @_streamed
    def predict_time(self, X, q: float = 0.5) -> np.ndarray:
        """The q-quantile of T_j: exp(mu + sigma * Phi^-1(q)), shape (n, M)."""
        _check_q(q)
        mu, log_sigma = self._params(X)
        return torch.exp(mu + torch.exp(log_sigma) * _ndtri(q)).cpu().numpy().astype(np.float64)

    @_streamed
    def predict_survival(self, X, times) -> np.ndarray:
        """S_j(t | x), shape (n, len(times), M)."""
        mu, log_sigma = self._params(X)
        lt = torch.as_tensor(_log_times(times), dtype=mu.dtype, device=mu.device).view(1, -1, 1)
        return (losses.lognormal_log_survival(lt, mu.unsqueeze(1), log_sigma.unsqueeze(1)).exp().cpu().numpy()
                .astype(np.float64))  # float64, as CET's

    @_streamed
    def predict_rmst(self, X, horizon) -> np.ndarray:
        """Restricted mean event-free time up to ``horizon`` (a time, or (M,) one per event):
        E[min(T_j, h_j)], the area under ``predict_survival`` from 0 to it, in closed form; (n, M)."""
        log_h = _log_horizons(horizon, self.n_events_)
        mu, log_sigma = self._params(X)
        lh = torch.as_tensor(log_h, dtype=mu.dtype, device=mu.device).view(1, -1)
        return _lognormal_log_rmst(lh, mu, log_sigma).exp().cpu().numpy().astype(np.float64)

    @_streamed
    def predict_occurrence(self, X) -> np.ndarray:
        """P(T_j <= horizon_j), horizon_j = the longest time seen in training for event j.

        ET has no occurrence variable; this is its probability of an event within the
        follow-up seen in training. (The paper scored ET's AUC by the rank of the
        predicted median time instead; see ``cet_model.evaluation``.)
        """
        mu, log_sigma = self._params(X)
        lt = torch.as_tensor(np.log(self.horizon_), dtype=mu.dtype, device=mu.device)
        return (1.0 - losses.lognormal_log_survival(lt, mu, log_sigma).exp()).cpu().numpy().astype(np.float64)

    def _curve_parts(self, X, j: int):
        mu, log_sigma = (a[:, j:j + 1].cpu().numpy().astype(np.float64) for a in self._params(X))
        return np.ones(len(mu)), np.zeros_like(mu), mu, log_sigma

    def _extra_state(self):
        return {"horizon": [float(h) for h in self.horizon_]}

    def _load_extra_state(self, extra):
        self.horizon_ = np.asarray(extra["horizon"], dtype=np.float64)


class BCModel(_Base):
    """The BC baseline: the CET encoder trained as a classifier of the observed indicator s."""

    _network = BCNetwork
    _params_class = BCParams
    __init__ = keyword_init(BCParams)

    def _build_network(self, n_features: int, n_events: int) -> torch.nn.Module:
        return BCNetwork(n_features, n_events, self.hidden_sizes_, float(self.dropout),
                         comment_encoder=self.comment_encoder_, input_dropout=float(self.recipe_.input_dropout))

    def _prepare(self, t, s, m):  # T is accepted (and checked) for a uniform API but not used
        if self.recipe_.occurrence_init == "observed":
            with torch.no_grad():
                self.net_.encoder.net[-1].bias.copy_(self._tensor(observed_logit(s, m)))

    def _train_loss(self, x, log_t, s, mask):
        return self._nll(x, s, mask).mean() / self.n_events_

    def _nll(self, x, s, mask):
        cell = losses.binary_cross_entropy(self.net_.encoder(self.net_.features(x)), s)
        if mask is not None:
            cell = torch.where(mask > 0.5, cell, torch.zeros_like(cell))
        return cell.sum(-1)

    def _row_loglik_values(self, x, log_t, s, mask) -> np.ndarray:
        parts = [-self._nll(x[sl], s[sl], None if mask is None else mask[sl]).cpu().numpy()
                 for sl in self._chunks(len(x), x.shape[1])]
        return np.concatenate(parts).astype(np.float64) if parts else np.zeros(0)

    def predict(self, X) -> np.ndarray:
        """Risk per event: P(s_j = 1 | x) (BC models no times); (n,) for one event, (n, M) for several."""
        p = self.predict_occurrence(X)
        return p[:, 0] if self.n_events_ == 1 else p

    def _curve_parts(self, X, j: int):
        raise TypeError("BCModel models whether an event is observed, not when: it has no survival function")

    @_streamed
    def predict_occurrence(self, X) -> np.ndarray:
        """P(s_j = 1 | x): the probability that event j is *observed*, shape (n, M)."""
        with torch.no_grad():
            return torch.sigmoid(self.net_.encoder(self.net_.features(self._x(X)))).cpu().numpy().astype(np.float64)


MODELS = {"CETModel": CETModel, "ETModel": ETModel, "BCModel": BCModel}


def read_model_config(path) -> dict:
    """Read and check a model folder's config.json (``model_folder.read_config``); errors name the file and the field."""
    return model_folder.read_config(path, MODELS)


def load_model(path, device: str = "auto"):
    """Load any saved CETModel, ETModel or BCModel."""
    return MODELS[read_model_config(path)["class"]].load(path, device=device)


def _saved_recipe(cls, config: dict, params: dict, path) -> tuple[type, dict]:
    """(the class to build, its constructor parameters) of a saved model: its recipe (the field
    ``recipe``; a model saved before the recipe was apart from the parameters names its fields among
    ``params``) becomes ``with_recipe`` changes where it differs from the objective's own, and
    ``FORMER_TRAINING_PARAMS`` are dropped."""
    fields = {f.name for f in dataclasses.fields(Recipe)}
    if not isinstance(config.get("recipe") or {}, dict):
        raise ValueError(f"{Path(path) / 'config.json'}: field 'recipe' must be an object of the recipe's fields")
    saved = dict(config.get("recipe") or {})
    saved.update({k: params.pop(k) for k in list(params) if k in fields})
    for k in FORMER_TRAINING_PARAMS:
        params.pop(k, None)
    if saved.get("occurrence_init") == "km":  # a start only: the weights mean the same
        saved["occurrence_init"] = "observed"
    objective = params.get("objective", "marginal") if cls is CETModel else "marginal"
    if objective not in RECIPES:
        return cls, params  # refused, naming the field, when the parameters are checked
    own = dataclasses.asdict(recipe_for(objective))
    changes = {k: v for k, v in saved.items() if k in own and v != own[k] and not (k == "estimator" and v == "auto")}
    try:
        return (cls.with_recipe(**changes) if changes else cls), params
    except ValueError as exc:
        raise ValueError(f"{Path(path) / 'config.json'}: field 'recipe': {exc}") from None


def _read_scaling(config: dict, path, n_features: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The saved feature scaling (None: the model sees its features as given, as every model
    saved before there was one did)."""
    raw = config.get("feature_scaling")
    if raw is None:
        return None
    try:
        shift, scale = (np.asarray(raw[k], dtype=np.float64) for k in ("shift", "scale"))
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{Path(path) / 'config.json'}: field 'feature_scaling' needs lists 'shift' and "
                         "'scale'") from None
    if not (np.isfinite(shift).all() and np.isfinite(scale).all()):
        raise ValueError(f"{Path(path) / 'config.json'}: field 'feature_scaling' holds a value that is not finite "
                         "(NaN or infinite): the model cannot scale its inputs; retrain it")
    if shift.ndim != 1 or shift.shape != scale.shape or len(shift) > n_features or not (scale > 0).all():
        raise ValueError(f"{Path(path) / 'config.json'}: field 'feature_scaling' does not fit {n_features} "
                         "features (one shift and one scale > 0 per scaled column)")
    return shift, scale


def _read_targets(config: dict, path, n_events: int):
    """The saved event names, survival grids and ``predict``'s horizons (all None for a model
    saved without them: it predicts everything but ``predict`` and the survival functions)."""
    raw = config.get("targets")
    if raw is None:
        return None, None, None
    where = f"{Path(path) / 'config.json'}: field 'targets'"
    try:
        names, horizon, grids = raw["names"], raw["rmst_horizon"], raw["event_times"]
        horizon = np.asarray(horizon, dtype=np.float64)
        if not isinstance(grids, list) or len(grids) != n_events or not all(
                isinstance(g, list) and len(g) <= MAX_GRID for g in grids):
            raise ValueError
        grids = [np.asarray(g, dtype=np.float64).reshape(-1) for g in grids]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{where} needs 'names', 'rmst_horizon' (one per event) and 'event_times' (one list of at "
                         f"most {MAX_GRID} times per event)") from None
    if names is not None and (not isinstance(names, list) or len(names) != n_events
                              or not all(isinstance(n, str) for n in names)):
        raise ValueError(f"{where}: 'names' must list one name per event ({n_events})")
    if horizon.shape != (n_events,) or not all(np.isfinite(a).all() and (a > 0).all() for a in [horizon, *grids]):
        raise ValueError(f"{where}: its times must be finite and > 0, one horizon per event ({n_events})")
    return names, grids, horizon


def _jsonable(params: dict) -> dict:
    """get_params() for config.json: tuples as lists, numpy scalars as Python numbers."""
    out = {}
    for k, v in params.items():
        if isinstance(v, tuple):
            v = [int(h) for h in v]
        elif isinstance(v, np.generic):
            v = v.item()
        out[k] = v
    return out


def _check_q(q: float) -> None:
    if isinstance(q, bool) or not isinstance(q, int | float | np.floating | np.integer):
        raise TypeError(f"q must be one number in (0, 1), got {type(q).__name__} {q!r}; call "
                        "predict_time once per quantile")
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q}")


def _ndtri(q: float) -> float:
    return float(torch.special.ndtri(torch.tensor(q, dtype=torch.float64)))


def _log_times(times) -> np.ndarray:
    """log of a grid of times >= 0 (log 0 = -inf, where every survival curve is 1)."""
    grid = np.asarray(times, dtype=np.float64).reshape(-1)
    if not np.isfinite(grid).all() or (grid < 0).any():
        bad = grid[~(np.isfinite(grid) & (grid >= 0))][0]
        raise ValueError(f"times: must be finite and >= 0; found {float(bad)!r}")
    with np.errstate(divide="ignore"):
        return np.log(grid)


def _log_horizons(horizon, n_events: int) -> np.ndarray:
    """log of ``horizon``: one time > 0 for every event, or (M,) one per event."""
    h = np.asarray(horizon, dtype=np.float64)
    if h.ndim > 1 or (h.ndim == 1 and h.shape[0] != n_events):
        raise ValueError(f"horizon: one time or one per event ({n_events}), got shape {h.shape}")
    h = np.broadcast_to(h, (n_events,))
    if not (np.isfinite(h) & (h > 0)).all():
        raise ValueError(f"horizon: must be finite and > 0, got {h.tolist()}")
    return np.log(h)


def _lognormal_log_rmst(log_h, mu, log_sigma):
    """log E[min(T, h)] for T ~ LogNormal(mu, sigma), elementwise (broadcast):
    exp(mu + sigma^2 / 2) Phi((log h - mu - sigma^2) / sigma) + h (1 - Phi((log h - mu) / sigma)),
    in log space (no overflow for a wide sigma)."""
    sigma = torch.exp(log_sigma)
    z = (log_h - mu) / sigma
    below = mu + 0.5 * sigma ** 2 + torch.special.log_ndtr(z - sigma)
    return torch.logaddexp(below, log_h + torch.special.log_ndtr(-z))


def _mixture_quantile(log_w, mu, log_sigma, z: float, iters: int = 60) -> np.ndarray:
    """q-quantile of sum_k w_k LogNormal(mu_k, sigma_k), by bisection on log t. Shapes (n, K).

    At most ``iters`` halvings; it stops as soon as a halving changes no row's bracket (the
    brackets are then as narrow as the dtype allows, and every later halving would compute the
    same one again), which gives the same result as all ``iters`` in about 25 in float32."""
    sigma = torch.exp(log_sigma)
    weight = torch.exp(log_w)
    comp = mu + sigma * z  # each component's quantile; the mixture's lies between them
    lo, hi = comp.min(1).values, comp.max(1).values
    q = float(torch.special.ndtr(torch.tensor(z, dtype=torch.float64)))
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        cdf = (weight * torch.special.ndtr((mid.unsqueeze(1) - mu) / sigma)).sum(1)
        below = cdf < q
        new_lo, new_hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
        if torch.equal(new_lo, lo) and torch.equal(new_hi, hi):  # a fixed point: the same bracket from now on
            break
        lo, hi = new_lo, new_hi
    return torch.exp(0.5 * (lo + hi)).cpu().numpy().astype(np.float64)
