"""Feature processors by type. Adding a feature type is one module and one line here."""

from __future__ import annotations

import os
from typing import Any

from plait.features.base import FeatureProcessor
from plait.features.audio import AudioProcessor
from plait.features.bag import BagProcessor
from plait.features.binary import BinaryProcessor
from plait.features.category import CategoryProcessor
from plait.features.category_distribution import CategoryDistributionProcessor
from plait.features.date import DateProcessor
from plait.features.h3 import H3Processor
from plait.features.image import ImageProcessor
from plait.features.number import NumberProcessor
from plait.features.set import SetProcessor
from plait.features.text import SequenceProcessor, TextProcessor
from plait.features.timeseries import TimeseriesProcessor
from plait.features.vector import VectorProcessor

PROCESSORS: dict[str, type[FeatureProcessor]] = {
    cls.type: cls
    for cls in (BinaryProcessor, NumberProcessor, CategoryProcessor, TextProcessor, SetProcessor, VectorProcessor,
                SequenceProcessor, CategoryDistributionProcessor, TimeseriesProcessor,
                AudioProcessor, DateProcessor, H3Processor, BagProcessor, ImageProcessor)
}


def processors_for(config, directory: str | None = None) -> list[FeatureProcessor]:
    """One processor per feature of a :class:`~plait.config.PlaitConfig`, inputs first (an LLM's
    prompt and target); ``directory`` is where relative file paths in the data are read from
    (``data_directory``)."""
    if config.model_type == "llm":
        from plait.features.llm import llm_processors

        return llm_processors(config, directory)
    inputs = [PROCESSORS[f.type](f, is_output=False) for f in config.input_features]
    outputs = [PROCESSORS[f.type](f, is_output=True) for f in config.output_features]
    for processor in inputs + outputs:
        processor.data_directory = directory
    return inputs + outputs


def data_directory(data: Any) -> str | None:
    """The folder of a dataset given as a path or URL (a folder of files: that folder); None for
    data in memory."""
    if not isinstance(data, (str, os.PathLike)):
        return None
    path = os.fspath(data)
    if "://" in path:
        return path.rstrip("/") if path.endswith("/") else path.rsplit("/", 1)[0]
    path = os.path.abspath(os.path.expanduser(path))
    return path if os.path.isdir(path) else os.path.dirname(path)


__all__ = ["FeatureProcessor", "PROCESSORS", "processors_for"]
