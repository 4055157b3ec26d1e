"""An image input: the stored uint8 pixels scaled to [0, 1], augmented while training,
standardized (``standardize_image``), then encoded by the feature's encoder body.

Keeping this in the model, not the data loader, means the batches move as bytes (four times
smaller than floats) and the arithmetic runs where the model runs: on the training workers, on
their GPUs where they have them.
"""

from __future__ import annotations

import torch
from torch import nn

from plait.models.augmentation import Augmentation

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
"""ImageNet's per-channel mean and standard deviation of [0, 1] RGB pixels (``imagenet1k``)."""


class ImageInput(nn.Module):
    def __init__(self, body: nn.Module, augmentation: list, metadata: dict):
        super().__init__()
        self.body = body
        self.augmentation = Augmentation(augmentation) if augmentation else None
        self.output_size = body.output_size
        self.output_shape = getattr(body, "output_shape", (body.output_size,))
        self.returns_state = getattr(body, "returns_state", False)
        self.standardized = metadata.get("standardize_image") == "imagenet1k"
        # Not persistent: constants, not weights, so saved models carry only what was learned.
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).reshape(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).reshape(1, 3, 1, 1), persistent=False)

    def forward(self, pixels: torch.Tensor):
        x = pixels.float() / 255.0
        if self.training and self.augmentation is not None:
            x = self.augmentation(x)
        if self.standardized:
            x = (x - self.mean) / self.std
        return self.body(x)


def image_input(feature, metadata: dict, build, load_pretrained: bool) -> ImageInput:
    """The input module of an image feature: its encoder body (made by ``build``) inside the
    pixel scaling, augmentation and standardization."""
    if hasattr(feature.encoder, "use_pretrained"):  # torchvision's: weights read from a file, once
        body = build(feature.encoder, metadata, load_pretrained=load_pretrained)
    else:
        body = build(feature.encoder, metadata)
    return ImageInput(body, feature.augmentation, metadata)
