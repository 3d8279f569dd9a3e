"""Comment inputs read by rows like a tensor, and predictions streamed chunk by chunk.

A ``CommentInputs`` (aux features and comment embeddings on disk) is never loaded whole: training
gathers one batch at a time through ``Rows`` (or ``DeviceRows``, copied once onto a CUDA device
with room for it), and ``streamed`` predicts it ``EVAL_ELEMENTS`` values at a time.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from .comments import CommentInputs

EVAL_ELEMENTS = 2**24  # rows x samples x hidden per evaluation chunk (bounds memory)
DEVICE_SHARE = 0.5  # comment inputs are copied onto a CUDA device when they take at most this share of its free memory


class Rows:
    """A ``CommentInputs`` indexed like a tensor: ``rows[idx]`` reads those rows (an index tensor
    or a slice) and returns them as a tensor on the model's device. Training gathers one batch at
    a time through it, evaluation one chunk, so the whole matrix is never in memory."""

    def __init__(self, source: CommentInputs, to_tensor):
        self.source, self.to_tensor = source, to_tensor
        self.shape = source.shape

    def __len__(self) -> int:
        return len(self.source)

    def __getitem__(self, index) -> torch.Tensor:
        if isinstance(index, torch.Tensor):
            index = index.cpu().numpy()
        return self.to_tensor(self.source.rows(index))


class DeviceRows:
    """A ``CommentInputs`` copied onto the model's device once, indexed like ``Rows``.

    The aux features are scaled as ``_x_tensor`` scales them (float64, rounded once to float32)
    and the comment embeddings keep their stored precision (float16 stays float16, half the
    memory); ``rows[idx]`` gathers on the device and casts there, so a batch costs no host work
    and no copy. The values are those ``Rows`` gives. Used for CUDA when the inputs take at most
    ``DEVICE_SHARE`` of the device's free memory (``fits``); a CPU model always streams, so its
    memory stays bounded by a batch."""

    def __init__(self, source: CommentInputs, scale, dtype: torch.dtype, device: torch.device):
        n = len(source)
        self.shape, self.dtype = source.shape, dtype
        self.aux = torch.as_tensor(scale(source.aux), dtype=dtype, device=device)
        self.sequences = torch.empty((n, source.length * source.dim), dtype=self.stored_dtype(source), device=device)
        step = max(1, EVAL_ELEMENTS // max(1, source.length * source.dim))
        for start in range(0, n, step):
            index = np.arange(start, min(n, start + step))
            block = np.asarray(source.sequences[index]).reshape(len(index), -1)
            self.sequences[start:start + len(index)] = torch.as_tensor(block).to(device)

    @staticmethod
    def stored_dtype(source: CommentInputs) -> torch.dtype:
        return (
            torch.float16 if np.dtype(getattr(source.sequences, "dtype", np.float32)) == np.float16 else torch.float32
        )

    @classmethod
    def fits(cls, source: CommentInputs, device: torch.device) -> bool:
        """Whether the inputs take at most ``DEVICE_SHARE`` of the CUDA device's free memory."""
        if device.type != "cuda":
            return False
        itemsize = 2 if cls.stored_dtype(source) == torch.float16 else 4
        need = len(source) * (source.length * source.dim * itemsize + source.aux.shape[1] * 8)
        free, _ = torch.cuda.mem_get_info(device)
        return need <= DEVICE_SHARE * free

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index) -> torch.Tensor:
        if isinstance(index, torch.Tensor):
            index = index.to(self.aux.device)
        return torch.cat([self.aux[index], self.sequences[index].to(self.dtype)], dim=1)


def joined(parts: list):
    """Chunks' predictions joined along the rows: arrays, or dicts of them (nested), key by key.

    >>> joined([{"p": np.zeros(2), "t": {0.5: np.ones(2)}}, {"p": np.ones(1), "t": {0.5: np.zeros(1)}}])
    {'p': array([0., 0., 1.]), 't': {0.5: array([1., 1., 0.])}}
    """
    if parts and isinstance(parts[0], dict):
        return {key: joined([part[key] for part in parts]) for key in parts[0]}
    return np.concatenate(parts, axis=0)


def streamed(method):
    """Let a prediction method take a ``CommentInputs``: predict it chunk by chunk of
    ``EVAL_ELEMENTS`` values and join along the rows (:func:`joined`)."""
    @functools.wraps(method)
    def wrapper(self, X, *args, **kwargs):
        if not isinstance(X, CommentInputs):
            return method(self, X, *args, **kwargs)
        self._check_fitted()
        parts = []
        for sl in X.chunks(EVAL_ELEMENTS):
            try:
                parts.append(method(self, X.rows(sl), *args, **kwargs))
            except ValueError as exc:
                raise ValueError(f"rows {sl.start}..{sl.stop - 1} of X: {exc}") from None
        return joined(parts)
    return wrapper
