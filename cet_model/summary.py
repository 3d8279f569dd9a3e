"""The README's results block, generated from the report folders so its numbers are metrics.json's.

    python -m cet_model.experiments summary --results docs/results --readme README.md

rewrites the text between ``<!-- results:start -->`` and ``<!-- results:end -->`` in the
README: per dataset, the average over tasks of every model (mean ± std over runs), the
search's choice, the machine, and the full per-task table folded under ``<details>``.
"""

from __future__ import annotations

import json
from pathlib import Path

from .atomic import write_text
from .experiments import TIME_METRICS, _fmt, average_over_tasks

START, END = "<!-- results:start -->", "<!-- results:end -->"

# folder under the results dir -> (heading, command, note); the order of the README
SECTIONS = {
    "synthetic-reference": ("Synthetic data, reference mode, the paper's n = 40,000 (Table 3)", None, ""),
    "mimic-demo": ("Real MIMIC-III demo, 100 patients (Table 4's tasks)", None, ""),
    "mimic-standin": ("MIMIC-III stand-in with planted truth (Table 4's tasks)", None, ""),
    "reddit-standin": ("Reddit stand-in with planted truth (Table 5's tasks)", None, ""),
}
HEADERS = {"auc": "AUC", "mrae": "MRAE", "ci": "CI", "ece": "ECE", "uno_c": "Uno's C", "ibs": "IBS"}


def average_table(result: dict) -> str:
    """One row per model: the per-run average over tasks, then mean ± std over runs."""
    lines = ["| Model | " + " | ".join(HEADERS[m] for m in TIME_METRICS) + " | runs | s / fit |",
             "|---" * (len(TIME_METRICS) + 3) + "|"]
    for name, entry in result["models"].items():
        cells = [_fmt(average_over_tasks(entry["tasks"], m)) for m in TIME_METRICS]
        secs = entry.get("seconds", [])
        per_fit = f"{sum(secs) / len(secs):.1f}" if secs else ""
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {len(secs)} | {per_fit} |")
    return "\n".join(lines)


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
        parts.append(f"As run: `{result['command']}`.")
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


def block(results_dir: Path) -> str:
    """The generated block (markers included) for every section whose folder exists."""
    body = [section(name, *spec, results_dir / name) for name, spec in SECTIONS.items()
            if (results_dir / name / "metrics.json").is_file()]
    return "\n".join([START, "", *body, END])


def update_readme(readme: Path, results_dir: Path) -> bool:
    """Replace the block in ``readme``; True when the text changed."""
    text = readme.read_text()
    if START not in text or END not in text:
        raise ValueError(f"{readme}: no {START} ... {END} markers to fill")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    new = head + block(results_dir) + tail
    if new != text:
        write_text(readme, new)
    return new != text
