"""CET's validation AUC under a few training settings, on one dataset folder (never the test split).

    python benchmarks/validation_probe.py --data data/experiments/mimic-standin [--seed 0] \
        "dict()" "dict(lr=3e-4)" "dict(hidden=(300,))" "dict(batch_size=128)" "dict(dropout=0.2)"

Each argument is a dict of CETModel keyword overrides (``hidden`` sets the hidden sizes); one fit
per setting, seed 0 unless ``--seed``, the automatic training budget, early stopping on the validation objective.
Prints, on the validation split: the AUC against the true occurrence, ECE, MRAE and Harrell's C
(means over tasks); where the dataset records the truth, Harrell's C over the cells whose event
truly occurs, the time head's error there (median |log t_hat - log t_true|) and MRAE split by the
true occurrence (c = 1 / c = 0 cells; on the latter the predicted time given occurrence has no true
counterpart); the epochs run, the best epoch and the seconds. Where the truth is recorded, a second
line sizes P(ever) against it (``p_ever_line`` of the record ``flows.train evaluate`` keeps): the
mean over events of CET's mean P(ever) minus the true share, split at the end of the training
follow-up into the risk by that end against the share that truly has the event by then, and what
lies after it. With
``--level-scan`` it then moves every occurrence logit by a common shift (the ranking unchanged) and
prints the validation log-likelihood and that P(ever) gap at each: does the likelihood, given the
fitted time head, ask for another level of P(ever)? First it prints how many training rows
the default marginal objective sums exactly and how many by its importance-weighted bound. Used to check whether the default
CET's gap to the oracle on the MIMIC stand-in is a training-budget defect (README, "What the
tables show"), and what ``occurrence_init`` changes (docs/results.md, MIMIC section).
"""

from __future__ import annotations

import argparse
import ast
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cet_model.dataset import load_dataset  # noqa: E402
from cet_model.evaluation import evaluate, fit_preset, model_inputs  # noqa: E402
from cet_model.metrics import concordance_index, mrae  # noqa: E402
from cet_model.params import CETParams  # noqa: E402
from flows.lib.modeling.train_eval import beyond_follow_up  # noqa: E402


def parse(text: str) -> dict:
    """'dict(lr=3e-4)' or '{"lr": 3e-4}' -> a dict, without eval."""
    node = ast.parse(text, mode="eval").body
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "dict" and not node.args:
        return {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    return dict(ast.literal_eval(node))


def pick(ap, flag: str, text: str, known) -> list[str]:
    """The comma-separated names in ``text``, each one of ``known``; otherwise ``ap.error`` names the
    unknown ones (before any fit). For the probes' variant lists.

    >>> import argparse
    >>> pick(argparse.ArgumentParser(), "--models", "BC,Oracle", ("BC", "Oracle"))
    ['BC', 'Oracle']
    """
    names = text.split(",")
    unknown = [n for n in names if n not in known]
    if unknown:
        ap.error(f"{flag}: unknown {unknown}; known: {','.join(known)}")
    return names


def free_cells_line(s: np.ndarray, mask: np.ndarray | None, max_patterns: int = CETParams.max_patterns) -> str:
    """How the marginal objective treats the training rows: each row sums over its free cells
    (censored or masked), exactly when 2^k <= ``max_patterns``, else by the importance-weighted bound.

    >>> free_cells_line(np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]), None, max_patterns=2)
    'training rows by free cells k = 0..2: [1, 1, 1]; 2^k > 2 (importance-weighted): 1 of 3 (33.3 %)'
    """
    free = s < 0.5 if mask is None else (s < 0.5) | (mask < 0.5)
    k = free.sum(1)
    beyond = int((2.0 ** k > max_patterns).sum())
    return (f"training rows by free cells k = 0..{s.shape[1]}: {np.bincount(k, minlength=s.shape[1] + 1).tolist()}; "
            f"2^k > {max_patterns} (importance-weighted): {beyond} of {len(k)} ({100 * beyond / len(k):.1f} %)")


def p_ever_line(beyond: dict[str, dict]) -> str:
    """CET's P(ever) against the truth, as mean signed gaps over events (model - truth): in all,
    by the end of the follow-up and after it. ``beyond``: ``flows.lib.modeling.train_eval.
    beyond_follow_up``'s record of a split that knows the true occurrence and times
    (``true_share``, ``true_by_follow_up``).

    >>> rec = {"e": {"p_ever": 0.3, "by_follow_up": 0.2, "true_share": 0.75, "true_by_follow_up": 0.5}}
    >>> p_ever_line(rec)
    'P(ever) - true share, mean over 1 events: -0.450 (worst e -0.450); by the follow-up end -0.300, after it -0.150'
    """
    g = np.array([(r["p_ever"] - r["true_share"], r["by_follow_up"] - r["true_by_follow_up"],
                   (r["p_ever"] - r["by_follow_up"]) - (r["true_share"] - r["true_by_follow_up"]))
                  for r in beyond.values()])
    k = int(np.argmax(np.abs(g[:, 0])))
    return (f"P(ever) - true share, mean over {len(g)} events: {g[:, 0].mean():.3f} (worst {list(beyond)[k]} {g[k, 0]:.3f}); "
            f"by the follow-up end {g[:, 1].mean():.3f}, after it {g[:, 2].mean():.3f}")


def level_scan(model, x, train, split, event_names, shifts=(-0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0)) -> None:
    """Print, per common shift of the occurrence encoder's output bias, the split's mean
    log-likelihood (``model.score``) and :func:`p_ever_line`; the bias is restored after."""
    bias = model.net_.encoder.net[-1].bias
    start = bias.detach().clone()
    try:
        for d in shifts:
            with torch.no_grad():
                bias.copy_(start + d)
            print(f"    logits {d:+.2f}: val log-likelihood {model.score(x, split.T, split.S, split.mask):.5f}; "
                  f"{p_ever_line(beyond_follow_up(model, x, train, event_names, split))}", flush=True)
    finally:
        with torch.no_grad():
            bias.copy_(start)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    ap.add_argument("--level-scan", action="store_true",
                    help="after each fit, shift all occurrence logits by -0.5..+1.0: validation log-likelihood "
                         "and P(ever) against the truth at each")
    ap.add_argument("settings", nargs="+", help="CETModel overrides, e.g. 'dict(lr=3e-4)'")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    ds = load_dataset(args.data)
    tr, va = ds.train, ds.val
    x_tr, x_va = model_inputs(tr), model_inputs(va)
    print(free_cells_line(tr.S, tr.mask), flush=True)
    for label in args.settings:
        over = parse(label)
        hidden = tuple(over.pop("hidden", (100,)))
        t0 = time.perf_counter()
        model = fit_preset("CET", tr, va, seed=args.seed, hidden_sizes=hidden, max_epochs=over.pop("max_epochs", None),
                           patience=over.pop("patience", None), params=over, x_train=x_tr, x_val=x_va)
        scores = evaluate("CET", model, va, ds.event_names, x_va)
        h = model.history_

        def mean(k, scores=scores):
            return np.nanmean([r[k] for r in scores.values()])
        truth = np.isfinite(va.T_true) & (va.C == 1)
        if va.mask is not None:
            truth &= va.mask == 1
        log_err = (np.median(np.abs(np.log(model.predict_time(x_va)[truth]) - np.log(va.T_true[truth])))
                   if truth.any() else float("nan"))
        t_hat = model.predict_time(x_va)
        c_occurring = []  # Harrell's C over the cells whose event truly occurs
        for j in range(len(ds.event_names)):
            cell = (va.C[:, j] == 1) & (np.ones(len(va), bool) if va.mask is None else va.mask[:, j] == 1)
            if cell.sum() > 1 and va.S[cell, j].any():
                c_occurring.append(concordance_index(va.T[cell, j], t_hat[cell, j], va.S[cell, j]))
        by_c = []
        for occurs in (1, 0):
            err = []
            for j in range(len(ds.event_names)):
                keep = np.ones(len(va), bool) if va.mask is None else va.mask[:, j] == 1
                cell = keep & (va.C[:, j] == occurs)
                if cell.any():  # the scale is the task's, as in evaluate()
                    err.append(mrae(va.T[cell, j], t_hat[cell, j], va.S[cell, j], va.T[keep, j].max()) * cell.sum() / keep.sum())
            by_c.append(np.sum(err) / len(ds.event_names) if err else float("nan"))
        print(f"{label}: val AUC {mean('auc'):.4f}, ECE {mean('ece'):.4f}, MRAE {mean('mrae'):.4f} "
              f"(c=1 part {by_c[0]:.4f} + c=0 part {by_c[1]:.4f}), "
              f"C {mean('ci'):.4f} (on c=1 cells {np.mean(c_occurring) if c_occurring else float('nan'):.4f}), |log t err| {log_err:.3f}, epochs {len(h.train_loss)}, "
              f"best {h.best_epoch + 1}, {time.perf_counter() - t0:.0f}s", flush=True)
        beyond = beyond_follow_up(model, x_va, tr, ds.event_names, va)
        if beyond and all("true_by_follow_up" in r for r in beyond.values()):  # a split that knows the truth
            print(f"  {p_ever_line(beyond)}", flush=True)
            if args.level_scan:
                level_scan(model, x_va, tr, va, ds.event_names)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
