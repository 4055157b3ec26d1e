"""Output heads: decoder layers, the loss, and predictions, one class per output type.

A head's loss is written once, per row (:meth:`OutputHead.row_losses`): training takes their
weighted mean, and the metrics sum the same rows over shards and workers, so the loss early
stopping watches is the loss that is trained, class weights included.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from plait.errors import ConfigError
from plait.models.layers import fc_stack


class RowLosses(NamedTuple):
    """Each row's loss, already multiplied by its weight, and each row's weight (0 for a row the
    loss ignores; ``None``: every row weighs 1). The loss of any set of rows is the sum of their
    losses over the sum of their weights: both sums add up across shards, so the loss of merged
    shards is the loss of the whole."""

    losses: torch.Tensor
    weights: torch.Tensor | None = None


class OutputHead(nn.Module):
    """Decoder FC layers then a projection to ``logits_size`` outputs."""

    logits_size: int = 1

    def __init__(self, feature, metadata: dict, input_size: int):
        super().__init__()
        self.feature, self.metadata = feature, metadata
        self.fc = fc_stack(input_size, feature.decoder)
        self.projection = nn.Linear(self.fc.output_size, self.logits_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.projection(self.fc(hidden))

    def row_losses(self, logits: torch.Tensor, target: torch.Tensor) -> RowLosses:
        raise NotImplementedError

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The batch's loss, the weighted mean of its rows' (what torch's mean reduction gives)."""
        rows = self.row_losses(logits, target)
        if rows.weights is None:
            return rows.losses.mean()  # one fused op: this runs every step
        return rows.losses.sum() / rows.weights.sum()

    def predict(self, logits: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError


class BinaryHead(OutputHead):
    def forward(self, hidden):
        return super().forward(hidden).squeeze(-1)

    def row_losses(self, logits, target):
        # positive_class_weight scales the positive term inside each row's loss; every row weighs
        # 1, so the mean is over rows, as in torch's BCE with pos_weight.
        weight = self.feature.loss.positive_class_weight
        pos_weight = torch.tensor(weight, device=logits.device) if weight else None
        losses = F.binary_cross_entropy_with_logits(logits.float(), target.float(), pos_weight=pos_weight, reduction="none")
        return RowLosses(losses)

    def predict(self, logits):
        probability = torch.sigmoid(logits.float())
        return {"probability": probability, "prediction": probability >= self.feature.threshold}


class CategoryHead(OutputHead):
    def __init__(self, feature, metadata, input_size):
        self.logits_size = max(1, len(metadata["vocabulary"]))
        super().__init__(feature, metadata, input_size)
        self.register_buffer("class_weights", _class_weights(feature, metadata["vocabulary"]), persistent=False)

    def row_losses(self, logits, target):
        # A row's weight is its class's weight; a row whose label is unknown (-1) weighs 0.
        target = target.long()
        losses = F.cross_entropy(logits.float(), target, weight=self.class_weights, ignore_index=-1, reduction="none")
        known = target >= 0
        if self.class_weights is None:
            return RowLosses(losses, known.to(losses.dtype))
        return RowLosses(losses, torch.where(known, self.class_weights[target.clamp(min=0)], 0.0))

    def predict(self, logits):
        probabilities = torch.softmax(logits.float(), dim=-1)
        probability, prediction = probabilities.max(dim=-1)
        return {"probabilities": probabilities, "probability": probability, "prediction": prediction}


class NumberHead(OutputHead):
    def forward(self, hidden):
        return super().forward(hidden).squeeze(-1)

    def row_losses(self, logits, target):
        kind = self.feature.loss.type
        logits, target = logits.float(), target.float()
        if kind == "mean_absolute_error":
            losses = F.l1_loss(logits, target, reduction="none")
        elif kind == "huber":
            losses = F.huber_loss(logits, target, delta=self.feature.loss.delta, reduction="none")
        else:
            losses = F.mse_loss(logits, target, reduction="none")
        return RowLosses(losses)

    def predict(self, logits):
        # Targets were normalized in preprocessing: predictions go back to the data's units.
        return {"prediction": logits.float() * self.metadata["scale"] + self.metadata["shift"]}


class SetHead(OutputHead):
    def __init__(self, feature, metadata, input_size):
        self.logits_size = max(1, len(metadata["vocabulary"]))
        super().__init__(feature, metadata, input_size)

    def row_losses(self, logits, target):
        # A row's loss is the mean over its labels: the batch's mean is then the mean over elements.
        # The target's trailing column (items training never saw, plait.training.data) has no
        # logit and is left out: training on the seen items is unchanged by it.
        target = target[..., : logits.shape[-1]]
        losses = F.binary_cross_entropy_with_logits(logits.float(), target.float(), reduction="none").mean(-1)
        return RowLosses(losses)

    def predict(self, logits):
        probabilities = torch.sigmoid(logits.float())
        return {"probabilities": probabilities, "prediction": probabilities >= self.feature.threshold}


def _class_weights(feature, vocabulary: list[str]) -> torch.Tensor | None:
    weights = feature.loss.class_weights
    if weights is None:
        return None
    if isinstance(weights, dict):
        weights = [weights.get(label, 1.0) for label in vocabulary]
    elif len(weights) != len(vocabulary):
        # The vocabulary is known only after preprocessing, so this is checked here, not in the schema.
        shown = ", ".join(vocabulary[:10]) + (", ..." if len(vocabulary) > 10 else "")
        raise ConfigError(
            f"output_features.{feature.name}.loss.class_weights: {len(weights)} weights for "
            f"{len(vocabulary)} labels ({shown}); give one weight per label in this order, or a "
            f"mapping from label to weight"
        )
    return torch.tensor(weights, dtype=torch.float32)


HEADS = {"binary": BinaryHead, "category": CategoryHead, "number": NumberHead, "set": SetHead}


def build_head(feature, metadata: dict, input_size: int) -> OutputHead:
    return HEADS[feature.type](feature, metadata, input_size)
