"""Worker processes that leave Ctrl-C to the command that started them, and a pool stopped now.

A terminal's Ctrl-C reaches every process of the command's group. A worker that took it would
print its own traceback and die in the middle of a run; here the command hears it and ends its
workers (``stop``), as on any error. Used by the fits side by side
(``flows.lib.modeling.side_by_side``) and the experiment harness's runs (``cet_experiments.processes``).
"""

from __future__ import annotations

import signal
import threading


def ignore_interrupt() -> None:  # pragma: no cover (runs in a worker)
    """In a worker, as it starts: Ctrl-C is the command's to hear; tqdm's bars lock with a thread
    lock, not its default multiprocessing one, whose semaphore a stopped worker would leave to
    the resource tracker (a "leaked semaphore" warning at exit)."""
    from tqdm import tqdm

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    tqdm.set_lock(threading.RLock())


def stop(pool) -> None:
    """End a ``ProcessPoolExecutor`` now: the queued work cancelled, the running workers stopped
    (SIGTERM; there is no public way to stop a running call), its thread and queues ended."""
    running = list((getattr(pool, "_processes", None) or {}).values())
    for process in running:
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    for process in running:
        process.join(10)
    pool.shutdown(wait=True)
