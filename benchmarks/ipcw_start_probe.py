"""Does a censoring-weighted classifier give CET's occurrence encoder a start from which the fit
reaches the better optimum?

    python benchmarks/ipcw_start_probe.py --data data/experiments/mimic-standin [--seeds 0,1] \
        [--quantile 0.9] [--out benchmarks/results/ipcw_start_mimic.json]

The default's joint fit keeps much of the time head it starts with, and the same encoder trained
against a better time head reaches a better optimum (``decoder_warmup_probe.py``); the
occurrence encoder starts at each event's observed share. This probe starts it from what the data
say about occurrence without any time head: per event, an inverse-probability-of-censoring-weighted
classifier of "the event by H" (Bang and Tsiatis, 2000), H the ``quantile`` of the event's training
times: a cell observed by H is a positive weighted 1 / G(t-), a cell followed past H (observed later
or censored later) a negative weighted 1 / G(H), a cell censored before H is left out; G is the
Kaplan-Meier curve of the censoring times. Under censoring independent of x this estimates
P(T <= H | x) without bias; it is below P(ever) by the events that come after H, but it ranks rows
from censored data with no model of the times. No truth used. Then, per seed:

- ``default``: the default CET (joint stage, then the encoder stage): the tables' model.
- ``IPCW encoder``: the occurrence encoder trained from its start as that classifier (the joint
  stage's budget, stopped on the same weighted loss over the validation split); its P(ever) is the
  classifier's P(T <= H).
- ``IPCW encoder, decoder fitted, encoder stage``: the time decoder trained from its start against
  the frozen IPCW encoder by the marginal likelihood, then the encoder stage.
- ``... then joint``: from there, the whole network by the marginal likelihood (kept only where the
  validation objective improves), then the encoder stage.

Per variant: the validation objective (lower is better; the only figure a rule without the truth
may use), the validation AUC against the true occurrence and the share of BC's gap to the oracle.
The test split is not read.
"""

from __future__ import annotations

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
    write_record,
)
from time_head_ceiling import StartKept, stage, truth_inputs, truth_probe_parser  # noqa: E402

from cet_model.evaluation import PRESETS, comment_encoder_for  # noqa: E402
from cet_model.train import train, training_only  # noqa: E402


def censoring_survival_before(t_fit: np.ndarray, s_fit: np.ndarray, t_at: np.ndarray) -> np.ndarray:
    """G(t-) = P(C >= t): the Kaplan-Meier curve of the censoring times (the censored cells of
    ``t_fit`` are its events, the observed ones its censored), evaluated just before each ``t_at``.

    >>> censoring_survival_before(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1, 0, 1, 0]), np.array([2.0, 2.5, 5.0]))
    array([1.        , 0.66666667, 0.        ])
    """
    times, counts = np.unique(t_fit[s_fit < 0.5], return_counts=True)
    at_risk = np.array([(t_fit >= u).sum() for u in times], dtype=float)
    after = np.cumprod(1.0 - counts / at_risk)  # G just after each censoring time
    i = np.searchsorted(times, t_at, side="left")  # censoring times strictly before t_at
    return np.where(i > 0, after[np.maximum(i - 1, 0)], 1.0)


def ipcw_targets(split, horizon: np.ndarray, t_fit: np.ndarray, s_fit: np.ndarray, mask_fit) -> tuple:
    """(y, w), each (n, M): "the event by H" and its inverse-probability-of-censoring weight; 0
    weight for cells censored before H and masked cells. G per event from the training cells."""
    y, w = np.zeros_like(split.T), np.zeros_like(split.T)
    for j in range(split.T.shape[1]):
        keep_fit = np.ones(len(t_fit), bool) if mask_fit is None else mask_fit[:, j] > 0.5
        t, s, h = split.T[:, j], split.S[:, j], horizon[j]
        positive, negative = (s > 0.5) & (t <= h), t > h
        g_t = censoring_survival_before(t_fit[keep_fit, j], s_fit[keep_fit, j], t)
        g_h = censoring_survival_before(t_fit[keep_fit, j], s_fit[keep_fit, j], np.array([h]))[0]
        y[:, j] = positive
        w[:, j] = np.where(positive, 1.0 / np.maximum(g_t, 1e-3), np.where(negative, 1.0 / max(g_h, 1e-3), 0.0))
        if split.mask is not None:
            w[:, j] *= split.mask[:, j] > 0.5
    return y, w


def fit_ipcw_encoder(model: StartKept, x_tr, tr, x_va, va, quantile: float):
    """Train the model's occurrence encoder from its start as the IPCW classifier; returns its History."""
    keep = np.ones_like(tr.T, bool) if tr.mask is None else tr.mask > 0.5
    horizon = np.array([np.quantile(tr.T[keep[:, j], j], quantile) for j in range(tr.T.shape[1])])
    model.net_.encoder.load_state_dict(model.encoder_start_)

    def tensors(x, split):
        y, w = ipcw_targets(split, horizon, tr.T, tr.S, tr.mask)
        return model._x_tensor(x), model._tensor(y), model._tensor(w)

    def loss(x, y, w):
        logits = model.net_.encoder(model.net_.features(x))
        cell = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="none")
        return (cell * w).sum() / w.sum().clamp(min=1.0)

    tr_t, va_t = tensors(x_tr, tr), tensors(x_va, va)

    def val_loss() -> float:
        with torch.no_grad():
            return float(loss(*va_t))

    with training_only(model.net_, model.net_.encoder):
        return train(model.net_, lambda idx: loss(*(a[idx] for a in tr_t)), len(x_tr), model._config(),
                     model.shuffle_generator_, val_loss, desc="IPCW encoder")


def probe_seed(seed: int, ds, tr, va, x_tr, x_va, quantile: float) -> dict:
    """One seed's fits and figures (the module docstring lists the variants)."""
    t0 = time.perf_counter()
    base = floor_and_ceiling(ds, x_tr, x_va, seed)
    kw = dict(seed=seed, comment_encoder=comment_encoder_for(tr), **PRESETS["CET"][1])
    model = StartKept(**kw).fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
    joint = {k: v.clone() for k, v in model.net_.state_dict().items()}
    shuffle = model.shuffle_generator_.get_state()
    stage_cfg = model._encoder_stage_config(model.stage_inputs_[1])
    variants = {}

    def objective() -> float:
        return -model.score(x_va, va.T, va.S, mask=va.mask)

    def record(name: str) -> None:
        auc = truth_scores(model.predict_occurrence(x_va), va.C, va.mask)[0]
        variants[name] = {"val_objective": round(objective(), 5), "val_auc": round(auc, 4),
                          "gap_share": round(gap_share(auc, base["BC"], base["Oracle"]), 3)}

    stage(model, "encoder", stage_cfg, start_best=min(model.history_.val_loss))
    record("default")

    model.net_.load_state_dict(joint)
    model.shuffle_generator_.set_state(shuffle)
    fit_ipcw_encoder(model, x_tr, tr, x_va, va, quantile)
    record("IPCW encoder")
    model.net_.decoder.load_state_dict(model.decoder_start_)
    stage(model, "decoder", model._config())
    stage(model, "encoder", stage_cfg, start_best=objective())
    record("IPCW encoder, decoder fitted, encoder stage")
    stage(model, None, model._config(), start_best=objective())
    stage(model, "encoder", stage_cfg, start_best=objective())
    record("IPCW encoder, decoder fitted, encoder stage, then joint")
    return {"seed": seed, "val_auc_bc": round(base["BC"], 4), "val_auc_oracle": round(base["Oracle"], 4),
            "seconds": round(time.perf_counter() - t0, 1), "variants": variants}


def main(argv=None) -> int:
    ap = truth_probe_parser(__doc__)
    ap.add_argument("--quantile", type=float, default=0.9, help="H: this quantile of each event's training times")
    args = ap.parse_args(argv)
    if not 0.0 < args.quantile <= 1.0:
        ap.error(f"--quantile must be in (0, 1]; got {args.quantile}")
    ds, tr, va, x_tr, x_va = truth_inputs(ap, args.data)
    rows = []
    for seed in args.seeds:
        rows.append(probe_seed(seed, ds, tr, va, x_tr, x_va, args.quantile))
        row = rows[-1]
        print(f"seed {seed}: BC {row['val_auc_bc']:.4f}, oracle {row['val_auc_oracle']:.4f} ({row['seconds']:.0f}s)",
              flush=True)
        for k, v in row["variants"].items():
            print(f"  {k}: objective {v['val_objective']:.5f}, AUC {v['val_auc']:.4f} ({v['gap_share']:.0%})", flush=True)
    if args.out:
        write_record(args.out, "ipcw_start_probe.py", argv, args.data, rows=rows, quantile=args.quantile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
