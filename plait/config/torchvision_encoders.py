"""Image encoder settings for torchvision's classification models (Ludwig 0.17's torchvision
encoders: resnet, vit, efficientnet, ...).

Each encoder is one torchvision model, chosen by ``model_variant``, without its classification
layer: it outputs the features that layer read (Ludwig's choice of layer, so the widths match
Ludwig's). Images reach it with three channels: a grayscale image is repeated, a fourth (alpha)
channel is dropped. Its pretrained weights are read from a local file, never downloaded.
"""

from __future__ import annotations

from typing import Literal

from plait.config.encoder_settings import EncoderBase


class TorchvisionEncoderBase(EncoderBase):
    """What every torchvision encoder accepts."""

    use_pretrained: bool = True
    """Start from torchvision's ImageNet weights for this variant (its DEFAULT weights). plait never
    downloads them: it reads torchvision's file (named as in its download URL, e.g.
    resnet18-f37072fd.pth) from model_cache_dir, or model_cache_dir/hub/checkpoints, or
    $TORCH_HOME/hub/checkpoints (torch.hub's folder), and fails with the URL to fetch when none has
    it. false: random initial weights. A saved plait model carries the weights either way."""
    model_cache_dir: str | None = None
    """A folder holding the pretrained weight files, directly or under hub/checkpoints (Ludwig
    downloads into it; plait only reads from it). null: only $TORCH_HOME/hub/checkpoints."""
    saved_weights_in_checkpoint: bool = False
    """Accepted with no effect: plait always saves the encoder's weights in the model, and loading
    a saved model never reads the pretrained file again."""
    trainable: bool = True
    """false: the torchvision model keeps its weights (no gradients) and stays in eval mode, so its
    batch-norm statistics and dropout stay fixed as well (Ludwig only stops the gradients)."""


class TorchvisionAlexNetEncoder(TorchvisionEncoderBase):
    """AlexNet; 4,096 features. Needs images of at least 63x63."""

    type: Literal["alexnet"] = "alexnet"
    model_variant: Literal["base"] = "base"
    """The only variant, torchvision's alexnet."""


class TorchvisionConvNeXtEncoder(TorchvisionEncoderBase):
    """ConvNeXt; 768 (tiny, small), 1,024 (base) or 1,536 (large) features. Needs at least 32x32."""

    type: Literal["convnext"] = "convnext"
    model_variant: Literal["tiny", "small", "base", "large"] = "base"
    """Size of the model (torchvision's convnext_<variant>)."""


class TorchvisionDenseNetEncoder(TorchvisionEncoderBase):
    """DenseNet; 1,024 (121), 2,208 (161), 1,664 (169) or 1,920 (201) features. Needs at least
    29x29."""

    type: Literal["densenet"] = "densenet"
    model_variant: Literal[121, 161, 169, 201] = 121
    """Depth of the model (torchvision's densenet<variant>)."""


class TorchvisionEfficientNetEncoder(TorchvisionEncoderBase):
    """EfficientNet (b0 to b7) and EfficientNetV2 (v2_s, v2_m, v2_l); 1,280 (b0, v2_*) to 2,560 (b7)
    features."""

    type: Literal["efficientnet"] = "efficientnet"
    model_variant: Literal["b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7", "v2_s", "v2_m", "v2_l"] = "b0"
    """Size of the model (torchvision's efficientnet_<variant>)."""


class TorchvisionGoogLeNetEncoder(TorchvisionEncoderBase):
    """GoogLeNet (Inception v1) without its auxiliary classifiers; 1,024 features. Needs at least
    15x15."""

    type: Literal["googlenet"] = "googlenet"
    model_variant: Literal["base"] = "base"
    """The only variant, torchvision's googlenet."""


class TorchvisionInceptionV3Encoder(TorchvisionEncoderBase):
    """Inception v3 without its auxiliary classifier; 2,048 features. Needs at least 75x75."""

    type: Literal["inceptionv3"] = "inceptionv3"
    model_variant: Literal["base"] = "base"
    """The only variant, torchvision's inception_v3."""


class TorchvisionMaxVitEncoder(TorchvisionEncoderBase):
    """MaxViT; 512 features. Takes images of exactly 224x224, the size it is built for."""

    type: Literal["maxvit"] = "maxvit"
    model_variant: Literal["t"] = "t"
    """The only variant, torchvision's maxvit_t."""


class TorchvisionMNASNetEncoder(TorchvisionEncoderBase):
    """MNASNet; 1,280 features."""

    type: Literal["mnasnet"] = "mnasnet"
    model_variant: Literal["0_5", "0_75", "1_0", "1_3"] = "0_5"
    """Width multiplier of the model (torchvision's mnasnet<variant>)."""


class TorchvisionMobileNetV2Encoder(TorchvisionEncoderBase):
    """MobileNetV2; 1,280 features."""

    type: Literal["mobilenetv2"] = "mobilenetv2"
    model_variant: Literal["base"] = "base"
    """The only variant, torchvision's mobilenet_v2."""


class TorchvisionMobileNetV3Encoder(TorchvisionEncoderBase):
    """MobileNetV3; 1,024 (small) or 1,280 (large) features."""

    type: Literal["mobilenetv3"] = "mobilenetv3"
    model_variant: Literal["small", "large"] = "small"
    """Size of the model (torchvision's mobilenet_v3_<variant>)."""


class TorchvisionRegNetEncoder(TorchvisionEncoderBase):
    """RegNet, X or Y designs at several compute budgets (400 MF to 128 GF); 400 to 7,392
    features."""

    type: Literal["regnet"] = "regnet"
    model_variant: Literal["x_1_6gf", "x_16gf", "x_32gf", "x_3_2gf", "x_400mf", "x_800mf", "x_8gf", "y_128gf",
                           "y_16gf", "y_1_6gf", "y_32gf", "y_3_2gf", "y_400mf", "y_800mf", "y_8gf"] = "x_1_6gf"
    """Design and compute budget (torchvision's regnet_<variant>)."""


class TorchvisionResNetEncoder(TorchvisionEncoderBase):
    """ResNet; 512 (18, 34) or 2,048 (50, 101, 152) features."""

    type: Literal["resnet"] = "resnet"
    model_variant: Literal[18, 34, 50, 101, 152] = 50
    """Depth of the model (torchvision's resnet<variant>)."""


class TorchvisionResNeXtEncoder(TorchvisionEncoderBase):
    """ResNeXt; 2,048 features."""

    type: Literal["resnext"] = "resnext"
    model_variant: Literal["50_32x4d", "101_32x8d", "101_64x4d"] = "50_32x4d"
    """Depth, groups and group width (torchvision's resnext<variant>)."""


class TorchvisionShuffleNetV2Encoder(TorchvisionEncoderBase):
    """ShuffleNetV2; 1,024 (x0_5 to x1_5) or 2,048 (x2_0) features."""

    type: Literal["shufflenet_v2"] = "shufflenet_v2"
    model_variant: Literal["x0_5", "x1_0", "x1_5", "x2_0"] = "x0_5"
    """Width multiplier (torchvision's shufflenet_v2_<variant>)."""


class TorchvisionSqueezeNetEncoder(TorchvisionEncoderBase):
    """SqueezeNet, its classifier kept as Ludwig does: 1,000 features (the ImageNet class scores,
    after a ReLU). Needs at least 21x21 (1_0) or 17x17 (1_1)."""

    type: Literal["squeezenet"] = "squeezenet"
    model_variant: Literal["1_0", "1_1"] = "1_0"
    """Version of the model (torchvision's squeezenet<variant>)."""


class TorchvisionSwinTransformerEncoder(TorchvisionEncoderBase):
    """Swin Transformer; 768 (t, s) or 1,024 (b) features."""

    type: Literal["swin_transformer"] = "swin_transformer"
    model_variant: Literal["t", "s", "b"] = "t"
    """Size of the model (torchvision's swin_<variant>)."""


class TorchvisionViTEncoder(TorchvisionEncoderBase):
    """Vision Transformer; the class token's 768 (b_*), 1,024 (l_*) or 1,280 (h_14) features. Takes
    images of exactly the size its weights were trained at: 224x224, or 518x518 for h_14."""

    type: Literal["vit"] = "vit"
    model_variant: Literal["b_16", "b_32", "l_16", "l_32", "h_14"] = "b_16"
    """Size and patch size of the model (torchvision's vit_<variant>)."""

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        if key in _HF_VIT_KEYS:
            return (f"a key of Ludwig's older Hugging Face ViT encoder (as in its examples/insurance_lite); Ludwig "
                    f"0.17's vit, as plait's, is torchvision's, which has no such key: the model's size is "
                    f"model_variant ({', '.join(cls.model_fields['model_variant'].annotation.__args__)}), the image "
                    f"size and channels are the feature's preprocessing.height, width and num_channels")
        return super().unknown_field_reason(key)


_HF_VIT_KEYS = frozenset(
    "img_height img_width in_channels hidden_size num_hidden_layers num_attention_heads intermediate_size hidden_act "
    "hidden_dropout_prob attention_probs_dropout_prob initializer_range layer_norm_eps gradient_checkpointing "
    "patch_size pretrained_model".split())
"""The settings of the Hugging Face ViT encoder of Ludwig before 0.8."""


class TorchvisionVGGEncoder(TorchvisionEncoderBase):
    """VGG, with or without batch normalization (the _bn variants); 4,096 features. Needs at least
    32x32."""

    type: Literal["vgg"] = "vgg"
    model_variant: Literal[11, 13, 16, 19, "11_bn", "13_bn", "16_bn", "19_bn"] = 11
    """Depth of the model, _bn for batch normalization (torchvision's vgg<variant>)."""


class TorchvisionWideResNetEncoder(TorchvisionEncoderBase):
    """Wide ResNet; 2,048 features."""

    type: Literal["wide_resnet"] = "wide_resnet"
    model_variant: Literal["50_2", "101_2"] = "50_2"
    """Depth and width multiplier (torchvision's wide_resnet<variant>)."""


TORCHVISION_ENCODER_CLASSES = (
    TorchvisionAlexNetEncoder, TorchvisionConvNeXtEncoder, TorchvisionDenseNetEncoder, TorchvisionEfficientNetEncoder,
    TorchvisionGoogLeNetEncoder, TorchvisionInceptionV3Encoder, TorchvisionMaxVitEncoder, TorchvisionMNASNetEncoder,
    TorchvisionMobileNetV2Encoder, TorchvisionMobileNetV3Encoder, TorchvisionRegNetEncoder, TorchvisionResNetEncoder,
    TorchvisionResNeXtEncoder, TorchvisionShuffleNetV2Encoder, TorchvisionSqueezeNetEncoder,
    TorchvisionSwinTransformerEncoder, TorchvisionViTEncoder, TorchvisionVGGEncoder, TorchvisionWideResNetEncoder)
"""The image encoders built from torchvision models, one per Ludwig name."""
