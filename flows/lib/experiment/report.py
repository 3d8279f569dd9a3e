"""Writing one experiment report: ``metrics.json``, ``table.md`` and the figures, atomically.

Shared by ``train-evaluate`` with ``runs`` > 0, ``python -m cet_experiments`` and
``python -m cet_experiments merge``.
"""

from __future__ import annotations

import json
from pathlib import Path

from cet_model.atomic import claim_files, write_text

from . import figures
from .tables import table_markdown

REPORT_FILES = ("metrics.json", "table.md", "fig1_occurrence_maps.png", "fig2_auc_mrae.png", "fig3_calibration.png")


def figure_names(result: dict) -> list[str]:
    """The PNGs ``write_figures`` draws for ``result``: fig2, fig3 with calibration curves, fig1
    with occurrence maps (the synthetic data)."""
    fig = result.get("figures") or {}
    return (["fig2_auc_mrae.png"] + (["fig3_calibration.png"] if any(fig.get("calibration", {}).values()) else [])
            + (["fig1_occurrence_maps.png"] if fig.get("maps") else []))


def write_figures(result: dict, out: Path) -> list[Path]:
    """fig2 (and fig3, and fig1 on the synthetic data) as PNGs in ``out``."""
    fig = result.get("figures") or {}
    names = figure_names(result)
    paths = [figures.figure2(result, out / "fig2_auc_mrae.png")]
    if "fig3_calibration.png" in names:
        paths.append(figures.figure3({k: v for k, v in fig["calibration"].items() if v}, out / "fig3_calibration.png"))
    if "fig1_occurrence_maps.png" in names:
        paths.append(figures.figure1(fig["maps"], out / "fig1_occurrence_maps.png"))
    return paths


def is_report_folder(folder: Path) -> bool:
    """Whether ``folder`` holds an experiment report this project wrote before report folders were
    marked: a ``metrics.json`` with the report's fields."""
    try:
        record = json.loads((Path(folder) / "metrics.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and {"models", "config", "machine"} <= set(record)


def write_report(result: dict, out: Path, title: str) -> None:
    """Write metrics.json, table.md and the figures atomically (temporary names, then rename).
    The occurrence-map grids are drawn, not stored in metrics.json. Files of these names that
    this project did not write there are never replaced (``claim_files``)."""
    claim_files(out, ["metrics.json", "table.md", *figure_names(result)], legacy=is_report_folder,
                what="report folder (--out)")
    write_figures(result, out)
    stored = dict(result, figures={"calibration": (result.get("figures") or {}).get("calibration")})
    write_text(out / "metrics.json", json.dumps(stored, indent=2))
    write_text(out / "table.md", table_markdown(result, title))
