"""The encoder-combiner-decoder model: a plain ``nn.Module`` with no distributed code."""

from __future__ import annotations

import torch
from torch import nn

from plait.config.features import output_order
from plait.errors import ConfigError
from plait.models.base import TrainableModel, feature_name, module_key  # noqa: F401 (imported from here too)
from plait.models.combiners import build_combiner
from plait.models.encoders import build_encoders
from plait.models.heads import build_head

AUXILIARY_LOSS = "__plait_combiner_loss__"
"""The key of the combiner's loss term in the training forward's output. Feature names never take
it (ECD refuses one that does), so it cannot shadow an output's logits."""


class ECD(TrainableModel):
    def __init__(self, config, metadata: dict, load_pretrained: bool = False):
        """``load_pretrained``: read pretrained encoder weights from their files (a model built to
        start training; a model whose own weights are loaded next has no need)."""
        super().__init__()
        features = metadata["features"]
        self.input_names = [f.name for f in config.input_features]
        self.output_names = [f.name for f in config.output_features]
        if AUXILIARY_LOSS in self.output_names:
            raise ConfigError(f"output feature name {AUXILIARY_LOSS!r} is reserved by plait; rename the column")
        encoders = build_encoders(config.input_features, features, load_pretrained)
        self.encoders = nn.ModuleDict({module_key(f.name): encoders[f.name] for f in config.input_features})
        self.combiner = build_combiner(
            config.combiner,
            {f.name: getattr(e, "output_shape", (e.output_size,)) for f, e in zip(config.input_features,
                                                                                self.encoders.values())},
            {f.name: f.type for f in config.input_features})
        self.heads = nn.ModuleDict(self._build_heads(config.output_features, features))
        self.loss_weights = {f.name: f.loss.weight for f in config.output_features}
        # Outputs whose head reads its target in the training forward (a generator's teacher
        # forcing): training passes their targets along with the inputs.
        self.target_readers = [n for n in self.output_names if getattr(self.head(n), "reads_target", False)]
        # Token columns a batch may pad to its own longest row (plait.data.tensors.trim_padding):
        # inputs whose encoder reads only real tokens, and a generator's targets.
        self.batch_padded = [f.name for f in config.input_features
                             if f.type in ("text", "sequence") and f.preprocessing.padding == "right"
                             and getattr(self.encoder(f.name), "length_free", False)
                             ] + self.target_readers

    def _build_heads(self, outputs: list, features: dict) -> dict[str, nn.Module]:
        """One head per output, keyed by module_key and in config order; built (and later run) after
        the heads it depends on, whose hidden states it reads."""
        # A combiner whose output is a sequence per row says so by its output_shape: (steps, width).
        combined_shape = getattr(self.combiner, "output_shape", (self.combiner.output_size,))
        by_name = {f.name: f for f in outputs}
        self.head_order = output_order(outputs)
        self.dependencies = {f.name: list(f.dependencies) for f in outputs}
        heads: dict[str, nn.Module] = {}
        for name in self.head_order:
            dependency_size = sum(heads[d].hidden_size for d in self.dependencies[name])
            heads[name] = build_head(by_name[name], features[name], combined_shape, dependency_size)
        return {module_key(name): heads[name] for name in self.output_names}

    def encoder(self, name: str) -> nn.Module:
        """The encoder of input feature ``name`` (the user's name)."""
        return self.encoders[module_key(name)]

    def forward(self, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The logits of each output feature; in training mode, also the combiner's own loss term
        (TabNet's sparsity loss) under ``AUXILIARY_LOSS`` where it has one. It travels in the
        output, not in module state, so that DDP and FSDP see it as part of the forward's graph."""
        encoded, state = self.encoded(inputs)
        return self.decoded(encoded, state, targets=inputs if self.training else None)

    def decoded(self, encoded: dict[str, torch.Tensor], state=None, targets: dict[str, torch.Tensor] | None = None
                ) -> dict[str, torch.Tensor]:
        """The logits of each output from the inputs' encodings (``encoded``; ``state``: see
        ``encoded``): the part of ``forward`` after the encoders, which explanations run on
        interpolated encodings. ``targets``: in training, what a generator reads its targets from."""
        combined, auxiliary_loss = self.combiner(encoded)
        hidden, logits = {}, {}
        for name in self.head_order:
            dependencies = [hidden[d] for d in self.dependencies[name]]
            # A generator learns each step from the true previous token (teacher forcing).
            extra = {"target": targets[name]} if targets is not None and name in self.target_readers else {}
            if getattr(self.head(name), "reads_encoder_state", False):  # a U-Net decoder's skip connections
                extra["encoder_state"] = state
            hidden[name], logits[name] = self.head(name)(combined, dependencies, return_hidden=True, **extra)
        logits = {name: logits[name] for name in self.output_names}
        if auxiliary_loss is not None and self.training:
            logits[AUXILIARY_LOSS] = auxiliary_loss
        return logits

    def encoded(self, inputs: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], object]:
        """Each input's encoding, and the state of the encoder that returns one besides (a U-Net's
        skip connections, for its decoder; None when no encoder does)."""
        encoded, state = {}, None
        for name in self.input_names:
            encoder = self.encoder(name)
            encoded[name] = encoder(inputs[name])
            if getattr(encoder, "returns_state", False):
                encoded[name], state = encoded[name]
        return encoded, state

    def no_rows_outputs(self, device) -> dict[str, torch.Tensor]:
        """Each output's logits for zero rows (no batch to run), with the shapes and types a batch's have."""
        return {name: self.head(name)(torch.zeros(0, _input_size(self.head(name)), device=device))
                for name in self.output_names}

    def loss(self, logits: dict[str, torch.Tensor], targets: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
        """The weighted total loss (with the combiner's loss term, when the logits carry one) and
        each output's loss."""
        total, losses = super().loss(logits, targets)
        if AUXILIARY_LOSS in logits:
            total = total + logits[AUXILIARY_LOSS].float()
        return total, losses


def _input_size(head: nn.Module) -> int:
    """The width a head reads: what it says (a segmentation head), else its first linear layer's
    input (its decoder's, else its projection's)."""
    if getattr(head, "input_size", None):
        return head.input_size
    return next(m for m in head.modules() if isinstance(m, nn.Linear)).in_features
