"""Does a tempered posterior over the censored cells (deterministic annealing) lead CET's fit to a
better optimum of its own objective?

    python benchmarks/tempered_posterior_probe.py --data data/experiments/mimic-standin [--seeds 0,1] \
        [--starts 0.5,0.25] [--ramp 20] [--out benchmarks/results/tempered_posterior_mimic.json]

The default's joint fit keeps much of the time head it starts with (``decoder_warmup_probe.py``):
a censored cell whose event the early time head says should have come is taken as an event that
never comes, and that posterior shapes both heads from the first epochs. Deterministic annealing
EM (Ueda and Nakano, 1998) flattens the posterior while the model is still rough: each row's sum
over its censored cells' occurrence patterns, log sum_c p(c|x) p(t,s|c,x), is trained as
(1/beta) log sum_c [p(c|x) p(t,s|c,x)]^beta, so the gradient weighs each pattern by the posterior
raised to beta and renormalised, with beta rising linearly from ``start`` to 1 over the first
``ramp`` epochs of the joint stage (1 afterwards, and in the encoder stage). The validation
objective, which early stopping monitors, is the untempered marginal likelihood throughout (the
tempering applies only where gradients are taken). Rows beyond the exact budget (the
importance-weighted bound) are tempered the same way over their samples.

Per seed: BC and the oracle (the goal's floor and ceiling), the default CET, and CET with each
start; per fit the validation objective (lower is better; the only figure a rule without the truth
may use), the validation AUC against the true occurrence and the share of BC's gap to the oracle.
The test split is not read.
"""

from __future__ import annotations

import math
import sys
from contextlib import contextmanager
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from early_stopping_probe import compare_fits  # noqa: E402
from time_head_ceiling import truth_inputs, truth_probe_parser  # noqa: E402

from cet_model import estimators  # noqa: E402
from cet_model.estimators import free_patterns  # noqa: E402
from cet_model.losses import bernoulli_log_prob, bernoulli_log_prob_cells  # noqa: E402
from cet_model.models import CETModel  # noqa: E402

BETA = {"value": 1.0}


def _tempered(terms: torch.Tensor, log_k: float = 0.0) -> torch.Tensor:
    """(1/beta) (log sum exp(beta * terms) - log_k) where gradients are taken, else the plain sum."""
    beta = BETA["value"] if torch.is_grad_enabled() else 1.0
    return (torch.logsumexp(beta * terms, dim=1) - log_k) / beta


def _enumerate_rows(logits, row_loglik, free, rows, k: int) -> torch.Tensor:
    """``estimators._enumerate_rows`` with the tempered sum (the all-zero shortcut left out)."""
    lg = logits[rows]
    c = free_patterns(free[rows], k).to(lg.dtype)
    return _tempered(bernoulli_log_prob(c, lg.unsqueeze(1)) + row_loglik(c, rows))


def _importance_rows(logits, row_loglik, free, rows, proposal, n_samples: int, generator) -> torch.Tensor:
    """``estimators._importance_rows`` with the tempered sum over the samples."""
    lg, fr = logits[rows], free[rows]
    q = proposal(rows).detach().clamp(1e-4, 1.0 - 1e-4)
    u = estimators._uniform((len(rows), n_samples, lg.shape[1]), lg, generator)
    c = torch.where(fr.unsqueeze(1), (u < q.unsqueeze(1)).to(lg.dtype), torch.ones_like(u))
    log_q = torch.where(fr.unsqueeze(1), bernoulli_log_prob_cells(c, torch.logit(q).unsqueeze(1)),
                        torch.zeros_like(c)).sum(-1)
    log_w = bernoulli_log_prob(c, lg.unsqueeze(1)) + row_loglik(c, rows) - log_q
    return _tempered(log_w, math.log(n_samples))


@contextmanager
def tempered(start: float, ramp: int):
    """Inside the block, CET's marginal sums are tempered; yields the ``on_epoch`` that raises beta."""
    held = estimators._enumerate_rows, estimators._importance_rows
    estimators._enumerate_rows, estimators._importance_rows = _enumerate_rows, _importance_rows
    BETA["value"] = start

    def on_epoch(epoch: int, _history) -> None:
        BETA["value"] = min(1.0, start + (1.0 - start) * (epoch + 1) / ramp)
    try:
        yield on_epoch
    finally:
        estimators._enumerate_rows, estimators._importance_rows = held
        BETA["value"] = 1.0


def main(argv=None) -> int:
    ap = truth_probe_parser(__doc__)
    ap.add_argument("--starts", default="0.5,0.25", help="comma-separated starting betas (default %(default)s)")
    ap.add_argument("--ramp", type=int, default=20, help="epochs over which beta reaches 1 (default %(default)s)")
    args = ap.parse_args(argv)
    try:
        starts = [float(b) for b in args.starts.split(",")]
    except ValueError:
        starts = [0.0]
    if not all(0.0 < b <= 1.0 for b in starts) or args.ramp < 1:
        ap.error(f"--starts must be betas in (0, 1] and --ramp at least 1 epoch; got {args.starts!r}, {args.ramp}")
    inputs = truth_inputs(ap, args.data)

    def fitter(start: float):
        def fit(kw, tr, va, x_tr, x_va):
            if start == 1.0:  # the default, the library's own functions
                return CETModel(**kw).fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
            with tempered(start, args.ramp) as on_epoch:
                return CETModel(**kw).fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask,
                                          on_epoch=on_epoch)
        return ("default" if start == 1.0 else f"beta from {start:g}"), fit

    fitters = [fitter(b) for b in [1.0] + starts]
    compare_fits(inputs, args.seeds, fitters, args.out, "tempered_posterior_probe.py",
                 argv, args.data, ramp=args.ramp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
