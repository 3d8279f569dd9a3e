"""The real-data benchmark: published multi-event cohorts under two protocols.

    python -m cet_experiments real --out DIR [--cohorts lymph_node,mgus2] [--seeds 5]
    python -m cet_experiments real --out DIR --cohorts single   # the single-event data sets
    python -m cet_experiments real --out DIR --data FOLDER      # any dataset folder (flows.table)

Protocol ``a`` (the paper's, as it evaluates MIMIC): the events seen in the full follow-up are
the truth (``c``, and their times ``t_true``); uniform censoring U(0, 2 x the training median of
the true times) is drawn on top (``cet_model.censoring.censor_by_median``, once, seed 0); the
models learn from the censored times; the test AUC and ECE of P(ever) are scored against the
truth, and MRAE and Harrell's C where defined (``cet_model.evaluation.evaluate``). Rows: CET,
CET-paper, ET, BC, Oracle (``cet_model.presets.PRESETS``); with ``--data`` CET, ET, BC, Oracle
unless ``--models`` names others (CET-paper takes many times CET's fit).

Protocol ``b`` (the natural one): the data as recorded, no added censoring. Per event, on the
test rows: Harrell's and Uno's C of three rankings (the predicted median time, the restricted
mean event-free time up to the 90th percentile of the training follow-up, and the risk by the
training median: the median time of the training rows' observed events), the integrated Brier
score, the calibration of that risk against Kaplan-Meier in groups of predicted risk
(``cet_model.metrics.horizon_calibration``) and the held-out log-likelihood per row and event
(where the model has a density). Rows: CET, CET-paper and ET (every seed), and per event
lifelines' CoxPH and LogNormalAFT (ridge 0.01) and scikit-survival's RandomSurvivalForest
(200 trees, 15 rows a leaf, seed 0), fitted once.

"The predicted median time" is each model's own: CET's median time given the event happens
(the paper's C), ET's and the AFT's median, and for Cox and the forest their risk score (which
orders rows as their median survival does, where finite, without its ties at infinity).

Every model sees the same split (stratified by the events seen, 60/20/20, seed 0); the network
rows are refitted per seed (``--seeds``: 0, 1, ...). The cohorts run side by side in ``--jobs``
processes of ``--threads`` torch threads each (default: one thread, a process per usable CPU); only
the command's own process writes. Each cohort writes ``DIR/<cohort>/metrics.json``; ``DIR/table.md``
is rewritten from every cohort folder in ``DIR``, with the goals of the model issue judged per cohort
(``cet_experiments.real_tables``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from cet_model.atomic import claim_files, write_text
from cet_model.censoring import censor_by_median
from cet_model.choices import PRESET_NAMES
from cet_model.dataset import Dataset, Split, load_dataset
from cet_model.evaluation import evaluate, machine
from cet_model.metrics import (
    brier_times,
    concordance_index,
    horizon_calibration,
    integrated_brier_score,
    uno_c,
)
from cet_model.presets import fit_preset
from flows.lib.experiment.records import data_fingerprint, resolved_params
from flows.lib.infra.cli import time_left
from flows.lib.infra.workers import stop

from .cli import quiet_library, real_parser
from .processes import completed, jobs_for, pool
from .real_tables import tables_markdown
from .rows import CLASSICAL_ROWS, NATURAL_ROWS, OWN_DATA_ROWS, PAPER_ROWS, VARIANTS, preset_of

log = logging.getLogger("cet_experiments.real")

CENSOR_FACTOR = 2.0  # protocol a: U(0, factor x the training median of the true times)
RIDGE = 0.01  # lifelines' penalizer for CoxPH and LogNormalAFT (one-hot columns without events stay finite)
RMST_QUANTILE = 0.9  # the restricted mean's horizon: this quantile of the training follow-up
GRID = 512  # points of the survival curves from 0 to the last horizon (restricted means by the trapezoid rule)


# --- protocol a: the truth is what the full follow-up saw --------------------------------------
def with_truth(ds: Dataset, seed: int = 0, factor: float = CENSOR_FACTOR) -> Dataset:
    """Dataset ``ds`` (data censored by follow-up) for the paper's protocol: ``C`` = the event
    seen in the full follow-up, ``T_true`` = its time (NaN where unseen), and ``T``, ``S`` drawn
    again under uniform censoring U(0, ``factor`` x the training median of the true times) per
    event (``censor_by_median``, ``seed``). Cells the mask leaves out keep C NaN.

    >>> one = lambda n, t, s: Split(np.arange(n), np.zeros((n, 1)), np.array(t)[:, None], np.array(s)[:, None],
    ...                             np.full((n, 1), np.nan), np.full((n, 1), np.nan))
    >>> ds = Dataset(None, {}, ["x"], ["e"], {"train": one(4, [1.0, 2, 3, 4], [1, 1, 0, 1]),
    ...                                      "val": one(1, [5.0], [1]), "test": one(1, [1.0], [0])})
    >>> a = with_truth(ds)
    >>> a.train.C[:, 0].tolist(), a.train.T_true[:, 0].tolist()   # the truth: seen in the full follow-up
    ([1.0, 1.0, 0.0, 1.0], [1.0, 2.0, nan, 4.0])
    >>> bool((a.train.S <= a.train.C).all()), bool((a.train.T <= 2 * 2.0).all())   # censored on top, U(0, 2 x 2]
    (True, True)
    """
    names = list(ds.splits)
    parts = [ds.splits[k] for k in names]
    s = np.concatenate([p.S for p in parts])
    t = np.concatenate([p.T for p in parts])
    mask = np.concatenate([np.ones_like(p.S) if p.mask is None else p.mask for p in parts])
    c = np.where(mask > 0.5, (s > 0.5).astype(float), np.nan)
    t_true = np.where(c == 1, t, np.nan)
    train = np.concatenate([np.full(len(p), k == "train") for k, p in zip(names, parts, strict=True)])
    t_new, s_new, params = censor_by_median(t_true, np.nan_to_num(c), train, factor=factor, seed=seed,
                                            event_names=ds.event_names, fallback=True)
    t_new = np.where(mask > 0.5, t_new, t)  # a masked cell keeps its placeholder time (never used)
    s_new = np.where(mask > 0.5, s_new, 0.0).astype(float)
    splits, start = {}, 0
    for k, p in zip(names, parts, strict=True):
        rows = slice(start, start + len(p))
        splits[k] = Split(ids=p.ids, X=p.X, T=t_new[rows], S=s_new[rows], C=c[rows], T_true=t_true[rows],
                          sequences=p.sequences, mask=p.mask, groups=p.groups)
        start += len(p)
    manifest = dict(ds.manifest, censoring={"kind": "artificial", "artificial": True, **params,
                                            "truth": "the events seen in the full follow-up"})
    return Dataset(ds.path, manifest, ds.feature_names, ds.event_names, splits)


# --- protocol b: survival metrics per event ----------------------------------------------------
class Curves:
    """One fitted model's predictions for one event on the scored rows: ``median`` (n,), a time
    (larger = later), and ``survival(times)`` (n, len(times)) on any grid."""

    def __init__(self, median, survival):
        self.median, self.survival = np.asarray(median, float), survival


def horizons(train: Split, j: int) -> tuple[float, float]:
    """Event j's (restricted-mean horizon, risk horizon) from the training rows the mask keeps:
    the ``RMST_QUANTILE`` quantile of their follow-up times, and the median time of their observed
    events (the follow-up's median when none is observed)."""
    keep = np.ones(len(train), bool) if train.mask is None else train.mask[:, j] > 0.5
    t, s = train.T[keep, j], train.S[keep, j]
    seen = t[s > 0.5]
    return float(np.quantile(t, RMST_QUANTILE)), float(np.median(seen if seen.size else t))


def natural_scores(curves: Curves, train: Split, test: Split, j: int) -> dict[str, float]:
    """Protocol b's metrics of ``curves`` (on ``test``'s rows the mask keeps for event j)."""
    keep_tr = np.ones(len(train), bool) if train.mask is None else train.mask[:, j] > 0.5
    keep = np.ones(len(test), bool) if test.mask is None else test.mask[:, j] > 0.5
    t_tr, s_tr = train.T[keep_tr, j], train.S[keep_tr, j]
    t, s = test.T[keep, j], test.S[keep, j]
    h_rmst, h_risk = horizons(train, j)
    times = brier_times(t)
    grid = np.linspace(0.0, max(h_rmst, h_risk), GRID + 1)
    at = np.unique(np.concatenate([grid, times, [h_risk]]))
    surv = np.clip(curves.survival(at), 0.0, 1.0)[keep]  # (n, len(at)) on the rows kept
    upto = at <= h_rmst
    rmst = np.trapezoid(surv[:, upto], at[upto], axis=1) + surv[:, upto][:, -1] * (h_rmst - at[upto][-1])
    risk = 1.0 - surv[:, np.searchsorted(at, h_risk)]
    ranked = {"median": curves.median[keep], "rmst": rmst, "risk": -risk}  # each as a time: larger = later
    out = {}
    for name, score in ranked.items():
        out[f"harrell_{name}"] = _harrell(t, score, s)
        out[f"uno_{name}"] = uno_c(t_tr, s_tr, t, s, score)
    curves_at = surv[:, np.searchsorted(at, times)] if len(times) >= 2 else None
    out["ibs"] = integrated_brier_score(t_tr, s_tr, t, s, curves_at, times) if curves_at is not None else math.nan
    out["calibration"] = horizon_calibration(t, s, risk, h_risk)["ece"]
    return out


def _harrell(t, score, s) -> float:
    try:
        return concordance_index(t, score, s)
    except ZeroDivisionError:
        return math.nan


def network_curves(model, test: Split) -> list[Curves]:
    """Per event, the ``Curves`` of a fitted CET or ET."""
    x = test.X
    median = model.predict_time(x)
    return [Curves(median[:, j], lambda at, j=j: model.predict_survival(x, at, event=j))
            for j in range(median.shape[1])]


def standardised(train: Split, *splits: Split) -> list[np.ndarray]:
    """The features of ``splits`` scaled by the training mean and sd, without the columns that are
    constant on the training rows (a level no training row has): what the classical fits read."""
    x = np.asarray(train.X, float)
    mean, sd = x.mean(0), x.std(0)
    keep = sd > 0
    return [(np.asarray(sp.X, float)[:, keep] - mean[keep]) / sd[keep] for sp in splits]


def classical_fits(kind: str, train: Split, test: Split, seed: int = 0) -> tuple[list[Curves], float]:
    """Per event, the ``Curves`` on ``test`` of a classical model fitted on ``train``'s rows the
    mask keeps (``kind`` in ``CLASSICAL_ROWS``), and the held-out log-likelihood per row and event
    (NaN for the models without a density: Cox's and the forest's are step functions)."""
    import pandas as pd

    x_tr, x_te = standardised(train, train, test)
    columns = [f"x{i}" for i in range(x_tr.shape[1])]
    frame_te = pd.DataFrame(x_te, columns=columns)
    curves, total = [], 0.0
    for j in range(train.T.shape[1]):
        keep = np.ones(len(train), bool) if train.mask is None else train.mask[:, j] > 0.5
        t, s = train.T[keep, j], train.S[keep, j]
        frame = pd.DataFrame(x_tr[keep], columns=columns).assign(_t=t, _s=s)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lifelines' convergence and scaling notes, per event
            if kind == "CoxPH":
                from lifelines import CoxPHFitter

                cox = CoxPHFitter(penalizer=RIDGE).fit(frame, "_t", "_s")
                lp = cox.predict_log_partial_hazard(frame_te).to_numpy()
                curves.append(Curves(-lp, lambda at, m=cox: m.predict_survival_function(frame_te, times=at)
                                     .to_numpy().T))
                total = math.nan
            elif kind == "LogNormalAFT":
                from lifelines import LogNormalAFTFitter

                aft = LogNormalAFTFitter(penalizer=RIDGE).fit(frame, "_t", "_s")
                mu = aft.params_["mu_"][columns].to_numpy() @ x_te.T + aft.params_["mu_"]["Intercept"]
                sigma = float(np.exp(aft.params_["sigma_"]["Intercept"]))
                curves.append(Curves(np.exp(mu), lambda at, mu=mu, sigma=sigma: _lognormal_survival(at, mu, sigma)))
                keep_te = np.ones(len(test), bool) if test.mask is None else test.mask[:, j] > 0.5
                total += _lognormal_loglik(test.T[keep_te, j], test.S[keep_te, j], mu[keep_te], sigma).sum()
            elif kind == "RSF":
                from sksurv.ensemble import RandomSurvivalForest

                y = np.array(list(zip(s > 0.5, t, strict=True)), dtype=[("event", bool), ("time", float)])
                rsf = RandomSurvivalForest(n_estimators=200, min_samples_leaf=15, random_state=seed, n_jobs=1)
                rsf.fit(x_tr[keep], y)
                curves.append(Curves(-rsf.predict(x_te), lambda at, m=rsf: _step_survival(m, x_te, at)))
                total = math.nan
            else:
                raise ValueError(f"unknown classical model {kind!r}; one of {CLASSICAL_ROWS}")
    return curves, total / (len(test) * train.T.shape[1])


def _lognormal_survival(at, mu, sigma) -> np.ndarray:
    from scipy.special import ndtr

    with np.errstate(divide="ignore"):
        z = (np.log(np.asarray(at, float))[None, :] - mu[:, None]) / sigma
    return ndtr(-z)


def _lognormal_loglik(t, s, mu, sigma) -> np.ndarray:
    from scipy.special import log_ndtr

    z = (np.log(t) - mu) / sigma
    log_f = -0.5 * z**2 - np.log(sigma * t * math.sqrt(2 * math.pi))
    return np.where(s > 0.5, log_f, log_ndtr(-z))


def _step_survival(forest, x, at) -> np.ndarray:
    steps = np.asarray(forest.unique_times_, float)
    surv = forest.predict_survival_function(x, return_array=True)  # (n, steps)
    k = np.searchsorted(steps, np.asarray(at, float), side="right") - 1
    return np.where(k >= 0, surv[:, np.maximum(k, 0)], 1.0)


# --- the runs ------------------------------------------------------------------------------------
def fit_row(row: str, train: Split, val: Split, seed: int, max_epochs: int | None):
    """Fit row ``row`` (a preset or a variant) on ``train``, stopped early on ``val``, or given no
    validation data where its variant says ``"validation": None``."""
    preset, params = preset_of(row)
    params = dict(params)
    if "validation" in params:
        val = params.pop("validation")
    return fit_preset(preset, train, val, seed=seed, device="cpu", params=params, max_epochs=max_epochs)


def run_cohort(ds: Dataset, seeds, paper_rows=PAPER_ROWS, natural_rows=NATURAL_ROWS, classical=CLASSICAL_ROWS,
               progress: bool = True, max_epochs: int | None = None, scored: str = "test") -> dict:
    """Both protocols on one dataset; returns the cohort's record (``metrics.json``).
    ``max_epochs``: the networks' epoch cap (None: their automatic budget). ``scored``: the split
    every figure is computed on, ``"test"`` or ``"val"`` (a decision about a default is made on the
    validation split; the networks stop early on it either way)."""
    name = ds.manifest.get("name", Path(str(ds.path)).name)
    events = ds.event_names
    ds_a = with_truth(ds)
    if scored not in ("test", "val"):
        raise ValueError(f"scored: 'test' or 'val', got {scored!r}")
    result = {"cohort": name, "events": events, "split_sizes": {k: len(v) for k, v in ds.splits.items()},
              "scored": scored,
              "shares": _shares(ds), "censoring": ds_a.manifest["censoring"], "past_bound": past_bound(ds_a),
              "seeds": list(seeds),
              "a": {}, "b": {}}

    def say(text):
        if progress:
            print(f"{name}: {text}", flush=True)

    seeds, started = list(seeds), time.perf_counter()
    rows = list(dict.fromkeys([*paper_rows, *natural_rows]))
    say(f"{len(ds.train.X):,} training rows, {len(events)} events; {len(seeds)} seeds of "
        f"{', '.join(rows) or 'no network'}"
        + (f", then {', '.join(classical)}" if classical else "")
        + ("; CET-paper (the original objective) takes many times CET's fit: leave it out of --models to skip it"
           if "CET-paper" in rows else ""))
    for done, seed in enumerate(seeds):
        if done:  # an estimate from the seeds so far: every seed fits the same rows
            elapsed = time.perf_counter() - started
            say(time_left(done, len(seeds), elapsed, elapsed / done * (len(seeds) - done), "seeds",
                          " for the networks") + (", then the classical models" if classical else ""))
        for row in paper_rows:
            preset = preset_of(row)[0]
            t0 = time.perf_counter()
            try:
                model = fit_row(row, ds_a.train, ds_a.val, seed, max_epochs)
            except FloatingPointError as err:  # recorded, so one command shows which rule fails where
                _diverged(result["a"], row, seed, time.perf_counter() - t0)
                say(f"a seed {seed} {row:<24} diverged: {err}")
                continue
            secs = time.perf_counter() - t0
            scores = evaluate(preset, model, ds_a.splits[scored], events, train=ds_a.train, warn_no_truth=False)
            if hasattr(model, "predict_survival"):
                for j, ece in enumerate(followed_ece(model, ds_a.train, ds_a.splits[scored])):
                    scores[events[j]]["ece_followed"] = ece
            _append(result["a"], row, scores, secs)
            result["a"][row]["params"] = resolved_params(model)
            say(
                f"a seed {seed} {row:<24} {secs:6.1f}s AUC "
                + " ".join(f"{e}={v['auc']:.3f}" for e, v in scores.items())
            )
        for row in natural_rows:
            t0 = time.perf_counter()
            try:
                model = fit_row(row, ds.train, ds.val, seed, max_epochs)
            except FloatingPointError as err:
                _diverged(result["b"], row, seed, time.perf_counter() - t0)
                say(f"b seed {seed} {row:<24} diverged: {err}")
                continue
            secs = time.perf_counter() - t0
            sp = ds.splits[scored]
            curves = network_curves(model, sp)
            scores = {e: natural_scores(curves[j], ds.train, sp, j) for j, e in enumerate(events)}
            loglik = float(np.mean(model.score_samples(sp.X, sp.T, sp.S, mask=sp.mask)))
            _append(result["b"], row, scores, secs, loglik=loglik)
            result["b"][row]["params"] = resolved_params(model)
            say(f"b seed {seed} {row:<24} {secs:6.1f}s C(rmst) "
                + " ".join(f"{e}={v['harrell_rmst']:.3f}" for e, v in scores.items()))
    for kind in classical:
        t0 = time.perf_counter()
        curves, loglik = classical_fits(kind, ds.train, ds.splits[scored])
        secs = time.perf_counter() - t0
        scores = {e: natural_scores(curves[j], ds.train, ds.splits[scored], j) for j, e in enumerate(events)}
        _append(result["b"], kind, scores, secs, loglik=loglik)
        say(f"b {kind:<31} {secs:6.1f}s C(rmst) " + " ".join(f"{e}={v['harrell_rmst']:.3f}" for e, v in scores.items()))
    result["machine"] = machine()
    return result


def followed_ece(model, train: Split, split: Split) -> list[float]:
    """Per event, the ECE against the truth of the model's risk by the longest training time of
    that event, 1 - S(t_max): what ET calls its P(ever). Beside the ECE of P(ever) it separates a
    miscalibrated occurrence head from the events a cure model places after the follow-up, which a
    truth seen within the follow-up cannot count."""
    from cet_model.metrics import expected_calibration_error

    m = split.T.shape[1]
    ends = [float(train.T[(train.mask[:, j] > 0.5) if train.mask is not None else slice(None), j].max())
            for j in range(m)]
    risk = 1.0 - np.stack([model.predict_survival(split.X, [h], event=j)[:, 0] for j, h in enumerate(ends)], axis=1)
    out = []
    for j in range(m):
        known = ~np.isnan(split.C[:, j])
        if split.mask is not None:
            known &= split.mask[:, j] > 0.5
        out.append(expected_calibration_error(split.C[known, j], risk[known, j]) if known.any() else math.nan)
    return out


def _append(table: dict, row: str, scores: dict, secs: float, loglik: float | None = None) -> None:
    entry = table.setdefault(row, {"tasks": {}, "seconds": []})
    entry["seconds"].append(secs)
    if loglik is not None:
        entry.setdefault("loglik", []).append(loglik)
    for e, metrics in scores.items():
        for k, v in metrics.items():
            entry["tasks"].setdefault(e, {}).setdefault(k, []).append(float(v))


def _diverged(table: dict, row: str, seed: int, secs: float) -> None:
    """A fit whose training loss became non-finite: its seed is listed, and the row has no figure
    on this cohort (a mean over the seeds that finished would hide the failure)."""
    entry = table.setdefault(row, {"tasks": {}, "seconds": []})
    entry["seconds"].append(secs)
    entry.setdefault("diverged", []).append(seed)


def merge_records(old: dict, new: dict) -> dict:
    """A cohort's record with the rows of ``new`` added to (or replacing) those of ``old``: rows
    run in separate commands on the same data and seeds form one table. Other data (another
    fingerprint) or other seeds are a ValueError.

    >>> old = {"fingerprint": "f", "seeds": [0], "a": {"ET": 1}, "b": {"ET": 1, "CoxPH": 2}, "command": "x"}
    >>> new = {"fingerprint": "f", "seeds": [0], "a": {"CET": 3}, "b": {"ET": 4}, "command": "y"}
    >>> out = merge_records(old, new)
    >>> out["a"], out["b"], out["commands"]
    ({'ET': 1, 'CET': 3}, {'ET': 4, 'CoxPH': 2}, {'ET': 'y', 'CoxPH': 'x', 'CET': 'y'})
    >>> merge_records(dict(old, machine="m1"), dict(new, machine="m2"))["machines"]   # where each row ran
    {'ET': 'm2', 'CoxPH': 'm1', 'CET': 'm2'}
    """
    for key in ("fingerprint", "seeds", "scored"):
        if old.get(key, "test" if key == "scored" else None) != new.get(key, "test" if key == "scored" else None):
            raise ValueError(f"{new.get('cohort')}: the record there has other {key} ({old.get(key)} against "
                             f"{new.get(key)}); write to another --out")
    commands = dict(old.get("commands") or {r: old.get("command") for p in ("a", "b") for r in old[p]})
    commands.update({r: new.get("command") for p in ("a", "b") for r in new[p]})
    merged = dict(old, **{k: v for k, v in new.items() if k not in ("a", "b")})
    for protocol in ("a", "b"):
        merged[protocol] = {**old[protocol], **new[protocol]}
    merged["commands"] = commands
    machines = dict(old.get("machines") or {r: old.get("machine") for p in ("a", "b") for r in old[p]})
    machines.update({r: new.get("machine") for p in ("a", "b") for r in new[p]})
    merged["machines"] = machines  # fit seconds compare only between rows of one machine
    return merged


def combine_records(folders, rows=frozenset()) -> dict[str, dict]:
    """{cohort: record} from the cohort records of ``folders`` (``merge_records`` in order: a later
    folder's row replaces an earlier one's), keeping only ``rows`` when given."""
    out: dict[str, dict] = {}
    for folder in folders:
        for path in sorted(Path(folder).glob("*/metrics.json")):
            record = json.loads(path.read_text())
            if rows:
                record = dict(record, **{p: {r: v for r, v in record[p].items() if r in rows} for p in ("a", "b")})
            name = record["cohort"]
            out[name] = merge_records(out[name], record) if name in out else record
    return out


def _shares(ds: Dataset) -> dict[str, float]:
    """Per event, the share of the rows (the mask keeps) whose event the full follow-up saw."""
    s = np.concatenate([p.S for p in ds.splits.values()])
    m = np.concatenate([np.ones_like(p.S) if p.mask is None else p.mask for p in ds.splits.values()])
    return {e: float(s[m[:, j] > 0.5, j].mean()) for j, e in enumerate(ds.event_names)}


def past_bound(ds_a: Dataset) -> dict[str, float]:
    """Per event, the share of the truth's events (training rows) that happen after the added
    censoring's upper bound: no training row is followed there, so a model can only extrapolate
    them (a log-normal time keeps rising; a cure model's risk levels off)."""
    tr, upper = ds_a.train, ds_a.manifest["censoring"]["upper"]
    out = {}
    for j, e in enumerate(ds_a.event_names):
        known = ~np.isnan(tr.C[:, j]) & ((tr.mask[:, j] > 0.5) if tr.mask is not None else True)
        seen = known & (np.nan_to_num(tr.C[:, j]) > 0.5)
        out[e] = float((seen & (tr.T_true[:, j] > upper[j])).sum() / seen.sum()) if seen.any() else math.nan
    return out


TITLE = "# Real-data benchmark"


def is_benchmark_folder(folder: Path) -> bool:
    """Whether ``folder`` holds this benchmark's ``table.md`` (or, one level down, a cohort's
    record), written before output folders were marked."""
    try:
        with (Path(folder) / "table.md").open(errors="replace") as f:
            if f.readline().rstrip("\n") == TITLE:
                return True
    except OSError:
        pass
    try:
        record = json.loads((Path(folder) / "metrics.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and {"cohort", "a", "b"} <= set(record)


def claim_outputs(out: Path, cohorts=(), record: bool = True) -> None:
    """Refuse (FileExistsError naming the file) when ``out/table.md`` or a cohort's
    ``out/<cohort>/metrics.json`` exists and this project did not write it; else claim them."""
    what = "benchmark folder (--out)"
    claim_files(out, ["table.md"], legacy=is_benchmark_folder, what=what, record=record)
    for name in cohorts:
        claim_files(Path(out) / name, ["metrics.json"], legacy=is_benchmark_folder, what=what, record=record)


def write_tables(out: Path, against=("CET",)) -> str:
    """``out/table.md`` from every record this project wrote in ``out/*/metrics.json``; returns the text."""
    records = [json.loads(p.read_text()) for p in sorted(Path(out).glob("*/metrics.json"))
               if is_benchmark_folder(p.parent)]
    text = TITLE + "\n\n" + tables_markdown(records, against)
    claim_outputs(out)
    write_text(Path(out) / "table.md", text)
    return text


def main(argv=None) -> int:
    args = real_parser().parse_args(argv)
    against = tuple(r.strip() for r in args.against.split(",") if r.strip())
    if unknown := [r for r in against if r not in PRESET_NAMES and r not in VARIANTS]:
        raise SystemExit(f"--against: unknown {unknown}; presets {sorted(PRESET_NAMES)} or variants {sorted(VARIANTS)}")
    quiet_library()
    try:
        return _main(args, against, argv)
    except FileExistsError as err:
        raise SystemExit(str(err)) from None


def _main(args, against, argv) -> int:
    from .cohorts import ALL, cohort_names, write_cohort

    if args.tables_only:
        print(write_tables(args.out, against))
        return 0
    if args.combine:
        keep = {r.strip() for r in args.rows.split(",") if r.strip()}
        combined = combine_records(args.combine, keep)
        claim_outputs(args.out, combined, record=False)
        for name, record in combined.items():
            claim_outputs(args.out, [name])
            write_text(args.out / name / "metrics.json", json.dumps(record, indent=1))
        print(write_tables(args.out, against))
        return 0
    named = args.models if args.models is not None else ",".join(OWN_DATA_ROWS if args.data else PAPER_ROWS)
    models = [m.strip() for m in named.split(",") if m.strip()]
    unknown = [m for m in models if m not in PRESET_NAMES and m not in VARIANTS]
    if unknown:
        raise SystemExit(f"--models: unknown {unknown}; presets {sorted(PRESET_NAMES)} or variants {sorted(VARIANTS)}")
    protocols = {p.strip() for p in args.protocols.split(",") if p.strip()}
    if not protocols <= {"a", "b"}:
        raise SystemExit(f"--protocols: a, b or a,b; got {args.protocols!r}")
    paper_rows = models if "a" in protocols else []
    natural_rows = [m for m in models if preset_of(m)[0] not in ("BC", "Oracle")] if "b" in protocols else []
    classical = () if args.no_classical or "b" not in protocols else CLASSICAL_ROWS
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    if args.data:
        folders = [(p.name, p) for p in args.data]
        for _, folder in folders:
            check_own_data(folder)
    else:
        try:
            names = cohort_names(args.cohorts)
        except ValueError as e:
            raise SystemExit(f"--cohorts: {e}") from None
        claim_outputs(args.out, names, record=False)  # before any fit
        folders = [(c, write_cohort(c, args.out / c / "data")) for c in names]
    claim_outputs(args.out, [name for name, _ in folders], record=False)

    def keep(name: str, folder: Path, record: dict) -> None:
        if not args.data:  # a bundled cohort; a folder of the user's is never labelled with a cohort's source
            record["source"], record["note"] = ALL[name].source, ALL[name].note
        record["command"] = "python -m cet_experiments real " + " ".join(sys.argv[2:] if argv is None else argv)
        record["fingerprint"] = data_fingerprint(folder)
        path = args.out / name / "metrics.json"
        claim_outputs(args.out, [name])  # only this process writes the markers and records
        if path.is_file():
            record = merge_records(json.loads(path.read_text()), record)
        write_text(path, json.dumps(record, indent=1))

    run = dict(seeds=list(seeds), paper_rows=paper_rows, natural_rows=natural_rows, classical=classical,
               max_epochs=args.max_epochs, scored=args.scored, threads=args.threads)
    with contextlib.closing(run_cohorts(folders, jobs_for(args.jobs, args.threads, len(folders)), run)) as records:
        for name, folder, record in records:  # on Ctrl-C while a record is kept, closing stops the other cohorts
            keep(name, folder, record)
    print(write_tables(args.out, against))
    return 0


def check_own_data(folder: Path) -> None:
    """SystemExit naming the folder (and the events) where a dataset of the user's cannot be
    benchmarked, before anything is written: not a dataset folder, or an event observed in no
    training row (nothing for a model to learn, and the classical fits refuse it)."""
    try:
        ds = load_dataset(folder)
    except (OSError, ValueError) as err:
        raise SystemExit(f"--data {folder}: {err}") from None
    tr = ds.train
    followed = np.ones(tr.S.shape, bool) if tr.mask is None else tr.mask == 1
    unseen = [e for j, e in enumerate(ds.event_names) if not (tr.S[followed[:, j], j] > 0.5).any()]
    if unseen:
        raise SystemExit(f"--data {folder}: {', '.join(unseen)} observed in no training row, so no model can be "
                         "compared on it; build the dataset without that event (flows.table), or with more rows")


def cohort_record(folder, *, seeds, paper_rows, natural_rows, classical, max_epochs, scored, threads) -> dict:
    """One cohort's record (``run_cohort``), in this process with ``threads`` torch threads."""
    import torch

    quiet_library()  # a process of its own: the harness's logging again
    torch.set_num_threads(threads)
    return run_cohort(load_dataset(folder), seeds, paper_rows, natural_rows, classical, max_epochs=max_epochs,
                      scored=scored)


def run_cohorts(folders, jobs: int, run: dict):
    """(name, folder, record) of each cohort as it finishes: in this process, or with ``jobs`` > 1
    in that many processes, the largest cohorts first (each prints its own progress lines)."""
    if jobs == 1:
        for name, folder in folders:
            yield name, folder, cohort_record(folder, **run)
        return
    order = sorted(folders, key=lambda nf: -len(load_dataset(nf[1]).train.X))
    print(f"{len(folders)} cohorts in {jobs} processes of {run['threads']} thread(s) each, the largest first",
          flush=True)
    workers = pool(jobs)
    try:
        futures = {workers.submit(cohort_record, folder, **run): (name, folder) for name, folder in order}
        for done in completed(futures):
            yield *futures[done], done.result()
    except BaseException:  # Ctrl-C, an error, or the caller stopped reading: no cohort goes on running
        stop(workers)
        raise
    workers.shutdown(wait=True)
