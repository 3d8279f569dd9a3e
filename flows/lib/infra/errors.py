"""Errors that end a command in one line of its own, not a traceback (``cli.interruptible``)."""

from __future__ import annotations


class InputError(ValueError):
    """A source the user handed in (a table, a Pushshift dump, a MIMIC file) that cannot be built:
    found while the build reads it, not before. Its message names the file and the column, row or
    line, never a cell's value. A command ends with that message in one line and exit status 1;
    with ``--log-level DEBUG`` the traceback is logged first."""
