"""What would a shorter patience for CET's encoder stage change? Replayed from recorded histories.

    python benchmarks/stage_patience_probe.py [--survset veteran,...,support2] [--seeds 0,...,9] \
        [--data data/mimic --data data/reddit] [--data-seeds 0,1,2] [--fractions 0.5,0.25] \
        [--models CET,CET-unconditioned] [--table docs/results/mimic-standin/metrics.json] [--threads 1]

The encoder stage (``encoder_stage=True``, the default) stops when its validation objective has
not improved by more than ``tol`` for its patience. Until 2026-11-25 that was the joint stage's
patience; on small data it is long (500 epochs at 81 training rows, stretched to the step
budget), and the stage ran at least that long whether or not it improved: it put whole
single-event fits over 3x ET on four SurvSet sets (``bench_single_event_cost.py --defaults
--seeds 10``). This probe's replays (the ``stage_patience_probe*.json`` records, made with that
code) are why the stage now has half the joint patience (``cet_model.models.ENCODER_STAGE_PATIENCE``).
``--fractions`` are of the joint stage's patience; with today's code only fractions up to the
stage's own (0.5) can be replayed.

A fit with a shorter stage patience follows the same trajectory (same weights, same random
draws) up to the epoch where it stops, so its outcome can be replayed exactly from the default
fit's recorded validation objectives: which epoch's weights it would keep, their validation
objective, and how many stage epochs it would run. Per fit and patience fraction this prints
whether the kept weights would be the same as the default's and, if not, how much worse their
validation objective is. Validation split only; nothing is changed, nothing reads a test split.
Writes ``benchmarks/results/stage_patience_probe.json`` (or ``--out``).

For a dataset folder whose experiment table (``python -m cet_experiments dataset``) is to be
replayed, ``--models`` names the table's rows that have the stage (presets, as the table fitted
them), ``--threads 1`` matches the tables' one-thread runs, and ``--table`` checks each fit against
the table's record: the joint stage must have run the epochs the table recorded for that row and
seed, or the probe stops (a rebuilt dataset or changed code would not replay the table's fits).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402
from bench_survset import fit_cet, load  # noqa: E402
from early_stopping_probe import validation_inputs, write_record  # noqa: E402

from cet_model import CETModel  # noqa: E402
from cet_model.evaluation import fit_preset  # noqa: E402
from cet_model.train import EarlyStopping, shorter_patience  # noqa: E402


def replay(val_loss, start_best: float, patience: int, tol: float) -> tuple[int, int, float]:
    """The training loop's own stopping rule (``cet_model.train.EarlyStopping``) on a recorded
    trajectory: (epochs run, epoch whose weights are kept or -1 for the starting weights, their objective).

    >>> replay([1.0, 0.9, 0.95, 0.96, 0.97], start_best=1.05, patience=2, tol=1e-4)
    (4, 1, 0.9)
    >>> replay([1.1, 1.2], start_best=1.0, patience=5, tol=1e-4)   # never beats the start
    (2, -1, 1.0)
    """
    rule = EarlyStopping(patience, tol, start_best)
    for epoch, monitored in enumerate(val_loss):
        if rule.update(epoch, monitored)[1]:
            return epoch + 1, rule.best_epoch, rule.best
    return len(val_loss), rule.best_epoch, rule.best


def stage_record(model: CETModel, n_train: int, fractions) -> dict | None:
    """The default stage's epochs and kept epoch, and the replayed outcome at each patience fraction."""
    stage = model.encoder_history_
    if stage is None:
        return None
    cfg = model._config()
    patience = cfg.budget(n_train)[1]
    stage_patience = model._encoder_stage_config(n_train).budget(n_train)[1]
    start = min(model.history_.val_loss)
    ran, kept, value = replay(stage.val_loss, start, stage_patience, cfg.tol)
    if (ran, kept) != (len(stage.val_loss), stage.best_epoch):  # the replay must reproduce the fit
        raise AssertionError(f"replay gave {(ran, kept)}, the fit {(len(stage.val_loss), stage.best_epoch)}")
    out = {"patience": patience, "stage_patience": stage_patience, "joint_epochs": len(model.history_.train_loss),
           "stage_epochs": ran, "stage_kept_epoch": kept, "stage_gain": start - value, "shorter": {}}
    for f in fractions:
        p = shorter_patience(patience, f)
        if p > stage_patience:  # a longer stage is not in the record
            raise SystemExit(f"fraction {f}: {p} epochs is longer than the fit's stage patience ({stage_patience})")
        r, k, v = replay(stage.val_loss, start, p, cfg.tol)
        out["shorter"][str(f)] = {"patience": p, "stage_epochs": r, "kept_epoch": k, "same_weights": k == kept,
                                  "objective_worse_by": v - value}
    return out


def line(name: str, seed: int, rec: dict | None) -> str:
    if rec is None:
        return f"{name} seed {seed}: no encoder stage (the joint stage did not stop early)"
    parts = [f"{name} seed {seed}: joint {rec['joint_epochs']}, stage {rec['stage_epochs']} epochs "
             f"(patience {rec['patience']}, stage {rec['stage_patience']}), kept stage epoch {rec['stage_kept_epoch'] + 1 if rec['stage_kept_epoch'] >= 0 else 'none'}"]
    for f, s in rec["shorter"].items():
        what = "same weights" if s["same_weights"] else f"other weights, objective +{s['objective_worse_by']:.5f}"
        parts.append(f"x{f}: {s['stage_epochs']} epochs, {what}")
    return "; ".join(parts)


def summary(recs: list[dict], fractions) -> dict:
    ran = [r for r in recs if r is not None]
    out = {"fits": len(recs), "with_stage": len(ran),
           "stage_kept_an_epoch": sum(r["stage_kept_epoch"] >= 0 for r in ran)}
    for f in fractions:
        s = [r["shorter"][str(f)] for r in ran]
        out[str(f)] = {"same_weights": sum(x["same_weights"] for x in s),
                       "stage_epochs_saved": int(sum(r["stage_epochs"] - x["stage_epochs"] for r, x in zip(ran, s, strict=True))),
                       "stage_epochs_default": int(sum(r["stage_epochs"] for r in ran)),
                       "worst_objective_change": max((x["objective_worse_by"] for x in s), default=0.0)}
    return out


def check_against_table(table: dict | None, preset: str, seed: int, model) -> str:
    """'' when no table was given; else a note that the joint epochs match the table's record for
    ``preset`` and ``seed``. Raises when they do not, or when the table has no such fit."""
    if table is None:
        return ""
    entry = table["models"].get(preset)
    seeds = table["config"]["seeds"].get(preset, []) if entry is not None else []
    if seed not in seeds:
        raise SystemExit(f"{preset} seed {seed}: not in the table's record")
    recorded, got = entry["epochs"][seeds.index(seed)], len(model.history_.train_loss)
    if recorded != got:
        raise SystemExit(f"{preset} seed {seed}: the joint stage ran {got} epochs, the table recorded {recorded}: "
                         "not the table's fit (dataset or code differ)")
    return f" [joint epochs = table's {recorded}]"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--survset", default="veteran,pbc,whas500,GBSG2,actg,rott2,flchain,support2",
                    help="SurvSet sets (bench_survset's split); '' for none")
    ap.add_argument("--seeds", default="0,1,2,3,4,5,6,7,8,9")
    ap.add_argument("--data", action="append", default=[], help="a dataset folder (repeatable)")
    ap.add_argument("--data-seeds", default="0,1,2")
    ap.add_argument("--fractions", default="0.5,0.25")
    ap.add_argument("--models", default="CET", help="presets fitted on each --data folder (default: CET)")
    ap.add_argument("--table", action="append", default=[],
                    help="the metrics.json of each --data folder's experiment table, in the same order: "
                         "checks the joint epochs of every fit against it")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "stage_patience_probe.json")
    args = ap.parse_args(argv)
    fractions = [float(f) for f in args.fractions.split(",")]
    if args.table and len(args.table) != len(args.data):
        ap.error("give one --table per --data folder")
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    results = {}
    for name in [n for n in args.survset.split(",") if n]:
        parts, _, _ = load(name)
        recs = []
        for seed in (int(s) for s in args.seeds.split(",")):
            _, _, model = fit_cet(parts, CETModel, seed=seed)
            recs.append(stage_record(model, len(parts["train"][0]), fractions))
            print(line(name, seed, recs[-1]), flush=True)
        results[name] = {"fits": recs, "summary": summary(recs, fractions)}
        print(f"{name}: {results[name]['summary']}", flush=True)
    presets = [m.strip() for m in args.models.split(",") if m.strip()]
    for i, data in enumerate(args.data):
        table = json.loads(Path(args.table[i]).read_text()) if args.table else None
        ds, train, val, x_tr, x_va = validation_inputs(data)
        for preset in presets:
            key = data if preset == "CET" else f"{data} {preset}"
            recs = []
            for seed in (int(s) for s in args.data_seeds.split(",")):
                model = fit_preset(preset, train, val, seed=seed, x_train=x_tr, x_val=x_va)
                checked = check_against_table(table, preset, seed, model)
                recs.append(stage_record(model, len(train), fractions))
                print(line(key, seed, recs[-1]) + checked, flush=True)
            results[key] = {"fits": recs, "summary": summary(recs, fractions)}
            print(f"{key}: {results[key]['summary']}", flush=True)
    write_record(args.out, "stage_patience_probe.py", argv, ",".join(args.data) or "SurvSet", results=results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
