"""A cache-blocked decoder layer for the one-hidden-layer case (the paper's architecture).

y = (relu(a + c @ V) * mask) @ A + b, with a = x @ W + b0 computed once per row.

The (n, K, H) hidden activations are never stored: forward and backward walk over row
blocks small enough to stay in cache and recompute the block in backward. On CPU the
unfused version is bound by memory traffic over that tensor (a dozen full passes per
step); here each block is touched while it is hot.
"""

from __future__ import annotations

import torch

_BLOCK_ELEMENTS = 1 << 18  # ~1 MiB of float32 hidden activations per block


def _blocks(n: int, per_row: int):
    step = max(1, _BLOCK_ELEMENTS // max(1, per_row))
    return [slice(i, min(n, i + step)) for i in range(0, n, step)]


class _ConditionalHidden(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, c, V, mask, A, b):
        n, k, _ = c.shape
        out = torch.empty((n, k, A.shape[1]), dtype=a.dtype, device=a.device)
        for sl in _blocks(n, k * V.shape[1]):
            h = torch.relu(torch.matmul(c[sl], V).add_(a[sl].unsqueeze(1)))
            if mask is not None:
                h.mul_(mask[sl])
            torch.matmul(h, A, out=out[sl])
        out.add_(b)
        ctx.save_for_backward(a, c, V, mask, A)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        a, c, V, mask, A = ctx.saved_tensors
        n, k, _ = c.shape
        need_gc = ctx.needs_input_grad[1]  # c is a relaxed sample (Gumbel, ARM), not enumerated patterns
        ga, gc = torch.empty_like(a), torch.empty_like(c) if need_gc else None
        gV, gA = torch.zeros_like(V), torch.zeros_like(A)
        for sl in _blocks(n, k * V.shape[1]):
            pre = torch.matmul(c[sl], V).add_(a[sl].unsqueeze(1))  # (r, K, H)
            h = torch.relu(pre)
            if mask is not None:
                h.mul_(mask[sl])
            go = grad_out[sl]  # (r, K, O)
            gA += h.flatten(0, 1).T @ go.flatten(0, 1)
            gh = torch.matmul(go, A.T)
            if mask is not None:
                gh.mul_(mask[sl])
            gh = torch.ops.aten.threshold_backward(gh, pre, 0)
            ga[sl] = gh.sum(1)
            if need_gc:
                gc[sl] = torch.matmul(gh, V.T)
            gV += c[sl].flatten(0, 1).T @ gh.flatten(0, 1)
        gb = grad_out.sum((0, 1))
        return ga, gc, gV, None, gA, gb


def conditional_hidden(a, c, V, mask, A, b):
    """Fused relu(a + c V) * mask -> linear. Shapes: a (n, H), c (n, K, M), V (M, H),
    mask (n, 1, H) or None, A (H, O), b (O,) -> (n, K, O)."""
    return _ConditionalHidden.apply(a, c, V, mask, A, b)
