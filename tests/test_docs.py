"""The README is a front page and the docs hold together: links resolve, nothing points
outside the repository, the README's example runs and prints what it says."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    body = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", body, flags=re.M)}


def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 120, f"README.md has {len(lines)} lines; details belong in docs/"
    commands = [line for line in lines[:8] if line.startswith("bash scripts/")]
    assert [c.split()[1] for c in commands] == ["scripts/run-main.sh", "scripts/run-tests.sh"]
    for script in ("scripts/run-main.sh", "scripts/run-tests.sh"):
        assert (ROOT / script).is_file()


def long_sentences(text: str, limit: int = 30) -> list[str]:
    """The prose sentences of a markdown text longer than ``limit`` words (code blocks, tables and
    headings left out; a code span counts as one word, a link target as none)."""
    body = re.sub(r"```.*?```", "", text, flags=re.S)
    prose = " ".join(line for line in body.splitlines() if line.strip() and not line.lstrip().startswith(("|", "#")))
    prose = re.sub(r"`[^`]*`", "X", prose)
    prose = re.sub(r"\]\([^)]*\)", "]", prose)
    sentences = re.split(r"(?<=[.?!])\s+(?=[A-Z*`(\[])", prose)
    return [s for s in sentences if len(s.split()) > limit]


def test_readme_sentences_are_short():
    assert long_sentences("One. " + " ".join(["word"] * 31) + ".") != []
    assert (
        long_sentences("Short one. `a b c d e f g h i j k l m n o p q r s t u v w x y z aa bb cc dd ee` is one.") == []
    )
    assert long_sentences((ROOT / "README.md").read_text()) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    broken = []
    for m in LINK.finditer(page.read_text()):
        target = m.group(1) or m.group(2)
        if re.match(r"^[a-z]+://|^mailto:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    assert broken == [], f"{page.name}: broken links {broken}"


OUTSIDE = ("../" + "shared", "/" + "work/")  # the workspace around the clone (spelt apart: this file is checked too)


def test_nothing_refers_to_paths_outside_the_repository():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    offending = []
    for rel in tracked:
        path = ROOT / rel
        if path.suffix not in (".md", ".py", ".toml", ".sh", ".sql", ".cfg", ".example", "") or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if any(bad in text for bad in OUTSIDE):
            offending.append(rel)
    assert offending == []


@pytest.mark.slow
def test_readme_example_runs_as_written(tmp_path):
    text = (ROOT / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, flags=re.S).group(1)
    claimed = re.search(r"AUC against the true occurrence: ([0-9.]+)", code).group(1)
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == claimed
    assert (tmp_path / "models" / "example-cet" / "weights.safetensors").is_file()


def test_documented_stand_in_defaults_are_the_settings():
    from flows.lib.infra.settings import Settings

    text = (ROOT / "docs" / "datasets.md").read_text()
    for field in ("mimic_standin_scale", "reddit_standin_users"):
        default = Settings.model_fields[field].default
        assert f"CET_{field.upper()}, default {default:g}" in text, field


def test_the_main_jobs_time_table_is_generated_from_the_recorded_runs():
    import importlib.util

    spec = importlib.util.spec_from_file_location("main_job_times", ROOT / "benchmarks" / "main_job_times.py")
    main_job_times = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(main_job_times)
    record = main_job_times.load()
    rendered = main_job_times.table(record)
    assert rendered in (ROOT / "docs" / "pipeline.md").read_text(), "run: python benchmarks/main_job_times.py table"
    assert all({"commit", "models", "pipeline_s", "machine"} <= set(run) for run in record["runs"])
    # one row per group of default models and main-job arguments, each with its own count
    groups = {(r["models"], tuple(r.get("args") or ())) for r in record["runs"]}
    assert rendered.count("\n") == 2 + len(record["earlier"]) + len(groups)


def _readme_rows(first_cell_starts: tuple[str, ...]) -> dict[str, list[str]]:
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(first_cell_starts):
            rows[cells[0].split(" (")[0].split(",")[0]] = cells
    return rows


def test_the_readme_results_are_the_committed_records():
    """Every figure of the README's two results tables is what the committed records give (the
    real cohorts' docs/results/real, the stand-ins' docs/results/<name>), to the digits shown."""
    import json

    import numpy as np

    from cet_experiments import real_tables
    from cet_model.summary import average_over_tasks

    cohorts = ("lymph_node", "aids", "myeloid", "aidssi2", "bmt", "mgus2", "nafld")
    rows = _readme_rows(cohorts)
    assert set(rows) == set(cohorts)
    for name in cohorts:
        rec = json.loads((ROOT / "docs" / "results" / "real" / name / "metrics.json").read_text())
        a = [f"{real_tables.event_mean(rec, 'a', m, 'auc'):.3f}" for m in ("CET", "ET", "BC", "Oracle")]
        ece = " / ".join(f"{real_tables.event_mean(rec, 'a', m, 'ece'):.3f}" for m in ("CET", "ET", "BC"))
        classical = max(real_tables.event_mean(rec, "b", m, "harrell_rmst") for m in ("CoxPH", "LogNormalAFT"))
        c = f"{real_tables.event_mean(rec, 'b', 'CET', 'harrell_rmst'):.3f} / {classical:.3f}"
        expected = [f"{rec['split_sizes']['train']:,}", str(len(rec["events"])), *a, ece, c]
        assert rows[name][1:] == expected, name
    stand_ins = {"synthetic": "synthetic-reference", "MIMIC-III stand-in": "mimic-standin",
                 "Reddit stand-in": "reddit-standin"}
    rows = _readme_rows(tuple(stand_ins))
    assert set(rows) == set(stand_ins)
    for label, folder in stand_ins.items():
        rec = json.loads((ROOT / "docs" / "results" / folder / "metrics.json").read_text())
        for cell, model in zip(rows[label][2:], ("CET", "CET-paper", "ET", "BC", "Oracle"), strict=True):
            entry = rec["models"][model]
            shown = f"{np.mean(average_over_tasks(entry['tasks'], 'auc')):.3f}"
            runs = len(entry["seconds"])
            assert cell.strip("*").split(" (")[0] == shown, (label, model, cell, shown)
            assert cell.endswith(f"({runs})") == (runs != 10), (label, model, cell, runs)


NAMED = re.compile(r"(?:benchmarks|scripts|cet_experiments)/[\w./{},-]+?\.(?:py|sh|json|md|txt)\b")
AT_A_COMMIT = re.compile(r"\bat (?:commit )?`?[0-9a-f]{7,40}\b|at that commit")


def expand(name: str) -> list[str]:
    """``a_{x,y}.json`` -> ``a_x.json``, ``a_y.json``."""
    m = re.search(r"\{([^}]*)\}", name)
    return [name] if m is None else [n for part in m.group(1).split(",")
                                     for n in expand(name[:m.start()] + part + name[m.end():])]


def test_every_named_command_and_record_exists_or_names_its_commit():
    """A script or record named in the docs, the code or the tests is in the tree, or the same line
    says the commit it ran at (a removed probe is reproduced there). A script's own output path and
    CHANGELOG.md (history) are left out."""
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    missing = []
    for rel in tracked:
        path = ROOT / rel
        if rel == "CHANGELOG.md" or path.suffix not in (".md", ".py", ".sh") or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for name in (n for m in NAMED.finditer(line) for n in expand(m.group(0))):
                written_here = rel.startswith(("benchmarks/", "cet_experiments/")) and "/results/" in name
                if not (ROOT / name).exists() and not written_here and not AT_A_COMMIT.search(line):
                    missing.append(f"{rel}:{number}: {name}")
    assert missing == []


NAMED_TEST = re.compile(r"((?:tests/)?(?:\w+/)*test_\w+\.py)::(\w+)(…|\.\.\.)?")


def test_every_test_a_page_names_exists():
    """A page that cites a test as its evidence (``test_file.py::test_name``, or its first words and
    ``…``) names one that is in the suite: a renamed or removed test leaves no dangling citation."""
    files = list((ROOT / "tests").rglob("test_*.py"))
    missing = []
    for page in PAGES:
        for m in NAMED_TEST.finditer(page.read_text()):
            file, name, prefix = m.groups()
            # a bare file name may be any test file of that name; a path, that file only
            texts = [p.read_text() for p in files if str(p.relative_to(ROOT)) == file
                     or ("/" not in file and p.name == file)]
            pattern = rf"def {re.escape(name)}" + ("" if prefix else r"\(")
            if not any(re.search(pattern, text) for text in texts):
                missing.append(f"{page.name}: {m.group(0)}")
    assert missing == []
