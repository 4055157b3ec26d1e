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

# Input metadata as preprocessing writes it (only the keys the model reads).
INPUT_METADATA = {
    "number": {},
    "binary": {},
    "category": {"vocabulary": CATEGORY_VOCAB},
    "text": {"vocabulary": TEXT_VOCAB, "sequence_length": SEQUENCE_LENGTH},
    "set": {"vocabulary": SET_VOCAB},
    "vector": {"vector_size": VECTOR_SIZE},
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
    if ftype == "text":
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
    raise ValueError(ftype)


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
