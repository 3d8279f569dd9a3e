"""Would a linear term beside CET's network close the whas500 gap? Validation split only.

    python benchmarks/linear_skip_probe.py [--datasets veteran,pbc,whas500,GBSG2,actg,rott2] [--draws 5] \
        [--variants default,skip-time,skip-both,linear,shared] [--out benchmarks/results/linear_skip_probe.json]

On whas500 the default CET's Harrell's C is 0.012 below lifelines' LogNormalAFT on the test split,
while the linear CET (``hidden_sizes=()``) matches the AFT (docs/results.md, Real data); choosing
between the two by validation likelihood picks the wrong one on three of six sets. A model that
holds both, the network plus a linear term of the features, started at zero, could follow the
linear fit where the data are too few for the network, and the network where they are not. This
fits, on the SurvSet sets (``bench_survset.load``) and per draw ``r`` (``survset_size_probe``'s
``full`` size: the training split, 80 % fitting and 20 % early stopping, a random partition per
draw; CET seed ``r``):

- ``default``: ``CETModel()``;
- ``skip-time``: the same, with a linear term of x added to the time head's mu (per event);
- ``skip-both``: also one added to the occurrence logits;
- ``linear``: ``CETModel(hidden_sizes=())``;
- ``shared``: the default with one first layer shared by both heads (``shared_layer_probe.py``);
- ``shared-untied-stage``: the same, untied when the encoder stage starts (``shared_layer_probe.py``);
- ``shared-plus-private``: the encoder reads that layer beside one of its own (the library's
  ``CETModel(shared_first_layer=True)`` since 2026-11-28; built here before, with other initial
  weights), and ``shared-plus-private-untied-stage``, the same untied when the encoder stage starts;

and the AFT on the same fitting rows, and scores each on the data set's validation split
(Harrell's C of the restricted mean survival time, as ``bench_survset.py``), with each fit's
wall-clock seconds on this machine. The test split is not
read. The other variants are defined here, not in the library: this asks whether the idea is a lever.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_survset import fit_cet, fit_lifelines, load, score  # noqa: E402
from early_stopping_probe import write_record  # noqa: E402
from survset_size_probe import draw_parts  # noqa: E402

from cet_model.models import CETModel  # noqa: E402
from cet_model.networks import OccurrenceEncoder, TimeDecoder  # noqa: E402


class _SkipDecoder(TimeDecoder):
    """The time head with ``mu += x @ B`` (B (d, M), started at zero)."""

    def __init__(self, n_features, n_events, *args, **kw):
        super().__init__(n_features, n_events, *args, **kw)
        self.skip = nn.Linear(n_features, n_events, bias=False)
        nn.init.zeros_(self.skip.weight)

    def forward(self, x, c=None):
        mu, log_sigma = super().forward(x, c)
        lin = self.skip(x)  # (n, M)
        return mu + (lin.unsqueeze(1) if mu.dim() == 3 else lin), log_sigma


class _SkipEncoder(OccurrenceEncoder):
    """The occurrence head with ``logits += x @ B`` (B (d, M), started at zero)."""

    def __init__(self, n_features, n_events, *args, **kw):
        super().__init__(n_features, n_events, *args, **kw)
        self.skip = nn.Linear(n_features, n_events, bias=False)
        nn.init.zeros_(self.skip.weight)

    def forward(self, x):
        return super().forward(x) + self.skip(x)


class SkipCET(CETModel):
    """``CETModel`` whose heads also hold a linear term of the features (``skip``: "time" or "both")."""

    skip_heads = "time"

    def _build_network(self, n_features: int, n_events: int) -> torch.nn.Module:
        net = super()._build_network(n_features, n_events)
        d = net.decoder.x_proj.in_features
        old = net.decoder
        net.decoder = _SkipDecoder(d, n_events, self.hidden_sizes_, float(self.dropout), self.sigma_,
                                   use_c=old.c_proj is not None)
        if self.skip_heads == "both":
            net.encoder = _SkipEncoder(d, n_events, self.hidden_sizes_, float(self.dropout))
        return net


class SkipBothCET(SkipCET):
    skip_heads = "both"


class SharedFirstLayerCETModel(CETModel):
    """``CETModel`` whose two heads share their first layer (``shared_layer_probe.SharedFirstLayerCET``)."""

    def _build_network(self, n_features: int, n_events: int) -> torch.nn.Module:
        from shared_layer_probe import SharedFirstLayerCET

        return SharedFirstLayerCET(n_features, n_events, self.hidden_sizes_, float(self.dropout), self.sigma_,
                                   comment_encoder=self.comment_encoder_,
                                   condition_on_occurrence=bool(self.condition_on_occurrence))


class _UntiedAtStage:
    """Gives the decoder its own copy of the shared layer when the encoder stage starts
    (``shared_layer_probe.untie_then_stage``)."""

    def _after_training(self, *args, **kw):
        from shared_layer_probe import untie_then_stage

        return untie_then_stage(self, *args, **kw)


class SharedPlusPrivateUntiedCETModel(_UntiedAtStage, CETModel):
    """``CETModel(shared_first_layer=True)``, untied when the encoder stage starts."""


class SharedUntiedStageCETModel(_UntiedAtStage, SharedFirstLayerCETModel):
    """The plain tie, untied when the encoder stage starts."""


VARIANTS = {"default": (CETModel, {}), "skip-time": (SkipCET, {}), "skip-both": (SkipBothCET, {}),
            "linear": (CETModel, {"hidden_sizes": ()}), "shared": (SharedFirstLayerCETModel, {}),
            "shared-untied-stage": (SharedUntiedStageCETModel, {}),
            "shared-plus-private": (CETModel, {"shared_first_layer": True}),
            "shared-plus-private-untied-stage": (SharedPlusPrivateUntiedCETModel, {"shared_first_layer": True})}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="veteran,pbc,whas500,GBSG2,actg,rott2", help="SurvSet names (default %(default)s)")
    ap.add_argument("--draws", type=int, default=5, help="draws (and CET seeds) (default %(default)s)")
    ap.add_argument("--variants", default="default,skip-time,skip-both,linear",
                    help=f"which of {','.join(VARIANTS)} (default %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    args = ap.parse_args(argv)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        ap.error(f"--variants: unknown {unknown}; known: {','.join(VARIANTS)}")
    rows, summary = [], []
    for name in args.datasets.split(","):
        parts, names, _ = load(name)
        diffs = {v: [] for v in variants}
        for r in range(args.draws):
            part = draw_parts(parts, "full", r, 0, 0)
            aft = score("LogNormalAFT", fit_lifelines(part, "aft", names)[0], part, 0.0)["harrell_c"]
            row = {"dataset": name, "draw": r, "n_fit": len(part["train"][1]), "aft_c": round(aft, 4)}
            for v in variants:
                cls, kw = VARIANTS[v]
                surv, seconds, _ = fit_cet(part, cls, seed=r, **kw)
                c = score(v, surv, part, 0.0)["harrell_c"]
                row[f"{v}_c"], row[f"{v}_seconds"] = round(c, 4), round(seconds, 2)
                diffs[v].append(c - aft)
            rows.append(row)
        line = {"dataset": name, "n_fit": rows[-1]["n_fit"]}
        for v in variants:
            d = np.array(diffs[v])
            line[f"{v}_minus_aft_mean"] = round(float(d.mean()), 4)
            line[f"{v}_minus_aft_sd"] = round(float(d.std(ddof=1)), 4) if d.size > 1 else 0.0
            line[f"{v}_fit_seconds"] = round(float(np.mean([row[f"{v}_seconds"] for row in rows if row["dataset"] == name])), 2)
        summary.append(line)
        print(f"{name:<8} ({line['n_fit']:>5} fitting rows) minus AFT, validation C: "
              + ", ".join(f"{v} {line[f'{v}_minus_aft_mean']:+.4f} (sd {line[f'{v}_minus_aft_sd']:.4f}; "
                          f"fit {line[f'{v}_fit_seconds']:.1f} s)" for v in variants),
              flush=True)
    if args.out:
        write_record(args.out, "linear_skip_probe.py", argv, "SurvSet", variants=variants, rows=rows, mean=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
