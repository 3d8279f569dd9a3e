"""The machine a figure was measured on: one record for every report, model and benchmark.

Standard library only at import time (torch is read inside :func:`machine`), so a benchmark
that measures a scan or an embedding can name its machine without pulling in the rest of
``cet_model``'s evaluation API.

    >>> sorted(machine())
    ['cpu_count', 'cpu_model', 'cuda', 'platform', 'processor', 'python', 'torch', 'torch_threads']
"""

from __future__ import annotations

import os
import platform


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The CPU's model name (Linux: the first ``model name`` of ``cpuinfo``; elsewhere what
    ``platform.processor()`` says), or None when neither names it. Two machines that both report
    ``x86_64`` can run the same fit to different float results; this tells them apart.

    >>> isinstance(cpu_model(), (str, type(None)))
    True
    """
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def machine() -> dict:
    """The machine a figure was measured on: platform, CPU and its model, cores, Python, torch
    and its threads, the CUDA device (None without one)."""
    import torch

    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
