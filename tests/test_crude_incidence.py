"""CET's crude cumulative incidence where events compete (``predict_cumulative_incidence``): the net
risk without competitors, below it with them, and the crude risks of a group add up to the chance
that any of its events happens. Real data: lifelines' rossi, its arrests split into two kinds."""

import numpy as np
import pytest

from cet_model import CETModel
from flows.lib.modeling.predict import predict_in_parts

FEATURES = ["fin", "age", "race", "wexp", "mar", "paro", "prio"]
FAR = 1e300  # past every component's time (a short fit's sigma can be 40): the crude risks are complete


@pytest.fixture(scope="module")
def competing():
    """Features, times and indicators of arrest and violation (one status: never both), and an
    event with its own follow-up."""
    from lifelines.datasets import load_rossi

    r = load_rossi()
    kind = np.where(r["arrest"] == 0, 0, np.where(np.arange(len(r)) % 3 == 0, 2, 1))
    x = r[FEATURES].to_numpy(float)
    t = r["week"].to_numpy(float)
    later = t + 10 + r["prio"].to_numpy(float)
    T = np.column_stack([t, t, later])
    S = np.column_stack([kind == 1, kind == 2, r["wexp"] == 1]).astype(float)
    return x, T, S


@pytest.mark.parametrize("conditioned", [True, False])
def test_crude_risks_of_a_group_add_up_to_the_chance_that_any_happens(competing, conditioned):
    x, T, S = competing
    model = CETModel(max_epochs=20, hidden_sizes=(16,), condition_on_occurrence=conditioned).fit(x, T, S)
    times = np.array([5.0, 20.0, 52.0, FAR])
    p = model.predict_occurrence(x)
    net = [1.0 - model.predict_survival(x, times, event=j) for j in range(3)]
    alone = model.predict_cumulative_incidence(x, times, "2")
    np.testing.assert_allclose(alone, net[2], atol=1e-4)  # no competitor: the net risk
    arrest = model.predict_cumulative_incidence(x, times, 0, competing=[1])
    violation = model.predict_cumulative_incidence(x, times, 1, competing=[0])
    assert arrest.shape == (len(x), len(times))
    assert (arrest <= net[0] + 1e-4).all() and (violation <= net[1] + 1e-4).all()
    assert (np.diff(arrest, axis=1) >= 0).all() and (arrest >= 0).all()
    assert (net[0] - arrest)[:, -1].mean() > 1e-3  # the other kind does come first
    np.testing.assert_allclose(arrest[:, -1] + violation[:, -1], 1.0 - (1.0 - p[:, 0]) * (1.0 - p[:, 1]), atol=1e-4)
    every = model.predict_all(x, times=times, crude={0: [1], 1: [0]})
    np.testing.assert_array_equal(every["crude"][0], arrest)
    np.testing.assert_array_equal(every["crude"][1], violation)
    parts = predict_in_parts(model, x, "rossi", part_rows=100, times=times, crude={0: [1], 1: [0]})  # as scored
    np.testing.assert_allclose(parts["crude"][1], violation, atol=1e-6)
    # a third event in the group: still the chance that any of the three happens
    three = sum(model.predict_cumulative_incidence(x, [FAR], j, competing=[k for k in range(3) if k != j])[:, 0]
                for j in range(3))
    np.testing.assert_allclose(three, 1.0 - np.prod(1.0 - p, axis=1), atol=1e-4)


def test_drawn_patterns_and_bad_arguments(competing):
    """Beyond ``n_samples`` patterns the other events' occurrences are drawn, as for the other
    predictions: the crude risk stays within [0, the net risk]. A competitor is another event, once."""
    x, T, S = competing
    model = CETModel.with_recipe(n_samples=2)(max_epochs=5, hidden_sizes=(8,)).fit(x, T, S)
    times = [10.0, 52.0]
    crude = model.predict_cumulative_incidence(x, times, 0, competing=[1])
    assert ((crude >= 0) & (crude <= 1.0 - model.predict_survival(x, times, event=0) + 1e-4)).all()
    for bad in ([0], [1, 1]):
        with pytest.raises(ValueError, match=r"competing: other events than event 0, each once"):
            model.predict_cumulative_incidence(x, times, 0, competing=bad)
