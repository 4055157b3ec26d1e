"""TabNet (Arik and Pfister, 2019, arXiv:1908.07442), as the ``tabnet`` combiner.

At each of ``num_steps`` decision steps an attentive transformer chooses a sparse mask over the
(batch-normalized, concatenated) inputs from the previous step's attention features, scaled by
the prior ``P = prod(gamma - M)`` of how much each input has been used; a feature transformer
(gated linear blocks, the first ``num_shared_blocks`` of them sharing weights across steps)
turns the masked inputs into a decision part (``output_size`` wide, ReLU'd and summed over the
steps) and an attention part (``size`` wide, the next step's attention input). The sparsity loss
is the masks' mean entropy, weighted by ``sparsity``.
"""

from __future__ import annotations

import torch
from torch import nn

from plait.models.combiners.base import Combined, flat_inputs, flat_size
from plait.models.layers import GhostBatchNorm
from plait.models.combiners.sparse_attention import sparse_normalizer

ENTROPY_EPSILON = 1e-5  # inside the log of the entropy, so that masked-out (zero) inputs count zero


class GLUBlock(nn.Module):
    """Linear (no bias), ghost batch norm, gated linear unit. The linear map is the block's own,
    or (``linear`` None) one shared by every step, handed to ``forward``: a shared layer is
    registered once, in TabNet, since safetensors refuses a tensor saved under two names."""

    def __init__(self, linear: nn.Linear | None, width: int, norm: dict):
        super().__init__()
        self.linear = linear
        self.norm = GhostBatchNorm(2 * width, **norm)

    def forward(self, x: torch.Tensor, shared: nn.Linear | None = None) -> torch.Tensor:
        linear = self.linear if self.linear is not None else shared
        return nn.functional.glu(self.norm(linear(x)), dim=-1)


class FeatureTransformer(nn.Module):
    """Gated linear blocks, the first ``num_shared`` on the shared linear maps; from the second
    on, each adds its input, scaled by sqrt(1/2) so that the variance stays put."""

    def __init__(self, num_shared: int, input_size: int, width: int, total: int, norm: dict):
        super().__init__()
        self.blocks = nn.ModuleList(
            GLUBlock(None if i < num_shared else nn.Linear(input_size if i == 0 else width, 2 * width, bias=False),
                     width, norm)
            for i in range(total))

    def forward(self, x: torch.Tensor, shared: nn.ModuleList) -> torch.Tensor:
        linears = list(shared) + [None] * (len(self.blocks) - len(shared))
        x = self.blocks[0](x, linears[0])
        for block, linear in zip(self.blocks[1:], linears[1:]):
            x = (x + block(x, linear)) * 0.5**0.5
        return x


class AttentiveTransformer(nn.Module):
    """mask = sparsemax(prior * BN(linear(attention features)))."""

    def __init__(self, size: int, input_size: int, norm: dict, normalize):
        super().__init__()
        self.linear = nn.Linear(size, input_size, bias=False)
        self.norm = GhostBatchNorm(input_size, **norm)
        self.normalize = normalize

    def forward(self, attention: torch.Tensor, prior: torch.Tensor) -> torch.Tensor:
        logits = self.norm(self.linear(attention)) * prior
        return self.normalize(logits.float()).to(attention.dtype)


class TabNet(nn.Module):
    """The TabNet network over one input vector per row: [batch, input_size] -> [batch, output_size],
    with the sparsity loss and the masks."""

    def __init__(self, input_size: int, config):
        super().__init__()
        norm = {"virtual_batch_size": config.bn_virtual_bs, "momentum": config.bn_momentum,
                "epsilon": config.bn_epsilon}
        width = config.size + config.output_size
        self.decision_size = config.output_size
        self.num_steps = config.num_steps
        self.relaxation_factor = config.relaxation_factor
        self.input_norm = nn.BatchNorm1d(input_size, momentum=config.bn_momentum, eps=config.bn_epsilon)
        self.shared = nn.ModuleList(nn.Linear(input_size if i == 0 else width, 2 * width, bias=False)
                                    for i in range(config.num_shared_blocks))
        total = config.num_total_blocks
        # Step 0 only computes the first attention features; steps 1..num_steps decide.
        self.feature_transformers = nn.ModuleList(
            FeatureTransformer(len(self.shared), input_size, width, total, norm) for _ in range(config.num_steps + 1))
        normalize = sparse_normalizer(config.entmax_mode, config.entmax_alpha)
        self.attentive_transformers = nn.ModuleList(
            AttentiveTransformer(config.size, input_size, norm, normalize) for _ in range(config.num_steps))
        self.final_projection = nn.Linear(config.output_size, config.output_size)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(output [batch, output_size], entropy of the masks averaged over steps and rows,
        masks [num_steps, batch, input_size])."""
        if self.training and features.shape[0] == 1:
            features = nn.functional.batch_norm(features, self.input_norm.running_mean, self.input_norm.running_var,
                                                self.input_norm.weight, self.input_norm.bias, False, 0.0,
                                                self.input_norm.eps)
        else:
            features = self.input_norm(features)
        prior = torch.ones_like(features)
        attention = self.feature_transformers[0](features, self.shared)[:, self.decision_size:]
        decision = features.new_zeros(features.shape[0], self.decision_size)
        entropy = features.new_zeros(())
        masks = []
        for step in range(self.num_steps):
            mask = self.attentive_transformers[step](attention, prior)
            prior = prior * (self.relaxation_factor - mask)
            entropy = entropy + (-mask * torch.log(mask + ENTROPY_EPSILON)).sum(1).mean() / self.num_steps
            out = self.feature_transformers[step + 1](mask * features, self.shared)
            decision = decision + torch.relu(out[:, :self.decision_size])
            attention = out[:, self.decision_size:]
            masks.append(mask)
        return self.final_projection(decision), entropy, torch.stack(masks)


class TabNetCombiner(nn.Module):
    """Flattens and concatenates the encoder outputs, runs TabNet, adds the sparsity loss."""

    def __init__(self, input_shapes: dict[str, tuple], config, feature_types: dict[str, str] | None = None):
        super().__init__()
        self.tabnet = TabNet(sum(flat_size(s) for s in input_shapes.values()), config)
        self.dropout = nn.Dropout(config.dropout)
        self.sparsity = config.sparsity
        self.output_shape = (config.output_size,)
        self.output_size = config.output_size

    def forward(self, encoded: dict[str, torch.Tensor]) -> Combined:
        hidden, entropy, _ = self.tabnet(torch.cat(flat_inputs(encoded), dim=-1))
        loss = self.sparsity * entropy if self.sparsity else None
        return Combined(self.dropout(hidden), loss)

