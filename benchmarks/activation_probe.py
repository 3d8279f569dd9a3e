"""Would another activation, or dropout on its inputs, lift the validation AUC of CET's occurrence
encoder? Validation split only.

    python benchmarks/activation_probe.py --data data/experiments/mimic-standin [--seed 0] \
        [--activations relu,elu,silu,tanh] [--input-dropout 0,0.1,0.2] ["dict()" ...]

The paper's networks (and CET's) use ReLU. This fits the default CET with the occurrence encoder's
ReLU layers replaced by another activation after the network is built (an activation has no
weights, so every variant starts from the same initial weights and trains on the same shuffles,
dropout masks and draws: a paired comparison), and prints ``validation_probe.py``'s lines
(validation AUC against the truth, ECE, MRAE, Harrell's C) for each. The time decoder keeps its
fused ReLU layer. ``--input-dropout`` P adds dropout with rate P on the encoder's inputs (the
features, before its first layer; off when predicting): the same initial weights, but its masks
draw from the training stream, so the later draws differ from the default's. Every activation is
run with every input dropout. The changes are made here, by replacing
``cet_model.networks.OccurrenceEncoder`` for the probe's process; the library is unchanged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch.nn as nn  # noqa: E402
import validation_probe  # noqa: E402

import cet_model.networks as networks  # noqa: E402

ACTIVATIONS = {"relu": nn.ReLU, "elu": nn.ELU, "silu": nn.SiLU, "tanh": nn.Tanh, "gelu": nn.GELU,
               "softplus": nn.Softplus}
_Encoder = networks.OccurrenceEncoder


def encoder_with(activation: type[nn.Module], input_dropout: float = 0.0) -> type[nn.Module]:
    """``OccurrenceEncoder`` whose ReLU layers are ``activation`` (drawn weights unchanged), with
    dropout of rate ``input_dropout`` on its inputs when that is above 0.

    >>> enc = encoder_with(nn.Tanh)(3, 2, (4,), 0.0)
    >>> [type(m).__name__ for m in enc.net]
    ['Linear', 'Tanh', 'Dropout', 'Linear']
    >>> [type(m).__name__ for m in encoder_with(nn.ReLU, 0.1)(3, 2, (4,), 0.0).net]
    ['Dropout', 'Linear', 'ReLU', 'Dropout', 'Linear']
    """

    class Encoder(_Encoder):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            for i, m in enumerate(self.net):
                if isinstance(m, nn.ReLU):
                    self.net[i] = activation()
            if input_dropout > 0:
                if self.shared is not None:
                    raise ValueError("--input-dropout with a shared first layer is not built here")
                self.net.insert(0, nn.Dropout(input_dropout))

    return Encoder


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="dataset folder (with the truth recorded)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--activations", default="relu,elu,silu,tanh", help=f"which of {','.join(ACTIVATIONS)}")
    ap.add_argument("--input-dropout", default="0", help="comma-separated rates of dropout on the encoder's inputs "
                    "(default %(default)s: none)")
    ap.add_argument("settings", nargs="*", default=["dict()"],
                    help="CETModel overrides as validation_probe.py takes them (default: dict())")
    args = ap.parse_args(argv)
    labels = validation_probe.pick(ap, "--activations", args.activations, ACTIVATIONS)
    rates = [float(r) for r in args.input_dropout.split(",")]
    if any(not 0 <= r < 1 for r in rates):
        ap.error(f"--input-dropout: rates in [0, 1), got {rates}")
    for label in labels:
        for rate in rates:
            networks.OccurrenceEncoder = encoder_with(ACTIVATIONS[label], rate)
            try:
                print(f"encoder activation {label}, input dropout {rate:g}, seed {args.seed}:", flush=True)
                validation_probe.main(["--data", args.data, "--seed", str(args.seed), *args.settings])
            finally:
                networks.OccurrenceEncoder = _Encoder
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
