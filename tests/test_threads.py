"""The CPU threads of a fit: CET_THREADS, else PyTorch's count capped at the usable CPUs; put back after."""

import numpy as np
import pytest
import torch

from cet_model import CETModel, threads

FAST = dict(hidden_sizes=(4,), max_epochs=2, device="cpu")


def threads_while_fitting(x, t, s):
    seen = []
    CETModel(**FAST).fit(x, t, s, on_epoch=lambda epoch, hist: seen.append(torch.get_num_threads()))
    return set(seen)


def test_cet_threads_sets_a_fit_and_is_put_back(small_survival, monkeypatch):
    x, t, s, _ = small_survival
    torch.set_num_threads(2)
    monkeypatch.setenv("CET_THREADS", "1")
    assert threads_while_fitting(x, t, s) == {1}
    assert torch.get_num_threads() == 2


def test_more_threads_than_cpus_are_capped_and_fewer_kept(small_survival, monkeypatch):
    x, t, s, _ = small_survival
    monkeypatch.delenv("CET_THREADS", raising=False)
    cpus = threads.usable_cpus()
    torch.set_num_threads(cpus + 3)
    assert threads_while_fitting(x, t, s) == {cpus}
    assert torch.get_num_threads() == cpus + 3
    torch.set_num_threads(1)
    assert threads_while_fitting(x, t, s) == {1}


@pytest.mark.bad_input
@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_cet_threads_is_refused_naming_it(small_survival, monkeypatch, value):
    x, t, s, _ = small_survival
    monkeypatch.setenv("CET_THREADS", value)
    with pytest.raises(ValueError, match=f"CET_THREADS={value!r}"):
        CETModel(**FAST).fit(x, t, s)


def test_side_by_side_fits_share_the_cpus():
    assert threads.choose({}, cpus=4, current=4, parallel=2)[0] == 2
    assert threads.choose({}, cpus=2, current=2, parallel=3)[0] == 1
    assert np.isfinite(threads.usable_cpus())
