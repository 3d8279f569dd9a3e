"""Model folders are untrusted input (docs/reliability.md, "Untrusted model folders"): every
check runs before memory is allocated for the weights, names the file and the field, and a
model that would score NaN is refused at load, or its non-finite scores fail naming row ids."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from cet_model import CETModel, load_model
from flows.lib.modeling.predict import check_finite_scores

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def saved(tmp_path, small_survival):
    x, t, s, _ = small_survival
    return CETModel(hidden_sizes=(8,), max_epochs=2, patience=2, batch_size=64, device="cpu").fit(x, t, s).save(
        tmp_path / "m")


def _edit(folder: Path, change) -> Path:
    cfg = json.loads((folder / "config.json").read_text())
    change(cfg)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


LOAD = """
import resource, sys
from cet_model import load_model
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
try:
    load_model(sys.argv[1])
except ValueError as exc:
    print("refused:", exc)
print("grew_mib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 - before)
"""


@pytest.mark.slow  # a fresh interpreter measures its peak memory: CI runs it, the quick loop leaves it out
def test_huge_hidden_sizes_are_refused_from_the_header_before_any_allocation(saved):
    _edit(saved, lambda c: c["params"].__setitem__("hidden_sizes", [60000, 60000]))  # 14 GB of weights
    run = subprocess.run([sys.executable, "-c", LOAD, str(saved)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "refused:" in run.stdout, run.stdout + run.stderr
    assert "weights.safetensors: does not match" in run.stdout and "config.json (fields" in run.stdout
    grew = int(run.stdout.split("grew_mib")[1])  # beyond what the imports took
    assert grew < 256, f"the load grew the peak by {grew} MiB: the network was allocated before the check"


def test_a_width_that_differs_from_the_weights_names_the_tensor_and_the_field(saved):
    _edit(saved, lambda c: c["params"].__setitem__("hidden_sizes", [60000]))
    with pytest.raises(ValueError, match=r"weights.safetensors: tensor '.*' has shape \[8, .*describes \[60000"):
        load_model(saved)


@pytest.mark.parametrize("field, value, message", [
    ("n_events", 10_000_000, "field 'n_events' must be a whole number from 0 to 1,000"),
    ("n_features", -1, "field 'n_features' must be a whole number"),
    ("n_features", "3", "field 'n_features' must be a whole number"),
])
def test_sizes_out_of_bounds_name_the_field(saved, field, value, message):
    _edit(saved, lambda c: c.__setitem__(field, value))
    with pytest.raises(ValueError, match=message) as exc:
        load_model(saved)
    assert "config.json" in str(exc.value)


def test_widths_out_of_bounds_and_a_deep_config_name_the_field(saved):
    _edit(saved, lambda c: c["params"].__setitem__("hidden_sizes", [10**9]))
    with pytest.raises(ValueError, match=r"config.json: field 'params.hidden_sizes' must be a list of at most 32"):
        load_model(saved)
    (saved / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="config.json: nested too deeply"):
        load_model(saved)


def test_a_header_that_announces_more_than_the_file_holds_is_refused(saved):
    path = saved / "weights.safetensors"
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    name = next(k for k in header if k != "__metadata__")
    header[name]["data_offsets"][1] += 10**9
    blob = json.dumps(header).encode()
    path.write_bytes(len(blob).to_bytes(8, "little") + blob + raw[8 + n:])
    with pytest.raises(ValueError, match=f"tensor '{name}': its shape .* do not fit the file"):
        load_model(saved)
    path.write_bytes((2**40).to_bytes(8, "little") + b"{}")
    with pytest.raises(ValueError, match="not a safetensors file"):
        load_model(saved)
    path.write_bytes(raw + b"\0" * 4096)  # data after the tensors: the file is not read through to hash it
    with pytest.raises(ValueError, match="not a safetensors file \\(4,096 bytes after its tensors' data\\)"):
        load_model(saved)


def test_non_finite_weights_and_statistics_are_refused_at_load(saved, tmp_path):
    state = load_file(str(saved / "weights.safetensors"))
    name = next(iter(state))
    state[name] = torch.full_like(state[name], float("nan"))
    save_file(state, str(saved / "weights.safetensors"))
    with pytest.raises(ValueError, match="not the weights config.json was saved with"):  # replaced by hand
        load_model(saved)
    _edit(saved, lambda c: c.pop("weights_sha256"))  # a folder written by hand: the checks that matter still run
    with pytest.raises(ValueError, match=f"tensor '{name}' holds .* non-finite values"):
        load_model(saved)


@pytest.mark.parametrize("damage, message", [
    (lambda f: f["shift"].__setitem__(0, float("inf")), "holds a value that is not finite"),
    (lambda f: f["scale"].__setitem__(0, 0.0), "does not fit"),
    (lambda f: f.update(shift=f["shift"] * 9, scale=f["scale"] * 9), "does not fit"),
    (lambda f: f.pop("scale"), "needs lists 'shift' and 'scale'"),
], ids=["not-finite", "zero-scale", "more-columns-than-features", "no-scale"])
def test_a_damaged_feature_scaling_is_refused(tmp_path, small_survival, damage, message):
    x, t, s, _ = small_survival
    m = CETModel(hidden_sizes=(8,), max_epochs=2, device="cpu").fit(x * 100, t, s).save(tmp_path / "m")
    cfg = json.loads((m / "config.json").read_text())
    assert cfg.get("feature_scaling"), "the model scales its inputs: the field exists to be damaged"
    damage(cfg["feature_scaling"])
    (m / "config.json").write_text(json.dumps(cfg))  # json writes Infinity, as an attacker's file may
    with pytest.raises(ValueError, match=f"config.json: field 'feature_scaling' {message}"):
        load_model(m)


def test_non_finite_scores_fail_naming_the_row_ids_not_their_values():
    ids = np.array([101, 102, 103])
    cols = {"id": ids, "p_death": np.array([0.2, np.nan, 0.3]), "t_q50_death": np.array([1.0, 2.0, np.inf])}
    with pytest.raises(ValueError, match=r"new.csv: 2 of 3 rows scored NaN or infinite \(ids 102, 103; in "
                                         r"p_death, t_q50_death\)"):
        check_finite_scores(cols, ids, "new.csv")
    check_finite_scores({"id": ids, "p_death": np.array([0.1, 0.2, 0.3])}, ids, "new.csv")
