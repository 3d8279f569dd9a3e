"""How far do the initial weights alone move a default CET's validation figures? Validation only.

    python benchmarks/init_noise_probe.py --data data/experiments/mimic-standin [--seed 0] \
        [--init-seeds 0,1,2,3,4] [--out benchmarks/results/init_noise_mimic.json]
    python benchmarks/init_noise_probe.py --survset whas500,veteran,pbc [--draws 5] [--init-seeds 0,1,2,3,4]

Every fit is the default ``CETModel`` with the same training seed (so the same shuffles, dropout
masks and sampling noise) and its network's weights drawn from ``torch.manual_seed(init_seed)``
instead (``InitSeedCET``; the global generator is forked for the draw, so the dropout stream is the
same for every init seed). The spread over init seeds is the noise floor a change to the model has
to clear on one training seed before a probe can call it a lever: on 2026-11-28 the own-plus-shared
first layer's validation gain (+0.0015 AUC on the MIMIC stand-in, +0.010 of C on whas500) vanished
when the library drew the same network's weights in another order (docs/results.md, "The lead does
not survive its own rerun").

With ``--data``: a dataset folder whose truth is recorded; prints per init seed the validation AUC
against the true occurrence and ECE (means over tasks), then the mean, standard deviation and range.
With ``--survset``: SurvSet sets through ``bench_survset.py``'s loading and scoring, the validation
split scored as in ``linear_skip_probe.py`` (Harrell's C of the restricted mean, minus the
log-normal AFT's on the same rows); per draw the spread over init seeds, then its mean over draws;
the record keeps each fit's best joint epoch (0-based) and the draw's fitting and stopping rows.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from early_stopping_probe import write_record  # noqa: E402

from cet_model.models import CETModel  # noqa: E402


class InitSeedCET(CETModel):
    """``CETModel`` whose network weights are drawn from ``torch.manual_seed(init_seed_)`` (set the
    attribute before ``fit``; None draws them as ``CETModel`` does)."""

    init_seed_: int | None = None

    def _build_network(self, n_features: int, n_events: int) -> torch.nn.Module:
        if self.init_seed_ is None:
            return super()._build_network(n_features, n_events)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.init_seed_))
            return super()._build_network(n_features, n_events)


def spread(values) -> dict:
    """Mean, standard deviation (n - 1) and range of ``values``, rounded.

    >>> spread([0.78, 0.79, 0.77])
    {'mean': 0.78, 'sd': 0.01, 'range': 0.02}
    """
    v = np.asarray(values, dtype=float)
    return {"mean": round(float(v.mean()), 4), "sd": round(float(v.std(ddof=1)), 4) if v.size > 1 else 0.0,
            "range": round(float(v.max() - v.min()), 4)}


def parse_seeds(text: str) -> list[int]:
    """'0,1,2' -> [0, 1, 2]; anything else is a usage error naming the value."""
    try:
        seeds = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if len(seeds) < 2:
        raise argparse.ArgumentTypeError(f"at least two init seeds make a spread, got {text!r}")
    return seeds


def dataset_rows(data: Path, seed: int, init_seeds: list[int]) -> list[dict]:
    from cet_model.dataset import load_dataset
    from cet_model.evaluation import comment_encoder_for, evaluate, model_inputs

    ds = load_dataset(data)
    tr, va = ds.train, ds.val
    x_tr, x_va = model_inputs(tr), model_inputs(va)
    rows = []
    for k in init_seeds:
        model = InitSeedCET(seed=seed, comment_encoder=comment_encoder_for(tr))
        model.init_seed_ = k
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
        scores = evaluate("CET", model, va, ds.event_names, x_va)
        row = {"init_seed": k, "auc": round(float(np.nanmean([r["auc"] for r in scores.values()])), 4),
               "ece": round(float(np.nanmean([r["ece"] for r in scores.values()])), 4),
               "seconds": round(time.perf_counter() - t0, 1)}
        print(f"training seed {seed}, init seed {k}: validation AUC {row['auc']:.4f}, ECE {row['ece']:.4f} "
              f"({row['seconds']:.0f} s)", flush=True)
        rows.append(row)
    return rows


def survset_rows(names: list[str], draws: int, init_seeds: list[int]) -> tuple[list[dict], list[dict]]:
    from bench_survset import fit_cet, fit_lifelines, load, score
    from survset_size_probe import draw_parts

    rows, summary = [], []
    for name in names:
        parts, columns, _ = load(name)
        per_draw = []
        for r in range(draws):
            part = draw_parts(parts, "full", r, 0, 0)
            aft = score("LogNormalAFT", fit_lifelines(part, "aft", columns)[0], part, 0.0)["harrell_c"]
            diffs, best = [], []
            for k in init_seeds:
                class Model(InitSeedCET):
                    init_seed_ = k
                surv, _, model = fit_cet(part, Model, seed=r)
                diffs.append(score("CET", surv, part, 0.0)["harrell_c"] - aft)
                best.append(model.history_.best_epoch)
            rows.append({"dataset": name, "draw": r, "n_fit": len(part["train"][1]), "n_stop": len(part["val"][1]),
                         "aft_c": round(aft, 4), "cet_minus_aft": [round(d, 4) for d in diffs],
                         "best_joint_epoch": best})
            per_draw.append(spread(diffs))
        line = {"dataset": name, "draws": draws,
                "sd_over_init_seeds": round(float(np.mean([p["sd"] for p in per_draw])), 4),
                "range_over_init_seeds": round(float(np.mean([p["range"] for p in per_draw])), 4),
                "largest_range": round(float(max(p["range"] for p in per_draw)), 4)}
        print(f"{name}: CET - AFT validation C over init seeds, mean over {draws} draws: sd "
              f"{line['sd_over_init_seeds']:.4f}, range {line['range_over_init_seeds']:.4f} "
              f"(largest {line['largest_range']:.4f})", flush=True)
        summary.append(line)
    return rows, summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--data", type=Path, help="dataset folder (with the truth recorded)")
    where.add_argument("--survset", help="comma-separated SurvSet names")
    ap.add_argument("--seed", type=int, default=0, help="training seed with --data (default %(default)s)")
    ap.add_argument("--draws", type=int, default=5, help="draws (and training seeds) with --survset (default %(default)s)")
    ap.add_argument("--init-seeds", type=parse_seeds, default=[0, 1, 2, 3, 4],
                    help="comma-separated seeds of the initial weights (default 0,1,2,3,4)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    args = ap.parse_args(argv)
    if args.data is not None:
        rows = dataset_rows(args.data, args.seed, args.init_seeds)
        summary = {k: spread([r[k] for r in rows]) for k in ("auc", "ece")}
        print(f"over {len(rows)} init seeds: AUC mean {summary['auc']['mean']:.4f}, sd {summary['auc']['sd']:.4f}, "
              f"range {summary['auc']['range']:.4f}; ECE sd {summary['ece']['sd']:.4f}", flush=True)
        data = args.data
    else:
        rows, summary = survset_rows(args.survset.split(","), args.draws, args.init_seeds)
        data = "SurvSet"
    if args.out:
        write_record(args.out, "init_noise_probe.py", argv, data, init_seeds=args.init_seeds, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
