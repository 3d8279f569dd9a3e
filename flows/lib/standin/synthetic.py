"""The paper's synthetic data: 5 features, 2 events, 24k / 8k / 8k rows.

Two modes (label every reported number with the mode):

``reference``
    The original generator (mengelhard/cft ``generate_dataset``) as it ran: two-moons
    (features 1-2) and circles (features 3-4, factor 0.5) built with the *same* random
    state. Both then consume the same random stream, so the two occurrence labels are
    identical for every row and the noise on features 1-2 equals the noise on features 3-4:
    (x1 - x3, x2 - x4) is noise-free and determines c exactly.
``independent``
    What the paper's text describes: moons and circles from independent random states, so
    event 1 depends only on features 1-2 and event 2 only on features 3-4.

Common to both: x5 ~ N(0, 1) (seeded here; unseeded in the original); columns mean-centred,
not scaled; log-time location mu_1 = x5 + 0.3 and mu_2 = -x5 + 0.3; log-time noise
0.25 z1 z2 (a product of standard normals); event time exp(mu + noise) when c = 1 and
never when c = 0 (the original added 3, beyond every censoring time); censoring C ~ U(0, 3]
per event; t = min(event time, C); rows split in order 24k / 8k / 8k.
"""

from __future__ import annotations

import numpy as np
import polars as pl
from sklearn.datasets import make_circles, make_moons

from cet_model.censoring import censor_uniform
from cet_model.dataset import event_columns, write_dataset
from flows.lib.choices import SYNTHETIC_MODES as MODES

EVENT_NAMES = ["T1", "T2"]
FEATURE_NAMES = ["x1", "x2", "x3", "x4", "x5"]
CENSOR_UPPER = 3.0


def generate(mode: str = "reference", n: int = 40_000, noise: float = 1.0, seed: int = 0,
             split_sizes=(24_000, 8_000, 8_000)):
    """Return (features, events, manifest) in the dataset contract."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if sum(split_sizes) != n:
        raise ValueError(f"split_sizes {split_sizes} do not add up to n = {n}")
    circles_seed = seed if mode == "reference" else seed + 1
    x12, c1 = make_moons(n_samples=n, noise=noise, random_state=seed)
    x34, c2 = make_circles(n_samples=n, noise=noise, factor=0.5, random_state=circles_seed)
    rng = np.random.default_rng([seed, 2])
    x5 = rng.standard_normal(n)
    x = np.column_stack([x12, x34, x5])
    x = x - x.mean(0)
    c = np.column_stack([c1, c2]).astype(np.int8)
    mu = np.column_stack([x[:, 4] + 0.3, -x[:, 4] + 0.3])
    log_noise = 0.25 * rng.standard_normal((n, 2)) * rng.standard_normal((n, 2))
    t_true = np.where(c == 1, np.exp(mu + log_noise), np.nan)
    t, s, _ = censor_uniform(t_true, c, CENSOR_UPPER, rng)
    split = np.repeat(np.array(["train", "val", "test"]), split_sizes)
    ids = np.arange(n)
    features = pl.DataFrame({"id": ids, "split": split, **{f: x[:, i] for i, f in enumerate(FEATURE_NAMES)}})
    ev = {"id": ids, "split": split}
    for j, e in enumerate(EVENT_NAMES):
        tc, sc, cc, ttc = event_columns(e)
        ev |= {tc: t[:, j], sc: s[:, j], cc: c[:, j], ttc: t_true[:, j]}
    manifest = {
        "name": f"synthetic-{mode}", "mode": mode, "feature_names": FEATURE_NAMES,
        "event_names": EVENT_NAMES, "time_unit": "arbitrary",
        "censoring": {"scheme": "uniform(0, upper)", "upper": [CENSOR_UPPER] * 2},
        "seeds": {"moons": seed, "circles": circles_seed, "numpy": [seed, 2]},
        "noise": noise, "split_sizes": dict(zip(("train", "val", "test"), map(int, split_sizes), strict=True)),
        # the generator's recorded name since its first version (part of the data's fingerprint)
        "source_fingerprints": {"generator": "cet_experiments.synthetic v1"},
    }
    return features, pl.DataFrame(ev).with_columns(pl.col("^t_true_.*$").fill_nan(None)), manifest


def write(out_dir, mode: str = "reference", **kwargs):
    """Generate and write a synthetic dataset folder; returns its path."""
    features, events, manifest = generate(mode, **kwargs)
    return write_dataset(out_dir, features, events, manifest)
