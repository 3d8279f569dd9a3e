"""Checks that need a CUDA device (skipped without one; CI has none, the GPU machine runs them).

A model on a GPU must compute what it computes on the CPU, up to rounding: the fused decoder's
forward and backward, every objective's value and gradient, the dropout masks, and the
predictions of a model trained on a GPU and then scored on a CPU (the registry's usual path: train
where the GPU is, score where the data are). Run them with ``pytest -m gpu``.
"""

import numpy as np
import pytest
import torch

from cet_model.fused import conditional_hidden
from cet_model.metrics import occurrence_auc
from cet_model.models import CETModel
from cet_model.networks import Dropout, keep_mask
from tests.conftest import build

GPU = "cuda"  # a name, so that the checks can be dry-run on a machine without one (GPU = "cpu")
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _data(n: int, m: int, seed: int = 0):
    """X (n, 4), T, S, C (n, m): occurrence depends on x, time on x and on event 0's occurrence."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4))
    logit = 1.5 * x[:, [j % 4 for j in range(m)]] - 0.5
    c = (rng.random((n, m)) < 1 / (1 + np.exp(-logit))).astype(float)
    log_t = 0.4 * x[:, 3:4] - 0.6 * c[:, :1] + 0.5 * rng.standard_normal((n, m))
    cens = rng.uniform(0.2, 4.0, (n, m))
    s = ((c == 1) & (np.exp(log_t) < cens)).astype(float)
    t = np.where(s == 1, np.exp(log_t), cens)
    return x, t, s, c


def test_fused_decoder_forward_and_backward_match_cpu():
    gen = torch.Generator().manual_seed(0)
    n, k, m, h, o = 300, 17, 5, 40, 10
    shapes = dict(a=(n, h), c=(n, k, m), V=(m, h), mask=(n, 1, h), A=(h, o), b=(o,))
    cpu = {name: torch.randn(shape, generator=gen, dtype=torch.float64) for name, shape in shapes.items()}
    cpu["mask"] = (cpu["mask"] > 0).double() * 2.0
    gpu = {name: v.to(GPU) for name, v in cpu.items()}
    grad_out = torch.randn((n, k, o), generator=gen, dtype=torch.float64)
    results = []
    for tensors, g in ((cpu, grad_out), (gpu, grad_out.to(GPU))):
        leaves = {name: v.clone().requires_grad_(name != "mask") for name, v in tensors.items()}
        out = conditional_hidden(*leaves.values())
        out.backward(g)
        results.append([out.detach().cpu()] + [leaves[name].grad.cpu() for name in ("a", "c", "V", "A", "b")])
    for on_cpu, on_gpu in zip(*results, strict=True):
        torch.testing.assert_close(on_gpu, on_cpu, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("objective,estimator,max_patterns", [
    ("marginal", "exact", 64), ("marginal", "importance", 2), ("paper", "exact", 64), ("bound", "exact", 64)])
def test_objective_value_and_gradient_match_cpu(tmp_path, objective, estimator, max_patterns):
    """The same float64 weights on both devices: the validation objective (exact sums, or the
    importance-weighted bound from the same CPU-drawn uniforms) and the gradient of the training
    objective with dropout off agree to rounding."""
    x, t, s, _ = _data(300, 3)
    model = build(CETModel, objective=objective, estimator=estimator, max_patterns=max_patterns, hidden_sizes=(16,),
                     max_epochs=2, dtype="float64", device="cpu").fit(x, t, s)
    gpu = CETModel.load(model.save(tmp_path / "model"), device=GPU)
    assert gpu.objective_score(x, t, s) == pytest.approx(model.objective_score(x, t, s), rel=1e-10)
    if estimator == "exact":  # deterministic: no draws in training either
        grads = []
        for fitted in (model, gpu):
            fitted.net_.eval()
            fitted.net_.zero_grad()
            fitted._train_loss(*fitted._tensors(x, t, s, None)).backward()
            grads.append({k: p.grad.cpu() for k, p in fitted.net_.named_parameters() if p.grad is not None})
        assert grads[0].keys() == grads[1].keys() and grads[0]
        for name in grads[0]:
            torch.testing.assert_close(grads[1][name], grads[0][name], rtol=1e-9, atol=1e-12, msg=name)


def test_dropout_masks_on_gpu_keep_their_share():
    like = torch.empty(0, device=GPU)
    mask = keep_mask((400, 750), 0.7, like)
    assert mask.device.type == GPU and set(mask.unique().tolist()) == {0.0, 1.0}
    assert abs(mask.mean().item() - 0.7) < 0.01
    out = Dropout(0.5).train()(torch.ones((400, 750), device=GPU))
    assert set(out.unique().tolist()) == {0.0, 2.0} and abs(out.mean().item() - 1.0) < 0.02


def test_model_trained_on_gpu_predicts_the_same_on_cpu(tmp_path):
    """M = 9, so time predictions average over 100 drawn occurrence patterns of the other events
    (2^8 > 100): those draws must not depend on the device the model is loaded on."""
    x, t, s, _ = _data(1500, 9)
    fit, val = slice(0, 1200), slice(1200, None)
    gpu = CETModel(hidden_sizes=(32,), max_epochs=5, batch_size=256, device=GPU).fit(
        x[fit], t[fit], s[fit], x[val], t[val], s[val])
    assert gpu.device_.type == GPU
    cpu = CETModel.load(gpu.save(tmp_path / "model"), device="cpu")
    np.testing.assert_allclose(cpu.predict_occurrence(x), gpu.predict_occurrence(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cpu.predict_time(x), gpu.predict_time(x), rtol=1e-4)
    np.testing.assert_allclose(cpu.predict_survival(x[:200], [0.5, 1.0, 2.0]),
                               gpu.predict_survival(x[:200], [0.5, 1.0, 2.0]), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(cpu.predict_rmst(x[:200], 2.0), gpu.predict_rmst(x[:200], 2.0), rtol=1e-4)
    assert cpu.objective_score(x[val], t[val], s[val]) == pytest.approx(
        gpu.objective_score(x[val], t[val], s[val]), rel=1e-4
    )


def test_comment_inputs_on_the_gpu_train_as_the_streamed_ones(tmp_path, monkeypatch):
    """Comment inputs that fit are copied onto the GPU once (float16 kept) instead of streamed by
    batch from the memory map; the fit is the same."""
    import cet_model.rows as streaming
    from cet_model.comments import CommentInputs

    rng = np.random.default_rng(0)
    n, length, dim = 600, 5, 12
    seq = rng.standard_normal((n, length, dim)).astype(np.float16)
    aux = 40 + 10 * rng.standard_normal((n, 2))
    signal = seq[:, :, 0].astype(float).mean(1)
    x, t, s, _ = _data(n, 2)
    s = s * (signal[:, None] > -0.2)
    np.save(tmp_path / "seq.npy", seq)
    lazy = CommentInputs(aux, np.load(tmp_path / "seq.npy", mmap_mode="r"))
    kw = dict(
        hidden_sizes=(16,),
        comment_encoder={"n_aux": 2, "length": length, "dim": dim, "width": 6},
        max_epochs=3,
        batch_size=100,
        device=GPU,
        seed=5,
    )
    fit, val = np.arange(450), np.arange(450, n)
    assert streaming.DeviceRows.fits(lazy, torch.device(GPU))
    resident = CETModel(**kw).fit(lazy[fit], t[fit], s[fit], lazy[val], t[val], s[val])
    monkeypatch.setattr(streaming.DeviceRows, "fits", classmethod(lambda cls, source, device: False))
    streamed = CETModel(**kw).fit(lazy[fit], t[fit], s[fit], lazy[val], t[val], s[val])
    for (k, a), b in zip(streamed.net_.state_dict().items(), resident.net_.state_dict().values(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=k)
    np.testing.assert_allclose(resident.history_.val_loss, streamed.history_.val_loss, rtol=1e-5)


def test_default_fit_on_gpu_learns_what_it_learns_on_cpu():
    """The default CET with early stopping and the encoder stage, once per device from the same
    seed: the random streams differ, so the fits do, but not in what they learn."""
    x, t, s, c = _data(3000, 3, seed=1)
    fit, val, test = slice(0, 1800), slice(1800, 2400), slice(2400, None)
    aucs = {}
    for device in ("cpu", GPU):
        model = CETModel(max_epochs=60, patience=4, device=device).fit(x[fit], t[fit], s[fit], x[val], t[val], s[val])
        assert model.encoder_history_ is not None, f"the encoder stage did not run on {device}"
        p = model.predict_occurrence(x[test])
        aucs[device] = np.array([occurrence_auc(c[test, j], p[:, j]) for j in range(3)])
    assert np.all(aucs["cpu"] > 0.75), aucs
    np.testing.assert_allclose(aucs[GPU], aucs["cpu"], atol=0.02)
