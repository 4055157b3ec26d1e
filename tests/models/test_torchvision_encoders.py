"""The torchvision image encoders: every family builds and encodes, pretrained weights come from
local files only, frozen encoders stay frozen, and sizes a model cannot take fail at build time."""

from __future__ import annotations

import sys
import typing

import pytest
import torch
from pydantic import ValidationError

from plait.config import torchvision_encoders as c
from plait.errors import BackendError, ModelError
from plait.models.torchvision_encoders import (TORCHVISION_ENCODERS, import_torchvision, torchvision_model_name,
                                               weights_file_name)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # small convolutions: fastest on one thread

CONFIG_CLASSES = {cls.model_fields["type"].default: cls for cls in c.TORCHVISION_ENCODER_CLASSES}

# Per family: its smallest variant, the smallest square image it takes (224: built for that
# size), and the width of its features (Ludwig's, the layer before the classifier).
SMALLEST = {
    "alexnet": ("base", 63, 4096), "convnext": ("tiny", 32, 768), "densenet": (121, 32, 1024),
    "efficientnet": ("b0", 16, 1280), "googlenet": ("base", 16, 1024), "inceptionv3": ("base", 75, 2048),
    "maxvit": ("t", 224, 512), "mnasnet": ("0_5", 16, 1280), "mobilenetv2": ("base", 16, 1280),
    "mobilenetv3": ("small", 16, 1024), "regnet": ("x_400mf", 16, 400), "resnet": (18, 16, 512),
    "resnext": ("50_32x4d", 16, 2048), "shufflenet_v2": ("x0_5", 16, 1024), "squeezenet": ("1_1", 32, 1000),
    "swin_transformer": ("t", 16, 768), "vit": ("b_32", 224, 768), "vgg": (11, 32, 4096),
    "wide_resnet": ("50_2", 16, 2048),
}
RUN_AT_224 = {"maxvit", "vit"}
"""Built for 224x224 images: built only (a CPU forward at that size takes too long for CI)."""


def build(encoder: str, side: int = 16, channels: int = 3, load_pretrained: bool = True, **settings):
    config = CONFIG_CLASSES[encoder](**{"use_pretrained": False, **settings})
    metadata = {"height": side, "width": side, "num_channels": channels}
    return TORCHVISION_ENCODERS[encoder](config, metadata, load_pretrained=load_pretrained)


def resnet18_weights_file():
    """torchvision's resnet18 state dict, set to known values, and the file name it is saved under."""
    torchvision = import_torchvision()
    model = torchvision.models.get_model("resnet18", weights=None)
    with torch.no_grad():
        for index, parameter in enumerate(model.parameters()):
            parameter.copy_(torch.linspace(-1, 1, parameter.numel()).reshape(parameter.shape) * (index + 1) / 100)
    return model.state_dict(), weights_file_name(torchvision, "resnet18")[0]


def test_each_ludwig_name_has_a_config_and_a_builder():
    assert set(CONFIG_CLASSES) == set(TORCHVISION_ENCODERS) == set(SMALLEST)
    assert len(SMALLEST) == 19


def test_every_variant_is_a_torchvision_model_with_weights():
    torchvision = import_torchvision()
    models = set(torchvision.models.list_models())
    for encoder, cls in CONFIG_CLASSES.items():
        for variant in typing.get_args(cls.model_fields["model_variant"].annotation):
            name = torchvision_model_name(encoder, variant)
            assert name in models, (encoder, variant)
            assert weights_file_name(torchvision, name)[0].endswith(".pth")


def test_ludwig_defaults():
    resnet = c.TorchvisionResNetEncoder()
    assert (resnet.model_variant, resnet.use_pretrained, resnet.model_cache_dir, resnet.trainable,
            resnet.saved_weights_in_checkpoint) == (50, True, None, True, False)
    assert c.TorchvisionVGGEncoder(model_variant="16_bn").model_variant == "16_bn"
    assert c.TorchvisionViTEncoder().model_variant == "b_16"
    with pytest.raises(ValidationError, match="'x_400mf'"):
        c.TorchvisionRegNetEncoder(model_variant="x_400")


@pytest.mark.parametrize("encoder", sorted(SMALLEST))
def test_every_family_encodes_an_image_to_its_features(encoder):
    variant, side, width = SMALLEST[encoder]
    body = build(encoder, side, model_variant=variant)
    assert body.output_size == width and body.output_shape == (width,)
    if encoder not in RUN_AT_224:
        features = body(torch.rand(2, 3, side, side))
        assert features.shape == (2, width)


@pytest.mark.parametrize("where", ["model_cache_dir", "model_cache_dir/hub/checkpoints", "TORCH_HOME"])
def test_pretrained_weights_are_read_from_a_local_file(tmp_path, monkeypatch, where):
    state, file_name = resnet18_weights_file()
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    folder = {"model_cache_dir": tmp_path / "cache",
              "model_cache_dir/hub/checkpoints": tmp_path / "cache/hub/checkpoints",
              "TORCH_HOME": tmp_path / "torch_home/hub/checkpoints"}[where]
    folder.mkdir(parents=True)
    torch.save(state, folder / file_name)
    body = build("resnet", use_pretrained=True, model_variant=18, model_cache_dir=str(tmp_path / "cache"))
    loaded = body.model.state_dict()
    assert "fc.weight" not in loaded  # the classifier is gone, its input is the output
    for key, tensor in loaded.items():
        assert torch.equal(tensor, state[key]), key


def test_missing_weights_say_where_to_put_them(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    with pytest.raises(ModelError) as error:
        build("resnet", use_pretrained=True, model_variant=18, model_cache_dir=str(tmp_path / "cache"))
    message = str(error.value)
    for expected in ("resnet18-f37072fd.pth", "https://download.pytorch.org/models/resnet18-f37072fd.pth",
                     str(tmp_path / "cache"), str(tmp_path / "cache/hub/checkpoints"),
                     str(tmp_path / "torch_home/hub/checkpoints"), "use_pretrained: false", "model_cache_dir"):
        assert expected in message


def test_a_restored_model_does_not_read_the_weights_file(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    body = build("resnet", use_pretrained=True, model_variant=18, load_pretrained=False)
    assert body.output_size == 512


def test_a_file_of_other_weights_is_refused_by_name(tmp_path):
    _, file_name = resnet18_weights_file()
    torch.save({"conv1.weight": torch.zeros(1)}, tmp_path / file_name)
    with pytest.raises(ModelError, match=f"{tmp_path / file_name} is not torchvision's resnet18 weights"):
        build("resnet", use_pretrained=True, model_variant=18, model_cache_dir=str(tmp_path))


def test_pretrained_googlenet_loads_its_auxiliary_classifiers_then_drops_them(tmp_path):
    torchvision = import_torchvision()
    pretrained = torchvision.models.get_model("googlenet", weights=None, aux_logits=True, init_weights=False)
    torch.save(pretrained.state_dict(), tmp_path / weights_file_name(torchvision, "googlenet")[0])
    body = build("googlenet", use_pretrained=True, model_cache_dir=str(tmp_path))
    assert body.model.transform_input and body.model.aux1 is None and body.model.aux2 is None
    assert torch.equal(body.model.conv1.conv.weight, pretrained.conv1.conv.weight)
    restored = build("googlenet", use_pretrained=True, load_pretrained=False)
    assert restored.model.state_dict().keys() == body.model.state_dict().keys()


def test_a_frozen_encoder_keeps_its_weights_and_statistics():
    body = build("resnet", 16, model_variant=18, trainable=False)
    body.train()
    assert not any(parameter.requires_grad for parameter in body.parameters())
    assert body.training and not body.model.training
    statistics = body.model.bn1.running_mean.clone()
    body(torch.rand(2, 3, 16, 16) * 5)
    assert torch.equal(body.model.bn1.running_mean, statistics)


@pytest.mark.parametrize("channels", [1, 2, 4])
def test_images_of_other_channel_counts_become_three_channels(channels):
    body = build("resnet", 16, channels=channels, model_variant=18).eval()
    images = torch.rand(2, channels, 16, 16)
    three = images[:, [index % channels for index in range(3)]]
    assert torch.equal(body(images), body(three))


@pytest.mark.parametrize("encoder, side, needed", [("alexnet", 32, "at least 63x63"),
                                                   ("vit", 64, "exactly 224x224")])
def test_an_image_too_small_fails_at_build_time(encoder, side, needed):
    with pytest.raises(ModelError) as error:
        build(encoder, side, model_variant=SMALLEST[encoder][0])
    message = str(error.value)
    assert f"the {encoder} encoder" in message and needed in message and f"{side}x{side}" in message
    assert "preprocessing: {height: " in message


def test_no_torchvision_asks_for_the_image_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torchvision", None)  # then import torchvision fails
    with pytest.raises(BackendError, match=r"pip install plait\[image\]"):
        import_torchvision()
