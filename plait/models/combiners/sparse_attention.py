"""Sparse probability maps for TabNet's attention: sparsemax (Martins and Astudillo, 2016) and
alpha-entmax (Peters et al., 2019): like softmax, but most outputs are exactly zero.

Each is a torch.autograd.Function with its closed-form backward, vectorized over the rows.
"""

from __future__ import annotations

import torch


def _sorted_support(z: torch.Tensor, cumulative_of_sorted, threshold_of) -> torch.Tensor:
    """The threshold tau per row of the sort-based algorithms (over the last dimension)."""
    ordered, _ = torch.sort(z, dim=-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    tau_k = threshold_of(ordered, k, cumulative_of_sorted(ordered))
    support = (tau_k < ordered).sum(dim=-1, keepdim=True)  # the candidates are valid up to the support size
    return tau_k.gather(-1, support - 1)


class Sparsemax(torch.autograd.Function):
    """The Euclidean projection of each row onto the probability simplex."""

    @staticmethod
    def forward(ctx, z: torch.Tensor) -> torch.Tensor:
        z = z - z.amax(-1, keepdim=True)  # invariant to a shift; keeps the sums small
        tau = _sorted_support(z, lambda s: s.cumsum(-1), lambda s, k, cumsum: (cumsum - 1) / k)
        p = (z - tau).clamp(min=0)
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (p,) = ctx.saved_tensors
        support = (p > 0).to(grad.dtype)
        mean = (grad * support).sum(-1, keepdim=True) / support.sum(-1, keepdim=True)
        return support * (grad - mean)


class Entmax15(torch.autograd.Function):
    """alpha-entmax with alpha = 1.5, exactly (sort-based): p = [z/2 - tau]_+ squared."""

    @staticmethod
    def forward(ctx, z: torch.Tensor) -> torch.Tensor:
        z = (z - z.amax(-1, keepdim=True)) / 2

        def threshold(ordered, k, _):
            mean = ordered.cumsum(-1) / k
            mean_sq = (ordered**2).cumsum(-1) / k
            delta = ((1 - k * (mean_sq - mean**2)) / k).clamp(min=0)
            return mean - delta.sqrt()

        tau = _sorted_support(z, lambda s: s, threshold)
        p = (z - tau).clamp(min=0) ** 2
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (p,) = ctx.saved_tensors
        g = p.sqrt()  # p^(2 - alpha)
        return g * (grad - (g * grad).sum(-1, keepdim=True) / g.sum(-1, keepdim=True))


class EntmaxBisect(torch.autograd.Function):
    """alpha-entmax for any alpha in (1, 2], the threshold found by bisection (a fixed number of
    halvings, all rows at once)."""

    @staticmethod
    def forward(ctx, z: torch.Tensor, alpha: float, iterations: int = 50) -> torch.Tensor:
        z = z * (alpha - 1)
        top = z.amax(-1, keepdim=True)
        low, high = top - 1, top - (1 / z.shape[-1]) ** (alpha - 1)
        for _ in range(iterations):
            tau = (low + high) / 2
            total = ((z - tau).clamp(min=0) ** (1 / (alpha - 1))).sum(-1, keepdim=True)
            low = torch.where(total >= 1, tau, low)
            high = torch.where(total >= 1, high, tau)
        p = (z - (low + high) / 2).clamp(min=0) ** (1 / (alpha - 1))
        p = p / p.sum(-1, keepdim=True)
        ctx.alpha = alpha
        ctx.save_for_backward(p)
        return p

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (p,) = ctx.saved_tensors
        g = torch.where(p > 0, p ** (2 - ctx.alpha), torch.zeros_like(p))
        return g * (grad - (g * grad).sum(-1, keepdim=True) / g.sum(-1, keepdim=True)), None, None


def sparse_normalizer(mode: str, alpha: float):
    """The function each TabNet attention step applies to its logits."""
    if mode == "sparsemax":
        return Sparsemax.apply
    if mode == "entmax15":
        return Entmax15.apply
    if alpha == 1:
        return lambda z: torch.softmax(z, dim=-1)
    if alpha == 2:
        return Sparsemax.apply
    return lambda z: EntmaxBisect.apply(z, alpha)
