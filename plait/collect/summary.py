"""collect_summary: a trained model's layers (with their parameter counts), its weights' names and
shapes, and its config: the names ``collect_activations`` and ``collect_weights`` take."""

from __future__ import annotations

from dataclasses import dataclass

import yaml


@dataclass(frozen=True)
class Layer:
    name: str
    """The module's dotted name (what collect_activations takes)."""
    kind: str
    """Its class."""
    parameters: int
    """Parameters in it and below it."""
    trainable: int
    """Of those, the ones that train (an adapter's, when the base is frozen)."""


@dataclass(frozen=True)
class Weight:
    name: str
    """The state dict's key (what collect_weights takes)."""
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class ModelSummary:
    model_type: str
    layers: list[Layer]
    weights: list[Weight]
    config: dict
    parameters: int
    trainable: int

    def text(self, depth: int | None = None) -> str:
        """The summary as printed: layers down to ``depth`` levels (all by default), every
        weight, then the config as YAML."""
        layers = [layer for layer in self.layers if depth is None or layer.name.count(".") < depth]
        width = max([len(layer.name) for layer in layers] + [len(w.name) for w in self.weights] + [4])
        lines = [f"model_type {self.model_type}: {self.parameters:,} parameters, {self.trainable:,} trainable", "",
                 "Layers (names for collect_activations):",
                 f"  {'name':<{width}}  {'type':<28} {'parameters':>12} {'trainable':>12}"]
        lines += [f"  {layer.name:<{width}}  {layer.kind:<28} {layer.parameters:>12,} {layer.trainable:>12,}"
                  for layer in layers]
        lines += ["", "Weights (names for collect_weights):", f"  {'name':<{width}}  {'shape':<20} dtype"]
        lines += [f"  {w.name:<{width}}  {str(list(w.shape)):<20} {w.dtype}" for w in self.weights]
        lines += ["", "Config:", *("  " + line for line in yaml.safe_dump(self.config, sort_keys=False).splitlines())]
        return "\n".join(lines)


def model_summary(model) -> ModelSummary:
    """The summary of a trained (or loaded) :class:`~plait.Model`."""
    from plait.config.render import resolved_dict

    model.require_trained()
    module = model.module
    layers = [Layer(name, type(child).__name__, *_counts(child)) for name, child in module.named_modules() if name]
    weights = [Weight(name, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."))
               for name, tensor in module.state_dict().items()]
    parameters, trainable = _counts(module)
    return ModelSummary(model.config.model_type, layers, weights, resolved_dict(model.config), parameters, trainable)


def _counts(module) -> tuple[int, int]:
    parameters = list(module.parameters())
    return sum(p.numel() for p in parameters), sum(p.numel() for p in parameters if p.requires_grad)


def pretrained_weights(name_or_path: str) -> list[tuple[str, tuple[int, ...]]]:
    """The weights' names and shapes of a Hugging Face model folder (or a hub name in the local
    cache), read from its safetensors files' headers; nothing is downloaded or loaded."""
    from safetensors import safe_open

    from plait.errors import ModelError
    from plait.utils.hf_models import model_folder

    folder = model_folder(name_or_path, "--pretrained_model")
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelError(f"--pretrained_model: {str(folder)!r} holds no .safetensors weights to list")
    weights = []
    for file in files:
        with safe_open(str(file), framework="numpy") as opened:
            weights += [(name, tuple(opened.get_slice(name).get_shape())) for name in opened.keys()]
    return weights
