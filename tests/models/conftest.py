"""Shared helpers for model tests: feature configs through load_config, metadata and batches."""

from __future__ import annotations

import pytest
import torch

from plait.config import load_config

TEXT_VOCAB = ["<PAD>", "<UNK>", "the", "cat", "sat", "on", "a", "mat"]
SET_VOCAB = ["<UNK>", "red", "green", "blue"]
CATEGORY_VOCAB = ["<UNK>", "a", "b", "c"]
SEQUENCE_LENGTH = 6
VECTOR_SIZE = 5
AUDIO_CHANNELS = 3

# Input metadata as preprocessing writes it (only the keys the model reads).
INPUT_METADATA = {
    "number": {},
    "binary": {},
    "category": {"vocabulary": CATEGORY_VOCAB},
    "text": {"vocabulary": TEXT_VOCAB, "sequence_length": SEQUENCE_LENGTH},
    "sequence": {"vocabulary": TEXT_VOCAB, "sequence_length": SEQUENCE_LENGTH},
    "set": {"vocabulary": SET_VOCAB},
    "vector": {"vector_size": VECTOR_SIZE},
    "date": {"year_range": [1970, 2033]},
    "h3": {},
    "bag": {"vocabulary": SET_VOCAB},
    "timeseries": {"timeseries_length": SEQUENCE_LENGTH, "padding_value": 0.0},
    "audio": {"frames": SEQUENCE_LENGTH, "channels": AUDIO_CHANNELS, "padding_value": 0.0},
}


def input_batch(ftype: str, rows: int, seed: int = 0) -> torch.Tensor:
    """A model-ready batch for one input feature, with edge rows (all padding, the empty set)."""
    g = torch.Generator().manual_seed(seed)
    if ftype == "number":
        return torch.randn(rows, generator=g)
    if ftype == "binary":
        return torch.randint(0, 2, (rows,), generator=g).float()
    if ftype == "category":
        return torch.randint(0, len(CATEGORY_VOCAB), (rows,), generator=g)
    if ftype in ("text", "sequence"):
        tokens = torch.randint(1, len(TEXT_VOCAB), (rows, SEQUENCE_LENGTH), generator=g)
        tokens[:, 4:] = 0  # padding at the end
        tokens[0] = 0  # an empty text: only padding
        return tokens
    if ftype == "set":
        multi_hot = torch.randint(0, 2, (rows, len(SET_VOCAB)), generator=g).float()
        multi_hot[0] = 0  # the empty set
        return multi_hot
    if ftype == "vector":
        return torch.randn(rows, VECTOR_SIZE, generator=g)
    if ftype in ("date", "h3", "bag"):
        return _date_h3_bag_batch(ftype, rows, g)
    if ftype in ("timeseries", "audio"):
        steps = torch.randn(rows, SEQUENCE_LENGTH, *([AUDIO_CHANNELS] if ftype == "audio" else []), generator=g)
        steps[:, 4:] = float("nan")  # padding at the end, as preprocessing stores it
        steps[0] = float("nan")  # a missing value: only padding
        return steps
    raise ValueError(ftype)


def _date_h3_bag_batch(ftype: str, rows: int, g: torch.Generator) -> torch.Tensor:
    """Dates' nine parts and H3 cells' nineteen, made by the features' own functions; bags of
    counts (the first row empty)."""
    import numpy as np
    import pyarrow as pa

    if ftype == "date":
        from plait.features.date import components

        seconds = torch.randint(0, 2_000_000_000, (rows,), generator=g).numpy()
        return torch.from_numpy(components(pa.array(seconds, pa.timestamp("s"))).astype(np.int64))
    if ftype == "h3":
        from plait.features.h3 import index_components

        resolution = torch.randint(0, 16, (rows,), generator=g).numpy()
        digits = np.where(np.arange(1, 16) <= resolution[:, None], torch.randint(0, 7, (rows, 15), generator=g).numpy(), 7)
        index = (1 << 59) | (resolution.astype(np.int64) << 52) | (torch.randint(0, 122, (rows,), generator=g).numpy() << 45)
        index = index | (digits.astype(np.int64) << (42 - 3 * np.arange(15))).sum(1)
        return torch.from_numpy(index_components(index))
    counts = torch.randint(0, 3, (rows, len(SET_VOCAB)), generator=g).float()
    counts[0] = 0  # an empty bag
    return counts


def make_plait_config(inputs: list[dict] | None = None, outputs: list[dict] | None = None, **sections):
    """A validated PlaitConfig (defaults filled in) from feature dicts."""
    return load_config({
        "input_features": inputs or [{"name": "x", "type": "number"}],
        "output_features": outputs or [{"name": "y", "type": "binary"}],
        **sections,
    })


@pytest.fixture
def plait_config():
    """plait_config(inputs=None, outputs=None, **sections) -> a PlaitConfig."""
    return make_plait_config


@pytest.fixture
def make_input_batch():
    """make_input_batch(type, rows, seed=0) -> a model-ready batch for one input feature."""
    return input_batch


@pytest.fixture
def input_metadata():
    """Input feature metadata by feature type."""
    return INPUT_METADATA
