"""The suite's own set-up: one torch thread per pytest-xdist worker (docs/pipeline.md, "The suite's
time"). Two threads in each of two workers on two cores spin against each other and made fits
about ten times slower."""

import os

import torch


def test_each_xdist_worker_uses_one_torch_thread_and_a_single_process_two():
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    assert torch.get_num_threads() == (1 if workers > 1 else 2)
