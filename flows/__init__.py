"""Prefect flows and the plain functions they wire (``flows/lib``).

The plain functions log to the standard ``flows.*`` and ``cet_model.*`` loggers at INFO;
Prefect forwards those to the run logs (and the UI) only when they are named as extra
loggers, so that is the default here (a value already set in the environment wins). Python
warnings (a model's "no observed time for event ...", a library's) are logged too, to
``py.warnings``, so a served run's warnings are in its run log, not only on the worker's
terminal. A command that runs no flow (``python -m flows.train explain``) logs to the terminal only: the
API has no run to file its lines under, and Prefect's warning that it cannot is turned off.

Every entry point (``python -m flows.<name>``) imports this package first, so it also turns
Prefect's analytics off before Prefect is imported: a first command on a fresh machine has no
network to report to, and would otherwise print telemetry errors. And it gives the temporary
server a command starts (no PREFECT_API_URL) 90 s to come up instead of Prefect's 20: on a busy
2-core machine its start-up took longer than 20 s and the command failed before any work.

Polars' allocator (jemalloc) keeps freed memory until its next allocation by default: after
loading a large dataset, the command and each fit worker would go on holding what loading freed.
Here a background thread returns it after a second (``_RJEM_MALLOC_CONF``; the peak memory of
all processes is ``benchmarks/large_table.py``'s ``peak_total_pss_mib``).
"""

import logging
import os

os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "flows,cet_model,py.warnings")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("_RJEM_MALLOC_CONF", "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0")
for _name in ("flows", "cet_model"):
    if logging.getLogger(_name).level == logging.NOTSET:
        logging.getLogger(_name).setLevel(logging.INFO)
logging.captureWarnings(True)  # a warning (a model's, a library's) is a log line: in a flow run, in its run log
