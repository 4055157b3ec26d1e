"""Image encoders: Ludwig's rendered settings validate, each body's output shape for grey and
colour images, and the errors for image sizes a body cannot take."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from plait.config.image_encoders import ImageStackedCNNEncoder, MLPMixerEncoder, UNetDecoder, UNetEncoder
from plait.errors import ModelError
from plait.models.image_encoders import IMAGE_ENCODERS

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RENDERED = Path(__file__).parents[1] / "ludwig_rendered" / "titanic_concat.json"


def metadata(height: int, width: int, channels: int) -> dict:
    return {"height": height, "width": width, "num_channels": channels}


def encode(encoder, images: torch.Tensor) -> torch.Tensor:
    encoder.eval()
    with torch.no_grad():
        return encoder(images)


def test_ludwig_rendered_image_defaults_validate_unchanged():
    image = json.loads(RENDERED.read_text())["defaults"]["image"]
    encoder = {k: v for k, v in image["encoder"].items() if k not in ("skip", "adapter")}  # features.py drops these
    assert ImageStackedCNNEncoder.model_validate(encoder).model_dump() == {**ImageStackedCNNEncoder().model_dump(),
                                                                           **encoder}
    assert UNetDecoder.model_validate(image["decoder"]).num_stages == 4


@pytest.mark.parametrize("settings, key", [
    ({"conv_layers": [{}], "num_conv_layers": 2}, "give conv_layers or num_conv_layers"),
    ({"fc_layers": [{}], "num_fc_layers": 2}, "give fc_layers or num_fc_layers"),
    ({"kernel_size": [3, 3, 3]}, "kernel_size"),
])
def test_stacked_cnn_settings_are_checked(settings, key):
    with pytest.raises(ValidationError, match=key):
        ImageStackedCNNEncoder.model_validate(settings)


@pytest.mark.parametrize("settings, key", [({"num_fc_layers": 1}, "takes no fully connected layers"),
                                           ({"num_stages": 3}, "four stages")])
def test_the_unet_decoder_refuses_what_its_encoder_cannot_feed(settings, key):
    with pytest.raises(ValidationError, match=key):
        UNetDecoder.model_validate(settings)


@pytest.mark.parametrize("channels", [1, 3])
def test_stacked_cnn_defaults_are_ludwigs_two_blocks_then_one_layer(channels):
    encoder = IMAGE_ENCODERS["stacked_cnn"](ImageStackedCNNEncoder(), metadata(32, 32, channels))
    # 32 -> conv 3 (valid) 30 -> pool 15 -> conv 13 -> pool 6: 64 filters x 6 x 6, then 128.
    assert encoder.flattened_size == 64 * 6 * 6
    assert encode(encoder, torch.rand(2, channels, 32, 32)).shape == (2, 128)
    assert encoder.output_shape == (128,)


def test_stacked_cnn_layers_override_the_defaults_one_key_at_a_time():
    config = ImageStackedCNNEncoder.model_validate({
        "conv_layers": [{"out_channels": 8, "padding": "same", "pool_kernel_size": None},
                        {"out_channels": 4, "kernel_size": [3, 1], "norm": "layer"}],
        "num_fc_layers": 0, "conv_norm": "batch"})
    encoder = IMAGE_ENCODERS["stacked_cnn"](config, metadata(16, 12, 3))
    # Block 0 keeps 16x12 (same padding, no pooling); block 1: a 3x1 kernel, then 2x2 pooling.
    assert encode(encoder, torch.rand(2, 3, 16, 12)).shape == (2, 4 * 7 * 6)
    norms = [type(block.norm).__name__ for block in encoder.conv]
    assert norms == ["BatchNorm2d", "LayerNorm"]


def test_stacked_cnn_that_shrinks_the_image_to_nothing_says_how_to_fix_it():
    with pytest.raises(ModelError, match="block 1 does not fit a 2x2 input.*preprocessing.height"):
        IMAGE_ENCODERS["stacked_cnn"](ImageStackedCNNEncoder(), metadata(6, 6, 3))
    with pytest.raises(ModelError, match="same padding needs stride 1"):
        IMAGE_ENCODERS["stacked_cnn"](ImageStackedCNNEncoder(padding="same", stride=2), metadata(8, 8, 3))


TINY_MIXER = {"patch_size": 8, "embed_size": 16, "token_size": 8, "channel_dim": 12, "num_layers": 2}


@pytest.mark.parametrize("channels", [1, 3])
def test_mlp_mixer_pools_its_patches_or_hands_them_on(channels):
    pooled = IMAGE_ENCODERS["mlp_mixer"](MLPMixerEncoder(**TINY_MIXER), metadata(32, 16, channels))
    assert encode(pooled, torch.rand(2, channels, 32, 16)).shape == (2, 16)
    assert pooled.output_shape == (16,)
    patches = IMAGE_ENCODERS["mlp_mixer"](MLPMixerEncoder(**TINY_MIXER, avg_pool=False), metadata(32, 16, channels))
    assert encode(patches, torch.rand(2, channels, 32, 16)).shape == (2, 8, 16)  # 4 x 2 patches of 8x8
    assert patches.output_shape == (8, 16)


def test_mlp_mixer_needs_whole_patches():
    with pytest.raises(ModelError, match="patch_size 16.*preprocessing.height and preprocessing.width to multiples"):
        IMAGE_ENCODERS["mlp_mixer"](MLPMixerEncoder(), metadata(40, 32, 3))


@pytest.mark.parametrize("channels", [1, 3])
def test_unet_encoder_gives_its_bottleneck_flat_and_four_skips(channels):
    encoder = IMAGE_ENCODERS["unet"](UNetEncoder(), metadata(16, 32, channels))
    assert encoder.returns_state
    hidden, skips = encode(encoder, torch.rand(2, channels, 16, 32))
    assert hidden.shape == (2, 1024 * 1 * 2) and encoder.output_shape == (2048,)
    assert [tuple(s.shape[1:]) for s in skips] == [(64, 16, 32), (128, 8, 16), (256, 4, 8), (512, 2, 4)]


def test_unet_encoder_needs_multiples_of_16():
    with pytest.raises(ModelError, match="24x32 image cannot be halved 4 times.*multiples of 16"):
        IMAGE_ENCODERS["unet"](UNetEncoder(), metadata(24, 32, 3))
