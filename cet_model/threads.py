"""How many CPU threads a fit uses, chosen once and said.

PyTorch's own default is the machine's physical cores, whatever share of them this process may
use: in a container limited to 2 CPUs on a 64-core host it starts 32 OpenMP threads, which spin
against each other (a fit 10-20x slower), and two fits side by side on 2 cores each take both.
A fit uses:

1. ``CET_THREADS`` threads when it is set (a whole number >= 1);
2. else PyTorch's current count (``OMP_NUM_THREADS``, ``torch.set_num_threads`` or its default),
   capped at the CPUs this process may use (its affinity, and a cgroup CPU quota when one is set)
   divided by the fits run side by side (``parallel``), at least 1. A count set lower is kept.

    >>> choose({"CET_THREADS": "3"}, cpus=8, current=8)
    (3, 'CET_THREADS=3')
    >>> choose({}, cpus=2, current=32)
    (2, 'PyTorch had 32, capped at the 2 CPUs this process may use')
    >>> choose({}, cpus=8, current=8, parallel=3)
    (2, 'PyTorch had 8, capped at the 8 CPUs this process may use, 3 fits side by side')
    >>> choose({"OMP_NUM_THREADS": "1"}, cpus=8, current=1)
    (1, 'PyTorch had 1')
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import torch

log = logging.getLogger("cet_model")
VARIABLE = "CET_THREADS"


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity, bounded by a cgroup v2 CPU quota."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            n = min(n, max(1, int(int(quota) // int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def whole_number(name: str, value: str) -> int:
    """The environment variable ``name``'s ``value`` as a whole number >= 1, or a ValueError naming it."""
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{name}={value!r}: expected a whole number >= 1")
    return n


def choose(environ=None, *, cpus: int | None = None, parallel: int = 1, current: int | None = None) -> tuple[int, str]:
    """(threads, why) for one fit of ``parallel`` run side by side."""
    env = os.environ if environ is None else environ
    value = str(env.get(VARIABLE, "")).strip()
    if value:
        return whole_number(VARIABLE, value), f"{VARIABLE}={value}"
    current = torch.get_num_threads() if current is None else current
    cpus = usable_cpus() if cpus is None else cpus
    cap = max(1, cpus // max(1, parallel))
    if current <= cap:
        return current, f"PyTorch had {current}"
    return cap, (f"PyTorch had {current}, capped at the {cpus} CPUs this process may use"
                 + (f", {parallel} fits side by side" if parallel > 1 else ""))


@contextlib.contextmanager
def fitting_threads(parallel: int = 1):
    """PyTorch's CPU threads set to ``choose``'s for the block, then put back; logged once per change."""
    n, why = choose(parallel=parallel)
    before = torch.get_num_threads()
    if n != before:
        log.info("fitting with %d CPU thread%s (%s; CET_THREADS sets it)", n, "" if n == 1 else "s", why)
        torch.set_num_threads(n)
    try:
        yield n
    finally:
        if n != before:
            torch.set_num_threads(before)
