"""Does CET's joint fit escape its early-biased time head from a decoder warmed up as ET's? And is
the better pair better on the training rows too?

    python benchmarks/decoder_warmup_probe.py --data data/experiments/mimic-standin [--seeds 0,1] \
        [--out benchmarks/results/decoder_warmup_mimic.json]

``time_head_ceiling.py`` found the default CET's joint fit stopping in a worse optimum of its own
validation objective than the same encoder reaches against a decoder fitted with the occurrence
known; the default's time head is biased early. A decoder fitted early sees the observed times
only (the cells the marginal likelihood pins to c = 1); the censored cells then look like events
that never come, so the encoder learns a low P(ever) for them and the decoder is not pushed later.
This probe starts the decoder the other way, as ET's time model would be fitted: every cell's event
happens (each row decoded with the all-ones occurrence pattern), observed or censored as the data
have it — no truth used. Then, per seed:

- ``default``: the default CET (joint stage, then the encoder stage): the tables' model.
- ``known-c pair``: the encoder from its start against a decoder fitted with the true
  occurrence known (``time_head_ceiling.py``'s ``known-c decoder, encoder from its start``; the
  truth used to diagnose): the better optimum to compare the others with.
- ``ET warm-up, encoder from its start``: the warmed-up decoder frozen, the occurrence encoder
  trained from its initial weights by the marginal likelihood (the joint stage's budget).
- ``ET warm-up, encoder, then joint``: from there, the whole network by the marginal likelihood
  (kept only where the validation objective improves), then the encoder stage.
- ``ET warm-up, joint from the encoder's start``: the warmed-up decoder and the encoder's initial
  weights, the whole network by the marginal likelihood, then the encoder stage.

Per variant: the validation objective (lower is better; the only figure a rule without the truth
may use), the same objective on the training rows (is the default's optimum better there, so that
the training objective itself prefers it, or only worse on both?), the validation AUC against the true occurrence and the share of BC's gap to the oracle;
per decoder, its fit to the validation split's true times (``time_head_ceiling.decoder_fit``). The
truth is used to diagnose, never to choose; the test split is not read.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from early_stopping_probe import (  # noqa: E402
    floor_and_ceiling,
    gap_share,
    truth_scores,
    write_record,
)
from time_head_ceiling import (  # noqa: E402
    StartKept,
    decoder_fit,
    decoder_fitted,
    decoder_on_known_occurrence,
    encoder_against,
    stage,
    truth_inputs,
    truth_probe_parser,
)

from cet_model.evaluation import PRESETS, comment_encoder_for  # noqa: E402


def decoder_as_et(model: StartKept, x_tr, tr, x_va, va) -> dict:
    """A time decoder fitted as if every event happens (``time_head_ceiling.decoder_fitted``): every
    (unmasked) cell decoded with the all-ones occurrence pattern, its time observed or censored as
    the data have it. Returns the decoder's weights (its History in ``model.warmup_history_``)."""
    def every_event_happens(split):
        keep = np.ones_like(split.S) if split.mask is None else (split.mask > 0.5).astype(float)
        return np.ones_like(split.S), keep
    fitted, model.warmup_history_ = decoder_fitted(model, x_tr, tr, x_va, va, every_event_happens, "decoder as ET")
    return fitted


def probe_seed(seed: int, ds, tr, va, x_tr, x_va) -> dict:
    """One seed's fits and figures (the module docstring lists the variants)."""
    preset = PRESETS["CET"][1]
    t0 = time.perf_counter()
    base = floor_and_ceiling(ds, x_tr, x_va, seed)
    kw = dict(seed=seed, comment_encoder=comment_encoder_for(tr), **preset)
    model = StartKept(**kw).fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
    joint = {k: v.clone() for k, v in model.net_.state_dict().items()}
    shuffle = model.shuffle_generator_.get_state()
    stage_cfg = model._encoder_stage_config(model.stage_inputs_[1])
    variants, decoders = {}, {}

    def objective() -> float:
        return -model.score(x_va, va.T, va.S, mask=va.mask)

    def record(name: str, decoder: str | None = None) -> None:
        auc = truth_scores(model.predict_occurrence(x_va), va.C, va.mask)[0]
        variants[name] = {"val_objective": round(objective(), 5),
                          "train_objective": round(-model.score(x_tr, tr.T, tr.S, mask=tr.mask), 5),
                          "val_auc": round(auc, 4),
                          "gap_share": round(gap_share(auc, base["BC"], base["Oracle"]), 3)}
        if decoder:
            decoders[decoder] = decoder_fit(model, x_va, va)

    decoders["default, joint stage"] = decoder_fit(model, x_va, va)
    stage(model, "encoder", stage_cfg, start_best=min(model.history_.val_loss))
    record("default")

    model.net_.load_state_dict(joint)
    model.shuffle_generator_.set_state(shuffle)
    known = decoder_on_known_occurrence(model, x_tr, tr, x_va, va)
    encoder_against(model, known, model.encoder_start_, model._config())
    record("known-c pair", decoder="known c")

    model.net_.load_state_dict(joint)
    model.shuffle_generator_.set_state(shuffle)
    warm = decoder_as_et(model, x_tr, tr, x_va, va)
    model.net_.decoder.load_state_dict(warm)
    decoders["ET warm-up"] = dict(decoder_fit(model, x_va, va), best_epoch=model.warmup_history_.best_epoch + 1)
    model.net_.encoder.load_state_dict(model.encoder_start_)
    stage(model, "encoder", model._config())
    record("ET warm-up, encoder from its start")
    stage(model, None, model._config(), start_best=objective())
    stage(model, "encoder", stage_cfg, start_best=objective())
    record("ET warm-up, encoder, then joint", decoder="ET warm-up, encoder, then joint")

    model.net_.decoder.load_state_dict(warm)
    model.net_.encoder.load_state_dict(model.encoder_start_)
    stage(model, None, model._config())
    stage(model, "encoder", stage_cfg, start_best=objective())
    record("ET warm-up, joint from the encoder's start", decoder="ET warm-up, joint from the encoder's start")

    return {"seed": seed, "val_auc_bc": round(base["BC"], 4), "val_auc_oracle": round(base["Oracle"], 4),
            "seconds": round(time.perf_counter() - t0, 1), "variants": variants,
            "decoders": {k: {a: round(b, 4) for a, b in v.items()} for k, v in decoders.items()}}


def main(argv=None) -> int:
    ap = truth_probe_parser(__doc__)
    args = ap.parse_args(argv)
    ds, tr, va, x_tr, x_va = truth_inputs(ap, args.data)
    rows = []
    for seed in args.seeds:
        row = probe_seed(seed, ds, tr, va, x_tr, x_va)
        rows.append(row)
        print(f"seed {seed}: BC {row['val_auc_bc']:.4f}, oracle {row['val_auc_oracle']:.4f} ({row['seconds']:.0f}s)",
              flush=True)
        for k, v in row["variants"].items():
            print(f"  {k}: objective {v['val_objective']:.5f} (training rows {v['train_objective']:.5f}), AUC {v['val_auc']:.4f} ({v['gap_share']:.0%})")
        for k, v in row["decoders"].items():
            print(f"  decoder {k}, on the true times: " + ", ".join(f"{a} {b}" for a, b in v.items()), flush=True)
    summary = {k: {key: round(float(np.mean([r["variants"][k][key] for r in rows])), 5)
                   for key in ("val_objective", "train_objective", "val_auc", "gap_share")} for k in rows[0]["variants"]}
    print("mean over seeds:")
    for k, v in summary.items():
        print(f"  {k}: objective {v['val_objective']:.5f} (training rows {v['train_objective']:.5f}), "
              f"AUC {v['val_auc']:.4f} ({v['gap_share']:.1%})")
    if args.out:
        write_record(args.out, "decoder_warmup_probe.py", argv, args.data, rows=rows, mean=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
