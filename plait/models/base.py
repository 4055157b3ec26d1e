"""What training, evaluation and prediction use of a model, whatever its kind.

The training loop, the strategies, the metrics and the predictor know a model only through this
surface; ECD and the LLM both declare it (each subclasses :class:`TrainableModel`), so none of
them asks which kind of model it holds.
"""

from __future__ import annotations

import torch
from torch import nn


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

    def loss(self, logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
        """The weighted total loss and each output's loss."""
        raise NotImplementedError

    def no_rows_outputs(self, device) -> dict[str, torch.Tensor]:
        """Each output's logits for zero rows, with the shapes and types a batch's have."""
        raise NotImplementedError
