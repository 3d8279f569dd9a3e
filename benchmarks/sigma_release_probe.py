"""A constant-sigma fit first, then sigma per row from there: does the path reach a better optimum?

    python benchmarks/sigma_release_probe.py --data data/experiments/mimic-standin [--seeds 0,1] \
        [--out benchmarks/results/sigma_release_probe_mimic.json]

``time_head_ceiling.py`` found that the default CET stops in a worse optimum of its own validation
objective than one a better time head leads to, and that ``sigma="constant"`` (a time head with
one log sigma per event) lifts the validation AUC on the MIMIC stand-in. A constant sigma is the
stand-in generator's own form, so it is not a default. This asks whether it helps as a *path*:
fit ``CETModel(sigma="constant")`` (joint stage and encoder stage), then put its weights into the
default network (sigma per row from the decoder: the log-sigma outputs start at the fitted constant
with zero weights, so the two networks give the same predictions at the hand-over) and continue
with the default's joint stage and encoder stage from there, stopped on the validation objective
(started at the hand-over's value, so it can only improve on it). Per seed it prints the default,
the constant-sigma fit and the continued fit: validation objective (the marginal likelihood on
the censored validation rows per row and event, lower is better; the only figure a rule without
the truth may use), AUC against the true occurrence, share of BC's gap to the oracle, seconds, and
(where the true times are recorded) the decoder's fit to them as ``time_head_ceiling.py`` measures it.
Validation split only; the test split is not read.
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
from encoder_stage_probe import JointOnly  # noqa: E402
from time_head_ceiling import decoder_fit, truth_inputs, truth_probe_parser  # noqa: E402

from cet_model.evaluation import PRESETS, comment_encoder_for  # noqa: E402
from cet_model.models import CETModel  # noqa: E402
from cet_model.train import train  # noqa: E402


def released(constant: CETModel, target: torch.nn.Module) -> None:
    """Copy a constant-sigma network's weights into a sigma-per-row network of the same layers:
    the mu rows of the decoder's head as they are, the log-sigma rows zero with the fitted
    constant as their bias."""
    src = constant.net_.state_dict()
    dst = target.state_dict()
    m = constant.n_events_
    for k, v in src.items():
        if k == "decoder.log_sigma":
            continue
        if k in ("decoder.head.weight", "decoder.head.bias"):
            dst[k][:m] = v
            dst[k][m:] = 0.0
        else:
            dst[k] = v.clone()
    dst["decoder.head.bias"][m:] = src["decoder.log_sigma"]
    target.load_state_dict(dst)


def main(argv=None) -> int:
    ap = truth_probe_parser(__doc__)
    args = ap.parse_args(argv)
    ds, tr, va, x_tr, x_va = truth_inputs(ap, args.data)
    preset = PRESETS["CET"][1]
    # the decoders' fit to the true times needs the truth and features read as an array
    truth_known = isinstance(x_va, np.ndarray) and not np.isnan(va.T_true[va.C > 0.5]).any()
    rows = []
    for seed in args.seeds:
        base = floor_and_ceiling(ds, x_tr, x_va, seed)
        # sigma per row pinned: the probe's subject, and what "auto" gives from 1,000 training rows (below,
        # the default fits one log sigma per event itself and there would be nothing to release)
        kw = dict(seed=seed, comment_encoder=comment_encoder_for(tr), **dict(preset, sigma="net"))
        row = {"seed": seed, "val_auc_bc": round(base["BC"], 4), "val_auc_oracle": round(base["Oracle"], 4)}

        def record(name, model, seconds, row=row, base=base):
            auc = truth_scores(model.predict_occurrence(x_va), va.C, va.mask)[0]
            row[name] = {"val_objective": round(-model.score(x_va, va.T, va.S, mask=va.mask), 5),
                         "val_auc": round(auc, 4), "gap_share": round(gap_share(auc, base["BC"], base["Oracle"]), 3),
                         "seconds": round(seconds, 1)}
            if truth_known:
                row[name]["decoder_fit"] = {k: round(v, 4) for k, v in decoder_fit(model, x_va, va).items()}

        t0 = time.perf_counter()
        default = CETModel(**kw).fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
        record("default", default, time.perf_counter() - t0)
        t0 = time.perf_counter()
        constant = CETModel(**dict(kw, sigma="constant")).fit(x_tr, tr.T, tr.S, x_va, va.T, va.S,
                                                              mask=tr.mask, mask_val=va.mask)
        record("sigma constant", constant, time.perf_counter() - t0)
        seconds_constant = time.perf_counter() - t0
        # the default network and its training closures (from a joint fit whose weights are then
        # replaced by the constant fit's: only its layers and inputs are used)
        cont = JointOnly(**kw).fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
        released(constant, cont.net_)
        t1 = time.perf_counter()
        batch_loss, n_train, val_loss = cont.stage_inputs_
        handover = float(val_loss())
        cont.history_ = train(cont.net_, batch_loss, n_train, cont._config(), cont.shuffle_generator_, val_loss,
                              desc="released joint", start_best=handover)
        # the encoder stage starts from the best objective so far, the hand-over's included
        cont.history_.val_loss.append(min(handover, *cont.history_.val_loss))
        CETModel._after_training(cont, batch_loss, n_train, val_loss, cont.stage_val_tensors_, None)
        record("sigma constant, then per row", cont, seconds_constant + time.perf_counter() - t1)
        row["handover_objective"] = round(handover, 5)
        rows.append(row)
        print(f"seed {seed}: BC {base['BC']:.4f}, oracle {base['Oracle']:.4f}; hand-over objective {handover:.5f}")
        for name in ("default", "sigma constant", "sigma constant, then per row"):
            v = row[name]
            fit = v.get("decoder_fit")
            print(f"  {name}: objective {v['val_objective']:.5f}, AUC {v['val_auc']:.4f} ({v['gap_share']:.0%}), "
                  f"{v['seconds']:.0f}s" + ("" if fit is None else f"; decoder on the true times: log-density "
                                            f"{fit['loglik']:.3f}, mu - log t {fit['bias']:+.3f}"), flush=True)
    if args.out:
        mean = {name: {k: round(float(np.mean([r[name][k] for r in rows])), 5) for k in ("val_objective", "val_auc")}
                for name in ("default", "sigma constant", "sigma constant, then per row")}
        write_record(args.out, "sigma_release_probe.py", argv, args.data, rows=rows, mean=mean)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
