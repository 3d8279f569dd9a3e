"""Does stochastic EM lead CET's fit to a better optimum of its own objective than the gradient of
the marginal likelihood?

    python benchmarks/stochastic_em_probe.py --data data/experiments/mimic-standin [--seeds 0,1] \
        [--samples 1,10] [--out benchmarks/results/stochastic_em_mimic.json]

The default's joint fit keeps much of the time head it starts with (``decoder_warmup_probe.py``);
a flatter posterior early on does not help (``tempered_posterior_probe.py``). Stochastic EM
(Celeux and Diebolt, 1985) is the textbook way out of such fixed points of EM: instead of
weighting every occurrence pattern of a row's censored cells by its posterior, draw patterns from
it and fit both heads to the completed data, so that the randomness of the draws can carry the fit
out of a basin. Here every training step draws K patterns per row from the model's own proposal
(``CETModel._proposal``: per censored cell p S / (1 - p + p S) from one decoder pass, observed
cells pinned to 1, masked cells drawn from p; the draws carry no gradient) and minimises
-(1/K) sum_k [log p(c_k|x) + log p(t,s|c_k,x)]. Early stopping, the encoder stage and everything
else are the default's, and the validation objective they monitor is the marginal likelihood.

Per seed: BC and the oracle (the goal's floor and ceiling), the default CET and CET trained this
way for each K; per fit the validation objective (lower is better; the only figure a rule without
the truth may use), the validation AUC against the true occurrence and the share of BC's gap to the
oracle. The test split is not read.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from early_stopping_probe import compare_fits  # noqa: E402
from time_head_ceiling import truth_inputs, truth_probe_parser  # noqa: E402

from cet_model.losses import bernoulli_log_prob  # noqa: E402
from cet_model.models import CETModel  # noqa: E402


class StochasticEM(CETModel):
    """CET whose training steps fit both heads to patterns drawn from the model's proposal."""

    draws: int = 1

    def _train_loss(self, x, log_t, s, mask):
        h = self.net_.features(x)
        logits = self.net_.encoder(h)
        q = self._proposal(h, logits, log_t, s, mask)(slice(None))
        q = torch.where(s > 0.5, torch.ones_like(q), q)
        u = torch.rand((len(q), self.draws, q.shape[1]), generator=self.noise_generator_, device=q.device, dtype=q.dtype)
        c = (u < q.unsqueeze(1)).to(q.dtype)
        completed = bernoulli_log_prob(c, logits.unsqueeze(1)) + self._row_loglik(h, logits, log_t, s, mask)(c)
        return -completed.mean() / self.n_events_


def main(argv=None) -> int:
    ap = truth_probe_parser(__doc__)
    ap.add_argument("--samples", default="1,10", help="comma-separated draws per row and step (default %(default)s)")
    args = ap.parse_args(argv)
    try:
        draws = [int(k) for k in args.samples.split(",")]
    except ValueError:
        draws = [0]
    if min(draws) < 1:
        ap.error(f"--samples must be draws per row of at least 1; got {args.samples!r}")
    inputs = truth_inputs(ap, args.data)

    def fitter(draws: int):
        def fit(kw, tr, va, x_tr, x_va):
            model = CETModel(**kw) if draws == 0 else StochasticEM(**kw)
            model.draws = draws
            return model.fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
        return ("default" if draws == 0 else f"stochastic EM, {draws} draws"), fit

    fitters = [fitter(k) for k in [0] + draws]
    compare_fits(inputs, args.seeds, fitters, args.out, "stochastic_em_probe.py",
                 argv, args.data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
