"""CET as a scikit-survival estimator: fit(X, y) with Surv, predict, score, survival functions,
GridSearchCV, cross_val_score and a Pipeline (scikit-survival's own classes and metrics)."""

import json
import warnings

import numpy as np
import pytest
import sklearn
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sksurv.metrics import concordance_index_censored, integrated_brier_score
from sksurv.util import Surv

from cet_model import BCModel, CETModel, ETModel, load_model, survival_targets
from tests.conftest import THREADS

FAST = dict(hidden_sizes=(8,), max_epochs=40, device="cpu", dropout=0.0, lr=0.01)


def cohort(n=300, m=1, seed=0):
    """Cure-model data whose first feature shortens every event's time."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3))
    c = rng.random((n, m)) < 0.6
    t_event = np.exp(1.0 - 0.8 * x[:, :1] + 0.4 * rng.standard_normal((n, m)))
    cens = rng.uniform(0.5, 8.0, (n, m))
    s = c & (t_event < cens)
    t = np.where(s, t_event, cens)
    return x, t, s.astype(float)


@pytest.fixture(scope="module")
def one_event():
    torch.set_num_threads(THREADS)  # set up before the autouse fixture: the threads decide the float sums
    x, t, s = cohort()
    y = Surv.from_arrays(event=s[:, 0].astype(bool), time=t[:, 0])
    return x, t, s, y, CETModel(**FAST).fit(x, y)


def test_fit_on_surv_is_fit_on_arrays(one_event):
    x, t, s, y, model = one_event
    arrays = CETModel(**FAST).fit(x, t, s)
    np.testing.assert_array_equal(model.predict_occurrence(x), arrays.predict_occurrence(x))
    assert model.event_names_ == ["event"]


def test_predict_is_a_risk_and_score_is_harrells_c(one_event):
    x, t, s, y, model = one_event
    risk = model.predict(x)
    assert risk.shape == (len(x),)
    want = concordance_index_censored(y["event"], y["time"], risk)[0]
    assert model.score(x, y) == pytest.approx(want, abs=1e-9)
    assert want > 0.65  # the first feature shortens the time: the risk ranks by it
    assert model.score(x, t, s) == model.score(x, y)  # the array form scores the same


def test_survival_functions_as_scikit_survival_returns_them(one_event):
    x, t, s, y, model = one_event
    curves = model.predict_survival_function(x[:5])
    grid = model.unique_times_
    assert grid.tolist() == np.unique(t[s[:, 0] == 1, 0]).tolist()  # the distinct event times, as sksurv's
    assert len(curves) == 5 and curves[0].x is grid
    np.testing.assert_allclose(curves[2](grid), model.predict_survival(x[2:3], grid)[0, :, 0], rtol=1e-5)
    arr = model.predict_survival_function(x[:5], return_array=True)
    np.testing.assert_allclose(arr, np.stack([c.y for c in curves]))
    assert (np.diff(arr, axis=1) <= 1e-12).all() and arr.min() >= 1 - model.predict_occurrence(x[:5]).max() - 1e-9
    hazard = model.predict_cumulative_hazard_function(x[:5], return_array=True)
    np.testing.assert_allclose(hazard, -np.log(arr), rtol=1e-9)
    times = np.quantile(t[s[:, 0] == 1, 0], [0.1, 0.5, 0.8])
    ibs = integrated_brier_score(y, y, np.stack([c(times) for c in model.predict_survival_function(x)]), times)
    assert 0 < ibs < 0.25


def test_grid_search_and_cross_validation_score_every_candidate(one_event):
    x, t, s, y, _ = one_event
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a scoring failure would warn and score NaN
        warnings.simplefilter("ignore", ConvergenceWarning)  # the short budget of these tests
        search = GridSearchCV(CETModel(**FAST), {"hidden_sizes": [(), (8,)]}, cv=KFold(3)).fit(x, y)
        scores = cross_val_score(ETModel(**FAST), x, y, cv=KFold(3))
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    assert search.best_params_["hidden_sizes"] == [(), (8,)][int(np.argmax(search.cv_results_["mean_test_score"]))]
    assert np.isfinite(scores).all() and scores.mean() > 0.6


def test_a_search_given_t_and_s_apart_raises_instead_of_ranking_nans(one_event):
    """scikit-learn passes a fit parameter S to fit only: the search refuses at once, naming the
    structured y, where it used to score every candidate NaN. Outside a search the arrays fit."""
    x, t, s, y, _ = one_event
    search = GridSearchCV(CETModel(**FAST), {"hidden_sizes": [(), (8,)]}, cv=KFold(3))
    with pytest.raises(ValueError, match="All the 6 fits failed") as err, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        search.fit(x, t, S=s)
    assert "Surv.from_arrays" in str(err.value)
    with pytest.raises(ValueError, match="structured array"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cross_val_score(ETModel(**FAST), x, t, cv=KFold(3), params={"S": s}, error_score="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        direct = CETModel(**FAST).fit(x, t, S=s)
    np.testing.assert_array_equal(direct.predict(x), CETModel(**FAST).fit(x, y).predict(x))


def test_with_metadata_routing_s_reaches_score(one_event):
    x, t, s, y, _ = one_event
    with sklearn.config_context(enable_metadata_routing=True), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = CETModel(**FAST).set_fit_request(S=True).set_score_request(S=True)
        routed = cross_val_score(model, x, t, cv=KFold(3), params={"S": s}, error_score="raise")
    assert np.isfinite(routed).all()
    np.testing.assert_allclose(routed, cross_val_score(CETModel(**FAST), x, y, cv=KFold(3)), rtol=1e-12)


def test_a_pipeline_with_a_scaler_fits_predicts_and_scores(one_event):
    x, t, s, y, _ = one_event
    pipe = make_pipeline(StandardScaler(), CETModel(**FAST)).fit(100 * x + 5, y)
    assert pipe.predict(100 * x + 5).shape == (len(x),)
    assert pipe.score(100 * x + 5, y) > 0.65


def test_scoring_without_indicators_names_the_fix(one_event):
    x, t, s, y, model = one_event
    with pytest.raises(TypeError, match="Surv.from_arrays"):
        model.score(x, t[:, 0])
    with pytest.raises(TypeError, match="structured array"):
        model.fit(x, y, s)
    bad = np.zeros(3, dtype=[("time", "<f8"), ("event", "?")])
    with pytest.raises(ValueError, match="pair of fields"):
        CETModel(**FAST).fit(x[:3], bad)


def test_several_events_in_one_structured_y():
    x, t, s = cohort(m=2)
    y = survival_targets(event=s.astype(bool), time=t, names=["relapse", "death"])
    model = CETModel(**FAST).fit(x, y)
    arrays = CETModel(**FAST).fit(x, t, s)
    np.testing.assert_array_equal(model.predict(x), arrays.predict(x))
    assert model.predict(x).shape == (len(x), 2) and model.event_names_ == ["relapse", "death"]
    c_death = concordance_index_censored(y["death"], y["death_time"], model.predict(x)[:, 1])[0]
    c_relapse = concordance_index_censored(y["relapse"], y["relapse_time"], model.predict(x)[:, 0])[0]
    assert model.score(x, y) == pytest.approx((c_death + c_relapse) / 2, abs=1e-9)
    with pytest.raises(ValueError, match="relapse, death"):
        model.predict_survival_function(x)
    by_name = model.predict_survival_function(x[:3], return_array=True, event="death")
    np.testing.assert_array_equal(by_name, model.predict_survival_function(x[:3], return_array=True, event=1))
    assert by_name.shape == (3, len(model.event_times_[1]))


def test_predict_and_grids_survive_save_and_load(one_event, tmp_path):
    x, t, s, y, model = one_event
    back = load_model(model.save(tmp_path / "m"), device="cpu")
    np.testing.assert_array_equal(back.predict(x), model.predict(x))
    np.testing.assert_array_equal(back.unique_times_, model.unique_times_)
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    del cfg["targets"]  # a model saved before the grids were kept predicts all else
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    old = load_model(tmp_path / "m", device="cpu")
    np.testing.assert_array_equal(old.predict_occurrence(x), model.predict_occurrence(x))
    with pytest.raises(ValueError, match="refit it"):
        old.predict(x)
    cfg["targets"] = {"names": None, "rmst_horizon": [-1.0], "event_times": [[1.0]]}
    (tmp_path / "m" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="field 'targets'"):
        load_model(tmp_path / "m", device="cpu")


def test_the_baselines_keep_the_contract(one_event):
    x, t, s, y, _ = one_event
    et = ETModel(**FAST).fit(x, y)
    assert et.score(x, y) > 0.65 and et.predict_survival_function(x[:2], return_array=True).shape[0] == 2
    bc = BCModel(**FAST).fit(x, y)
    assert bc.predict(x).shape == (len(x),) and 0.5 < bc.score(x, y) <= 1
    with pytest.raises(TypeError, match="no survival function"):
        bc.predict_survival_function(x)


@pytest.mark.parametrize("cls", [CETModel, ETModel, BCModel])
def test_scikit_learns_api_checks_hold_with_a_survival_target(one_event, cls, tmp_path):
    """scikit-learn's own checks that need no target, and the rest of its estimator checks redone
    with a survival y (its generated targets are numbers, which a survival model refuses)."""
    from sklearn.utils.estimator_checks import (
        check_get_params_invariance,
        check_no_attributes_set_in_init,
        check_parameters_default_constructible,
        check_set_params,
    )

    name = cls.__name__
    for check in (check_parameters_default_constructible, check_no_attributes_set_in_init,
                  check_get_params_invariance, check_set_params):
        check(name, cls())
    x, _, _, y, _ = one_event
    model = cls(**FAST)
    before = model.get_params(deep=True)
    readonly = np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="w+", shape=x.shape)
    readonly[:] = x
    readonly = np.memmap(tmp_path / "x.dat", dtype=np.float64, mode="r", shape=x.shape)
    assert model.fit(readonly, y) is model
    assert model.get_params(deep=True) == before  # fit sets attributes ending in _, never a parameter
    assert model.n_features_in_ == x.shape[1]
    risk = model.predict(x)
    order = np.random.default_rng(1).permutation(len(x))
    np.testing.assert_allclose(model.predict(x[order]), risk[order], rtol=1e-6)  # rows are scored independently
    np.testing.assert_allclose(np.concatenate([model.predict(x[:7]), model.predict(x[7:])]), risk, rtol=1e-6)
    np.testing.assert_array_equal(model.fit(np.asfortranarray(x), y).predict(x), risk)  # refit: the same model
