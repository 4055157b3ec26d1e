"""The head of image outputs: a segmentation mask, one class per pixel, by the U-Net decoder.

The head reads the unet encoder's bottleneck (the combiner's output, passed through unchanged)
and its skip connections (``encoder_state``), and gives logits [batch, classes, height, width].
A row's loss is the mean of its pixels' cross-entropies (with class weights, their weighted sum
over the pixel count, and the row's weight the same sum of weights), so the batch's loss is
torch's mean over every pixel of the batch and the metrics' sums over rows add up across shards.
"""

from __future__ import annotations

import torch
from torch import nn

from plait.errors import ModelError
from plait.models.image_encoders import UNET_BASE_CHANNELS, DoubleConv, check_unet_size
from plait.models.layers import initialize
from plait.models.outputs import OutputHead, RowLosses, _class_weights, confidence_penalty, robust


class UNetUp(nn.Module):
    """The expanding path of U-Net: per stage a 2x2 transposed convolution that doubles the height
    and width and halves the channels, the matching skip connection concatenated, and two 3x3
    convolutions; then a 1x1 convolution to the classes."""

    def __init__(self, bottleneck_channels: int, stages: int, classes: int, decoder):
        super().__init__()
        norm = decoder.conv_norm
        self.up, self.convs = nn.ModuleList(), nn.ModuleList()
        channels = bottleneck_channels
        for _ in range(stages):
            self.up.append(nn.ConvTranspose2d(channels, channels // 2, 2, stride=2))
            self.convs.append(DoubleConv(channels, channels // 2, norm))
            channels //= 2
        self.classify = nn.Conv2d(channels, classes, 1, bias=decoder.use_bias)
        initialize(self.classify.weight, decoder.weights_initializer)
        if decoder.use_bias:
            initialize(self.classify.bias, decoder.bias_initializer)

    def forward(self, x: torch.Tensor, skips: list[torch.Tensor]) -> torch.Tensor:
        for up, conv, skip in zip(self.up, self.convs, reversed(skips)):
            x = conv(torch.cat([up(x), skip], dim=1))
        return self.classify(x)


class SegmentationHead(OutputHead):
    """Image output with the unet decoder. Its hidden state (what outputs depending on it read)
    is the combiner's output."""

    reads_encoder_state = True
    """The model passes this head its input's encoder state (the unet encoder's skips)."""

    def __init__(self, feature, metadata: dict, input_shape, dependency_size: int = 0,
                 base_channels: int = UNET_BASE_CHANNELS):
        nn.Module.__init__(self)
        self.feature, self.metadata = feature, metadata
        path = f"output_features.{feature.name}"
        height, width, classes = metadata["height"], metadata["width"], metadata["num_classes"]
        _check_classes_and_loss(feature, classes, path)
        self.logits_size, self.mask_size = classes, (height, width)
        self.stages = feature.decoder.num_stages
        check_unet_size(height, width, self.stages, f"{path}.decoder (unet)")
        bottleneck = base_channels << self.stages
        self.bottleneck_shape = (bottleneck, height >> self.stages, width >> self.stages)
        self.input_size = bottleneck * self.bottleneck_shape[1] * self.bottleneck_shape[2]
        self._check_combined(input_shape, dependency_size, path)
        self.up = UNetUp(bottleneck, self.stages, classes, feature.decoder)
        self.register_buffer("class_weights", _class_weights(feature, [str(c) for c in range(classes)]),
                             persistent=False)

    def _check_combined(self, input_shape, dependency_size: int, path: str) -> None:
        """The combiner's output must be the unet encoder's bottleneck, unchanged."""
        shape = (input_shape,) if isinstance(input_shape, int) else tuple(input_shape)
        if shape == (self.input_size,) and not dependency_size:
            return
        height, width = self.mask_size
        raise ModelError(
            f"{path}: the unet decoder reshapes the combiner's output into a {height}x{width} unet encoder's "
            f"feature map {list(self.bottleneck_shape)} ({self.input_size} values), but the combiner gives "
            f"{list(shape)}" + (" and the output depends on other outputs" if dependency_size else "") +
            "; use one image input with the unet encoder and the concat combiner without fc_layers "
            "(num_fc_layers: 0), as Ludwig requires, and no dependencies")

    @property
    def hidden_size(self) -> int:
        return self.input_size

    def forward(self, combined: torch.Tensor, dependencies: list[torch.Tensor] = (), return_hidden: bool = False,
                encoder_state: list[torch.Tensor] | None = None):
        """Logits [batch, classes, height, width]; with ``return_hidden``, (combined, logits)."""
        if encoder_state is None and combined.shape[0] == 0:  # no rows: nothing to up-sample
            logits = combined.new_zeros(0, self.logits_size, *self.mask_size)
        else:
            self._check_skips(encoder_state)
            logits = self.up(combined.reshape(-1, *self.bottleneck_shape), encoder_state)
        return (combined, logits) if return_hidden else logits

    def _check_skips(self, skips) -> None:
        if skips is None or len(skips) != self.stages:
            given = "none" if skips is None else f"{len(skips)}"
            raise ModelError(f"output_features.{self.feature.name}: the unet decoder needs the {self.stages} skip "
                             f"connections of a unet encoder and got {given}; use one image input with the unet "
                             f"encoder")

    def row_losses(self, logits: torch.Tensor, target: torch.Tensor) -> RowLosses:
        loss, logits, target = self.feature.loss, logits.float(), target.long()
        log_p = torch.log_softmax(logits, dim=1)
        true_log_p = log_p.gather(1, target.unsqueeze(1)).squeeze(1)  # [batch, height, width]
        if loss.type == "focal":
            losses = -true_log_p * (1 - true_log_p.exp()) ** loss.gamma
        else:
            losses = robust(-true_log_p, getattr(loss, "robust_lambda", 0.0), self.logits_size)
            if getattr(loss, "confidence_penalty", 0.0):
                losses = losses + loss.confidence_penalty * confidence_penalty(log_p.exp().movedim(1, -1))
        pixels = losses.shape[1] * losses.shape[2]
        if self.class_weights is None:
            return RowLosses(losses.flatten(1).mean(1))
        weights = self.class_weights[target]
        return RowLosses((weights * losses).flatten(1).sum(1) / pixels, weights.flatten(1).sum(1) / pixels)

    def predict(self, logits: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per pixel, the likeliest class (uint8 up to 256 classes, as Ludwig) and its probability."""
        probability, prediction = torch.softmax(logits.float(), dim=1).max(dim=1)
        if self.logits_size <= 256:
            prediction = prediction.to(torch.uint8)
        return {"prediction": prediction, "probability": probability}


def _check_classes_and_loss(feature, classes: int, path: str) -> None:
    if classes < 2:
        raise ModelError(f"{path}: a mask of {classes} class cannot be learned; an image output needs at least "
                         f"2 classes (preprocessing.num_classes)")
    if getattr(feature.loss, "class_similarities_temperature", 0) > 0:
        raise ModelError(f"{path}.loss: class similarities are not implemented for image outputs; set "
                         f"class_similarities_temperature to 0")
