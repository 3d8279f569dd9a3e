"""The fused decoder's two narrow matrix products in other memory layouts: how much faster, and
whether they give the same bits (they do not, so adopting one changes every CET weight).

    python benchmarks/bench_decoder_layouts.py [--rows 26] [--samples 100] [--hidden 100] [--outputs 4]

One cache block of ``cet_model.fused`` at the main job's synthetic CET-paper shapes (26 rows of
100 Gumbel samples, width 100, 2 events: 4 outputs): the forward product h @ A, timed as the
layer computes it (``torch.matmul`` into a preallocated block) and with a contiguous copy of Aᵀ
transposed back; the backward product hᵀ · grad, as the layer computes it and as (gradᵀ · h)ᵀ.
Median microseconds over alternating rounds, the speed-up, and the largest absolute difference
from the layer's own result. Writes ``benchmarks/results/decoder_layouts.json``; measures only,
changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_dropout_mask import alternating, median_call_us  # noqa: E402

from cet_model.atomic import write_text  # noqa: E402
from cet_model.evaluation import machine  # noqa: E402


def median_us(fn, repeats: int, rounds: int, other) -> tuple[float, float]:
    """The median over ``rounds`` alternating rounds of each round's median time of ``fn`` and of
    ``other``, in microseconds."""
    per_round = alternating({"fn": fn, "other": other}, rounds, lambda f: median_call_us(f, repeats, warmup=10))
    return float(np.median(per_round["fn"])), float(np.median(per_round["other"]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=26)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--outputs", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    r, k, h_, o = args.rows, args.samples, args.hidden, args.outputs
    h = torch.relu(torch.randn(r, k, h_))
    A = torch.randn(h_, o)
    grad = torch.randn(r, k, o)
    out = torch.empty(r, k, o)
    At = A.T.contiguous().T  # the same values, column-major

    def fwd_layer():
        return torch.matmul(h, A, out=out)

    def fwd_other():
        return torch.matmul(h, At)

    def bwd_layer():
        return h.flatten(0, 1).T @ grad.flatten(0, 1)

    def bwd_other():
        return (grad.flatten(0, 1).T @ h.flatten(0, 1)).T

    rows = []
    for name, layer, other in (("forward h @ A", fwd_layer, fwd_other), ("backward h^T grad", bwd_layer, bwd_other)):
        t_layer, t_other = median_us(layer, args.repeats, args.rounds, other)
        ref = layer().clone()
        diff = float((other() - ref).abs().max())
        row = {"product": name, "layer_us": t_layer, "other_layout_us": t_other, "speedup": t_layer / t_other,
               "max_abs_difference": diff, "bitwise_equal": bool(torch.equal(other(), ref))}
        print(
            f"{name}: as the layer does it {t_layer:.0f} us, other layout {t_other:.0f} us "
            f"({row['speedup']:.2f}x); max |difference| {diff:.2e}, bitwise equal: {row['bitwise_equal']}",
            flush=True,
        )
        rows.append(row)
    out_path = ROOT / "benchmarks" / "results" / "decoder_layouts.json"
    write_text(
        out_path,
        json.dumps(
            {
                "command": "python benchmarks/bench_decoder_layouts.py "
                + " ".join(argv if argv is not None else sys.argv[1:]),
                "shapes": {"rows": r, "samples": k, "hidden": h_, "outputs": o},
                "rows": rows,
                "machine": machine(),
            },
            indent=2,
        ),
    )
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
