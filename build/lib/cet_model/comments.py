"""The Reddit comment encoder: a per-comment linear layer with tanh, then max and mean pooling
over the comments, concatenated with the aux features.

Models see one flat feature matrix: ``[aux | comment embeddings flattened]`` of width
``n_aux + L * D`` (``flatten_inputs``), so batching, chunking, validation and persistence
are the same as for tabular data; the first module of the network (``CommentEncoder``)
splits it back. Pass ``comment_encoder={"n_aux": a, "length": L, "dim": D, "width": H}`` to
CETModel, ETModel or BCModel.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

SPEC_KEYS = ("n_aux", "length", "dim", "width")


def check_spec(spec: dict | None, n_features: int | None = None) -> dict | None:
    """Validate a ``comment_encoder`` dict (keys ``SPEC_KEYS``, positive sizes; its width must
    match ``n_features`` when given); returns it with int values, or None."""
    if spec is None:
        return None
    if not isinstance(spec, dict) or sorted(spec) != sorted(SPEC_KEYS):
        raise ValueError(f"comment_encoder must be a dict with keys {SPEC_KEYS}, got {spec!r}")
    spec = {k: int(spec[k]) for k in SPEC_KEYS}
    if spec["n_aux"] < 0 or min(spec["length"], spec["dim"], spec["width"]) < 1:
        raise ValueError(f"comment_encoder sizes must be positive, got {spec}")
    width = spec["n_aux"] + spec["length"] * spec["dim"]
    if n_features is not None and n_features != width:
        raise ValueError(f"X has {n_features} columns but comment_encoder expects n_aux + length * dim = {width}")
    return spec


def flatten_inputs(aux: np.ndarray, sequences: np.ndarray) -> np.ndarray:
    """(n, a) aux features and (n, L, D) comment embeddings -> (n, a + L * D) float32."""
    aux = np.asarray(aux, dtype=np.float32)
    seq = np.asarray(sequences, dtype=np.float32)
    if seq.ndim != 3 or seq.shape[0] != aux.shape[0]:
        raise ValueError(f"sequences must be (n, L, D) with n = {aux.shape[0]}, got {seq.shape}")
    return np.concatenate([aux, seq.reshape(len(seq), -1)], axis=1)


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
