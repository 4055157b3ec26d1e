"""Every output type's head, and the head an output feature gets (by its type, and for sequence
and text outputs by its decoder)."""

from __future__ import annotations

from plait.models.outputs import (BinaryHead, CategoryDistributionHead, CategoryHead, NumberHead, OutputHead,
                                  SetHead, TimeseriesHead, VectorHead)
from plait.models.image_heads import SegmentationHead
from plait.models.sequence_heads import GeneratorHead, TaggerHead

HEADS = {"binary": BinaryHead, "category": CategoryHead, "number": NumberHead, "set": SetHead, "vector": VectorHead,
         "category_distribution": CategoryDistributionHead, "timeseries": TimeseriesHead, "image": SegmentationHead}
SEQUENCE_HEADS = {"tagger": TaggerHead, "generator": GeneratorHead}
"""The heads of sequence and text outputs, by decoder."""


def build_head(feature, metadata: dict, input_shape: int | tuple[int, ...], dependency_size: int = 0) -> OutputHead:
    """The head of output ``feature``: ``input_shape`` is the combiner's output per row, (width,) or
    (steps, width); ``dependency_size`` the total width of the hidden states it depends on."""
    if feature.type in ("sequence", "text"):
        return SEQUENCE_HEADS[feature.decoder.type](feature, metadata, input_shape, dependency_size)
    return HEADS[feature.type](feature, metadata, input_shape, dependency_size)
