"""Calendar months as the dumps name them (``YYYY-MM``, UTC).

    >>> month_range("2016-11", "2017-02")
    ['2016-11', '2016-12', '2017-01', '2017-02']
    >>> month_bounds("2017-11")   # [start, end) in Unix seconds
    (1509494400, 1512086400)
"""

from __future__ import annotations

import calendar


def month_range(first: str, last: str) -> list[str]:
    """Every month from ``first`` to ``last`` inclusive."""
    y, m = map(int, first.split("-"))
    out = []
    while f"{y:04d}-{m:02d}" <= last:
        out.append(f"{y:04d}-{m:02d}")
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


def month_bounds(month: str) -> tuple[int, int]:
    """[first second, first second of the next month) of ``month`` in Unix time (UTC)."""
    y, m = map(int, month.split("-"))
    start = calendar.timegm((y, m, 1, 0, 0, 0))
    end = calendar.timegm((y + (m == 12), 1 if m == 12 else m + 1, 1, 0, 0, 0))
    return start, end
