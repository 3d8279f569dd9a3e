"""The training loop: the only place with an optimizer.

Adam (AdamW with ``weight_decay`` > 0; :class:`Adam`) with mini-batches and early stopping on the
validation loss (the best weights are restored), or full-batch L-BFGS for small deterministic fits
(reference tests).

Budget: ``max_epochs=None`` means at least ``DEFAULT_EPOCHS`` epochs *and* at least
``MIN_STEPS`` optimizer steps. On a data set that fits in a few batches, 100 epochs are only a
few hundred steps, too few to converge; the epochs and the patience are then stretched by the
same factor, or (``patience_steps``, CET's recipe) the patience covers at least that many
steps. With validation data early stopping ends a fit, and that budget times
``VALIDATED_CAP`` is only a cap; without them the budget is the fit's length. An explicit
``max_epochs`` is obeyed as given. When the budget ends while the monitored loss is still
improving (no early stop), ``ConvergenceWarning`` says so.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning
from tqdm.auto import tqdm

log = logging.getLogger("cet_model")

DEFAULT_EPOCHS = 100
DEFAULT_PATIENCE = 10
MIN_STEPS = 5000
VALIDATED_CAP = 4  # with validation data: the automatic budget times this, a cap early stopping stays under
# a first stage that keeps one of its first EARLY_KEEP epochs after running at least 10x as many
# warns: its weights are close to their random start (docs/decisions.md, init_noise_probe.py)
EARLY_KEEP = 5


@dataclass(frozen=True)
class TrainConfig:
    lr: float = 1e-3
    batch_size: int | None = 400
    max_epochs: int | None = None  # None: DEFAULT_EPOCHS, stretched to MIN_STEPS steps
    patience: int | None = None  # None: DEFAULT_PATIENCE, stretched likewise
    optimizer: str = "adam"  # or "lbfgs" (full batch)
    weight_decay: float = 0.0  # > 0: AdamW's decoupled decay (Adam itself when 0)
    verbose: bool = False
    tol: float = 1e-4  # patience restarts once the monitored loss has fallen by more than this
    patience_steps: int | None = None  # automatic budget and patience: >= this many steps (and DEFAULT_PATIENCE epochs)

    def budget(self, n_train: int, validated: bool = False) -> tuple[int, int]:
        """(epochs, patience) for ``n_train`` rows; ``validated``: early stopping watches
        validation data, and the automatic budget is a cap ``VALIDATED_CAP`` times as long.

        >>> TrainConfig().budget(80)        # one step per epoch: 5,000 epochs, patience 500
        (5000, 500)
        >>> TrainConfig().budget(24_000)    # 60 steps per epoch: the defaults
        (100, 10)
        >>> TrainConfig().budget(24_000, validated=True)    # the same patience under a cap
        (400, 10)
        >>> TrainConfig(max_epochs=5, patience=2).budget(80, validated=True)
        (5, 2)
        >>> TrainConfig(patience_steps=200).budget(800)    # 2 steps per epoch: 100 epochs of patience
        (2500, 100)
        >>> TrainConfig(patience_steps=200, max_epochs=50).budget(800)    # an explicit budget: 10 epochs
        (50, 10)
        """
        steps = max(1, math.ceil(n_train / (self.batch_size or n_train)))
        stretch = max(1, math.ceil(MIN_STEPS / (DEFAULT_EPOCHS * steps)))
        cap = VALIDATED_CAP if validated else 1
        epochs = self.max_epochs if self.max_epochs is not None else DEFAULT_EPOCHS * stretch * cap
        if self.patience is not None:
            patience = self.patience
        elif self.max_epochs is not None:
            patience = DEFAULT_PATIENCE
        elif self.patience_steps is not None:
            patience = max(DEFAULT_PATIENCE, math.ceil(self.patience_steps / steps))
        else:
            patience = DEFAULT_PATIENCE * stretch
        return int(epochs), int(patience)


MIN_HOLDOUT_ROWS = 10  # fewer rows would make a validation loss too noisy to stop on


def holdout_split(n: int, share: float, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(training rows, held-out rows), each in row order, with ``share`` of the ``n`` rows held
    out at random (``seed``); None when that is fewer than ``MIN_HOLDOUT_ROWS`` rows.

    >>> keep, held = holdout_split(100, 0.2, seed=0)
    >>> len(keep), len(held), sorted({*keep, *held}) == list(range(100))
    (80, 20, True)
    >>> holdout_split(40, 0.2, seed=0) is None   # 8 rows: the training loss is watched instead
    True
    """
    held = round(share * n)
    if held < MIN_HOLDOUT_ROWS:
        return None
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[held:]), np.sort(order[:held])


def later_stage(cfg: TrainConfig, n_train: int, patience_fraction: float) -> TrainConfig:
    """The configuration of a further stage of a fit, which watches validation data: the first
    stage's epoch budget and ``patience_fraction`` of its patience (at least 1 epoch), both made
    explicit.

    >>> TrainConfig().budget(80, validated=True)
    (20000, 500)
    >>> later_stage(TrainConfig(), 80, 0.5).budget(80)
    (20000, 250)
    >>> later_stage(TrainConfig(max_epochs=30, patience=3), 80, 0.5).budget(80)   # round(1.5) = 2
    (30, 2)
    """
    epochs, patience = cfg.budget(n_train, validated=True)
    return replace(cfg, max_epochs=epochs, patience=shorter_patience(patience, patience_fraction))


def shorter_patience(patience: int, fraction: float) -> int:
    """``fraction`` of ``patience`` epochs, rounded (half to even), at least 1.

    >>> shorter_patience(500, 0.5), shorter_patience(5, 0.5), shorter_patience(3, 0.25)
    (250, 2, 1)
    """
    return max(1, round(patience * fraction))


@dataclass
class History:
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    best_epoch: int = -1
    stopped_early: bool = False


@dataclass
class EarlyStopping:
    """The stopping rule: stop after ``patience`` epochs without a gain of more than ``tol`` over
    the last such gain; the best value (any gain, even below ``tol``) is the one kept.

    ``best``: the monitored value of the starting weights (``inf``: none yet). ``update`` returns
    (this epoch is the new best, stop now). ``best_epoch`` is -1 while the start is best.

    >>> rule = EarlyStopping(patience=2, tol=1e-4, best=1.05)
    >>> [rule.update(e, v) for e, v in enumerate([1.0, 0.9, 0.95, 0.96])]
    [(True, False), (True, False), (False, False), (False, True)]
    >>> rule.best_epoch, rule.best
    (1, 0.9)
    """

    patience: int
    tol: float
    best: float = math.inf
    best_epoch: int = -1
    bad: int = 0
    anchor: float = field(init=False)  # the value at the last real gain: slow steady progress still counts

    def __post_init__(self) -> None:
        self.best = float(self.best)
        self.anchor = self.best

    def update(self, epoch: int, monitored: float) -> tuple[bool, bool]:
        if monitored < self.anchor - self.tol:
            self.anchor, self.bad = monitored, 0
        else:
            self.bad += 1
        improved = monitored < self.best
        if improved:
            self.best, self.best_epoch = monitored, epoch
        return improved, self.bad >= self.patience


def snapshot(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of ``module``'s weights and buffers to restore later (a quarter of ``copy.deepcopy``'s
    time on a small network; the best weights are kept after every improving epoch).

    >>> net = torch.nn.Linear(2, 1)
    >>> saved = snapshot(net)
    >>> with torch.no_grad():
    ...     _ = net.weight.add_(1.0)
    >>> bool(torch.equal(saved["weight"] + 1.0, net.weight))
    True
    """
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


class Adam:
    """Adam, or AdamW given ``weight_decay`` > 0 (decoupled decay), with the arithmetic of
    ``torch.optim.Adam`` and ``torch.optim.AdamW`` (betas and eps at their defaults), float for
    float (``tests/test_models.py`` steps both side by side), in multi-tensor
    (``torch._foreach_*``) form.

    Why not ``torch.optim``: its constructor and ``zero_grad`` import ``torch._dynamo`` (and with
    it sympy and the inductor) the first time a process calls them, about as long as importing
    torch itself, paid by every first fit of a process (``benchmarks/bench_small_cohort.py`` times
    such a fit; CHANGELOG.md has the gain). A parameter without a gradient in a step is skipped,
    its step count unchanged, as torch does.

    >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    >>> opt = Adam([w], lr=0.1)
    >>> (w ** 2).sum().backward(); opt.step()
    >>> [round(v, 6) for v in w.tolist()]   # the first step moves each weight by lr against its gradient's sign
    [0.9, -1.9]
    """

    def __init__(self, params, lr: float, weight_decay: float = 0.0, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8):
        self.params = list(params)
        self.lr, self.weight_decay, self.betas, self.eps = float(lr), float(weight_decay), betas, float(eps)
        self.steps = [0] * len(self.params)
        self.moments: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * len(self.params)

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        groups: dict[int, list[int]] = {}  # parameters at the same step count update together
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            if self.moments[i] is None:
                self.moments[i] = (torch.zeros_like(p), torch.zeros_like(p))
            self.steps[i] += 1
            groups.setdefault(self.steps[i], []).append(i)
        beta1, beta2 = self.betas
        for step, rows in groups.items():
            params = [self.params[i] for i in rows]
            grads = [p.grad for p in params]
            first = [self.moments[i][0] for i in rows]
            second = [self.moments[i][1] for i in rows]
            if self.weight_decay > 0:
                torch._foreach_mul_(params, 1 - self.lr * self.weight_decay)
            torch._foreach_lerp_(first, grads, 1 - beta1)
            torch._foreach_mul_(second, beta2)
            torch._foreach_addcmul_(second, grads, grads, value=1 - beta2)
            step_size = self.lr / (1 - beta1 ** step)
            denom = torch._foreach_sqrt(second)
            torch._foreach_div_(denom, (1 - beta2 ** step) ** 0.5)
            torch._foreach_add_(denom, self.eps)
            torch._foreach_addcdiv_(params, first, denom, value=-step_size)


def trainable(module: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters of ``module`` that are not frozen (``requires_grad``)."""
    return [p for p in module.parameters() if p.requires_grad]


@contextmanager
def training_only(module: torch.nn.Module, part: torch.nn.Module) -> Iterator[None]:
    """Freeze every parameter of ``module`` outside ``part`` while the block runs; restore after.

    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    >>> with training_only(net, net[1]):
    ...     len(trainable(net))
    2
    >>> len(trainable(net))
    4
    """
    keep = {id(p) for p in part.parameters()}
    before = [(p, p.requires_grad) for p in module.parameters()]
    try:
        for p, _ in before:
            p.requires_grad_(id(p) in keep and p.requires_grad)
        yield
    finally:
        for p, flag in before:
            p.requires_grad_(flag)


def training_switch(module: torch.nn.Module) -> Callable[[bool], None]:
    """A function ``set(mode)`` that does what ``module.train(mode)`` does, for the training loop's
    two switches an epoch: it sets the ``training`` flag of ``module`` and of every submodule, held
    in a list made once, without ``nn.Module.train``'s recursion and ``__setattr__``: 3 us an epoch
    instead of 64 on the default CET's 15 modules, a few percent of a small fit whose epochs take a
    millisecond or two (``benchmarks/profile_small_fit.py``). Where a module overrides ``train`` it
    calls that instead.

    >>> net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    >>> set_training = training_switch(net)
    >>> set_training(False); [m.training for m in net.modules()]
    [False, False, False]
    >>> set_training(True); [m.training for m in net.modules()]
    [True, True, True]
    """
    modules = list(module.modules())
    if any(type(m).train is not torch.nn.Module.train for m in modules):
        return lambda mode: module.train(mode)
    setter = object.__setattr__  # "training" is a plain attribute: nn.Module.__setattr__ ends here for it

    def set_training(mode: bool) -> None:
        for m in modules:
            setter(m, "training", mode)
    return set_training


ETA_SECONDS = 30.0  # a budget projected to take at least this long is announced after its first epoch


def budget_eta(desc: str, first_epoch: float, max_epochs: int, now: float | None = None) -> str | None:
    """After the first epoch of a long budget, log when the budget ends at the latest (early
    stopping usually ends it sooner); returns the line, or None for a short budget.

    >>> budget_eta("CET", 2.0, 500, now=0.0)
    'CET: epoch 1 of at most 500 took 2.0 s: the budget ends within 16.7 min (by 00:16:40 UTC), sooner if early
    stopping ends it'
    """
    total = first_epoch * max_epochs
    if total < ETA_SECONDS:
        return None
    end = datetime.fromtimestamp((time.time() if now is None else now) + total, UTC)
    line = (f"{desc}: epoch 1 of at most {max_epochs} took {first_epoch:.1f} s: the budget ends within "
            f"{total / 60:.1f} min (by {end:%H:%M:%S} UTC), sooner if early stopping ends it")
    log.info("%s", line)
    return line


def train(module: torch.nn.Module, batch_loss: Callable[[torch.Tensor], torch.Tensor], n_train: int,
          cfg: TrainConfig, shuffle_generator: torch.Generator,
          val_loss: Callable[[], float] | None = None, desc: str = "train",
          on_epoch: Callable[[int, History], None] | None = None, start_best: float | None = None) -> History:
    """Minimise ``batch_loss(row_index)``; stop after ``patience`` epochs without improvement.

    ``val_loss()`` returns the monitored loss (dropout off); without it the epoch's mean
    training loss is monitored. The best weights seen are restored at the end.
    ``on_epoch(epoch, history)`` is called after each epoch with the module in eval mode.
    ``start_best``: the monitored loss of the weights the module holds now (a further stage of a
    fit); an epoch must beat it to replace them, so the stage never ends on worse weights.
    """
    if cfg.optimizer == "lbfgs":
        if val_loss is not None:
            warnings.warn(f"{desc}: optimizer='lbfgs' fits the training rows to convergence and does not stop "
                          "early: the validation data are not used", UserWarning, stacklevel=3)
        return _train_lbfgs(module, batch_loss, n_train, cfg)
    if cfg.optimizer != "adam":
        raise ValueError(f"optimizer must be 'adam' or 'lbfgs', got {cfg.optimizer!r}")
    opt = Adam(trainable(module), lr=cfg.lr, weight_decay=cfg.weight_decay)
    batch_size = cfg.batch_size or n_train
    max_epochs, patience = cfg.budget(n_train, validated=val_loss is not None)
    hist = History()
    rule = EarlyStopping(patience, cfg.tol, math.inf if start_best is None else start_best)
    best_state = snapshot(module)
    set_training = training_switch(module)
    bar = tqdm(range(max_epochs), desc=desc, disable=not cfg.verbose, leave=False)
    started = time.monotonic()
    for epoch in bar:
        set_training(True)
        perm = torch.randperm(n_train, generator=shuffle_generator)
        total = 0.0
        for start in range(0, n_train, batch_size):
            idx = perm[start:start + batch_size]
            loss = batch_loss(idx)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"{desc}: non-finite training loss at epoch {epoch}, rows "
                                         f"{start}..{start + len(idx) - 1} of the shuffled batch")
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
        hist.train_loss.append(total / n_train)
        set_training(False)
        with torch.no_grad():
            monitored = val_loss() if val_loss is not None else hist.train_loss[-1]
        hist.val_loss.append(monitored)
        if epoch == 0:
            budget_eta(desc, time.monotonic() - started, max_epochs)
        bar.set_postfix(train=f"{hist.train_loss[-1]:.4f}", val=f"{monitored:.4f}")
        if on_epoch is not None:
            on_epoch(epoch, hist)
        improved, stop = rule.update(epoch, monitored)
        if improved:  # the best weights are kept even for a gain below tol
            hist.best_epoch = epoch
            best_state = snapshot(module)
        if stop:
            hist.stopped_early = True
            break
    log.info("%s: %d epochs, best epoch %d, monitored loss %.5f", desc, len(hist.train_loss),
             hist.best_epoch + 1, rule.best)
    if (start_best is None and val_loss is not None and hist.stopped_early and hist.best_epoch < EARLY_KEEP
            and len(hist.val_loss) >= 10 * EARLY_KEEP):
        warnings.warn(f"{desc}: early stopping kept epoch {hist.best_epoch + 1} of {len(hist.val_loss)}: the weights "
                      "are close to their random start, which the validation objective preferred to every later "
                      "epoch; on a small validation split that choice can be chance (compare a few seeds)",
                      UserWarning, stacklevel=3)
    if not hist.stopped_early and max_epochs > 1:
        warnings.warn(f"{desc}: the budget of {max_epochs} epochs ended while the monitored loss was still "
                      f"improving (best at epoch {hist.best_epoch + 1}); raise max_epochs or lr",
                      ConvergenceWarning, stacklevel=3)
    module.load_state_dict(best_state)
    module.eval()
    return hist


def _train_lbfgs(module, batch_loss, n_train, cfg: TrainConfig) -> History:
    """Full-batch L-BFGS with a strong-Wolfe line search (deterministic; no dropout expected)."""
    module.train()
    opt = torch.optim.LBFGS(trainable(module), lr=1.0, max_iter=cfg.budget(n_train)[0], history_size=50,
                            tolerance_grad=1e-12, tolerance_change=1e-15, line_search_fn="strong_wolfe")
    idx = torch.arange(n_train)

    def closure():
        opt.zero_grad(set_to_none=True)
        loss = batch_loss(idx)
        loss.backward()
        return loss

    hist = History()
    for _ in range(5):  # restarts help L-BFGS settle on flat optima
        hist.train_loss.append(float(opt.step(closure).detach()))
    module.eval()
    with torch.no_grad():
        hist.train_loss.append(float(batch_loss(idx)))
    hist.best_epoch = len(hist.train_loss) - 1
    return hist
