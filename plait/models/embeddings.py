"""Embedding tables for vocabularies (category, set and text inputs), as Ludwig builds them:
dense (learned, at most as wide as the vocabulary) or sparse (fixed one-hot), optionally started
from a GloVe-format file of pretrained vectors."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from plait.errors import ModelError
from plait.models.layers import initialize


def embedding_table(vocabulary: list[str], size: int, representation: str = "dense", trainable: bool = True,
                    pretrained: str | None = None, initializer=None, path: str = "encoder") -> nn.Embedding:
    """The table: [vocabulary size, width]. Dense width: ``size`` (Ludwig caps it at the
    vocabulary size; plait gives the width asked for), or the pretrained vectors' width; sparse:
    the one-hot identity, fixed unless ``trainable``."""
    vocab_size = len(vocabulary)
    if representation == "sparse":
        weights = torch.eye(vocab_size)
    elif pretrained:
        weights = torch.from_numpy(load_pretrained(pretrained, vocabulary, path))
    else:
        weights = torch.empty(vocab_size, size)
        if initializer is None:
            nn.init.normal_(weights)
        else:
            initialize(weights, initializer)
    return nn.Embedding.from_pretrained(weights, freeze=not trainable)


def load_pretrained(file: str, vocabulary: list[str], path: str = "encoder") -> np.ndarray:
    """The rows of a GloVe-format file (a word, then its vector, per line) for ``vocabulary``;
    words the file lacks get random vectors of the same scale."""
    vectors: dict[str, np.ndarray] = {}
    wanted = set(vocabulary)
    try:
        with open(file, encoding="utf-8") as lines:
            for line in lines:
                word, _, rest = line.rstrip().partition(" ")
                if word in wanted:
                    vectors[word] = np.array(rest.split(), dtype=np.float32)
    except OSError as err:
        raise ModelError(f"{path}.pretrained_embeddings: cannot read {file!r} ({err}); give the path of a "
                         f"GloVe-format text file") from None
    widths = {v.shape[0] for v in vectors.values()}
    if len(widths) != 1:
        raise ModelError(f"{path}.pretrained_embeddings: {file!r} has " + (
            "no vector for any word of the vocabulary" if not widths else f"vectors of several widths {sorted(widths)}")
            + "; give a GloVe-format file (a word and its numbers per line) covering the vocabulary")
    known = np.stack(list(vectors.values()))
    rng = np.random.default_rng(0)
    table = rng.normal(0.0, float(known.std()) or 1.0, (len(vocabulary), known.shape[1])).astype(np.float32)
    for i, word in enumerate(vocabulary):
        if word in vectors:
            table[i] = vectors[word]
    return table
