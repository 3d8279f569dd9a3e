"""CET: neural conditional event time models (Engelhard et al., ICML 2020).

This package holds the models, losses, estimators and metrics. It never imports prefect or
duckdb: the flows in ``flows/`` write dataset folders that :func:`load_dataset` reads.
"""

from .contract import survival_targets
from .models import BCModel, CETModel, ETModel, load_model

__all__ = ["BCModel", "CETModel", "ETModel", "load_model", "survival_targets"]
