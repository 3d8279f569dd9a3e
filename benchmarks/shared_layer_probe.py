"""Would one first layer shared by CET's two heads lift its validation AUC? Validation split only.

    python benchmarks/shared_layer_probe.py --data data/experiments/mimic-standin [--seed 0] \
        [--variants default,shared,shared-untied-stage] ["dict(encoder_stage=False)" ...]

CET's occurrence encoder and time decoder are separate networks on the same features (as in the
paper's code). On the MIMIC stand-in the default CET reaches its best validation objective after
13-20 epochs and trails the oracle by more than half of BC's gap to it at 5,222 training rows,
closing more of it with more rows (docs/results.md, "Is it the size of the training set?"). A first
layer both heads share is the usual multi-task remedy for few rows: the times of the observed
events then shape the features the occurrence head reads. This fits the default CET with the
decoder's first linear map of x tied to the encoder's first layer (the same ``nn.Linear``; the
decoder adds its c term and bias path as before; ``shared``), the same with the encoder given its
own copy of that layer when the encoder stage starts (``shared-untied-stage``: the stage trains the
occurrence head alone, as by default), the encoder reading the shared layer beside a first layer of
its own (``shared-plus-private``: the library's ``CETModel(shared_first_layer=True)`` since
2026-11-28, and ``shared-plus-private-untied-stage``: the occurrence head keeps features the time
head does not shape), and the default, and prints ``validation_probe.py``'s lines (validation AUC
against the truth, ECE, MRAE, Harrell's C). The plain tie and the untying are made here, by
replacing ``cet_model.models.CETNetwork`` and ``CETModel._after_training`` for the probe's process.
Before 2026-11-28 ``shared-plus-private`` was built here too, the shared layer drawn after a
discarded default encoder: the same network, other initial weights (so other figures).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import copy  # noqa: E402

import validation_probe  # noqa: E402

import cet_model.models as models  # noqa: E402
from cet_model.networks import CETNetwork  # noqa: E402

_after_training = models.CETModel._after_training


class SharedFirstLayerCET(CETNetwork):
    """``CETNetwork`` whose decoder's ``x_proj`` is the encoder's first ``nn.Linear``."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        first = self.encoder.net[0]
        if first.out_features != self.decoder.x_proj.out_features:
            raise ValueError("the two heads' first layers differ in width; nothing to share")
        self.decoder.x_proj = first


def untie_then_stage(self, *args, **kw):
    """``CETModel._after_training`` that first gives the encoder its own copy of the shared layer,
    so that the encoder stage trains the occurrence head alone as it does by default."""
    if self.net_.decoder.x_proj is self.net_.encoder.net[0]:
        self.net_.decoder.x_proj = copy.deepcopy(self.net_.decoder.x_proj)
    if self.net_.decoder.x_proj is getattr(self.net_.encoder, "shared", None):
        self.net_.decoder.x_proj = copy.deepcopy(self.net_.decoder.x_proj)
    return _after_training(self, *args, **kw)


# label: (the network class CETModel builds, its _after_training, CETModel overrides)
VARIANTS = {"default": (CETNetwork, _after_training, {}), "shared": (SharedFirstLayerCET, _after_training, {}),
            "shared-untied-stage": (SharedFirstLayerCET, untie_then_stage, {}),
            "shared-plus-private": (CETNetwork, _after_training, {"shared_first_layer": True}),
            "shared-plus-private-untied-stage": (CETNetwork, untie_then_stage, {"shared_first_layer": True})}


def with_overrides(setting: str, overrides: dict) -> str:
    """A ``validation_probe.py`` setting with ``overrides`` added (they win over the setting's own).

    >>> with_overrides("dict(lr=0.01)", {"shared_first_layer": True})
    "{'lr': 0.01, 'shared_first_layer': True}"
    """
    return repr({**validation_probe.parse(setting), **overrides})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="dataset folder (with the truth recorded)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variants", default="default,shared,shared-untied-stage",
                    help=f"which of {','.join(VARIANTS)} (default %(default)s)")
    ap.add_argument("settings", nargs="*", default=["dict()"],
                    help="CETModel overrides as validation_probe.py takes them (default: dict())")
    args = ap.parse_args(argv)
    labels = validation_probe.pick(ap, "--variants", args.variants, VARIANTS)
    for label in labels:
        network, after_training, overrides = VARIANTS[label]
        models.CETNetwork, models.CETModel._after_training = network, after_training
        try:
            print(f"{label}, seed {args.seed}:", flush=True)
            validation_probe.main(["--data", args.data, "--seed", str(args.seed),
                                   *(with_overrides(s, overrides) for s in args.settings)])
        finally:
            models.CETNetwork, models.CETModel._after_training = CETNetwork, _after_training
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
