"""Dropout masks on CPU: torch's ``bernoulli_`` against ``cet_model.networks.keep_mask`` (the same
draws, docs/model.md "Dropout masks").

    python benchmarks/bench_dropout_mask.py [--repeats 2000] [--steps 300] [--rounds 5]

Two measurements, on this machine's CPU with torch's default threads:

1. one mask of each shape the models draw (a 400-row batch of the default width 100, the
   decoder's per-row mask (400, 1, 100), and the MIMIC width 750): ``--rounds`` rounds alternating
   the two functions, ``--repeats`` draws each way in all; the median over rounds of each round's
   median microseconds (every round's median is kept), and that the masks are equal; for the
   shape larger than ``keep_mask``'s chunk, also its draws made in one float64 temporary
   (``drawn_whole``, what ``keep_mask`` did before it drew in chunks);
2. a training step (forward, backward, Adam) of the default single-event CET and ET on SurvSet
   GBSG2's training rows (the set that decides the cost goal), 400-row batches, dropout on:
   ``--rounds`` rounds alternating the two mask functions, ``--steps`` steps each; median ms per
   step.

Writes ``benchmarks/results/dropout_mask.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cet_model import CETModel, ETModel, networks  # noqa: E402
from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import machine  # noqa: E402

FAST = networks.keep_mask


def bernoulli_mask(shape, keep, like):
    """The masks as drawn before ``keep_mask``: torch's ``bernoulli_``."""
    return torch.empty(shape, dtype=like.dtype, device=like.device).bernoulli_(keep)


def whole_mask(shape, keep, like):
    """``keep_mask``'s draws in one float64 temporary instead of ``_MASK_CHUNK`` at a time."""
    return torch.rand(shape, dtype=torch.float64).lt_(keep).to(like.dtype)


MASKS = {"bernoulli_": bernoulli_mask, "keep_mask": FAST}
SHAPES = ((400, 100), (400, 1, 100), (400, 750))


def alternating(arms: dict, rounds: int, measure) -> dict[str, list[float]]:
    """``measure(arm)`` for every arm once per round, the order reversed every other round (so
    neither arm always runs first on a warmer machine); each arm's list of measurements."""
    out = {name: [] for name in arms}
    for r in range(rounds):
        for name in (list(arms) if r % 2 == 0 else list(arms)[::-1]):
            out[name].append(measure(arms[name]))
    return out


def median_call_us(fn, repeats: int, warmup: int = 20) -> float:
    """The median wall time of ``fn()`` over ``repeats`` calls, in microseconds."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e6)


def step_ms(model, batch, opt, steps: int) -> float:
    """Milliseconds per training step (forward, backward, Adam) of ``model`` on ``batch``."""
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = model._train_loss(*batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
    return (time.perf_counter() - t0) / steps * 1e3


def time_masks(repeats: int, rounds: int) -> list[dict]:
    like = torch.empty(0)
    rows = []
    for shape in SHAPES:
        arms = dict(MASKS, drawn_whole=whole_mask) if math.prod(shape) > networks._MASK_CHUNK else MASKS
        per_round = alternating(
            arms,
            rounds,
            lambda fn, shape=shape: median_call_us(lambda: fn(shape, 0.5, like), max(1, repeats // rounds)),
        )
        row = {"shape": list(shape), "rounds_us": per_round}
        for name, v in per_round.items():
            row[f"{name}_us"] = float(np.median(v))
        torch.manual_seed(0)
        a = bernoulli_mask(shape, 0.5, like)
        torch.manual_seed(0)
        row["equal"] = bool(torch.equal(a, FAST(shape, 0.5, like)))
        row["speedup"] = row["bernoulli__us"] / row["keep_mask_us"]
        spread = ", ".join(f"{name} {min(v):.0f}-{max(v):.0f}" for name, v in per_round.items())
        print(f"mask {tuple(shape)}: bernoulli_ {row['bernoulli__us']:.0f} us, keep_mask {row['keep_mask_us']:.0f} us "
              f"({row['speedup']:.1f}x; round medians {spread} us), equal: {row['equal']}", flush=True)
        rows.append(row)
    return rows


def time_steps(steps: int, rounds: int) -> list[dict]:
    from cet_experiments.cohorts import cohort_arrays

    X, t, s = cohort_arrays("GBSG2")[0]["train"]
    rows = []
    for cls in (CETModel, ETModel):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = cls(device="cpu", seed=0, max_epochs=1).fit(X, t, s)
        idx = torch.arange(min(400, len(X)))
        batch = [a[idx] if a is not None else None for a in model._tensors(X, t, s, None)]
        opt = torch.optim.Adam(model.net_.parameters(), lr=1e-3)
        model.net_.train()

        def measure(mask_fn, model=model, batch=batch, opt=opt):
            networks.keep_mask = mask_fn
            return step_ms(model, batch, opt, steps)
        try:
            ms = alternating(MASKS, rounds, measure)
        finally:
            networks.keep_mask = FAST
        row = {"model": cls.__name__, "bernoulli__ms_per_step": float(np.median(ms["bernoulli_"])),
               "keep_mask_ms_per_step": float(np.median(ms["keep_mask"])), "rounds": ms}
        row["speedup"] = row["bernoulli__ms_per_step"] / row["keep_mask_ms_per_step"]
        print(f"{cls.__name__} step on GBSG2 (400 rows): bernoulli_ {row['bernoulli__ms_per_step']:.2f} ms, "
              f"keep_mask {row['keep_mask_ms_per_step']:.2f} ms ({row['speedup']:.2f}x)", flush=True)
        rows.append(row)
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "dropout_mask.json")
    args = ap.parse_args(argv)
    out = {
        "command": "python benchmarks/bench_dropout_mask.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "masks": time_masks(args.repeats, args.rounds),
        "steps": time_steps(args.steps, args.rounds),
        "machine": machine(),
    }
    write_text(args.out, json.dumps(out, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
