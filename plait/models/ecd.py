"""The encoder-combiner-decoder model: a plain ``nn.Module`` with no distributed code."""

from __future__ import annotations

import torch
from torch import nn

from plait.models.combiners import build_combiner
from plait.models.encoders import build_encoders
from plait.models.outputs import build_head

# Feature names are the user's column names: any string. torch refuses some as module names (a
# ".", the empty string, an attribute of ModuleDict such as "items" or "training"), so modules are
# kept under a key that torch accepts. A name torch accepts is its own key, so that the weights of
# models saved before this mapping still load; any other name, and any name that could be mistaken
# for an escaped one, is escaped as the hex of its UTF-8 bytes, which keeps the mapping one-to-one.
_ESCAPED = "plait_key_"
_TAKEN = frozenset(dir(nn.ModuleDict()))  # class and instance attributes ("training", "_modules")


def module_key(name: str) -> str:
    """The key of feature ``name``'s module in the model's ModuleDicts (and its state_dict)."""
    if name and "." not in name and name not in _TAKEN and not name.startswith(_ESCAPED):
        return name
    return _ESCAPED + name.encode("utf-8").hex()


def feature_name(key: str) -> str:
    """The feature name of a module key: the inverse of ``module_key``."""
    return bytes.fromhex(key[len(_ESCAPED):]).decode("utf-8") if key.startswith(_ESCAPED) else key


class ECD(nn.Module):
    def __init__(self, config, metadata: dict):
        super().__init__()
        features = metadata["features"]
        self.input_names = [f.name for f in config.input_features]
        self.output_names = [f.name for f in config.output_features]
        encoders = build_encoders(config.input_features, features)
        self.encoders = nn.ModuleDict({module_key(f.name): encoders[f.name] for f in config.input_features})
        self.combiner = build_combiner(config.combiner, [e.output_size for e in self.encoders.values()])
        self.heads = nn.ModuleDict(
            {module_key(f.name): build_head(f, features[f.name], self.combiner.output_size)
             for f in config.output_features}
        )
        self.loss_weights = {f.name: f.loss.weight for f in config.output_features}

    def encoder(self, name: str) -> nn.Module:
        """The encoder of input feature ``name`` (the user's name)."""
        return self.encoders[module_key(name)]

    def head(self, name: str) -> nn.Module:
        """The output head of output feature ``name`` (the user's name)."""
        return self.heads[module_key(name)]

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        encoded = [self.encoder(name)(inputs[name]) for name in self.input_names]
        hidden = self.combiner(encoded)
        return {name: self.head(name)(hidden) for name in self.output_names}

    def loss(self, logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
        """The weighted total loss and each output's loss."""
        losses = {name: self.head(name).loss(logits[name], targets[name]) for name in self.output_names}
        total = sum(self.loss_weights[name] * loss for name, loss in losses.items())
        return total, losses
