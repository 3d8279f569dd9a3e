"""A model folder: ``config.json`` (the class, parameters, recipe, shapes, scaling and training
summary) and ``weights.safetensors``, no pickle. Each file is written to a temporary name and
renamed, the weights first; the config records the weights' SHA-256, so a save killed between
the two renames is refused at load. Read as untrusted input (``model_folder`` checks sizes and
shapes before anything is allocated).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import uuid
import warnings
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from . import model_folder
from .atomic import temporary_name, writing
from .contract import MAX_GRID
from .recipe import RECIPES, Recipe, recipe_for

FORMAT, FORMAT_VERSION = model_folder.FORMAT, model_folder.FORMAT_VERSION
CLASSES = ("CETModel", "ETModel", "BCModel")
# parameters of earlier versions that a saved model may still name: they only shaped its training
# (the weights mean the same without them) and are dropped when it is loaded
FORMER_TRAINING_PARAMS = ("block_em", "standardize", "shared_first_layer")


def read_config(path) -> dict:
    """Read and check a model folder's config.json (``model_folder.read_config``); errors name the file
    and the field."""
    return model_folder.read_config(path, CLASSES)


def check_saveable(path) -> Path:
    """Refuse (FileExistsError naming the file) to save a model into ``path`` where that would
    replace a ``config.json`` or ``weights.safetensors`` that is not a CET model's: a model saved
    there before is replaced, a user's files never are."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{path}: exists and is not a folder; a model is saved as a folder")
    for name in ("config.json", "weights.safetensors"):
        if (path / name).is_symlink() or ((path / name).exists() and not (path / name).is_file()):
            raise FileExistsError(f"{path / name}: exists and is not a plain file; save the model to another folder")
    config, weights = path / "config.json", path / "weights.safetensors"
    if config.exists():
        try:
            ours = json.loads(config.read_bytes()).get("format") == FORMAT
        except (ValueError, AttributeError, RecursionError, OSError):
            ours = False
        if not ours:
            raise FileExistsError(f"{config}: exists and is not a saved CET model's; CET replaces only a model it "
                                  "saved: save the model to another folder")
    elif weights.exists():
        raise FileExistsError(f"{weights}: exists without a CET model's config.json beside it; CET replaces only "
                              "a model it saved: save the model to another folder")
    return path


def weights_digest(path) -> str:
    """The SHA-256 of a weights file, recorded in ``config.json``: a save interrupted between its
    two renames leaves a config that does not match the weights, and loading says so."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def save(model, path) -> Path:
    """Write ``model``'s ``config.json`` and ``weights.safetensors`` (no pickle). Files appear whole;
    a folder that holds files of these names that CET did not save is refused (``check_saveable``)."""
    model._check_fitted()
    path = check_saveable(path)
    path.mkdir(parents=True, exist_ok=True)
    config = {"format": FORMAT, "format_version": FORMAT_VERSION, "class": type(model).__name__,
              "params": _jsonable(model.get_params()), "recipe": dataclasses.asdict(model.recipe_),
              "n_features": model.n_features_in_, "n_events": model.n_events_, "sigma": model.sigma_,
              "extra": model._extra_state()}
    if hasattr(model, "feature_names_in_"):
        config["feature_names"] = [str(c) for c in model.feature_names_in_]
    if getattr(model, "event_times_", None) is not None:  # what predict and the survival functions need
        config["targets"] = {"names": model.event_names_, "rmst_horizon": model.rmst_horizon_.tolist(),
                             "event_times": [g.tolist() for g in model.event_times_]}
    if getattr(model, "feature_scaling_", None) is not None:  # JSON floats round-trip exactly
        config["feature_scaling"] = {"shift": model.feature_scaling_[0].tolist(),
                                     "scale": model.feature_scaling_[1].tolist()}
    # a copy of each tensor: safetensors refuses tensors that share memory (a first layer shared by
    # both heads is stored under both names; the network load() builds ties them again)
    state = {k: v.detach().cpu().clone().contiguous() for k, v in model.net_.state_dict().items()}
    weights_tmp = path / f"{temporary_name(path / 'weights.safetensors')}{uuid.uuid4().hex[:8]}"
    config_tmp = path / f"{temporary_name(path / 'config.json')}{uuid.uuid4().hex[:8]}"
    with writing(path / "weights.safetensors", weights_tmp, config_tmp):
        save_file(state, weights_tmp)
        config["weights_sha256"] = weights_digest(weights_tmp)
        config_tmp.write_text(json.dumps(config, indent=2))
        os.replace(weights_tmp, path / "weights.safetensors")
        os.replace(config_tmp, path / "config.json")
    return path


def load(cls, path, device: str = "auto"):
    """Rebuild a saved ``cls`` (checked before anything is allocated). Refuses folders written by another
    format or class."""
    config = read_config(path)
    if config["class"] != cls.__name__:
        raise ValueError(f"{Path(path) / 'config.json'}: holds a {config['class']}, not a {cls.__name__}")
    params = dict(config["params"], device=device)
    params["hidden_sizes"] = tuple(params["hidden_sizes"])
    cls, params = saved_recipe(cls, config, params, path)
    unknown = sorted(set(params) - set(cls._get_param_names()))
    if unknown:
        raise ValueError(f"{Path(path) / 'config.json'}: field 'params' has unknown parameters {unknown}")
    model = cls(**params)
    # the form fitted ("auto" resolved); older files: the setting
    sigma = config.get("sigma", (config.get("recipe") or {}).get("sigma", config["params"].get("sigma")))
    if sigma not in ("net", "constant"):
        raise ValueError(f"{Path(path) / 'config.json'}: field 'sigma' must be 'net' or 'constant' (the time head's "
                         f"sigma as fitted), got {sigma!r}")
    n_features, n_events = config["n_features"], config["n_events"]
    weights = Path(path) / "weights.safetensors"
    shapes = model_folder.weight_shapes(weights)  # the header only: nothing allocated yet
    model._check_params()
    model.sigma_ = sigma
    with torch.device("meta"), warnings.catch_warnings():  # the network the config describes, without memory
        warnings.filterwarnings("ignore", "Initializing zero-element tensors is a no-op", UserWarning)
        model_folder.check_shapes(model._build_network(n_features, n_events), shapes, path)
    model._setup(n_features, n_events, sigma=sigma)
    if config.get("feature_names") is not None:
        model.feature_names_in_ = np.asarray(config["feature_names"], dtype=object)
    model.feature_scaling_ = _read_scaling(config, path, n_features)
    model.event_names_, model.event_times_, model.rmst_horizon_ = _read_targets(config, path, n_events)
    if isinstance(config.get("weights_sha256"), str) and weights_digest(weights) != config["weights_sha256"]:
        raise ValueError(f"{weights}: not the weights config.json was saved with (their SHA-256 differs: a save "
                         "interrupted between its two files, or a file replaced by hand); save the model again")
    try:
        state = load_file(str(weights), device=str(model.device_))
    except Exception as exc:  # safetensors raises its own error type for a damaged file
        raise ValueError(f"{weights}: not a readable safetensors file ({type(exc).__name__}: {exc})") from None
    model_folder.check_finite(state, weights)
    try:
        model.net_.load_state_dict(state)
    except RuntimeError as exc:
        raise ValueError(f"{Path(path) / 'weights.safetensors'}: does not match config.json ({exc})") from None
    model.net_.eval()
    model._load_extra_state(config.get("extra", {}))
    return model


def saved_recipe(cls, config: dict, params: dict, path) -> tuple[type, dict]:
    """(the class to build, its constructor parameters) of a saved model: its recipe (the field
    ``recipe``; a model saved before the recipe was apart from the parameters names its fields among
    ``params``) becomes ``with_recipe`` changes where it differs from the objective's own, and
    ``FORMER_TRAINING_PARAMS`` are dropped."""
    fields = {f.name for f in dataclasses.fields(Recipe)}
    if not isinstance(config.get("recipe") or {}, dict):
        raise ValueError(f"{Path(path) / 'config.json'}: field 'recipe' must be an object of the recipe's fields")
    saved = dict(config.get("recipe") or {})
    saved.update({k: params.pop(k) for k in list(params) if k in fields})
    for k in FORMER_TRAINING_PARAMS:
        params.pop(k, None)
    if saved.get("occurrence_init") == "km":  # a start only: the weights mean the same
        saved["occurrence_init"] = "observed"
    objective = params.get("objective", "marginal") if "objective" in cls._get_param_names() else "marginal"
    if objective not in RECIPES:
        return cls, params  # refused, naming the field, when the parameters are checked
    own = dataclasses.asdict(recipe_for(objective, cls.own_recipe_changes))
    changes = {k: v for k, v in saved.items() if k in own and v != own[k] and not (k == "estimator" and v == "auto")}
    try:
        return (cls.with_recipe(**changes) if changes else cls), params
    except ValueError as exc:
        raise ValueError(f"{Path(path) / 'config.json'}: field 'recipe': {exc}") from None


def _read_scaling(config: dict, path, n_features: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The saved feature scaling (None: the model sees its features as given, as every model
    saved before there was one did)."""
    raw = config.get("feature_scaling")
    if raw is None:
        return None
    try:
        shift, scale = (np.asarray(raw[k], dtype=np.float64) for k in ("shift", "scale"))
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{Path(path) / 'config.json'}: field 'feature_scaling' needs lists 'shift' and "
                         "'scale'") from None
    if not (np.isfinite(shift).all() and np.isfinite(scale).all()):
        raise ValueError(f"{Path(path) / 'config.json'}: field 'feature_scaling' holds a value that is not finite "
                         "(NaN or infinite): the model cannot scale its inputs; retrain it")
    if shift.ndim != 1 or shift.shape != scale.shape or len(shift) > n_features or not (scale > 0).all():
        raise ValueError(f"{Path(path) / 'config.json'}: field 'feature_scaling' does not fit {n_features} "
                         "features (one shift and one scale > 0 per scaled column)")
    return shift, scale


def _read_targets(config: dict, path, n_events: int):
    """The saved event names, survival grids and ``predict``'s horizons (all None for a model
    saved without them: it predicts everything but ``predict`` and the survival functions)."""
    raw = config.get("targets")
    if raw is None:
        return None, None, None
    where = f"{Path(path) / 'config.json'}: field 'targets'"
    try:
        names, horizon, grids = raw["names"], raw["rmst_horizon"], raw["event_times"]
        horizon = np.asarray(horizon, dtype=np.float64)
        if not isinstance(grids, list) or len(grids) != n_events or not all(
                isinstance(g, list) and len(g) <= MAX_GRID for g in grids):
            raise ValueError
        grids = [np.asarray(g, dtype=np.float64).reshape(-1) for g in grids]
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{where} needs 'names', 'rmst_horizon' (one per event) and 'event_times' (one list of at "
                         f"most {MAX_GRID} times per event)") from None
    if names is not None and (not isinstance(names, list) or len(names) != n_events
                              or not all(isinstance(n, str) for n in names)):
        raise ValueError(f"{where}: 'names' must list one name per event ({n_events})")
    if horizon.shape != (n_events,) or not all(np.isfinite(a).all() and (a > 0).all() for a in [horizon, *grids]):
        raise ValueError(f"{where}: its times must be finite and > 0, one horizon per event ({n_events})")
    return names, grids, horizon


def _jsonable(params: dict) -> dict:
    """get_params() for config.json: tuples as lists, numpy scalars as Python numbers."""
    out = {}
    for k, v in params.items():
        if isinstance(v, tuple):
            v = [int(h) for h in v]
        elif isinstance(v, np.generic):
            v = v.item()
        out[k] = v
    return out
