"""``input_dropout``: dropout on the occurrence encoder's inputs (CET, BC and the oracle)."""

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from cet_model import BCModel, CETModel, load_model
from cet_model.networks import Dropout
from tests.conftest import build

KW = dict(hidden_sizes=(16,), max_epochs=3, patience=3, lr=0.01, batch_size=50, device="cpu", seed=1)


def test_the_encoder_drops_its_inputs_while_training_and_the_decoder_reads_them_whole(small_survival):
    x, t, s, _ = small_survival
    model = build(CETModel, input_dropout=0.5, dropout=0.0, **KW).fit(x, t, s)
    net = model.net_
    assert isinstance(net.encoder.input_dropout, Dropout) and net.encoder.input_dropout.p == 0.5
    xt = torch.as_tensor(x[:50], dtype=torch.float32)
    net.train()
    with torch.no_grad():
        a, b = net.encoder(xt), net.encoder(xt)
        assert not torch.allclose(a, b), "no inputs dropped while training"
        # the first layer sees x with about half its entries zeroed and the rest doubled
        seen = []
        hook = net.encoder.net[0].register_forward_hook(lambda m, inp, out: seen.append(inp[0].clone()))
        net.encoder(xt)
        hook.remove()
        kept = seen[0] != 0
        assert 0.3 < kept.float().mean() < 0.7
        assert torch.allclose(seen[0][kept], 2 * xt[kept])
        # in the training objective the time decoder's first layer reads x whole, the encoder's dropped
        dec, enc = [], []
        hooks = [net.decoder.x_proj.register_forward_hook(lambda m, inp, out: dec.append(inp[0].clone())),
                 net.encoder.net[0].register_forward_hook(lambda m, inp, out: enc.append(inp[0].clone()))]
        log_t = torch.log(torch.as_tensor(t[:50], dtype=torch.float32))
        model._train_loss(xt, log_t, torch.as_tensor(s[:50], dtype=torch.float32), None)
        for h in hooks:
            h.remove()
        def rows_of_x(h):  # every row an undropped row of x (the objective may group the rows)
            return bool((h[:, None, :] == xt[None]).all(-1).any(1).all())
        assert dec and enc and all(rows_of_x(d) for d in dec)
        assert not all(rows_of_x(e) for e in enc)
    net.eval()
    with torch.no_grad():
        assert torch.equal(net.encoder(xt), net.encoder(xt))
    p1, p2 = model.predict_occurrence(x[:50]), model.predict_occurrence(x[:50])
    assert np.array_equal(p1, p2)


def test_the_default_network_has_no_input_dropout_and_the_same_weights(small_survival):
    x, t, s, _ = small_survival
    plain = CETModel(**KW).fit(x, t, s)
    zero = build(CETModel, input_dropout=0.0, **KW).fit(x, t, s)
    assert plain.net_.encoder.input_dropout is None
    assert [type(m) for m in plain.net_.modules()] == [type(m) for m in zero.net_.modules()]
    for k, v in plain.net_.state_dict().items():
        assert torch.equal(v, zero.net_.state_dict()[k]), k
    dropped = build(CETModel, input_dropout=0.3, **KW).fit(x, t, s)  # same initial draws, other training
    assert set(dropped.net_.state_dict()) == set(plain.net_.state_dict())  # no weights of its own
    assert not torch.equal(dropped.net_.encoder.net[0].weight, plain.net_.encoder.net[0].weight)


@pytest.mark.parametrize("cls", [CETModel, BCModel])
def test_it_is_kept_with_the_model_and_checked(tmp_path, small_survival, cls):
    x, t, s, _ = small_survival
    model = build(cls, input_dropout=0.25, **KW).fit(x, t, s)
    assert model.recipe_.input_dropout == 0.25
    assert isinstance(model.net_.encoder.input_dropout, Dropout)
    model.save(tmp_path / "m")
    assert set(load_file(tmp_path / "m" / "weights.safetensors")) == set(model.net_.state_dict())
    back = load_model(tmp_path / "m")
    assert back.recipe_.input_dropout == 0.25 and back.net_.encoder.input_dropout.p == 0.25
    assert np.allclose(back.predict_occurrence(x[:20]), model.predict_occurrence(x[:20]))
    for bad in (1.0, -0.1, "much"):
        with pytest.raises(ValueError, match="input_dropout"):
            build(cls, input_dropout=bad, **KW).fit(x, t, s)
    lbfgs = dict(KW, optimizer="lbfgs", batch_size=None, dropout=0.0)
    with pytest.raises(ValueError, match="input_dropout=0"):
        build(cls, input_dropout=0.1, **lbfgs).fit(x, t, s)
