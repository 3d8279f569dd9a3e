"""CET as a scikit-learn (and scikit-survival) estimator: fit / predict_* / save / load.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 3))
    >>> T = rng.exponential(size=(200, 2)) + 0.1          # n x M times
    >>> S = (rng.random((200, 2)) < 0.4).astype(float)   # 1 = event observed, 0 = censored
    >>> model = CETModel(hidden_sizes=(8,), max_epochs=3, device="cpu").fit(X, T, S)
    >>> model.predict_occurrence(X).shape, model.predict_time(X).shape
    ((200, 2), (200, 2))

The shared estimator is ``cet_model.base``, the baselines ``cet_model.baselines``, the model folder
``cet_model.persistence``.
"""

from __future__ import annotations

import numpy as np
import torch

from . import likelihood, losses, persistence
from .base import (  # noqa: F401
    AUTO_SIGMA_ROWS,
    AUTO_STANDARDIZE,
    _Base,
    observed_logit,
    resolve_device,
    resolve_sigma,
)
from .baselines import BCModel, ETModel
from .estimators import MAX_EXACT_EVENTS, Estimate, evaluation_estimate, get_estimator
from .networks import CETNetwork
from .objectives import OBJECTIVES, log_epsilon_for
from .params import CETParams, keyword_init
from .persistence import FORMAT, FORMAT_VERSION  # noqa: F401
from .predictions import CETPredictions
from .train import TrainConfig, later_stage, train, training_only

ENCODER_STAGE_PATIENCE = 0.5  # CET's encoder stage: this fraction of the joint stage's patience


class CETModel(CETPredictions, _Base):
    """Conditional event time model: Bernoulli occurrence heads + a log-normal AFT head on [x, c].

    Parameters (keywords; :class:`cet_model.params.CETParams` and ``ModelParams`` check them):

    - ``objective``: ``"marginal"`` (the exact log marginal likelihood), ``"paper"`` (the original
      code's objective and recipe) or ``"bound"`` (eq. 8 as printed).
    - ``condition_on_occurrence``: the time head reads the occurrences of all M events beside x
      (the paper's model and the default), or x only (``False``: a mixture-cure log-normal model
      per event on shared inputs).
    - ``hidden_sizes``, ``dropout``: the layers of both heads; ``()`` gives linear models.
    - ``lr``, ``batch_size``, ``max_epochs``, ``patience``: Adam and early stopping on the
      validation objective (given no validation data, on a fifth of the rows held out); ``None``
      sizes the budget to the data (>= 100 epochs, >= 5,000 steps) and the patience (>= 10 epochs
      and >= 200 steps without a gain).
    - ``comment_encoder``: how to read comment embeddings in X (Reddit), or None.
    - ``device``, ``seed``, ``verbose``.

    Fit with n x M arrays, ``fit(X, T, S)``, or as a scikit-survival estimator, ``fit(X, y)`` with a
    structured ``y``; then ``predict_occurrence`` (P(ever)), ``predict_time``, ``predict_survival``,
    ``predict_rmst`` (or all of them in one pass, ``predict_all``), and scikit-survival's ``predict``
    (risk), ``score`` (Harrell's C), ``predict_survival_function`` and
    ``predict_cumulative_hazard_function`` (:mod:`cet_model.contract`). ``GridSearchCV``,
    ``cross_val_score`` and a ``Pipeline`` work as is with the structured ``y``.

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
    own_recipe_changes: dict = {}  # the objective's recipe as declared (cet_model.recipe.RECIPES)

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
    @property
    def _closed_form(self) -> bool:
        """The objective sums over c in closed form: the marginal likelihood with events
        independent given x (a decoder that does not read c), or with one event."""
        return self.sums_patterns_ and (not self._conditioned or self.n_events_ == 1)

    def _estimate(self, x, log_t, s, mask, *, train: bool, generator=None):
        """The objective's estimate on these rows (``cet_model.likelihood`` assembles it)."""
        x = self.net_.features(x)
        logits = self.net_.encoder(x)
        decoder, conditioned = self.net_.decoder, self._conditioned
        if self._closed_form:
            mu, log_sigma = likelihood.closed_form_decoder(decoder, conditioned, self.n_events_, x)
            value = likelihood.closed_form_loglik(logits, log_t, s, mu, log_sigma, mask)
            return Estimate(surrogate=value, value=value)
        row_loglik = likelihood.row_loglik(decoder, conditioned, OBJECTIVES[self.objective_].cell, self.log_epsilon_,
                                           x, logits, log_t, s, mask)
        recipe = self.recipe_
        kw = dict(n_samples=int(recipe.n_samples), temperature=float(recipe.temperature))
        if self.sums_patterns_:
            free = s < 0.5 if mask is None else (s < 0.5) | (mask < 0.5)
            kw |= dict(free=free, proposal=likelihood.proposal(decoder, conditioned, x, logits, log_t, s, mask),
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

    def _train_loss(self, x, log_t, s, mask, weight=None):
        surrogate = self._estimate(x, log_t, s, mask, train=True).surrogate
        return -(surrogate.mean() if weight is None else (surrogate * weight).mean()) / self.n_events_

    def _eval_loss(self, x, log_t, s, mask, weight=None) -> float:
        return self._objective_value(x, log_t, s, mask, weight)

    def _objective_value(self, x, log_t, s, mask, weight=None) -> float:
        """Mean negative objective per row and event (weighted by ``weight``, mean 1), with common
        random numbers across calls. The draws come from a CPU generator on every device: the same
        model gives the same value on a GPU and on a CPU."""
        gen = torch.Generator().manual_seed(int(self.seed) + 3)
        total = 0.0
        for sl in self._objective_chunks(len(x)):
            m = mask[sl] if mask is not None else None
            value = self._estimate(x[sl], log_t[sl], s[sl], m, train=False, generator=gen).value
            total += (value.sum() if weight is None else (value * weight[sl]).sum()).item()
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

    def _frozen_decoder_val_loss(self, x, log_t, s, mask, weight=None):
        """``_objective_value`` on these rows for a closed-form objective while only the occurrence
        encoder trains (the encoder stage): the features and the decoder's log density and log
        survival of every cell are computed once, here; each call of the returned function runs
        the encoder alone. Same chunks and operations as ``_objective_value``: the same value to
        the bit, for a fraction of the time on a small fit."""
        parts = []
        with torch.no_grad():
            for sl in self._objective_chunks(len(x)):  # the same slices: the same sums, in the same order
                h = self.net_.features(x[sl])
                mu, log_sigma = likelihood.closed_form_decoder(self.net_.decoder, self._conditioned, self.n_events_, h)
                lt = log_t[sl]
                parts.append((h, s[sl], losses.lognormal_log_pdf(lt, mu, log_sigma),
                              losses.lognormal_log_survival(lt, mu, log_sigma), None if mask is None else mask[sl],
                              None if weight is None else weight[sl]))

        def val_loss() -> float:
            total = 0.0
            for h, ss, log_f, log_surv, mk, w in parts:
                cell = likelihood.masked(losses.mixture_cure_loglik(self.net_.encoder(h), ss, log_f, log_surv), mk)
                row = cell.sum(-1)
                total += (row.sum() if w is None else (row * w).sum()).item()
            return -total / (len(x) * self.n_events_)
        return val_loss


MODELS = {"CETModel": CETModel, "ETModel": ETModel, "BCModel": BCModel}


def read_model_config(path) -> dict:
    """Read and check a model folder's config.json (``model_folder.read_config``); errors name the file
    and the field."""
    return persistence.read_config(path)


def load_model(path, device: str = "auto"):
    """Load any saved CETModel, ETModel or BCModel."""
    return MODELS[read_model_config(path)["class"]].load(path, device=device)
