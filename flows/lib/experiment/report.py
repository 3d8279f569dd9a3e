"""Writing one experiment report: ``metrics.json``, ``table.md`` and the figures, atomically.

Shared by ``train-evaluate`` with ``runs`` > 0, ``python -m cet_experiments`` and
``python -m cet_experiments merge``.
"""

from __future__ import annotations

import json
from pathlib import Path

from cet_model.atomic import write_text

from . import figures
from .tables import table_markdown


def write_figures(result: dict, out: Path) -> list[Path]:
    """fig2 (and fig3, and fig1 on the synthetic data) as PNGs in ``out``."""
    fig = result.get("figures") or {}
    paths = [figures.figure2(result, out / "fig2_auc_mrae.png")]
    if any(fig.get("calibration", {}).values()):
        paths.append(figures.figure3({k: v for k, v in fig["calibration"].items() if v}, out / "fig3_calibration.png"))
    if fig.get("maps"):
        paths.append(figures.figure1(fig["maps"], out / "fig1_occurrence_maps.png"))
    return paths


def write_report(result: dict, out: Path, title: str) -> None:
    """Write metrics.json, table.md and the figures atomically (temporary names, then rename).
    The occurrence-map grids are drawn, not stored in metrics.json."""
    out.mkdir(parents=True, exist_ok=True)
    write_figures(result, out)
    stored = dict(result, figures={"calibration": (result.get("figures") or {}).get("calibration")})
    write_text(out / "metrics.json", json.dumps(stored, indent=2))
    write_text(out / "table.md", table_markdown(result, title))
