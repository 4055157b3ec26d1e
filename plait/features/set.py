"""Set features: each cell a set of tokens (multi-label), encoded as a list of vocabulary ids."""

from __future__ import annotations

import pyarrow as pa

from plait.errors import DataError
from plait.features import stats as st
from plait.features.base import FeatureProcessor
from plait.features.text_ops import as_strings, encode_tokens, tokenize

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
        # Inputs keep an unknown id (0) for unseen elements; outputs drop them.
        vocab = tokens if self.is_output else [UNKNOWN] + tokens
        return {"vocabulary": vocab, "fill_value": self.fill_value(stats["cells"])}

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        tokens = self._tokens(self.fill(column, metadata["fill_value"]))
        flat, lengths = encode_tokens(tokens, metadata["vocabulary"], unknown=None if self.is_output else 0)
        offsets = pa.array(_offsets(lengths), pa.int32())
        return pa.ListArray.from_arrays(offsets, pa.array(flat, pa.int32()))


def _offsets(lengths):
    import numpy as np

    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
