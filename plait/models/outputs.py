"""Output heads: decoder layers, the loss, and predictions, one class per output type.

A head reduces the combiner's output to one vector per row (``reduce_input``), appends the hidden
states of the outputs it depends on (``dependencies``), runs its decoder's fully connected stack
and projects to logits. Its own hidden state (the stack's output) is what dependent outputs read.

A head's loss is written once, per row (:meth:`OutputHead.row_losses`): training takes their
weighted mean, and the metrics sum the same rows over shards and workers, so the loss early
stopping watches is the loss that is trained, class weights included. A loss that is not a mean
of rows (a root mean square) is a function of one (:meth:`OutputHead.finish_loss`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

from plait.errors import ConfigError
from plait.config.fully_connected import FCLayer
from plait.models.layers import FCStack, SequenceReducer, activation, fc_stack, linear

PROBABILITY_FLOOR = 1e-10
"""Where an entropy takes a log of a probability, the probability is at least this (log 0 is -inf)."""


class RowLosses(NamedTuple):
    """Each row's loss, already multiplied by its weight, and each row's weight (0 for a row the
    loss ignores; ``None``: every row weighs 1). The loss of any set of rows is the sum of their
    losses over the sum of their weights: both sums add up across shards, so the loss of merged
    shards is the loss of the whole."""

    losses: torch.Tensor
    weights: torch.Tensor | None = None


def _mlp_hidden_layers(decoder) -> list[FCLayer]:
    """mlp_classifier's own hidden layers, after the stack (Ludwig's num_fc_layers sets both)."""
    return [FCLayer(output_size=decoder.output_size, use_bias=decoder.use_bias,
                    weights_initializer=decoder.weights_initializer, bias_initializer=decoder.bias_initializer,
                    norm=None, norm_params=None, activation=decoder.activation, dropout=decoder.dropout)
            for _ in range(decoder.num_fc_layers)]


class OutputHead(nn.Module):
    """Reduction of the combiner's output, the decoder's layers, then a projection to ``logits_size``."""

    logits_size: int = 1

    def __init__(self, feature, metadata: dict, input_shape: int | tuple[int, ...], dependency_size: int = 0):
        super().__init__()
        self.feature, self.metadata = feature, metadata
        self.reducer = SequenceReducer.build(feature.reduce_input, input_shape, f"output_features.{feature.name}.reduce_input")
        decoder = feature.decoder
        self.fc = fc_stack(self.reducer.output_size + dependency_size, decoder)
        size = self.fc.output_size
        if decoder.type == "mlp_classifier":
            # Only mlp_classifier has this module: other heads keep the state_dict keys they always had.
            self.mlp = FCStack(size, _mlp_hidden_layers(decoder))
            size = self.mlp.output_size
        self.projection = linear(size, self.logits_size, decoder.use_bias, decoder.weights_initializer,
                                 decoder.bias_initializer)

    @property
    def hidden_size(self) -> int:
        """Width of the hidden state that outputs depending on this one read."""
        return self.fc.output_size

    def decode(self, combined: torch.Tensor, dependencies: list[torch.Tensor] = ()) -> tuple[torch.Tensor, torch.Tensor]:
        """(this head's hidden state, its logits) from the combiner's output and the hidden states of
        the outputs it depends on, in the order of ``feature.dependencies``."""
        hidden = self.reducer(combined)
        if dependencies:
            hidden = torch.cat([hidden, *dependencies], dim=-1)
        hidden = self.fc(hidden)
        top = self.mlp(hidden) if hasattr(self, "mlp") else hidden
        return hidden, self.projection(top)

    def forward(self, combined: torch.Tensor, dependencies: list[torch.Tensor] = (), return_hidden: bool = False):
        """The logits; with ``return_hidden``, (hidden state, logits) as ``decode`` gives them. The
        model calls a head through here, never ``decode`` directly: FSDP gathers a sharded head's
        parameters in hooks around ``__call__`` (a direct call would meet sharded weights)."""
        hidden, logits = self.decode(combined, dependencies)
        return (hidden, logits) if return_hidden else logits

    def row_losses(self, logits: torch.Tensor, target: torch.Tensor) -> RowLosses:
        raise NotImplementedError

    def finish_loss(self, mean):
        """The loss from the weighted mean of the rows' losses (the identity, but for a root mean square)."""
        return mean

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """The batch's loss, from the weighted mean of its rows' (what torch's mean reduction gives)."""
        rows = self.row_losses(logits, target)
        if rows.weights is None:
            return self.finish_loss(rows.losses.mean())  # one fused op: this runs every step
        return self.finish_loss(rows.losses.sum() / rows.weights.sum())

    def predict(self, logits: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError


def confidence_penalty(probabilities: torch.Tensor) -> torch.Tensor:
    """Per row, ``(log c - H(p)) / log c``: 0 for a uniform distribution over the c classes, 1 for a
    certain one. ``probabilities`` is [rows, c]."""
    classes = probabilities.shape[-1]
    entropy = -(probabilities * probabilities.clamp(min=PROBABILITY_FLOOR).log()).sum(-1)
    return (math.log(classes) - entropy) / math.log(classes)


def robust(losses: torch.Tensor, robust_lambda: float, classes: int) -> torch.Tensor:
    """For noisy labels: part of each row's loss is replaced by the constant 1/c."""
    return (1 - robust_lambda) * losses + robust_lambda / classes if robust_lambda else losses


class BinaryHead(OutputHead):
    def decode(self, combined, dependencies=()):
        hidden, logits = super().decode(combined, dependencies)
        return hidden, logits.squeeze(-1)

    def row_losses(self, logits, target):
        loss, logits, target = self.feature.loss, logits.float(), target.float()
        if loss.type == "focal":
            return RowLosses(_binary_focal(logits, target, loss.alpha, loss.gamma))
        # positive_class_weight scales the positive term inside each row's loss; every row weighs
        # 1, so the mean is over rows, as in torch's BCE with pos_weight.
        weight = loss.positive_class_weight
        pos_weight = torch.tensor(weight, device=logits.device) if weight else None
        losses = F.binary_cross_entropy_with_logits(logits, target, pos_weight=pos_weight, reduction="none")
        losses = robust(losses, loss.robust_lambda, 2)
        if loss.confidence_penalty:
            p = torch.sigmoid(logits)
            losses = losses + loss.confidence_penalty * confidence_penalty(torch.stack([p, 1 - p], -1))
        return RowLosses(losses)

    def predict(self, logits):
        probability = torch.sigmoid(logits.float())
        return {"probability": probability, "prediction": probability >= self.feature.threshold}


def _binary_focal(logits: torch.Tensor, target: torch.Tensor, alpha: float, gamma: float) -> torch.Tensor:
    cross_entropy = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    p_true = torch.exp(-cross_entropy)
    alpha_true = alpha * target + (1 - alpha) * (1 - target)
    return alpha_true * (1 - p_true) ** gamma * cross_entropy


class CategoryHead(OutputHead):
    def __init__(self, feature, metadata, input_shape, dependency_size=0):
        self.logits_size = max(1, len(metadata["vocabulary"]))
        super().__init__(feature, metadata, input_shape, dependency_size)
        self.register_buffer("class_weights", _class_weights(feature, metadata["vocabulary"]), persistent=False)
        self.register_buffer("soft_targets", _soft_targets(feature, metadata["vocabulary"]), persistent=False)

    def row_losses(self, logits, target):
        # A row's weight is its class's weight; a row whose label is unknown (-1) weighs 0.
        loss, logits, target = self.feature.loss, logits.float(), target.long()
        known = target >= 0
        label = target.clamp(min=0)
        log_p = torch.log_softmax(logits, dim=-1)
        true_log_p = log_p.gather(-1, label.unsqueeze(-1)).squeeze(-1)
        if loss.type == "focal":
            losses = -true_log_p * (1 - true_log_p.exp()) ** loss.gamma
        elif loss.type == "poly":
            losses = -true_log_p + loss.epsilon * (1 - true_log_p.exp())
        else:
            losses = self._softmax_cross_entropy(log_p, true_log_p, label)
        weights = known.to(losses.dtype)
        if getattr(loss, "class_weights", None) is not None:
            weights = torch.where(known, self.class_weights[label], 0.0)
        return RowLosses(torch.where(weights > 0, weights * losses, 0.0), weights)

    def _softmax_cross_entropy(self, log_p, true_log_p, label):
        loss = self.feature.loss
        losses = -true_log_p if self.soft_targets is None else -(self.soft_targets[label] * log_p).sum(-1)
        losses = robust(losses, loss.robust_lambda, self.logits_size)
        if loss.confidence_penalty and self.logits_size > 1:
            losses = losses + loss.confidence_penalty * confidence_penalty(log_p.exp())
        return losses

    def predict(self, logits):
        probabilities = torch.softmax(logits.float(), dim=-1)
        probability, prediction = probabilities.max(dim=-1)
        return {"probabilities": probabilities, "probability": probability, "prediction": prediction}


class NumberHead(OutputHead):
    def decode(self, combined, dependencies=()):
        hidden, logits = super().decode(combined, dependencies)
        return hidden, logits.squeeze(-1)

    def row_losses(self, logits, target):
        kind = self.feature.loss.type
        logits, target = logits.float(), target.float()
        if kind == "mean_absolute_error":
            return RowLosses(F.l1_loss(logits, target, reduction="none"))
        if kind == "huber":
            return RowLosses(F.huber_loss(logits, target, delta=self.feature.loss.delta, reduction="none"))
        if kind in ("mean_absolute_percentage_error", "root_mean_squared_percentage_error"):
            return RowLosses(self._relative_errors(logits, target, squared=kind.startswith("root")))
        return RowLosses(F.mse_loss(logits, target, reduction="none"))

    def _relative_errors(self, logits, target, squared: bool) -> torch.Tensor:
        # A percentage error is only meaningful in the data's units, not the normalized ones.
        scale, shift = self.metadata["scale"], self.metadata["shift"]
        prediction, truth = logits * scale + shift, target * scale + shift
        if squared:  # Ludwig's RMSPE: a zero target is divided by 1e-4 rather than by 0
            return ((truth - prediction) / torch.where(truth == 0, 1e-4, truth)) ** 2
        # Ludwig's MAPE (torchmetrics'): |y| is at least float32's epsilon
        return (truth - prediction).abs() / truth.abs().clamp(min=torch.finfo(torch.float32).eps)

    def finish_loss(self, mean):
        return mean ** 0.5 if self.feature.loss.type.startswith("root_") else mean

    def predict(self, logits):
        # Targets were normalized in preprocessing: predictions go back to the data's units.
        prediction = logits.float() * self.metadata["scale"] + self.metadata["shift"]
        if self.feature.clip is not None:
            prediction = prediction.clamp(*self.feature.clip)
        return {"prediction": prediction}


class SetHead(OutputHead):
    def __init__(self, feature, metadata, input_shape, dependency_size=0):
        self.logits_size = max(1, len(metadata["vocabulary"]))
        super().__init__(feature, metadata, input_shape, dependency_size)
        self.register_buffer("class_weights", _class_weights(feature, metadata["vocabulary"]), persistent=False)

    def row_losses(self, logits, target):
        # A row's loss is the mean over its labels: the batch's mean is then the mean over elements.
        # The target's trailing column (items training never saw, plait.data.tensors) has no
        # logit and is left out: training on the seen items is unchanged by it. Class weights
        # scale each item's positive term, as Ludwig's (torch's pos_weight) do.
        target = target[..., : logits.shape[-1]]
        losses = F.binary_cross_entropy_with_logits(logits.float(), target.float(), pos_weight=self.class_weights,
                                                    reduction="none").mean(-1)
        return RowLosses(losses)

    def predict(self, logits):
        probabilities = torch.sigmoid(logits.float())
        return {"probabilities": probabilities, "prediction": probabilities >= self.feature.threshold}


class VectorHead(OutputHead):
    """Ludwig's projector: the stack, a linear map to every value, its activation, the multiplier
    and the clip; the loss is the mean over the values of each row."""

    def __init__(self, feature, metadata, input_shape, dependency_size=0):
        self.logits_size = metadata["vector_size"]
        super().__init__(feature, metadata, input_shape, dependency_size)
        self.output_activation = activation(feature.decoder.activation)

    def decode(self, combined, dependencies=()):
        hidden, logits = super().decode(combined, dependencies)
        decoder = self.feature.decoder
        values = self.output_activation(logits) * decoder.multiplier
        return hidden, values.clamp(*decoder.clip) if decoder.clip is not None else values

    def row_losses(self, logits, target):
        kind, logits, target = self.feature.loss.type, logits.float(), target.float()
        if kind == "mean_absolute_error":
            return RowLosses(F.l1_loss(logits, target, reduction="none").mean(-1))
        if kind == "huber":
            return RowLosses(F.huber_loss(logits, target, delta=self.feature.loss.delta, reduction="none").mean(-1))
        return RowLosses(F.mse_loss(logits, target, reduction="none").mean(-1))

    def predict(self, logits):
        return {"prediction": logits.float()}


class TimeseriesHead(VectorHead):
    """The next steps of a series: a projector over the output's series length."""

    def __init__(self, feature, metadata, input_shape, dependency_size=0):
        super().__init__(feature, {**metadata, "vector_size": metadata["timeseries_length"]}, input_shape,
                         dependency_size)


class CategoryDistributionHead(OutputHead):
    """A distribution over the classes, trained towards each row's target distribution (soft labels)."""

    def __init__(self, feature, metadata, input_shape, dependency_size=0):
        self.logits_size = max(1, len(metadata["vocabulary"]))
        super().__init__(feature, metadata, input_shape, dependency_size)

    def row_losses(self, logits, target):
        return RowLosses(-(target.float() * torch.log_softmax(logits.float(), dim=-1)).sum(-1))

    def predict(self, logits):
        probabilities = torch.softmax(logits.float(), dim=-1)
        probability, prediction = probabilities.max(dim=-1)
        return {"probabilities": probabilities, "probability": probability, "prediction": prediction}


def _class_weights(feature, vocabulary: list[str]) -> torch.Tensor | None:
    weights = getattr(feature.loss, "class_weights", None)
    if weights is None:
        return None
    if isinstance(weights, dict):
        weights = [weights.get(label, 1.0) for label in vocabulary]
    else:
        _check_class_count(feature, "class_weights", f"{len(weights)} weights", len(weights), vocabulary)
    return torch.tensor(weights, dtype=torch.float32)


def _soft_targets(feature, vocabulary: list[str]) -> torch.Tensor | None:
    """Row i: the distribution a row of class i is trained towards (softmax of the similarities of
    class i to every class, over the temperature); None when class similarities are off."""
    loss = feature.loss
    if getattr(loss, "class_similarities_temperature", 0) <= 0:
        return None
    rows = loss.class_similarities
    _check_class_count(feature, "class_similarities", f"a {len(rows)} x {len(rows)} matrix", len(rows), vocabulary)
    return torch.softmax(torch.tensor(rows, dtype=torch.float32) / loss.class_similarities_temperature, dim=-1)


def _check_class_count(feature, key: str, given: str, count: int, vocabulary: list[str]) -> None:
    if count == len(vocabulary):
        return
    # The vocabulary is known only after preprocessing, so this is checked here, not in the schema.
    shown = ", ".join(vocabulary[:10]) + (", ..." if len(vocabulary) > 10 else "")
    raise ConfigError(
        f"output_features.{feature.name}.loss.{key}: {given} for {len(vocabulary)} labels ({shown}); give one "
        f"per label in this order" + (", or a mapping from label to weight" if key == "class_weights" else "")
    )
