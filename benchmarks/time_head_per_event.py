"""Where does the time head cost CET its occurrence AUC? The default and the known-c pair, per event.

    python benchmarks/time_head_per_event.py --data data/experiments/mimic-standin [--seeds 0,1] \
        [--out benchmarks/results/time_head_per_event_mimic.json]

``time_head_ceiling.py`` and ``decoder_warmup_probe.py`` compare, averaged over events, the
default CET with the same occurrence encoder trained against a time decoder fitted with the true
occurrence known (the "known-c pair"). This probe splits those figures by event, on the validation
split: the share of rows whose event happens, the share observed, the share of happening events the
censoring hides, and for each fit the AUC of P(ever) against the true occurrence and its time
decoder's fit to the true times of the happening events (mean log-density, and mean mu - log T_true
over them and over the hidden ones), each decoded with the row's true occurrence pattern. The
truth is used to diagnose, never to choose; the test split is not read.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from early_stopping_probe import write_record  # noqa: E402
from time_head_ceiling import (  # noqa: E402
    StartKept,
    decoder_on_known_occurrence,
    encoder_against,
    stage,
    truth_inputs,
    truth_probe_parser,
)

from cet_model.evaluation import PRESETS, comment_encoder_for  # noqa: E402
from cet_model.metrics import occurrence_auc  # noqa: E402


def per_event(model, x, split, event_names) -> dict[str, dict[str, float]]:
    """Per event: the shares (happens, observed, hidden among the happening), the AUC of P(ever)
    and the time decoder's fit to the true times (log-density, bias, bias on the hidden cells)."""
    c = split.C > 0.5
    model.net_.eval()
    with torch.no_grad():
        h = model.net_.features(model._x_tensor(x))
        mu, log_sigma = (a[:, 0].cpu().numpy() for a in model._decode(h, model._tensor(c.astype(float)).unsqueeze(1)))
    log_t = np.log(np.where(c, split.T_true, 1.0))
    z = (log_t - mu) / np.exp(log_sigma)
    log_density = -0.5 * z**2 - log_sigma - 0.5 * np.log(2 * np.pi)
    p = model.predict_occurrence(x)
    out = {}
    for j, name in enumerate(event_names):
        keep = np.ones(len(c), bool) if split.mask is None else split.mask[:, j] == 1
        happens, hidden = c[:, j] & keep, c[:, j] & keep & (split.S[:, j] < 0.5)
        out[name] = {"happens": c[keep, j].mean(), "observed": split.S[keep, j].mean(),
                     "hidden_of_happening": hidden.sum() / max(1, happens.sum()),
                     "auc": occurrence_auc(c[keep, j], p[keep, j]), "loglik": log_density[happens, j].mean(),
                     "bias": (mu - log_t)[happens, j].mean(), "bias_hidden": (mu - log_t)[hidden, j].mean()}
    return {e: {k: round(float(v), 4) for k, v in d.items()} for e, d in out.items()}


def probe_seed(seed: int, ds, tr, va, x_tr, x_va) -> dict:
    """The default (joint stage, encoder stage) and the known-c pair, per event."""
    t0 = time.perf_counter()
    kw = dict(seed=seed, comment_encoder=comment_encoder_for(tr), **PRESETS["CET"][1])
    model = StartKept(**kw).fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
    joint = {k: v.clone() for k, v in model.net_.state_dict().items()}
    shuffle = model.shuffle_generator_.get_state()
    stage(model, "encoder", model._encoder_stage_config(model.stage_inputs_[1]), start_best=min(model.history_.val_loss))
    fits = {"default": per_event(model, x_va, va, ds.event_names)}
    model.net_.load_state_dict(joint)
    model.shuffle_generator_.set_state(shuffle)
    known = decoder_on_known_occurrence(model, x_tr, tr, x_va, va)
    encoder_against(model, known, model.encoder_start_, model._config())
    fits["known-c pair"] = per_event(model, x_va, va, ds.event_names)
    return {"seed": seed, "seconds": round(time.perf_counter() - t0, 1), "fits": fits}


def main(argv=None) -> int:
    ap = truth_probe_parser(__doc__)
    args = ap.parse_args(argv)
    ds, tr, va, x_tr, x_va = truth_inputs(ap, args.data)
    rows = []
    for seed in args.seeds:
        rows.append(probe_seed(seed, ds, tr, va, x_tr, x_va))
        default, known = rows[-1]["fits"]["default"], rows[-1]["fits"]["known-c pair"]
        print(f"seed {seed}: event, happens / observed / hidden of happening; AUC default -> known-c pair; "
              "decoder log-density; bias on the hidden cells", flush=True)
        for e in ds.event_names:
            d, k = default[e], known[e]
            print(f"  {e:14s} {d['happens']:.3f} / {d['observed']:.3f} / {d['hidden_of_happening']:.2f}; "
                  f"AUC {d['auc']:.4f} -> {k['auc']:.4f}; {d['loglik']:.3f} -> {k['loglik']:.3f}; "
                  f"{d['bias_hidden']:+.3f} -> {k['bias_hidden']:+.3f}", flush=True)
    if args.out:
        write_record(args.out, "time_head_per_event.py", argv, args.data, rows=rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
