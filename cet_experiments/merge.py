"""Merge experiment reports run on separate seeds into one, as if one command had run them all.

    python -m cet_experiments dataset --data D --runs 5 --out parts/a
    python -m cet_experiments dataset --data D --runs 5 --first-seed 5 --out parts/b   # elsewhere, or beside
    python -m cet_experiments merge parts/a parts/b --out results/D

Every part must come from the same dataset (the same data: the fingerprint of its files, which
reports record, so that synthetic parts each writing their data under their own
``--out`` merge; for older reports the same path; and split sizes), the same hidden sizes, epoch
cap and patience, and the same settings for each model they share; each model's seeds must not
overlap between parts. Runs are ordered by seed, so merging seeds 0-4 and 5-9 gives the lists a
single ``--runs 10`` run would have written (fits are seeded, so the figures match too). The
calibration curves are the ones of each model's lowest seed; the synthetic occurrence maps are not
stored in ``metrics.json`` and are not redrawn.

After a preset's settings change (e.g. a new product default), ``--drop-first CET,...`` leaves
those models out of the first part, so that the later parts' reruns replace them:

    python -m cet_experiments merge results/D parts/new-a parts/new-b --drop-first CET --out results/D
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from flows.lib.experiment.report import write_report

_SHARED_CONFIG = ("hidden_sizes", "max_epochs", "patience")
log = logging.getLogger("cet_experiments")


def seeds_of(result: dict, model: str) -> list[int]:
    """The seeds a report ran ``model`` with (``config.seeds`` if merged, else first_seed onward).

    >>> seeds_of({"config": {"first_seed": 3, "model_runs": {"CET": 2}}}, "CET")
    [3, 4]
    """
    config = result["config"]
    if "seeds" in config:
        return list(config["seeds"][model])
    return list(range(config["first_seed"], config["first_seed"] + config["model_runs"][model]))


def merge_results(parts: list[dict], names: list[str] | None = None) -> dict:
    """One result from several ``metrics.json`` dicts run on disjoint seeds.

    ``names`` label the parts in errors (default "part 1", ...). Raises ``ValueError`` naming the
    parts and the field when they do not describe the same experiment, or a seed twice.
    """
    if not parts:
        raise ValueError("merge: no parts given")
    names = names or [f"part {i + 1}" for i in range(len(parts))]
    if len(names) != len(parts):
        raise ValueError(f"merge: {len(parts)} parts but {len(names)} names")
    first = parts[0]
    _check_same_experiment(parts, names)
    settings, resolved, runs = _collect_runs(parts, names)
    models: dict[str, dict] = {}
    calibration = {e: {} for e in first["models"][next(iter(first["models"]))]["tasks"]}
    for model, entries in runs.items():
        entries.sort()
        models[model] = _merged_model(parts, model, entries)
        lowest = parts[entries[0][1]]
        for task, curves in ((lowest.get("figures") or {}).get("calibration") or {}).items():
            if model in curves:
                calibration.setdefault(task, {})[model] = curves[model]
    model_runs = {m: len(e) for m, e in runs.items()}
    seeds = {m: [s for s, _, _ in e] for m, e in runs.items()}
    config = {"runs": max(model_runs.values()), "model_runs": model_runs,
              "first_seed": min(min(s) for s in seeds.values()), "seeds": seeds}
    config |= {k: first["config"].get(k) for k in _SHARED_CONFIG}
    config["models"] = {m: s for m, (s, _) in settings.items()}
    if resolved:
        config["resolved"] = {m: s for m, (s, _) in resolved.items()}
    commands = [p.get("command") for p in parts if p.get("command")]
    return {"models": models, "figures": {"calibration": calibration}, "config": config,
            "dataset": first["dataset"], "machine": first.get("machine"),
            "parts": [{"name": n, "command": p.get("command"), "machine": p.get("machine"),
                       "seeds": {m: seeds_of(p, m) for m in p["models"]}} for p, n in zip(parts, names, strict=True)],
            "command": " + ".join(commands)}


# the config entries keyed by model
_PER_MODEL_CONFIG = ("model_runs", "seeds", "models", "resolved")


def _check_same_experiment(parts: list[dict], names: list[str]) -> None:
    """The same data (fingerprint, else path; split sizes) and the same shared config in every part."""
    first, first_name = parts[0], names[0]
    for part, name in zip(parts[1:], names[1:], strict=True):
        # the data's fingerprint where both parts record one (newer reports), else the path
        same_data = "fingerprint" if part["dataset"].get("fingerprint") and first["dataset"].get("fingerprint") \
            else "path"
        for key in (same_data, "split_sizes"):
            if part["dataset"].get(key) != first["dataset"].get(key):
                raise ValueError(f"merge: {name} and {first_name} differ in dataset {key}: "
                                 f"{part['dataset'].get(key)!r} vs {first['dataset'].get(key)!r}")
        for key in _SHARED_CONFIG:
            if part["config"].get(key) != first["config"].get(key):
                raise ValueError(f"merge: {name} and {first_name} differ in config {key}: "
                                 f"{part['config'].get(key)!r} vs {first['config'].get(key)!r}")


def _collect_runs(parts: list[dict], names: list[str]) -> tuple[dict, dict, dict]:
    """Each model's settings (as given, and resolved with defaults where recorded) and its runs
    as (seed, part index, row in that part); a setting that differs or a seed twice is an error."""
    settings: dict[str, tuple[dict, str]] = {}
    resolved: dict[str, tuple[dict, str]] = {}  # full settings, defaults included (newer reports)
    runs: dict[str, list[tuple[int, int, int]]] = {}  # model -> (seed, part index, row in that part)
    for i, (part, name) in enumerate(zip(parts, names, strict=True)):
        for model in part["models"]:
            setting = part["config"]["models"][model]
            if model in settings and settings[model][0] != setting:
                raise ValueError(f"merge: {name} and {settings[model][1]} train {model} with different settings: "
                                 f"{setting!r} vs {settings[model][0]!r}")
            settings.setdefault(model, (setting, name))
            _check_resolved(parts, part, name, model, resolved)
            seeds = seeds_of(part, model)
            if len(seeds) != len(part["models"][model]["seconds"]):
                raise ValueError(f"merge: {name}: {model} has {len(part['models'][model]['seconds'])} runs but "
                                 f"its config says seeds {seeds}")
            for row, seed in enumerate(seeds):
                clash = [names[j] for s, j, _ in runs.get(model, []) if s == seed]
                if clash:
                    raise ValueError(f"merge: {model} seed {seed} is in both {clash[0]} and {name}")
                runs.setdefault(model, []).append((seed, i, row))
    return settings, resolved, runs


def _check_resolved(parts: list[dict], part: dict, name: str, model: str, resolved: dict) -> None:
    """A model's full settings agree across the parts that record them, and none leaves them out
    where another records them (a changed default would pass unseen)."""
    full = (part["config"].get("resolved") or {}).get(model)
    if full is not None:
        if model in resolved and resolved[model][0] != full:
            diff = sorted(k for k in set(full) | set(resolved[model][0]) if full.get(k) != resolved[model][0].get(k))
            raise ValueError(f"merge: {name} and {resolved[model][1]} train {model} with different "
                             f"settings ({', '.join(diff)}); rerun the older part or drop it (--drop-first)")
        resolved.setdefault(model, (full, name))
    elif model in resolved or any((p["config"].get("resolved") or {}).get(model) for p in parts):
        raise ValueError(f"merge: {name} does not record {model}'s full settings and another part "
                         f"does: they may differ (a changed default); rerun it or drop it (--drop-first)")


def _merged_model(parts: list[dict], model: str, entries: list) -> dict:
    """A model's runs in seed order; a metric only some parts recorded is left out, with a warning."""
    out = {"tasks": {}, "seconds": [], "epochs": []}
    for _, i, row in entries:
        src = parts[i]["models"][model]
        out["seconds"].append(src["seconds"][row])
        if "epochs" in src:
            out["epochs"].append(src["epochs"][row])
        for task, metrics in src["tasks"].items():
            dst = out["tasks"].setdefault(task, {})
            for metric, values in metrics.items():
                dst.setdefault(metric, []).append(values[row])
    partial = sorted({m for task in out["tasks"].values() for m, v in task.items() if len(v) != len(entries)})
    for metric in partial:  # recorded by some parts only (e.g. ci_rmst, which older reports lack)
        recorded = max(len(task.pop(metric, [])) for task in out["tasks"].values())
        log.warning("merge: %s's %s left out: recorded in %d of its %d runs (a part run before it was "
                    "scored); a mean over those alone would pass for all of them", model, metric, recorded,
                    len(entries))
    return out


def drop_models(result: dict, models, name: str = "part 1") -> dict:
    """A copy of a ``metrics.json`` dict without ``models``; a model it lacks is a ValueError."""
    models = [m for m in models if m]
    missing = [m for m in models if m not in result["models"]]
    if missing:
        raise ValueError(f"merge: {name} has no {', '.join(missing)} to drop (it has {', '.join(result['models'])})")
    out = json.loads(json.dumps(result))
    config = out["config"]
    if "seeds" not in config:  # keep the others' seeds explicit once model_runs loses entries
        config["seeds"] = {m: seeds_of(result, m) for m in result["models"]}
    for m in models:
        del out["models"][m]
        for key in _PER_MODEL_CONFIG:
            (config.get(key) or {}).pop(m, None)
        for curves in ((out.get("figures") or {}).get("calibration") or {}).values():
            curves.pop(m, None)
    if not out["models"]:
        raise ValueError(f"merge: dropping {', '.join(models)} leaves {name} empty")
    return out


def _keep_order(result: dict, order: list[str]) -> None:
    """Put ``result``'s models (and their config entries) in ``order``, any others after it."""
    ranked = [m for m in order if m in result["models"]] + [m for m in result["models"] if m not in order]
    result["models"] = {m: result["models"][m] for m in ranked}
    for key in _PER_MODEL_CONFIG:
        entries = result["config"].get(key)
        if isinstance(entries, dict):
            result["config"][key] = {m: entries[m] for m in ranked if m in entries}


def merge_folders(folders: list[Path], out: Path, title: str | None = None, drop_first=()) -> dict:
    """Read each folder's ``metrics.json``, merge, and write the report to ``out`` (atomically).

    ``drop_first``: models left out of the first folder's report (the later folders rerun them)."""
    parts = []
    for folder in folders:
        path = Path(folder) / "metrics.json"
        if not path.is_file():
            raise ValueError(f"merge: {path} not found (a folder written by python -m cet_experiments)")
        parts.append(json.loads(path.read_text()))
    if title is None:
        table = Path(folders[0]) / "table.md"
        head = table.read_text().splitlines()[0] if table.is_file() else ""
        title = head[2:] if head.startswith("# ") else f"Dataset {Path(parts[0]['dataset']['path']).name}"
    order = list(parts[0]["models"])  # the first report's rows keep their places, rerun or not
    if drop_first:
        parts[0] = drop_models(parts[0], drop_first, str(folders[0]))
    result = merge_results(parts, [str(f) for f in folders])
    _keep_order(result, order)
    result["command"] += (" + python -m cet_experiments merge " + " ".join(str(f) for f in folders)
                          + (f" --drop-first {','.join(drop_first)}" if drop_first else "") + f" --out {out}")
    write_report(result, Path(out), title)
    return result
