"""The one renderer of tables: every table a command prints or a report writes is built from a
version's records as rows of strings (``cell`` formats a number), header first, and written here,
as aligned text for a terminal or as markdown for reports and model cards.

>>> table = [["model", "C"], ["CET", cell(0.7123)], ["ET", cell(float("nan"))]]
>>> text(table)
['  model  C', '  CET    0.712', '  ET']
>>> print(markdown(table))
| model | C |
|---|---|
| CET | 0.712 |
| ET |  |
"""

from __future__ import annotations

import math


def cell(value) -> str:
    """A table cell: "" for None or NaN, a float to three decimals, anything else as text."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def split_text(sizes: dict) -> str:
    """The split sizes in words.

    >>> split_text({"test": 137, "train": 412, "val": 137})
    '412 training, 137 validation and 137 test rows'
    """
    return (f"{sizes.get('train', 0):,} training, {sizes.get('val', 0):,} validation and {sizes.get('test', 0):,} test "
            "rows")


def text(table: list[list[str]]) -> list[str]:
    """The rows as indented, left-aligned text lines (what the CLI prints)."""
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table]


def markdown(table: list[list[str]]) -> str:
    """The rows as a markdown table, the first row its header."""
    header, *rows = table
    return "\n".join(["| " + " | ".join(header) + " |", "|---" * len(header) + "|",
                      *("| " + " | ".join(row) + " |" for row in rows)])
