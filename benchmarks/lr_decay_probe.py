"""Would a decaying learning rate lift the default CET's validation AUC? Validation split only.

    python benchmarks/lr_decay_probe.py --data data/experiments/mimic-standin [--seed 0] [--half-lives 0,500,1500]

Every training setting probed so far used a constant learning rate (docs/results.md, MIMIC
section: lr, width, depth, dropout, weight decay, batch, sigma, the encoder stage, a moving
average of the weights, ...). This fits the default CET (``validation_probe.py``'s fit and
figures) with Adam's learning rate halved every ``H`` optimizer steps (multiplied by
0.5^(1/H) after each step, restarting with each stage's optimizer), for each ``H`` of
``--half-lives`` (0: constant, the default), and prints ``validation_probe.py``'s lines: the
validation AUC against the true occurrence, ECE, MRAE, Harrell's C, epochs, seconds. The decay is
applied here, by wrapping ``torch.optim.Adam`` for the probe's process, not in the library: this
asks whether it is a lever.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import validation_probe  # noqa: E402


def decaying_adam(half_life: int) -> type:
    """``torch.optim.Adam`` whose learning rate halves every ``half_life`` steps."""
    factor = 0.5 ** (1.0 / half_life)

    class DecayingAdam(torch.optim.Adam):
        def step(self, closure=None):
            out = super().step(closure)
            for group in self.param_groups:
                group["lr"] *= factor
            return out

    return DecayingAdam


def _half_lives(text: str) -> list[int]:
    """``--half-lives``: comma-separated whole numbers of steps, 0 (constant) or more."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: not comma-separated step counts, 0 or more")
    return values


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="dataset folder (with the truth recorded)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--half-lives", type=_half_lives, default=[0, 500, 1500],
                    help="steps per halving, comma-separated; 0 = constant (default 0,500,1500)")
    args = ap.parse_args(argv)
    adam = torch.optim.Adam
    try:
        for h in args.half_lives:
            torch.optim.Adam = adam if h == 0 else decaying_adam(h)
            print(f"half-life {h or 'none (constant)'} steps, seed {args.seed}:", flush=True)
            validation_probe.main(["--data", args.data, "--seed", str(args.seed), "dict()"])
    finally:
        torch.optim.Adam = adam
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
