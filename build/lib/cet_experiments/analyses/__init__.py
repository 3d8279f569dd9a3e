"""Analyses behind statements in docs/ (run as scripts; see each module's docstring)."""
