"""The segmentation head: it learns a mask with the unet encoder, its loss is torch's mean over
pixels, its metrics add up across batches, and a combiner it cannot read is refused."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from plait.config.decoders import FocalLoss, SoftmaxCrossEntropyLoss
from plait.config.image_encoders import UNetDecoder
from plait.errors import ModelError
from plait.models.image_encoders import UNetDown
from plait.models.image_heads import SegmentationHead
from plait.evaluation.metrics import metrics_for

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BASE = 4
"""Filters of the first U-Net stage in these tests (Ludwig's 64 would take minutes on a CPU)."""
SIZE = 32


def mask_feature(loss=None) -> SimpleNamespace:
    return SimpleNamespace(name="mask", type="image", decoder=UNetDecoder(),
                           loss=loss or SoftmaxCrossEntropyLoss())


def head_for(feature, classes: int = 2, size: int = SIZE, width: int | None = None) -> SegmentationHead:
    width = BASE * 16 * (size // 16) ** 2 if width is None else width
    return SegmentationHead(feature, {"height": size, "width": size, "num_classes": classes}, (width,),
                            base_channels=BASE)


def squares(rows: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Grey images of a bright square of random size and place on a dark, noisy background; the
    mask marks the square."""
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(rows, 1, SIZE, SIZE, generator=g) * 0.3
    masks = torch.zeros(rows, SIZE, SIZE, dtype=torch.long)
    for row in range(rows):
        side = int(torch.randint(8, 17, (1,), generator=g))
        top, left = (int(v) for v in torch.randint(0, SIZE - side, (2,), generator=g))
        masks[row, top:top + side, left:left + side] = 1
    return images + 0.7 * masks.unsqueeze(1), masks


def test_the_head_and_the_unet_encoder_learn_a_mask():
    torch.manual_seed(0)
    encoder, head = UNetDown(1, SIZE, SIZE, "batch", base_channels=BASE), head_for(mask_feature())
    images, masks = squares(16)
    optimizer = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=0.02)
    for _ in range(40):
        hidden, skips = encoder(images)
        loss = head.loss(head(hidden, encoder_state=skips), masks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    encoder.eval(), head.eval()
    metrics = metrics_for(head)
    stats = metrics.zeros()
    with torch.no_grad():
        hidden, skips = encoder(images)
        logits = head(hidden, encoder_state=skips)
        metrics.update(stats, logits, masks)
    assert metrics.compute(stats)["iou"] > 0.8
    predicted = head.predict(logits)
    assert predicted["prediction"].shape == (16, SIZE, SIZE) and predicted["prediction"].dtype == torch.uint8
    assert predicted["probability"].min() >= 0.5  # the chosen class of two is the likelier


def test_the_loss_is_torchs_mean_over_every_pixel_with_class_weights_too():
    logits, target = torch.randn(3, 3, 16, 16), torch.randint(0, 3, (3, 16, 16))
    head = head_for(mask_feature(), classes=3, size=16)
    assert torch.allclose(head.loss(logits, target), F.cross_entropy(logits, target))
    weights = [0.5, 2.0, 1.0]
    weighted = head_for(mask_feature(SoftmaxCrossEntropyLoss(class_weights=weights)), classes=3, size=16)
    expected = F.cross_entropy(logits, target, weight=torch.tensor(weights))
    assert torch.allclose(weighted.loss(logits, target), expected)
    focal = head_for(mask_feature(FocalLoss(gamma=0.0)), classes=3, size=16)
    assert torch.allclose(focal.loss(logits, target), F.cross_entropy(logits, target))  # gamma 0: cross-entropy


def test_metrics_summed_over_two_batches_are_those_of_the_whole():
    head = head_for(mask_feature(), classes=3, size=16)
    metrics = metrics_for(head)
    logits, target = torch.randn(6, 3, 16, 16), torch.randint(0, 2, (6, 16, 16))  # class 2 never true
    whole, parts = metrics.zeros(), metrics.zeros()
    metrics.update(whole, logits, target)
    metrics.update(parts, logits[:2], target[:2])
    metrics.update(parts, logits[2:], target[2:])
    assert torch.equal(whole, parts)
    result, pred = metrics.compute(parts), logits.argmax(1)
    assert result["accuracy"] == pytest.approx((pred == target).double().mean().item())
    ious = [((pred == c) & (target == c)).sum().item() / ((pred == c) | (target == c)).sum().item() for c in range(3)]
    assert result["iou"] == pytest.approx(sum(ious) / 3)
    assert result["loss"] == pytest.approx(F.cross_entropy(logits, target).item())


def test_a_class_in_neither_predictions_nor_targets_is_left_out_of_iou():
    head = head_for(mask_feature(), classes=3, size=16)
    metrics = metrics_for(head)
    stats = metrics.zeros()
    target = torch.zeros(1, 16, 16, dtype=torch.long)
    target[0, :8] = 1
    logits = F.one_hot(target, 3).permute(0, 3, 1, 2).float() * 10  # right everywhere; class 2 nowhere
    metrics.update(stats, logits, target)
    assert metrics.compute(stats)["iou"] == 1.0


def test_a_combiner_output_of_another_width_is_refused_with_the_fix():
    with pytest.raises(ModelError, match="unet encoder and the concat combiner without fc_layers"):
        head_for(mask_feature(), width=128)


def test_the_head_needs_the_encoders_skips_and_two_classes():
    head = head_for(mask_feature())
    with pytest.raises(ModelError, match="needs the 4 skip connections of a unet encoder and got none"):
        head(torch.zeros(2, head.input_size))
    assert head(torch.zeros(0, head.input_size)).shape == (0, 2, SIZE, SIZE)  # no rows: nothing to run
    with pytest.raises(ModelError, match="at least 2 classes"):
        head_for(mask_feature(), classes=1)


def test_the_last_convolution_takes_the_decoders_initializers():
    feature = mask_feature()
    feature.decoder = UNetDecoder(weights_initializer="zeros", bias_initializer="ones")
    classify = head_for(feature).up.classify
    assert classify.weight.abs().sum() == 0 and torch.equal(classify.bias, torch.ones(2))
    assert head_for(mask_feature()).up.classify.weight.abs().sum() > 0  # unset: torch's default, as Ludwig
