"""Regularising the occurrence head in the encoder stage only: can the objective judge it? Validation only.

    python benchmarks/stage_regularisation_probe.py --data data/experiments/mimic-standin [--seeds 0,1] \
        [--variants dropout0.7,lr0.3,dropout0.7-lr0.3,fresh] [--out benchmarks/results/stage_reg_mimic.json]

On the MIMIC stand-in whatever slows or regularises the occurrence encoder over the whole fit
(its dropout at 0.7, ``part_dropout_probe.py``; its learning rate times 0.3, ``head_lr_probe.py``)
adds about 0.002 of validation AUC, and the validation objective rejects it: those fits also
change the time decoder (the joint stop comes later), so the objective compares two heads at
once. Here the joint stage is the default's in every fit (same seed, same weights at its stop),
and only the encoder stage differs, the time decoder frozen at the same weights: the validation
objective then compares occurrence heads alone. Variants of the stage (``--variants``):

- ``dropoutR``: the encoder's hidden-layer dropout at R during the stage (0.5 by default);
- ``lrF``: the stage's learning rate times F;
- ``dropoutR-lrF``: both;
- ``fresh``: the encoder from its initial weights (its logits at the observed share), then the
  stage, against the frozen decoder.

Per seed: BC and the oracle, the default CET and each variant; per fit the validation objective
(lower is better; the only figure a rule without the truth may use), the validation AUC against the
true occurrence, the share of BC's gap to the oracle and the joint stage's best epoch. The test
split is not read.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from early_stopping_probe import compare_fits, variant_fitters  # noqa: E402
from time_head_ceiling import truth_inputs, truth_probe_parser  # noqa: E402

from cet_model.models import CETModel  # noqa: E402

VARIANT = re.compile(r"^(?:dropout(?P<rate>0?\.\d+))?-?(?:lr(?P<factor>\d*\.?\d+))?$")


def parse_variant(name: str) -> dict | None:
    """``dropout0.7`` / ``lr0.3`` / ``dropout0.7-lr0.3`` / ``fresh`` -> the stage's settings, or None.

    >>> parse_variant("dropout0.7-lr0.3"), parse_variant("fresh"), parse_variant("lr3"), parse_variant("x")
    ({'rate': 0.7, 'factor': 0.3, 'fresh': False}, {'rate': None, 'factor': 1.0, 'fresh': True}, \
{'rate': None, 'factor': 3.0, 'fresh': False}, None)
    """
    if name == "fresh":
        return {"rate": None, "factor": 1.0, "fresh": True}
    m = VARIANT.match(name)
    if not name or m is None or not (m["rate"] or m["factor"]) or name.startswith("-") or name.endswith("-"):
        return None
    rate = None if m["rate"] is None else float(m["rate"])
    factor = 1.0 if m["factor"] is None else float(m["factor"])
    if (rate is not None and not 0.0 <= rate < 1.0) or not factor > 0:
        return None
    return {"rate": rate, "factor": factor, "fresh": False}


class StageVariant(CETModel):
    """The default CET whose encoder stage runs with ``stage`` settings (``parse_variant``)."""

    stage: dict | None = None

    def _prepare(self, t, s, m):
        super()._prepare(t, s, m)
        self.encoder_start_ = {k: v.detach().clone() for k, v in self.net_.encoder.state_dict().items()}

    def _encoder_stage_config(self, n_train):
        config = super()._encoder_stage_config(n_train)
        return dataclasses.replace(config, lr=config.lr * self.stage["factor"])

    def _after_training(self, batch_loss, n_train, val_loss, val_tensors, on_epoch) -> None:
        dropouts = [m for m in self.net_.encoder.modules()
                    if isinstance(m, torch.nn.Dropout) and m is not self.net_.encoder.input_dropout]
        rates = [m.p for m in dropouts]
        joint_losses = self.history_.val_loss
        if self.stage["fresh"]:
            self.net_.encoder.load_state_dict(self.encoder_start_)
            self.history_.val_loss = [float("inf")]  # the stage's start_best: any epoch replaces the start
        for m in dropouts:
            m.p = rates[0] if self.stage["rate"] is None else self.stage["rate"]
        try:
            super()._after_training(batch_loss, n_train, val_loss, val_tensors, on_epoch)
        finally:
            self.history_.val_loss = joint_losses
            for m, r in zip(dropouts, rates, strict=True):
                m.p = r


def main(argv=None) -> int:
    ap = truth_probe_parser(__doc__)
    ap.add_argument("--variants", default="dropout0.7,lr0.3,dropout0.7-lr0.3,fresh",
                    help="comma-separated stage variants (default %(default)s)")
    args = ap.parse_args(argv)
    variants = {name: parse_variant(name) for name in args.variants.split(",")}
    bad = [name for name, v in variants.items() if v is None]
    if bad:
        ap.error(f"--variants: unknown {bad}; use dropoutR (R in [0, 1)), lrF (F > 0), dropoutR-lrF or fresh")
    inputs = truth_inputs(ap, args.data)

    fitters = variant_fitters(StageVariant, "stage", {f"stage {name}": v for name, v in variants.items()}, CETModel)
    compare_fits(inputs, args.seeds, fitters, args.out,
                 "stage_regularisation_probe.py", argv, args.data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
