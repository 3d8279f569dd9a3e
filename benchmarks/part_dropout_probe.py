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

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from early_stopping_probe import (  # noqa: E402
    floor_and_ceiling,
    gap_share,
    truth_scores,
    validation_inputs,
    write_record,
)
from time_head_ceiling import require_truth  # noqa: E402

from cet_model.evaluation import PRESETS, comment_encoder_for  # noqa: E402
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
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="dataset folder (with the truth recorded)")
    ap.add_argument("--seeds", default="0,1", help="comma-separated seeds (default %(default)s)")
    ap.add_argument("--pairs", default="0.1/0.5,0.3/0.5,0.7/0.5,0.5/0.1,0.5/0.3,0.5/0.7",
                    help="comma-separated decoder/encoder dropout rates (default %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    args = ap.parse_args(argv)
    ds, tr, va, x_tr, x_va = validation_inputs(args.data)
    require_truth(ap, args.data, tr, va)
    pairs = [tuple(float(r) for r in p.split("/")) for p in args.pairs.split(",")]
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        t0 = time.perf_counter()
        base = floor_and_ceiling(ds, x_tr, x_va, seed)
        kw = dict(seed=seed, comment_encoder=comment_encoder_for(tr), **PRESETS["CET"][1])
        fits = {}
        for pair in [None] + pairs:
            model = CETModel(**kw) if pair is None else PartDropout(**kw)
            if pair is not None:
                model.rates = pair
            model.fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
            auc = truth_scores(model.predict_occurrence(x_va), va.C, va.mask)[0]
            fits["default" if pair is None else f"decoder {pair[0]:g}, encoder {pair[1]:g}"] = {
                "val_objective": round(-model.score(x_va, va.T, va.S, mask=va.mask), 5), "val_auc": round(auc, 4),
                "gap_share": round(gap_share(auc, base["BC"], base["Oracle"]), 3),
                "best_epoch": model.history_.best_epoch + 1}
        rows.append({"seed": seed, "val_auc_bc": round(base["BC"], 4), "val_auc_oracle": round(base["Oracle"], 4),
                     "seconds": round(time.perf_counter() - t0, 1), "fits": fits})
        print(f"seed {seed}: BC {base['BC']:.4f}, oracle {base['Oracle']:.4f} ({rows[-1]['seconds']:.0f}s)", flush=True)
        for k, v in fits.items():
            print(f"  {k}: objective {v['val_objective']:.5f}, AUC {v['val_auc']:.4f} ({v['gap_share']:.0%}), "
                  f"best joint epoch {v['best_epoch']}", flush=True)
    if args.out:
        write_record(args.out, "part_dropout_probe.py", argv, args.data, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
