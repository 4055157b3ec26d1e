"""Image augmentation on a batch: every operation draws its own random amount for every image, so
a batch holds differently changed images, as a per-image data pipeline would give, but in a few
tensor operations on whatever device the model runs (the training workers' GPUs, say).

Images are float [batch, channels, height, width] with values in [0, 1].
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

BLUR_SIGMA = (0.1, 2.0)
"""The range a blur's spread (in pixels) is drawn from."""


def _chosen(x: torch.Tensor, share: float = 0.5) -> torch.Tensor:
    """A [batch, 1, 1, 1] mask choosing about ``share`` of the images."""
    return (torch.rand(x.shape[0], 1, 1, 1, device=x.device) < share)


def _uniform(x: torch.Tensor, low: float, high: float) -> torch.Tensor:
    """A [batch, 1, 1, 1] factor per image drawn evenly from [low, high]."""
    return torch.empty(x.shape[0], 1, 1, 1, device=x.device).uniform_(low, high)


def horizontal_flip(x: torch.Tensor, _op) -> torch.Tensor:
    return torch.where(_chosen(x), x.flip(-1), x)


def vertical_flip(x: torch.Tensor, _op) -> torch.Tensor:
    return torch.where(_chosen(x), x.flip(-2), x)


def rotate(x: torch.Tensor, op) -> torch.Tensor:
    """Each image turned about its centre by an angle from [-degree, degree]; the corners that come
    from outside the image are black."""
    rows, height, width = x.shape[0], x.shape[-2], x.shape[-1]
    angle = torch.empty(rows, device=x.device).uniform_(-op.degree, op.degree) * (math.pi / 180)
    cos, sin = torch.cos(angle), torch.sin(angle)
    # affine_grid works in coordinates normalized to [-1, 1] on each axis; scaling by the aspect
    # ratio keeps a rotation of a non-square image a rotation (not a shear).
    theta = torch.stack([torch.stack([cos, -sin * height / width, torch.zeros_like(cos)], 1),
                         torch.stack([sin * width / height, cos, torch.zeros_like(cos)], 1)], 1)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def blur(x: torch.Tensor, op) -> torch.Tensor:
    """A Gaussian blur of each image with its own spread: a separable convolution, one kernel per
    image and channel (grouped)."""
    rows, channels, height, width = x.shape
    size, half = op.kernel_size, op.kernel_size // 2
    sigma = torch.empty(rows, device=x.device).uniform_(*BLUR_SIGMA)
    offsets = torch.arange(size, device=x.device, dtype=x.dtype) - half
    kernel = torch.exp(-(offsets[None, :] ** 2) / (2 * sigma[:, None] ** 2))
    kernel = (kernel / kernel.sum(1, keepdim=True)).repeat_interleave(channels, 0)  # [rows * channels, size]
    flat = x.reshape(1, rows * channels, height, width)
    pad = (half, half, half, half)
    # Reflection needs the padding narrower than the image; a tiny image repeats its edge instead.
    mode = "reflect" if half < min(height, width) else "replicate"
    flat = F.pad(flat, pad, mode=mode)
    flat = F.conv2d(flat, kernel[:, None, :, None], groups=rows * channels)
    flat = F.conv2d(flat, kernel[:, None, None, :], groups=rows * channels)
    return flat.reshape(rows, channels, height, width)


def brightness(x: torch.Tensor, op) -> torch.Tensor:
    return (x * _uniform(x, op.min, op.max)).clamp(0, 1)


def contrast(x: torch.Tensor, op) -> torch.Tensor:
    """Each image's distance from its mean grey level scaled (the grey of RGB is its luminance)."""
    grey = x if x.shape[1] < 3 else (0.299 * x[:, 0] + 0.587 * x[:, 1] + 0.114 * x[:, 2]).unsqueeze(1)
    mean = grey[:, :1].mean(dim=(1, 2, 3), keepdim=True)
    return ((x - mean) * _uniform(x, op.min, op.max) + mean).clamp(0, 1)


OPERATIONS = {"random_horizontal_flip": horizontal_flip, "random_vertical_flip": vertical_flip,
              "random_rotate": rotate, "random_blur": blur, "random_brightness": brightness,
              "random_contrast": contrast}


class Augmentation(nn.Module):
    """The operations of a feature's ``augmentation`` list, in order (training only: the caller
    applies it in training mode)."""

    def __init__(self, operations: list):
        super().__init__()
        self.operations = list(operations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for op in self.operations:
            x = OPERATIONS[op.type](x, op)
        return x
