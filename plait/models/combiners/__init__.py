"""Combiners merge the encoder outputs into one hidden vector per row.

One module per combiner type, registered in ``COMBINERS`` by the name the config's
``combiner.type`` uses. A combiner is an ``nn.Module`` built from its config section and the
encoders' output sizes (in input-feature order); ``forward`` takes the encoder outputs in the same
order and returns [batch, output_size], and ``output_size`` says that width.
"""

from __future__ import annotations

from torch import nn

from plait.models.combiners.concat import ConcatCombiner
from plait.models.combiners.transformer import TransformerCombiner

COMBINERS = {"concat": ConcatCombiner, "transformer": TransformerCombiner}


def build_combiner(config, input_sizes: list[int]) -> nn.Module:
    return COMBINERS[config.type](input_sizes, config)
