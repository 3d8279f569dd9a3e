"""A version's model fits side by side, one worker process each (docs/pipeline.md, "Fits side by side").

The default networks are small: a fit gains almost nothing from a second CPU thread (CET on the
main job's synthetic data: 4.34 s for 8 epochs with two threads, 4.43 s with one;
``benchmarks/bench_train_threads.py``), so on ``k`` cores ``k`` fits of one thread each finish in
about the time of the longest. ``fit_side_by_side`` runs each preset's fit in a spawned worker
that loads the dataset folder itself (flows pass paths), fits and saves the model into the
version's staging folder; the caller loads it back (safetensors: the same weights) and scores it
as before. What a fit logs in its worker is logged here as it happens, its epochs reach the
caller's ``progress`` (at most one every half second, and the first two), and its warnings are
warned here when it ends. A worker dies with the process that started it (Linux), so a kill -9
of the pipeline leaves no fit running.

The number of CPU threads decides the order of floating-point sums, so a fit with one thread does
not reproduce, to the bit, the same fit with two: a version records its worker processes and their
threads (``params.json``, ``fit_processes``).
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import multiprocessing
import os
import queue as queue_module
import sys
import time
import warnings
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from cet_model import threads as cet_threads
from flows.lib.infra.workers import ignore_interrupt, stop

log = logging.getLogger("flows.train")
VARIABLE = "CET_TRAIN_WORKERS"
_EVENTS = None  # in a worker: the queue its fits' log records and epochs go back through


def plan(workers: int | None, n_models: int, device: str, cpus: int | None = None, environ=None,
         current: int | None = None) -> tuple[int, int]:
    """(worker processes, CPU threads per fit) for ``n_models`` fits on ``device``.

    ``workers`` None (automatic): one a usable CPU, at most one a model; with ``CET_THREADS`` set,
    as many as the CPUs hold fits of that many threads; on a GPU 1 (the fits share the device, one
    after another). 1: the fits one after another in this process, with its threads as they are.
    Each worker's threads: ``CET_THREADS``, else PyTorch's count here (``current``; ``OMP_NUM_THREADS``)
    capped at the CPUs shared by the workers (``cet_model.threads.choose``).

    >>> plan(None, 4, "cpu", cpus=2, environ={}, current=2)
    (2, 1)
    >>> plan(None, 4, "cpu", cpus=16, environ={}, current=16), plan(None, 4, "cpu", cpus=16, environ={}, current=1)
    ((4, 4), (4, 1))
    >>> plan(None, 4, "cpu", cpus=8, environ={"CET_THREADS": "4"}, current=8)
    (2, 4)
    >>> plan(None, 4, "cuda", cpus=16, environ={})[0], plan(None, 1, "cpu", cpus=16, environ={})[0]
    (1, 1)
    >>> plan(3, 4, "cpu", cpus=2, environ={}, current=2)
    (3, 1)
    """
    if workers is not None and workers < 1:
        raise ValueError(f"{VARIABLE}: expected a whole number >= 1, got {workers}")
    env = os.environ if environ is None else environ
    cpus = cet_threads.usable_cpus() if cpus is None else cpus
    if workers is None:
        if device.startswith("cuda"):
            workers = 1
        else:
            value = str(env.get(cet_threads.VARIABLE, "")).strip()
            per_fit = cet_threads.whole_number(cet_threads.VARIABLE, value) if value else 1
            workers = max(1, cpus // per_fit)
    workers = max(1, min(workers, n_models))
    return workers, cet_threads.choose(env, cpus=cpus, parallel=workers, current=current)[0]


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker when the process that started it dies."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _start_worker(events, n_threads: int) -> None:  # pragma: no cover (runs in a worker)
    global _EVENTS
    _die_with_parent()
    ignore_interrupt()  # Ctrl-C reaches the whole process group: the command stops us
    _EVENTS = events
    os.environ[cet_threads.VARIABLE] = str(n_threads)  # what every fit in this worker uses
    import torch

    torch.set_num_threads(n_threads)


def _fit_one(model_name: str, dataset_dir: str, out_dir: str, fit_kwargs: dict) -> dict:  # pragma: no cover (a worker)
    """In a worker: fit one preset on the dataset folder and save it to ``out_dir``."""
    from cet_model.dataset import load_dataset
    from cet_model.evaluation import model_inputs
    from cet_model.presets import fit_preset

    ds = load_dataset(dataset_dir, splits=("train", "val"))  # the test rows stay out of the worker's memory
    handler = logging.handlers.QueueHandler(_EVENTS)
    logger = logging.getLogger("cet_model")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # said once, by the process that started the fit
    sent = [0.0]

    def on_epoch(epoch, hist):
        now = time.monotonic()
        if epoch <= 1 or now - sent[0] >= 0.5:
            sent[0] = now
            _EVENTS.put(("epoch", model_name, epoch, hist))

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # each one goes back; the caller's filters decide what is shown
            t0 = time.perf_counter()
            model = fit_preset(model_name, ds.train, ds.val, x_train=model_inputs(ds.train),
                               x_val=model_inputs(ds.val), on_epoch=on_epoch, **fit_kwargs)
            seconds = time.perf_counter() - t0
        model.save(out_dir)
        stage = getattr(model, "encoder_history_", None)
        return {"seconds": seconds, "history": model.history_, "encoder_history": stage,
                "warnings": [(w.category, str(w.message)) for w in caught]}
    finally:
        logger.removeHandler(handler)
        _EVENTS.put(("done", model_name, None, None))  # after its last record: the caller has heard everything


@contextlib.contextmanager
def _workers_skip_main():
    """While workers start: a spawned process runs the starting process's main module again
    (``__spec__``, else ``__file__``) before it works, which a script without an ``if __name__ ==
    "__main__"`` guard would answer by starting the whole job again, and which costs a ``python -m
    flows.train`` worker seconds of imports. The workers need nothing from it (their functions live
    here), so it is hidden from them while they start."""
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__spec__", "__file__") if main is not None and k in main.__dict__}
    try:
        if main is not None:
            main.__dict__.pop("__file__", None)
            main.__dict__["__spec__"] = None
        yield
    finally:
        if main is not None:
            main.__dict__.pop("__spec__", None)
            main.__dict__.update(saved)


class _Listener:
    """What the workers send back, handled in the caller's thread (its Prefect run context)."""

    def __init__(self, events, progress, on_first_epochs):
        self.events, self.progress, self.on_first_epochs = events, progress, on_first_epochs
        self.done: set[str] = set()
        self.last: dict[str, tuple] = {}

    def pump(self, timeout: float) -> None:
        try:
            item = self.events.get(timeout=timeout)
        except queue_module.Empty:
            return
        while True:
            self._handle(item)
            try:
                item = self.events.get_nowait()
            except queue_module.Empty:
                return

    def _handle(self, item) -> None:
        if isinstance(item, logging.LogRecord):
            logging.getLogger(item.name).handle(item)
            return
        kind, model, epoch, hist = item
        if kind == "done":
            self.done.add(model)
            return
        if epoch == 1:
            self.on_first_epochs()
        self.last[model] = (epoch, hist)
        if self.progress is not None:
            self.progress(model, epoch, hist)


def fit_side_by_side(models, dataset_dir, staging: Path, fit_kwargs: dict[str, dict], workers: int,
                     n_threads: int, progress=None, on_first_epochs=lambda: None):
    """Fit ``models`` (preset names) on ``dataset_dir`` in ``workers`` processes of ``n_threads``
    CPU threads, each with ``fit_preset``'s keywords ``fit_kwargs[name]`` and saved to ``staging /
    name``. Yields (name, fitted model, fit seconds, encoder-stage epochs) in the order of
    ``models``, each as soon as it and those before it are done. ``on_first_epochs()`` after any
    fit's second epoch (the crash point of the crash tests)."""
    from cet_model.models import load_model

    ctx = multiprocessing.get_context("spawn")
    events = ctx.Queue()
    listener = _Listener(events, progress, on_first_epochs)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_start_worker,
                               initargs=(events, n_threads))
    try:
        with _workers_skip_main():  # the workers start as the fits are submitted
            futures: dict[str, Future] = {
                name: pool.submit(_fit_one, name, str(dataset_dir), str(Path(staging) / name), fit_kwargs[name])
                for name in models}
        for name in models:
            future = futures[name]
            while not (future.done() and (name in listener.done or future.exception() is not None)):
                listener.pump(0.2)
            out = future.result()
            for category, message in out["warnings"]:
                warnings.warn(message, category, stacklevel=2)
            hist, stage = out["history"], out["encoder_history"]
            last = len(hist.train_loss) + (0 if stage is None else len(stage.train_loss)) - 1
            if progress is not None and listener.last.get(name, (None,))[0] != last and last >= 0:
                progress(name, last, stage if stage is not None else hist)  # its last epoch, always
            model = load_model(Path(staging) / name, device="cpu")
            model.history_, model.encoder_history_ = hist, stage
            yield name, model, out["seconds"], 0 if stage is None else len(stage.train_loss)
    except BaseException:
        stop(pool)
        raise
    else:
        pool.shutdown(wait=True)
    finally:
        events.close()
