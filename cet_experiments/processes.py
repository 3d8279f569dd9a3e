"""Runs side by side in processes: how many, and the pool they run in.

Each process is started fresh (``spawn``: never a fork of PyTorch's threads) and fits with its own
torch threads; only the command's own process writes records and markers.
"""

from __future__ import annotations

import os


def jobs_for(asked: int | None, threads: int, tasks: int, environ=None) -> int:
    """How many processes run ``tasks`` (cohorts, or chunks of seeds): ``asked``, else the CPUs this
    process may use divided by the threads of a fit (``threads``, or ``CET_THREADS`` where set: the
    fits obey it); at most one per task, at least one.

    >>> jobs_for(None, 1, 15) >= 1, jobs_for(4, 1, 2), jobs_for(3, 1, 7)
    (True, 2, 3)
    >>> jobs_for(None, 1, 15, {"CET_THREADS": "64"})
    1
    """
    from cet_model.threads import VARIABLE, usable_cpus, whole_number

    env = os.environ if environ is None else environ
    if str(env.get(VARIABLE, "")).strip():
        threads = whole_number(VARIABLE, str(env[VARIABLE]).strip())
    n = asked if asked is not None else usable_cpus() // max(1, threads)
    return max(1, min(int(n), tasks))


def pool(jobs: int):
    """A process pool of ``jobs`` freshly started workers, which leave Ctrl-C to the command
    (``flows.lib.infra.workers.stop`` ends them)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from flows.lib.infra.workers import ignore_interrupt

    return ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"), initializer=ignore_interrupt)


def completed(futures, poll: float = 0.5):
    """``futures`` as each is done, like ``concurrent.futures.as_completed``, but this process wakes
    every ``poll`` seconds to hear Ctrl-C: the kernel may hand the signal to one of the data
    libraries' threads, and a wait with no timeout would not end before the next run does."""
    from concurrent.futures import FIRST_COMPLETED, wait

    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=poll, return_when=FIRST_COMPLETED)
        yield from done
