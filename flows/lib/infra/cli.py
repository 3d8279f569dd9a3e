"""One convention for every command line: ``--version``, ``--log-level``, help on every option.

    >>> ap = command_parser("python -m flows.example", "An example.")
    >>> args = ap.parse_args(["--log-level", "WARNING"])
    >>> args.log_level
    'WARNING'
"""

from __future__ import annotations

import argparse
import logging
import os
from importlib.metadata import PackageNotFoundError, version

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def package_version() -> str:
    """The installed distribution's version (``cet``), or 'unknown' when run from an uninstalled copy."""
    try:
        return version("cet")
    except PackageNotFoundError:
        return "unknown"


def command_parser(prog: str, description: str, **kwargs) -> argparse.ArgumentParser:
    """An ArgumentParser with the shared options. Options given before a subcommand."""
    ap = argparse.ArgumentParser(prog=prog, description=description, **kwargs)
    ap.add_argument("--version", action="version", version=f"%(prog)s (cet {package_version()})")
    ap.add_argument("--log-level", choices=LEVELS, default=os.environ.get("CET_LOG_LEVEL", "INFO").upper(),
                    help="log level of CET's own loggers (flows, cet_model) (default: $CET_LOG_LEVEL or INFO)")
    return ap


def apply_log_level(args: argparse.Namespace) -> None:
    """Set CET's loggers to the level the command line asked for."""
    for name in ("flows", "cet_model", "cet_experiments"):
        logging.getLogger(name).setLevel(args.log_level)
