"""The CPU dropout masks (``cet_model.networks.keep_mask``) are torch's own ``bernoulli_`` draws,
made faster: same masks, same generator state after, so every fit is the same to the last bit."""

import numpy as np
import pytest
import torch

from cet_model import CETModel, ETModel, networks
from cet_model.networks import Dropout, RowDropout, keep_mask

DRAWS_DIFFER = (f"keep_mask no longer makes bernoulli_'s draws on torch {torch.__version__}: its masks are still "
                "Bernoulli(keep), but fits differ from the recorded ones (docs/model.md, 'Dropout masks')")


def bernoulli_mask(shape, keep, like):
    """What the networks drew before ``keep_mask``: torch's ``bernoulli_``."""
    return torch.empty(shape, dtype=like.dtype, device=like.device).bernoulli_(keep)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape,keep", [((400, 100), 0.5), ((400, 1, 750), 0.5), ((137, 3), 0.9), ((5,), 0.1),
                                        ((0, 4), 0.5)])
def test_keep_mask_makes_the_draws_of_bernoulli_and_leaves_the_generator_alike(dtype, shape, keep):
    like = torch.empty(0, dtype=dtype)
    torch.manual_seed(7)
    expected, after_expected = bernoulli_mask(shape, keep, like), torch.rand(8)
    torch.manual_seed(7)
    got, after_got = keep_mask(shape, keep, like), torch.rand(8)
    assert got.dtype == dtype and got.shape == torch.Size(shape)
    assert torch.equal(got, expected), DRAWS_DIFFER
    assert torch.equal(after_got, after_expected), DRAWS_DIFFER  # the generator's next draws too


def test_dropout_matches_torch_dropout_forward_and_backward():
    x = torch.randn(64, 30, requires_grad=True)
    torch.manual_seed(3)
    y_torch = torch.nn.Dropout(0.5).train()(x)
    y_torch.pow(2).sum().backward()
    g_torch, x.grad = x.grad.clone(), None
    torch.manual_seed(3)
    y = Dropout(0.5).train()(x)
    y.pow(2).sum().backward()
    assert torch.equal(y, y_torch) and torch.equal(x.grad, g_torch)
    assert (y == 0).any() and (y != 0).any()
    assert torch.equal(Dropout(0.5).eval()(x), x)


def test_row_dropout_shares_one_mask_over_a_rows_samples():
    h = torch.randn(10, 4, 8)
    torch.manual_seed(1)
    out = RowDropout(0.5).train()(h)
    torch.manual_seed(1)
    mask = bernoulli_mask((10, 1, 8), 0.5, h) / 0.5
    assert torch.equal(out, h * mask)


@pytest.mark.parametrize("model_class", [CETModel, ETModel])
def test_a_fit_is_the_same_to_the_bit_as_with_torchs_bernoulli(small_survival, monkeypatch, model_class):
    x, t, s, _ = small_survival
    kw = dict(hidden_sizes=(16,), dropout=0.5, max_epochs=4, patience=10, batch_size=64, device="cpu", seed=2)
    fast = model_class(**kw).fit(x, t, s, x, t, s)
    monkeypatch.setattr(networks, "keep_mask", bernoulli_mask)
    slow = model_class(**kw).fit(x, t, s, x, t, s)
    fast_state, slow_state = fast.net_.state_dict(), slow.net_.state_dict()
    assert fast_state.keys() == slow_state.keys()
    for name in fast_state:
        assert torch.equal(fast_state[name], slow_state[name]), name
    np.testing.assert_array_equal(fast.history_.val_loss, slow.history_.val_loss)
