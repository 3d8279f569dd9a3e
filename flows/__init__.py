"""Prefect flows and the plain functions they wire (``flows/lib``).

The plain functions log to the standard ``flows.*`` and ``cet_model.*`` loggers at INFO;
Prefect forwards those to the run logs (and the UI) only when they are named as extra
loggers, so that is the default here (a value already set in the environment wins).
"""

import logging
import os

os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "flows,cet_model")
for _name in ("flows", "cet_model"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.INFO)
