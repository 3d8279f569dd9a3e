"""The scikit-survival contract: ``fit(X, y)``, ``predict``, ``score`` and survival functions.

A scikit-survival user passes ``y`` as a structured array of (event indicator, time) pairs;
CET's own form, ``fit(X, T, S)`` with n x M arrays, stays. One event:

    >>> import numpy as np
    >>> from sksurv.util import Surv
    >>> from cet_model import CETModel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((200, 3))
    >>> y = Surv.from_arrays(event=rng.random(200) < 0.6, time=rng.exponential(size=200) + 0.1)
    >>> model = CETModel(hidden_sizes=(8,), max_epochs=3, device="cpu").fit(X, y)
    >>> model.predict(X).shape, 0.0 <= model.score(X, y) <= 1.0
    ((200,), True)
    >>> curves = model.predict_survival_function(X[:2])
    >>> float(curves[0](0.0)), curves[0].x.shape == model.unique_times_.shape
    (1.0, True)

Several events: one (bool, float) pair of fields per event, in order, the event named by its
bool field (``survival_targets`` builds it; ``Surv.from_arrays`` builds a one-event one):

    >>> y2 = survival_targets(event=rng.random((200, 2)) < 0.5, time=rng.exponential(size=(200, 2)) + 0.1,
    ...                       names=["relapse", "death"])
    >>> y2.dtype.names
    ('relapse', 'relapse_time', 'death', 'death_time')
    >>> CETModel(hidden_sizes=(8,), max_epochs=3, device="cpu").fit(X, y2).predict(X).shape
    (200, 2)
"""

from __future__ import annotations

import sys

import numpy as np
from scipy.special import log_ndtr

from .metrics import concordance_index, weighted_concordance_index
from .validation import check_sample_weight

MAX_GRID = 1000  # event times kept per event for the survival functions' grid (quantiles beyond it)
RMST_QUANTILE = 0.9  # ``predict``'s restricted-mean horizon: this quantile of the training follow-up


def is_structured(y) -> bool:
    """Whether ``y`` is a NumPy structured array (scikit-survival's ``Surv`` form)."""
    return getattr(getattr(y, "dtype", None), "names", None) is not None


def survival_targets(event, time, names=None) -> np.ndarray:
    """The structured ``y`` of M events: fields ``name`` (bool) and ``name_time`` (float) for each.

    ``event`` and ``time``: (n,) or (n, M); ``names``: M event names (default ``event_0``, ...).
    """
    e = np.asarray(event)
    t = np.asarray(time, dtype=np.float64)
    e, t = (a.reshape(-1, 1) if a.ndim == 1 else a for a in (e, t))
    if e.shape != t.shape or e.ndim != 2:
        raise ValueError(f"event and time must have the same shape, (n,) or (n, M); got {e.shape} and {t.shape}")
    if not np.isin(e, (0, 1)).all():
        raise ValueError("event: values must be booleans, or 0 and 1")
    names = [f"event_{j}" for j in range(e.shape[1])] if names is None else [str(n) for n in names]
    if len(names) != e.shape[1] or len(set(names)) != len(names):
        raise ValueError(f"names: one distinct name per event ({e.shape[1]}), got {names}")
    y = np.empty(len(e), dtype=[f for n in names for f in ((n, "?"), (f"{n}_time", "<f8"))])
    for j, n in enumerate(names):
        y[n], y[f"{n}_time"] = e[:, j].astype(bool), t[:, j]
    return y


def split_targets(T, S, names=("T", "S")):
    """(T, S, event names) from either form: a structured ``y`` in ``T`` (then ``S`` is None) gives
    (n, M) times and indicators and its event names; arrays are returned as given (names None)."""
    t_name, s_name = names
    if not is_structured(T):
        if S is None:
            raise TypeError(f"{s_name} (the event indicators) is missing: pass {t_name} and {s_name} as n x M "
                            "arrays, or one structured array of (event, time) fields: "
                            "sksurv.util.Surv.from_arrays(event, time) for one event, "
                            "cet_model.survival_targets(event, time, names) for several")
        return T, S, None
    if S is not None:
        raise TypeError(f"{t_name} is a structured array, which holds the event indicators too: pass no {s_name}")
    fields = T.dtype.names
    pairs = list(zip(fields[0::2], fields[1::2], strict=False))  # an odd field is refused below
    if not fields or len(fields) % 2 or not all(
            T.dtype[e].kind == "b" and T.dtype[t].kind in "fiu" for e, t in pairs):
        raise ValueError(f"{t_name}: a structured array needs one (bool event, float time) pair of fields per "
                         f"event, in that order; got fields {list(fields)} of kinds "
                         f"{[T.dtype[f].kind for f in fields]}")
    T_arr = np.stack([np.asarray(T[t], dtype=np.float64) for _, t in pairs], axis=1)
    S_arr = np.stack([np.asarray(T[e], dtype=np.float64) for e, _ in pairs], axis=1)
    return T_arr, S_arr, [e for e, _ in pairs]


def refuse_unscorable_search(T, S) -> None:
    """Refuse ``fit(X, T, S=S)`` inside scikit-learn's cross-validation (``GridSearchCV``,
    ``cross_val_score``, ``cross_validate``): scikit-learn passes ``S`` to ``fit`` only, so every
    candidate's ``score(X, T)`` would fail and the search would rank NaNs. A structured ``y``
    carries the indicators to ``score``; with metadata routing enabled ``S`` can be routed too."""
    if S is None or is_structured(T):
        return
    import sklearn

    if sklearn.get_config().get("enable_metadata_routing"):
        return  # scikit-learn routes S where it is requested, and refuses it where it is not
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "_fit_and_score" and frame.f_globals.get("__name__", "").startswith("sklearn."):
            raise ValueError("T and S given apart inside a scikit-learn search or cross-validation: scikit-learn "
                             "would pass S to fit only, and score(X, T) cannot rank without the event indicators. "
                             "Pass y as one structured array: sksurv.util.Surv.from_arrays(event, time) for one "
                             "event, cet_model.survival_targets(event, time, names) for several")
        frame = frame.f_back


def target_summary(t: np.ndarray, s: np.ndarray, m: np.ndarray | None) -> tuple[list[np.ndarray], np.ndarray]:
    """Per event, from the training rows the mask keeps: the grid of its distinct observed event
    times (at most ``MAX_GRID``, quantiles beyond; its follow-up times when none is observed) and
    the ``RMST_QUANTILE`` quantile of its follow-up (``predict``'s horizon)."""
    grids, horizons = [], []
    for j in range(t.shape[1]):
        keep = np.ones(len(t), bool) if m is None else m[:, j] > 0.5
        tj, sj = t[keep, j], s[keep, j] > 0.5
        if not tj.size:  # the mask drops every cell: the whole follow-up stands in
            tj, sj = t[:, j], s[:, j] > 0.5
        grid = np.unique(tj[sj] if sj.any() else tj)
        if grid.size > MAX_GRID:
            grid = np.unique(np.quantile(grid, np.linspace(0.0, 1.0, MAX_GRID)))
        grids.append(grid)
        horizons.append(float(np.quantile(tj, RMST_QUANTILE)))
    return grids, np.asarray(horizons)


class SurvivalCurve:
    """One row's survival function for one event, exact at any time: 1 - p + p sum_k w_k
    S_LN(t; mu_k, sigma_k) (CET's population survival; ET: p = 1, one component), or its
    cumulative hazard -log S. Like scikit-survival's ``StepFunction``: ``x`` is the grid the
    model keeps (the distinct training event times), ``y`` the values there, and it is called on
    any times >= 0."""

    def __init__(self, p: float, log_w, mu, log_sigma, x: np.ndarray, cumulative_hazard: bool = False):
        self.p, self.log_w, self.mu, self.sigma = float(p), np.asarray(log_w), np.asarray(mu), np.exp(log_sigma)
        self.x, self.cumulative_hazard = x, cumulative_hazard
        # the weights come from float32 and sum to 1 only within its rounding: each value is divided
        # by their own sum (the same reduction at t = 0, so S(0) is 1 and H(0) is 0 exactly)
        self.log_total = np.logaddexp.reduce(self.log_w, axis=-1)

    @property
    def y(self) -> np.ndarray:
        return self(self.x)

    def __call__(self, t) -> np.ndarray:
        t = np.asarray(t, dtype=np.float64)
        if not np.isfinite(t).all() or (t < 0).any():
            raise ValueError("times must be finite and >= 0")
        with np.errstate(divide="ignore"):
            z = (np.log(t)[..., None] - self.mu) / self.sigma
        log_cond = np.logaddexp.reduce(self.log_w + log_ndtr(-z), axis=-1) - self.log_total
        surv = 1.0 - self.p + self.p * np.exp(np.minimum(log_cond, 0.0))
        if not self.cumulative_hazard:
            return surv
        return -np.log(np.maximum(surv, np.finfo(np.float64).tiny))

    def __repr__(self) -> str:
        kind = "cumulative hazard" if self.cumulative_hazard else "survival"
        return f"SurvivalCurve({kind}, p={self.p:.3f}, {len(self.mu)} component(s))"


class SurvivalContract:
    """``predict``, ``score`` and the survival functions of a fitted CET or ET model.

    ``predict(X)``: a risk score per event, higher = earlier or more likely: minus the restricted
    mean event-free time up to ``rmst_horizon_`` (the 0.9 quantile of each event's training
    follow-up), which ranks a cure model's survival where a median time ranks only the times of
    those who have the event. (n,) for one event, (n, M) for several. ``score(X, y)``: Harrell's C
    of ``predict``, averaged over the events, so that ``GridSearchCV`` and ``cross_val_score``
    need no set-up.
    """

    def _event_index(self, event) -> int:
        names = getattr(self, "event_names_", None) or [str(j) for j in range(self.n_events_)]
        if event is None:
            if self.n_events_ == 1:
                return 0
            raise ValueError(f"this model has {self.n_events_} events ({', '.join(names)}): pass event= "
                             "(a name or an index)")
        if isinstance(event, str) and event in names:
            return names.index(event)
        if isinstance(event, int | np.integer) and not isinstance(event, bool) and 0 <= event < self.n_events_:
            return int(event)
        raise ValueError(f"event: {event!r} is none of this model's events ({', '.join(names)}, or "
                         f"0..{self.n_events_ - 1})")

    def _grids(self):
        self._check_fitted()
        if getattr(self, "event_times_", None) is None:
            raise ValueError(f"this {type(self).__name__} was saved without its training times' summary (an earlier "
                             "version): refit it, or rank by predict_rmst(X, horizon)")
        return self.event_times_, self.rmst_horizon_

    @property
    def unique_times_(self) -> np.ndarray:
        """The distinct training event times of the model's one event (scikit-survival's grid);
        ``event_times_[j]`` for event j of several."""
        grids, _ = self._grids()
        if self.n_events_ != 1:
            raise AttributeError(f"unique_times_: this model has {self.n_events_} events; see event_times_[j]")
        return grids[0]

    def predict(self, X) -> np.ndarray:
        """Risk per event, higher = earlier or more likely: minus the restricted mean event-free
        time up to ``rmst_horizon_``; (n,) for one event, (n, M) for several."""
        _, horizon = self._grids()
        risk = -self.predict_rmst(X, horizon)
        return risk[:, 0] if self.n_events_ == 1 else risk

    def score(self, X, y, S=None, sample_weight=None) -> float:
        """Harrell's C of ``predict`` (the mean over events that have a comparable pair); ``y`` a
        structured array, or T with ``S``. With ``sample_weight`` each comparable pair counts the
        product of its rows' weights (``weighted_concordance_index``), as a search that fits with
        weights scores with them."""
        t, s, _ = split_targets(y, S, ("y", "S"))
        t, s = (np.asarray(a, dtype=np.float64).reshape(len(t), -1) for a in (t, s))
        w = check_sample_weight(sample_weight, len(t))
        risk = np.asarray(self.predict(X)).reshape(len(t), -1)
        if t.shape[1] != risk.shape[1]:
            raise ValueError(f"y: {t.shape[1]} events, but the model has {risk.shape[1]}")
        cs = []
        for j in range(t.shape[1]):
            if w is not None:
                c = weighted_concordance_index(t[:, j], -risk[:, j], s[:, j], w)
                cs += [] if np.isnan(c) else [c]
                continue
            try:
                cs.append(concordance_index(t[:, j], -risk[:, j], s[:, j]))
            except ZeroDivisionError:
                continue
        if not cs:
            raise ValueError("y: no comparable pair of rows for any event (every row censored, or all events tied)")
        return float(np.mean(cs))

    def predict_survival_function(self, X, return_array: bool = False, event=None):
        """Each row's survival function for one event (``event``: a name or index, needed with
        several): an array of ``SurvivalCurve`` (callable at any time, ``x`` and ``y`` on the
        training event times, as scikit-survival's ``StepFunction``), or with ``return_array``
        the values at ``event_times_[j]`` (``unique_times_`` for one event), (n, len(grid))."""
        return self._functions(X, return_array, event, cumulative_hazard=False)

    def predict_cumulative_hazard_function(self, X, return_array: bool = False, event=None):
        """As ``predict_survival_function``, for the cumulative hazard -log S(t) (it levels off at
        -log(1 - p) for a cure model: those who never have the event)."""
        return self._functions(X, return_array, event, cumulative_hazard=True)

    def _functions(self, X, return_array, event, cumulative_hazard):
        grids, _ = self._grids()
        j = self._event_index(event)
        p, log_w, mu, log_sigma = self._curve_parts(X, j)
        curves = np.array([SurvivalCurve(p[i], log_w[i], mu[i], log_sigma[i], grids[j], cumulative_hazard)
                           for i in range(len(p))], dtype=object)
        if not return_array:
            return curves
        return np.stack([c(grids[j]) for c in curves]) if len(curves) else np.zeros((0, len(grids[j])))

    def _curve_parts(self, X, j: int):
        """(p (n,), log w, mu, log sigma (n, K)) of event j's population survival."""
        raise NotImplementedError
