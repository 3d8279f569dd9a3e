"""The fused decoder's backward pass without and with the gradient of the occurrence patterns.

    python benchmarks/bench_fused_backward.py --data data/mimic [--steps 25] [--rounds 10]

The exact marginal sum (the default CET) feeds the decoder enumerated patterns, constants that
need no gradient; only Gumbel and ARM samples do. ``cet_model.fused`` skips that gradient when
autograd does not ask for it. Here a training step (forward, backward, Adam) of the default CET
on the training rows of a dataset folder (the first 400-row batch, dropout on) runs in
``--rounds`` alternating rounds of ``--steps`` steps: as it is, and with the patterns marked as
needing a gradient (what the backward pass did before, computing and discarding it). Median ms
per step; writes ``benchmarks/results/fused_backward_<dataset>.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dropout_mask import alternating, step_ms  # noqa: E402

from cet_model import CETModel, networks  # noqa: E402
from cet_model.atomic import write_text  # noqa: E402
from cet_model.dataset import load_dataset  # noqa: E402
from cet_model.evaluation import machine  # noqa: E402

SKIPPING = networks.conditional_hidden


def with_pattern_gradient(a, c, V, mask, A, b):
    """The fused layer asked for the gradient of c as well (c made a leaf that needs one)."""
    return SKIPPING(a, c.detach().requires_grad_(), V, mask, A, b)


ARMS = {"skip": SKIPPING, "compute": with_pattern_gradient}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="a dataset folder (manifest.json, *.parquet)")
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args(argv)
    ds = load_dataset(args.data)
    tr = ds.train
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CETModel(device="cpu", seed=0, max_epochs=1).fit(tr.X, tr.T, tr.S, mask=tr.mask)
    data = model._tensors(tr.X, tr.T, tr.S, tr.mask)
    idx = torch.arange(min(400, len(tr)))
    batch = [a[idx] if a is not None else None for a in data]
    opt = torch.optim.Adam(model.net_.parameters(), lr=1e-3)
    model.net_.train()

    def measure(layer):
        networks.conditional_hidden = layer
        return step_ms(model, batch, opt, args.steps)
    try:
        ms = alternating(ARMS, args.rounds, measure)
    finally:
        networks.conditional_hidden = SKIPPING
    med = {name: float(np.median(v)) for name, v in ms.items()}
    out = {
        "command": "python benchmarks/bench_fused_backward.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "dataset": ds.manifest.get("name"),
        "train_rows": len(tr),
        "features": int(tr.X.shape[1]),
        "events": int(tr.T.shape[1]),
        "ms_per_step": med,
        "rounds_ms": ms,
        "speedup": med["compute"] / med["skip"],
        "machine": machine(),
    }
    path = ROOT / "benchmarks" / "results" / f"fused_backward_{args.data.name}.json"
    write_text(path, json.dumps(out, indent=2))
    print(
        f"{args.data.name}: default CET step {med['skip']:.2f} ms skipping the patterns' gradient, "
        f"{med['compute']:.2f} ms computing it ({out['speedup']:.3f}x); wrote {path}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
