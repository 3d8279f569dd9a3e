"""Training steps per second at MIMIC shapes: our decoder vs tile-and-concatenate, and the
cost of the ``exact`` estimator at M = 10 against Gumbel-Softmax with 100 samples.

    python benchmarks/bench_train_step.py [--steps 20] [--device auto]

Both variants run the same CET step (encoder, Gumbel samples, decoder, the paper's
objective, backward, Adam) in one process; only the decoder's first layer differs. The
tiled variant is how the reference implementation built it: x repeated over the samples
and concatenated with c, one (d + M) x H matmul, elementwise dropout.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from cet_model import CETModel
from cet_model.evaluation import machine


class TiledDecoder(nn.Module):
    """The baseline: concat([tile(x, K), c]) -> Linear -> ReLU -> Dropout -> heads."""

    def __init__(self, d, m, hidden, dropout):
        super().__init__()
        self.m = m
        self.hidden = nn.Linear(d + m, hidden)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, 2 * m)

    def forward(self, x, c):
        xt = x.unsqueeze(1).expand(-1, c.shape[1], -1)  # (n, K, d): tiled
        h = self.head(self.drop(torch.relu(self.hidden(torch.cat([xt, c], -1)))))
        return h[..., :self.m], h[..., self.m:]


def _model(d, m, hidden, samples, estimator, device, tiled=False, objective="paper"):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, d))
    t = rng.exponential(size=(400, m)) + 0.01
    s = (rng.random((400, m)) < 0.3).astype(float)
    model = CETModel.with_recipe(estimator=estimator, n_samples=samples)(
        hidden_sizes=(hidden,), objective=objective, condition_on_occurrence=True, max_epochs=1, batch_size=400,
        device=device).fit(x, t, s)  # builds the network
    if tiled:
        model.net_.decoder = TiledDecoder(d, m, hidden, 0.5).to(model.device_)
    net = model.net_.train()
    opt = torch.optim.Adam(net.parameters(), lr=3e-4)
    tensors = [model._tensor(a) for a in (x, np.log(t), s)]

    def step():
        loss = -model._estimate(*tensors, None, train=True).surrogate.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if model.device_.type == "cuda":
            torch.cuda.synchronize()

    return step


def steps_per_second(step, n_steps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        step()
    t0 = time.perf_counter()
    for _ in range(n_steps):
        step()
    return n_steps / (time.perf_counter() - t0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "train_step.json")
    args = ap.parse_args(argv)
    d, m, hidden, samples = 346, 10, 750, 100
    res = {"shapes": {"d": d, "M": m, "hidden": hidden, "samples": samples, "batch": 400}}
    res["ours_gumbel"] = steps_per_second(_model(d, m, hidden, samples, "gumbel", args.device), args.steps)
    res["tiled_gumbel"] = steps_per_second(_model(d, m, hidden, samples, "gumbel", args.device, tiled=True),
                                           max(3, args.steps // 4))
    res["ours_exact"] = steps_per_second(_model(d, m, hidden, samples, "exact", args.device), max(3, args.steps // 4))
    res["speedup_vs_tiled"] = res["ours_gumbel"] / res["tiled_gumbel"]
    res["exact_cost_vs_gumbel"] = res["ours_gumbel"] / res["ours_exact"]
    res["machine"] = machine()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2))
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
