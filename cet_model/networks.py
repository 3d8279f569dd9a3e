"""Neural network modules. They return distribution parameters, never losses."""

from __future__ import annotations

import torch
from torch import nn

from .fused import conditional_hidden

_MASK_CHUNK = 1 << 16  # float64 uniforms drawn at a time: temporaries of at most 512 KiB (a 400 x 750
#                         mask drawn whole needs 2.4 MB; docs/model.md, "Dropout masks")


def keep_mask(shape: tuple[int, ...], keep: float, like: torch.Tensor) -> torch.Tensor:
    """0/1 draws with P(1) = ``keep``, of ``shape`` and ``like``'s dtype and device, from the
    default generator.

    On CPU these are the very draws ``torch.empty(shape).bernoulli_(keep)`` makes (it compares one
    float64 uniform per element with ``keep``, for float32 tensors too) and the generator ends in the
    same state, in a fraction of the time (``bernoulli_`` draws one element at a time;
    ``benchmarks/bench_dropout_mask.py``, docs/model.md "Dropout masks"). The uniforms are drawn
    ``_MASK_CHUNK`` at a time, in order. ``tests/test_networks_dropout.py`` pins the equality, so
    a torch whose ``bernoulli_`` draws otherwise fails there. Other devices call ``bernoulli_``.

    >>> _ = torch.manual_seed(0)
    >>> a = torch.empty(3, 4).bernoulli_(0.5)
    >>> _ = torch.manual_seed(0)
    >>> torch.equal(a, keep_mask((3, 4), 0.5, torch.empty(0)))
    True
    """
    if like.device.type != "cpu":
        return torch.empty(shape, dtype=like.dtype, device=like.device).bernoulli_(keep)
    out = torch.empty(shape, dtype=like.dtype)
    flat = out.view(-1)
    for start in range(0, flat.numel(), _MASK_CHUNK):  # in order: the generator's stream is sequential
        part = flat[start:start + _MASK_CHUNK]
        part.copy_(torch.rand(part.numel(), dtype=torch.float64).lt_(keep))
    return out


class Dropout(nn.Dropout):
    """``nn.Dropout`` with its CPU mask drawn by :func:`keep_mask`: the same outputs and
    gradients as ``nn.Dropout`` from the same generator state (which on CPU multiplies by
    ``bernoulli_(1 - p) / (1 - p)``), faster. Other devices run ``nn.Dropout`` itself."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or x.device.type != "cpu" or self.inplace:
            return super().forward(x)
        return x * keep_mask(x.shape, 1.0 - self.p, x).div_(1.0 - self.p)


class RowDropout(nn.Module):
    """Dropout whose mask is drawn once per row and shared by that row's K occurrence samples.

    On (n, K, H) activations the mask has shape (n, 1, H): K times fewer random draws than
    elementwise dropout (which dominated the step time), and the K samples of one row are
    compared under the same thinned network, so dropout adds no noise *between* samples.
    On (n, H) it is ordinary dropout.
    """

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return h
        shape = (h.shape[0], 1, h.shape[-1]) if h.dim() == 3 else h.shape
        return h * self.mask(shape, h)

    def mask(self, shape, like: torch.Tensor) -> torch.Tensor | None:
        """A scaled keep-mask, or None when dropout is off."""
        if not self.training or self.p == 0.0:
            return None
        return keep_mask(shape, 1.0 - self.p, like).div_(1.0 - self.p)


def _mlp_tail(sizes: tuple[int, ...], dropout: float) -> nn.Sequential:
    """ReLU + dropout after the first layer, then the remaining hidden layers."""
    layers: list[nn.Module] = [nn.ReLU(), RowDropout(dropout)]
    for a, b in zip(sizes[:-1], sizes[1:], strict=False):
        layers += [nn.Linear(a, b), nn.ReLU(), RowDropout(dropout)]
    return nn.Sequential(*layers)


class OccurrenceEncoder(nn.Module):
    """h(x): MLP (ReLU, dropout) -> M occurrence logits. ``hidden_sizes=()`` is logistic regression.

    ``net[-1]`` is always the logits layer. ``input_dropout`` above 0 drops inputs with that rate
    before the first layer while training (``Recipe.input_dropout``).

    Shape: x (n, d) -> logits (n, M).

    >>> OccurrenceEncoder(3, 2, (4,), 0.0)(torch.zeros(5, 3)).shape
    torch.Size([5, 2])
    """

    def __init__(self, n_features: int, n_events: int, hidden_sizes: tuple[int, ...], dropout: float,
                 input_dropout: float = 0.0):
        super().__init__()
        # dropout on the inputs (the features the encoder reads), only when asked: the default
        # network has exactly the modules it had before the option
        self.input_dropout = Dropout(input_dropout) if input_dropout > 0 else None
        layers: list[nn.Module] = []
        sizes = (n_features, *hidden_sizes)
        for a, b in zip(sizes[:-1], sizes[1:], strict=False):
            layers += [nn.Linear(a, b), nn.ReLU(), Dropout(dropout)]
        layers.append(nn.Linear(sizes[-1], n_events))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.input_dropout is not None:
            x = self.input_dropout(x)  # (n, d); the time decoder reads x undropped
        return self.net(x)  # (n, M)


class TimeDecoder(nn.Module):
    """Log-normal AFT head: (x, c) -> (mu, log sigma) per event.

    The first layer is split as x @ W + c @ V: x @ W is computed once per row and broadcast
    over the K occurrence samples, so x is never tiled over samples. With ``use_c=False`` this
    is the ET baseline's head (same layers, no c input).

    Shape: x (n, d), c (n, K, M) -> mu, log_sigma (n, K, M); without c -> (n, M).
    """

    def __init__(self, n_features: int, n_events: int, hidden_sizes: tuple[int, ...], dropout: float,
                 sigma: str = "net", use_c: bool = True):
        super().__init__()
        if sigma not in ("net", "constant"):  # "auto" is resolved by the model before the network is built
            raise ValueError(f"TimeDecoder: sigma must be 'net' or 'constant', got {sigma!r}")
        self.n_events = n_events
        self.sigma = sigma
        n_out = 2 * n_events if sigma == "net" else n_events
        first = hidden_sizes[0] if hidden_sizes else n_out
        self.x_proj = nn.Linear(n_features, first)
        self.c_proj = nn.Linear(n_events, first, bias=False) if use_c else None
        if hidden_sizes:
            self.tail = _mlp_tail(tuple(hidden_sizes), dropout)
            self.head = nn.Linear(hidden_sizes[-1], n_out)
        else:
            self.tail = None
            self.head = None
        if sigma == "constant":
            self.log_sigma = nn.Parameter(torch.zeros(n_events))

    def forward(self, x: torch.Tensor, c: torch.Tensor | None = None):
        h = self.x_proj(x)  # (n, H): once per row
        if c is not None and self.tail is not None and len(self.tail) == 2:
            # one hidden layer: the fused, cache-blocked path (never materialises (n, K, H))
            mask = self.tail[1].mask((x.shape[0], 1, h.shape[-1]), h)
            h = conditional_hidden(h, c, self.c_proj.weight.T, mask, self.head.weight.T, self.head.bias)
        else:
            if c is not None:
                h = h.unsqueeze(1) + self.c_proj(c)  # (n, 1, H) + (n, K, H)
            if self.tail is not None:
                h = self.head(self.tail(h))
        m = self.n_events
        mu = h[..., :m]
        if self.sigma == "net":
            log_sigma = h[..., m:]
        else:
            log_sigma = self.log_sigma.expand_as(mu)
        return mu, log_sigma

    def output_bias(self) -> torch.Tensor:
        """The bias that sets the initial mu (first M entries) and log sigma."""
        return (self.head if self.head is not None else self.x_proj).bias


def _features(n_features: int, comment_encoder: dict | None) -> tuple[nn.Module, int]:
    """The input module (identity, or the comment encoder) and the width it outputs."""
    if comment_encoder is None:
        return nn.Identity(), n_features
    enc = CommentEncoder(**comment_encoder)
    return enc, enc.out_features


class CETNetwork(nn.Module):
    """Occurrence encoder plus time decoder (both read ``features(x)``); the decoder also reads
    the occurrence pattern c with ``condition_on_occurrence=True``."""

    def __init__(self, n_features, n_events, hidden_sizes, dropout, sigma, comment_encoder=None,
                 condition_on_occurrence=True, input_dropout=0.0):
        super().__init__()
        self.features, d = _features(n_features, comment_encoder)
        self.encoder = OccurrenceEncoder(d, n_events, hidden_sizes, dropout, input_dropout=input_dropout)
        self.decoder = TimeDecoder(d, n_events, hidden_sizes, dropout, sigma, use_c=condition_on_occurrence)


class ETNetwork(nn.Module):
    """The ET baseline: the same AFT head on x alone."""

    def __init__(self, n_features, n_events, hidden_sizes, dropout, sigma, comment_encoder=None):
        super().__init__()
        self.features, d = _features(n_features, comment_encoder)
        self.decoder = TimeDecoder(d, n_events, hidden_sizes, dropout, sigma, use_c=False)


class BCNetwork(nn.Module):
    """The BC baseline: the same encoder, trained as a classifier of s."""

    def __init__(self, n_features, n_events, hidden_sizes, dropout, sigma=None, comment_encoder=None,
                 input_dropout=0.0):
        super().__init__()
        self.features, d = _features(n_features, comment_encoder)
        self.encoder = OccurrenceEncoder(d, n_events, hidden_sizes, dropout, input_dropout=input_dropout)


class CommentEncoder(nn.Module):
    """x = [aux | L x D] -> [max_l tanh(W e_l + b) | mean_l tanh(W e_l + b) | aux], width 2H + a."""

    def __init__(self, n_aux: int, length: int, dim: int, width: int):
        super().__init__()
        self.n_aux, self.length, self.dim = n_aux, length, dim
        self.proj = nn.Linear(dim, width)
        self.out_features = 2 * width + n_aux

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        aux = x[:, :self.n_aux]
        seq = x[:, self.n_aux:].reshape(x.shape[0], self.length, self.dim)
        h = torch.tanh(self.proj(seq))  # (n, L, H)
        return torch.cat([h.amax(dim=1), h.mean(dim=1), aux], dim=1)
