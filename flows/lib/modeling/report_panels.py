"""What the figures of a dataset's report share: a grid of one panel per event, the rows that
follow an event, the first event of a competing group on them, and a model's inputs for those rows.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from cet_model.atomic import save_figure  # noqa: E402


def panels(n: int):
    """A figure with ``n`` panels, at most four a row (the spare ones hidden), and the panels."""
    ncols = min(4, n)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.9 * nrows + 0.6), squeeze=False,
                             layout="constrained")  # room for the titles, no empty band under them
    for k in range(n, nrows * ncols):
        axes[k // ncols][k % ncols].axis("off")
    return fig, [axes[k // ncols][k % ncols] for k in range(n)]


def close_figure(fig, axes, ylabel: str, title: str, path: Path) -> Path:
    """Label the first panel, title the figure, write it to ``path`` (a temporary name, then renamed)."""
    axes[0].set_ylabel(ylabel, fontsize=8)
    axes[0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10, x=0.02, ha="left")
    save_figure(fig, path)
    return path


def kept(split, j: int) -> np.ndarray:
    """The rows of ``split`` that follow event ``j`` (its mask, or every row)."""
    return np.ones(len(split), bool) if split.mask is None else split.mask[:, j] == 1


def first_kinds(split, group: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The rows that keep every event of a competing ``group`` and, on them, which came first: 0 =
    none (censored), n + 1 = the group's n-th event."""
    rows = np.logical_and.reduce([kept(split, i) for i in group])
    return rows, sum((split.S[rows, i] > 0.5) * (n + 1) for n, i in enumerate(group))


def inputs_of(x, rows: np.ndarray):
    """A model's inputs ``x`` (an array, or the comment sequences' inputs) for the boolean ``rows``."""
    return x[rows] if isinstance(x, np.ndarray) else x[np.flatnonzero(rows)]
