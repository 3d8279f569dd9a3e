"""retrain's steps: the build that made a dataset's folder run again as it was run (its stamp's
recipe: the same source, options and seeds; skipped when its inputs are unchanged), then
train-evaluate on the folder. ``flows.train`` runs them as a flow, the build as a subflow, or, with
no Prefect server configured, in the command's own process (``retrain_here``).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from flows.lib.choices import BUILDS
from flows.lib.flow_params import (
    FlowParams,
    MimicBuildParams,
    RedditBuildParams,
    RetrainParams,
    SyntheticParams,
    TrainEvaluateParams,
    recorded_params,
)
from flows.lib.infra.settings import Settings

STAGES = {"synthetic": ("build-synthetic", SyntheticParams), "mimic": ("build-mimic-features", MimicBuildParams),
          "reddit": ("build-reddit-features", RedditBuildParams)}


@dataclass(frozen=True)
class Rebuild:
    """How dataset ``name`` is rebuilt: by the build ``kind`` (synthetic, mimic, reddit or table) with
    the parameters that made its folder, or None where there is none yet (the build's defaults,
    i.e. its configured source)."""

    name: str
    kind: str
    params: FlowParams | None


def rebuild_of(name: str) -> Rebuild:
    """The build of dataset ``name``; a name other than synthetic, mimic or reddit must be a table
    built by build-table-dataset. A recorded source that is gone is refused with what to do."""
    folder = Settings().dataset_dir(name)
    if name in STAGES:
        stage, cls = STAGES[name]
        recorded = recorded_params(folder, stage, cls)
        if name == "mimic":
            _check_recorded_source(name, recorded and recorded.mimic_dir, "--mimic-dir")
        if name == "reddit":
            dumps = recorded.dumps if recorded else None
            for d in [dumps] if isinstance(dumps, str) else dumps or []:
                if not d.startswith(("http://", "https://")):
                    _check_recorded_source(name, d, "--dumps")
        return Rebuild(name, name, recorded)
    from flows.lib.tables import recorded_build

    recipe = recorded_build(folder)
    if recipe is None:
        raise ValueError(f"dataset {name}: not one of {', '.join(BUILDS)}, and {folder} holds no dataset built by "
                         "build-table-dataset (python -m flows.table --table FILE --name NAME ...), so there is "
                         "nothing to rebuild it from")
    _check_recorded_source(name, recipe.table, "--table")
    return Rebuild(name, "table", recipe)


def _check_recorded_source(name: str, path: str | None, option: str) -> None:
    """A recorded source that is gone is refused with what to do (build once by hand from its new
    place, which records that place), instead of the build's fingerprint error."""
    if path is not None and not Path(path).exists():
        command = f"python -m flows.table {option} NEW ..." if option == "--table" else (
            f"python -m flows.{name} build {option} NEW ...")
        raise ValueError(f"dataset {name} was built from {path} ({option}), which no longer exists: build it once "
                         f"from its new place ({command}, with the same options), and retrain follows that")


def evaluate_params(name: str, path: str, params: RetrainParams) -> TrainEvaluateParams:
    """train-evaluate's parameters for the rebuilt folder ``path`` of dataset ``name``."""
    return TrainEvaluateParams(dataset=name, data=path, seed=params.seed, promote_metric=params.promote_metric,
                               promote_tolerance=params.promote_tolerance, promote_evidence=params.promote_evidence)


def build_here(rebuild: Rebuild) -> str:
    """``rebuild`` in this process, without Prefect, as each build's command runs it with no server
    configured; returns the folder."""
    if rebuild.kind == "synthetic":
        from flows.lib.standin import synthetic_build

        return synthetic_build.build_here(rebuild.params or SyntheticParams())
    if rebuild.kind == "mimic":
        from flows.lib.mimic import builds
        from flows.lib.standin import mimic as mimic_standin

        return builds.build_here(rebuild.params or MimicBuildParams(), mimic_standin.ensure_logged)
    if rebuild.kind == "reddit":
        from flows.lib.reddit import builds
        from flows.lib.standin import reddit as reddit_standin

        return builds.build_here(rebuild.params or RedditBuildParams(), reddit_standin.ensure_for_build)
    from flows.lib import tables

    return tables.build_here(rebuild.params)


def command_params(ap: argparse.ArgumentParser, args: argparse.Namespace) -> RetrainParams:
    """``flows.train retrain``'s parameters, checked before anything runs: a bad option, a dataset
    with nothing to rebuild from, or (Reddit) a weak pseudonymisation key is a usage error."""
    from flows.lib import commands
    from flows.lib.infra.keys import check_key

    try:
        rebuild = rebuild_of(Settings().dataset_name(args.dataset))  # refuses a name with nothing to rebuild from
        key = Settings().pseudonym_key
        if rebuild.kind == "reddit" and key is not None:  # refused now, as flows.reddit build refuses it
            check_key(key.get_secret_value())
        return commands.params(args, RetrainParams)
    except (ValueError, FileExistsError) as exc:  # pydantic's ValidationError names the field
        ap.error(str(exc))


def retrain_here(params: RetrainParams) -> dict:
    """retrain in this process, without Prefect (no server is configured to record a flow run)."""
    from flows.lib.modeling import evaluate

    name = Settings().dataset_name(params.dataset)
    path = build_here(rebuild_of(name))
    return evaluate.evaluate_here(evaluate_params(name, path, params))


def retrain_command(ap: argparse.ArgumentParser, args: argparse.Namespace, params: RetrainParams | None = None) -> int:
    """``python -m flows.train retrain`` without Prefect: the options checked (unless ``params`` are
    given, already checked), the rebuild and the run, then the version's decision and test metrics."""
    from flows.lib.modeling.registry_commands import print_version

    params = params if params is not None else command_params(ap, args)
    result = retrain_here(params)
    print_version(Path(result["version"]), result["decision"], result.get("subgroups"))
    return 0
