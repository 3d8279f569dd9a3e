"""Could CET's encoder-only stage do better? Variants of the stage, scored on the validation split only.

    python benchmarks/encoder_stage_probe.py --data data/experiments/mimic-standin [--seeds 0,1,2] \
        [--variants default,lr0.3,lr0.1,alternate] [--out benchmarks/results/encoder_stage_probe_mimic.json]

The default CET (``encoder_stage=True``) stops the joint fit on the validation objective, then
trains the occurrence encoder alone with the time decoder frozen, at the same learning rate and
with the stage's early stopping (docs/results.md, "When training stops"; half the joint stage's
patience since 2026-11-25: the ``encoder_stage_probe_{mimic,reddit}.json`` records were made before, with the
full patience; ``encoder_stage_probe_mimic_ema.json`` after). Per seed this fits BC and
the Oracle (the goal arithmetic's floor and ceiling), then CET's joint stage once, and from those
same weights runs each variant of the second stage with the library's own ``train``:

- ``default``: the stage as the model runs it (same learning rate);
- ``lr0.3``, ``lr0.1``, ...: the stage at that fraction of the learning rate;
- ``alternate``: the default stage, then the decoder alone, then the encoder alone again (block
  coordinate descent), each starting from the best objective so far.
- ``ema0.99``, ...: the default stage, but the weights it is judged and stopped on are an
  exponential moving average of the encoder's weights after every optimizer step (Polyak
  averaging; the number is the decay per step), and the best averaged weights are kept.
- ``evaldecoder``: the default stage with the frozen time decoder in evaluation mode (its
  dropout off), so the encoder is fitted against the same decoder the validation objective and
  predictions use; a decoder that does not change could then be computed once per stage.
- ``evaldecoder-lr0.3``, ...: both at once (the decoder's dropout off, the stage at that fraction
  of the learning rate).

It reports, per variant, the validation objective the stage ends on (lower is better; this is all
a rule that picks a variant may use), the validation AUC of P(ever) against the true occurrence
and the share of the BC-to-oracle gap that AUC closes. The test split is not read.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
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

from cet_model.evaluation import (  # noqa: E402
    PRESETS,
    comment_encoder_for,
)
from cet_model.models import CETModel  # noqa: E402
from cet_model.train import train, training_only  # noqa: E402


class JointOnly(CETModel):
    """CET whose fit ends after the joint stage, keeping what a further stage needs."""

    def _after_training(self, batch_loss, n_train, val_loss, val_tensors, on_epoch) -> None:
        self.encoder_history_ = None
        self.stage_inputs_ = (batch_loss, n_train, val_loss)
        self.stage_val_tensors_ = val_tensors


def run_stage(model: JointOnly, part: str, lr_factor: float, start_best: float, ema: float | None = None,
              eval_decoder: bool = False):
    """Train ``model.net_.<part>`` alone from the weights it holds; returns the stage's History.

    ``ema``: judge and stop the stage on an exponential moving average of ``part``'s weights
    (updated before every optimizer step's loss, so it trails the step by one), and leave the
    best averaged weights in the model. ``eval_decoder``: the decoder's dropout is off while the
    stage trains the encoder."""
    batch_loss, n_train, val_loss = model.stage_inputs_
    if eval_decoder:
        def quiet_decoder_loss(idx, inner=batch_loss):
            model.net_.decoder.eval()  # train() switches the whole network to training mode each epoch
            return inner(idx)
        batch_loss = quiet_decoder_loss
    cfg = dataclasses.replace(model._encoder_stage_config(n_train), lr=float(model.lr) * lr_factor)
    module = getattr(model.net_, part)
    if ema is not None:
        average = {k: v.detach().clone() for k, v in module.state_dict().items()}
        kept = {"best": start_best, "state": None}

        def averaged_batch_loss(idx, inner=batch_loss):
            with torch.no_grad():
                for k, v in module.state_dict().items():
                    average[k].mul_(ema).add_(v, alpha=1.0 - ema)
            return inner(idx)

        def averaged_val_loss(inner=val_loss):
            current = {k: v.detach().clone() for k, v in module.state_dict().items()}
            module.load_state_dict(average)
            value = inner()
            if value < kept["best"]:
                kept["best"], kept["state"] = value, {k: v.clone() for k, v in average.items()}
            module.load_state_dict(current)
            return value

        batch_loss, val_loss = averaged_batch_loss, averaged_val_loss
    with training_only(model.net_, module):
        hist = train(model.net_, batch_loss, n_train, cfg, model.shuffle_generator_, val_loss,
                     desc=f"{part} x{lr_factor}" + ("" if ema is None else f" ema {ema}"), start_best=start_best)
    if ema is not None and kept["state"] is not None:
        module.load_state_dict(kept["state"])
    return hist


def stage_plan(name: str) -> list[tuple[str, float, float | None]]:
    """The (part trained, learning-rate factor, weight-average decay or None) stages of variant
    ``name``, in order.

    >>> stage_plan("lr0.3"), stage_plan("ema0.99"), stage_plan("evaldecoder-lr0.3")
    ([('encoder', 0.3, None)], [('encoder', 1.0, 0.99)], [('encoder', 0.3, None)])
    """
    if name == "evaldecoder":
        return [("encoder", 1.0, None)]
    if name.startswith("evaldecoder-lr"):
        return stage_plan(name[len("evaldecoder-"):])
    if name == "alternate":
        return [("encoder", 1.0, None), ("decoder", 1.0, None), ("encoder", 1.0, None)]
    if name == "default":
        return [("encoder", 1.0, None)]
    try:
        factor = float(name[2:]) if name.startswith("lr") else None
        decay = float(name[3:]) if name.startswith("ema") else None
    except ValueError:
        factor = decay = None
    if decay is not None and 0 < decay < 1:
        return [("encoder", 1.0, decay)]
    if factor is None or not factor > 0:
        raise ValueError(f"unknown variant {name!r}; use default, alternate, evaldecoder, lr<factor> "
                         "(e.g. lr0.3), evaldecoder-lr<factor> or ema<decay> (e.g. ema0.99)")
    return [("encoder", factor, None)]


def variant(model: JointOnly, name: str, joint_best: float) -> tuple[float, list[int]]:
    """Run variant ``name`` of the second stage; (final validation objective, epochs per stage)."""
    best, epochs = joint_best, []
    for part, factor, ema in stage_plan(name):
        hist = run_stage(model, part, factor, best, ema, eval_decoder=name.startswith("evaldecoder"))
        best = min(best, min(hist.val_loss))
        epochs.append(len(hist.train_loss))
    return best, epochs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="dataset folder (with the truth recorded)")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default %(default)s)")
    ap.add_argument("--variants", default="default,lr0.3,lr0.1,alternate",
                    help="comma-separated stage variants (default %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    args = ap.parse_args(argv)
    names = args.variants.split(",")
    try:  # refuse a wrong name now, not after the first seed's fits
        for name in names:
            stage_plan(name)
    except ValueError as err:
        ap.error(str(err))
    ds, tr, va, x_tr, x_va = validation_inputs(args.data)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        base = floor_and_ceiling(ds, x_tr, x_va, seed)
        model = JointOnly(seed=seed, comment_encoder=comment_encoder_for(tr), **PRESETS["CET"][1])
        model.fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
        joint_state = {k: v.clone() for k, v in model.net_.state_dict().items()}
        shuffle_state = model.shuffle_generator_.get_state()
        joint_best = min(model.history_.val_loss)
        auc = truth_scores(model.predict_occurrence(x_va), va.C, va.mask)[0]
        row = {"seed": seed, "val_auc_bc": round(base["BC"], 4), "val_auc_oracle": round(base["Oracle"], 4),
               "joint_val_objective": round(joint_best, 5), "joint_val_auc": round(auc, 4),
               "joint_gap_share": round(gap_share(auc, base["BC"], base["Oracle"]), 3), "variants": {}}
        line = f"seed {seed}: BC {base['BC']:.4f}, oracle {base['Oracle']:.4f}, joint stop {auc:.4f}"
        for name in names:
            model.net_.load_state_dict(joint_state)
            model.shuffle_generator_.set_state(shuffle_state)
            t0 = time.perf_counter()
            objective, epochs = variant(model, name, joint_best)
            seconds = time.perf_counter() - t0
            auc = truth_scores(model.predict_occurrence(x_va), va.C, va.mask)[0]
            share = gap_share(auc, base["BC"], base["Oracle"])
            row["variants"][name] = {"val_objective": round(objective, 5), "val_auc": round(auc, 4),
                                     "gap_share": round(share, 3), "epochs": epochs, "seconds": round(seconds, 1)}
            line += f" | {name}: objective {objective:.5f}, AUC {auc:.4f} ({share:.0%}), {seconds:.0f}s"
        rows.append(row)
        print(line, flush=True)
    summary = {}
    for name in names:
        vals = [r["variants"][name] for r in rows]
        summary[name] = {key: round(float(np.mean([v[key] for v in vals])), 5)
                         for key in ("val_objective", "val_auc", "gap_share")}
        summary[name]["objective_below_default_in"] = (
            sum(v["val_objective"] < r["variants"]["default"]["val_objective"] for v, r in zip(vals, rows, strict=True))
            if "default" in names else None)
        print(f"{name:10s} mean objective {summary[name]['val_objective']:.5f}, AUC {summary[name]['val_auc']:.4f}, "
              f"gap share {summary[name]['gap_share']:.3f}", flush=True)
    if args.out:
        write_record(args.out, "encoder_stage_probe.py", argv, args.data, rows=rows, mean=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
