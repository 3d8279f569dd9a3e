"""Where a small whole fit's time goes: cProfile of one default CET and one ET fit on a single-event set.

    python benchmarks/profile_small_fit.py [--dataset veteran] [--seed 0] [--top 18]

Fits the default CETModel and ETModel on the harness's cohort (``cet_experiments.cohorts``: its
split and encoding), stopped early on the validation split so that CET's encoder stage runs,
each under cProfile, and prints the epochs each ran and the functions with the most own time.
Then times the training loop's copy of the best
weights (``cet_model.train.snapshot``) against ``copy.deepcopy(state_dict())`` on a CET network of
the default width, and an epoch's two switches of the training flag (``cet_model.train.training_switch``)
against ``net.train()`` and ``net.eval()``. The first fit in the process also pays torch's lazy imports (``exec``,
``marshal.loads`` rows): read the rows of the training loop. Prints only; writes nothing.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import pstats
import sys
import time
import timeit
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cet_experiments.cohorts import cohort_arrays  # noqa: E402
from cet_model import CETModel, ETModel  # noqa: E402
from cet_model.networks import CETNetwork  # noqa: E402
from cet_model.train import snapshot, training_switch  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="veteran")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--top", type=int, default=18)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    parts, _ = cohort_arrays(args.dataset)
    for cls in (CETModel, ETModel):
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        model = cls(device="cpu", seed=args.seed).fit(*parts["train"], *parts["val"])
        prof.disable()
        secs = time.perf_counter() - t0
        stage = getattr(model, "encoder_history_", None)
        print(f"{cls.__name__}: {secs:.2f} s, {len(model.history_.train_loss)} epochs"
              + (f" + {len(stage.train_loss)} encoder-stage epochs" if stage is not None else ""))
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
    net = CETNetwork(parts["train"][0].shape[1], 1, (100,), 0.5, "net")
    n = 2000
    deep = timeit.timeit(lambda: copy.deepcopy(net.state_dict()), number=n) / n * 1e6
    clone = timeit.timeit(lambda: snapshot(net), number=n) / n * 1e6
    print(f"copy of the best weights: copy.deepcopy(state_dict()) {deep:.0f} us, snapshot {clone:.0f} us")
    set_training = training_switch(net)
    n = 20000
    modes = timeit.timeit(lambda: (net.train(), net.eval()), number=n) / n * 1e6
    switch = timeit.timeit(lambda: (set_training(True), set_training(False)), number=n) / n * 1e6
    print(f"an epoch's two mode switches ({len(list(net.modules()))} modules): net.train() + net.eval() "
          f"{modes:.1f} us, training_switch {switch:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
