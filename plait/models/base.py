"""What training, evaluation and prediction use of a model, whatever its kind.

The training loop, the strategies, the metrics and the predictor know a model only through this
surface; ECD and the LLM both declare it (each subclasses :class:`TrainableModel`), so none of
them asks which kind of model it holds.
"""

from __future__ import annotations

import torch
from torch import nn

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


class TrainableModel(nn.Module):
    """A plait model: a plain ``nn.Module`` (no distributed code) with this surface."""

    input_names: list[str]
    """The input features' names: the keys of the tensors the forward pass reads."""
    output_names: list[str]
    """The output features' names: the keys of the logits the forward pass returns."""
    heads: nn.ModuleDict
    """One output head per output feature (keyed by ``module_key``), which the metrics read."""
    loss_weights: dict[str, float]
    """Each output's weight in the combined loss."""
    target_readers: list[str]
    """Outputs whose targets the forward pass reads too (teacher forcing): training and evaluation
    pass their tensors along with the inputs."""
    batch_padded: list[str]
    """Token columns (padded on the right) that a batch may cut after its longest row."""
    preference = None
    """A preference trainer's objective (an LLM's ``PreferenceObjective``), or None: the metrics
    then report its loss and reward accuracy where the batches carry the rejected completions."""
    grpo = None
    """GRPO's objective (an LLM's ``GRPOObjective``), or None: the metrics then report the reward of
    the model's greedy completions."""
    resizable_weights: tuple[str, ...] = ()
    """State-dict keys whose length is the trained model's own (a GBM's trees), not the config's:
    loading takes them at the length they were saved with."""
    prediction_batch_rows: int | None = None
    """Rows per forward pass when predicting; None: the predictor's own default."""

    def head(self, name: str) -> nn.Module:
        """The output head of output feature ``name`` (the user's name)."""
        return self.heads[module_key(name)]

    def loss(self, logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
        """The weighted total loss and each output's loss: each head's loss of its logits, times
        its output's ``loss_weights`` entry."""
        losses = {name: self.head(name).loss(logits[name], targets[name]) for name in self.output_names}
        return sum(self.loss_weights[name] * loss for name, loss in losses.items()), losses

    def no_rows_outputs(self, device) -> dict[str, torch.Tensor]:
        """Each output's logits for zero rows, with the shapes and types a batch's have."""
        raise NotImplementedError
