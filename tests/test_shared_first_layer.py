"""``CETModel(shared_first_layer=True)``: one first layer read by both heads."""

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from cet_model import CETModel, load_model
from cet_model.train import trainable, training_only

KW = dict(hidden_sizes=(16,), max_epochs=200, patience=5, lr=0.01, batch_size=50, device="cpu", seed=1)


def _split(data, n_train=200):
    x, t, s, _ = data
    return (x[:n_train], t[:n_train], s[:n_train]), (x[n_train:], t[n_train:], s[n_train:])


def test_the_decoders_first_layer_is_the_encoders_shared_layer_through_the_fit(small_survival):
    (x, t, s), (xv, tv, sv) = _split(small_survival)
    model = CETModel(shared_first_layer=True, **KW).fit(x, t, s, xv, tv, sv)
    net = model.net_
    assert net.decoder.x_proj is net.encoder.shared
    assert net.encoder.own is not None and net.encoder.own is not net.encoder.shared
    assert net.encoder.net[2].in_features == 2 * 16  # ReLU, dropout, then the layer reading [shared(x), own(x)]
    # one parameter, counted once by the optimizer
    assert len({id(p) for p in net.parameters()}) == len(list(net.parameters()))
    # the occurrence logits read the shared layer: changing it changes them
    xt = torch.as_tensor(x[:20], dtype=torch.float32)
    with torch.no_grad():
        before = net.encoder(xt).clone()
        net.decoder.x_proj.weight.add_(0.5)
        assert not torch.allclose(net.encoder(xt), before)
    # the default keeps the heads apart
    plain = CETModel(**dict(KW, max_epochs=2)).fit(x, t, s)
    assert plain.net_.encoder.shared is None and plain.net_.decoder.x_proj is not plain.net_.encoder.net[0]


def test_the_encoder_stage_trains_the_shared_layer_and_leaves_the_rest_of_the_decoder(small_survival):
    (x, t, s), (xv, tv, sv) = _split(small_survival)
    kw = dict(KW, lr=0.003, seed=0, sigma="net")  # a seed whose stage finds better weights (best stage epoch 8 of 11)
    joint = CETModel(shared_first_layer=True, encoder_stage=False, **kw).fit(x, t, s, xv, tv, sv)
    staged = CETModel(shared_first_layer=True, **kw).fit(x, t, s, xv, tv, sv)
    assert joint.history_.stopped_early and staged.encoder_history_.best_epoch >= 0
    a, b = joint.net_.state_dict(), staged.net_.state_dict()
    shared = {"decoder.x_proj.weight", "decoder.x_proj.bias"}
    for name in a:
        if name.startswith("decoder.") and name not in shared:
            torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)
    assert any(not torch.equal(a[n], b[n]) for n in shared)  # the stage moved the shared layer
    with training_only(staged.net_, staged.net_.encoder):
        assert any(p is staged.net_.decoder.x_proj.weight for p in trainable(staged.net_))


def test_save_and_load_keep_the_tie_and_the_predictions(small_survival, tmp_path):
    x, t, s, _ = small_survival
    model = CETModel(shared_first_layer=True, **dict(KW, max_epochs=20)).fit(x, t, s)
    model.save(tmp_path / "m")
    stored = load_file(str(tmp_path / "m" / "weights.safetensors"))
    torch.testing.assert_close(stored["encoder.shared.weight"], stored["decoder.x_proj.weight"], rtol=0, atol=0)
    again = load_model(tmp_path / "m", device="cpu")
    assert again.shared_first_layer is True
    assert again.net_.decoder.x_proj is again.net_.encoder.shared
    np.testing.assert_array_equal(again.predict_occurrence(x), model.predict_occurrence(x))
    np.testing.assert_array_equal(again.predict_time(x), model.predict_time(x))


@pytest.mark.bad_input
@pytest.mark.parametrize("value,message", [
    ("yes", "shared_first_layer must be True or False, got 'yes'"),
    (True, r"shared_first_layer=True needs a hidden layer: hidden_sizes=\(\)"),
])
def test_bad_settings_are_refused_by_name(small_survival, value, message):
    x, t, s, _ = small_survival
    hidden = (8,) if value == "yes" else ()
    with pytest.raises(ValueError, match=message):
        CETModel(shared_first_layer=value, hidden_sizes=hidden, max_epochs=1, device="cpu").fit(x, t, s)


def test_the_cet_shared_preset_fits_through_the_experiment_harness(tmp_path):
    from cet_experiments import synthetic
    from cet_model.dataset import load_dataset
    from cet_model.evaluation import evaluate, fit_preset

    ds = load_dataset(synthetic.write(tmp_path / "syn", "independent", n=600, split_sizes=(400, 100, 100)))
    model = fit_preset("CET-shared", ds.train, ds.val, seed=0, hidden_sizes=(8,), max_epochs=5, device="cpu")
    assert model.shared_first_layer is True and model.net_.decoder.x_proj is model.net_.encoder.shared
    scores = evaluate("CET-shared", model, ds.test, ds.event_names)
    assert set(scores) == set(ds.event_names) and all(np.isfinite(r["auc"]) for r in scores.values())


def test_a_comment_encoder_feeds_the_shared_layer():
    rng = np.random.default_rng(0)
    n, length, dim = 60, 3, 4
    x = rng.standard_normal((n, 2 + length * dim)).astype(np.float32)
    t, s = np.exp(rng.standard_normal((n, 2))), (rng.random((n, 2)) < 0.5).astype(float)
    spec = {"n_aux": 2, "length": length, "dim": dim, "width": 6}
    model = CETModel(shared_first_layer=True, hidden_sizes=(8,), comment_encoder=spec, max_epochs=2,
                     device="cpu").fit(x, t, s)
    shared = model.net_.encoder.shared
    assert shared is model.net_.decoder.x_proj and shared.in_features == model.net_.features.out_features
    assert model.predict_occurrence(x).shape == (n, 2)
