"""A saved model folder read as untrusted input: ``config.json`` and ``weights.safetensors``.

Everything is checked before anything is allocated: the config's size, depth and fields (each
error names the field), then the safetensors header alone (tensor names, dtypes and shapes, and
that the data it announces lie inside the file), then those shapes against the network the
config describes, built on PyTorch's ``meta`` device (no memory). Only then are the weights
read, and they must be finite.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import torch

FORMAT = "cet-model"
FORMAT_VERSION = 2  # 2: objectives paper/bound/marginal, condition_on_occurrence, feature names

MAX_CONFIG_BYTES = 64 * 2**20  # a config with a million feature names is ~20 MB
MAX_HEADER_BYTES = 100 * 2**20  # safetensors' own limit
# sizes a config may ask for: far above any model this project trains, far below what would
# exhaust a machine before the weights are compared with it
LIMITS = {"n_features": 1_000_000, "n_events": 1_000}
MAX_LAYERS, MAX_WIDTH = 32, 100_000
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def read_config(path, classes) -> dict:
    """Read and check a model folder's ``config.json``; errors name the file and the field.
    ``classes``: the model class names it may hold."""
    cfg_path = Path(path) / "config.json"
    config = _json_object(cfg_path, Path(path) / "weights.safetensors")
    if config.get("format") != FORMAT:
        raise ValueError(f"{cfg_path}: field 'format' is {_shown(config.get('format'))}, expected {FORMAT!r}")
    if config.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{cfg_path}: field 'format_version' is {_shown(config.get('format_version'))}; this "
                         f"version of cet_model reads format_version {FORMAT_VERSION}")
    if config.get("class") not in classes:
        raise ValueError(f"{cfg_path}: field 'class' is {_shown(config.get('class'))}, expected one of "
                         f"{sorted(classes)}")
    _check_sizes(config, cfg_path)
    names = config.get("feature_names")
    if names is not None and (not isinstance(names, list) or len(names) != config["n_features"]):
        raise ValueError(f"{cfg_path}: field 'feature_names' must list one name per feature ({config['n_features']})")
    return config


def _json_object(cfg_path: Path, weights: Path) -> dict:
    """``config.json`` read as a JSON object, after checking that the folder holds the weights and
    that the file is no larger than a config."""
    if not cfg_path.is_file():
        raise FileNotFoundError(f"{cfg_path}: missing; not a saved model folder")
    if not weights.is_file():
        raise FileNotFoundError(f"{weights}: missing")
    size = cfg_path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ValueError(f"{cfg_path}: {size:,} bytes, more than a model's config ({MAX_CONFIG_BYTES:,} at most)")
    try:
        config = json.loads(cfg_path.read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{cfg_path}: not valid JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{cfg_path}: nested too deeply to be a model's config") from None
    if not isinstance(config, dict):
        raise ValueError(f"{cfg_path}: not a JSON object")
    return config


def _check_sizes(config: dict, cfg_path: Path) -> None:
    """The sizes that decide what loading allocates: features, events and the layer widths."""
    for field, most in LIMITS.items():
        value = config.get(field)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
            raise ValueError(f"{cfg_path}: field {field!r} must be a whole number from 0 to {most:,}, got "
                             f"{_shown(value)}")
    if config["n_events"] < 1:
        raise ValueError(f"{cfg_path}: field 'n_events' must be at least 1, got 0")
    params = config.get("params")
    if not isinstance(params, dict):
        raise ValueError(f"{cfg_path}: field 'params' must be an object of the model's parameters")
    sizes = params.get("hidden_sizes")
    if (not isinstance(sizes, list) or len(sizes) > MAX_LAYERS
            or not all(isinstance(h, int) and not isinstance(h, bool) and 1 <= h <= MAX_WIDTH for h in sizes)):
        raise ValueError(f"{cfg_path}: field 'params.hidden_sizes' must be a list of at most {MAX_LAYERS} widths "
                         f"from 1 to {MAX_WIDTH:,}, got {_shown(sizes)}")


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def weight_shapes(path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape from the header of ``path`` (a safetensors file) alone; ValueError naming
    the file when the header is damaged or announces data the file does not hold."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise ValueError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
        n = struct.unpack("<Q", head)[0]
        if n > MAX_HEADER_BYTES or n > size - 8:
            raise ValueError(f"{path}: not a safetensors file (a header of {n:,} bytes in a file of {size:,})")
        try:
            header = json.loads(fh.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            raise ValueError(f"{path}: not a safetensors file (its header is not JSON)") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: not a safetensors file (its header is not a JSON object)")
    shapes, data, used = {}, size - 8 - n, 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            shape = tuple(int(d) for d in info["shape"])
            start, end = (int(o) for o in info["data_offsets"])
            width = _DTYPE_BYTES[info["dtype"]]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: tensor {name!r}: not a safetensors entry (dtype, shape, data_offsets)") from None
        if any(d < 0 for d in shape) or not 0 <= start <= end <= data or end - start != width * int(np.prod(shape)):
            raise ValueError(f"{path}: tensor {name!r}: its shape {list(shape)} and offsets do not fit the file's "
                             f"{data:,} bytes of data")
        shapes[name] = shape
        used = max(used, end)
    if used != data:  # safetensors indexes its whole buffer: anything after the tensors is not a weights file's
        raise ValueError(f"{path}: not a safetensors file ({data - used:,} bytes after its tensors' data)")
    return shapes


def check_shapes(skeleton: torch.nn.Module, found: dict[str, tuple[int, ...]], folder) -> None:
    """The state of ``skeleton`` (the network the config describes, on the ``meta`` device) against
    the shapes in the weights file; ValueError naming both files and the first tensor that differs."""
    want = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    cfg, weights = Path(folder) / "config.json", Path(folder) / "weights.safetensors"
    missing, extra = sorted(set(want) - set(found)), sorted(set(found) - set(want))
    if missing or extra:
        raise ValueError(f"{weights}: does not match {cfg} (fields 'n_features', 'n_events', 'params'): tensors "
                         f"{'missing ' + str(missing[:3]) if missing else ''}{' ' if missing and extra else ''}"
                         f"{'unexpected ' + str(extra[:3]) if extra else ''}")
    for name, shape in want.items():
        if found[name] != shape:
            raise ValueError(f"{weights}: tensor {name!r} has shape {list(found[name])}, but {cfg} (fields "
                             f"'n_features', 'n_events', 'params.hidden_sizes') describes {list(shape)}")


def check_finite(state: dict[str, torch.Tensor], path) -> None:
    """ValueError naming the file and tensor when a weight is NaN or infinite."""
    for name, t in state.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise ValueError(f"{path}: tensor {name!r} holds {int((~torch.isfinite(t)).sum())} non-finite values "
                             "(NaN or infinite): the model cannot score; retrain it")
