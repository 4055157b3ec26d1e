"""Set features: each cell a set of tokens (multi-label), encoded as a list of vocabulary ids.

An output's items that training never saw are kept, as the id ``len(vocabulary)`` (once per
distinct item in a cell): no prediction can hold them, so evaluation counts them as missed rather
than scoring the row as if they were absent. Training ignores them (see ``SetHead.row_losses``).
"""

from __future__ import annotations

import pyarrow as pa

from plait.errors import DataError
from plait.features import stats as st
from plait.features.base import FeatureProcessor
from plait.features.text_ops import as_strings, encode_tokens, row_lists, tokenize

import pyarrow.compute as pc

UNKNOWN = "<UNK>"


class SetProcessor(FeatureProcessor):
    type = "set"

    def prepare(self, column: pa.Array) -> pa.Array:
        return as_strings(column)

    def _tokens(self, column: pa.Array) -> pa.ListArray:
        return tokenize(column, self.preprocessing.tokenizer, self.preprocessing.lowercase)

    def partial_stats(self, column: pa.Array) -> dict:
        mode = self.preprocessing.missing_value_strategy == "fill_with_mode"
        return {
            "counts": st.value_counts(pc.list_flatten(self._tokens(column))),
            "cells": st.value_counts(column) if mode else None,
        }

    def merge_stats(self, a: dict, b: dict) -> dict:
        return {key: st.merge_counts(a[key], b[key]) for key in a}

    def finalize(self, stats: dict) -> dict:
        tokens = [str(t) for t in st.most_common(stats["counts"], self.preprocessing.most_common) if t != UNKNOWN]
        if self.is_output and not tokens:
            # A head with no labels has nothing to learn, and its predictions cannot be named.
            raise DataError(
                f"set output feature {self.name!r}: column {self.column!r} holds no labels (every set in the "
                f"training data is empty or missing). Give rows with at least one label, or drop the feature."
            )
        # Inputs keep an unknown id (0) for unseen elements; outputs mark them past the vocabulary.
        vocab = tokens if self.is_output else [UNKNOWN] + tokens
        return {"vocabulary": vocab, "fill_value": self.fill_value(stats["cells"])}

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        tokens = self._tokens(self.fill(column, metadata["fill_value"]))
        vocabulary = metadata["vocabulary"]
        if self.is_output:
            flat, lengths = _distinct_unseen(*encode_tokens(tokens, vocabulary, unknown=len(vocabulary)), tokens, len(vocabulary))
        else:
            flat, lengths = encode_tokens(tokens, vocabulary, unknown=0)
        return row_lists(flat, lengths, pa.int32())


def _distinct_unseen(flat, lengths, tokens: pa.ListArray, unseen_id: int):
    """Encoded ids and row lengths with each row's unseen items (``unseen_id``) kept once per
    distinct item: a set holds an item once, so "z z" misses one item, as "a a" holds one."""
    import numpy as np

    unseen = flat == unseen_id
    if not unseen.any():
        return flat, lengths
    rows = np.repeat(np.arange(len(lengths)), lengths)
    # The same flattening encode_tokens made, so positions line up with ``flat``.
    items = pc.list_flatten(tokens).filter(pa.array(unseen))
    codes = pc.dictionary_encode(items).indices.to_numpy().astype(np.int64)
    _, first = np.unique(rows[unseen] * (int(codes.max()) + 1) + codes, return_index=True)
    keep = ~unseen
    keep[np.flatnonzero(unseen)[first]] = True
    return flat[keep], np.bincount(rows[keep], minlength=len(lengths)).astype(np.int64)
