"""Score a features parquet with a registered CET model.

Output: one row per input row, ``id``, then per event e ``p_e`` (P(e ever happens)) and
``t_qNN_e`` (the NN% quantile of the time to e given that it happens, in the dataset's
time unit). Written to a temporary name, then renamed.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import polars as pl

from cet_model.comments import flatten_inputs
from cet_model.dataset import load_array
from cet_model.models import load_model
from flows.lib.infra import registry

log = logging.getLogger("flows.predict")
DEFAULT_QUANTILES = (0.1, 0.5, 0.9)


def resolve_version(models_root, dataset: str, version: str | None = None) -> Path:
    if version:
        path = Path(models_root) / dataset / version
        if not (path / "data.json").is_file():
            raise FileNotFoundError(f"{path}: not a registered model version")
        return path
    path = registry.promoted(models_root, dataset)
    if path is None:
        raise FileNotFoundError(f"{Path(models_root) / dataset}: no promoted model; run train-evaluate or "
                                f"retrain for {dataset!r} first")
    return path


def read_features(path: Path, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """ids and the feature matrix in the model's column order; errors name file, column, row."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such features file")
    try:
        df = pl.read_parquet(path)
    except Exception as exc:  # polars raises several types for a non-parquet file
        raise ValueError(f"{path}: not a readable parquet file ({exc})") from None
    missing = [c for c in ["id", *names] if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing columns {missing[:10]}{' ...' if len(missing) > 10 else ''} "
                         f"(the model needs id and {len(names)} features)")
    x = np.empty((df.height, len(names)), dtype=np.float64)
    for j, c in enumerate(names):
        col = df[c]
        if not col.dtype.is_numeric():
            raise ValueError(f"{path}: column {c!r} has type {col.dtype}, expected numbers")
        v = col.cast(pl.Float64).to_numpy()
        bad = ~np.isfinite(v)
        if bad.any():
            raise ValueError(f"{path}: column {c!r} row {int(np.argmax(bad))}: missing or non-finite value "
                             f"({int(bad.sum())} such rows)")
        x[:, j] = v
    return df["id"].to_numpy(), x


def score(features, version_dir, out, quantiles=DEFAULT_QUANTILES, sequences=None, device: str = "auto") -> Path:
    version_dir, features, out = Path(version_dir), Path(features), Path(out)
    qs = sorted({float(q) for q in quantiles})
    if not qs or not all(0 < q < 1 for q in qs):
        raise ValueError(f"quantiles must lie in (0, 1), got {list(quantiles)}")
    data = json.loads((version_dir / "data.json").read_text())
    ids, x = read_features(features, data["feature_names"])
    if data.get("sequences"):
        if sequences is None:
            raise ValueError(f"{version_dir}: this model reads comment sequences; pass the sequences .npy "
                             f"({data['sequences']['length']} x {data['sequences']['dim']} per row)")
        seq = load_array(sequences)
        want = (len(ids), data["sequences"]["length"], data["sequences"]["dim"])
        if seq.shape != want:
            raise ValueError(f"{sequences}: shape {seq.shape}, expected {want} (rows of {features})")
        x = flatten_inputs(x, seq)
    model = load_model(version_dir / "CET", device=device)
    p = model.predict_occurrence(x)
    cols = {"id": ids}
    times = {q: model.predict_time(x, q) for q in qs}
    for j, e in enumerate(data["event_names"]):
        cols[f"p_{e}"] = p[:, j]
        for q in qs:
            cols[f"t_q{round(q * 100):02d}_{e}"] = times[q][:, j]
    if len(cols) != 1 + len(data["event_names"]) * (1 + len(qs)):
        raise ValueError(f"quantiles {qs} give the same column name twice (names keep whole percents)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    pl.DataFrame(cols).write_parquet(tmp)
    os.replace(tmp, out)
    log.info("scored %d rows of %s with %s -> %s", len(ids), features.name, version_dir, out)
    return out
