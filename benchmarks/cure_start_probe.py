"""Does a start at the classical mixture-cure fit lead CET's joint fit to the better optimum? Validation only.

    python benchmarks/cure_start_probe.py --data data/experiments/mimic-standin [--seeds 0,1] \
        [--starts both,decoder,encoder,both-fresh,decoder-em,em] [--out benchmarks/results/cure_start_mimic.json]

The default CET starts each event's occurrence logit at its observed share (a lower bound on
P(c = 1)) and each event's time head at the mean log of its training times, censored ones
included, as if they were event times (so early where censoring hides late events). The two
starts are not one model's estimate, and the joint fit keeps much of the time head it starts with
(``decoder_warmup_probe.py``: started late it stays late; the default's comes out early; the
pair fitted with the occurrence known, unbiased, is a better optimum of both splits' objectives).
This probe starts from one consistent estimate instead: per event, the intercept-only mixture-cure
log-normal model (P(c = 1), mu, sigma) fitted by maximum likelihood (scipy, L-BFGS-B, on the
event's unmasked training cells; P(c = 1) bounded to [observed share, 1 - 1e-3], which an
unbounded fit may run to 1 where censoring ends before the tail). ``--starts``: ``both`` (the
occurrence logit at logit P(c = 1), the time head's output bias at mu and its log sigma at log
sigma), ``decoder`` (the time head only, the occurrence logit at the observed share), ``encoder``
(the occurrence logit only), ``both-fresh`` (as ``both``, then the encoder stage starts the occurrence
encoder again from its initial weights and the default's start, the observed share, against the
time head the joint stage left: does the occurrence head learn more against that time head?),
``decoder-em`` (as ``decoder``, then one round of block EM as ``time_head_ceiling.py`` runs it
from the default: the time head refitted alone from its start, the cure fit, against the frozen
occurrence encoder, then the encoder stage again; the round's weights kept only where they lower
the validation objective: do the two small gains add up?), ``em`` (the default's own starts and
stages, then that guarded round: the round alone), ``decoder-em-slow`` (``decoder-em`` with every
encoder stage at 0.3 of the learning rate, which alone lowered the objective and raised the AUC in
every seed, ``stage_regularisation_probe.py``: do the gains add?).
Every other setting is the default's. Since 2026-12-01 ``decoder-em-slow`` is the library's
default for conditioned multi-event fits (``CETModel(block_em="auto")``, the same fit to the digit:
MIMIC seed 0, objective 0.57738, AUC 0.7903 both), so the ``default`` row is that fit; the
starts here run with the library's ``block_em`` off, as recorded before.

Per seed: BC and the oracle (the goal's floor and ceiling), the default CET and CET from each
start; per fit the validation objective (lower is better; the only figure a rule without the truth
may use), the validation AUC against the true occurrence, the share of BC's gap to the oracle and
the joint stage's best epoch, and the level of P(ever): the mean over events of the fit's mean
P(ever) minus the true share on the validation rows (``p_ever_bias``), and the mean of its absolute
value over events (``p_ever_abs_bias``), and the mean over events of the expected calibration error
of P(ever) against the true occurrence (``ece``, as the experiments' tables compute it); and the
time head's fit to the true times as ``time_head_ceiling.py`` measures it (``decoder_loglik``, the
mean log-density of the true log time over the cells whose event happens, given the true
occurrence pattern; ``decoder_bias``, the mean of mu − log t there). First it prints, per event, the observed share, the
cure fit's P(c = 1), the true share of the training rows, the cure fit's mu and the default's
start (the mean log time). The test split is not read.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np
import torch
from scipy import special

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from early_stopping_probe import compare_fits, variant_fitters  # noqa: E402
from time_head_ceiling import decoder_fit, truth_inputs, truth_probe_parser  # noqa: E402
from validation_probe import pick  # noqa: E402

from cet_model.metrics import expected_calibration_error, mixture_cure_fit  # noqa: E402
from cet_model.models import CETModel  # noqa: E402
from cet_model.train import train, training_only  # noqa: E402

STARTS = ("both", "decoder", "encoder", "both-fresh", "decoder-em", "em", "decoder-em-slow")


def cure_fits(t: np.ndarray, s: np.ndarray, m: np.ndarray | None) -> np.ndarray:
    """(M, 3): ``cet_model.metrics.mixture_cure_fit`` of each event's unmasked cells of times ``t`` and indicators ``s`` (n, M);
    ``m`` (n, M) the mask (None: every cell counts)."""
    w = np.ones_like(s) if m is None else m
    return np.array([mixture_cure_fit(t[w[:, j] > 0.5, j], s[w[:, j] > 0.5, j]) for j in range(s.shape[1])])


class CureStart(CETModel):
    """CET whose occurrence logits and/or time head start at the per-event intercept-only
    mixture-cure fit (``start``: one of ``STARTS``)."""

    start: str = "both"

    def _resolve_block_em(self) -> bool:  # the starts below are this probe's own (the library's block_em off)
        return False

    def _prepare(self, t, s, m):
        super()._prepare(t, s, m)
        self.encoder_start_ = {k: v.detach().clone() for k, v in self.net_.encoder.state_dict().items()}
        fits = self.cure_fits_ = cure_fits(t, s, m)
        k = self.n_events_
        with torch.no_grad():
            if self.start in ("both", "encoder", "both-fresh"):
                self.net_.encoder.net[-1].bias.copy_(self._tensor(special.logit(fits[:, 0])))
            if self.start in ("both", "decoder", "both-fresh", "decoder-em", "decoder-em-slow"):
                bias = self.net_.decoder.output_bias()
                bias[:k] = self._tensor(fits[:, 1])
                if self.sigma_ == "net":
                    bias[k:] = self._tensor(np.log(fits[:, 2]))
                else:
                    self.net_.decoder.log_sigma.copy_(self._tensor(np.log(fits[:, 2])))
        self.decoder_start_ = {k: v.detach().clone() for k, v in self.net_.decoder.state_dict().items()}

    def _encoder_stage_config(self, n_train):
        config = super()._encoder_stage_config(n_train)
        return dataclasses.replace(config, lr=config.lr * 0.3) if self.start == "decoder-em-slow" else config

    def _em_round(self, batch_loss, n_train, val_loss) -> None:
        """One round of block EM after the default's stages (``decoder-em``, ``em``), kept where it
        lowers the validation objective."""
        before, kept = val_loss(), {k: v.detach().clone() for k, v in self.net_.state_dict().items()}
        self.net_.decoder.load_state_dict(self.decoder_start_)
        with training_only(self.net_, self.net_.decoder):
            train(self.net_, batch_loss, n_train, self._config(), self.shuffle_generator_, val_loss, desc="EM decoder")
        with training_only(self.net_, self.net_.encoder):
            train(self.net_, batch_loss, n_train, self._encoder_stage_config(n_train), self.shuffle_generator_,
                  val_loss, desc="EM encoder", start_best=val_loss())
        self.em_objectives_ = (before, val_loss())
        if self.em_objectives_[1] >= before:
            self.net_.load_state_dict(kept)

    def _after_training(self, batch_loss, n_train, val_loss, val_tensors, on_epoch) -> None:
        if self.start in ("decoder-em", "em", "decoder-em-slow"):
            super()._after_training(batch_loss, n_train, val_loss, val_tensors, on_epoch)
            if val_loss is not None and self.history_.stopped_early:
                self._em_round(batch_loss, n_train, val_loss)
            return None
        if self.start != "both-fresh" or val_loss is None or not self.history_.stopped_early:
            return super()._after_training(batch_loss, n_train, val_loss, val_tensors, on_epoch)
        joint_losses, joint_encoder = self.history_.val_loss, self.net_.encoder.state_dict()
        joint_encoder = {k: v.detach().clone() for k, v in joint_encoder.items()}
        self.net_.encoder.load_state_dict(self.encoder_start_)
        self.history_.val_loss = [float("inf")]  # the stage's start_best: any epoch replaces the start
        try:
            super()._after_training(batch_loss, n_train, val_loss, val_tensors, on_epoch)
        finally:
            self.history_.val_loss = joint_losses
        self.fresh_stage_objective_ = min(self.encoder_history_.val_loss)
        if self.fresh_stage_objective_ > min(joint_losses):  # keep the joint stop's encoder when it was better
            self.net_.encoder.load_state_dict(joint_encoder)


def p_ever_level(model, va, x_va) -> dict:
    """The fit's mean P(ever) minus the true share on the validation rows: the mean over events of
    that difference and of its absolute value, the mean over events of the expected calibration
    error of P(ever) against the true occurrence (as the experiments' ECE; unmasked cells), and the
    time head's fit to the true times (``time_head_ceiling.decoder_fit``)."""
    p = model.predict_occurrence(x_va)
    keep = np.ones_like(va.C, bool) if va.mask is None else va.mask > 0.5
    diff = np.array([p[keep[:, j], j].mean() - va.C[keep[:, j], j].mean() for j in range(p.shape[1])])
    ece = np.mean([expected_calibration_error(va.C[keep[:, j], j], p[keep[:, j], j]) for j in range(p.shape[1])])
    fit = decoder_fit(model, x_va, va)
    return {"p_ever_bias": round(float(diff.mean()), 4), "p_ever_abs_bias": round(float(np.abs(diff).mean()), 4),
            "ece": round(float(ece), 4), "decoder_loglik": round(fit["loglik"], 4),
            "decoder_bias": round(fit["bias"], 4)}


def main(argv=None) -> int:
    ap = truth_probe_parser(__doc__)
    ap.add_argument("--starts", default="both,decoder,encoder",
                    help=f"comma-separated, of {','.join(STARTS)} (default %(default)s)")
    args = ap.parse_args(argv)
    starts = pick(ap, "--starts", args.starts, STARTS)
    inputs = truth_inputs(ap, args.data)
    tr = inputs[1]
    w = np.ones_like(tr.S) if tr.mask is None else tr.mask
    fits = cure_fits(tr.T, tr.S, tr.mask)
    true_share = np.nanmean(np.where(w > 0.5, tr.C, np.nan), axis=0)
    print("per event: observed share / cure-fit P(c=1) / true share / cure-fit mu / mean log time (the default's start)")
    for j in range(tr.S.shape[1]):
        print(f"  {j}: {tr.S[w[:, j] > 0.5, j].mean():.3f} / {fits[j, 0]:.3f} / {true_share[j]:.3f} / "
              f"{fits[j, 1]:.3f} / {np.log(tr.T[w[:, j] > 0.5, j]).mean():.3f}", flush=True)
    fitters = variant_fitters(CureStart, "start", {f"cure start: {s}": s for s in starts}, CETModel)
    compare_fits(inputs, args.seeds, fitters, args.out, "cure_start_probe.py", argv, args.data,
                 extra=p_ever_level, cure_fits=fits.round(4).tolist())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
