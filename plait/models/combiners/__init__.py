"""Combiners merge the encoder outputs into one hidden representation per row.

One module per combiner type, registered in ``COMBINERS`` by the name the config's
``combiner.type`` uses. A combiner is an ``nn.Module`` built from its config section, the
encoders' output shapes by input feature name (in input-feature order: ``(width,)`` for a vector
output, ``(length, width)`` for a sequence) and the input features' types. ``forward`` takes the
encoder outputs by name in the same order and returns a ``Combined`` (the hidden representation
and an optional loss term); ``output_shape`` is the hidden's shape past the batch, and
``output_size`` its last dimension.
"""

from __future__ import annotations

from torch import nn

from plait.models.combiners.base import Combined
from plait.models.combiners.comparator import ComparatorCombiner
from plait.models.combiners.concat import ConcatCombiner
from plait.models.combiners.project_aggregate import ProjectAggregateCombiner
from plait.models.combiners.sequence import SequenceCombiner, SequenceConcatCombiner
from plait.models.combiners.tabnet import TabNetCombiner
from plait.models.combiners.tabtransformer import TabTransformerCombiner
from plait.models.combiners.transformer import FTTransformerCombiner, TransformerCombiner

COMBINERS = {
    "concat": ConcatCombiner, "transformer": TransformerCombiner, "ft_transformer": FTTransformerCombiner,
    "tabnet": TabNetCombiner, "tabtransformer": TabTransformerCombiner, "comparator": ComparatorCombiner,
    "project_aggregate": ProjectAggregateCombiner, "sequence_concat": SequenceConcatCombiner,
    "sequence": SequenceCombiner,
}

__all__ = ["COMBINERS", "Combined", "build_combiner"]


def build_combiner(config, input_shapes: dict[str, tuple], feature_types: dict[str, str] | None = None) -> nn.Module:
    """The combiner of section ``config`` over encoders with these output shapes (by name)."""
    shapes = {name: tuple(shape) for name, shape in input_shapes.items()}
    return COMBINERS[config.type](shapes, config, feature_types)
