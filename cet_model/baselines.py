"""The paper's baselines, with CET's layers: ET (a log-normal AFT model on x, no occurrence) and
BC (the occurrence encoder trained as a classifier of the observed indicator)."""

from __future__ import annotations

import numpy as np
import torch

from . import losses
from .base import _Base, observed_logit
from .lognormal import check_q, log_horizons, log_times, lognormal_log_rmst, ndtri
from .networks import BCNetwork, ETNetwork
from .params import BCParams, keyword_init
from .rows import streamed


class ETModel(_Base):
    """The ET baseline: a log-normal AFT model on x alone (no occurrence), same layers as CET."""

    _network = ETNetwork

    def _prepare(self, t, s, m):
        self._init_time_bias(np.log(t))
        self.horizon_ = t.max(0)

    def _train_loss(self, x, log_t, s, mask, weight=None):
        loglik = self._loglik(x, log_t, s, mask)
        return -(loglik.mean() if weight is None else (loglik * weight).mean()) / self.n_events_

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

    @streamed
    def predict_time(self, X, q: float = 0.5) -> np.ndarray:
        """The q-quantile of T_j: exp(mu + sigma * Phi^-1(q)), shape (n, M)."""
        check_q(q)
        mu, log_sigma = self._params(X)
        return torch.exp(mu + torch.exp(log_sigma) * ndtri(q)).cpu().numpy().astype(np.float64)

    @streamed
    def predict_survival(self, X, times, event: int | str | None = None) -> np.ndarray:
        """S_j(t | x), shape (n, len(times), M); with ``event`` (a name or an index) that event's alone,
        (n, len(times))."""
        mu, log_sigma = self._params(X)
        if event is not None:
            j = self._event_index(event)
            mu, log_sigma = mu[:, j:j + 1], log_sigma[:, j:j + 1]
        lt = torch.as_tensor(log_times(times), dtype=mu.dtype, device=mu.device).view(1, -1, 1)
        s = (losses.lognormal_log_survival(lt, mu.unsqueeze(1), log_sigma.unsqueeze(1)).exp().cpu().numpy()
             .astype(np.float64))  # float64, as CET's
        return s if event is None else s[:, :, 0]

    @streamed
    def predict_rmst(self, X, horizon) -> np.ndarray:
        """Restricted mean event-free time up to ``horizon`` (a time, or (M,) one per event):
        E[min(T_j, h_j)], the area under ``predict_survival`` from 0 to it, in closed form; (n, M)."""
        log_h = log_horizons(horizon, self.n_events_)
        mu, log_sigma = self._params(X)
        lh = torch.as_tensor(log_h, dtype=mu.dtype, device=mu.device).view(1, -1)
        return lognormal_log_rmst(lh, mu, log_sigma).exp().cpu().numpy().astype(np.float64)

    @streamed
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

    def _train_loss(self, x, log_t, s, mask, weight=None):
        nll = self._nll(x, s, mask)
        return (nll.mean() if weight is None else (nll * weight).mean()) / self.n_events_

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

    @streamed
    def predict_occurrence(self, X) -> np.ndarray:
        """P(s_j = 1 | x): the probability that event j is *observed*, shape (n, M)."""
        with torch.no_grad():
            return torch.sigmoid(self.net_.encoder(self.net_.features(self._x(X)))).cpu().numpy().astype(np.float64)
