"""Image augmentation: each operation changes each image of a batch by its own random amount,
keeps shapes and the [0, 1] range, and runs only in training."""

from __future__ import annotations

import pytest
import torch

from plait.config import load_config
from plait.models.augmentation import Augmentation
from plait.models.image_input import ImageInput

OPERATIONS = [{"type": "random_horizontal_flip"}, {"type": "random_vertical_flip"}, {"type": "random_rotate", "degree": 30},
              {"type": "random_blur", "kernel_size": 5}, {"type": "random_brightness"}, {"type": "random_contrast"}]


def operations(*ops: dict) -> list:
    config = load_config({"input_features": [{"name": "i", "type": "image", "augmentation": list(ops)}],
                          "output_features": [{"name": "y", "type": "binary"}]})
    return config.input_features[0].augmentation


@pytest.mark.parametrize("op", OPERATIONS, ids=[op["type"] for op in OPERATIONS])
def test_each_operation_keeps_the_shape_and_range_and_varies_by_image(op):
    torch.manual_seed(0)
    one = torch.rand(1, 3, 12, 10)
    batch = one.repeat(64, 1, 1, 1)  # the same image 64 times
    out = Augmentation(operations(op))(batch)
    assert out.shape == batch.shape and out.min() >= 0 and out.max() <= 1
    distinct = {tuple(row.flatten().round(decimals=4).tolist()) for row in out}
    assert len(distinct) > 1, "every image got the same change"


def test_a_flip_mirrors_and_a_rotation_by_zero_changes_nothing():
    image = torch.arange(12.0).reshape(1, 1, 3, 4) / 12
    flipped = Augmentation(operations({"type": "random_horizontal_flip"}))(image.repeat(32, 1, 1, 1))
    assert all(torch.equal(row, image[0]) or torch.equal(row, image[0].flip(-1)) for row in flipped)
    still = Augmentation(operations({"type": "random_rotate", "degree": 0}))(image)
    torch.testing.assert_close(still, image, atol=1e-6, rtol=0)


def test_augmentation_runs_in_training_only():
    class Identity(torch.nn.Module):
        output_size = 1

        def forward(self, x):
            return x

    module = ImageInput(Identity(), operations({"type": "random_brightness", "min": 0.1, "max": 0.2}), {})
    pixels = torch.full((4, 3, 5, 5), 200, dtype=torch.uint8)
    assert torch.allclose(module.eval()(pixels), pixels.float() / 255)
    assert (module.train()(pixels) < 0.2).all()


def test_true_is_ludwigs_default_list_and_unknown_operations_are_named():
    assert [op.type for op in operations()] == []
    config = load_config({"input_features": [{"name": "i", "type": "image", "augmentation": True}],
                          "output_features": [{"name": "y", "type": "binary"}]})
    assert [op.type for op in config.input_features[0].augmentation] == ["random_horizontal_flip", "random_rotate"]
    from plait.errors import ConfigError

    with pytest.raises(ConfigError, match="auto_augmentation.*list the operations"):
        operations({"type": "auto_augmentation"})
    with pytest.raises(ConfigError, match="kernel_size"):
        operations({"type": "random_blur", "kernel_size": 4})
