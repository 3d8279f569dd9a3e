"""The results page's generated block, from the report folders, so its numbers are metrics.json's.

    python -m cet_experiments summary --results docs/results --doc docs/results.md

rewrites the text between ``<!-- results:start -->`` and ``<!-- results:end -->`` in
``docs/results.md``: per dataset, the average over tasks of every model (mean ± std over runs), the
search's choice, the machine, and the full per-task table folded under ``<details>``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from cet_model.atomic import write_text
from flows.lib.experiment.tables import average_table

START, END = "<!-- results:start -->", "<!-- results:end -->"
FORMER_CLI = "python -m cet_model.experiments"  # the harness lived in cet_model until the architecture change

# folder under the results dir -> (heading, command, note), in the order of the page
SECTIONS = {
    "synthetic-reference": ("Synthetic data, reference mode, the paper's n = 40,000 (Table 3)", None, ""),
    "mimic-demo": ("Real MIMIC-III demo, 100 patients (Table 4's tasks)", None, ""),
    "mimic-standin": ("MIMIC-III stand-in with planted truth (Table 4's tasks)", None, ""),
    "reddit-standin": ("Reddit stand-in with planted truth (Table 5's tasks)", None, ""),
    "mimic-standin-large": ("MIMIC-III stand-in at four times the size (scale 0.6)", None, ""),
}


def scratch_paths(command: str) -> tuple[str, bool]:
    """Absolute folders in a recorded command become ``<scratch>/NAME`` (the docs name no path
    of the machine they were run on); returns the command and whether anything was replaced.

    >>> scratch_paths("merge /tmp/a/seeds3-6 docs/results/x --out docs/results/x")
    ('merge <scratch>/seeds3-6 docs/results/x --out docs/results/x', True)
    """
    shown = re.sub(r"(?<![\w.])/[^\s`]+", lambda m: "<scratch>/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], command)
    return shown, shown != command


def section(name: str, heading: str, command: str | None, note: str, folder: Path) -> str:
    result = json.loads((folder / "metrics.json").read_text())
    search = result.get("search")
    ds = result.get("dataset", {})
    m = result.get("machine", {})
    parts = [f"### {heading}", "",
             f"`{command or 'bash scripts/run-experiments.sh ' + name}` → `docs/results/{name}/`{note} "
             f"(split sizes {ds.get('split_sizes')}). Machine: {m.get('processor')}, {m.get('cpu_count')} cores, "
             f"torch {m.get('torch')}, CUDA: {m.get('cuda')}."]
    if result.get("command"):
        command = result["command"]
        renamed = command.startswith(FORMER_CLI)
        command, scratch = scratch_paths(command.replace(FORMER_CLI, "python -m cet_experiments"))
        parts.append(f"As run: `{command}`" + (" (then under the harness's former name, "
                                               "`python -m cet_model.experiments`)." if renamed else ".")
                     + (" Part folders outside the repository are shown as `<scratch>/NAME`; "
                        "`metrics.json` records them verbatim." if scratch else ""))
    if search:
        best = search["best"]
        parts.append(f"Search: {search['budget']} trials; chosen estimator {best['estimator']}, "
                     f"{best['n_samples']} samples, log ε {best['log_epsilon']:.2f}, hidden {best['hidden']}, "
                     f"temperature {best['temperature']:.2f} (validation AUC {search['best_val_auc']:.3f}).")
    parts += ["", average_table(result), "", "<details><summary>Per task</summary>", ""]
    table = (folder / "table.md").read_text().splitlines()
    parts += [line for line in table if line.startswith("|")]
    parts += ["", "</details>", ""]
    return "\n".join(parts)


REAL_SECTIONS = {  # folder under the results dir -> heading, in the order of the page
    "real": "Real cohorts: seven published multi-event data sets",
    "single": "Real single-event data sets: does a default made for several events hold for one?",
}


def real_section(folder: Path, heading: str = REAL_SECTIONS["real"]) -> str:
    """The real-data benchmark's tables (``cet_experiments.real``) from its cohort records."""
    from .real_tables import tables_markdown

    records = [json.loads(p.read_text()) for p in sorted(folder.glob("*/metrics.json"))]
    commands = sorted({c for r in records for c in (r.get("commands") or {"": r.get("command")}).values() if c})
    lines = [f"### {heading}", "",
             f"`docs/results/{folder.name}/`, one record per cohort, from "
             + ("the command" if len(commands) == 1 else "the commands") + " "
             + "; ".join(f"`{scratch_paths(c)[0]}`" for c in commands) + ".", ""]
    body = tables_markdown(records).replace("\n## ", "\n#### ")
    return "\n".join(lines) + "\n" + body.replace("## Protocol", "#### Protocol", 1)


def block(results_dir: Path) -> str:
    """The generated block (markers included): the real cohorts first (multi-event, then
    single-event), then every report section
    whose folder exists."""
    real = [real_section(results_dir / name, heading) for name, heading in REAL_SECTIONS.items()
            if any((results_dir / name).glob("*/metrics.json"))]
    body = [section(name, *spec, results_dir / name) for name, spec in SECTIONS.items()
            if (results_dir / name / "metrics.json").is_file()]
    return "\n".join([START, "", *real, *body, END])


def update_results_block(doc: Path, results_dir: Path) -> bool:
    """Replace the block in ``doc``; True when the text changed."""
    text = doc.read_text()
    if START not in text or END not in text:
        raise ValueError(f"{doc}: no {START} ... {END} markers to fill")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = head + block(results_dir) + tail
    if new != text:
        write_text(doc, new)
    return new != text
