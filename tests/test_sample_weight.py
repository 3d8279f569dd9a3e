"""Row weights in a fit (``fit(..., sample_weight=w)``): each row's log-likelihood counts w times, as
case weights, inverse-probability weights or a repeated row would. Checked against the rows repeated,
against the weighted share a model with no usable feature must learn, through a scikit-learn search
and by the errors bad weights get."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold
from sksurv.util import Surv

from cet_model import BCModel, CETModel, ETModel, survival_targets
from cet_model.train import holdout_split

FAST = dict(hidden_sizes=(8,), max_epochs=40, device="cpu", dropout=0.0, lr=0.01)


def two_event_cohort(n=120, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3))
    c = rng.random((n, 2)) < 0.6
    t_event = np.exp(1.0 - 0.8 * x[:, :1] + 0.4 * rng.standard_normal((n, 2)))
    cens = rng.uniform(0.5, 8.0, (n, 2))
    s = c & (t_event < cens)
    return x, np.where(s, t_event, cens), s.astype(float)


@pytest.mark.parametrize("cls", [CETModel, ETModel, BCModel])
def test_a_weight_counts_as_the_row_repeated(cls):
    """The training loss and the validation objective with integer weights equal those of the rows
    repeated as many times (dropout off: the losses are deterministic), 0 leaving a row out."""
    x, t, s = two_event_cohort()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = cls(**(FAST | {"max_epochs": 3})).fit(x, t, s)
    counts = np.random.default_rng(1).integers(0, 4, len(x))
    repeated = np.repeat(np.arange(len(x)), counts)
    model.net_.eval()
    with torch.no_grad():
        weighted = model._tensors(x, t, s, None) + [model._weights(counts, len(x), "sample_weight")]
        plain = model._tensors(x[repeated], t[repeated], s[repeated], None)
        assert model._train_loss(*weighted).item() == pytest.approx(model._train_loss(*plain).item(), rel=1e-5)
        assert model._eval_loss(*weighted) == pytest.approx(model._eval_loss(*plain), rel=1e-5)
        unweighted = model._tensors(x, t, s, None)
        equal = unweighted + [model._weights(np.full(len(x), 7.0), len(x), "sample_weight")]
        assert model._train_loss(*equal).item() == pytest.approx(model._train_loss(*unweighted).item(), rel=1e-6)


def test_cets_encoder_stage_reads_the_weights_of_its_validation_rows():
    """One event (the closed form): the encoder stage's cached validation objective is the weighted one."""
    x, t, s = two_event_cohort()
    t, s = t[:, :1], s[:, :1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CETModel(**(FAST | {"max_epochs": 3})).fit(x, t, s)
    w = np.random.default_rng(2).uniform(0.0, 3.0, len(x))
    rows = model._tensors(x, t, s, None) + [model._weights(w, len(x), "sample_weight")]
    model.net_.eval()
    with torch.no_grad():
        assert model._frozen_decoder_val_loss(*rows)() == pytest.approx(model._objective_value(*rows), rel=1e-6)
        assert model._objective_value(*rows) != pytest.approx(model._objective_value(*rows[:4]), rel=1e-3)


def no_signal(n=600, seed=0):
    """Two groups that the features cannot tell apart: 90 % of group A have the event (observed; the
    rest followed far past every event time), 10 % of group B. Weighing A nine times makes the
    weighted share (9 x 0.9 + 0.1) / 10 = 0.82, where the unweighted one is 0.5."""
    rng = np.random.default_rng(seed)
    group_a = np.arange(n) < n // 2
    happens = rng.random(n) < np.where(group_a, 0.9, 0.1)
    t = np.where(happens, np.exp(rng.normal(1.0, 0.3, n)), 500.0)
    x = rng.standard_normal((n, 2))
    return x, t, happens.astype(float), np.where(group_a, 9.0, 1.0), happens


@pytest.mark.parametrize("cls", [CETModel, BCModel])
def test_p_ever_learns_the_weighted_share(cls):
    """Fitted as a user would (``fit(X, y)``: a fifth held out for early stopping, with its weights),
    P(ever) of a model with no usable feature lands on the weighted share, not the plain one."""
    x, t, s, w, happens = no_signal()
    y = Surv.from_arrays(event=s.astype(bool), time=t)
    target = np.average(happens, weights=w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        weighted = cls(**(FAST | {"max_epochs": 200})).fit(x, y, sample_weight=w).predict_occurrence(x).mean()
        plain = cls(**(FAST | {"max_epochs": 200})).fit(x, y).predict_occurrence(x).mean()
    assert target - happens.mean() > 0.25
    assert weighted == pytest.approx(target, abs=0.05), (weighted, plain)
    assert plain == pytest.approx(happens.mean(), abs=0.05)


def test_a_search_hands_each_fold_its_weights():
    x, t, s = two_event_cohort(n=150)
    y = Surv.from_arrays(event=s[:, 0].astype(bool), time=t[:, 0])
    w = np.random.default_rng(3).uniform(0.5, 2.0, len(x))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scikit-learn warns where score cannot take the weights
        warnings.simplefilter("ignore", ConvergenceWarning)
        search = GridSearchCV(CETModel(**FAST), {"hidden_sizes": [(), (8,)]}, cv=KFold(3)).fit(x, y, sample_weight=w)
        direct = CETModel(**(FAST | {"hidden_sizes": search.best_params_["hidden_sizes"]})).fit(x, y, sample_weight=w)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    np.testing.assert_array_equal(search.best_estimator_.predict(x), direct.predict(x))


@pytest.mark.bad_input
@pytest.mark.parametrize("weight, message", [
    (np.ones(5), r"sample_weight: one weight per row is needed, 120; got shape \(5,\)"),
    (np.ones((120, 1)), r"sample_weight: one weight per row is needed, 120; got shape \(120, 1\)"),
    (np.r_[np.ones(7), -2.0, np.ones(112)], "sample_weight: weights must be finite and >= 0; found a negative "
                                           r"value at row 7 \(1 such rows in all\)"),
    (np.r_[np.ones(3), np.nan, np.inf, np.ones(115)], r"found a non-finite value \(NaN\) at row 3 \(2 such rows"),
    (np.zeros(120), "sample_weight: every weight is 0; no row would count"),
    (["1.5"] * 119 + ["heavy"], "sample_weight: weights must be numbers$"),
])
def test_bad_weights_are_refused_naming_the_row_never_the_value(weight, message):
    x, t, s = two_event_cohort()
    with pytest.raises(ValueError, match=message) as err:
        CETModel(**FAST).fit(x, t, s, sample_weight=weight)
    assert "heavy" not in str(err.value) and "-2" not in str(err.value)


@pytest.mark.bad_input
def test_validation_weights_are_checked_against_the_validation_rows():
    x, t, s = two_event_cohort()
    with pytest.raises(ValueError, match=r"sample_weight_val: one weight per row is needed, 20; got shape \(120,\)"):
        CETModel(**FAST).fit(x[:100], t[:100], s[:100], x[100:], t[100:], s[100:], sample_weight_val=np.ones(120))


def test_a_weighted_score_is_the_score_of_the_rows_repeated():
    """score's Harrell's C with whole-number weights equals the C of the rows repeated; equal weights
    leave it as it is."""
    x, t, s = two_event_cohort()
    y = survival_targets(event=s == 1, time=t, names=["a", "b"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CETModel(**FAST).fit(x, y)
    counts = np.random.default_rng(4).integers(0, 4, len(x))
    repeated = np.repeat(np.arange(len(x)), counts)
    assert model.score(x, y, sample_weight=counts) == pytest.approx(model.score(x[repeated], y[repeated]), abs=1e-12)
    assert model.score(x, y, sample_weight=np.full(len(x), 3.0)) == pytest.approx(model.score(x, y), abs=1e-12)
    assert model.score(x, y, sample_weight=counts) != pytest.approx(model.score(x, y), abs=1e-4)


@pytest.mark.bad_input
def test_held_out_rows_that_all_weigh_0_are_named_as_such():
    """Without validation data a fifth of the rows is held out to stop on: weights of 0 on all of
    them leave nothing to stop on, and the error says where the rows came from."""
    x, t, s = two_event_cohort()
    probe = CETModel(**FAST)
    _, held = holdout_split(len(x), 0.2, probe.seed)
    w = np.ones(len(x))
    w[held] = 0.0
    with pytest.raises(ValueError, match=r"^sample_weight \(on the rows held out for early stopping\): every "
                                         "weight is 0; no row would count$"):
        probe.fit(x, t, s, sample_weight=w)
