"""CET: neural conditional event time models (Engelhard et al., ICML 2020).

This package holds the models, losses, estimators and metrics. It never imports prefect or
duckdb: the flows in ``flows/`` write dataset folders that :func:`load_dataset` reads.
The estimators load on first use (``from cet_model import CETModel``), so a module that needs
only ``cet_model.dataset`` or ``cet_model.atomic`` does not load PyTorch.
"""

from __future__ import annotations

import importlib

__all__ = ["BCModel", "CETModel", "ETModel", "load_model", "survival_targets"]
_HOME = {"BCModel": "models", "CETModel": "models", "ETModel": "models", "load_model": "models",
         "survival_targets": "contract"}


def __getattr__(name: str):
    if name in _HOME:
        value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)
