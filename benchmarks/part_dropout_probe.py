"""Is one of CET's two heads the one that overfits first? Dropout set per head, validation only.

    python benchmarks/part_dropout_probe.py --data data/experiments/mimic-standin [--seeds 0,1] \
        [--pairs 0.1/0.5,0.3/0.5,0.7/0.5,0.5/0.1,0.5/0.3,0.5/0.7] [--out benchmarks/results/part_dropout_mimic.json]

The default CET stops its joint stage a few hundred steps in, on the validation objective, in a
worse optimum of that objective than the pair fitted with the occurrence known
(``decoder_warmup_probe.py``). Dropout (0.5) was probed for both heads at once before; this probe
sets the rate of one head's hidden layers at a time, the other's left at the default: does a
better-regularised time decoder (or occurrence encoder) let the fit travel further before the
validation objective turns? ``--pairs`` lists decoder/encoder rates (0.5/0.5 is the default).

Per seed: BC and the oracle (the goal's floor and ceiling), the default CET, and CET with each
pair of rates; per fit the validation objective
(lower is better; the only figure a rule without the truth may use), the validation AUC against
the true occurrence, the share of BC's gap to the oracle and the joint stage's best epoch. The
test split is not read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from early_stopping_probe import compare_fits, variant_fitters  # noqa: E402
from time_head_ceiling import head_pairs, truth_inputs, truth_probe_parser  # noqa: E402

from cet_model.models import CETModel  # noqa: E402
from cet_model.networks import RowDropout  # noqa: E402


class PartDropout(CETModel):
    """CET whose time decoder and occurrence encoder have hidden-layer dropout ``rates``
    (decoder, encoder)."""

    rates: tuple[float, float] = (0.5, 0.5)

    def _build_network(self, n_features, n_events):
        net = super()._build_network(n_features, n_events)
        for part, rate in zip((net.decoder, net.encoder), self.rates, strict=True):
            for module in part.modules():
                if isinstance(module, (RowDropout, torch.nn.Dropout)) and module is not net.encoder.input_dropout:
                    module.p = rate  # the hidden layers' (the decoder's RowDropout, the encoder's Dropout)
        return net


def main(argv=None) -> int:
    ap = truth_probe_parser(__doc__)
    ap.add_argument("--pairs", default="0.1/0.5,0.3/0.5,0.7/0.5,0.5/0.1,0.5/0.3,0.5/0.7",
                    help="comma-separated decoder/encoder dropout rates (default %(default)s)")
    args = ap.parse_args(argv)
    pairs = head_pairs(ap, "--pairs", args.pairs, lambda r: 0.0 <= r < 1.0, "dropout rates in [0, 1)")
    inputs = truth_inputs(ap, args.data)

    fitters = variant_fitters(PartDropout, "rates", {f"decoder {p[0]:g}, encoder {p[1]:g}": p for p in pairs}, CETModel)
    compare_fits(inputs, args.seeds, fitters, args.out,
                 "part_dropout_probe.py", argv, args.data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
