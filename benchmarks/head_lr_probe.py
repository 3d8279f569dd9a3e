"""Does a learning rate per head move CET's fit to another optimum? Validation split only.

    python benchmarks/head_lr_probe.py --data data/experiments/mimic-standin [--seeds 0,1] \
        [--factors 0.3/1,3/1,1/0.3,1/3] [--out benchmarks/results/head_lr_mimic.json]

The default CET trains its time decoder and its occurrence encoder with one Adam learning rate
(``lr``, 1e-3) and, on the MIMIC stand-in, stops in a worse optimum of its own objective than the
pair fitted with the occurrence known (``decoder_warmup_probe.py``); warm starts from either side,
annealing, stochastic EM, block EM and dropout per head all land near the default's optimum. A
fit whose two heads move on different time scales follows another path through the same
landscape: with a fast decoder the time head keeps near its best answer to the current
occurrence head (block EM in the limit), with a slow one the occurrence head does. ``--factors``
lists decoder/encoder multipliers of the default learning rate (1/1 is the default); the encoder
stage, which trains the encoder alone, keeps the encoder's multiplier.

Per seed: BC and the oracle (the goal's floor and ceiling), the default CET, and CET with each
pair of multipliers; per fit the validation objective (lower is better; the only figure a rule
without the truth may use), the validation AUC against the true occurrence, the share of BC's gap
to the oracle and the joint stage's best epoch. The test split is not read.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from early_stopping_probe import compare_fits, variant_fitters  # noqa: E402
from time_head_ceiling import head_pairs, truth_inputs, truth_probe_parser  # noqa: E402

import cet_model.train as training  # noqa: E402
from cet_model.models import CETModel  # noqa: E402


class HeadLR(CETModel):
    """CET whose decoder and encoder parameters take Adam's learning rate times ``factors``
    (decoder, encoder): the library's training loop builds ``torch.optim.Adam(params, lr=...)``;
    during this model's fit that name builds one parameter group per head instead."""

    factors: tuple[float, float] = (1.0, 1.0)

    def fit(self, *args, **kwargs):
        plain = training.torch.optim.Adam
        factors = self.factors

        def grouped(params, lr):
            net = self.net_
            heads = [{id(p) for p in net.decoder.parameters()}, {id(p) for p in net.encoder.parameters()}]
            groups = [{"params": [p for p in params if id(p) in ids], "lr": lr * f} for ids, f in zip(heads, factors, strict=True)]
            rest = [p for p in params if not any(id(p) in ids for ids in heads)]
            if rest:
                raise RuntimeError(f"{len(rest)} trainable parameters belong to neither head")
            return plain([g for g in groups if g["params"]], lr=lr)

        training.torch.optim.Adam = grouped
        try:
            return super().fit(*args, **kwargs)
        finally:
            training.torch.optim.Adam = plain


def main(argv=None) -> int:
    ap = truth_probe_parser(__doc__)
    ap.add_argument("--factors", default="0.3/1,3/1,1/0.3,1/3",
                    help="comma-separated decoder/encoder learning-rate multipliers (default %(default)s)")
    args = ap.parse_args(argv)
    pairs = head_pairs(ap, "--factors", args.factors, lambda r: r > 0, "learning-rate multipliers > 0")
    inputs = truth_inputs(ap, args.data)

    fitters = variant_fitters(HeadLR, "factors", {f"decoder x{p[0]:g}, encoder x{p[1]:g}": p for p in pairs}, CETModel)
    compare_fits(inputs, args.seeds, fitters, args.out,
                 "head_lr_probe.py", argv, args.data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
