"""Feature processors by type. Adding a feature type is one module and one line here."""

from __future__ import annotations

from plait.features.base import FeatureProcessor
from plait.features.audio import AudioProcessor
from plait.features.bag import BagProcessor
from plait.features.binary import BinaryProcessor
from plait.features.category import CategoryProcessor
from plait.features.category_distribution import CategoryDistributionProcessor
from plait.features.date import DateProcessor
from plait.features.h3 import H3Processor
from plait.features.number import NumberProcessor
from plait.features.set import SetProcessor
from plait.features.text import SequenceProcessor, TextProcessor
from plait.features.timeseries import TimeseriesProcessor
from plait.features.vector import VectorProcessor

PROCESSORS: dict[str, type[FeatureProcessor]] = {
    cls.type: cls
    for cls in (BinaryProcessor, NumberProcessor, CategoryProcessor, TextProcessor, SetProcessor, VectorProcessor,
                SequenceProcessor, CategoryDistributionProcessor, TimeseriesProcessor,
                AudioProcessor, DateProcessor, H3Processor, BagProcessor)
}


def processors_for(config) -> list[FeatureProcessor]:
    """One processor per feature of a :class:`~plait.config.PlaitConfig`, inputs first."""
    inputs = [PROCESSORS[f.type](f, is_output=False) for f in config.input_features]
    outputs = [PROCESSORS[f.type](f, is_output=True) for f in config.output_features]
    return inputs + outputs


__all__ = ["FeatureProcessor", "PROCESSORS", "processors_for"]
