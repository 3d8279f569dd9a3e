"""Comment embeddings read by rows (``CommentInputs``): the same fit and predictions as the
flat in-memory matrix, chunked predictions, float16 memory maps, errors that name the row.
(Peak memory of such fits: benchmarks/reddit_at_scale.py, docs/benchmarks.md.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cet_model.comments import CommentInputs, RowView, flatten_inputs
from cet_model.models import BCModel, CETModel, ETModel

N, L, D, A, M = 240, 4, 6, 3, 2
SPEC = {"n_aux": A, "length": L, "dim": D, "width": 5}


def _data(seed=0):
    rng = np.random.default_rng(seed)
    aux = rng.standard_normal((N, A))
    seq = rng.standard_normal((N, L, D)).astype(np.float32)
    signal = seq[:, :, 0].mean(1)
    c = rng.random((N, M)) < 1 / (1 + np.exp(-3 * signal[:, None]))
    t = np.exp(rng.normal(0.5 * signal[:, None], 0.4, (N, M)))
    cens = rng.uniform(0.3, 4.0, (N, M))
    s = (c & (t < cens)).astype(float)
    return aux, seq, np.where(s == 1, t, cens), s


@pytest.mark.parametrize("cls", [CETModel, ETModel, BCModel])
def test_streamed_fit_and_predictions_equal_the_in_memory_ones(tmp_path, cls):
    aux, seq, T, S = _data()
    np.save(tmp_path / "seq.npy", seq)
    mapped = np.load(tmp_path / "seq.npy", mmap_mode="r")
    flat = flatten_inputs(aux, seq)
    lazy = CommentInputs(aux, mapped)
    kw = dict(hidden_sizes=(8,), comment_encoder=SPEC, max_epochs=4, batch_size=50, device="cpu", seed=3)
    va = slice(200, None)
    a = cls(**kw).fit(flat[:200], T[:200], S[:200], flat[va], T[va], S[va])
    b = cls(**kw).fit(lazy[np.arange(200)], T[:200], S[:200], lazy[np.arange(200, N)], T[va], S[va])
    for (k, va_), vb in zip(a.net_.state_dict().items(), b.net_.state_dict().values(), strict=True):
        assert torch.equal(va_, vb), k
    assert a.history_.val_loss == b.history_.val_loss
    np.testing.assert_array_equal(a.predict_occurrence(flat), b.predict_occurrence(lazy))
    if cls is not BCModel:
        np.testing.assert_array_equal(a.predict_time(flat), b.predict_time(lazy))
        np.testing.assert_array_equal(a.predict_survival(flat, [0.5, 1.0]), b.predict_survival(lazy, [0.5, 1.0]))
    if cls is CETModel:  # every prediction in one pass, joined chunk by chunk key by key
        whole, joined = (model.predict_all(x, (0.5,), [1.0], (2.0,)) for model, x in ((a, flat), (b, lazy)))
        for key in ("occurrence", "survival"):
            np.testing.assert_array_equal(whole[key], joined[key])
        np.testing.assert_array_equal(whole["time"][0.5], joined["time"][0.5])
        np.testing.assert_array_equal(whole["rmst"][2.0], joined["rmst"][2.0])
    assert a.objective_score(flat, T, S) == b.objective_score(lazy, T, S)


def test_predictions_stream_in_chunks_and_keep_the_row_order(monkeypatch):
    import cet_model.rows as streaming

    aux, seq, T, S = _data(1)
    model = CETModel(hidden_sizes=(8,), comment_encoder=SPEC, max_epochs=2, device="cpu").fit(
        flatten_inputs(aux, seq), T, S)
    whole = model.predict_occurrence(CommentInputs(aux, seq))
    whole_all = model.predict_all(CommentInputs(aux, seq), (0.5,), [1.0], (2.0,))
    seen = []
    real_rows = CommentInputs.rows

    def rows(self, index):
        out = real_rows(self, index)
        seen.append(len(out))
        return out
    monkeypatch.setattr(CommentInputs, "rows", rows)
    monkeypatch.setattr(streaming, "EVAL_ELEMENTS", 37 * (A + L * D))  # 37 rows per chunk
    chunked = model.predict_occurrence(CommentInputs(aux, seq))
    assert max(seen) == 37 and sum(seen) == N
    np.testing.assert_allclose(chunked, whole, rtol=1e-6)
    chunked_all = model.predict_all(CommentInputs(aux, seq), (0.5,), [1.0], (2.0,))  # chunks joined key by key
    np.testing.assert_allclose(chunked_all["time"][0.5], whole_all["time"][0.5], rtol=1e-6)
    np.testing.assert_allclose(chunked_all["survival"], whole_all["survival"], rtol=1e-6)
    np.testing.assert_allclose(chunked_all["rmst"][2.0], whole_all["rmst"][2.0], rtol=1e-6)


def test_float16_memory_map_and_row_views(tmp_path):
    aux, seq, _, _ = _data()
    np.save(tmp_path / "seq16.npy", seq.astype(np.float16))
    mapped = np.load(tmp_path / "seq16.npy", mmap_mode="r")
    rows = np.array([5, 1, 7])
    lazy = CommentInputs(aux, RowView(mapped, np.arange(N)))[rows]
    got = lazy.rows(slice(None))
    assert got.dtype == np.float32 and got.shape == (3, A + L * D)
    np.testing.assert_allclose(got[:, A:], seq[rows].reshape(3, -1), atol=2e-3)
    np.testing.assert_array_equal(np.asarray(lazy), got)
    mask = np.zeros(N, bool)
    mask[[2, 9]] = True
    np.testing.assert_array_equal(CommentInputs(aux, mapped)[mask].aux, aux[[2, 9]].astype(np.float32))


def test_bad_rows_are_named():
    aux, seq, T, S = _data()
    seq[123, 2, 4] = np.nan
    with pytest.raises(ValueError, match=r"X: non-finite value \(NaN\) at row 123, column 19"):
        CETModel(comment_encoder=SPEC, max_epochs=1, device="cpu").fit(CommentInputs(aux, seq), T, S)
    with pytest.raises(ValueError, match=r"sequences must be \(n, L, D\) with n = 240"):
        CommentInputs(aux, seq[:10])
    with pytest.raises(ValueError, match="expected 99 columns, got 27"):
        CommentInputs(aux, seq).check("X", 99)


def test_a_row_view_is_written_block_by_block_with_np_save_bytes(tmp_path):
    from cet_model.dataset import save_rows

    seq = np.random.default_rng(0).standard_normal((50, 4, 3)).astype(np.float32)
    order = np.random.default_rng(1).permutation(50)
    np.save(tmp_path / "whole.npy", seq[order])
    save_rows(tmp_path / "blocks.npy", RowView(seq, order), rows_per_write=7)
    assert (tmp_path / "blocks.npy").read_bytes() == (tmp_path / "whole.npy").read_bytes()


def test_npy_rows_reads_any_rows_like_np_load(tmp_path):
    from cet_model.comments import NpyRows

    arr = np.random.default_rng(2).standard_normal((300, 5, 3)).astype(np.float16)
    np.save(tmp_path / "a.npy", arr)
    rows = NpyRows(tmp_path / "a.npy")
    assert rows.shape == arr.shape and rows.dtype == np.float16 and len(rows) == 300
    for index in (np.array([5, 6, 7, 2, 299, 0, 6]), np.arange(300)[::-1], slice(10, 50), slice(0, 300, 7),
                  np.zeros(300, bool), np.array([], dtype=np.int64), np.array([-1])):
        np.testing.assert_array_equal(rows[index], arr[index])
    np.testing.assert_array_equal(np.asarray(rows), arr)
    with pytest.raises(IndexError, match="out of range"):
        rows[np.array([300])]


def test_npy_rows_refuses_bad_files_naming_them(tmp_path):
    from cet_model.comments import NpyRows

    (tmp_path / "text.npy").write_text("not an array")
    with pytest.raises(ValueError, match=r"text.npy: not a readable .npy array"):
        NpyRows(tmp_path / "text.npy")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=r"objects.npy: dtype object, expected numbers"):
        NpyRows(tmp_path / "objects.npy")
    np.save(tmp_path / "fortran.npy", np.asfortranarray(np.ones((4, 3))))
    with pytest.raises(ValueError, match=r"fortran.npy: expected a C-ordered array"):
        NpyRows(tmp_path / "fortran.npy")
    np.save(tmp_path / "cut.npy", np.ones((100, 8)))
    data = (tmp_path / "cut.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:-16])
    with pytest.raises(ValueError, match=r"cut.npy: truncated"):
        NpyRows(tmp_path / "cut.npy")


def test_only_the_aux_features_are_standardised_next_to_comment_embeddings():
    """Aux features in raw units are scaled, the embeddings never; the same from the flat matrix
    and from the lazy rows."""
    aux, seq, T, S = _data(2)
    aux = 50 + 10 * aux  # e.g. an age
    kw = dict(hidden_sizes=(8,), comment_encoder=SPEC, max_epochs=3, batch_size=50, device="cpu", seed=1)
    a = CETModel(**kw).fit(flatten_inputs(aux, seq), T, S)
    b = CETModel(**kw).fit(CommentInputs(aux, seq), T, S)
    assert len(a.feature_scaling_[0]) == A
    np.testing.assert_array_equal(a.feature_scaling_[0], b.feature_scaling_[0])
    np.testing.assert_array_equal(
        a.predict_occurrence(CommentInputs(aux, seq)), b.predict_occurrence(flatten_inputs(aux, seq))
    )


@pytest.mark.parametrize("stored", [np.float32, np.float16])
def test_inputs_copied_to_the_device_train_as_the_streamed_ones(tmp_path, monkeypatch, stored):
    """On CUDA, comment inputs that fit are copied onto the device once (``_DeviceRows``) instead of
    streamed batch by batch. Forced here on the CPU (the class is device-agnostic): scaled raw aux
    features, a float16 memory map read through a row view, the same weights and validation losses
    as the streamed fit; a CPU model never copies them (its memory stays bounded by a batch)."""
    import cet_model.rows as streaming

    aux, seq, T, S = _data(4)
    aux = 50 + 10 * aux  # scaled by the model
    np.save(tmp_path / "seq.npy", seq.astype(stored))
    lazy = CommentInputs(aux, np.load(tmp_path / "seq.npy", mmap_mode="r"))
    kw = dict(hidden_sizes=(8,), comment_encoder=SPEC, max_epochs=3, batch_size=50, device="cpu", seed=2)
    fit, va = np.arange(180), np.arange(180, N)

    def fitted():
        return CETModel(**kw).fit(lazy[fit], T[fit], S[fit], lazy[va], T[va], S[va])

    built = []
    real_init = streaming.DeviceRows.__init__
    monkeypatch.setattr(streaming.DeviceRows, "__init__", lambda self, *a: built.append(1) or real_init(self, *a))
    streamed = fitted()
    assert not built, "a CPU model copied its comment inputs"
    monkeypatch.setattr(streaming.DeviceRows, "fits", classmethod(lambda cls, source, device: True))
    resident = fitted()
    assert len(built) == 2  # training and validation rows
    rows = streaming.DeviceRows(lazy[va], resident._scaled, resident.torch_dtype_, torch.device("cpu"))
    assert rows.sequences.dtype == (torch.float16 if stored == np.float16 else torch.float32)
    torch.testing.assert_close(
        rows[torch.tensor([3, 0])], streaming.Rows(lazy[va], resident._x_tensor)[torch.tensor([3, 0])], rtol=0, atol=0
    )
    for (k, a), b in zip(streamed.net_.state_dict().items(), resident.net_.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
    assert streamed.history_.val_loss == resident.history_.val_loss


def test_encoder_stage_on_streamed_comments_reuses_the_frozen_parts_with_the_same_fit(tmp_path):
    """A decoder without c (closed form): the encoder stage computes the frozen comment encoder's
    and decoder's outputs on the validation rows once; the fit is the one that recomputes them (the
    same weights; with a sigma per row the monitored values agree to float32 rounding)."""
    aux, seq, T, S = _data(2)
    np.save(tmp_path / "seq.npy", seq)
    lazy = CommentInputs(aux, np.load(tmp_path / "seq.npy", mmap_mode="r"))
    kw = dict(
        hidden_sizes=(8,),
        comment_encoder=SPEC,
        condition_on_occurrence=False,
        max_epochs=300,
        patience=4,
        lr=0.01,
        batch_size=50,
        device="cpu",
        seed=3,
    )
    calls = []

    class Uncached(CETModel):
        def _frozen_decoder_val_loss(self, *rows):
            calls.append("uncached")
            return lambda: self._objective_value(*rows)

    va = slice(200, None)
    fits = [
        cls(**kw).fit(lazy[np.arange(200)], T[:200], S[:200], lazy[np.arange(200, N)], T[va], S[va])
        for cls in (Uncached, CETModel)
    ]
    assert calls == ["uncached"] and fits[1].encoder_history_ is not None
    assert len(fits[1].encoder_history_.val_loss) > 1
    np.testing.assert_allclose(fits[0].encoder_history_.val_loss, fits[1].encoder_history_.val_loss, rtol=1e-6)
    for (k, a), b in zip(fits[0].net_.state_dict().items(), fits[1].net_.state_dict().values(), strict=True):
        assert torch.equal(a, b), k
