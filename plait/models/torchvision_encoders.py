"""Image encoders from torchvision's classification models (Ludwig's torchvision encoders).

A body is one torchvision model whose classification layer is replaced by the identity, so that
it outputs [batch, features]. plait uses only torchvision's model definitions: the pretrained
weights come from a local file (never a download), and the images arrive already scaled and
standardized by the image input.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path
from types import ModuleType
from urllib.parse import urlparse

import torch
from torch import nn

from plait.errors import BackendError, ModelError

_DECLARED_OPS: torch.library.Library | None = None
"""The operator schemas import_torchvision declared; kept so that torch keeps them."""

_OPS_IMPORT_NEEDS = {"nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                     "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"}
"""The torchvision operators whose fake kernels torchvision registers as it is imported."""


def import_torchvision() -> ModuleType:
    """torchvision, even where its compiled operators cannot load.

    A torchvision wheel built for another torch (a CUDA build next to a CPU torch) cannot load
    its extension, and then ``import torchvision`` fails: it registers fake kernels for
    torchvision::nms and torchvision::qnms, which the extension would have declared. plait needs
    none of those operators, only the model definitions, so it declares the two schemas itself
    and imports again.
    """
    global _DECLARED_OPS
    try:
        import torchvision
        return torchvision
    except ModuleNotFoundError as error:
        if error.name != "torchvision":
            raise
        raise BackendError("the torchvision image encoders (resnet, vit, ...) need torchvision: "
                           "pip install plait[image]") from None
    except RuntimeError as error:
        if "torchvision::" not in str(error):
            raise
    for name in [name for name in sys.modules if name == "torchvision" or name.startswith("torchvision.")]:
        del sys.modules[name]  # the half-imported modules, so that the import runs again whole
    if _DECLARED_OPS is None:
        _DECLARED_OPS = torch.library.Library("torchvision", "FRAGMENT")  # FRAGMENT: the namespace may exist
    for op, schema in _OPS_IMPORT_NEEDS.items():
        if not _has_op(op):
            _DECLARED_OPS.define(schema)
    try:
        import torchvision
    except RuntimeError as error:  # a torchvision that needs more of its extension than these two
        raise BackendError(f"torchvision does not import with torch {torch.__version__}: {error}; install the "
                           f"torchvision release made for this torch (constraints.txt pins the pair)") from None
    return torchvision


def _has_op(op: str) -> bool:
    try:
        getattr(torch.ops.torchvision, op)
        return True
    except (AttributeError, RuntimeError):
        return False


FAMILIES: dict[str, tuple[str, str | None]] = {
    "alexnet": ("alexnet", "classifier.6"),
    "convnext": ("convnext_{}", "classifier.2"),
    "densenet": ("densenet{}", "classifier"),
    "efficientnet": ("efficientnet_{}", "classifier.1"),
    "googlenet": ("googlenet", "fc"),
    "inceptionv3": ("inception_v3", "fc"),
    "maxvit": ("maxvit_{}", "classifier.5"),
    "mnasnet": ("mnasnet{}", "classifier.1"),
    "mobilenetv2": ("mobilenet_v2", "classifier.1"),
    "mobilenetv3": ("mobilenet_v3_{}", "classifier.3"),
    "regnet": ("regnet_{}", "fc"),
    "resnet": ("resnet{}", "fc"),
    "resnext": ("resnext{}", "fc"),
    "shufflenet_v2": ("shufflenet_v2_{}", "fc"),
    "squeezenet": ("squeezenet{}", None),
    "swin_transformer": ("swin_{}", "head"),
    "vit": ("vit_{}", "heads.head"),
    "vgg": ("vgg{}", "classifier.6"),
    "wide_resnet": ("wide_resnet{}", "fc"),
}
"""Per Ludwig encoder name: torchvision's model name ({} stands for the variant), and the
classification layer that becomes the identity (Ludwig's choice; None: squeezenet, whose 1,000
class scores Ludwig keeps as its features)."""

FIXED_INPUT_SIZE = {"vit": "image_size", "maxvit": "input_size"}
"""Models built for one input size, given by this argument: always the size of their weights
(as Ludwig builds them), so that a model is the same with or without use_pretrained."""


def torchvision_model_name(encoder: str, variant: str | int) -> str:
    """torchvision's name of a Ludwig encoder and variant: resnet 50 is resnet50, vit b_16 is
    vit_b_16, alexnet base is alexnet."""
    return FAMILIES[encoder][0].format(variant)


class TorchvisionEncoder(nn.Module):
    """A torchvision model, without its classification layer, as an image encoder body:
    [batch, channels, height, width] to [batch, output_size]."""

    def __init__(self, model: nn.Module, output_size: int, trainable: bool):
        super().__init__()
        self.model = model
        self.trainable = trainable
        self.output_size = output_size
        self.output_shape = (output_size,)
        model.requires_grad_(trainable)
        self.train(self.training)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(as_three_channels(images))

    def train(self, mode: bool = True) -> TorchvisionEncoder:
        super().train(mode)
        if not self.trainable:
            self.model.eval()  # a frozen model's batch-norm statistics must not move either
        return self


def as_three_channels(images: torch.Tensor) -> torch.Tensor:
    """The three channels torchvision's models take, as Ludwig makes them: the first three of
    more (an alpha channel is dropped), fewer repeated in turn (grayscale becomes gray RGB)."""
    channels = images.shape[1]
    if channels == 3:
        return images
    if channels > 3:
        return images[:, :3]
    return images.repeat(1, 3 // channels + 1, 1, 1)[:, :3]


def build_torchvision_encoder(config, metadata: dict, load_pretrained: bool = True) -> TorchvisionEncoder:
    """The encoder ``config`` names, for images of ``metadata``'s height and width.

    ``load_pretrained``: read the pretrained weights (when use_pretrained is true); False where
    the weights come from a saved plait model instead.
    """
    torchvision = import_torchvision()
    name = torchvision_model_name(config.type, config.model_variant)
    size = (int(metadata["height"]), int(metadata["width"]))
    fixed_size = _fixed_input_size(torchvision, config, name)
    if fixed_size is not None and size != fixed_size:
        raise ModelError(_size_error(config, name, size, fixed_size, "exactly"))
    model = torchvision.models.get_model(name, weights=None, **_model_arguments(torchvision, config, name))
    if config.use_pretrained and load_pretrained:
        load_pretrained_weights(model, torchvision, config, name)
    _drop_classifiers(model, config.type)
    output_size = _features_for(model, size)
    if output_size is None:
        smallest = _smallest_square(model, max(size))
        if smallest is None:
            raise ModelError(f"the {config.type} encoder (torchvision {name}) cannot take images of "
                             f"{size[0]}x{size[1]}, nor square ones up to {MAX_PROBED_SIZE}x{MAX_PROBED_SIZE}: "
                             f"choose another encoder")
        raise ModelError(_size_error(config, name, size, (smallest, smallest), "at least"))
    # Any number of channels (metadata's num_channels) is taken: forward makes them three.
    return TorchvisionEncoder(model, output_size, config.trainable)


def _fixed_input_size(torchvision: ModuleType, config, name: str) -> tuple[int, int] | None:
    """The one image size a model is built for (vit, maxvit): that of its weights; None for the
    models that take any size large enough."""
    if config.type not in FIXED_INPUT_SIZE:
        return None
    height, width = torchvision.models.get_model_weights(name).DEFAULT.meta["min_size"]
    return int(height), int(width)


def _model_arguments(torchvision: ModuleType, config, name: str) -> dict:
    """What torchvision's builder would be given along with the pretrained weights, so that the
    model is built as those weights expect, whether they are read now or restored later."""
    fixed_size = _fixed_input_size(torchvision, config, name)
    if fixed_size is not None:
        return {FIXED_INPUT_SIZE[config.type]: fixed_size[0] if config.type == "vit" else fixed_size}
    if config.type in ("googlenet", "inceptionv3"):
        # The weights file has the auxiliary classifiers (dropped after loading), and the weights
        # expect torchvision's re-standardization of the input (transform_input).
        pretrained = config.use_pretrained
        return {"aux_logits": pretrained, "transform_input": pretrained, "init_weights": not pretrained}
    return {}


def _drop_classifiers(model: nn.Module, encoder: str) -> None:
    """Removes the classification layer (replaced by the identity) and the auxiliary
    classifiers of googlenet and inception_v3, which only training on ImageNet used."""
    if getattr(model, "aux_logits", False):
        model.aux_logits = False
        for auxiliary in ("aux1", "aux2", "AuxLogits"):
            if hasattr(model, auxiliary):
                setattr(model, auxiliary, None)
    head = FAMILIES[encoder][1]
    if head is not None:
        parent, _, last = head.rpartition(".")
        setattr(model.get_submodule(parent), last, nn.Identity())


def _features_for(model: nn.Module, size: tuple[int, int]) -> int | None:
    """The width of the model's output for an image of ``size``, from a run on the meta device
    (shapes only: no arithmetic, no memory); None when the model cannot take that size (a
    pooling or a kernel outgrows the image, or the model is built for another size)."""
    meta_state = {name: torch.empty_like(tensor, device="meta")
                  for name, tensor in itertools.chain(model.named_parameters(), model.named_buffers())}
    training = model.training
    model.eval()
    try:
        with torch.no_grad():
            images = torch.empty(1, 3, *size, device="meta")
            return int(torch.func.functional_call(model, meta_state, (images,)).shape[-1])
    except (RuntimeError, AssertionError, ValueError):
        return None
    finally:
        model.train(training)


MAX_PROBED_SIZE = 4096
"""The largest square image side tried when looking for the smallest a model takes."""


def _size_error(config, name: str, size: tuple[int, int], needed: tuple[int, int], how: str) -> str:
    return (f"the {config.type} encoder (torchvision {name}) takes images of {how} {needed[0]}x{needed[1]} "
            f"(height x width), and these are {size[0]}x{size[1]}: set the image feature's preprocessing "
            f"height and width (preprocessing: {{height: {needed[0]}, width: {needed[1]}}}), or choose another "
            f"encoder")


def _smallest_square(model: nn.Module, start: int) -> int | None:
    """The side of the smallest square image the model takes: doubling from ``start`` until one
    passes, then halving the gap. Assumes that a model which takes a size takes every larger one
    (true of pooling and strided convolutions)."""
    low, high = 0, max(start, 1)
    while _features_for(model, (high, high)) is None:
        if high >= MAX_PROBED_SIZE:
            return None
        low, high = high, min(2 * high, MAX_PROBED_SIZE)
    while high - low > 1:
        middle = (low + high) // 2
        if _features_for(model, (middle, middle)) is None:
            low = middle
        else:
            high = middle
    return high


def weights_file_name(torchvision: ModuleType, name: str) -> tuple[str, str]:
    """The file name of torchvision's default weights for model ``name``, and its URL."""
    url = torchvision.models.get_model_weights(name).DEFAULT.url
    return os.path.basename(urlparse(url).path), url


def weights_folders(model_cache_dir: str | None) -> list[Path]:
    """Where a pretrained weights file is looked for, in order: model_cache_dir itself, its
    hub/checkpoints (where Ludwig's download puts it), then torch.hub's checkpoints folder."""
    folders = []
    if model_cache_dir:
        cache = Path(model_cache_dir).expanduser()
        folders += [cache, cache / "hub" / "checkpoints"]
    folders.append(Path(torch.hub.get_dir()) / "checkpoints")
    return folders


def load_pretrained_weights(model: nn.Module, torchvision: ModuleType, config, name: str) -> Path:
    """Loads the local copy of torchvision's pretrained weights for ``name`` into ``model``; a
    ModelError that says where to put the file when there is none."""
    file_name, url = weights_file_name(torchvision, name)
    folders = weights_folders(config.model_cache_dir)
    path = next((folder / file_name for folder in folders if (folder / file_name).is_file()), None)
    if path is None:
        looked_in = ", ".join(str(folder) for folder in folders)
        raise ModelError(
            f"the {config.type} encoder (torchvision {name}) has use_pretrained: true, and its weights file "
            f"{file_name} is in none of {looked_in} (plait does not download): download {url} on a machine with "
            f"network access and copy it into {folders[-1]}, or into a folder named by the encoder's "
            f"model_cache_dir; or set use_pretrained: false to start from random weights")
    try:
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    except Exception as error:  # whatever the file holds instead: a truncated file, other keys or shapes
        raise ModelError(f"{path} is not torchvision's {name} weights: {str(error)[:300]}; replace it with the "
                         f"file from {url}, or set use_pretrained: false") from None
    return path


TORCHVISION_ENCODERS = {encoder: build_torchvision_encoder for encoder in FAMILIES}
"""Ludwig's torchvision encoder names to their builder(config, metadata, load_pretrained=True)."""
