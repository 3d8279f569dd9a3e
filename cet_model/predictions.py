"""CET's predictions: P(ever), and the time head read as a mixture over the other events'
occurrences (the 2^(M-1) patterns with event j, or common-random-number draws), per event: its
quantiles, population survival, restricted mean, or all of them in one pass over the rows
(``predict_all``); and where events compete, the crude cumulative incidence. A mixin of
:class:`cet_model.models.CETModel`."""

from __future__ import annotations

import math

import numpy as np
import torch

from . import losses
from .estimators import all_patterns
from .lognormal import (
    check_q,
    crude_incidence,
    log_horizons,
    log_times,
    mixture_quantile,
    mixture_rmst,
    mixture_survival,
    ndtri,
    non_increasing_in_time,
)
from .rows import streamed


class CETPredictions:
    """The prediction methods of a fitted CET (``net_``, ``n_events_``, ``recipe_``, ``seed``)."""

    @streamed
    def predict_occurrence(self, X) -> np.ndarray:
        """P(event j ever occurs | x), shape (n, M)."""
        x = self._x(X)
        with torch.no_grad():
            return torch.sigmoid(self.net_.encoder(self.net_.features(x))).cpu().numpy().astype(np.float64)

    def _conditional_components(self, h, j: int, u=None, logits=None, every: bool = False):
        """Mixture for T_j given c_j = 1: weights over the other events' c, and (mu, log sigma), from
        the rows' features ``h`` (``net_.features(x)``) and occurrence ``logits`` (``net_.encoder(h)``).

        Exact enumeration of the 2^(M-1) patterns when that is <= n_samples, otherwise
        n_samples hard Monte Carlo draws from the uniforms ``u`` (n_samples, M), the same for
        every row (common random numbers), so that a row's prediction does not depend on the
        other rows scored with it, on its position or on the chunking. Shapes (n, K) each.
        With ``every``: (log_w, c, mu, log sigma), the patterns c and every event's parameters,
        (n, K, M) each; without conditioning c holds the occurrence probabilities (one component).
        """
        m = self.n_events_
        if not self._conditioned:  # T_j does not depend on c: one component
            mu, log_sigma = self.net_.decoder(h)
            if every:  # the occurrences are independent of the times: their probabilities stand for c
                return h.new_zeros((len(h), 1)), torch.sigmoid(logits).unsqueeze(1), mu.unsqueeze(1), \
                    log_sigma.unsqueeze(1)
            return h.new_zeros((len(h), 1)), mu[:, j:j + 1], log_sigma[:, j:j + 1]
        if 2 ** (m - 1) <= int(self.recipe_.n_samples):
            c = all_patterns(m, h)
            c = c[c[:, j] == 1].unsqueeze(0).expand(len(h), -1, -1)  # (n, 2^(M-1), M)
            others = torch.cat([logits[:, :j], logits[:, j + 1:]], dim=1).unsqueeze(1)
            log_w = losses.bernoulli_log_prob(torch.cat([c[..., :j], c[..., j + 1:]], dim=-1), others)
        else:
            k = int(self.recipe_.n_samples)
            c = (u.unsqueeze(0) < torch.sigmoid(logits).unsqueeze(1)).to(h.dtype)  # (n, K, M)
            c[..., j] = 1.0
            log_w = torch.full(c.shape[:2], -math.log(k), dtype=h.dtype, device=h.device)
        mu, log_sigma = self.net_.decoder(h, c)
        if every:
            return log_w, c, mu, log_sigma
        return log_w, mu[..., j], log_sigma[..., j]

    def _per_event(self, X, fn, events=None, every: bool = False) -> list:
        """``fn`` of each event's conditional components, for ``events`` (indices; default all). Per
        chunk of rows the features (a comment encoder's pass) and logits are computed once for all.
        ``fn`` a dict of readers: {name: the list for that reader}, every reader on the same pass.
        ``every``: the components with every event's parameters (``_conditional_components``)."""
        readers = fn if isinstance(fn, dict) else {None: fn}
        x = self._x(X)
        m = self.n_events_
        events = list(range(m) if events is None else events)
        k = min(int(self.recipe_.n_samples), 2 ** (m - 1))
        draws = {j: None for j in events}
        if self._conditioned and 2 ** (m - 1) > int(self.recipe_.n_samples):
            for j in events:  # one draw per event for every row: rows are scored independently of each
                # other, and drawn on the CPU: a model trained on a GPU predicts the same on a CPU
                gen = torch.Generator().manual_seed(int(self.seed) + 4 + j)
                draws[j] = torch.rand((int(self.recipe_.n_samples), m), generator=gen, dtype=x.dtype).to(x.device)
        parts = {(r, j): [] for r in readers for j in events}
        with torch.no_grad():
            for sl in list(self._chunks(len(x), k * self._hidden())) or [slice(0, 0)]:  # no rows: one empty part
                h = self.net_.features(x[sl])
                # never logit(sigmoid(.)): p = 1.0 in float32 gives inf, then NaN
                logits = self.net_.encoder(h) if self._conditioned or every else None
                for j in events:
                    components = self._conditional_components(h, j, draws[j], logits, every)
                    for r, read in readers.items():
                        parts[r, j].append(read(*components, x[sl], j))
        out = {r: [np.concatenate(parts[r, j]) for j in events] for r in readers}
        return out if isinstance(fn, dict) else out[None]

    @streamed
    def predict_time(self, X, q: float = 0.5) -> np.ndarray:
        """The q-quantile of T_j given that event j occurs (c_j = 1), shape (n, M)."""
        check_q(q)
        z = ndtri(q)
        return np.stack(self._per_event(X, lambda lw, mu, ls, x, j: mixture_quantile(lw, mu, ls, z)), 1)

    @streamed
    def predict_survival(self, X, times, event: int | str | None = None) -> np.ndarray:
        """Population survival 1 - p_j + p_j S_j(t | c_j = 1), shape (n, len(times), M); with
        ``event`` (a name or an index) that event's alone, (n, len(times)), computed for it alone.
        Never rises with time (``lognormal.non_increasing_in_time``)."""
        log_grid = log_times(times)
        p = self.predict_occurrence(X)

        def surv(log_w, mu, log_sigma, x, j):
            return mixture_survival(log_w, mu, log_sigma, log_grid)

        if event is not None:
            j = self._event_index(event)
            s_cond = non_increasing_in_time(self._per_event(X, surv, [j])[0], times)  # (n, T)
            return 1.0 - p[:, None, j] + p[:, None, j] * s_cond
        s_cond = non_increasing_in_time(np.stack(self._per_event(X, surv), axis=2), times)  # (n, T, M)
        return 1.0 - p[:, None, :] + p[:, None, :] * s_cond

    @streamed
    def predict_cumulative_incidence(self, X, times, event: int | str, competing=()) -> np.ndarray:
        """P(``event`` happens by t, before every event in ``competing``), shape (n, len(times)):
        its crude cumulative incidence where those events compete with it (the first of them ends
        the follow-up of all, as a status column of several kinds codes them). Read from the model
        as it was fitted, the times independent given x and the occurrences:
        p_j E_c[ integral_0^t f_j(u | c) prod_k (1 - c_k + c_k S_k(u | c)) du ], the mixture over the
        other events' occurrences as ``predict_survival`` takes it. Without ``competing`` it is the
        net risk, ``1 - predict_survival``; with them it is lower. The Aalen-Johansen estimate
        (``cet_model.nonparametric.aalen_johansen_risk``) of the same rows is its check.
        ``competing``: names or indices."""
        j = self._event_index(event)
        others = [self._event_index(k) for k in competing]
        if j in others or len(set(others)) != len(others):
            raise ValueError(f"competing: other events than event {event!r}, each once; got {list(competing)}")
        log_grid = log_times(times)
        p = self.predict_occurrence(X)[:, j]
        cond = self._per_event(X, lambda lw, c, mu, ls, x, k: crude_incidence(lw, c, mu, ls, k, others, log_grid),
                               [j], every=True)[0]
        return p[:, None] * (1.0 - non_increasing_in_time(1.0 - cond, times))

    @streamed
    def predict_rmst(self, X, horizon) -> np.ndarray:
        """Restricted mean event-free time up to ``horizon`` (a time, or (M,) one per event), in
        the population: the area under ``predict_survival`` from 0 to it, (1 - p_j) h_j + p_j
        E[min(T_j, h_j) | c_j = 1], in closed form; shape (n, M). Larger = later or never: the
        ranking by which a cure model's survival is judged (Harrell's C of it, ``ci_rmst`` in
        ``cet_model.evaluation``), where ``predict_time`` ranks only the times of those who have it.
        """
        log_h = log_horizons(horizon, self.n_events_)
        p = self.predict_occurrence(X)
        r_cond = np.stack(self._per_event(X, lambda lw, mu, ls, x, j: mixture_rmst(lw, mu, ls, float(log_h[j]))),
                          axis=1).astype(np.float64)  # (n, M)
        return (1.0 - p) * np.exp(log_h) + p * r_cond

    @streamed
    def predict_all(self, X, quantiles=(0.5,), times=(), rmst_horizons=(), risk_by=None, event_times=None,
                    crude=None) -> dict:
        """Every prediction of a scoring table in one pass of the time head over the rows, where the
        separate calls make one pass each: {"occurrence": ``predict_occurrence``, "time": {q:
        ``predict_time(X, q)``}, "survival": ``predict_survival(X, times)``, "rmst": {h:
        ``predict_rmst(X, h)``}}, the very same values (h one time, or the tuple of one per event),
        with the mixture over the other events' occurrences computed once per chunk of rows instead
        of once per call. With ``risk_by`` ((M,), one time per event) also "risk_by", (n, M): P(event
        j by its own time), ``1 - predict_survival(X, [risk_by[j]])[:, 0, j]``, each event's curve
        read at its time alone. With ``event_times`` (M grids, one per event) also
        "event_survival", {j: ``predict_survival(X, event_times[j], event=j)``}: each event's curve
        on its own grid (an evaluation's Brier times). With ``crude`` ({event index: its competing
        events' indices}) also "crude", {j: ``predict_cumulative_incidence(X, times, j, competing)``}."""
        for q in quantiles:
            check_q(q)
        if event_times is not None and len(event_times) != self.n_events_:
            raise ValueError(f"event_times: one grid per event ({self.n_events_}), got {len(event_times)}")
        log_grids = (None if event_times is None
                     else [log_times(g, f"event_times[{j}]") for j, g in enumerate(event_times)])
        log_grid = log_times(times)
        # a horizon per event, (M,), is keyed by the tuple of its times (an array is not a key)
        log_h = {h if np.ndim(h) == 0 else tuple(np.ravel(h).tolist()): log_horizons(h, self.n_events_)
                 for h in rmst_horizons}
        log_by = None if risk_by is None else log_times(risk_by, "risk_by")
        if log_by is not None and log_by.shape != (self.n_events_,):
            raise ValueError(f"risk_by: one time per event ({self.n_events_}), got {len(log_by)}")
        z = {q: ndtri(q) for q in quantiles}
        readers = {("time", q): (lambda lw, mu, ls, x, j, zq=z[q]: mixture_quantile(lw, mu, ls, zq)) for q in quantiles}
        readers["survival"] = lambda lw, mu, ls, x, j: mixture_survival(lw, mu, ls, log_grid)
        readers |= {("rmst", h): (lambda lw, mu, ls, x, j, lh=lh: mixture_rmst(lw, mu, ls, float(lh[j])))
                    for h, lh in log_h.items()}
        if log_by is not None:
            readers["risk_by"] = lambda lw, mu, ls, x, j: mixture_survival(lw, mu, ls, log_by[j:j + 1])[:, 0]
        if log_grids is not None:
            readers["event_survival"] = lambda lw, mu, ls, x, j: mixture_survival(lw, mu, ls, log_grids[j])
        p = self.predict_occurrence(X)
        parts = self._per_event(X, readers)
        s_cond = non_increasing_in_time(np.stack(parts["survival"], axis=2), times)  # (n, T, M)
        out = {"occurrence": p, "time": {q: np.stack(parts["time", q], 1) for q in quantiles},
               "survival": 1.0 - p[:, None, :] + p[:, None, :] * s_cond,
               "rmst": {h: (1.0 - p) * np.exp(lh) + p * np.stack(parts["rmst", h], 1).astype(np.float64)
                        for h, lh in log_h.items()}}
        if log_by is not None:
            out["risk_by"] = 1.0 - (1.0 - p + p * np.stack(parts["risk_by"], 1))
        if crude:
            out["crude"] = {j: self.predict_cumulative_incidence(X, times, j, competing=others)
                            for j, others in crude.items()}
        if log_grids is not None:
            out["event_survival"] = {
                j: 1.0 - p[:, None, j] + p[:, None, j] * non_increasing_in_time(s_j, event_times[j])
                for j, s_j in enumerate(parts["event_survival"])}
        return out

    def _curve_parts(self, X, j: int):
        p = self.predict_occurrence(X)[:, j]
        parts = self._per_event(X, lambda lw, mu, ls, x, k: torch.stack([lw, mu, ls], -1).cpu().numpy(), [j])[0]
        return p, *(parts[..., i].astype(np.float64) for i in range(3))
