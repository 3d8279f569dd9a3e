"""Is CET's time head what keeps it short of the oracle? Decoders fitted with the truth, and without.

    python benchmarks/time_head_ceiling.py --data data/experiments/mimic-standin [--seeds 0,1] \
        [--out benchmarks/results/time_head_ceiling_mimic.json]

CET learns who will ever have a censored event from when it was censored, through its time head:
a cell censored late, where the time head expects the event early, is probably a cell whose event
never comes. The time head is itself learned from the censored rows, jointly with the occurrence
head, by the marginal likelihood. This probe fits, per seed, BC and the oracle (the goal's floor
and ceiling), the default CET, and CET with other time decoders, each time training the
occurrence encoder on the censored training rows by the same objective, stopped on the censored
validation objective:

- ``default``: the default CET (joint stage, then the encoder stage): the tables' model.
- ``truth decoder, encoder stage`` / ``truth decoder, encoder from its start``: the default's
  joint stage then its encoder stage, or the encoder from its initial weights with the joint
  stage's budget and patience, against a decoder fitted to the truth: a CET of the same layers
  fitted to the training rows, and stopped early on the validation rows, with every cell whose
  event happens observed at its true time and every other cell censored so far out that the time
  head gives it no mass.
- ``known-c decoder, encoder from its start``: against a decoder fitted to the *censored* times
  (observed or censored, as the data have them) of the cells whose event happens, each decoded
  with its row's true occurrence pattern: what censoring leaves of the time head once the
  uncertainty about c is taken away.
- ``known-c encoder, marginal decoder refitted``: that encoder kept, the decoder fitted again from
  its initial weights by the marginal likelihood: is the better pair near a fixed point?
- No truth: ``EM round 1`` / ``EM round 2``: from the default's fit, the decoder fitted again from
  its initial weights against the default's (frozen) encoder, then the encoder stage again;
  ``default's encoder, decoder refitted, encoder from its start``; ``KM warm-up``: the decoder
  fitted first against the encoder at its start with each event's logit at the Kaplan-Meier
  plateau (nearer P(ever) than the observed share the default starts at), then the encoder from
  its start; ``KM warm-up, EM round``: then one more round of each.

Per variant: the validation objective (the marginal likelihood on the censored validation rows,
the only figure a rule without the truth may use; lower is better), the validation AUC of P(ever)
against the true occurrence and the share of BC's gap to the oracle it closes; per decoder, how
well it fits the validation split's true times (mean log-density of log T_true over the cells
whose event happens, given the true pattern; on the cells censored before it; mean mu - log
T_true; mean sigma). The truth is used to diagnose, never to choose; the test split is not read.
"""

from __future__ import annotations

import argparse
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
    validation_inputs,
    write_record,
)
from encoder_stage_probe import JointOnly  # noqa: E402

from cet_model import losses  # noqa: E402
from cet_model.evaluation import PRESETS, comment_encoder_for  # noqa: E402
from cet_model.train import train, training_only  # noqa: E402

# an event that never happens is put this many times past the longest time of its split, where a
# log-normal time head fitted to the real times gives it a survival of zero to float precision
FAR_OUT = 1e6


class StartKept(JointOnly):
    """The joint stage only, keeping the occurrence encoder's and the time decoder's initial
    weights (after the starts of the logits and of mu and log sigma) in ``encoder_start_`` and
    ``decoder_start_``."""

    def _prepare(self, t, s, m):
        super()._prepare(t, s, m)
        self.encoder_start_ = {k: v.detach().clone() for k, v in self.net_.encoder.state_dict().items()}
        self.decoder_start_ = {k: v.detach().clone() for k, v in self.net_.decoder.state_dict().items()}


class TruthFit(JointOnly):
    """The joint stage on the truth; the time head starts at the mean log time of the events that
    happen (the cells placed far out would otherwise pull it there)."""

    def _init_time_bias(self, log_t: np.ndarray) -> None:
        happened = np.where(log_t < np.log(FAR_OUT) - 1.0, log_t, np.nan)
        bias = self.net_.decoder.output_bias()
        m = self.n_events_
        with torch.no_grad():
            bias[:m] = self._tensor(np.nanmean(happened, 0))
            bias[m:] = self._tensor(np.log(np.nanstd(happened, 0) + 1e-3))


def require_truth(ap: argparse.ArgumentParser, data, *splits) -> None:
    """Refuse, naming the folder, a dataset whose splits do not record the true occurrence."""
    if any(np.isnan(sp.C).any() for sp in splits):
        ap.error(f"{data}: the true occurrence is not recorded; this probe needs a stand-in with its truth")


def seed_list(text: str) -> list[int]:
    """``--seeds``: comma-separated whole numbers.

    >>> seed_list("0,1")
    [0, 1]
    """
    try:
        return [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"comma-separated whole numbers, got {text!r}") from None


def head_pairs(ap: argparse.ArgumentParser, flag: str, text: str, valid, meaning: str) -> list[tuple[float, float]]:
    """A probe's comma-separated decoder/encoder pairs (``0.5/0.7,3/1``), each value passing
    ``valid``; otherwise ``ap.error`` names ``flag``, what the values must be (``meaning``) and the text.

    >>> head_pairs(argparse.ArgumentParser(), "--pairs", "0.5/0.7,3/1", lambda r: r > 0, "> 0")
    [(0.5, 0.7), (3.0, 1.0)]
    """
    try:
        pairs = [tuple(float(r) for r in p.split("/")) for p in text.split(",")]
    except ValueError:
        pairs = []
    if not pairs or any(len(p) != 2 or not all(valid(r) for r in p) for p in pairs):
        ap.error(f"{flag} must be decoder/encoder pairs of {meaning}, such as 0.5/0.7; got {text!r}")
    return pairs


def truth_probe_parser(doc: str) -> argparse.ArgumentParser:
    """The options of every probe that reads a stand-in's truth: ``--data``, ``--seeds`` (a list of
    seeds, default 0,1) and ``--out``; the probe adds its own."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="dataset folder (with the truth recorded)")
    ap.add_argument("--seeds", type=seed_list, default=[0, 1], help="comma-separated seeds (default 0,1)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures here (JSON)")
    return ap


def truth_inputs(ap: argparse.ArgumentParser, data):
    """``validation_inputs(data)`` of a dataset that records the true occurrence (else refused,
    naming the folder): (dataset, train split, validation split, the model inputs of each)."""
    inputs = validation_inputs(data)
    require_truth(ap, data, *inputs[1:3])
    return inputs


def truth_as_observed(split) -> tuple[np.ndarray, np.ndarray]:
    """(T, S) with every happening event observed at its true time and every other cell censored
    ``FAR_OUT`` times past the split's longest time.

    >>> from types import SimpleNamespace
    >>> sp = SimpleNamespace(C=np.array([[1, 0]]), T_true=np.array([[2.0, np.nan]]), T=np.array([[1.0, 3.0]]))
    >>> t, s = truth_as_observed(sp)
    >>> t.tolist(), s.tolist()
    ([[2.0, 3000000.0]], [[1.0, 0.0]])
    """
    c = split.C > 0.5
    far = FAR_OUT * float(np.nanmax(np.concatenate([split.T.ravel(), split.T_true[c]])))
    return np.where(c, split.T_true, far), c.astype(float)


def stage(model: StartKept, part: str | None, config, start_best: float = float("inf")) -> float:
    """Train ``model.net_.<part>`` alone (``None``: the whole network) on the model's own
    objective (the marginal likelihood of the censored training rows), stopped on its validation
    objective; returns the best objective."""
    batch_loss, n_train, val_loss = model.stage_inputs_
    module = model.net_ if part is None else getattr(model.net_, part)
    with training_only(model.net_, module):
        hist = train(model.net_, batch_loss, n_train, config, model.shuffle_generator_, val_loss,
                     desc=f"{part or 'joint'} stage", start_best=start_best)
    return float(min(hist.val_loss))


def encoder_against(model: StartKept, decoder_state: dict, encoder_state: dict | None, config) -> float:
    """Load ``decoder_state`` into the model's time decoder (and ``encoder_state`` into its
    occurrence encoder, if given), then train the encoder alone (``stage``); returns the best
    validation objective."""
    model.net_.decoder.load_state_dict(decoder_state)
    if encoder_state is not None:
        model.net_.encoder.load_state_dict(encoder_state)
    return stage(model, "encoder", config)


def decoder_fitted(model: StartKept, x_tr, tr, x_va, va, occurrence, desc: str):
    """A time decoder fitted, from the model's initial decoder weights, to the censored times
    (observed or censored, as the data have them) given an occurrence pattern:
    ``occurrence(split)`` returns (c, w), each (n, M): the pattern each row is decoded with and the
    cells that count. The joint stage's budget, stopped on the same loss over the validation split.
    Returns the decoder's weights and the fit's History; the model's weights are put back."""
    held = {k: v.clone() for k, v in model.net_.decoder.state_dict().items()}
    model.net_.decoder.load_state_dict(model.decoder_start_)

    def tensors(x, split):
        c, w = occurrence(split)
        return (model._x_tensor(x), model._tensor(np.log(split.T)), model._tensor(split.S), model._tensor(c),
                model._tensor(w))

    def loss(x, log_t, s, c, w):
        mu, log_sigma = model._decode(model.net_.features(x), c.unsqueeze(1))
        cell = losses.censored_lognormal_loglik(log_t, s, mu[:, 0], log_sigma[:, 0])
        return -(cell * w).sum() / w.sum().clamp(min=1.0)

    tr_t, va_t = tensors(x_tr, tr), tensors(x_va, va)

    def val_loss() -> float:
        with torch.no_grad():
            return float(loss(*va_t))

    def batch_loss(idx):
        return loss(*(a[idx] for a in tr_t))

    with training_only(model.net_, model.net_.decoder):
        history = train(model.net_, batch_loss, len(x_tr), model._config(), model.shuffle_generator_, val_loss,
                        desc=desc)
    fitted = {k: v.clone() for k, v in model.net_.decoder.state_dict().items()}
    model.net_.decoder.load_state_dict(held)
    return fitted, history


def decoder_on_known_occurrence(model: StartKept, x_tr, tr, x_va, va) -> dict:
    """A time decoder fitted to the censored times with the true occurrence known
    (``decoder_fitted``): on the cells whose event happens, each decoded with the row's true
    occurrence pattern. What censoring alone leaves of the time head, with the uncertainty about c
    taken away. Returns the decoder's weights (its History in ``model.known_c_history_``)."""
    def known(split):
        c = (split.C > 0.5).astype(float)
        return c, c
    fitted, model.known_c_history_ = decoder_fitted(model, x_tr, tr, x_va, va, known, "decoder on known c")
    return fitted


def decoder_fit(model, x, split) -> dict[str, float]:
    """How well the model's time decoder fits the validation split's true event times, given the
    true occurrence pattern: mean log-density of log T_true over the cells whose event happens
    (all of them, and those the data censored before it), the mean of mu - log T_true on those,
    and the mean sigma."""
    c = split.C > 0.5
    hidden = c & (split.S < 0.5)
    model.net_.eval()
    with torch.no_grad():
        h = model.net_.features(model._x_tensor(x))
        mu, log_sigma = (a[:, 0].cpu().numpy() for a in model._decode(h, model._tensor(c.astype(float)).unsqueeze(1)))
    log_t = np.log(np.where(c, split.T_true, 1.0))
    z = (log_t - mu) / np.exp(log_sigma)
    log_density = -0.5 * z**2 - log_sigma - 0.5 * np.log(2 * np.pi)
    return {"loglik": float(log_density[c].mean()), "loglik_hidden": float(log_density[hidden].mean()),
            "bias": float((mu - log_t)[c].mean()), "bias_hidden": float((mu - log_t)[hidden].mean()),
            "sigma": float(np.exp(log_sigma)[c].mean())}


def probe_seed(seed: int, ds, tr, va, x_tr, x_va, truth_data) -> dict:
    """One seed's fits and figures (the module docstring lists the variants)."""
    t_tr, s_tr, t_va, s_va = truth_data
    preset = PRESETS["CET"][1]
    t0 = time.perf_counter()
    base = floor_and_ceiling(ds, x_tr, x_va, seed)
    kw = dict(seed=seed, comment_encoder=comment_encoder_for(tr), **preset)
    truth = TruthFit(**kw).fit(x_tr, t_tr, s_tr, x_va, t_va, s_va, mask=tr.mask, mask_val=va.mask)
    truth_decoder = {k: v.clone() for k, v in truth.net_.decoder.state_dict().items()}
    model = StartKept(**kw).fit(x_tr, tr.T, tr.S, x_va, va.T, va.S, mask=tr.mask, mask_val=va.mask)
    joint = {k: v.clone() for k, v in model.net_.state_dict().items()}
    shuffle = model.shuffle_generator_.get_state()
    stage_cfg = model._encoder_stage_config(model.stage_inputs_[1])
    variants, decoders = {}, {"truth": decoder_fit(truth, x_va, va)}

    def objective() -> float:
        return -model.score(x_va, va.T, va.S, mask=va.mask)

    def record(name: str, decoder: str | None = None) -> None:
        auc = truth_scores(model.predict_occurrence(x_va), va.C, va.mask)[0]
        variants[name] = {"val_objective": round(objective(), 5), "val_auc": round(auc, 4),
                          "gap_share": round(gap_share(auc, base["BC"], base["Oracle"]), 3)}
        if decoder:
            decoders[decoder] = decoder_fit(model, x_va, va)

    def restart(state: dict) -> None:
        model.net_.load_state_dict(state)
        model.shuffle_generator_.set_state(shuffle)

    decoders["default"] = dict(decoder_fit(model, x_va, va), best_epoch=model.history_.best_epoch + 1)
    stage(model, "encoder", stage_cfg, start_best=min(model.history_.val_loss))
    record("default")
    after_default = {k: v.clone() for k, v in model.net_.state_dict().items()}

    restart(joint)
    encoder_against(model, truth_decoder, None, stage_cfg)
    record("truth decoder, encoder stage")
    restart(joint)
    encoder_against(model, truth_decoder, model.encoder_start_, model._config())
    record("truth decoder, encoder from its start")

    restart(joint)
    known = decoder_on_known_occurrence(model, x_tr, tr, x_va, va)
    model.net_.decoder.load_state_dict(known)
    decoders["known c"] = dict(decoder_fit(model, x_va, va), best_epoch=model.known_c_history_.best_epoch + 1)
    encoder_against(model, known, model.encoder_start_, model._config())
    record("known-c decoder, encoder from its start")
    model.net_.decoder.load_state_dict(model.decoder_start_)
    stage(model, "decoder", model._config())
    record("known-c encoder, marginal decoder refitted", decoder="marginal, against the known-c encoder")

    restart(after_default)
    for rnd in (1, 2):
        model.net_.decoder.load_state_dict(model.decoder_start_)
        stage(model, "decoder", model._config())
        stage(model, "encoder", stage_cfg, start_best=objective())
        record(f"EM round {rnd}", decoder=f"marginal, EM round {rnd}")
    restart(after_default)
    model.net_.decoder.load_state_dict(model.decoder_start_)
    stage(model, "decoder", model._config())
    model.net_.encoder.load_state_dict(model.encoder_start_)
    stage(model, "encoder", model._config())
    record("default's encoder, decoder refitted, encoder from its start")

    restart(after_default)
    model.net_.decoder.load_state_dict(model.decoder_start_)
    model.net_.encoder.load_state_dict(model.encoder_start_)
    model.occurrence_init = "km"
    model._init_occurrence_bias(tr.T, tr.S, tr.mask)
    model.occurrence_init = preset.get("occurrence_init", "observed")
    km_start = {k: v.clone() for k, v in model.net_.encoder.state_dict().items()}
    stage(model, "decoder", model._config())
    decoders["marginal, KM warm-up"] = decoder_fit(model, x_va, va)
    model.net_.encoder.load_state_dict(km_start)
    stage(model, "encoder", model._config())
    record("KM warm-up")
    model.net_.decoder.load_state_dict(model.decoder_start_)
    stage(model, "decoder", model._config())
    stage(model, "encoder", stage_cfg, start_best=objective())
    record("KM warm-up, EM round", decoder="marginal, KM warm-up and an EM round")

    row = {"seed": seed, "val_auc_bc": round(base["BC"], 4), "val_auc_oracle": round(base["Oracle"], 4),
           "seconds": round(time.perf_counter() - t0, 1), "variants": variants,
           "decoders": {k: {a: round(b, 4) for a, b in v.items()} for k, v in decoders.items()}}
    return row


def main(argv=None) -> int:
    ap = truth_probe_parser(__doc__)
    args = ap.parse_args(argv)
    ds, tr, va, x_tr, x_va = truth_inputs(ap, args.data)
    t_tr, s_tr = truth_as_observed(tr)
    t_va, s_va = truth_as_observed(va)
    rows = []
    for seed in (int(s) for s in args.seeds.split(",")):
        row = probe_seed(seed, ds, tr, va, x_tr, x_va, (t_tr, s_tr, t_va, s_va))
        variants = row["variants"]
        base = {"BC": row["val_auc_bc"], "Oracle": row["val_auc_oracle"]}
        rows.append(row)
        print(f"seed {seed}: BC {base['BC']:.4f}, oracle {base['Oracle']:.4f} ({row['seconds']:.0f}s)", flush=True)
        for k, v in variants.items():
            print(f"  {k}: objective {v['val_objective']:.5f}, AUC {v['val_auc']:.4f} ({v['gap_share']:.0%})")
        for k, v in row["decoders"].items():
            print(f"  decoder {k}, on the true times: " + ", ".join(f"{a} {b}" for a, b in v.items()), flush=True)
    summary = {k: {key: round(float(np.mean([r["variants"][k][key] for r in rows])), 5)
                   for key in ("val_objective", "val_auc", "gap_share")} for k in rows[0]["variants"]}
    print("mean over seeds:")
    for k, v in summary.items():
        print(f"  {k}: objective {v['val_objective']:.5f}, AUC {v['val_auc']:.4f} ({v['gap_share']:.1%})")
    if args.out:
        write_record(args.out, "time_head_ceiling.py", argv, args.data, rows=rows, mean=summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
