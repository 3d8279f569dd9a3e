"""Would an exponential moving average of the weights (validated, kept and returned in place of
the last step's) lift CET on small data? Validation splits only.

    python benchmarks/weight_average_probe.py --decay 0.99 survset_size_probe [its arguments]
    python benchmarks/weight_average_probe.py --decay 0.99 validation_probe [its arguments]
    python benchmarks/weight_average_probe.py --decay 0.99 baseline_validation_probe [its arguments]

After every optimizer step the average a <- decay * a + (1 - decay) * w is updated (per step, from
the weights each ``train`` call starts with); each epoch's monitored validation loss is that of
the average, and early stopping keeps and returns the best average. Every model fitted through
``cet_model.train.train`` in the probe's process gets it (CET, ET and BC alike: the baselines
built on the same loop are given the same change). Made here by wrapping the library's loop for
this process, not by changing it; ``--decay 0`` runs the library's loop as it is.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cet_model.models as models  # noqa: E402
import cet_model.train as train_module  # noqa: E402

_train = train_module.train


def averaged(decay: float):
    """``cet_model.train.train`` with the weights' moving average validated and kept."""

    def train(module, batch_loss, n_train, cfg, shuffle_generator, val_loss=None, **kw):
        params = [p for p in module.parameters() if p.requires_grad]
        avg = [p.detach().clone() for p in params]
        state = {"raw": None, "first": True}  # raw: the trained weights while the average is in place

        def step_done():
            with torch.no_grad():
                for a, p in zip(avg, params, strict=True):
                    a.mul_(decay).add_(p.detach(), alpha=1 - decay)

        def loss(idx):
            with torch.no_grad():
                if state["raw"] is not None:  # an epoch begins: the trained weights back
                    for p, r in zip(params, state["raw"], strict=True):
                        p.copy_(r)
                    state["raw"] = None
                elif not state["first"]:
                    step_done()
            state["first"] = False
            return batch_loss(idx)

        def monitored():
            with torch.no_grad():
                if state["raw"] is None:
                    step_done()  # the epoch's last step
                    state["raw"] = [p.detach().clone() for p in params]
                    for p, a in zip(params, avg, strict=True):
                        p.copy_(a)
            return val_loss()  # with the average in place, which a best epoch's snapshot keeps

        return _train(module, loss, n_train, cfg, shuffle_generator, val_loss=monitored if val_loss else None, **kw)

    return train


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--decay", type=float, required=True, help="per-step decay of the average (0: the library's loop)")
    ap.add_argument("probe", choices=("survset_size_probe", "validation_probe", "baseline_validation_probe"))
    args, rest = ap.parse_known_args(argv)
    if not 0 <= args.decay < 1:
        ap.error(f"--decay must be in [0, 1), got {args.decay}")
    if args.decay > 0:
        models.train = averaged(args.decay)
    print(f"weights' moving average, decay {args.decay} per step" if args.decay else "the library's loop", flush=True)
    return importlib.import_module(args.probe).main(rest)


if __name__ == "__main__":
    raise SystemExit(main())
