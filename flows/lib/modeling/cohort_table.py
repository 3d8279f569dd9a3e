"""The dataset report's first tables, as a clinical paper's "Table 1": how often each event was seen
in each split and how long the rows were followed, then each feature on the training and test rows
with their standardised difference, where a shift between the splits shows.

Aggregates over many rows only, and no row's value. A count of 1 to ``MIN_CELL - 1`` rows (or one
that leaves so few aside) is withheld, with the standardised difference that would give it away, so
that the table can be copied into a paper under the usual small-cell rules. The rest of the report
(figure titles, the cumulative incidence table) shows counts and shares of any size.
"""

from __future__ import annotations

import numpy as np

from cet_model.nonparametric import kaplan_meier_curve
from flows.lib.modeling.report_panels import kept

MIN_CELL = 10  # counts of 1..MIN_CELL-1 rows are not shown
MAX_FEATURES = 30  # with more features, the ones whose training and test means differ most
SPLITS = ("train", "val", "test")


def count_cell(k: int, n: int) -> str:
    """``k`` of ``n`` rows as "k (p %)", withheld where it or the rest, n - k, is a small count
    (the rest would give it away).

    >>> count_cell(25, 200), count_cell(3, 200), count_cell(195, 200), count_cell(0, 200), count_cell(0, 0)
    ('25 (12.5 %)', '< 10', '> 190', '0 (0.0 %)', '0')
    """
    if 0 < k < MIN_CELL:
        return f"< {MIN_CELL}"
    if 0 < n - k < MIN_CELL:
        return f"> {n - MIN_CELL}"
    return f"{k} ({100.0 * k / n:.1f} %)" if n else str(k)


def short(v: float) -> str:
    """A number to three significant digits, without an exponent below a million.

    >>> short(1497.6), short(2640.0), short(8.1849), short(0.000123)
    ('1500', '2640', '8.18', '0.000123')
    """
    return f"{float(f'{v:.3g}'):g}" if abs(v) < 1e6 else f"{v:.3g}"


def reverse_km_median(t, s) -> float | None:
    """Median follow-up by the reverse Kaplan-Meier method (Schemper and Smith 1996): the median of
    the censoring times' Kaplan-Meier curve, an event read as censoring. Unlike the median of all
    follow-up times, early events do not shorten it. None where that curve stays above one half.

    >>> reverse_km_median([1.0, 2.0, 3.0, 4.0, 5.0], [1, 0, 1, 0, 0])   # censored at 2, 4, 5
    4.0
    """
    times, surv = kaplan_meier_curve(np.asarray(t, float), 1.0 - np.asarray(s, float))
    below = np.flatnonzero(surv <= 0.5 + 1e-9)  # an exact half, however the product rounds it
    return float(times[below[0]]) if below.size else None


def event_rows(ds, unit: str | None = None) -> list[list[str]]:
    """Per event: the rows with it observed in each split (of those the split follows for it), the
    median follow-up by reverse Kaplan-Meier and the longest, over every split's followed rows."""
    header = ["event", *(f"seen, {name} ({len(ds.splits[name])} rows)" for name in SPLITS if name in ds.splits),
              f"median follow-up{f' ({unit})' if unit else ''}", "longest"]
    rows = [header]
    for j, e in enumerate(ds.event_names):
        cells, t_all, s_all = [], [], []
        for name in SPLITS:
            if name not in ds.splits:
                continue
            split = ds.splits[name]
            keep = kept(split, j)
            cells.append(count_cell(int((split.S[keep, j] > 0.5).sum()), int(keep.sum())))
            t_all.append(split.T[keep, j])
            s_all.append(split.S[keep, j])
        t, s = np.concatenate(t_all), np.concatenate(s_all)
        median = reverse_km_median(t, s) if t.size else None
        rows.append([e, *cells, "" if median is None else short(median), short(t.max()) if t.size else ""])
    return rows


def standardised_difference(a, b) -> float | None:
    """(mean a − mean b) / the pooled standard deviation, sqrt((var a + var b) / 2): the shift of a
    feature between two groups in standard deviations (above 0.1 is read as a noticeable imbalance).
    None where both groups are constant at different values.

    >>> standardised_difference(np.array([0.0, 2.0, 4.0]), np.array([2.0, 4.0, 6.0]))   # 2 apart, SD 2
    -1.0
    >>> standardised_difference(np.ones(3), np.ones(4)), standardised_difference(np.ones(3), np.zeros(4))
    (0.0, None)
    """
    diff = float(np.mean(a) - np.mean(b))
    pooled = float(np.sqrt((np.var(a, ddof=1 if a.size > 1 else 0) + np.var(b, ddof=1 if b.size > 1 else 0)) / 2.0))
    if pooled == 0.0:
        return 0.0 if diff == 0.0 else None
    return diff / pooled


def binary(x: np.ndarray) -> bool:
    """A 0/1 column (an indicator, a category's level)."""
    return bool(np.isin(x, (0.0, 1.0)).all())


def _described(x: np.ndarray) -> str:
    """A column's summary: "k (p %)" for a 0/1 column, else "mean (SD)" to three significant digits,
    a mean that is 0 but for rounding (below a millionth of the SD) written 0.

    >>> _described(np.array([1.0, 0.0, 0.0] * 10)), _described(np.array([-1.0, 1.0 + 1e-16]))
    ('10 (33.3 %)', '0 (1.41)')
    """
    if binary(x):
        return count_cell(int(x.sum()), x.size)
    mean, sd = float(np.mean(x)), float(np.std(x, ddof=1)) if x.size > 1 else 0.0
    return f"{0.0 if abs(mean) < 1e-6 * sd else mean:.3g} ({sd:.3g})"


def label_of(name: str, labels: dict[str, str]) -> str | None:
    """A feature's label: its own, or its item's (``chart_211_mean`` is item ``chart_211``'s mean).

    >>> label_of("chart_211_mean", {"chart_211": "Heart Rate"}), label_of("age", {"chart_211": "Heart Rate"})
    ('Heart Rate', None)
    """
    parts = name.split("_")
    return next((labels[key] for key in ("_".join(parts[:k]) for k in range(len(parts), 0, -1)) if key in labels),
                None)


def standardised_columns(x: np.ndarray) -> bool:
    """Every column that is not 0/1 has mean 0 and SD 1 on these rows: standardised at the build."""
    rest = [k for k in range(x.shape[1]) if not binary(x[:, k])]
    return bool(rest) and all(abs(np.mean(x[:, k])) < 1e-6 and abs(np.std(x[:, k], ddof=1) - 1.0) < 1e-3
                              for k in rest)


def feature_rows(ds, labels: dict[str, str] | None = None) -> tuple[list[list[str]], str | None]:
    """Per feature: its summary on the training and test rows (``_described``) and their
    standardised difference; with more than ``MAX_FEATURES`` features, the ones that differ most,
    and a sentence saying so, and one where the features were standardised at the build (else None).
    ``labels``: names to show beside a feature's own (a MIMIC item's label, ``label_of``)."""
    labels = labels or {}
    tr, te = ds.train.X, ds.test.X
    names = list(ds.feature_names)
    smd = [standardised_difference(tr[:, k], te[:, k]) for k in range(len(names))]
    order = list(range(len(names)))
    note = None
    if len(names) > MAX_FEATURES:
        order = sorted(order, key=lambda k: -np.inf if smd[k] is None else -abs(smd[k]))[:MAX_FEATURES]
        order.sort()
        note = (f"The {MAX_FEATURES} of {len(names)} features whose training and test rows differ most (the largest "
                "standardised differences), in the dataset's order.")
    rows = [["feature", f"train ({len(ds.train)} rows)", f"test ({len(ds.test)} rows)", "standardised difference"]]
    for k in order:
        label = label_of(names[k], labels)
        name = names[k] + (f" ({label})" if label else "")
        cells = [_described(tr[:, k]), _described(te[:, k])]
        withheld = any(c[0] in "<>" for c in cells)  # the difference of two shares would give a withheld count away
        rows.append([name, *cells, "" if smd[k] is None or withheld else f"{smd[k]:+.2f}"])
    if standardised_columns(tr):
        note = ((note + " ") if note else "") + ("The dataset holds its features standardised (mean 0 and SD 1 on "
                                                 "the training rows), so the means and SDs are in those units.")
    return rows, note
